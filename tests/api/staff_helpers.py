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
from test_auth import jwt_parts, secret_of, sign

STAFF_ROLES = ["customer_support", "professional_support", "technical_support", "internal_audit"]
STAFF_FIELDS = {"id", "name", "email", "role", "createdAt"}
ELEVATION_FIELDS = {"id", "staffId", "staff", "targetId", "targetRole", "reason", "status", "createdAt",
                    "resolvedAt", "activatedAt", "expiresAt", "deactivatedAt", "updatedAt"}
UNAUTHORIZED = {"error": "Unauthorized"}
FORBIDDEN = {"error": "Forbidden"}
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
    now = int(time.time())
    base = {"id": "c" + uuid.uuid4().hex[:24], "role": "user", "iat": now, "exp": now + 3600}
    base.update(over)
    return base


def elevation_links(server, elevation_id, timeout=10):
    """(approve_url, deny_url) from the administrator's email about elevation_id, with the host
    the test talks to."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for mail in server.mails("admin@localhost"):
            found = {m.group(3): m for m in LINK_RE.finditer(mail["body"]) if m.group(2) == elevation_id}
            if len(found) == 2:
                return tuple(found[a].group(0).replace(found[a].group(1), server.url) for a in ("approve", "deny"))
        time.sleep(0.05)
    raise AssertionError(f"no approval email for elevation {elevation_id}")


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
    url = server.env["DATABASE_URL"]
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


def audit_verify(server):
    """Runs `marketplace audit verify` against the server's database: (exit code, output)."""
    p = subprocess.run([server.binary, "audit", "verify"], env=server.env, capture_output=True, text=True,
                       timeout=60)
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
