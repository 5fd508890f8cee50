#!/usr/bin/env python3
"""Summary table and goal check for bench/events.sh.

Usage: summarize_events.py RESULTS_DIR   (reads latest.tsv, raw/events.tsv and machine.txt)

Goals (issue 25): with STREAMS streams held and RATE events a second committed through the API,
the p99 from the commit to each stream's receipt is at most 100 ms (measured from the message's
createdAt, which its handler writes just before the commit: an upper bound; the time from the
message's request, which adds the request's wait for a worker, is shown beside it); an idle stream
costs at most 16 KiB of the instance's memory; GET /users/me keeps at least 80% of the
requests a second it makes without the streams.
"""
import csv
import os
import sys

P99_GOAL_MS = 100.0
KIB_GOAL = 16.0
ME_GOAL = 0.80
LABEL = {"sqlite": "SQLite, one instance", "postgres-2": "PostgreSQL, two instances (writer on A, streams on B)"}


def kv(text):
    out = {}
    for word in text.replace("BENCH ", "").split():
        k, _, v = word.partition("=")
        out[k] = v
    return out


def main(results):
    with open(os.path.join(results, "latest.tsv")) as f:
        wrk = {(r["engine"], r["scenario"]): r for r in csv.DictReader(f, delimiter="\t")}
    rows = {}
    with open(os.path.join(results, "raw", "events.tsv")) as f:
        for r in csv.DictReader(f, delimiter="\t"):
            rows.setdefault(r["config"], {})[r["scenario"]] = kv(r["values"])
    for line in open(os.path.join(results, "machine.txt")):
        print(line.rstrip())
    print()
    print("| configuration | measurement | value | goal | met |")
    print("| --- | --- | ---: | --- | --- |")
    ok_all = True
    for config, got in rows.items():
        name = LABEL.get(config, config)
        s = got["streams"]

        def row(what, value, goal, met):
            nonlocal ok_all
            ok_all &= met
            print(f"| {name} | {what} | {value} | {goal} | {'yes' if met else 'NO'} |")

        print(f"| {name} | streams open (seconds to open all) | {s['open']} ({s['seconds_to_open']} s) | "
              f"10,000 | {'yes' if int(s['open']) >= 10000 else 'NO'} |")
        row("memory per idle stream (VmRSS after - before, / streams)",
            f"{float(s['per_stream_kib']):.2f} KiB ({int(s['rss_before_kib']) // 1024} -> "
            f"{int(s['rss_after_kib']) // 1024} MiB)", "<= 16 KiB", float(s["per_stream_kib"]) <= KIB_GOAL)
        for key, what in (("latency", "streams only"), ("latency_load", "with GET /users/me at -c64")):
            lat, w = got[key], got["writer_" + ("latency" if key == "latency" else "load")]
            refused = f", {w['failed']} refused (first: {w.get('first_failure')})" if w["failed"] != "0" else ""
            row(f"{what}: commit-to-receipt (from createdAt) p50 / p99 / max ms ({lat['w_receipts']} receipts of "
                f"{w['ok']} messages at {w['rate']}/s{refused})",
                f"{lat['w_p50_ms']} / {lat['w_p99_ms']} / {lat['w_max_ms']}", "p99 <= 100 ms",
                float(lat["w_p99_ms"]) <= P99_GOAL_MS and int(lat["w_receipts"]) >= int(w["ok"]) * 5)
            print(f"| {name} | {what}: request-to-receipt p50 / p99 / max ms (writer behind its schedule by "
                  f"up to {w['behind_max_ms']} ms) | {lat['p50_ms']} / {lat['p99_ms']} / {lat['max_ms']} | - | - |")
            row(f"{what}: streams lost", lat["lost_streams"], "0", lat["lost_streams"] == "0")
        without, with_ = wrk[(config, "me_without")], wrk[(config, "me_with")]
        ratio = float(with_["rps"]) / float(without["rps"])
        row("GET /users/me req/s with / without streams (p99 ms)",
            f"{float(with_['rps']):,.0f} ({with_['p99_ms']}) / {float(without['rps']):,.0f} ({without['p99_ms']}) "
            f"= {ratio:.2f}", ">= 0.80", ratio >= ME_GOAL)
        print(f"| {name} | GET /users/me: the stream instance's CPU µs per request with / without streams (the "
              f"streams' deliveries count in it) | {with_.get('cpu_us_per_req') or '-'} / "
              f"{without.get('cpu_us_per_req') or '-'} | - | - |")
    print()
    print("all goals met" if ok_all else "some goals missed")


if __name__ == "__main__":
    main(sys.argv[1])
