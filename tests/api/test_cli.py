"""The command line: help, version, unknown commands, migrate and admin create (decisions
section 1), run directly against a fresh data directory and database."""
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from conftest import PG_ENV, free_port, unique_email
from helpers import SANITIZER_MARKERS, error_body, serving
from staff_helpers import UNAUTHORIZED, elevation_links, impersonate, link_get, request_elevation
from test_system import db_rows


@pytest.fixture
def binary(request):
    return request.config.getoption("--binary")


@pytest.fixture
def cli_env(pg_cluster):
    """Environment with its own DATA_DIR and, on postgres, its own database."""
    d = tempfile.mkdtemp(prefix="mp-cli-")
    data = os.path.join(d, "data")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DATA_DIR": data, "BCRYPT_COST": "4",
           "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23"}
    if pg_cluster:
        env["DATABASE_URL"] = pg_cluster.new_database()
        env.update(PG_ENV)
    yield env
    shutil.rmtree(d, ignore_errors=True)


def run(binary, *args, env=None, stdin=None, timeout=30):
    p = subprocess.run([binary, *args], env=env or {"PATH": os.environ.get("PATH", "")}, input=stdin,
                       capture_output=True, text=True, timeout=timeout)
    assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr[-5000:]
    return p


def database_url(env):
    return env.get("DATABASE_URL") or f"sqlite:{env['DATA_DIR']}/marketplace.db"


def admins(env):
    return db_rows(database_url(env), env["DATA_DIR"], "SELECT email, password_hash FROM admins ORDER BY email")


# ---------------------------------------------------------------- help, version, unknown

@pytest.mark.parametrize("flag", ["--help"])
def test_help(binary, flag):
    p = run(binary, flag)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for word in ("serve", "migrate", "admin create", "--email", "--help", "--version"):
        assert word in out, (word, out)


def test_version(binary):
    p = run(binary, "--version")
    assert p.returncode == 0, p.stderr
    assert re.fullmatch(r"marketplace \d+\.\d+\.\d+\S*\n?", p.stdout), p.stdout


@pytest.mark.parametrize("args", [["bogus"], ["--bogus"], ["admin"], ["admin", "delete"], ["Serve"]])
def test_unknown_command_exits_2(binary, args, cli_env):
    p = run(binary, *args, env=cli_env)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip(), "an unknown command is explained on stderr"
    assert not os.path.exists(os.path.join(cli_env["DATA_DIR"], "marketplace.db"))


# ---------------------------------------------------------------- migrate

def table_names(env):
    url = database_url(env)
    if url.startswith("sqlite:"):
        sql = "SELECT name FROM sqlite_master WHERE type = 'table'"
    else:
        sql = "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
    return {r[0] for r in db_rows(url, env["DATA_DIR"], sql)}


def test_migrate_creates_the_schema(binary, cli_env, engine):
    p = run(binary, "migrate", env=cli_env)
    assert p.returncode == 0, p.stderr
    if engine == "sqlite":
        assert os.path.isfile(os.path.join(cli_env["DATA_DIR"], "marketplace.db"))
    tables = table_names(cli_env)
    assert {"users", "providers", "admins", "password_reset_tokens", "job_queue"} <= tables, tables
    # idempotent: a second run applies nothing and succeeds
    p = run(binary, "migrate", env=cli_env)
    assert p.returncode == 0, p.stderr
    assert table_names(cli_env) == tables


def test_migrate_with_an_explicit_sqlite_url(binary, cli_env, engine):
    if engine != "sqlite":
        pytest.skip("SQLite URL form only")
    path = os.path.join(cli_env["DATA_DIR"], "other.db")
    os.makedirs(cli_env["DATA_DIR"], exist_ok=True)
    p = run(binary, "migrate", env=dict(cli_env, DATABASE_URL=f"sqlite:{path}"))
    assert p.returncode == 0, p.stderr
    assert os.path.isfile(path)
    assert not os.path.exists(os.path.join(cli_env["DATA_DIR"], "marketplace.db"))


def test_migrate_fails_on_an_unreachable_database(binary, cli_env):
    url = f"postgres://postgres@127.0.0.1:{free_port()}/nothing"
    p = run(binary, "migrate", env=dict(cli_env, DATABASE_URL=url))
    assert p.returncode != 0
    assert p.stderr.strip()


# ---------------------------------------------------------------- admin create

def test_admin_create_lowercases_the_email(binary, cli_env):
    p = run(binary, "admin", "create", "--email", "Admin@Example.com", env=cli_env, stdin="s3cret-password\n")
    assert p.returncode == 0, p.stderr
    rows = admins(cli_env)
    assert [r[0] for r in rows] == ["admin@example.com"]
    assert rows[0][1].startswith("$2") and "s3cret-password" not in rows[0][1]


def test_admin_create_twice_updates_the_password(binary, cli_env):
    p = run(binary, "admin", "create", "--email", "ops@example.com", env=cli_env, stdin="first-password\n")
    assert p.returncode == 0, p.stderr
    first = admins(cli_env)
    p = run(binary, "admin", "create", "--email", "OPS@example.com", env=cli_env, stdin="second-password\n")
    assert p.returncode == 0, p.stderr
    second = admins(cli_env)
    assert [r[0] for r in second] == ["ops@example.com"]
    assert second[0][1] != first[0][1]


def test_admin_create_password_without_newline(binary, cli_env):
    p = run(binary, "admin", "create", "--email", "nonl@example.com", env=cli_env, stdin="no-newline-pass")
    assert p.returncode == 0, p.stderr
    assert [r[0] for r in admins(cli_env)] == ["nonl@example.com"]


@pytest.mark.parametrize("stdin", ["short\n", "1234567\n", "\n", "", "x" * 73 + "\n"])
def test_admin_create_refuses_a_bad_password(binary, cli_env, stdin):
    p = run(binary, "admin", "create", "--email", "weak@example.com", env=cli_env, stdin=stdin)
    assert p.returncode != 0, p.stdout
    assert p.stderr.strip()
    if os.path.exists(os.path.join(cli_env["DATA_DIR"], "marketplace.db")) or "DATABASE_URL" in cli_env:
        try:
            rows = admins(cli_env)
        except Exception:  # noqa: BLE001 - no schema yet: certainly no administrator
            rows = []
        assert rows == []


@pytest.mark.parametrize("args", [[], ["--email"], ["--email", "not-an-email"], ["--email", "a@b"]])
def test_admin_create_needs_a_valid_email(binary, cli_env, args):
    p = run(binary, "admin", "create", *args, env=cli_env, stdin="good-password\n")
    assert p.returncode != 0, p.stdout
    assert p.stderr.strip()


def test_admin_create_in_production_says_administrators_exist_only_outside_it(binary, cli_env):
    env = dict(cli_env, APP_ENV="production", JWT_SECRET="p" * 40, BCRYPT_COST="12")
    p = run(binary, "admin", "create", "--email", "prod-admin@example.com", env=env, stdin="good-password\n")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "administrators exist only outside production" in p.stderr and "staff create" in p.stderr
    assert "saved" not in p.stdout
    p = run(binary, "admin", "create", "--email", "dev-admin@example.com", env=cli_env, stdin="good-password\n")
    assert p.returncode == 0, p.stderr
    assert [r[0] for r in admins(cli_env)] == ["dev-admin@example.com"]  # nothing of the production run


# ---------------------------------------------------------------- staff create

@pytest.fixture
def shared_db_env(server):
    """The CLI's environment on the shared server's database (as an operator runs it beside
    the service)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DATA_DIR": server.data_dir, "BCRYPT_COST": "4",
           "DATABASE_URL": server.env["DATABASE_URL"], "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:exitcode=23",
           **PG_ENV}
    return env


def staff_login(api, email, password):
    return api.post("/staff/login", json={"email": email, "password": password})


def test_staff_create_then_update_from_the_command_line(binary, shared_db_env, server, api):
    email = unique_email("ops")
    p = run(binary, "staff", "create", "--email", email.upper(), "--name", "Night Desk", "--role", "customer_support",
            env=shared_db_env, stdin="first-password\n")
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {email} created (customer_support)"), p.stderr
    r = staff_login(api, email, "first-password")
    assert r.status_code == 200, r.text
    first_token = r.json()["token"]
    me = api.get("/staff/me", token=first_token).json()
    assert (me["email"], me["name"], me["role"]) == (email, "Night Desk", "customer_support")

    # the same email again: name, role and password change; the old password and the token of
    # the old role stop working
    p = run(binary, "staff", "create", "--email", email, "--name", "Day Desk", "--role", "professional_support",
            env=shared_db_env, stdin="second-password")
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {email} updated (professional_support)"), p.stderr
    assert staff_login(api, email, "first-password").status_code == 401
    assert api.get("/staff/me", token=first_token).status_code == 401
    token = staff_login(api, email, "second-password").json()["token"]
    me2 = api.get("/staff/me", token=token).json()
    assert (me2["id"], me2["name"], me2["role"]) == (me["id"], "Day Desk", "professional_support")

    # both changes are in the audit trail, done by the operator's command line, and the chain holds
    actions = db_rows(database_url(shared_db_env), shared_db_env["DATA_DIR"],
                      f"SELECT action, actor_role, target_id FROM audit_log WHERE target_id = '{me['id']}' ORDER BY seq")
    assert actions == [("staff.create", "operator-cli", me["id"]), ("staff.update", "operator-cli", me["id"])]
    p = run(binary, "audit", "verify", env=shared_db_env)
    assert p.returncode == 0, p.stdout + p.stderr


def cli_staff(binary, env, api, role="customer_support", password="first-password"):
    """A staff member made with `marketplace staff create`, logged in: {id, email, password, token}."""
    email = unique_email("desk")
    p = run(binary, "staff", "create", "--email", email, "--name", "Desk", "--role", role, env=env,
            stdin=password + "\n")
    assert p.returncode == 0, p.stderr
    r = staff_login(api, email, password)
    assert r.status_code == 200, r.text
    return {"id": r.json()["staff"]["id"], "email": email, "password": password, "token": r.json()["token"]}


def assert_refused(api, path, token):
    r = api.get(path, token=token)
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED), path


@pytest.mark.parametrize("new_role, new_password", [("technical_support", "first-password"),
                                                    ("customer_support", "second-password")])
def test_a_changed_staff_member_loses_every_token_at_once(binary, shared_db_env, server, api, new_role, new_password):
    """The attack: an impersonation token kept working for its 15 minutes after its staff member
    was demoted, and a staff token for 12 hours after a password change."""
    cs = cli_staff(binary, shared_db_env, api)
    u = api.register_user()
    e, imp = impersonate(api, server, cs, u["id"])
    assert api.get("/users/me", token=imp).status_code == 200
    pending = request_elevation(api, cs, api.register_user()["id"])  # asked under the old role: ends too
    p = run(binary, "staff", "create", "--email", cs["email"], "--name", "Desk", "--role", new_role,
            env=shared_db_env, stdin=new_password + "\n")
    assert p.returncode == 0, p.stderr
    assert_refused(api, "/users/me", imp)
    assert_refused(api, "/staff/me", cs["token"])
    # a token issued now, within the same second as the change, works
    fresh = staff_login(api, cs["email"], new_password).json()["token"]
    assert api.get("/staff/me", token=fresh).json()["role"] == new_role
    for ended in (e, pending):
        got = next(x for x in api.get("/staff/elevation", token=fresh).json() if x["id"] == ended["id"])
        assert got["status"] == "DEACTIVATED" and got["deactivatedAt"]
    approve, _ = elevation_links(server, pending["id"])
    assert "already resolved: it is DEACTIVATED" in link_get(api, approve).text


def test_staff_disable_and_enable(binary, shared_db_env, server, api):
    cs = cli_staff(binary, shared_db_env, api)
    u = api.register_user()
    _, imp = impersonate(api, server, cs, u["id"])
    pending = request_elevation(api, cs, api.register_user()["id"])
    p = run(binary, "staff", "disable", "--email", cs["email"].upper(), env=shared_db_env)
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {cs['email']} disabled"), p.stderr
    approve, _ = elevation_links(server, pending["id"])  # a PENDING request ends with its member's access
    assert "already resolved: it is DEACTIVATED" in link_get(api, approve).text
    assert_refused(api, "/users/me", imp)
    assert_refused(api, "/staff/me", cs["token"])
    # a disabled member's login answers as a wrong password does
    right, wrong = staff_login(api, cs["email"], cs["password"]), staff_login(api, cs["email"], "wrong-password")
    assert (right.status_code, right.json()) == (wrong.status_code, wrong.json()) == (401, error_body(401, "Invalid credentials", "invalid_credentials"))
    p = run(binary, "staff", "disable", "--email", cs["email"], env=shared_db_env)
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {cs['email']} was already disabled")
    p = run(binary, "staff", "enable", "--email", cs["email"], env=shared_db_env)
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {cs['email']} enabled")
    fresh = staff_login(api, cs["email"], cs["password"])
    assert fresh.status_code == 200 and api.get("/staff/me", token=fresh.json()["token"]).status_code == 200
    assert_refused(api, "/staff/me", cs["token"])  # tokens from before stay refused
    p = run(binary, "staff", "enable", "--email", cs["email"], env=shared_db_env)
    assert (p.returncode, p.stdout.strip()) == (0, f"staff member {cs['email']} was already enabled")
    actions = db_rows(database_url(shared_db_env), shared_db_env["DATA_DIR"],
                      f"SELECT action, actor_role FROM audit_log WHERE target_id = '{cs['id']}' ORDER BY seq")
    assert actions == [("staff.create", "operator-cli"), ("staff.disable", "operator-cli"),
                       ("staff.enable", "operator-cli")]
    assert run(binary, "audit", "verify", env=shared_db_env).returncode == 0


@pytest.mark.parametrize("args, code, error", [
    ([], 2, "refused: email: is required"),
    (["--email"], 2, "refused: email: is required"),
    (["--email", "not-an-email"], 2, "refused: email: must be a valid email"),
    (["--email", "nobody@example.com"], 1, "no staff member has the email nobody@example.com"),
])
@pytest.mark.parametrize("verb", ["disable", "enable"])
def test_staff_disable_refusals(binary, cli_env, verb, args, code, error):
    p = run(binary, "staff", verb, *args, env=cli_env)
    # the last line: a fresh database logs its migrations first
    assert (p.returncode, p.stderr.strip().splitlines()[-1], p.stdout) == (code, error, "")
    if code == 2:  # refused before the database is opened
        assert not os.path.exists(os.path.join(cli_env["DATA_DIR"], "marketplace.db"))


@pytest.mark.parametrize("args, stdin, error", [
    (["--email", "x@example.com", "--role", "customer_support"], "good-password\n", "refused: name: is required"),
    (["--name", "N", "--role", "customer_support"], "good-password\n", "refused: email: is required"),
    (["--name", "N", "--email", "not-an-email", "--role", "customer_support"], "good-password\n",
     "refused: email: must be a valid email"),
    (["--name", "N", "--email", "x@example.com"], "good-password\n", "refused: role: is required"),
    (["--name", "N", "--email", "x@example.com", "--role", "admin"], "good-password\n",
     "refused: role: must be one of: customer_support, professional_support, technical_support, internal_audit"),
    (["--name", "N", "--email", "x@example.com", "--role", "customer_support"], "short\n",
     "refused: password: must be at least 8 characters"),
    (["--name", "x" * 101, "--email", "x@example.com", "--role", "customer_support"], "good-password\n",
     "refused: name: must be at most 100 characters"),
])
def test_staff_create_refuses_what_post_staff_create_refuses(binary, cli_env, args, stdin, error):
    p = run(binary, "staff", "create", *args, env=cli_env, stdin=stdin)
    assert (p.returncode, p.stderr.strip(), p.stdout) == (2, error, "")
    # refused before the database is opened: nothing was created
    assert not os.path.exists(os.path.join(cli_env["DATA_DIR"], "marketplace.db"))


# ---------------------------------------------------------------- serve is the default

def test_no_command_serves(binary, cli_env):
    port = free_port()
    env = dict(cli_env, PORT=str(port), BIND="127.0.0.1", APP_ENV="test")
    log_path = os.path.join(os.path.dirname(cli_env["DATA_DIR"]), "serve.log")
    with serving([binary], env, f"http://127.0.0.1:{port}", log_path) as r:
        assert r.json() == {"status": "ok"}
