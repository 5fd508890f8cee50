#!/usr/bin/env python3
"""Ratio table and goal check for bench/peer.sh (issue 12).

Usage: summarize_peer.py RESULTS_DIR   (reads latest.tsv, rss.tsv, bytes.tsv, errors5xx.tsv and
machine.txt there)

Rounds of one scenario are averaged (requests/s) and their worst p99 is kept. Goals:
  1. feed (SQLite) >= 4x the peer's requests/s, p99 <= 50 ms; feed on PostgreSQL >= 0.7x the
     feed on SQLite;
  2. GET /users/me (SQLite) >= 4x the peer's;
  3. GET /jobs/:id >= 0.5x GET /users/me, on each engine;
  4. POST /quotes >= 5,000/s on SQLite and 3,000/s on PostgreSQL, no 5xx;
  6. peak RSS reported for each measurement (the 10-minute soak is bench/soak.sh);
  issue 37, 2. POST /quotes on SQLite >= 2x the peer's, p99 <= 20 ms (answers 201 only).
Every measurement also shows the server's CPU µs per request (for the peer, its processes
together) and its ratio to GET /health's (issue 36, 3).
Goal 5 (the p50 growth from 10,000 to 1,000,000 jobs) is bench/jobs.sh's.
"""
import csv
import os
import sys

NAMES = {"health": "GET /health", "users_me": "GET /users/me",
         "feed": "GET /jobs, provider feed of 200 jobs", "job_detail": "GET /jobs/:id (owner, 3 quotes)",
         "quotes": "POST /quotes (a new quote each)"}


def read_tsv(path, names=None):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t", fieldnames=names))


def main(results):
    rows = read_tsv(os.path.join(results, "latest.tsv"))
    machine = {}
    for line in open(os.path.join(results, "machine.txt")):
        k, _, v = line.partition(":")
        machine[k.strip()] = v.strip()
    rss = {}
    for r in read_tsv(os.path.join(results, "rss.tsv"), ["engine", "scenario", "hwm", "now"]):
        key = (r["engine"], r["scenario"])
        rss[key] = max(rss.get(key, 0), int(r["hwm"]))
    size = {(r["engine"], r["scenario"]): int(r["bytes"])
            for r in read_tsv(os.path.join(results, "bytes.tsv"), ["engine", "scenario", "bytes"])}
    fivexx = {r["engine"]: int(r["n"] or 0) for r in read_tsv(os.path.join(results, "errors5xx.tsv"), ["engine", "n"])}

    runs = {}
    for r in rows:
        runs.setdefault((r["engine"], r["scenario"]), []).append(r)

    def ok_rate(r):
        """POST /quotes counts its 201s only; the others every answer."""
        if r["scenario"] != "quotes":
            return float(r["rps"])
        st = dict(kv.split("=") for kv in r["statuses"].split(",") if "=" in kv)
        return int(st.get("201", 0)) / float(r["duration_s"])

    def rps(engine, scenario):
        rs = runs.get((engine, scenario))
        return sum(ok_rate(r) for r in rs) / len(rs) if rs else None

    def p99(engine, scenario):
        rs = runs.get((engine, scenario))
        return max(float(r["p99_ms"]) for r in rs) if rs else None

    def non2xx(engine, scenario):
        return sum(int(r["non2xx"] or 0) + int(r["socket_errors"] or 0) for r in runs.get((engine, scenario), []))

    def cpu(engine, scenario):
        """The server's CPU µs per request, the mean of the rounds (None when not measured)."""
        vs = [float(r["cpu_us_per_req"]) for r in runs.get((engine, scenario), [])
              if (r.get("cpu_us_per_req") or "-") != "-"]
        return sum(vs) / len(vs) if vs else None

    def cpu_ratio(engine, scenario):
        """CPU per request over GET /health's; the service's /health is measured on SQLite only."""
        c, h = cpu(engine, scenario), cpu(engine if engine == "node" else "sqlite", "health")
        return f"{c / h:.2f}" if c and h else "-"

    def fmt(v, digits=0):
        return "-" if v is None else f"{v:,.{digits}f}"

    out = [f"Benchmark {machine.get('date', '?')}: {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
           f"commit {machine.get('commit', '?')}; CPU idle before/after the run: "
           f"{machine.get('idle before run', '?')}/{machine.get('idle after run', '?')}; {machine.get('settings', '')}",
           "",
           "The service on SQLite against the Node peer, alternating rounds (wrk -t2 -c64):", "",
           "| measurement | ours req/s | Node req/s | ours / Node | ours p99 ms | Node p99 ms | bytes ours / Node | "
           "peak RSS MB ours / Node | CPU µs/req ours / Node | CPU / health ours / Node |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for s in ("health", "users_me", "feed", "quotes"):
        ours, node = rps("sqlite", s), rps("node", s)
        ratio = f"{ours / node:.2f}" if ours and node else "-"
        b = f"{size.get(('sqlite', s), '-')} / {size.get(('node', s), '-')}" if s not in ("health", "quotes") else "-"
        m = (f"{rss.get(('sqlite', s), 0) / 1024:.0f} / {rss.get(('node', s), 0) / 1024:.0f}"
             if ("sqlite", s) in rss else "-")
        out.append(f"| {NAMES[s]} | {fmt(ours)} | {fmt(node)} | {ratio} | {fmt(p99('sqlite', s), 2)} | "
                   f"{fmt(p99('node', s), 2)} | {b} | {m} | {fmt(cpu('sqlite', s), 1)} / {fmt(cpu('node', s), 1)} | "
                   f"{cpu_ratio('sqlite', s)} / {cpu_ratio('node', s)} |")
    out += ["", "The service on each engine (wrk -t2 -c64; CPU / health: over the service's GET /health on SQLite, "
            "the only engine it is measured on):", "",
            "| engine | measurement | req/s | p50 ms | p99 ms | non-2xx | peak RSS MB | CPU µs/req | CPU / health |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for e in ("sqlite", "postgres"):
        for s in ("users_me", "feed", "job_detail", "quotes"):
            rs = runs.get((e, s))
            if not rs:
                continue
            p50 = sum(float(r["p50_ms"]) for r in rs) / len(rs)
            out.append(f"| {e} | {NAMES[s]} | {fmt(rps(e, s))} | {p50:.2f} | {fmt(p99(e, s), 2)} | {non2xx(e, s)} | "
                       f"{rss.get((e, s), 0) / 1024:.0f} | {fmt(cpu(e, s), 1)} | {cpu_ratio(e, s)} |")

    goals = []

    def goal(name, measured, ok):
        goals.append((name, measured, ok))

    feed, node_feed = rps("sqlite", "feed"), rps("node", "feed")
    if feed and node_feed:
        goal("1. feed on SQLite >= 4x the Node peer", f"{feed / node_feed:.2f}x", feed >= 4 * node_feed)
        goal("1. feed on SQLite: p99 <= 50 ms (worst round)", f"{p99('sqlite', 'feed'):.2f} ms",
             p99("sqlite", "feed") <= 50)
    pg_feed = rps("postgres", "feed")
    if feed and pg_feed:
        goal("1. feed on PostgreSQL >= 0.7x the feed on SQLite", f"{pg_feed / feed:.2f}x", pg_feed >= 0.7 * feed)
    me, node_me = rps("sqlite", "users_me"), rps("node", "users_me")
    if me and node_me:
        goal("2. GET /users/me on SQLite >= 4x the Node peer", f"{me / node_me:.2f}x", me >= 4 * node_me)
    for e in ("sqlite", "postgres"):
        d, m = rps(e, "job_detail"), rps(e, "users_me")
        if d and m:
            goal(f"3. GET /jobs/:id on {e} >= 0.5x GET /users/me", f"{d / m:.2f}x", d >= 0.5 * m)
    for e, need in (("sqlite", 5000), ("postgres", 3000)):
        q = rps(e, "quotes")
        if q is not None:
            bad = non2xx(e, "quotes") + fivexx.get(e, 0)
            goal(f"4. POST /quotes on {e} >= {need:,}/s, no 5xx", f"{q:,.0f}/s, non-2xx {non2xx(e, 'quotes')}, "
                 f"5xx in the server log {fivexx.get(e, 0)}", q >= need and bad == 0)
    q, node_q = rps("sqlite", "quotes"), rps("node", "quotes")
    if q and node_q:
        goal("issue 37, 2. POST /quotes on SQLite >= 2x the Node peer (201s)", f"{q / node_q:.2f}x", q >= 2 * node_q)
        goal("issue 37, 2. POST /quotes on SQLite: p99 <= 20 ms (worst round)", f"{p99('sqlite', 'quotes'):.2f} ms",
             p99("sqlite", "quotes") <= 20)
    if rss:
        goal("6. peak RSS reported for each measurement", "see the tables", True)
    out += ["", "| goal | measured | result |", "| --- | ---: | --- |"]
    out += [f"| {g} | {m} | {'met' if ok else 'MISSED'} |" for g, m, ok in goals]
    out += ["", f"goals met: {sum(1 for g in goals if g[2])} of {len(goals)} (goal 5: bench/jobs.sh; "
            "the memory soak: bench/soak.sh)"]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "peer"))
