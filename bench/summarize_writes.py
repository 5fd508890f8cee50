#!/usr/bin/env python3
"""Summary table and goal check for bench/writes.sh (issue 37, items 3 and 4).

Usage: summarize_writes.py RESULTS_DIR   (reads latest.tsv, machine.txt and errors5xx.tsv there)

A route's rate counts its 2xx answers only (every request is a new write; a repeat or a refusal
is a non-2xx answer, shown beside it). Goals, for each of the four everyday writes (POST /jobs,
POST /jobs/:id/messages, PATCH /jobs/:id/status, POST /quotes/:id/accept):
  3. >= 2,000 2xx answers a second on SQLite at 64 connections;
  4. on PostgreSQL >= 0.7x its SQLite figure (same run).
POST /quotes is measured for reference (its goal is bench/peer.sh's); on PostgreSQL also on two
instances of the service on the one database (issue 36.1: >= 1.5x one instance, same run).
"""
import os
import sys

from summarize_peer import read_tsv

SQLITE_GOAL = 2000
PG_RATIO = 0.7
ROUTES = [("jobs", "POST /jobs"), ("messages", "POST /jobs/:id/messages"),
          ("status", "PATCH /jobs/:id/status (ON_THE_WAY)"), ("accept", "POST /quotes/:id/accept"),
          ("quotes", "POST /quotes (reference)"), ("quotes_two", "POST /quotes, two instances")]
TWO_RATIO = 1.5
EVERYDAY = ["jobs", "messages", "status", "accept"]


def main(results):
    by = {(r["engine"], r["scenario"]): r for r in read_tsv(os.path.join(results, "latest.tsv"))}
    machine = {k.strip(): v.strip() for k, _, v in
               (line.partition(":") for line in open(os.path.join(results, "machine.txt")))}
    fivexx = {r["engine"]: int(r["n"] or 0) for r in read_tsv(os.path.join(results, "errors5xx.tsv"), ["engine", "n"])}
    engines = list(dict.fromkeys(e for e, _ in by))

    def statuses(r):
        return {int(k): int(v) for k, v in (kv.split("=") for kv in r["statuses"].split(",") if "=" in kv)}

    def ok_rate(r):
        return sum(n for code, n in statuses(r).items() if 200 <= code < 300) / float(r["duration_s"])

    def not_ok(r):
        return sum(n for code, n in statuses(r).items() if not 200 <= code < 300) + int(r["socket_errors"] or 0)

    out = [f"Benchmark {machine.get('date', '?')}: {machine.get('cores', '?')} cores, {machine.get('cpu', '?')}, "
           f"commit {machine.get('commit', '?')}; load average before the run {machine.get('load before run', '?')}; "
           f"CPU idle before/after the run: {machine.get('idle before run', '?')}/{machine.get('idle after run', '?')}; "
           f"{machine.get('settings', '')}",
           "",
           "Every request a new write, wrk -t2 -c64; req/s counts 2xx answers only; CPU: the service's "
           "process (not PostgreSQL's):",
           "",
           "| engine | route | 2xx req/s | p50 ms | p99 ms | CPU µs/req | non-2xx | answers |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for e in engines:
        for s, name in ROUTES:
            r = by.get((e, s))
            if r:
                answers = ", ".join(f"{c}: {n}" for c, n in sorted(statuses(r).items())) or "-"
                out.append(f"| {e} | {name} | {ok_rate(r):,.0f} | {float(r['p50_ms']):.2f} | {float(r['p99_ms']):.2f} | "
                           f"{r.get('cpu_us_per_req') or '-'} | {not_ok(r)} | {answers} |")
    goals = []
    for s in EVERYDAY:
        name = dict(ROUTES)[s]
        lite, pg = by.get(("sqlite", s)), by.get(("postgres", s))
        if lite:
            goals.append((f"{name} on SQLite >= {SQLITE_GOAL:,}/s", f"{ok_rate(lite):,.0f}/s",
                          ok_rate(lite) >= SQLITE_GOAL))
        if lite and pg and ok_rate(lite) > 0:
            ratio = ok_rate(pg) / ok_rate(lite)
            goals.append((f"{name} on PostgreSQL >= {PG_RATIO:g}x SQLite", f"{ok_rate(pg):,.0f}/s, {ratio:.2f}x",
                          ratio >= PG_RATIO))
    one, two = by.get(("postgres", "quotes")), by.get(("postgres", "quotes_two"))
    if one and two and ok_rate(one) > 0:
        ratio = ok_rate(two) / ok_rate(one)
        goals.append((f"POST /quotes on PostgreSQL, two instances >= {TWO_RATIO:g}x one",
                      f"{ok_rate(two):,.0f}/s, {ratio:.2f}x", ratio >= TWO_RATIO))
    for e in engines:
        if e in fivexx:
            goals.append((f"no 5xx in the server log ({e})", str(fivexx[e]), fivexx[e] == 0))
    out += ["", "| goal | measured | result |", "| --- | ---: | --- |"]
    out += [f"| {g} | {m} | {'met' if ok else 'MISSED'} |" for g, m, ok in goals]
    out += ["", f"goals met: {sum(1 for g in goals if g[2])} of {len(goals)}"]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "writes"))
