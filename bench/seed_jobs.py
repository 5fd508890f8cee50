#!/usr/bin/env python3
"""Seeds a marketplace database for bench/jobs.sh, straight into its tables (the service must
have migrated it; it may be running, idle). Posting a million jobs through the API would take
longer than the whole benchmark, and the benchmark is about reading them.

  seed_jobs.py init  --engine E --db D --state STATE.json
  seed_jobs.py grow  --engine E --db D --state STATE.json --target N
  seed_jobs.py files --state STATE.json --secret JWT_SECRET --out DIR
  seed_jobs.py writes --engine E --db D --state STATE.json --target N --secret JWT_SECRET --out DIR

E is sqlite (D: the database file) or postgres (D: a postgres:// URL; rows go in through
psql's COPY). `init` creates the accounts and the jobs every measurement reads; `grow` adds
filler jobs until the table holds N; `files` writes what the wrk scripts read (tokens are
minted with the service's JWT secret, as the service would issue them). After seeding, the
PostgreSQL's statistics are gathered (ANALYZE), as autovacuum keeps them; SQLite is left
without statistics, as the service runs it (it runs no ANALYZE), so that the benchmarks measure
the plans production runs; SQLITE_ANALYZE=1 in the environment gathers them there too.

The data, whatever N:
- the feed provider offers lawncare in ZIPs 20001 and 20002 and matches exactly FEED_OPEN
  open jobs (a tenth of them ASAP); filler jobs in those ZIPs are all closed, so the feed
  query must skip them by index;
- the bench customer owns DETAIL_JOBS quoted jobs, each with 3 quotes (GET /jobs/:id reads);
- QUOTERS verified providers offer every service in the filler ZIP pool and quote on open
  filler jobs (POST /quotes);
- filler jobs spread over 1,000 customers, four services and ZIP_POOL ZIPs, with a realistic
  mix of statuses (most completed); the customers live in ZIP_POOL's ZIPs in turn, so jobs they
  post (bench/writes.sh) spread over 500 ZIPs, not one feed (one feed_versions row).

`writes` (bench/writes.sh, after `init`) adds what N writes of each kind need, each a new one:
N ACCEPTED jobs to move ON_THE_WAY (their quoter assigned), N QUOTED jobs with two PENDING
quotes each, the first of which their customer accepts (the first ACCEPT_CUSTOMERS customers,
whom bench/writes.sh gives a saved card), and N / 100 ACCEPTED jobs to message (at most 100
messages a thread, under the 250 limit), customer and provider in turn. In DIR: writers.tokens
(every customer's token, then every quoter's), customers.tokens (the customers' alone) and status.targets, accept.targets and
messages.targets ("<token index> <path>" lines, bench/writes.lua).
"""
import argparse
import base64
import hashlib
import hmac
import io
import json
import os
import random
import sqlite3
import subprocess
import sys
import time

FEED_OPEN = 200
DETAIL_JOBS = 100
QUOTERS = 64
CUSTOMERS = 1000
ZIP_POOL = [str(30000 + i) for i in range(500)]
FEED_ZIPS = ["20001", "20002"]
SERVICES = ["lawncare", "snowplowing", "handyman", "home_cleaning"]
ASAP_FEED_AT = -(1 << 62)
# not a bcrypt hash: these accounts never log in (the service answers 401 to any password)
HASH = "!bench-seeded-account"
STATUS_MIX = [("COMPLETED", 70), ("CANCELLED", 10), ("PENDING", 8), ("QUOTED", 4), ("ACCEPTED", 4),
              ("ON_THE_WAY", 2), ("IN_PROGRESS", 2)]
OPEN = ("PENDING", "QUOTED")

JOB_COLS = ["id", "customer_id", "provider_id", "service", "description", "preferred_at", "is_asap", "feed_at",
            "details", "address", "zip", "lat", "lng", "status", "accepted_at", "created_at", "updated_at", "seq"]
ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def new_id(rng):
    n, out = rng.getrandbits(128), []
    for _ in range(24):
        n, d = divmod(n, 36)
        out.append(ALPHABET[d])
    return "c" + "".join(out)


class Db:
    """Inserts rows into either engine; one transaction per call."""

    def __init__(self, engine, target):
        self.engine, self.target = engine, target
        if engine == "sqlite":
            self.conn = sqlite3.connect(target, timeout=30)
            self.conn.execute("PRAGMA busy_timeout = 30000")

    def insert(self, table, cols, rows):
        if not rows:
            return
        if self.engine == "sqlite":
            marks = ", ".join("?" for _ in cols)
            with self.conn:
                self.conn.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", rows)
            return
        buf = io.StringIO()
        for row in rows:
            buf.write(",".join(csv_cell(v) for v in row))
            buf.write("\n")
        self.psql(f"\\copy {table} ({', '.join(cols)}) FROM STDIN WITH (FORMAT csv)", buf.getvalue())

    def scalar(self, sql):
        if self.engine == "sqlite":
            return self.conn.execute(sql).fetchone()[0]
        return self.psql(sql).strip()

    def analyze(self):
        if self.engine == "sqlite":
            if os.environ.get("SQLITE_ANALYZE", "0") != "1":  # as the service runs: no statistics
                return
            self.conn.execute("ANALYZE")
            self.conn.commit()
        else:
            self.psql("ANALYZE")

    def psql(self, command, stdin=None):
        r = subprocess.run(["psql", "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-d", self.target, "-c", command],
                           input=stdin, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"psql failed: {r.stderr}")
        return r.stdout


def csv_cell(v):
    if v is None:
        return ""  # unquoted empty: NULL
    if isinstance(v, str):
        return '"' + v.replace('"', '""') + '"'
    return str(v)


def job_row(rng, seq, customer, service, zip_code, status, now, provider=None, asap=False):
    preferred = None if asap else now + rng.randrange(1, 60) * 86_400_000 + rng.randrange(0, 86_400_000)
    created = now - rng.randrange(0, 365) * 86_400_000
    accepted = created + 3_600_000 if status not in OPEN and status != "CANCELLED" else None
    return (new_id(rng), customer, provider, service, "Bench job: mow the front and back lawn, edge the driveway.",
            preferred, 1 if asap else 0, ASAP_FEED_AT if asap else preferred, None,
            f"{rng.randrange(1, 9999)} Bench Street", zip_code, 40.0 + rng.random(), -75.0 + rng.random(), status,
            accepted, created, created, seq)


def account_rows(rng, now, prefix, n):
    return [(new_id(rng), f"{prefix}-{i}-{rng.randrange(10**9)}@bench.example", HASH, f"Bench {prefix} {i}", now, now)
            for i in range(n)]


def cmd_init(db, state_path):
    rng = random.Random(1)
    now = int(time.time() * 1000)
    customers = account_rows(rng, now, "customer", CUSTOMERS)
    db.insert("users", ["id", "email", "password_hash", "name", "address", "zip", "created_at", "updated_at"],
              [(c[0], c[1], c[2], c[3], "1 Bench Street", ZIP_POOL[i % len(ZIP_POOL)], c[4], c[5])
               for i, c in enumerate(customers)])
    feed = account_rows(rng, now, "feed-provider", 1)[0]
    quoters = account_rows(rng, now, "quoter", QUOTERS)
    prov_cols = ["id", "email", "password_hash", "name", "services", "service_zips", "headshots", "id_doc_front",
                 "id_doc_back", "created_at", "updated_at"]
    verified = ('["bench/headshot.jpg"]', "bench/front.jpg", "bench/back.jpg")
    db.insert("providers", prov_cols,
              [(feed[0], feed[1], feed[2], feed[3], '["lawncare"]', json.dumps(FEED_ZIPS)) + verified + (now, now)] +
              [(q[0], q[1], q[2], q[3], json.dumps(SERVICES), json.dumps(ZIP_POOL)) + verified + (now, now)
               for q in quoters])
    db.insert("provider_services", ["provider_id", "service"],
              [(feed[0], "lawncare")] + [(q[0], s) for q in quoters for s in SERVICES])
    db.insert("provider_zips", ["provider_id", "zip"],
              [(feed[0], z) for z in FEED_ZIPS] + [(q[0], z) for q in quoters for z in ZIP_POOL])
    seq = 1
    jobs = []
    for i in range(FEED_OPEN):
        jobs.append(job_row(rng, seq, customers[i % CUSTOMERS][0], "lawncare", FEED_ZIPS[i % 2],
                            OPEN[i % 2], now, asap=i % 10 == 0))
        seq += 1
    detail = []
    for i in range(DETAIL_JOBS):
        row = job_row(rng, seq, customers[0][0], SERVICES[i % 4], ZIP_POOL[i % len(ZIP_POOL)], "QUOTED", now)
        jobs.append(row)
        detail.append(row[0])
        seq += 1
    db.insert("jobs", JOB_COLS, jobs)
    quotes = []
    for i, job_id in enumerate(detail):
        for k in range(3):
            cents = 10_000 + 500 * k
            fee = (cents * 18 + 50) // 100
            quotes.append((new_id(rng), job_id, quoters[(i + k) % QUOTERS][0], SERVICES[i % 4], cents, fee, cents + fee,
                           "Bench quote", "PENDING", now, now, seq))
            seq += 1
    db.insert("quotes", ["id", "job_id", "provider_id", "service", "amount_cents", "platform_fee_cents", "total_cents",
                         "note", "status", "created_at", "updated_at", "seq"], quotes)
    state = {"customer": customers[0][0], "customers": [c[0] for c in customers], "feed_provider": feed[0],
             "quoters": [q[0] for q in quoters], "detail_jobs": detail, "open_filler_jobs": [], "seq": seq}
    json.dump(state, open(state_path, "w"))


def cmd_grow(db, state_path, target):
    state = json.load(open(state_path))
    rng = random.Random(state["seq"])
    now = int(time.time() * 1000)
    have = int(db.scalar("SELECT COUNT(*) FROM jobs"))
    statuses = [s for s, w in STATUS_MIX for _ in range(w)]
    seq = state["seq"]
    left = target - have
    while left > 0:
        batch = []
        for _ in range(min(left, 50_000)):
            status = rng.choice(statuses)
            if status in OPEN or rng.random() >= 0.05:
                zip_code = rng.choice(ZIP_POOL)
            else:  # a closed job where the feed provider works: the index must skip it
                zip_code = rng.choice(FEED_ZIPS)
            provider = None if status in OPEN or status == "CANCELLED" else rng.choice(state["quoters"])
            row = job_row(rng, seq, rng.choice(state["customers"]), rng.choice(SERVICES), zip_code, status, now,
                          provider=provider, asap=status in OPEN and rng.random() < 0.1)
            if status in OPEN and len(state["open_filler_jobs"]) < 50_000:
                state["open_filler_jobs"].append(row[0])
            batch.append(row)
            seq += 1
        db.insert("jobs", JOB_COLS, batch)
        left -= len(batch)
    state["seq"] = seq
    db.analyze()  # what autovacuum keeps current on PostgreSQL
    json.dump(state, open(state_path, "w"))
    print(int(db.scalar("SELECT COUNT(*) FROM jobs")))


ACCEPT_CUSTOMERS = 250


def cmd_writes(db, state_path, n, secret, out):
    state = json.load(open(state_path))
    rng = random.Random(state["seq"] + 7)
    now = int(time.time() * 1000)
    customers, quoters = state["customers"], state["quoters"]
    seq = state["seq"]
    jobs, quotes, status_t, accept_t, message_jobs = [], [], [], [], []
    for i in range(n):
        c, q = i % len(customers), i % len(quoters)
        row = job_row(rng, seq, customers[c], SERVICES[i % 4], ZIP_POOL[i % len(ZIP_POOL)], "ACCEPTED", now,
                      provider=quoters[q])
        jobs.append(row)
        status_t.append(f"{len(customers) + q} /jobs/{row[0]}/status")
        seq += 1
    for i in range(max(1, n // 100)):
        c, q = i % len(customers), i % len(quoters)
        row = job_row(rng, seq, customers[c], SERVICES[i % 4], ZIP_POOL[i % len(ZIP_POOL)], "ACCEPTED", now,
                      provider=quoters[q])
        jobs.append(row)
        message_jobs.append((c, len(customers) + q, row[0]))
        seq += 1
    for i in range(n):
        c = i % ACCEPT_CUSTOMERS
        row = job_row(rng, seq, customers[c], SERVICES[i % 4], ZIP_POOL[i % len(ZIP_POOL)], "QUOTED", now)
        jobs.append(row)
        seq += 1
        for k in range(2):
            cents = 10_000 + 500 * k
            fee = (cents * 18 + 50) // 100
            qid = new_id(rng)
            quotes.append((qid, row[0], quoters[(i + k) % len(quoters)], SERVICES[i % 4], cents, fee, cents + fee,
                           "Bench quote", "PENDING", now, now, seq))
            seq += 1
            if k == 0:
                accept_t.append(f"{c} /quotes/{qid}/accept")
    for start in range(0, len(jobs), 50_000):
        db.insert("jobs", JOB_COLS, jobs[start:start + 50_000])
    for start in range(0, len(quotes), 50_000):
        db.insert("quotes", ["id", "job_id", "provider_id", "service", "amount_cents", "platform_fee_cents",
                             "total_cents", "note", "status", "created_at", "updated_at", "seq"],
                  quotes[start:start + 50_000])
    state["seq"] = seq
    db.analyze()
    json.dump(state, open(state_path, "w"))

    issued = int(time.time())
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "writers.tokens"), "w") as f:
        f.writelines(jwt(secret, {"id": a, "role": role, "iat": issued, "exp": issued + 7 * 86400}) + "\n"
                     for a, role in [(c, "user") for c in customers] + [(q, "provider") for q in quoters])
    with open(os.path.join(out, "customers.tokens"), "w") as f:  # POST /jobs: customers only
        f.writelines(jwt(secret, {"id": c, "role": "user", "iat": issued, "exp": issued + 7 * 86400}) + "\n"
                     for c in customers)
    with open(os.path.join(out, "card.customers"), "w") as f:  # the token indexes that need a card
        f.writelines(f"{c}\n" for c in range(ACCEPT_CUSTOMERS))
    message_t = []
    for i in range(n):  # job i mod M, by its customer and its provider in turn
        cust, prov, job = message_jobs[i % len(message_jobs)]
        message_t.append(f"{cust if (i // len(message_jobs)) % 2 == 0 else prov} /jobs/{job}/messages")
    for name, lines in (("status", status_t), ("accept", accept_t), ("messages", message_t)):
        with open(os.path.join(out, f"{name}.targets"), "w") as f:
            f.writelines(line + "\n" for line in lines)


def jwt(secret, claims):
    def b64(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    body = b64(json.dumps(claims, separators=(",", ":")).encode())
    sig = hmac.new(secret.encode(), f"{head}.{body}".encode(), hashlib.sha256).digest()
    return f"{head}.{body}.{b64(sig)}"


def cmd_files(state_path, secret, out):
    state = json.load(open(state_path))
    now = int(time.time())

    def token(account_id, role):
        return jwt(secret, {"id": account_id, "role": role, "iat": now, "exp": now + 7 * 86400})

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "customer.token"), "w") as f:
        f.write(token(state["customer"], "user"))
    with open(os.path.join(out, "feed.token"), "w") as f:
        f.write(token(state["feed_provider"], "provider"))
    with open(os.path.join(out, "detail.paths"), "w") as f:
        f.writelines(f"/jobs/{j}\n" for j in state["detail_jobs"])
    with open(os.path.join(out, "quoters.tokens"), "w") as f:
        f.writelines(token(q, "provider") + "\n" for q in state["quoters"])
    jobs = list(state["open_filler_jobs"])
    random.Random(2).shuffle(jobs)
    with open(os.path.join(out, "open.jobs"), "w") as f:
        f.writelines(j + "\n" for j in jobs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["init", "grow", "files", "writes"])
    ap.add_argument("--engine", choices=["sqlite", "postgres"])
    ap.add_argument("--db")
    ap.add_argument("--state", required=True)
    ap.add_argument("--target", type=int)
    ap.add_argument("--secret")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.command == "files":
        return cmd_files(a.state, a.secret, a.out)
    db = Db(a.engine, a.db)
    if a.command == "init":
        cmd_init(db, a.state)
    elif a.command == "writes":
        cmd_writes(db, a.state, a.target, a.secret, a.out)
    else:
        cmd_grow(db, a.state, a.target)


if __name__ == "__main__":
    main()
