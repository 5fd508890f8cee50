"""`marketplace demo` seeds a running development server's database through the API (its own
in-process server on a loopback port), prints the logins, changes nothing when run again and
refuses production. The running server then serves what the demo made."""
import os
import subprocess
import urllib.parse

import pytest

from conftest import ROOT, Api
from test_cli import SANITIZER_MARKERS

PASSWORD = "demo-password"


def demo(binary, srv, **env):
    full = dict(srv.env, **env)
    full.pop("PORT", None)
    p = subprocess.run([binary, "demo"], env=full, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert not any(m in p.stderr for m in SANITIZER_MARKERS), p.stderr[-5000:]
    return p


def login(api, email, provider=False):
    r = api.post("/auth/provider/login" if provider else "/auth/login", json={"email": email, "password": PASSWORD})
    assert r.status_code == 200, (email, r.text)
    return r.json()["token"]


@pytest.fixture
def binary(request):
    return request.config.getoption("--binary")


def test_demo_seeds_a_running_server(server_factory, binary):
    srv = server_factory()
    api = Api(srv)
    p = demo(binary, srv)
    assert p.returncode == 0, p.stderr
    for email in ("olivia@demo.example", "ben@demo.example", "dana@demo.example", "greenacres@demo.example",
                  "handy@demo.example", "sparkle@demo.example"):
        assert email in p.stdout
    assert f"password for every account: {PASSWORD}" in p.stdout

    olivia = login(api, "olivia@demo.example")
    assert api.get("/payments/premium/status", token=olivia).json()["isPremium"] is True
    assert api.get("/payments/method", token=olivia).json()["last4"] == "4242"
    assert len(api.get("/users/me/addresses", token=olivia).json()) == 2
    jobs = api.get("/jobs", token=olivia).json()["jobs"]
    assert sorted(j["status"] for j in jobs) == ["ACCEPTED", "CANCELLED", "COMPLETED", "PENDING", "QUOTED"]
    done = next(j for j in jobs if j["status"] == "COMPLETED")
    assert done["tipAmount"] == 10 and done["beforeImages"] and done["afterImages"]
    detail = api.get(f"/jobs/{done['id']}", token=olivia).json()
    assert detail["payment"]["status"] == "PAID"
    messages = api.get(f"/jobs/{done['id']}/messages", token=olivia).json()["messages"]
    assert [m["content"] for m in messages] == ["Looks wonderful, thank you!"]
    quoted = next(j for j in jobs if j["status"] == "QUOTED")
    assert len(api.get(f"/quotes/job/{quoted['id']}", token=olivia).json()) == 2

    ben = login(api, "ben@demo.example")
    ben_jobs = api.get("/jobs", token=ben).json()["jobs"]
    assert sorted(j["status"] for j in ben_jobs) == ["COMPLETED", "IN_PROGRESS", "ON_THE_WAY", "PENDING"]
    on_the_way = next(j for j in ben_jobs if j["status"] == "ON_THE_WAY")
    assert on_the_way["etaMinutes"] is not None
    # every state of a job is there, across the demo's customers
    every = {j["status"] for token in (olivia, ben) for j in api.get("/jobs", token=token).json()["jobs"]}
    assert every == {"PENDING", "QUOTED", "ACCEPTED", "ON_THE_WAY", "IN_PROGRESS", "COMPLETED", "CANCELLED"}
    dana = login(api, "dana@demo.example")
    (declined,) = api.get("/jobs", token=dana).json()["jobs"]
    assert api.get(f"/jobs/{declined['id']}", token=dana).json()["payment"]["status"] == "FAILED"

    for email in ("greenacres@demo.example", "handy@demo.example", "sparkle@demo.example"):
        me = api.get("/providers/me", token=login(api, email, provider=True)).json()
        assert me["idCheckStatus"] == "passed", (email, me["idCheckStatus"], me["idCheckFlags"])
        assert me["logoUrl"] and len(me["headshots"]) == 1 and me["companyName"]
        # the running server serves the files the demo stored
        logo = urllib.parse.urlsplit(me["logoUrl"])
        assert api.get(f"{logo.path}?{logo.query}").status_code == 200
    green = api.get("/providers/me", token=login(api, "greenacres@demo.example", provider=True)).json()
    assert green["insCheckStatus"] == "active" and green["insuranceInfo"]
    # every verified provider has an enabled payout account: what the completed jobs earned waits
    # for its report window, then goes out
    for email in ("greenacres@demo.example", "handy@demo.example", "sparkle@demo.example"):
        token = login(api, email, provider=True)
        assert api.get("/providers/me/payout-account", token=token).json() == \
            {"status": "enabled", "payoutsEnabled": True, "requirements": []}, email
    payouts = api.get("/providers/me/payouts", token=login(api, "greenacres@demo.example", provider=True)).json()
    assert sorted((t["kind"], t["amount"], t["status"]) for t in payouts["transfers"]) == \
        [("job", 75, "scheduled"), ("tip", 10, "scheduled")]

    again = demo(binary, srv)
    assert again.returncode == 0, again.stderr
    assert "exist already" in again.stdout and "olivia@demo.example" in again.stdout
    assert len(api.get("/jobs", token=olivia).json()["jobs"]) == 5  # nothing added


def test_demo_is_refused_in_production(server_factory, binary):
    srv = server_factory()
    p = demo(binary, srv, APP_ENV="production", JWT_SECRET="x" * 40, BCRYPT_COST="12")
    assert p.returncode != 0
    assert "demo refuses to run with APP_ENV=production" in p.stderr
    r = Api(srv).post("/auth/login", json={"email": "olivia@demo.example", "password": PASSWORD})
    assert r.status_code == 401


def test_demo_needs_the_sample_files(server_factory, binary, tmp_path):
    srv = server_factory()
    p = demo(binary, srv, DEMO_EXAMPLES_DIR=str(tmp_path))
    assert p.returncode == 1
    assert "sample files are missing" in p.stderr
    assert os.path.isdir(os.path.join(ROOT, "examples"))
