"""Helpers shared by test_staff.py, test_admin.py and test_support.py: staff accounts made through
POST /staff/create with the administrator's token, the elevation flow up to an impersonation
token, forged tokens signed with the server's own secret, and direct database access (python's
sqlite3 for SQLite, the private cluster's psql for PostgreSQL) for the tests that tamper with
rows or check that nothing dangles.
"""
import os
import re
import sqlite3
import subprocess
import time
import uuid

from conftest import admin_login, unique_email
from helpers import error_body, eventually
from test_auth import jwt_parts, secret_of, sign

STAFF_ROLES = ["customer_support", "professional_support", "technical_support", "internal_audit"]
STAFF_FIELDS = {"id", "name", "email", "role", "createdAt"}
ELEVATION_FIELDS = {"id", "staffId", "staff", "targetId", "targetRole", "reason", "status", "createdAt",
                    "resolvedAt", "activatedAt", "expiresAt", "deactivatedAt", "updatedAt"}
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
LINK_RE = re.compile(r"(http://localhost:\d+)/staff/elevation/(c[0-9a-z]{24})/(approve|deny)\?token=([0-9a-f]{64})")


def make_staff(api, role, admin=None, name="Staff Member", password="staff-pass-1"):
    """A new staff member of role: {id, token, email, password, name, role}."""
    email = unique_email(role.replace("_", "-"))
    r = api.post("/staff/create", token=admin or admin_login(api),
                 json={"name": name, "email": email, "password": password, "role": role})
    assert r.status_code == 201, r.text
    staff = r.json()
    r = api.post("/staff/login", json={"email": email, "password": password})
    assert r.status_code == 200, r.text
    return {**staff, "token": r.json()["token"], "password": password}


def claims(token):
    return jwt_parts(token)[1]


def forge(server, payload):
    """A token the server would have signed: HS256 under its own secret (JWT_SECRET, or the one
    it generated into its data directory)."""
    secret = server.env["JWT_SECRET"].encode() if server.env.get("JWT_SECRET") else secret_of(server)
    return sign(secret, {"alg": "HS256", "typ": "JWT"}, payload)


def forged_claims(**over):
    """Claims for forge(); they expire in a year, so the shared server's test clock, which other
    tests move forward, never finds them expired."""
    now = int(time.time())
    base = {"id": "c" + uuid.uuid4().hex[:24], "role": "user", "iat": now, "exp": now + 365 * 86400}
    base.update(over)
    return base


def elevation_links(server, elevation_id, timeout=10):
    """(approve_url, deny_url) from the administrator's email about elevation_id, with the host
    the test talks to."""
    def links():
        for mail in server.mails("admin@localhost"):
            found = {m.group(3): m for m in LINK_RE.finditer(mail["body"]) if m.group(2) == elevation_id}
            if len(found) == 2:
                return tuple(found[a].group(0).replace(found[a].group(1), server.url) for a in ("approve", "deny"))
        return None

    return eventually(links, timeout, f"the approval email for elevation {elevation_id}")


def link_get(api, url, **kw):
    """GET an emailed link (absolute URL) with the api's session."""
    kw.setdefault("timeout", 30)
    return api.session.get(url, **kw)


def request_elevation(api, staff, target_id, target_role="user", reason="Customer asked for help with a job"):
    r = api.post("/staff/elevation", token=staff["token"],
                 json={"targetId": target_id, "targetRole": target_role, "reason": reason})
    assert r.status_code == 201, r.text
    return r.json()


def approved_elevation(api, server, staff, target_id, target_role="user", **kw):
    e = request_elevation(api, staff, target_id, target_role, **kw)
    approve, _ = elevation_links(server, e["id"])
    r = link_get(api, approve)
    assert r.status_code == 200, r.text
    return e


def impersonate(api, server, staff, target_id, target_role="user"):
    """(elevation, impersonation token) for staff acting as the account."""
    e = approved_elevation(api, server, staff, target_id, target_role)
    r = api.post("/staff/impersonate", token=staff["token"], json={"elevationId": e["id"]})
    assert r.status_code == 200, r.text
    return e, r.json()["token"]


def sql(server, pg_cluster, statement):
    """Runs one SQL statement on the server's database outside the service; returns the rows
    as tuples of text (PostgreSQL) or values (SQLite)."""
    return sql_at(server.env["DATABASE_URL"], pg_cluster, statement)


def sql_at(url, pg_cluster, statement):
    """sql() on the database at url (a DATABASE_URL), with or without a server on it."""
    if url.startswith("sqlite:"):
        con = sqlite3.connect(url[len("sqlite:"):], timeout=30)
        try:
            rows = con.execute(statement).fetchall()
            con.commit()
            return rows
        finally:
            con.close()
    out = subprocess.run([os.path.join(pg_cluster.bindir, "psql"), url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                          "-c", statement], capture_output=True, text=True, check=True).stdout
    return [tuple(line.split("|")) for line in out.splitlines() if line]


def count(server, pg_cluster, statement):
    return int(sql(server, pg_cluster, statement)[0][0])


def audit_verify(server, *args, **env):
    """Runs `marketplace audit verify [args]` against the server's database and checkpoint file,
    with env overriding the server's environment: (exit code, output)."""
    p = subprocess.run([server.binary, "audit", "verify", *args], env={**server.env, **env}, capture_output=True,
                       text=True, timeout=60)
    return p.returncode, p.stdout + p.stderr


def database_before(pg_cluster, tmp_dir, version):
    """A database migrated up to `version` (inclusive), as the binaries of that time left it, for
    tests of a later migration: its DATABASE_URL (a file under tmp_dir on SQLite, a new database
    of the private cluster on PostgreSQL). The service applies the rest when it starts on it."""
    import glob
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "migrations")
    engine = "postgres" if pg_cluster else "sqlite"
    scripts = [p for p in sorted(glob.glob(os.path.join(root, engine, "*.sql")))
               if int(os.path.basename(p)[:4]) <= version]
    bookkeeping = ("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                   "applied_at BIGINT NOT NULL);" +
                   "".join(f"INSERT INTO schema_migrations VALUES ({int(os.path.basename(p)[:4])}, "
                           f"'{os.path.basename(p)[5:-4]}', 0);" for p in scripts))
    if not pg_cluster:
        path = os.path.join(tmp_dir, "before.db")
        con = sqlite3.connect(path)
        try:
            for p in scripts:
                with open(p, encoding="utf-8") as f:
                    con.executescript(f.read())
            con.executescript(bookkeeping)
            con.commit()
        finally:
            con.close()
        return "sqlite:" + path
    url = pg_cluster.new_database()
    psql = os.path.join(pg_cluster.bindir, "psql")
    for p in scripts:
        subprocess.run([psql, url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-f", p], check=True,
                       capture_output=True, text=True)
    subprocess.run([psql, url, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", bookkeeping], check=True,
                   capture_output=True, text=True)
    return url


# ---------------------------------------------------------------- the audit chain, from outside

AUDIT_COLUMNS = ["seq", "id", "kind", "elevation_id", "actor_id", "actor_role", "action", "target_id", "target_role",
                 "method", "path", "status", "body", "ref_seq", "created_at", "prev_hash", "hash"]
GENESIS = "0" * 64


def audit_rows(server, pg_cluster, table="audit_log"):
    """Every row of the audit log as dicts (NULL is None), in seq order."""
    import json
    url = server.env["DATABASE_URL"]
    if url.startswith("sqlite:"):
        con = sqlite3.connect(url[len("sqlite:"):], timeout=30)
        try:
            rows = con.execute(f"SELECT {', '.join(AUDIT_COLUMNS)} FROM {table} ORDER BY seq").fetchall()
        finally:
            con.close()
        return [dict(zip(AUDIT_COLUMNS, row)) for row in rows]
    out = subprocess.run([os.path.join(pg_cluster.bindir, "psql"), url, "-X", "-q", "-At", "-c",
                          f"SELECT COALESCE(jsonb_agg(a ORDER BY seq), '[]')::text FROM {table} a"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def audit_form(tag, row):
    """A record's canonical form (src/domain/staff/audit_chain.c) under tag."""
    def text(v):
        return b"-;" if v is None else str(len(str(v).encode())).encode() + b":" + str(v).encode() + b";"
    fields = [row["seq"], row["id"], row["kind"], row["elevation_id"], row["actor_id"], row["actor_role"],
              row["action"], row["target_id"], row["target_role"], row["method"], row["path"], row["status"] or None,
              row["body"], row["ref_seq"] or None, row["created_at"]]
    return tag.encode() + b"\n" + row["prev_hash"].encode() + b"\n" + b"".join(text(f) for f in fields)


def keyed_hash(key, row):
    """The hash the service writes: HMAC-SHA256 under the chain's key (bytes)."""
    import hashlib
    import hmac
    return hmac.new(key, audit_form("marketplace-audit-v2", row), hashlib.sha256).hexdigest()


def plain_hash(row):
    """The hash of records written before the chain was keyed, and what a forger without the key
    can compute."""
    import hashlib
    return hashlib.sha256(audit_form("marketplace-audit-v1", row)).hexdigest()


def derived_audit_key(server):
    """The chain's key when AUDIT_KEY is unset: derived from the server's JWT secret."""
    import hashlib
    import hmac
    secret = server.env["JWT_SECRET"].encode() if server.env.get("JWT_SECRET") else secret_of(server)
    return hmac.new(secret, b"audit-chain-key", hashlib.sha256).hexdigest().encode()


def rewrite_chain(server, pg_cluster, rows, hash_of, start=1):
    """Recomputes prev_hash and hash of rows (audit_rows, edited as the test likes: body and
    created_at) from record start on with hash_of(row), writes them and moves the tip: a
    forger's rewrite."""
    prev = GENESIS if start == 1 else next(r["hash"] for r in rows if r["seq"] == start - 1)
    statements = []
    for row in rows:
        if row["seq"] < start:
            continue
        row["prev_hash"] = prev
        row["hash"] = prev = hash_of(row)
        body = "NULL" if row["body"] is None else "'" + row["body"].replace("'", "''") + "'"
        statements.append(f"UPDATE audit_log SET prev_hash = '{row['prev_hash']}', hash = '{row['hash']}', "
                          f"body = {body}, created_at = {row['created_at']} WHERE seq = {row['seq']}")
    statements.append(f"UPDATE audit_tip SET seq = {rows[-1]['seq']}, hash = '{prev}' WHERE id = 1")
    for s in statements:
        sql(server, pg_cluster, s)


def checkpoints(server):
    """The lines of the server's checkpoint file ($DATA_DIR/audit-checkpoints)."""
    path = server.env.get("AUDIT_CHECKPOINT_FILE") or os.path.join(server.data_dir, "audit-checkpoints")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]
