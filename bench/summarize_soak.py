#!/usr/bin/env python3
"""Summary of bench/soak.sh: per engine, the RSS after the first minute, at the end and at
its peak, the requests answered by status, and the goals (RSS at the end within 10% of the RSS
after the first minute; the database's size at the end within 10% of its size at the start,
the retention periods shortened for the soak).

Usage: summarize_soak.py RESULTS_DIR
"""
import csv
import os
import sys

LIMIT = 0.10


def main(results):
    machine = {}
    for line in open(os.path.join(results, "machine.txt")):
        k, _, v = line.partition(":")
        machine[k.strip()] = v.strip()
    with open(os.path.join(results, "latest.tsv")) as f:
        rows = {(r["engine"], r["scenario"]): r for r in csv.DictReader(f, delimiter="\t")}
    hwm = dict(line.split() for line in open(os.path.join(results, "hwm.tsv")) if line.strip())
    fivexx = dict(line.split() for line in open(os.path.join(results, "errors5xx.tsv")) if line.strip())
    out = [f"Soak {machine.get('date', '?')}: {machine.get('cores', '?')} cores, commit {machine.get('commit', '?')}; "
           f"CPU idle before/after: {machine.get('idle before run', '?')}/{machine.get('idle after run', '?')}; "
           f"{machine.get('settings', '')}", "",
           "| engine | load | requests | req/s | p99 ms | answers |", "| --- | --- | ---: | ---: | ---: | --- |"]
    engines = sorted({e for e, _ in rows}, key=lambda e: (e != "sqlite", e))
    for e in engines:
        for s, name in (("soak_mixed", "reads and quotes, wrk -t1 -c8"), ("soak_logins", "logins, wrk -t1 -c1")):
            r = rows.get((e, s))
            if r:
                out.append(f"| {e} | {name} | {int(r['requests']):,} | {float(r['rps']):,.0f} | "
                           f"{float(r['p99_ms']):.2f} | {r['statuses']} |")
    out += ["", "| engine | RSS after 1 min | RSS at the end | change | peak RSS | 5xx in the log | result |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    met = 0
    for e in engines:
        path = os.path.join(results, f"rss-{e}.tsv")
        with open(path) as f:
            samples = [(int(r["seconds"]), int(r["rss_kb"])) for r in csv.DictReader(f, delimiter="\t")]
        after = next((kb for s, kb in samples if s >= 60), samples[0][1])
        end = samples[-1][1]
        change = (end - after) / after
        ok = abs(change) <= LIMIT
        met += ok
        out.append(f"| {e} | {after / 1024:.1f} MB | {end / 1024:.1f} MB | {change * 100:+.1f}% | "
                   f"{int(hwm.get(e, 0)) / 1024:.1f} MB | {fivexx.get(e, '-')} | {'met' if ok else 'MISSED'} |")
    out += ["", f"goal (RSS at the end within {LIMIT:.0%} of the RSS after the first minute): met on {met} of "
            f"{len(engines)} engines"]
    sizes = {}
    path = os.path.join(results, "dbsize.tsv")
    if os.path.exists(path):
        for line in open(path):
            if line.strip():
                e, start, end = line.split()
                sizes[e] = (int(start), int(end))
    if sizes:
        out += ["", "| engine | database at the start | at the end | change | result |", "| --- | ---: | ---: | ---: | --- |"]
        held = 0
        for e in engines:
            if e not in sizes:
                continue
            start, end = sizes[e]
            change = (end - start) / start if start else 0.0
            ok = abs(change) <= LIMIT
            held += ok
            out.append(f"| {e} | {start / 1048576:.1f} MB | {end / 1048576:.1f} MB | {change * 100:+.1f}% | "
                       f"{'met' if ok else 'MISSED'} |")
        out += ["", f"goal (the database at the end within {LIMIT:.0%} of its size at the start, retention "
                f"periods shortened to a minute): met on {held} of {len(sizes)} engines"]
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results", "soak"))
