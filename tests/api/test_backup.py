"""Backups and restores (issue 35; docs/operations.md "Backups and restores"): the restore drill
on each engine (writes go on while `marketplace backup` runs; the backup restored into a new
DATA_DIR, a new database on PostgreSQL, serves every record written before it began as it was
and none written after it ended, its photos with their checksums, and `audit verify` passes),
the refusals (a damaged file, a target that is not empty, a schema newer than the binary, a
DEST that holds something), a backup to and from s3://bucket/prefix, scheduled backups keeping
BACKUP_KEEP copies with their /metrics, and the retention of the tables that grow with time."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import ADMIN_ENV, Api, Server, admin_login, unique_email
from flow_helpers import Flow, ok
from helpers import eventually, png_bytes
from staff_helpers import audit_verify, make_staff, sql

FILE_URL = re.compile(r"https?://[^/\"]+/files/([^?\"]+)\?[^\"]*")


def run(binary, args, env, timeout=120):
    return subprocess.run([binary, *args], env=env, capture_output=True, text=True, timeout=timeout)


def world(api, admin, n=0):
    """A customer and a provider with a completed, paid job, a text and a photo message, a
    partial refund by a customer-support member (a staff action in the audit trail)."""
    f = Flow(api, amount=80).completed()
    ok(api.post(f"/jobs/{f.job_id}/messages", token=f.user["token"], json={"content": f"Thanks {n}"}), 201)
    m = ok(api.post(f"/jobs/{f.job_id}/messages/photo", token=f.pro["token"],
                    files={"photo": ("done.png", png_bytes(300 + n), "image/png")}), 201)
    staff = make_staff(api, "customer_support", admin)
    r = api.post(f"/staff/payments/{f.job_id}/refund", token=staff["token"],
                 json={"amount": 5, "reason": "Arrived late"})
    assert r.status_code == 200, r.text
    f.photo_url = m["content"][len("[IMAGE]"):]
    return f


def export(api, f):
    """Both sides' exports with file links reduced to their keys (links carry the server's
    address and expiry) and the export's own time dropped."""
    out = {}
    for path, token in (("/users/me/export", f.user["token"]), ("/providers/me/export", f.pro["token"])):
        body = ok(api.get(path, token=token))
        body.pop("exportedAt", None)
        out[path] = FILE_URL.sub(lambda m: "file:" + m.group(1), json.dumps(body, sort_keys=True))
    return out


def photo_sha(api, url):
    local = FILE_URL.match(url)
    r = api.get(url[url.index("/files/"):])
    assert r.status_code == 200, (local.group(1), r.status_code)
    return hashlib.sha256(r.content).hexdigest()


def login_status(api, f):
    return api.post("/auth/login", json={"email": f.user["email"], "password": "password123"}).status_code


def new_target(binary, pg_cluster):
    """A server not started yet on an empty DATA_DIR and, on PostgreSQL, an empty database."""
    return Server(binary, pg_cluster.new_database() if pg_cluster else None, dict(ADMIN_ENV, DB_POOL_SIZE="4"))


@pytest.fixture(scope="module")
def drill(request, make_server, pg_cluster):
    """A server with worlds written before a backup, during it and after it, and the backup."""
    binary = request.config.getoption("--binary")
    srv = make_server(**ADMIN_ENV)
    api = Api(srv)
    admin = admin_login(api)
    before = [world(api, admin, i) for i in range(2)]
    api.wait_queue_idle()
    exports = [export(api, f) for f in before]
    photos = [photo_sha(api, f.photo_url) for f in before]
    stop = threading.Event()
    during = []

    def writes():
        client = Api(srv)
        while not stop.is_set():
            during.append(world(client, admin, 10 + len(during)))

    t = threading.Thread(target=writes)
    t.start()
    time.sleep(0.3)  # writes are under way
    checkpoints = os.path.exists(os.path.join(srv.data_dir, "audit-checkpoints"))
    root = tempfile.mkdtemp(prefix="mp-backup-")
    dest = os.path.join(root, "one")
    p = run(binary, ["backup", dest], srv.env)
    stop.set()
    t.join(60)
    assert p.returncode == 0, p.stdout + p.stderr
    after = world(api, admin, 99)
    yield {"binary": binary, "server": srv, "api": api, "dest": dest, "root": root, "before": before,
           "exports": exports, "photos": photos, "after": after, "output": p.stdout + p.stderr, "during": during,
           "checkpoints": checkpoints}
    shutil.rmtree(root, ignore_errors=True)


def test_backup_writes_a_manifest_of_every_file(drill, engine):
    dest = drill["dest"]
    m = json.load(open(os.path.join(dest, "manifest.json")))
    assert m["engine"] == engine and m["service"] == "marketplace" and re.fullmatch(r"\d+\.\d+\.\d+\S*",
                                                                                      m["serviceVersion"])
    assert m["schemaVersion"] >= 25 and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", m["createdAt"])
    assert m["tables"]["users"] >= 2 and m["tables"]["payment_refunds"] >= 2 and m["tables"]["audit_log"] >= 2
    db_file = "database.pgdump" if engine == "postgres" else "database.sqlite"
    assert db_file in m["files"]
    # the checkpoint file, when the server had written one (at start with records, every 100 or 60 s)
    assert ("audit-checkpoints" in m["files"]) == drill["checkpoints"]
    assert any(name.startswith("files/") for name in m["files"])
    for name, f in m["files"].items():
        data = open(os.path.join(dest, name), "rb").read()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["size"], f["sha256"]), name
    # no terminal: one log line per step
    steps = [json.loads(line)["step"] for line in drill["output"].splitlines() if line.startswith("{")]
    assert any(s.startswith("database copied") for s in steps) and any("written and checked" in s for s in steps)


def test_restore_drill(drill, pg_cluster):
    target = new_target(drill["binary"], pg_cluster)
    try:
        p = run(drill["binary"], ["restore", drill["dest"]], target.env)
        assert p.returncode == 0, p.stdout + p.stderr
        assert re.search(r"^users\s+(\d+)\s+\1$", p.stdout, re.M), p.stdout  # the counts side by side
        assert "audit trail verified" in p.stdout
        steps = [json.loads(line)["step"] for line in p.stderr.splitlines() + p.stdout.splitlines()
                 if line.startswith("{")]
        if pg_cluster:  # pg_restore leaves no statistics: the restore gathers them
            assert "statistics gathered (ANALYZE)" in steps, steps
            assert sql(target, pg_cluster, "SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'payments' "
                                           "AND last_analyze IS NOT NULL") == [("1",)]
        else:
            assert not any(s.startswith("statistics") for s in steps), steps
        target.start()
        api = Api(target)
        for f, before, sha in zip(drill["before"], drill["exports"], drill["photos"]):
            assert export(api, f) == before
            assert photo_sha(api, f.photo_url) == sha
        assert login_status(api, drill["after"]) == 401  # written after the backup ended: not there
        assert login_status(api, drill["before"][0]) == 200
        rc, out = audit_verify(target)
        assert rc == 0, out
    finally:
        target.stop()
        target.cleanup()


def test_restore_refuses_a_target_that_is_not_empty(drill, pg_cluster):
    target = new_target(drill["binary"], pg_cluster)
    try:
        os.makedirs(target.data_dir)
        open(os.path.join(target.data_dir, "notes.txt"), "w").write("mine")
        p = run(drill["binary"], ["restore", drill["dest"]], target.env)
        assert p.returncode == 2 and "restore: refused: DATA_DIR" in p.stderr and "is not empty" in p.stderr, p.stderr
        if pg_cluster:  # an empty DATA_DIR, a database that is not empty
            os.remove(os.path.join(target.data_dir, "notes.txt"))
            migrated = subprocess.run([drill["binary"], "migrate"], env=target.env, capture_output=True)
            assert migrated.returncode == 0
            shutil.rmtree(target.data_dir)
            p = run(drill["binary"], ["restore", drill["dest"]], target.env)
            assert p.returncode == 2 and "the database is not empty" in p.stderr, p.stderr
    finally:
        target.cleanup()


def copy_of(drill, edit):
    bad = os.path.join(drill["root"], f"copy-{time.monotonic_ns()}")
    shutil.copytree(drill["dest"], bad)
    edit(bad)
    return bad


def test_restore_refuses_a_damaged_file_and_writes_nothing(drill, pg_cluster, engine):
    def flip(d):
        name = sorted(n for n in os.listdir(os.path.join(d, "files")))[0]
        path = os.path.join(d, "files", name)
        data = bytearray(open(path, "rb").read())
        data[len(data) // 2] ^= 0xFF
        open(path, "wb").write(bytes(data))

    def truncate_db(d):
        name = "database.pgdump" if engine == "postgres" else "database.sqlite"
        with open(os.path.join(d, name), "r+b") as f:
            f.truncate(1000)

    for edit, named in ((flip, "files/"), (truncate_db, "database.")):
        bad = copy_of(drill, edit)
        target = new_target(drill["binary"], pg_cluster)
        try:
            p = run(drill["binary"], ["restore", bad], target.env)
            assert p.returncode == 2, p.stdout + p.stderr
            assert "restore: refused: checksum mismatch on " + named in p.stderr, p.stderr
            assert "nothing was restored" in p.stderr
            left = [n for n in os.listdir(target.data_dir) if n != "jwt_secret"]
            assert left == [], left
            if pg_cluster:
                assert sql(target, pg_cluster, "SELECT COUNT(*) FROM information_schema.tables "
                                               "WHERE table_schema = 'public'")[0][0] == "0"
        finally:
            target.cleanup()


def test_restore_refuses_a_schema_newer_than_the_binary(drill, pg_cluster):
    def newer(d):
        path = os.path.join(d, "manifest.json")
        m = json.load(open(path))
        m["schemaVersion"] = 9999
        m["serviceVersion"] = "9.0.0"
        json.dump(m, open(path, "w"))

    bad = copy_of(drill, newer)
    target = new_target(drill["binary"], pg_cluster)
    try:
        p = run(drill["binary"], ["restore", bad], target.env)
        assert p.returncode == 2, p.stdout + p.stderr
        assert re.search(r"restore: refused: the backup's schema version 9999 is newer than this binary's \d+ "
                         r"\(the backup was taken by marketplace 9\.0\.0\)", p.stderr), p.stderr
    finally:
        target.cleanup()


def test_restore_refuses_what_is_not_a_backup(drill, pg_cluster):
    target = new_target(drill["binary"], pg_cluster)
    try:
        empty = tempfile.mkdtemp(prefix="mp-nobackup-")
        p = run(drill["binary"], ["restore", empty], target.env)
        assert p.returncode == 2 and "holds no readable manifest.json" in p.stderr, p.stderr
        os.rmdir(empty)
    finally:
        target.cleanup()


def test_backup_refuses_a_destination_that_holds_something(drill):
    p = run(drill["binary"], ["backup", drill["dest"]], drill["server"].env)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "backup: refused: " in p.stderr and "is not an empty directory" in p.stderr


@pytest.mark.parametrize("args", [["backup"], ["restore"], ["backup", "a", "b"], ["restore", "--x"]])
def test_backup_and_restore_need_one_argument(request, args):
    p = run(request.config.getoption("--binary"), args, {"PATH": os.environ.get("PATH", "")})
    assert p.returncode == 2 and "unknown command" in p.stderr


# ---------------------------------------------------------------- s3://bucket/prefix

def test_backup_to_s3_and_restore_from_it(request, make_server, pg_cluster):
    from fake_s3 import FakeS3
    fake = FakeS3("AKIABACKUPTEST000001", "backup/secret", "us-east-1", "mp-store").start()
    try:
        s3 = {"S3_ENDPOINT": fake.url, "S3_BUCKET": "mp-store", "S3_REGION": "us-east-1",
              "S3_ACCESS_KEY_ID": "AKIABACKUPTEST000001", "S3_SECRET_ACCESS_KEY": "backup/secret"}
        srv = make_server(**ADMIN_ENV, **s3)
        api = Api(srv)
        f = world(api, admin_login(api))
        api.wait_queue_idle()
        before = export(api, f)
        binary = request.config.getoption("--binary")
        p = run(binary, ["backup", "s3://mp-store/backups/nightly"], srv.env)
        assert p.returncode == 0, p.stdout + p.stderr
        m = json.loads(fake.objects["backups/nightly/manifest.json"][0])
        assert m["storage"] == "s3" and not any(n.startswith("files/") for n in m["files"])
        # the stored objects stay in the bucket: the manifest lists each with its checksum
        photo_key = FILE_URL.match(f.photo_url).group(1)
        assert m["objects"][photo_key]["sha256"] == hashlib.sha256(fake.objects[photo_key][0]).hexdigest()
        assert not [k for k in m["objects"] if k.startswith("backups/")]
        for name, entry in m["files"].items():
            assert hashlib.sha256(fake.objects[f"backups/nightly/{name}"][0]).hexdigest() == entry["sha256"]
        p = run(binary, ["backup", "s3://mp-store/backups/nightly"], srv.env)
        assert p.returncode == 2 and "already holds a backup" in p.stderr, p.stderr

        target = Server(binary, pg_cluster.new_database() if pg_cluster else None, dict(s3, DB_POOL_SIZE="4"))
        try:
            p = run(binary, ["restore", "s3://mp-store/backups/nightly"], target.env)
            assert p.returncode == 0, p.stdout + p.stderr
            assert re.search(r"stored objects: \d+ in the bucket as the backup lists them", p.stdout), p.stdout
            target.start()
            assert export(Api(target), f) == before
            assert photo_sha(Api(target), f.photo_url) == photo_sha(api, f.photo_url)
        finally:
            target.stop()
            target.cleanup()
        with fake.lock:
            del fake.objects[photo_key]  # an object lost from the bucket since
        target = Server(binary, pg_cluster.new_database() if pg_cluster else None, dict(s3, DB_POOL_SIZE="4"))
        try:
            p = run(binary, ["restore", "s3://mp-store/backups/nightly"], target.env)
            assert p.returncode == 1, p.stdout + p.stderr
            assert f"restore: stored object {photo_key} is missing in the bucket" in p.stderr
            assert "of the" in p.stderr and "stored objects the backup names are missing or changed" in p.stderr
        finally:
            target.cleanup()
    finally:
        fake.stop()


# ---------------------------------------------------------------- scheduled backups

def metric(api, name):
    text = api.get("/metrics").text
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


def test_scheduled_backups_keep_backup_keep_copies(server_factory):
    dest = tempfile.mkdtemp(prefix="mp-scheduled-")
    try:
        srv = server_factory(BACKUP_DEST=dest, BACKUP_INTERVAL="1h", BACKUP_KEEP="2")
        api = Api(srv)
        assert metric(api, "backup_failures_total") == 0
        taken = lambda: sorted(n for n in os.listdir(dest) if n.startswith("backup-"))  # noqa: E731
        eventually(lambda: len(taken()) >= 1, 20, "the start's backup")
        seen = set(taken())
        for hour in range(3):
            api.advance_clock(3600 * 1000)
            eventually(lambda: set(taken()) - seen, 20, f"the backup of hour {hour + 1}")
            seen |= set(taken())
        api.wait_queue_idle()
        names = taken()
        assert len(names) == 2 and names == sorted(seen)[-2:], (names, seen)
        assert not [n for n in os.listdir(dest) if not n.startswith("backup-")]  # no partial one left
        for n in names:
            m = json.load(open(os.path.join(dest, n, "manifest.json")))
            assert m["tables"]["users"] >= 0
        assert metric(api, "backup_last_success_timestamp_seconds") > time.time() - 600
        assert metric(api, "backup_failures_total") == 0
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def test_scheduled_backups_to_s3_keep_backup_keep_copies(server_factory):
    from fake_s3 import FakeS3
    fake = FakeS3("AKIABACKUPTEST000002", "backup/secret2", "us-east-1", "mp-vault").start()
    try:
        srv = server_factory(S3_ENDPOINT=fake.url, S3_BUCKET="mp-vault", S3_REGION="us-east-1",
                             S3_ACCESS_KEY_ID="AKIABACKUPTEST000002", S3_SECRET_ACCESS_KEY="backup/secret2",
                             BACKUP_DEST="s3://mp-vault/sched/", BACKUP_INTERVAL="1h", BACKUP_KEEP="1")
        api = Api(srv)

        def index():
            with fake.lock:
                entry = fake.objects.get("sched/backups.json")
            return json.loads(entry[0]) if entry else []

        eventually(lambda: len(index()) == 1, 20, "the start's backup")
        first = index()[0]
        api.advance_clock(3600 * 1000)
        eventually(lambda: index() and index()[0] != first, 20, "the next hour's backup")
        names = index()
        assert len(names) == 1, names
        with fake.lock:
            keys = sorted(fake.objects)
        assert f"sched/{names[0]}/manifest.json" in keys
        assert not [k for k in keys if k.startswith(f"sched/{first}/")], keys  # the older one removed
        assert metric(api, "backup_failures_total") == 0
    finally:
        fake.stop()


def test_a_failed_scheduled_backup_is_counted_and_logged(server_factory):
    blocker = tempfile.NamedTemporaryFile(prefix="mp-not-a-dir-", delete=False)
    try:
        srv = server_factory(BACKUP_DEST=os.path.join(blocker.name, "sub"), BACKUP_INTERVAL="1h")
        api = Api(srv)
        eventually(lambda: metric(api, "backup_failures_total") >= 1, 20, "a failed backup")
        assert metric(api, "backup_last_success_timestamp_seconds") == 0
        line = srv.wait_log(lambda e: e.get("msg") == "backup failed")[0]
        assert line["level"] == "error" and "cannot create" in line["error"], line
    finally:
        os.unlink(blocker.name)


@pytest.mark.parametrize("env, message", [
    ({"BACKUP_INTERVAL": "1h"}, "BACKUP_INTERVAL needs BACKUP_DEST"),
    ({"BACKUP_INTERVAL": "soon", "BACKUP_DEST": "/tmp"}, "BACKUP_INTERVAL must be off or a duration"),
    ({"BACKUP_KEEP": "0"}, "BACKUP_KEEP must be an integer from 1"),
    ({"RETAIN_EVENTS": "1x"}, "RETAIN_EVENTS must be a duration"),
    ({"RETAIN_IDEMPOTENCY": "1h", "APP_ENV": "production", "JWT_SECRET": "x" * 40},
     "RETAIN_IDEMPOTENCY below its default is refused in production"),
])
def test_backup_and_retention_settings_are_checked(request, env, message):
    d = tempfile.mkdtemp(prefix="mp-cfg-")
    try:
        p = run(request.config.getoption("--binary"), ["migrate"],
                {"PATH": os.environ.get("PATH", ""), "DATA_DIR": d, "APP_ENV": "test", **env})
        assert p.returncode != 0 and message in p.stderr, p.stderr
    finally:
        shutil.rmtree(d, ignore_errors=True)
