#!/usr/bin/env python3
"""Summary table and goal check for bench/run.sh.

Usage: summarize.py RESULTS_DIR   (reads latest.tsv, machine.txt, login_log_counts.tsv and
server_latency.tsv there)
Prints a Markdown table of every measurement and the goals, met or missed, per engine.

Goals (docs/performance.md):
  G1  GET /health reaches >= 80% of nginx's requests/s (-t2 -c64, measured back to back).
  G3  during the login flood, GET /health and GET /users/me keep p99 <= 10 ms and at least a
      quarter of their throughput on the quiet server at the same wrk settings (-t1 -c4).
  36.2  reads at a share of GET /health's requests/s (the mean of its rounds in the same
      engine's run), issue 36 item 2: GET /users/me 0.7x on SQLite and 0.55x on PostgreSQL;
      GET /jobs/:id, GET /quotes/job/:jobId, GET /users/me/notifications and a page of
      GET /jobs/:id/messages 0.5x. A read with an answer that is not 2xx (wrk's count of answers
      >= 400 in the measured run, or any other status in the server's access log over its warm-up
      and run: read_statuses.tsv), a socket error or no request answered is FAILED: its figures
      are not shown and its goal is not met. The ratios, the goal and met (yes/NO) also go into
      latest.tsv, as its columns vs_health_rps, vs_health_cpu, goal and met ("-" on other rows).
Beside each measurement: the server's CPU time per request (utime + stime of the serving
processes over the wrk run, over the requests served; not measured for the probes during the
flood, which share the server with it) and its ratio to GET /health's on the same engine.
The p99 goals are judged on wrk's figures, which count a stall of S ms on a connection as
the S / (usual interval) requests it did not send (coordinated-omission correction); beside
them stand the server's own p99 (access log) and bench/probe.c's (the requests made).
"""
import re
import csv
import os
import sys

NGINX_RATIO = 0.80
FLOOD_P99_MS = 10.0
FLOOD_RATIO = 0.25

# issue 36 item 2: (scenario, label, goal: a share of GET /health's req/s, or one per engine)
READS = [
    ("users_me", "GET /users/me", {"sqlite": 0.70, "postgres": 0.55}),
    ("job_detail", "GET /jobs/:id", 0.5),
    ("job_quotes", "GET /quotes/job/:jobId (5 quotes)", 0.5),
    ("notifications", "GET /users/me/notifications (the default: last 50)", 0.5),
    ("messages_page", "GET /jobs/:id/messages?providerId&limit=50 (a full page)", 0.5),
]
EXTRA_COLS = ["vs_health_rps", "vs_health_cpu", "goal", "met"]  # written into latest.tsv

LABELS = {
    "nginx_static": ("nginx static 200", "-t2 -c64"),
    "health": ("GET /health", "-t2 -c64"),
    "users_me": ("GET /users/me (baseline)", "-t2 -c64"),
    "health_c4_quiet": ("GET /health, quiet", "-t1 -c4"),
    "users_me_c4_quiet": ("GET /users/me, quiet", "-t1 -c4"),
    "login_flood": ("POST /auth/login flood", "-t2 -c32"),
    "health_c4_flood": ("GET /health during flood", "-t1 -c4"),
    "users_me_c4_flood": ("GET /users/me during flood", "-t1 -c4"),
    "users_me_c4_flood_checked": ("GET /users/me during flood, bench/probe.c", "probe -c4"),
}


def cpu_us(r):
    """The server's CPU time per request of a row, in microseconds (None when not measured)."""
    v = r.get("cpu_us_per_req") or "-"
    return None if v == "-" else float(v)


def merge_rounds(rs):
    """One row for several rounds of a measurement: mean requests/s, median p99, summed counts."""
    if len(rs) == 1:
        return rs[0]
    m = dict(rs[-1])
    m["rps"] = str(sum(float(r["rps"]) for r in rs) / len(rs))
    m["p99_ms"] = str(sorted(float(r["p99_ms"]) for r in rs)[len(rs) // 2])
    m["duration_s"] = str(sum(float(r["duration_s"]) for r in rs))
    cpus = [cpu_us(r) for r in rs]
    m["cpu_us_per_req"] = str(sum(cpus) / len(cpus)) if None not in cpus else "-"
    for k in ("requests", "non2xx", "socket_errors"):
        m[k] = str(sum(int(r[k] or 0) for r in rs))
    return m


def main(results):
    with open(os.path.join(results, "latest.tsv")) as f:
        reader = csv.DictReader(f, delimiter="\t")
        rows = list(reader)
        columns = [c for c in reader.fieldnames if c not in EXTRA_COLS]  # a second pass recomputes them
    read_statuses = {}  # (engine, scenario) -> {status: count}: the reads' answers in the server's log
    path = os.path.join(results, "read_statuses.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 4:
                st = read_statuses.setdefault((parts[0], parts[1]), {})
                st[parts[2]] = st.get(parts[2], 0) + int(parts[3])
    machine = {}
    path = os.path.join(results, "machine.txt")
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.partition(":")
            machine[k.strip()] = v.strip()
    log_counts = {}
    path = os.path.join(results, "login_log_counts.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 3:
                log_counts.setdefault(parts[0], []).append(f"{parts[1]}: {parts[2]}")

    server = {}  # (engine, route) -> (p50, p99) of the flood probes, from the server's access log
    path = os.path.join(results, "server_latency.tsv")
    if os.path.exists(path):
        for line in open(path):
            parts = line.split()
            if len(parts) == 4 and parts[2] != "-":
                server[(parts[0], parts[1])] = (float(parts[2]), float(parts[3]))
    by = {}  # (engine, scenario) -> its row; several rounds of one scenario become one row
    rounds = {}  # (engine, scenario) -> requests/s of each round
    for r in rows:
        key = (r["engine"], r["scenario"])
        rounds.setdefault(key, []).append(float(r["rps"]))
        by.setdefault(key, []).append(r)
    by = {key: merge_rounds(rs) for key, rs in by.items()}

    def canary_ms(e, s):  # how long bench/probe.c's canary thread was kept off the CPU at most
        try:
            with open(os.path.join(results, "raw", f"{e}-{s}.txt")) as f:
                m = re.search(r"canary_max_ms=([0-9.]+)", f.read())
            return float(m.group(1)) if m else None
        except OSError:
            return None
    engines = list(dict.fromkeys(r["engine"] for r in rows))

    def rps(e, s):
        r = by.get((e, s))
        return float(r["rps"]) if r else None

    def p99(e, s):
        r = by.get((e, s))
        return float(r["p99_ms"]) if r else None

    def read_verdict(e, s, goal):
        """Read s on engine e against GET /health's req/s (None when not measured)."""
        r = by.get((e, s))
        if not r:
            return None
        goal = goal.get(e, 0.5) if isinstance(goal, dict) else goal
        failure = []
        if int(r["non2xx"] or 0):
            failure.append(f"{int(r['non2xx']):,} answers >= 400 (wrk)")
        logged = read_statuses.get((e, s), {})
        bad = {k: n for k, n in logged.items() if not k.startswith("2")}
        if bad:
            failure.append("server log " + ", ".join(f"{k}: {n:,}" for k, n in sorted(bad.items())))
        if int(r["socket_errors"] or 0):
            failure.append(f"{int(r['socket_errors']):,} socket errors")
        if not int(r["requests"] or 0):
            failure.append("no request answered")
        h_rps = rps(e, "health")
        h_cpu = cpu_us(by[(e, "health")]) if (e, "health") in by else None
        cpu = cpu_us(r)
        v = {"goal": goal, "failure": "; ".join(failure), "ratio": None, "cpu_ratio": None, "met": False,
             "answers": ", ".join(f"{k}: {n:,}" for k, n in sorted(logged.items())) or "-"}
        if not failure and h_rps:
            v["ratio"] = float(r["rps"]) / h_rps
            v["cpu_ratio"] = cpu / h_cpu if cpu is not None and h_cpu else None
            v["met"] = v["ratio"] >= goal
        return v

    verdicts = {(e, s): read_verdict(e, s, goal) for e in engines for s, _, goal in READS if (e, s) in by}

    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    out = []
    out.append(f"Benchmark {machine.get('date', '?')}: {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
               f"commit {machine.get('commit', '?')}; CPU idle before/after the run: "
               f"{machine.get('idle before run', '?')}/{machine.get('idle after run', '?')}")
    out.append("")
    out.append("| engine | measurement | wrk | req/s | p99 ms | CPU µs/req | CPU / health | errors | compared with "
               "| ratio |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |")
    goals = []
    for e in engines:
        for s, (label, wrk) in LABELS.items():
            r = by.get((e, s))
            if not r:
                continue
            errors = []
            if r["non2xx"] not in ("0", ""):
                errors.append(f"non-2xx {r['non2xx']}")
            if r["socket_errors"] not in ("0", ""):
                errors.append(f"socket {r['socket_errors']}")
            compared, ratio = "", ""
            if s == "health" and rps(e, "nginx_static"):
                compared, ratio = "nginx", f"{rps(e, s) / rps(e, 'nginx_static'):.2f}"
            elif s.endswith("_c4_flood"):
                quiet = s.replace("_flood", "_quiet")
                base64 = s.replace("_c4_flood", "")
                if rps(e, quiet):
                    compared = "quiet -c4"
                    ratio = f"{rps(e, s) / rps(e, quiet):.2f}"
                    if rps(e, base64):
                        compared += " (-c64)"
                        ratio += f" ({rps(e, s) / rps(e, base64):.2f})"
            if s == "login_flood":
                statuses = r["statuses"].replace(",", ", ").replace("=", ": ")
                errors = [f"answers {statuses}"] + [x for x in errors if not x.startswith("non-2xx")]
                if e in log_counts:
                    errors.append("server log " + ", ".join(log_counts[e]))
            n = len(rounds[(e, s)])
            if n > 1:  # "mean of 3 x 10s", each round's rate after the label
                label += " (" + " / ".join(f"{x:,.0f}" for x in rounds[(e, s)]) + ")"
                wrk += f" {n}x{float(r['duration_s']) / n:.0f}s"
            else:
                wrk += f" {float(r['duration_s']):.0f}s"
            cpu, health_cpu = cpu_us(r), cpu_us(by[(e, "health")]) if (e, "health") in by else None
            cpu_cells = (f"{cpu:.1f} | {cpu / health_cpu:.2f}" if cpu is not None and health_cpu
                         else f"{'-' if cpu is None else f'{cpu:.1f}'} | -")
            out.append(f"| {e} | {label} | {wrk} | {float(r['rps']):,.0f} | "
                       f"{float(r['p99_ms']):.2f} | {cpu_cells} | {'; '.join(errors) or '-'} | {compared} | {ratio} |")
        # goals
        if rps(e, "health") and rps(e, "nginx_static"):
            ratio = rps(e, "health") / rps(e, "nginx_static")
            goals.append((e, f"GET /health >= {NGINX_RATIO:.0%} of nginx req/s", f"{ratio:.0%}", ratio >= NGINX_RATIO))
        for s, name, route in (("health_c4_flood", "GET /health", "/health"),
                               ("users_me_c4_flood", "GET /users/me", "/users/me")):
            quiet = s.replace("_flood", "_quiet")
            if rps(e, s) is None or not rps(e, quiet):
                continue
            ratio = rps(e, s) / rps(e, quiet)
            # wrk leaves requests that time out (or fail) out of its latency histogram, so a
            # p99 only counts when every request was answered
            r = by[(e, s)]
            lost = int(r["socket_errors"] or 0)
            measured = f"{p99(e, s):.2f} ms" + (f" + {lost} timeouts/errors" if lost else "")
            if (e, route) in server:
                measured += f" (server-side {server[(e, route)][1]:.2f} ms)"
            checked = by.get((e, s + "_checked"))
            if checked:
                measured += f"; bench/probe.c {float(checked['p99_ms']):.2f} ms, max {float(checked['max_ms']):.0f} ms"
                held = canary_ms(e, s + "_checked")
                if held:
                    measured += f" (the probe itself held off the CPU up to {held:.0f} ms)"
            ok_p99 = p99(e, s) <= FLOOD_P99_MS and lost == 0 and int(r["requests"] or 0) > 0
            goals.append((e, f"{name} during flood: p99 <= {FLOOD_P99_MS:g} ms", measured, ok_p99))
            goals.append((e, f"{name} during flood: >= {FLOOD_RATIO:.0%} of quiet req/s", f"{ratio:.0%}",
                          ratio >= FLOOD_RATIO))
        for s, name, _ in READS:
            v = verdicts.get((e, s))
            if v:
                measured = (f"FAILED: {v['failure']}" if v["failure"] else
                            f"{fmt(v['ratio'], '.2f')}x (CPU {fmt(v['cpu_ratio'], '.2f')}x /health's)")
                goals.append((e, f"{name} >= {v['goal']:g}x GET /health req/s", measured, v["met"]))
    if verdicts:
        out.append("")
        out.append("Reads against GET /health (issue 36 item 2), -t2 -c64 as the job's customer. x /health: the "
                   "read's req/s and CPU µs/req over the means of GET /health's rounds in the same engine's run. "
                   "answers: their statuses in the server's access log, warm-up included (step 2's /users/me: wrk's "
                   "count alone).")
        out.append("")
        out.append("| engine | read | wrk | req/s | p99 ms | CPU µs/req | x /health req/s | x /health CPU | answers "
                   "| goal | met |")
        out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
        for e in engines:
            for s, label, _ in READS:
                v = verdicts.get((e, s))
                if not v:
                    continue
                r = by[(e, s)]
                wrk = f"-t{r['threads']} -c{r['conns']} {float(r['duration_s']):.0f}s"
                goal = f">= {v['goal']:g}x /health"
                if v["failure"]:
                    out.append(f"| {e} | {label} | {wrk} | FAILED | - | - | - | - | {v['failure']}; {v['answers']} "
                               f"| {goal} | NO (failed) |")
                    continue
                out.append(f"| {e} | {label} | {wrk} | {float(r['rps']):,.0f} | {float(r['p99_ms']):.2f} | "
                           f"{fmt(cpu_us(r), '.1f')} | {fmt(v['ratio'], '.2f')} | {fmt(v['cpu_ratio'], '.2f')} | "
                           f"{v['answers']} | {goal} | {'yes' if v['met'] else 'NO'} |")
    out.append("")
    out.append("| engine | goal | measured | result |")
    out.append("| --- | --- | ---: | --- |")
    for e, goal, measured, ok in goals:
        result = "met" if ok else "FAILED" if measured.startswith("FAILED") else "MISSED"
        out.append(f"| {e} | {goal} | {measured} | {result} |")
    met = sum(1 for g in goals if g[3])
    out.append("")
    out.append(f"goals met: {met} of {len(goals)}")
    print("\n".join(out))

    # the reads' judgement beside their rows in latest.tsv
    for r in rows:
        v = verdicts.get((r["engine"], r["scenario"]))
        if not v:
            r.update(dict.fromkeys(EXTRA_COLS, "-"))
            continue
        r["vs_health_rps"] = "failed" if v["failure"] else fmt(v["ratio"], ".3f")
        r["vs_health_cpu"] = "failed" if v["failure"] else fmt(v["cpu_ratio"], ".3f")
        r["goal"] = f">={v['goal']:g}x"
        r["met"] = "yes" if v["met"] else "NO"
    with open(os.path.join(results, "latest.tsv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns + EXTRA_COLS, delimiter="\t", lineterminator="\n",
                           extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results"))
