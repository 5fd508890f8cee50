#!/usr/bin/env python3
"""Round trips per route from /metrics dumps (MP_METRICS_DUMP=/tmp/m make api-postgres writes
one per test worker, /tmp/m.<pid>): the db_round_trips histograms summed over the dumps, and
for each route its requests, mean and median (the histogram bucket that holds the middle
request). With --over, only the routes over issue 26's goal: a read (GET) in more than one
round trip, a write in more than three, by the median.

    python3 bench/route_trips.py [--over] /tmp/m.*
"""
import re
import sys
from collections import defaultdict

LINE = re.compile(r'^db_round_trips_(bucket|sum|count)\{([^}]*)\} (\S+)$')
LABEL = re.compile(r'([a-z_]+)="((?:[^"\\]|\\.)*)"')


def read(paths):
    buckets, sums, counts = defaultdict(lambda: defaultdict(float)), defaultdict(float), defaultdict(float)
    for path in paths:
        with open(path) as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m:
                    continue
                labels = dict(LABEL.findall(m.group(2)))
                route = (labels["method"], labels["route"])
                value = float(m.group(3))
                if m.group(1) == "bucket":
                    buckets[route][labels["le"]] += value
                elif m.group(1) == "sum":
                    sums[route] += value
                else:
                    counts[route] += value
    return buckets, sums, counts


def median_bucket(cumulative, count):
    """The upper bound of the bucket that holds the middle request."""
    bounds = sorted(((float("inf") if le == "+Inf" else float(le)), le) for le in cumulative)
    for bound, le in bounds:
        if cumulative[le] >= count / 2:
            return le
    return "+Inf"


def main(args):
    over = "--over" in args
    paths = [a for a in args if a != "--over"]
    if not paths:
        sys.exit(__doc__)
    buckets, sums, counts = read(paths)
    print("| route | median round trips (bucket) | mean | requests |")
    print("| --- | ---: | ---: | ---: |")
    for route in sorted(counts):
        n = counts[route]
        if not n or route[1] == "unmatched":
            continue
        med = median_bucket(buckets[route], n)
        limit = 1 if route[0] == "GET" else 3
        if over and (med == "+Inf" or float(med) <= limit):
            continue
        print(f"| {route[0]} {route[1]} | {med} | {sums[route] / n:.1f} | {n:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
