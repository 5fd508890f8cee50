"""The audit check without blind spots (issue 31, item 6), through `marketplace audit verify`:
a chain rewritten without the key (plain SHA-256 from record 1, as records were hashed before
the chain was keyed) is refused from where migration 0023 recorded that the keyed chain starts;
in production a missing or empty checkpoint file fails the check once the chain has records
older than the checkpoint period; a checkpoint is written every 100 records (and every 60
seconds, test_staff.py) and logged (`audit checkpoint`), so a tail cut after one is reported,
from the file and from the log line given with --expect.

Spec: decisions.md "The audit trail"; operations.md "The audit trail: its key and its
checkpoints". The chain's other rules (altered, inserted, deleted and forged records, the key,
rows outside the chain) are tested in test_staff.py.
"""
import subprocess

from conftest import ADMIN_ENV, Api
from flow_helpers import ok
from staff_helpers import (
    audit_rows, checkpoints, count, impersonate, keyed_hash, make_staff, plain_hash, rewrite_chain, sql,
)

AUDIT_KEY = "an audit key of thirty-two bytes or more, kept elsewhere"
# what `audit verify` needs to run with APP_ENV=production (the key is AUDIT_KEY, as the server's)
PRODUCTION = {"APP_ENV": "production", "JWT_SECRET": "p" * 48, "BCRYPT_COST": "12"}


def verify(srv, *args, **env):
    """`marketplace audit verify [args]` on the server's database: the finished process (exit
    code, stdout and stderr apart)."""
    return subprocess.run([srv.binary, "audit", "verify", *args], env={**srv.env, **env}, capture_output=True,
                          text=True, timeout=60)


def audited_server(server_factory, **env):
    """A server keyed with AUDIT_KEY whose chain holds a few records: (server, api, an
    impersonation token, each of whose requests appends two records)."""
    srv = server_factory(AUDIT_KEY=AUDIT_KEY, **ADMIN_ENV, **env)
    api = Api(srv)
    e, token = impersonate(api, srv, make_staff(api, "customer_support"), api.register_user()["id"])
    ok(api.get("/users/me", token=token))
    return srv, api, token


def test_a_chain_rewritten_without_the_key_is_refused(server_factory, pg_cluster):
    """The attack: every record recomputed with plain SHA-256 (the form of records written before
    the chain was keyed, which needs no key) verified, as a chain from before the key."""
    srv, *_ = audited_server(server_factory)
    assert count(srv, pg_cluster, "SELECT keyed_from FROM audit_tip") == 1  # a chain keyed from its start
    rows = audit_rows(srv, pg_cluster)
    rows[1]["body"] = '{"reason":"nothing to see"}'
    rewrite_chain(srv, pg_cluster, rows, plain_hash)
    p = verify(srv, AUDIT_CHECKPOINT_FILE=srv.dir + "/none")
    assert p.returncode == 1, p
    assert p.stdout == (f"audit chain broken at record 1 ({rows[0]['id']}): its hash is a plain SHA-256 though the "
                        "chain is keyed from record 1 on (migration 0023; rewritten without the key)\n"), p
    # the recorded start moved past the tip, or erased, is a broken chain too
    last = rows[-1]["seq"]
    sql(srv, pg_cluster, f"UPDATE audit_tip SET keyed_from = {last + 2} WHERE id = 1")
    p = verify(srv)
    assert p.returncode == 1 and (f"audit chain broken at record {last + 2}: the keyed chain is recorded to start "
                                  f"there (audit_tip.keyed_from, migration 0023) but the chain ends at record {last} "
                                  "(the start was moved)") in p.stdout, p
    sql(srv, pg_cluster, "UPDATE audit_tip SET keyed_from = 0 WHERE id = 1")
    p = verify(srv)
    assert p.returncode == 1 and "audit chain broken at record 1: where the keyed chain starts" in p.stdout, p


def test_production_requires_the_checkpoint_file(server_factory, pg_cluster, tmp_path):
    srv, *_ = audited_server(server_factory)
    missing, empty = str(tmp_path / "missing"), tmp_path / "empty"
    empty.write_text("")
    # records younger than the checkpoint period (60 s): no checkpoint is due yet
    p = verify(srv, **PRODUCTION, AUDIT_CHECKPOINT_FILE=missing)
    assert p.returncode == 0 and f"checkpoints: 0 held (no file at {missing})" in p.stdout, p
    # the same records written two minutes ago (by the key's holder: the chain holds)
    rows = audit_rows(srv, pg_cluster)
    for row in rows:
        row["created_at"] -= 2 * 60 * 1000
    rewrite_chain(srv, pg_cluster, rows, lambda row: keyed_hash(AUDIT_KEY.encode(), row))
    for path, what in ((missing, "does not exist"), (str(empty), "holds no checkpoint")):
        p = verify(srv, **PRODUCTION, AUDIT_CHECKPOINT_FILE=path)
        assert p.returncode == 2, p
        assert p.stdout == "", p
        assert p.stderr.startswith(f"audit verify: checkpoint file missing: {path} {what}, yet record 1 was written "
                                   "at "), p
    # outside production, as before: no file is no checkpoint
    p = verify(srv, AUDIT_CHECKPOINT_FILE=missing)
    assert p.returncode == 0 and f"checkpoints: 0 held (no file at {missing})" in p.stdout, p
    # with a checkpoint in the file production passes; --expect does not stand in for the file
    last = rows[-1]
    p = verify(srv, "--expect", f"{last['seq']}:{last['hash']}", **PRODUCTION, AUDIT_CHECKPOINT_FILE=missing)
    assert p.returncode == 2 and "checkpoint file missing" in p.stderr, p
    empty.write_text(f"{last['seq']}:{last['hash']} 2026-01-01T00:00:00.000Z\n")
    p = verify(srv, **PRODUCTION, AUDIT_CHECKPOINT_FILE=str(empty))
    assert p.returncode == 0 and "checkpoints: 1 held" in p.stdout, p


def test_a_checkpoint_every_100_records_reports_a_tail_cut(server_factory, pg_cluster, tmp_path):
    """The attack: the last records deleted and the tip moved back went unseen for up to 5 minutes
    (the checkpoint period). Now a checkpoint follows every 100 records, with its log line."""
    path = str(tmp_path / "checkpoints")
    srv, api, token = audited_server(server_factory, AUDIT_CHECKPOINT_FILE=path)

    def logged():
        return [x for x in srv.log_lines() if x.get("msg") == "audit checkpoint"]

    tip = count(srv, pg_cluster, "SELECT seq FROM audit_tip")
    for _ in range((100 - tip + 1) // 2):  # two records each: the tip reaches 100 or 101
        ok(api.get("/users/me", token=token))
    line = srv.wait_log(lambda x: x.get("msg") == "audit checkpoint")[-1]
    rows = audit_rows(srv, pg_cluster)
    assert rows[-1]["seq"] in (100, 101)
    assert 100 <= line["seq"] <= rows[-1]["seq"] and line["hash"] == rows[line["seq"] - 1]["hash"], line
    assert (line["file"], line["written"]) == (path, True)
    cp = f"{line['seq']}:{line['hash']}"
    # the only one: none before the 100th record (the clock did not move a minute)
    assert [x.split(" ")[0] for x in checkpoints(srv)] == [cp] and len(logged()) == 1
    # a start writes one (the chain may have grown while the instance was down)
    srv.restart()
    assert srv.wait_log(lambda x: x.get("msg") == "audit checkpoint", count=3)[-1]["seq"] == rows[-1]["seq"]
    p = verify(srv)
    assert p.returncode == 0 and "checkpoints: 3 held" in p.stdout, p

    # the last 3 records that checkpoint covered, cut off with the tip moved back
    keep = rows[line["seq"] - 4]
    sql(srv, pg_cluster, f"DELETE FROM audit_log WHERE seq > {keep['seq']}")
    sql(srv, pg_cluster, f"UPDATE audit_tip SET seq = {keep['seq']}, hash = '{keep['hash']}' WHERE id = 1")
    p = verify(srv)
    assert p.returncode == 1, p
    assert p.stdout == (f"audit chain broken at record {line['seq']}: checkpoint {cp} ({path} line 1) no longer "
                        f"matches: the chain ends at record {keep['seq']} (records were removed from the end)\n"), p
    # the log line alone (the file lost with the host) tells the same
    p = verify(srv, "--expect", cp, AUDIT_CHECKPOINT_FILE=str(tmp_path / "lost"))
    assert p.returncode == 1 and f"checkpoint {cp} (--expect) no longer matches: the chain ends at record " \
        f"{keep['seq']}" in p.stdout, p
