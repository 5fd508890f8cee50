"""Background work you can see and bound (issue 14, item 8): one log line per finished job;
document recognition on workers of its own (RECOGNITION_WORKERS) at a lower CPU priority, in
helper processes whose time per document is bounded, so an image of noise cannot hold a worker
for a minute and a burst of recognitions does not delay emails."""
import os
import subprocess
import time

import pytest
import requests

from conftest import Api, unique_ip
from helpers import eventually
from test_system import db_rows

# recognition does not depend on the engine or the sanitizers: once, in the release SQLite pass
pytestmark = pytest.mark.once


NOISE_SECONDS_BOUND = 12  # 5 s per image in the helper, plus queueing and a slow machine


@pytest.fixture(scope="module")
def noise_jpeg(tmp_path_factory):
    """A 4000x2520 photo of pure noise: Tesseract's layout analysis takes about a minute on it."""
    path = tmp_path_factory.mktemp("noise") / "noise.jpg"
    subprocess.run(["convert", "-seed", "5", "-size", "4000x2520", "xc:gray", "+noise", "Random", "-colorspace", "Gray",
                    "-quality", "40", str(path)], check=True)
    return path.read_bytes()


@pytest.fixture(scope="module")
def bg_server(make_server):
    return make_server(RECOGNITION_WORKERS="1", QUEUE_WORKERS="2", RECOGNITION_TIMEOUT_MS="5000")


def upload_licence(api, pro, data):
    r = api.post("/providers/me/id-documents", token=pro["token"], files={"front": ("front.jpg", data, "image/jpeg")})
    assert r.status_code == 200, r.text


def wait_checked(api, pro, timeout):
    return eventually(lambda: api.get("/providers/me", token=pro["token"]).json(), timeout, "the licence checked",
                      interval=0.1, until=lambda me: me["idCheckStatus"] != "pending")


def test_an_image_of_noise_is_recognised_in_bounded_time(bg_server, noise_jpeg):
    api = Api(bg_server)
    pro = api.register_provider()
    t0 = time.monotonic()
    upload_licence(api, pro, noise_jpeg)
    me = wait_checked(api, pro, NOISE_SECONDS_BOUND)
    assert time.monotonic() - t0 < NOISE_SECONDS_BOUND
    assert (me["idCheckStatus"], me["idCheckFlags"]) == ("failed", ["unreadable"])
    bg_server.wait_log(lambda line: "recognition stopped after" in (line.get("msg") or ""))
    (done,) = bg_server.wait_log(lambda line: line.get("kind") == "licence_check" and line.get("outcome") == "done")
    assert done["attempt"] == 1 and done["ms"] < NOISE_SECONDS_BOUND * 1000


def _tasks(pid):
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                nice = int(f.read().rsplit(")", 1)[1].split()[16])
        except OSError:
            continue
        out.setdefault(name, []).append(nice)
    return out


def _children(pid):
    """Child processes of every thread of pid (a child is listed under the thread that made it)."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def ocr_helpers(pid):
    out = []
    for c in _children(pid):
        try:
            with open(f"/proc/{c}/cmdline", "rb") as f:
                if b"ocr-helper" in f.read():
                    out.append(c)
        except OSError:  # it ended meanwhile
            pass
    return out


def test_recognition_has_its_own_workers_at_a_lower_priority(bg_server, noise_jpeg):
    api = Api(bg_server)
    tasks = _tasks(bg_server.proc.pid)
    assert tasks["recognition"] == [10], tasks  # RECOGNITION_WORKERS=1, nice 10
    assert tasks["queue"] == [0, 0], tasks      # QUEUE_WORKERS=2 at the requests' priority
    # a burst of noise images holds the one recognition worker for about 10 s ...
    pros = [api.register_provider() for _ in range(2)]
    for pro in pros:
        upload_licence(api, pro, noise_jpeg)
    helpers = eventually(lambda: ocr_helpers(bg_server.proc.pid), 10, "a recognition helper running")
    assert len(helpers) == 1, helpers
    # the other check waits its turn
    assert sorted(db_rows(bg_server.env["DATABASE_URL"], bg_server.data_dir, "SELECT status FROM job_queue WHERE "
                          "kind = 'licence_check' AND status <> 'done'")) == [("pending",), ("running",)]
    with open(f"/proc/{helpers[0]}/stat") as f:
        assert int(f.read().rsplit(")", 1)[1].split()[16]) == 10  # the helper runs at the worker's priority
    # ... while an email goes out at once
    user = api.register_user()
    t0 = time.monotonic()
    r = api.post("/auth/forgot-password", json={"email": user["email"], "role": "user"}, ip=unique_ip())
    assert r.status_code == 200
    bg_server.wait_mail(user["email"], timeout=5)
    assert time.monotonic() - t0 < 3
    # and requests stay fast
    t0 = time.monotonic()
    assert api.get("/users/me", token=user["token"]).status_code == 200
    assert time.monotonic() - t0 < 0.5
    # the test routes count the lanes apart: the general one idle, recognition's still at work
    api.wait_queue_idle(lane="general")
    heavy = api.get("/__test/queue", params={"lane": "heavy"}).json()
    assert 1 <= heavy["running"] + heavy["ready"] <= 2 and heavy["running"] <= 1, heavy
    for pro in pros:
        assert wait_checked(api, pro, 3 * NOISE_SECONDS_BOUND)["idCheckFlags"] == ["unreadable"]


def test_sigterm_hands_a_recognition_in_progress_back(make_server, noise_jpeg):
    """Stopping does not wait for a recognition (a minute on this image, with the bound raised
    to two): its helper is killed, and the check goes back to the queue whole, its attempt not
    used, to run again after the restart."""
    srv = make_server(RECOGNITION_WORKERS="1", RECOGNITION_TIMEOUT_MS="120000")
    api = Api(srv)
    pro = api.register_provider()
    upload_licence(api, pro, noise_jpeg)
    eventually(lambda: ocr_helpers(srv.proc.pid), 10, "the recognition helper running")
    t0 = time.monotonic()
    assert srv.stop() == 0
    assert time.monotonic() - t0 < 5
    assert db_rows(srv.env["DATABASE_URL"], srv.data_dir,
                   "SELECT status, attempts FROM job_queue WHERE kind = 'licence_check'") == [("pending", "0")]
    (handed,) = [line for line in srv.log_lines() if line.get("kind") == "licence_check"]
    assert (handed["outcome"], handed["attempt"]) == ("retry", 1), handed
    assert "interrupted" in handed["error"]
    srv.env["RECOGNITION_TIMEOUT_MS"] = "5000"
    srv.start()
    me = wait_checked(api, pro, 3 * NOISE_SECONDS_BOUND)
    assert (me["idCheckStatus"], me["idCheckFlags"]) == ("failed", ["unreadable"])
    (done,) = srv.wait_log(lambda line: line.get("kind") == "licence_check" and line.get("outcome") == "done")
    assert done["attempt"] == 1


def test_each_finished_job_logs_one_line(bg_server):
    api = Api(bg_server)
    done = lambda line: line.get("kind") == "email" and line.get("outcome") == "done"
    before = len([line for line in bg_server.log_lines() if done(line)])
    user = api.register_user()
    assert api.post("/auth/forgot-password", json={"email": user["email"], "role": "user"}, ip=unique_ip()).status_code == 200
    bg_server.wait_mail(user["email"])
    line = bg_server.wait_log(done, count=before + 1)[-1]
    assert set(line) >= {"time", "level", "msg", "kind", "jobId", "attempt", "ms", "outcome"}
    assert (line["level"], line["msg"], line["outcome"], line["attempt"]) == ("info", "background job done", "done", 1)
    assert isinstance(line["ms"], int) and 0 <= line["ms"] < 5000
    assert len([l for l in bg_server.log_lines() if l.get("jobId") == line["jobId"]]) == 1
