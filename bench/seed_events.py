#!/usr/bin/env python3
"""Seeds a database for bench/events.sh, straight into its tables (the service must have
migrated it): the accounts that hold the streams and the message threads the writer posts to.

  seed_events.py --engine E --db D --secret JWT_SECRET --accounts N --threads T --out DIR

E and D as for bench/seed_jobs.py (whose inserting and token minting this reuses). N customers
hold the streams (bench/events.sh opens 5 per account); the first T of them each own a QUOTED
job quoted by a provider of its own, whose thread the writer posts to as that provider, so each
message is an event for the customer's 5 streams. Writes DIR/streams.tokens (one customer token
a line) and DIR/writer.targets ("<provider token> <job id>" a line), the tokens minted with the
service's JWT secret as it would issue them (valid 7 days).
"""
import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seed_jobs import HASH, JOB_COLS, Db, job_row, jwt, new_id  # noqa: E402

ZIP = "40001"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", choices=["sqlite", "postgres"], required=True)
    ap.add_argument("--db", required=True)
    ap.add_argument("--secret", required=True)
    ap.add_argument("--accounts", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    db = Db(a.engine, a.db)
    rng = random.Random(25)
    now = int(time.time() * 1000)
    customers = [new_id(rng) for _ in range(a.accounts)]
    db.insert("users", ["id", "email", "password_hash", "name", "address", "zip", "created_at", "updated_at"],
              [(c, f"events-{i}-{rng.randrange(10**9)}@bench.example", HASH, f"Stream holder {i}", "1 Bench Street",
                ZIP, now, now) for i, c in enumerate(customers)])
    providers = [new_id(rng) for _ in range(a.threads)]
    db.insert("providers", ["id", "email", "password_hash", "name", "services", "service_zips", "headshots",
                            "id_doc_front", "id_doc_back", "created_at", "updated_at"],
              [(p, f"writer-{i}-{rng.randrange(10**9)}@bench.example", HASH, f"Writer {i}", '["lawncare"]',
                f'["{ZIP}"]', '["bench/headshot.jpg"]', "bench/front.jpg", "bench/back.jpg", now, now)
               for i, p in enumerate(providers)])
    db.insert("provider_services", ["provider_id", "service"], [(p, "lawncare") for p in providers])
    db.insert("provider_zips", ["provider_id", "zip"], [(p, ZIP) for p in providers])
    jobs = [job_row(rng, i + 1, customers[i], "lawncare", ZIP, "QUOTED", now) for i in range(a.threads)]
    db.insert("jobs", JOB_COLS, jobs)
    db.insert("quotes", ["id", "job_id", "provider_id", "service", "amount_cents", "platform_fee_cents", "total_cents",
                         "note", "status", "created_at", "updated_at", "seq"],
              [(new_id(rng), jobs[i][0], providers[i], "lawncare", 10_000, 1_800, 11_800, "Bench quote", "PENDING",
                now, now, a.threads + i + 1) for i in range(a.threads)])
    # no ANALYZE: statistics taken now would describe a one-row outbox, and SQLite would then
    # scan it rather than seek by id
    secs = int(time.time())

    def token(account_id, role):
        return jwt(a.secret, {"id": account_id, "role": role, "iat": secs, "exp": secs + 7 * 86400})

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "streams.tokens"), "w") as f:
        f.writelines(token(c, "user") + "\n" for c in customers)
    with open(os.path.join(a.out, "writer.targets"), "w") as f:
        f.writelines(f"{token(providers[i], 'provider')} {jobs[i][0]}\n" for i in range(a.threads))


if __name__ == "__main__":
    main()
