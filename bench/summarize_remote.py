#!/usr/bin/env python3
"""Tables and goals of bench/remote.sh from DIR/latest.tsv, DIR/raw/rtt.tsv, DIR/raw/trips.tsv
and DIR/machine.txt: each topology's figures, the delayed ones against the loopback, the round
trips per route, and issue 26's goals (POST /quotes at 2,500/s or more with a p50 of 4 ms or
less; GET /users/me and GET /jobs/:id at 80% of their loopback throughput or more)."""
import csv
import os
import sys

NAMES = {"users_me": "GET /users/me", "job": "GET /jobs/:id (owner, 3 quotes)", "feed": "GET /jobs (provider feed)",
         "quotes": "POST /quotes (a new quote each)", "quotes_c8": "POST /quotes, 8 connections"}


def read_tsv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def main(d):
    rows = read_tsv(os.path.join(d, "latest.tsv"))
    rtt = {r["topology"]: r["ms"] for r in read_tsv(os.path.join(d, "raw", "rtt.tsv"))}
    trips = read_tsv(os.path.join(d, "raw", "trips.tsv"))
    machine = dict(line.rstrip("\n").split(": ", 1) for line in open(os.path.join(d, "machine.txt")) if ": " in line)
    settings = open(os.path.join(d, "machine.txt")).read().strip().splitlines()[-1]
    print(f"Benchmark {machine.get('date')}: {machine.get('cores')} cores, {machine.get('cpu')}, commit "
          f"{machine.get('commit')}; CPU idle before/after the run: {machine.get('idle before run')}/"
          f"{machine.get('idle after run')}; {settings}")
    print()
    by = {(r["engine"], r["scenario"]): r for r in rows}
    topologies = list(dict.fromkeys(r["engine"] for r in rows))
    print("| topology | SELECT 1 ms (pgbench) | measurement | conns | req/s | p50 ms | p99 ms | CPU µs/req | non-2xx | "
          "vs loopback |")
    print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for t in topologies:
        for s in NAMES:
            r = by.get((t, s))
            if not r:
                continue
            base = by.get(("loopback", s))
            ratio = f"{float(r['rps']) / float(base['rps']):.2f}" if base and t != "loopback" and float(base["rps"]) else ""
            print(f"| {t} | {rtt.get(t, '-')} | {NAMES[s]} | {r['conns']} | {float(r['rps']):,.0f} | {r['p50_ms']} | "
                  f"{r['p99_ms']} | {r.get('cpu_us_per_req') or '-'} | {r['non2xx']} | {ratio} |")
    print()
    print("Round trips per request (db_round_trips, mean over the run's requests):")
    print()
    print("| topology | route | requests | round trips |")
    print("| --- | --- | ---: | ---: |")
    for r in trips:
        print(f"| {r['topology']} | {r['route']} | {r['requests']} | {r['mean_round_trips']} |")
    print()
    print("| topology | goal | measured | result |")
    print("| --- | --- | ---: | --- |")
    met = total = 0
    for t in topologies:
        if t == "loopback":
            continue
        q = by.get((t, "quotes"))
        if q:
            ok = float(q["rps"]) >= 2500
            total += 1
            met += ok
            print(f"| {t} | POST /quotes >= 2,500/s (64 connections) | {float(q['rps']):,.0f}/s | {'met' if ok else 'MISSED'} |")
            ok = float(q["p50_ms"]) <= 4
            total += 1
            met += ok
            print(f"| {t} | POST /quotes p50 <= 4 ms (64 connections) | {q['p50_ms']} ms | {'met' if ok else 'MISSED'} |")
        for s in ("users_me", "job"):
            r, base = by.get((t, s)), by.get(("loopback", s))
            if r and base:
                ratio = float(r["rps"]) / float(base["rps"])
                ok = ratio >= 0.8
                total += 1
                met += ok
                print(f"| {t} | {NAMES[s]} >= 80% of loopback | {ratio:.0%} | {'met' if ok else 'MISSED'} |")
    print()
    print(f"goals met: {met} of {total}")


if __name__ == "__main__":
    main(sys.argv[1])
