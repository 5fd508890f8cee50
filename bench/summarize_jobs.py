#!/usr/bin/env python3
"""Summary tables and goal check for bench/jobs.sh.

Usage: summarize_jobs.py RESULTS_DIR   (reads latest.tsv and machine.txt there)

Each measurement shows the server's CPU time per request (bench/lib.sh, measure).
Goal (docs/performance.md): the p50 of the provider feed and of GET /jobs/:id with 1,000,000
jobs is less than twice the p50 with 10,000 jobs (-t1 -c4 both), on each engine.
"""
import csv
import os
import sys

GROWTH_LIMIT = 2.0
SIZES = [("small", "JOBS_SMALL"), ("mid", "JOBS_MID"), ("large", "JOBS_LARGE")]
READS = [("feed", "GET /jobs (provider feed, 200 jobs)"), ("job", "GET /jobs/:id (owner, 3 quotes)")]


def main(results):
    with open(os.path.join(results, "latest.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    machine = {}
    for line in open(os.path.join(results, "machine.txt")):
        k, _, v = line.partition(":")
        machine[k.strip()] = v.strip()
    sizes = dict(word.split("=") for word in machine.get("sizes", "").split())
    label = {key: f"{int(sizes[var]):,} jobs" if var in sizes else key for key, var in SIZES}
    by = {(r["engine"], r["scenario"]): r for r in rows}
    engines = list(dict.fromkeys(r["engine"] for r in rows))

    def errors(r):
        out = []
        statuses = r["statuses"] if r["statuses"] not in ("", "-") else ""
        if statuses:
            out.append("answers " + statuses.replace(",", ", ").replace("=", ": "))
        elif r["non2xx"] not in ("0", ""):
            out.append(f"non-2xx {r['non2xx']}")
        if r["socket_errors"] not in ("0", ""):
            out.append(f"socket {r['socket_errors']}")
        return "; ".join(out) or "-"

    out = [f"Benchmark {machine.get('date', '?')}: {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
           f"commit {machine.get('commit', '?')}; CPU idle before/after the run: "
           f"{machine.get('idle before run', '?')}/{machine.get('idle after run', '?')}", ""]
    out.append(f"At {label['mid']}, 64 connections (wrk -t2 -c64):")
    out.append("")
    out.append("| engine | measurement | req/s | p50 ms | p99 ms | CPU µs/req | errors |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: | --- |")
    for e in engines:
        for s, name in READS[:1] + [("feed_gzip", "GET /jobs, Accept-Encoding: gzip")] + READS[1:] + [
                ("quotes", "POST /quotes (a new quote each)")]:
            r = by.get((e, f"{s}_c64"))
            if r:
                out.append(f"| {e} | {name} | {float(r['rps']):,.0f} | {float(r['p50_ms']):.2f} | "
                           f"{float(r['p99_ms']):.2f} | {r.get('cpu_us_per_req') or '-'} | {errors(r)} |")
    out.append("")
    out.append("p50 by table size, 4 connections (wrk -t1 -c4), with the server's CPU µs per request:")
    out.append("")
    out.append("| engine | measurement | " + " | ".join(label[k] for k, _ in SIZES) + " | growth |")
    out.append("| --- | --- | " + " | ".join("---:" for _ in SIZES) + " | ---: |")
    goals = []
    for e in engines:
        for s, name in READS:
            cells = []
            for key, _ in SIZES:
                r = by.get((e, f"{s}_c4_{key}"))
                cells.append(f"{float(r['p50_ms']):.2f} ms ({r.get('cpu_us_per_req') or '-'} µs)" if r else "-")
            small, large = by.get((e, f"{s}_c4_small")), by.get((e, f"{s}_c4_large"))
            growth = ""
            if small and large and float(small["p50_ms"]) > 0:
                ratio = float(large["p50_ms"]) / float(small["p50_ms"])
                growth = f"{ratio:.2f}x"
                ok = ratio < GROWTH_LIMIT and large["non2xx"] == "0" and small["non2xx"] == "0"
                goals.append((e, f"{name}: p50 at {label['large']} < {GROWTH_LIMIT:g}x p50 at {label['small']}",
                              growth, ok))
            out.append(f"| {e} | {name} | " + " | ".join(cells) + f" | {growth} |")
    out.append("")
    out.append("| engine | goal | measured | result |")
    out.append("| --- | --- | ---: | --- |")
    for e, goal, measured, ok in goals:
        out.append(f"| {e} | {goal} | {measured} | {'met' if ok else 'MISSED'} |")
    out.append("")
    out.append(f"goals met: {sum(1 for g in goals if g[3])} of {len(goals)}")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "jobs"))
