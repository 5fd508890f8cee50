#!/usr/bin/env python3
"""Which of SQLite's b-trees a write dirties (issue 37): sends COUNT writes of one kind one at a
time (each a new one, PAUSE s apart so that the queue's and the pump's transactions that follow
each one commit on their own), then reads the WAL's frames since a truncating checkpoint taken
first and names each frame's page with the dbstat table. Prints every commit's pages by
b-tree, grouped by the b-trees a commit touched, and the frames per write in all.

    wal_pages.py --db D --base URL --files DIR --write quotes|jobs|messages|status|accept [--count 20]

DIR holds bench/seed_jobs.py's `files` and `writes` output. bench/wal_pages.sh seeds and starts
the service for it. Keep COUNT small: SQLite checkpoints at 1,000 frames, and a checkpoint
restarts the WAL this reads.
"""
import argparse
import collections
import json
import sqlite3
import struct
import sys
import time
import urllib.request


def send(base, method, path, token, body):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def lines(files, name):
    with open(f"{files}/{name}") as f:
        return f.read().split("\n")[:-1]


def writes(files, kind, count):
    """count requests (method, path, token, body) of one kind, each a new write, as bench/writes.sh
    and bench/quotes.lua send them."""
    if kind == "quotes":  # pair k: provider k on the first job, and so on
        tokens, jobs = lines(files, "quoters.tokens"), lines(files, "open.jobs")
        for k in range(count):
            yield "POST", "/quotes", tokens[k % len(tokens)], \
                {"jobId": jobs[k // len(tokens)], "amount": 40.5 + k, "note": "Bench quote"}
        return
    if kind == "jobs":
        tokens = lines(files, "customers.tokens")
        for k in range(count):
            yield "POST", "/jobs", tokens[k % len(tokens)], \
                {"service": "lawncare", "preferredAt": "2099-01-05T15:00:00.000Z", "description": f"Bench job {k}"}
        return
    tokens = lines(files, "writers.tokens")
    targets = [line.split() for line in lines(files, f"{kind}.targets")[:count]]
    method, body = {"messages": ("POST", {"content": "Bench message: on my way at nine?"}),
                    "status": ("PATCH", {"status": "ON_THE_WAY"}), "accept": ("POST", None)}[kind]
    for token, path in targets:
        yield method, path, tokens[int(token)], body


def wal_commits(path):
    """The current WAL's transactions: lists of page numbers, one per commit, in order. Frames
    of an earlier cycle after them (the WAL was truncated first) mean that a checkpoint started
    it over meanwhile: the earliest writes' commits are lost, and it says so."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 32:
        return []
    _, _, page_size, _, salt1, salt2 = struct.unpack(">6I", data[:24])
    commits, pages, at = [], [], 32
    while at + 24 + page_size <= len(data):
        pgno, commit_size, s1, s2 = struct.unpack(">4I", data[at:at + 16])
        if (s1, s2) != (salt1, salt2):
            print("warning: a checkpoint started the WAL over during the writes; what follows covers only "
                  "the commits after it (lower --count)", file=sys.stderr)
            break
        pages.append(pgno)
        if commit_size:
            commits.append(pages)
            pages = []
        at += 24 + page_size
    return commits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--base", required=True)
    ap.add_argument("--files", required=True)
    ap.add_argument("--write", default="quotes", choices=["quotes", "jobs", "messages", "status", "accept"])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--pause", type=float, default=0.3)
    args = ap.parse_args()
    requests = list(writes(args.files, args.write, args.count))
    db = sqlite3.connect(args.db, timeout=30)
    time.sleep(1)  # the seeding's and the warm-up's work settles
    for _ in range(50):
        busy, _, _ = db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy:
            break
        time.sleep(0.1)
    else:
        sys.exit("the WAL could not be truncated")
    statuses = collections.Counter()
    for method, path, token, body in requests:
        statuses[send(args.base, method, path, token, body)] += 1
        time.sleep(args.pause)
    time.sleep(1)
    owner = {}
    for name, pageno in db.execute("SELECT name, pageno FROM dbstat"):
        owner[pageno] = name
    commits = wal_commits(args.db + "-wal")
    groups = collections.OrderedDict()
    for pages in commits:
        names = collections.Counter(owner.get(p, "(free or new)") for p in pages)
        key = tuple(sorted(names))
        g = groups.setdefault(key, {"commits": 0, "frames": 0, "by": collections.Counter()})
        g["commits"] += 1
        g["frames"] += len(pages)
        g["by"].update(names)
    frames = sum(len(p) for p in commits)
    print(f"{len(requests)} {args.write} writes one at a time: statuses {dict(statuses)}; {len(commits)} commits, "
          f"{frames} frames, {frames / len(requests):.1f} frames a write")
    for key, g in sorted(groups.items(), key=lambda kv: -kv[1]["frames"]):
        print(f"\n{g['commits']} commits, {g['frames'] / g['commits']:.1f} frames each "
              f"({g['frames'] / len(requests):.1f} a write):")
        for name, n in g["by"].most_common():
            print(f"  {n / g['commits']:5.1f}  {name}")


if __name__ == "__main__":
    main()
