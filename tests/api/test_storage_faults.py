"""Failing storage and upstreams (issue 14, item 7). Object storage that answers 500 or hangs,
a local upload directory that cannot be written, a full disk: the upload answers 503
`{"error": "File storage unavailable"}` (with Retry-After) or 507 `{"error": "Insufficient
storage"}` in bounded time, no record points at a file that is not stored, and no partial file
stays. A push service that hangs delays nothing a client waits for, and the push is delivered
once the service answers again. A weather service or geocoder that hangs is given up in bounded
time with the clear status of docs/decisions.md ("Weather and drive time"), and nothing from
the failure is cached."""
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest

from conftest import Api
from fake_s3 import FakeS3
from flow_helpers import customer, ok, post_job, private_zip, provider
from helpers import error_body, png_bytes
from test_outages import SlowPush, fill


UNAVAILABLE = error_body(503, "File storage unavailable")
FULL = error_body(507, "Insufficient storage")
AK, SK, REGION, BUCKET = "AKIASTORAGEFAULTS1", "storage/faults+secret", "us-east-1", "faults"


def upload_logo(api, pro, seed=1):
    t0 = time.monotonic()
    r = api.post("/providers/me/logo", token=pro["token"], files={"logo": ("logo.png", png_bytes(seed=seed), "image/png")})
    return r, time.monotonic() - t0


def logo_url(api, pro):
    return api.get("/providers/me", token=pro["token"]).json()["logoUrl"]


def temporary_files(srv, data_dir=None):
    tmp = os.path.join(data_dir or srv.data_dir, "tmp")
    return sorted(f for d in os.listdir(tmp) for f in os.listdir(os.path.join(tmp, d)) if f != ".lock")


@pytest.fixture(scope="module")
def s3():
    fake = FakeS3(AK, SK, REGION, BUCKET).start()
    yield fake
    fake.stop()


def s3_env(url):
    return {"S3_ENDPOINT": url, "S3_BUCKET": BUCKET, "S3_REGION": REGION, "S3_ACCESS_KEY_ID": AK,
            "S3_SECRET_ACCESS_KEY": SK}


def test_object_storage_answering_500_gives_503_and_records_nothing(s3, server_factory):
    srv = server_factory(**s3_env(s3.url))
    api = Api(srv)
    pro = api.register_provider()
    s3.fail_next(count=3)  # every attempt of the client (it retries 5xx twice)
    r, elapsed = upload_logo(api, pro)
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    assert int(r.headers["Retry-After"]) >= 1 and elapsed < 5
    assert logo_url(api, pro) is None
    with s3.lock:
        assert not s3.objects
    assert temporary_files(srv) == []
    r, _ = upload_logo(api, pro, seed=2)
    assert r.status_code == 200, r.text
    assert logo_url(api, pro)


@pytest.fixture
def hanging_endpoint():
    """A TCP endpoint that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held, stop = [], threading.Event()

    def accept():
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    listener.close()
    for c in held:
        c.close()


@pytest.mark.once
def test_object_storage_that_hangs_gives_503_in_bounded_time(hanging_endpoint, server_factory):
    srv = server_factory(**s3_env(hanging_endpoint))
    api = Api(srv)
    pro = api.register_provider()
    r, elapsed = upload_logo(api, pro)
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    assert elapsed < 10, f"{elapsed:.1f} s"  # 5 s of silence, not retried
    assert logo_url(api, pro) is None
    assert temporary_files(srv) == []
    assert api.get("/health").status_code == 200


@pytest.fixture
def root_mounts():
    """mount(*args) as root (skips otherwise); every mount is undone after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount")
    done = []

    def mount(*args, target):
        r = subprocess.run(["mount", *args, target], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot mount here: {r.stderr.strip()}")
        done.append(target)

    yield mount
    for target in reversed(done):
        subprocess.run(["umount", "-l", target], check=False)


def test_upload_directory_that_cannot_be_written_gives_503(root_mounts, server_factory):
    srv = server_factory()
    api = Api(srv)
    pro = api.register_provider()
    uploads = os.path.join(srv.data_dir, "uploads")
    os.makedirs(uploads, exist_ok=True)
    root_mounts("--bind", uploads, target=uploads)
    root_mounts("-o", "remount,bind,ro", uploads, target=uploads)
    r, _ = upload_logo(api, pro)
    assert (r.status_code, r.json()) == (503, UNAVAILABLE)
    assert logo_url(api, pro) is None
    assert temporary_files(srv) == [] and os.listdir(uploads) == []
    subprocess.run(["umount", uploads], check=True)
    r, _ = upload_logo(api, pro, seed=3)
    assert r.status_code == 200, r.text
    assert len(os.listdir(uploads)) == 1


def test_full_disk_gives_507_and_leaves_no_partial_file(engine, root_mounts, server_factory):
    disk, db_dir = tempfile.mkdtemp(prefix="mp-disk-"), tempfile.mkdtemp(prefix="mp-db-")
    try:
        root_mounts("-t", "tmpfs", "-o", "size=2m", "tmpfs", target=disk)
        data = os.path.join(disk, "data")
        # the database stays on the big disk
        env = {"DATA_DIR": data}
        if engine == "sqlite":
            env["DATABASE_URL"] = f"sqlite:{db_dir}/marketplace.db"
        srv = server_factory(**env)
        api = Api(srv)
        pro = api.register_provider()
        filler = fill(disk)
        r, _ = upload_logo(api, pro)
        assert (r.status_code, r.json()) == (507, FULL)
        assert logo_url(api, pro) is None
        assert temporary_files(srv, data) == []
        assert not os.path.isdir(os.path.join(data, "uploads")) or os.listdir(os.path.join(data, "uploads")) == []
        os.unlink(filler)
        r, _ = upload_logo(api, pro, seed=4)
        assert r.status_code == 200, r.text
        srv.stop()
    finally:
        shutil.rmtree(disk, ignore_errors=True)
        shutil.rmtree(db_dir, ignore_errors=True)


@pytest.mark.once
def test_push_service_that_hangs_delays_no_request_and_is_retried(server_factory):
    push = SlowPush([(20, 200)])  # the first request gets no answer in time, the retry one at once
    try:
        srv = server_factory(PUSH_URL=push.url)
        api = Api(srv)
        z = private_zip()
        pro = provider(api, [z], verified=False)
        ok(api.post("/providers/me/push-token", token=pro["token"], json={"token": "ExponentPushToken[hang]"}))
        t0 = time.monotonic()
        post_job(api, customer(api, z), isAsap=True)
        assert time.monotonic() - t0 < 2, "a request waited for the push service"
        push.wait(2, timeout=30)
        api.wait_queue_idle()
        runs = srv.wait_log(lambda line: line.get("kind") == "push", count=2)
        assert [(line["attempt"], line["outcome"]) for line in runs] == [(1, "retry"), (2, "done")], runs
        assert "timeout" in runs[0]["error"].lower() or "timed out" in runs[0]["error"].lower(), runs[0]
        assert runs[0]["ms"] < 20000  # bounded: the client gave up before the service answered
        assert len(push.requests) == 2
    finally:
        push.close()


# ---------------------------------------------------------------- weather and geocoding upstreams
# (their error answers, malformed answers and the router's silence are in test_geo.py)

@pytest.mark.once
def test_weather_service_that_hangs_is_503_in_bounded_time_and_not_cached(fake_geo, server_factory):
    srv = server_factory(WEATHER_URL=fake_geo.url)
    api = Api(srv)
    user = api.register_user()
    fake_geo.reset()
    try:
        fake_geo.delay("forecast", 30)
        t0 = time.monotonic()
        r = api.get("/weather", params={"zip": "10001"}, token=user["token"])
        assert (r.status_code, r.json()) == (503, error_body(503, "Weather service unavailable"))
        assert time.monotonic() - t0 < 12  # the service waits 8 s
        fake_geo.delay("forecast", 0)
        r = api.get("/weather", params={"zip": "10001"}, token=user["token"])
        assert r.status_code == 200 and len(r.json()) == 14  # the failure was not cached
    finally:
        fake_geo.reset()


@pytest.mark.once
def test_geocoder_that_hangs_is_422_in_bounded_time(fake_geo, server_factory):
    srv = server_factory(GEOCODER_URL=fake_geo.url)
    api = Api(srv)
    fake_geo.reset()
    try:
        fake_geo.add_place("somewhere slow", 40.0, -75.0)
        fake_geo.delay("search", 30)
        t0 = time.monotonic()
        r = api.get("/drive-time", params={"fromAddress": "somewhere slow", "toAddress": "somewhere slow"})
        assert (r.status_code, r.json()) == (422, error_body(422, "Geocoding failed for fromAddress"))
        assert time.monotonic() - t0 < 9  # the service waits 5 s
    finally:
        fake_geo.reset()
