"""Shared fixtures for the API tests: they start the real binary and talk HTTP to it.

Engines: `--engine sqlite` (default) or `--engine postgres`; for PostgreSQL the harness runs a
private cluster (initdb + pg_ctl, as the postgres user when root) for the session and gives
every server it starts a fresh database (a copy of one the binary migrated once). With
`--pgbouncer` (PostgreSQL only) every server reaches its database through a PgBouncer in
transaction pooling that the session starts in front of the cluster, with
PG_PREPARED_STATEMENTS=0 (`make api-pgbouncer`), and only the files marked `pooler` run.

Fixtures
- `server`: one shared server for the whole session (APP_ENV=test, BCRYPT_COST=4,
  TRUST_PROXY=1, WEATHER_URL at `fake_geo`, a bootstrap administrator ADMIN_EMAIL/ADMIN_PASSWORD).
  Tests make unique accounts with `unique_email()`; each registration through `Api` comes
  from an address of its own (`unique_ip()`), since one address may register 20 accounts an
  hour.
- `fake_geo`: the session's fake weather, router and geocoder (tests/api/fake_geo.py).
- `admin_token`: a fresh GODMODE administrator token for the shared server (`admin_login(api)`
  logs in on any server started with BOOTSTRAP_ADMIN_*).
- `api`: an `Api` client bound to the shared server; `api.wait_queue_idle()` before asserting
  that an email or push was not sent, `api.wait_load(cond)` to wait until a request is in
  flight or being handled (GET /__test/load) instead of sleeping.
- `server_factory`: `server_factory(**env)` starts an extra server with its own data
  directory and database (stopped at teardown), for restart and configuration tests.

Waiting and images come from helpers.py: `eventually()` for every wait, `png_bytes()`.

With `--require-route-coverage`, the session fails when a route of the table never answered
with a success on the shared server, so every endpoint is tested by construction.
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import pytest
import requests

from helpers import SANITIZER_MARKERS, eventually
from plans import problems as plan_problems

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def pytest_addoption(parser):
    parser.addoption("--engine", default="sqlite", choices=["sqlite", "postgres"])
    parser.addoption("--binary", default=os.path.join(ROOT, "build", "marketplace"))
    parser.addoption("--require-route-coverage", action="store_true", default=False)
    parser.addoption("--unsanitized-only", action="store_true", default=False,
                     help="only the tests marked `once` or `unsanitized`: the release binary's pass in `make test`, "
                          "beside the sanitized one that runs the rest")
    parser.addoption("--pgbouncer", action="store_true", default=False,
                     help="with --engine postgres: every server reaches the cluster through a PgBouncer in "
                          "transaction pooling (PG_PREPARED_STATEMENTS=0)")


def pytest_configure(config):
    config.addinivalue_line("markers", "engine_independent: the file (or test) tests what does not depend on the database "
                            "(HTTP parsing, the OpenAPI document, the client, compression); it runs in the "
                            "SQLite passes only, not again on PostgreSQL")
    config.addinivalue_line("markers", "once: runs in one pass only, the release binary on SQLite (slow tests of "
                            "engine-independent behaviour: browsers, packages, time bounds of hung services)")
    config.addinivalue_line("markers", "unsanitized: does not run under the sanitizers (a browser walk that adds "
                            "nothing there the API tests of the same routes do not cover)")
    config.addinivalue_line("markers", "pooler: the file tests what a connection pooler in front of PostgreSQL "
                            "can change (transactions and their locks, sessions: LISTEN and advisory locks, "
                            "several instances on one database, lost connections, concurrent writes, erasure); "
                            "behind PgBouncer (--pgbouncer) only these files run")


def pytest_collection_modifyitems(config, items):
    """Chooses each pass's part of the suite. `make test` runs every test on SQLite under the
    sanitizers except those marked `once` or `unsanitized`, which run on the release binary
    (--unsanitized-only); every test on PostgreSQL but the `once` and `engine_independent` ones;
    behind PgBouncer, only the files marked `pooler`. Without options (`make api-sqlite`), all."""
    sanitized = "asan" in config.getoption("--binary").split(os.sep)
    postgres = config.getoption("--engine") == "postgres"
    pooled = config.getoption("--pgbouncer")
    only_unsanitized = config.getoption("--unsanitized-only")

    def kept(item):
        once, unsanitized = item.get_closest_marker("once"), item.get_closest_marker("unsanitized")
        if only_unsanitized:
            return bool(once or unsanitized)
        if sanitized and (once or unsanitized):
            return False
        if postgres:
            return not (once or item.get_closest_marker("engine_independent")) and \
                (not pooled or bool(item.get_closest_marker("pooler")))
        return True

    keep = [item for item in items if kept(item)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not kept(item)])
    # the longest files first: pytest-xdist hands out whole files in this order, so no worker
    # starts a long one while the others run out of work (the sort is stable: a file's tests
    # keep their order)
    first = {name: rank for rank, name in enumerate(LONGEST_FILES)}
    items[:] = sorted(keep, key=lambda item: first.get(item.path.name, len(first)))


# The files that take longest (over 10 s of a worker's time in a sanitized pass, 2026-11-29),
# longest first.
LONGEST_FILES = ["test_payments.py", "test_money.py", "test_staff.py", "test_files.py", "test_http.py",
                 "test_payouts.py", "test_disputes.py", "test_system.py", "test_events.py", "test_auth.py",
                 "test_geo.py", "test_notifications.py"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_kept_free():
    """A free port below the kernel's ephemeral range, for a listener that starts long after
    the port is chosen: no port the kernel hands out meanwhile (an outgoing connection's, another
    test's free_port()) can be it."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            first = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        first = 32768
    while True:
        port = random.randrange(max(1024, first - 12000), first)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def unique_email(prefix="user"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}@example.com"


WEBHOOK_SECRET = "whsec_test_secret"
ADMIN_EMAIL = "godmode@example.com"
ADMIN_PASSWORD = "admin-password-1"
ADMIN_ENV = {"BOOTSTRAP_ADMIN_EMAIL": ADMIN_EMAIL, "BOOTSTRAP_ADMIN_PASSWORD": ADMIN_PASSWORD}


def sign_webhook(body, secret=WEBHOOK_SECRET, timestamp=None):
    """The Stripe-Signature header value for a raw body (bytes or str): t=<unix>,v1=<hex>."""
    import hashlib
    import hmac
    if isinstance(body, str):
        body = body.encode()
    t = int(time.time()) if timestamp is None else int(timestamp)
    mac = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def unique_ip():
    """A distinct client address (sent as X-Forwarded-For; the test servers trust it)."""
    n = uuid.uuid4().int
    return f"10.{n % 250 + 1}.{(n >> 8) % 250 + 1}.{(n >> 16) % 250 + 1}"


# ---------------------------------------------------------------- the API contract

def flatten_unevaluated(components):
    """components with each schema that extends a plain object by `allOf: [{$ref}]` plus
    `unevaluatedProperties: false` (Job, Quote, ...) written as the one object it means: the
    referenced object's properties and required ones with its own, `additionalProperties: false`.
    The same answers pass and fail, and jsonschema checks it several times faster (tracking the
    evaluated properties was a third of the suite's own CPU time in a payments module). A
    schema of any other shape is left as it is."""
    schemas = components.get("schemas", {})
    plain = {"type", "properties", "required", "description", "title"}

    def flat(schema):
        if schema.get("unevaluatedProperties") is not False or len(schema.get("allOf", ())) != 1:
            return schema
        ref = schema["allOf"][0].get("$ref", "")
        base = schemas.get(ref.rsplit("/", 1)[-1]) if ref.startswith("#/components/schemas/") else None
        rest = set(schema) - {"allOf", "unevaluatedProperties", "properties", "required", "description"}
        if base is None or set(base) - plain or base.get("type") != "object" or rest or len(schema["allOf"][0]) != 1 \
                or set(base.get("properties", {})) & set(schema.get("properties", {})):
            return schema
        out = {k: v for k, v in schema.items() if k not in ("allOf", "unevaluatedProperties")}
        out["type"] = "object"
        out["properties"] = {**base.get("properties", {}), **schema.get("properties", {})}
        out["required"] = list(dict.fromkeys(base.get("required", []) + schema.get("required", [])))
        out["additionalProperties"] = False
        return out

    return {**components, "schemas": {name: flat(s) for name, s in schemas.items()}}


class Contract:
    """A server's OpenAPI document (GET /openapi.json): finds the operation of a request as the
    router does (static segments win, left to right) and checks an answer against it. Every
    answer must have a documented status; a JSON answer must match that status' schema (no
    undocumented field: the components say additionalProperties: false)."""

    def __init__(self, doc):
        import jsonschema
        self.doc = doc
        self.ops = []
        for template, item in doc["paths"].items():
            segs = [x for x in template.split("/") if x]
            for method, op in item.items():
                # a last parameter marked x-rest-of-path takes the rest of the path (the portal's)
                rest = any(p.get("x-rest-of-path") for p in op.get("parameters", []) if isinstance(p, dict))
                self.ops.append((method.upper(), segs, op, rest))
        self.validator_class = jsonschema.Draft202012Validator
        self.validators = {}
        self.components = flatten_unevaluated(doc["components"])

    def operation(self, method, path):
        segs = [x for x in path.split("?")[0].split("/") if x]
        best, best_rank = None, None
        for m, tsegs, op, rest in self.ops:
            if m != method or (len(segs) < len(tsegs) if rest else len(tsegs) != len(segs)):
                continue
            if any(not t.startswith("{") and t != s for t, s in zip(tsegs, segs)):
                continue
            rank = [not rest] + [not t.startswith("{") for t in tsegs]
            if best is None or rank > best_rank:
                best, best_rank = op, rank
        return best

    def schema_for(self, op, status):
        responses = op["responses"]
        response = responses.get(str(status))
        if response is None:
            return None, False
        if "$ref" in response:
            response = self.doc["components"]["responses"][response["$ref"].rsplit("/", 1)[1]]
        media = response.get("content", {})
        return media.get("application/json", {}).get("schema"), True

    def problems(self, method, path, status, content_type, body):
        """What is wrong with one answer (an empty list when it keeps the contract)."""
        if path.startswith("/__test/") or method in ("OPTIONS", "HEAD"):
            return []
        op = self.operation(method, path)
        if op is None:  # no route: the router's 404
            if status == 404:
                return []
            return [f"{method} {path}: {status} for a route the document does not have"]
        schema, documented = self.schema_for(op, status)
        if not documented:
            return [f"{method} {path} ({op['operationId']}): status {status} is not documented"]
        if not (content_type or "").startswith("application/json"):
            return []
        if schema is None:
            return [f"{method} {path} ({op['operationId']}): {status} answered JSON but documents none"]
        try:
            value = json.loads(body)
        except ValueError:
            return [f"{method} {path}: {status} body is not JSON"]
        key = json.dumps(schema, sort_keys=True)
        validator = self.validators.get(key)
        if validator is None:
            full = dict(schema)
            full["components"] = self.components
            validator = self.validators[key] = self.validator_class(full)
        errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
        return [f"{method} {path} ({op['operationId']}) {status}: {'/'.join(map(str, e.absolute_path)) or '(body)'}: "
                f"{e.message[:300]}" for e in errors[:5]]


_CONTRACTS = {}   # "127.0.0.1:port" -> Contract of a started server
_VIOLATIONS = []  # problems seen since the last check
_RECORD = os.environ.get("MP_RECORD_RESPONSES")  # a file to append every answer to (schema work)


def contract_observe(base, method, path, status, content_type, body):
    """Checks one answer of the server at base ("127.0.0.1:port") against its document."""
    contract = _CONTRACTS.get(base)
    if contract is None:
        return
    if _RECORD and (content_type or "").startswith("application/json"):
        op = contract.operation(method, path)
        if op is not None:
            with open(_RECORD, "a", encoding="utf-8") as f:
                f.write(json.dumps({"op": op["operationId"], "status": status,
                                    "body": json.loads(body or b"null")}) + "\n")
        return
    _VIOLATIONS.extend(contract.problems(method, path, status, content_type, body))


_original_send = requests.Session.send


def _checked_send(self, request, **kw):
    response = _original_send(self, request, **kw)
    try:
        url = urllib.parse.urlsplit(request.url)
        if url.netloc in _CONTRACTS and not kw.get("stream"):
            contract_observe(url.netloc, request.method, url.path, response.status_code,
                             response.headers.get("Content-Type"), response.content)
    except Exception as e:  # the check must never hide the test's own outcome
        _VIOLATIONS.append(f"contract check failed on {request.method} {request.url}: {e!r}")
    return response


requests.Session.send = _checked_send


_CONTRACT_OF_DOC = {}  # the document's text -> its Contract, so servers serving one document share validators


def _register_contract(server):
    r = _original_send(requests.Session(), requests.Request("GET", server.url + "/openapi.json").prepare(), timeout=30)
    assert r.status_code == 200, r.text
    contract = _CONTRACT_OF_DOC.get(r.text)
    if contract is None:
        contract = _CONTRACT_OF_DOC[r.text] = Contract(r.json())
    _CONTRACTS[f"127.0.0.1:{server.port}"] = contract


@pytest.fixture(autouse=True)
def _api_contract():
    """Fails the test when an answer it received broke the documented contract."""
    del _VIOLATIONS[:]
    yield
    if _VIOLATIONS:
        found = list(dict.fromkeys(_VIOLATIONS))
        del _VIOLATIONS[:]
        pytest.fail("answers that the OpenAPI document does not describe:\n  " + "\n  ".join(found[:30]),
                    pytrace=False)


# ---------------------------------------------------------------- PostgreSQL cluster

class PgCluster:
    """A throwaway PostgreSQL cluster on a free port, owned by the postgres user when root."""

    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            raise RuntimeError("PostgreSQL server binaries not found (scripts/deps.sh test installs them)")
        self.bindir = os.path.dirname(bins[-1])
        self.dir = tempfile.mkdtemp(prefix="mp-pg-")
        self.port = free_port()
        self.as_root = os.geteuid() == 0
        self.user = "postgres" if self.as_root else os.environ.get("USER", "postgres")
        if self.as_root:
            os.chmod(self.dir, 0o755)
            shutil.chown(self.dir, "postgres", "postgres")
        self.data = os.path.join(self.dir, "data")
        self.counter = 0
        self.templates = {}  # binary -> the name of the database it migrated

    def _run(self, *args):
        cmd = [os.path.join(self.bindir, args[0]), *args[1:]]
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def start(self):
        """initdb, then the server on a free port; another process (a parallel test worker) may
        take that port before the server binds it, so a start that fails is tried again on
        another port."""
        self._run("initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync")
        for attempt in range(5):
            self.opts = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                         "-c synchronous_commit=off -c full_page_writes=off -c max_connections=500")
            try:
                self._run("pg_ctl", "-D", self.data, "-o", self.opts, "-l", os.path.join(self.dir, "log"), "-w",
                          "start")
                return
            except subprocess.CalledProcessError:
                if attempt == 4:
                    raise
                self.port = free_port()

    def restart(self):
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "restart")

    def pause(self):
        """Stops the server and keeps the cluster (resume() starts it again)."""
        self._run("pg_ctl", "-D", self.data, "-m", "fast", "-w", "stop")

    def resume(self):
        self._run("pg_ctl", "-D", self.data, "-o", self.opts, "-l", os.path.join(self.dir, "log"), "-w", "start")

    def stop(self):
        try:
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def new_database(self, migrated_by=None):
        """A fresh database; its URL goes through the PgBouncer in front, when there is one.
        migrated_by (a binary): a copy of a template that binary migrated once (`migrate`), so
        the servers the fixtures start skip the migrations (a second each on a busy machine);
        without it the database is empty, for the tests of migrating."""
        self.counter += 1
        name = f"mp_{os.getpid()}_{self.counter}"
        template = ["-T", self._template(migrated_by)] if migrated_by else []
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", *template, name)
        direct = f"postgres://postgres@127.0.0.1:{self.port}/{name}"
        if not getattr(self, "bouncer", None):
            return direct
        url = f"postgres://postgres@127.0.0.1:{self.bouncer.port}/{name}"
        LISTEN_URLS[url] = direct  # LISTEN needs a session of its own, which transaction pooling is not
        return url

    def _template(self, binary):
        """The database `binary migrate` migrated once in this cluster (made on first use)."""
        if binary not in self.templates:
            name = f"mp_{os.getpid()}_template_{len(self.templates)}"
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
            env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "APP_ENV": "test", **SANITIZER_ENV,
                   "DATABASE_URL": f"postgres://postgres@127.0.0.1:{self.port}/{name}"}
            subprocess.run([binary, "migrate"], env=env, check=True, capture_output=True)
            self.templates[binary] = name
        return self.templates[binary]


class PgBouncer:
    """Debian's PgBouncer (1.18: no prepared statements in transaction pooling) in front of a
    cluster, in transaction pooling mode, as production runs it: every database of the cluster
    through one port, trust authentication, a few server connections per database."""

    def __init__(self, cluster):
        self.binary = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if not os.path.exists(self.binary):
            raise RuntimeError("pgbouncer not found (scripts/deps.sh test installs it)")
        self.cluster = cluster
        self.dir = tempfile.mkdtemp(prefix="mp-pgb-")
        self.port = free_port()
        self.proc = None

    def _write_config(self):
        with open(os.path.join(self.dir, "users.txt"), "w") as f:
            f.write('"postgres" ""\n')
        with open(os.path.join(self.dir, "pgbouncer.ini"), "w") as f:
            f.write(f"""[databases]
* = host=127.0.0.1 port={self.cluster.port}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir = {self.dir}
auth_type = trust
auth_file = {self.dir}/users.txt
pool_mode = transaction
max_client_conn = 4000
default_pool_size = 20
max_db_connections = 20
server_idle_timeout = 10
server_lifetime = 600
server_login_retry = 1
query_wait_timeout = 5
ignore_startup_parameters = extra_float_digits
logfile = {self.dir}/pgbouncer.log
""")

    def start(self):
        """Starts it on a free port (another one when a parallel worker took that port first)."""
        if os.geteuid() == 0:  # PgBouncer refuses to run as root
            os.chmod(self.dir, 0o755)
            shutil.chown(self.dir, "postgres", "postgres")
        for attempt in range(5):
            self._write_config()
            cmd = [self.binary, os.path.join(self.dir, "pgbouncer.ini")]
            if os.geteuid() == 0:
                for name in ("users.txt", "pgbouncer.ini"):
                    shutil.chown(os.path.join(self.dir, name), "postgres", "postgres")
                cmd = ["runuser", "-u", "postgres", "--", *cmd]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

            def listening():
                if self.proc.poll() is not None:
                    return "exited"
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        return "up"
                except OSError:
                    return None

            if eventually(listening, 10, "pgbouncer listens") == "up":
                return self
            self.port = free_port()
        raise RuntimeError("pgbouncer did not start:\n" + self.log())

    def log(self):
        try:
            with open(os.path.join(self.dir, "pgbouncer.log"), errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- the server under test

# What every process of the service needs in its environment to reach the session's cluster:
# PG_PREPARED_STATEMENTS=0 when a PgBouncer in transaction pooling stands in front (--pgbouncer).
PG_ENV = {}
# A database URL through the PgBouncer -> the same database directly, for the live-update
# listener (DATABASE_LISTEN_URL).
LISTEN_URLS = {}

ASAN_OPTIONS = "detect_leaks=1:abort_on_error=0:exitcode=23:fast_unwind_on_malloc=1:malloc_context_size=10"
# the sanitizers' settings of every run of the binary (its ASan build reads them; the plain one ignores them)
SANITIZER_ENV = {
    "ASAN_OPTIONS": ASAN_OPTIONS,
    "LSAN_OPTIONS": "suppressions=" + os.path.join(ROOT, "tests", "lsan.supp"),
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


class Server:
    def __init__(self, binary, database_url, env=None):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="mp-srv-")
        self.data_dir = os.path.join(self.dir, "data")
        self.port = free_port()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "APP_ENV": "test",
            "PORT": str(self.port),
            "BIND": "127.0.0.1",
            "DATA_DIR": self.data_dir,
            "DATABASE_URL": database_url or f"sqlite:{self.data_dir}/marketplace.db",
            "DATABASE_LISTEN_URL": LISTEN_URLS.get(database_url),
            "BCRYPT_COST": "4",
            "TRUST_PROXY": "1",
            "APP_URL": "http://app.test",
            "STRIPE_WEBHOOK_SECRET": WEBHOOK_SECRET,
            **SANITIZER_ENV,
            # the helper's wall-clock bound per document: the four API passes share two cores
            # and recognition runs at a lower priority, so a licence can wait seconds for a
            # core; Tesseract's own budget is CPU time and needs no slack (test_background
            # checks the default bound on a server of its own)
            "RECOGNITION_TIMEOUT_MS": "30000",
            # every statement SQLite prepares, with its plan, for the plan audit (plans.py)
            "PLAN_LOG": os.path.join(self.dir, "plans.log"),
        }
        self.env = {k: v for k, v in self.env.items() if v is not None}
        self.env.update(PG_ENV)  # behind the session's PgBouncer: unnamed statements
        self.env.update({k: str(v) for k, v in (env or {}).items() if v is not None})
        for k, v in (env or {}).items():
            if v is None:
                self.env.pop(k, None)
        self.proc = self.signalled = None  # signalled: the process terminate() signalled
        self.log_path = os.path.join(self.dir, "server.log")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout=30):
        """Starts the binary and waits until it answers /health. The port came from free_port(),
        so another process (a parallel test worker) may take it first: the server then exits
        with "Address already in use" and starts again on another port."""
        for _ in range(5):
            self.log = open(self.log_path, "ab")
            self.log_start = self.log.tell()
            self.proc = subprocess.Popen([self.binary, "serve"], env=self.env, stdout=self.log, stderr=self.log)
            if self._wait_healthy(timeout):
                return self
            self.log.close()
            if b"Address already in use" not in self._log_since_start():
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.read_log()}")
            self.port = free_port()
            self.env["PORT"] = str(self.port)
        raise RuntimeError("no free port for the server:\n" + self.read_log())

    def _log_since_start(self):
        with open(self.log_path, "rb") as f:
            f.seek(self.log_start)
            return f.read()

    def _wait_healthy(self, timeout):
        """True once this process listens (its log says so: another process may hold the port
        and answer /health) and answers /health; False when it exited first."""
        def state():
            if self.proc.poll() is not None:
                return "exited"
            try:
                if b'"msg":"listening"' in self._log_since_start() and \
                        requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return "up"
            except requests.RequestException:
                pass
            return None

        try:
            up = eventually(state, timeout, "the server answers /health") == "up"
        except AssertionError:
            raise RuntimeError("server did not become healthy:\n" + self.read_log()) from None
        if up:
            _register_contract(self)
        return up

    def terminate(self, sig=signal.SIGTERM):
        """Sends sig once, without waiting: stop() then waits, so that servers stop side by side."""
        if self.proc and self.proc.poll() is None and self.signalled is not self.proc:
            self.proc.send_signal(sig)
            self.signalled = self.proc

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stops the server; returns its exit code. Fails on sanitizer reports. Its address
        leaves the contract's list: a later listener on the port (a fake Stripe) is not ours."""
        _CONTRACTS.pop(f"127.0.0.1:{self.port}", None)
        if not self.proc or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.terminate(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.log.close()
        return rc

    def restart(self):
        self.stop()
        return self.start()

    def read_log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_lines(self):
        """The server's JSON log lines, parsed (non-JSON lines are skipped)."""
        out = []
        for line in self.read_log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def wait_log(self, match, count=1, timeout=10):
        """The JSON log lines for which match(line) is true, once there are at least count of
        them (info lines reach the log up to 100 ms after the event)."""
        return eventually(lambda: [line for line in self.log_lines() if match(line)], timeout,
                          f"{count} matching log line(s)", until=lambda found: len(found) >= count)

    def sanitizer_report(self):
        text = self.read_log()
        for marker in SANITIZER_MARKERS:
            if marker in text:
                return text
        return None

    def mails(self, to=None):
        """Parsed .eml files in DATA_DIR/mail (oldest first) as dicts: to, subject, body (the
        text/plain part, decoded), html (the text/html part, decoded), raw, headers (the
        message's own, lowercased names)."""
        out = []
        for path in sorted(glob.glob(os.path.join(self.data_dir, "mail", "*.eml"))):
            with open(path, encoding="utf-8", newline="") as f:
                raw = f.read()
            head, _, body = raw.partition("\r\n\r\n")
            headers = {}
            for line in head.split("\r\n"):
                k, _, v = line.partition(": ")
                headers[k.lower()] = v
            parts = mail_parts(raw)
            mail = {"to": headers.get("to"), "subject": headers.get("subject"),
                    "body": parts.get("text/plain", body), "html": parts.get("text/html"), "raw": raw,
                    "headers": headers}
            check_mail(mail)
            if to is None or mail["to"] == to:
                out.append(mail)
        return out

    def wait_mail(self, to, count=1, timeout=10):
        """The mails to `to`, once there are at least count of them."""
        return eventually(lambda: self.mails(to), timeout, f"{count} mail(s) to {to}",
                          until=lambda got: len(got) >= count)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


_TEXT_ADDRESS = re.compile(r"(?<![A-Za-z0-9/])https?://[^\s<>\"]+")
_ACTION_LINE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"]+)\s*$", re.M)
_HREF = re.compile(r'<a\b[^>]*\bhref="([^"]*)"')


def text_links(text):
    """The links of an email's text part, as its HTML part must carry them: the lines that are
    only an address (any scheme), and the web addresses inside sentences (less the punctuation
    that ends a sentence)."""
    found = {m.group(1) for m in _ACTION_LINE.finditer(text)}
    found |= {m.group(0).rstrip(".,;:!?)]'") for m in _TEXT_ADDRESS.finditer(text)}
    return found


def html_links(html_text):
    import html
    return {html.unescape(h) for h in _HREF.findall(html_text)}


def check_mail(mail):
    """Every email is multipart/alternative with a text part and an HTML part that carry the
    same links (issue 33, item 8): checked on every email a test reads."""
    head = mail["raw"].split("\r\n\r\n", 1)[0]
    assert "\r\nContent-Type: multipart/alternative; boundary=" in head, head
    assert mail["html"] is not None and mail["body"] is not None, mail["raw"][:2000]
    assert text_links(mail["body"]) == html_links(mail["html"]), (mail["subject"], mail["body"], mail["html"])
    for line in mail["raw"].split("\r\n"):
        assert len(line.encode()) <= 998, line[:200]


def mail_parts(raw):
    """The decoded parts of a message by content type ({"text/plain": ..., "text/html": ...})."""
    import email
    import email.policy
    msg = email.message_from_bytes(raw.encode("utf-8"), policy=email.policy.compat32)
    out = {}
    for part in msg.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True) or b""
        out.setdefault(part.get_content_type(), payload.decode(part.get_content_charset() or "utf-8"))
    return out


# Registrations are limited to 20 an hour per client address; the tests make far more, so each
# comes from an address of its own unless the test names one (test_throttles.py tests the limit).
REGISTRATION_PATHS = ("/auth/register", "/auth/provider/register")


class Api:
    """requests wrapper: api.post('/auth/login', json={...}, token=t, ip='10.0.0.1').
    A registration without ip= (or an X-Forwarded-For header) comes from a unique_ip()."""

    def __init__(self, server):
        self.server = server
        self.session = requests.Session()
        self.session.trust_env = False  # no proxy or .netrc lookup in the environment on every request

    # seconds a request may take: a test of a server hashing at a high bcrypt cost raises it (the
    # four API passes share two cores, so one hash may take many times its usual second)
    timeout = 30

    @property
    def url(self):
        return self.server.url

    def request(self, method, path, token=None, ip=None, headers=None, **kw):
        h = dict(headers or {})
        if token:
            h["Authorization"] = f"Bearer {token}"
        if ip is None and method == "POST" and path.split("?")[0] in REGISTRATION_PATHS and \
                "X-Forwarded-For" not in h:
            ip = unique_ip()
        if ip:
            h["X-Forwarded-For"] = ip
        kw.setdefault("timeout", self.timeout)
        return self.session.request(method, self.url + path, headers=h, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def advance_clock(self, ms):
        r = self.post("/__test/clock", json={"advanceMs": int(ms)})
        assert r.status_code == 200, r.text
        return r.json()["now"]

    def freeze_clock(self, frozen=True):
        """Stops the server's clock where it is (or lets it run on): records made meanwhile
        share their time, so their order must come from the service's sequence, not from luck."""
        r = self.post("/__test/clock", json={"advanceMs": 0, "freeze": frozen})
        assert r.status_code == 200, r.text
        return r.json()["now"]

    def wait_queue_idle(self, timeout=15, lane=None):
        """Waits until no background work is due or running (GET /__test/queue), so a test can
        assert that an email or push was *not* sent; work scheduled for a later retry is not due.
        lane="general": every kind but document recognition's, whose lane every provider()'s
        licence keeps busy (for a minute under ASan, after a file that made many)."""
        def depth():
            r = self.get("/__test/queue", params={"lane": lane} if lane else None)
            assert r.status_code == 200, r.text
            return r.json()

        eventually(depth, timeout, "background queue idle", until=lambda d: d["ready"] == 0 and d["running"] == 0,
                   retry=())

    def wait_load(self, cond, what="the condition", timeout=15):
        """Polls GET /__test/load ({inFlight, handlersRunning, hashingPoolFull}: what the HTTP
        server is doing, this poll excluded) until cond(load) is true, so a test can wait
        until a request it sent is in flight or being handled instead of sleeping."""
        def load():
            r = self.get("/__test/load")
            assert r.status_code == 200, r.text
            return r.json()

        return eventually(load, timeout, what, interval=0.01, until=cond, retry=())

    # -- account helpers
    def register_user(self, **over):
        body = {"email": unique_email("user"), "password": "password123", "name": "Test User",
                "address": "1 Main St", "zip": "10001"}
        return self._registered("/auth/register", "user", {**body, **over})

    def register_provider(self, **over):
        body = {"email": unique_email("pro"), "password": "password123", "name": "Test Pro",
                "serviceZips": ["10001"], "services": ["lawncare"]}
        return self._registered("/auth/provider/register", "provider", {**body, **over})

    def _registered(self, path, role, body):
        """The account that POST path with body makes: {token, id, email, password, body}."""
        r = self.post(path, json=body)
        assert r.status_code == 201, r.text
        data = r.json()
        return {"token": data["token"], "id": data[role]["id"], "email": body["email"],
                "password": body["password"], "body": body}


# ---------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def engine(request):
    return request.config.getoption("--engine")


@pytest.fixture(scope="session")
def pg_cluster(request, engine):
    if engine != "postgres":
        yield None
        return
    cluster = PgCluster()
    cluster.start()
    if request.config.getoption("--pgbouncer"):
        cluster.bouncer = PgBouncer(cluster).start()
        PG_ENV["PG_PREPARED_STATEMENTS"] = "0"
    yield cluster
    if getattr(cluster, "bouncer", None):
        cluster.bouncer.stop()
    cluster.stop()


def _stop_all(servers):
    """Stops servers, side by side; returns the sanitizer reports of those that had any."""
    reports = []
    for srv in servers:
        srv.terminate()
    for srv in servers:
        crashed = srv.proc is not None and srv.proc.poll() is not None and \
            -srv.proc.returncode in (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
        srv.stop()
        report = srv.sanitizer_report()
        if crashed:  # crashed before the harness stopped it
            report = f"server on port {srv.port} died of signal {-srv.proc.returncode}; its log ends:\n" + \
                srv.read_log()[-5000:] + (report or "")
        full_reads = plan_problems(os.path.join(srv.dir, "plans.log"))
        if full_reads:
            report = (report or "") + "statements that read a large table whole or its bulk " + \
                "(tests/api/plans.py):\n  " + "\n  ".join(full_reads)
        if report:
            reports.append(report)
        else:
            srv.cleanup()
    return reports


def _fail_on(reports):
    if reports:
        pytest.fail("the servers reported errors:\n" + "\n\n".join(reports)[-20000:], pytrace=False)


def _starter(request, engine, pg_cluster, started):
    binary = request.config.getoption("--binary")

    def make(**env):
        env.setdefault("DB_POOL_SIZE", "4")  # extra servers: a small pool each
        url = pg_cluster.new_database(migrated_by=binary) if pg_cluster else None
        srv = Server(binary, url, env)
        started.append(srv)
        return srv.start()

    return make


@pytest.fixture(scope="session")
def make_server(request, engine, pg_cluster):
    """make_server(**env) -> a started Server with a fresh database; stopped at session end."""
    started = request.config._session_servers = []
    yield _starter(request, engine, pg_cluster, started)
    check_route_coverage(request)
    reports = _stop_all(started)
    started.clear()  # reported once: the teardown hook above finds none left
    _fail_on(reports)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a module's last test and its fixtures' teardown, the servers it started with
    make_server (its fixtures' and its tests') stop, side by side, rather than with the session:
    they would idle meanwhile, and a worker's last module would wait for them all. The shared
    server stays."""
    yield
    if nextitem is not None and nextitem.module is item.module:
        return
    started = getattr(item.config, "_session_servers", [])
    shared = getattr(item.config, "_marketplace_server", None)
    mine = [srv for srv in started if srv is not shared]
    reports = _stop_all(mine)
    started[:] = [srv for srv in started if srv is shared]  # stopped: the session's end finds them gone
    _fail_on(reports)


@pytest.fixture(scope="session")
def fake_geo():
    """The session's fake Open-Meteo, OSRM and Nominatim (tests/api/fake_geo.py); the shared
    server reads its forecasts from it (WEATHER_URL)."""
    from fake_geo import FakeGeo
    fake = FakeGeo().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def server(request, make_server, fake_geo):
    srv = make_server(DB_POOL_SIZE="16", WEATHER_URL=fake_geo.url, **ADMIN_ENV)
    request.config._marketplace_server = srv
    return srv


@pytest.fixture
def server_factory(request, engine, pg_cluster):
    """server_factory(**env): a fresh server per call with extra environment (a small
    database pool), stopped when the test ends; for restart and configuration tests."""
    started = []
    make = _starter(request, engine, pg_cluster, started)

    yield make
    _fail_on(_stop_all(started))


@pytest.fixture
def api(server):
    return Api(server)


def admin_login(api):
    """A GODMODE administrator token (the server must run with ADMIN_ENV); each login comes from
    a fresh address, so the 10-per-15-minutes login limit never trips."""
    r = api.post("/admin/login", json={"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD}, ip=unique_ip())
    assert r.status_code == 200, r.text
    return r.json()["token"]


@pytest.fixture
def admin_token(api):
    return admin_login(api)


def check_route_coverage(request):
    """Runs while the shared server still serves (fixture teardown): records the routes of the
    table and those that answered with a success, for pytest_sessionfinish to fail the session
    when one never did. Under pytest-xdist each worker has its own shared server: a worker
    hands its lists to the controller (workeroutput), which joins them."""
    config = request.config
    srv = getattr(config, "_marketplace_server", None)
    if not config.getoption("--require-route-coverage") or srv is None or request.session.testsfailed:
        return
    dump = os.environ.get("MP_METRICS_DUMP")  # a file for the shared server's /metrics (round trips per route)
    if dump:
        with open(f"{dump}.{os.getpid()}", "w") as f:
            f.write(requests.get(srv.url + "/metrics", timeout=10).text)
    routes = requests.get(srv.url + "/__test/routes", timeout=10).json()["routes"]
    names = [f"{r['method']} {r['path']}" for r in routes if r["path"] != "/__test/routes"]
    covered = [f"{r['method']} {r['path']}" for r in routes if r["ok"] > 0]
    if hasattr(config, "workeroutput"):
        config.workeroutput["routes"] = json.dumps(names)
        config.workeroutput["covered"] = json.dumps(covered)
    else:
        config._route_names, config._covered_routes = names, set(covered)


def pytest_testnodedown(node, error):
    """xdist controller: joins what each worker's server saw."""
    out = getattr(node, "workeroutput", {})
    if "routes" in out:
        config = node.config
        config._route_names = json.loads(out["routes"])
        config._covered_routes = getattr(config, "_covered_routes", set()) | set(json.loads(out["covered"]))


def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workeroutput") or session.testsfailed or not config.getoption("--require-route-coverage"):
        return
    names = getattr(config, "_route_names", None)
    if names is None:
        return
    missing = [n for n in names if n not in config._covered_routes]
    if missing:
        print("\nroutes never answered with a success in the API tests:\n  " + "\n  ".join(missing))
        session.exitstatus = 1
