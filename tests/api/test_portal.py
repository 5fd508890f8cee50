"""The staff portal (issue 34): the browser app at /portal served by the binary, and the API it
added (GET /staff/audit/me, the administrator's elevation approvals under /admin/elevations).

- The page and its assets: the same page (with a strict Content-Security-Policy) at /portal and
  every address under it but the two assets; the assets are the bundle esbuild makes from
  portal/src today (stale assets fail), and the sources type-check against the client's types.
- The browser walk (tests/api/portal/walk.mjs, one headless Chromium): every role signs in,
  every screen opens from the navigation and from its address, axe-core on every page, a refund
  from the portal, an elevation approved in the portal and used for an impersonation session
  whose requests show in the audit trail, ended from its banner, a phone-width pass, the CSP on
  every page load and no console error. With PORTAL_SCREENSHOTS=DIR it saves its screenshots
  there (docs/portal/ holds the ones the documentation shows).
- The routes the portal needed, with their bounds and the roles they refuse.
"""
import json
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest

from conftest import ADMIN_EMAIL, ADMIN_PASSWORD, ROOT, admin_login, unique_ip
from flow_helpers import accept, customer, fresh_zip, ok, payment_of, post_job, provider, quote, step
from helpers import error_body, eventually
from staff_helpers import ELEVATION_FIELDS, FORBIDDEN, UNAUTHORIZED, elevation_links, link_get, make_staff, \
    request_elevation

NODE_BIN = os.path.join(ROOT, "node_modules", ".bin")
CHROMIUM = "/usr/bin/chromium"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:")


# ---------------------------------------------------------------- the page and its assets

@pytest.mark.parametrize("path", ["/portal", "/portal/", "/portal/customers", "/portal/customers/c123/jobs/c456",
                                  "/portal/a/b/c/d/e/f", "/portal/portal.jsx", "/portal/tickets?status=OPEN"])
def test_every_portal_address_is_the_page(api, path):
    r = api.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    csp = r.headers["Content-Security-Policy"]
    assert csp.startswith(CSP), csp
    assert "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp and "connect-src 'self'" in csp
    assert r.headers["X-Frame-Options"] == "DENY" and r.headers["Referrer-Policy"] == "no-referrer"
    assert r.headers["Cache-Control"] == "no-cache"
    assert 'src="/portal/portal.js"' in r.text and 'href="/portal/portal.css"' in r.text
    assert "<script>" not in r.text and "<style" not in r.text and " style=" not in r.text
    assert "Set-Cookie" not in r.headers


@pytest.mark.parametrize("path,ctype", [("/portal/portal.js", "application/javascript; charset=utf-8"),
                                        ("/portal/portal.css", "text/css; charset=utf-8")])
def test_the_assets_are_served_from_the_binary(api, path, ctype):
    r = api.get(path)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == ctype and r.headers["Cache-Control"] == "no-cache"
    assert len(r.content) > 1000


def test_near_misses_are_not_the_portal(api):
    assert api.get("/portalx").status_code == 404
    assert api.get("/portals/x").status_code == 404
    assert api.post("/portal/customers", json={}).status_code in (404, 405)


def build_assets(out):
    p = subprocess.run(["node", os.path.join(ROOT, "portal", "build.mjs"), out], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.once
def test_assets_are_the_current_build_of_their_sources(api, tmp_path):
    """What the binary serves is what esbuild makes of portal/src now: an edit not rebuilt (or a
    binary built before it) fails here. Then tsc checks the sources against the client's types."""
    build_assets(str(tmp_path))
    for name, ctype in (("portal.js", "application/javascript; charset=utf-8"), ("portal.css", "text/css; charset=utf-8")):
        r = api.get(f"/portal/{name}")
        assert r.status_code == 200 and r.headers["Content-Type"] == ctype
        assert r.content == (tmp_path / name).read_bytes(), f"build/portal/{name} is stale: run make"
        assert "Content-Security-Policy" not in r.headers
    assert b"localStorage" not in (tmp_path / "portal.js").read_bytes()
    p = subprocess.run([os.path.join(NODE_BIN, "tsc"), "-p", os.path.join(ROOT, "portal", "tsconfig.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


# ---------------------------------------------------------------- GET /staff/audit/me

AUDIT_RECORD_FIELDS = {"id", "seq", "kind", "action", "targetId", "targetRole", "elevationId", "method", "path",
                       "detail", "status", "createdAt"}


def test_own_audit_trail_holds_own_actions_and_session_requests(api, server):
    admin = admin_login(api)
    cs = make_staff(api, "customer_support", admin)
    other = make_staff(api, "customer_support", admin)
    user = api.register_user()
    e = request_elevation(api, cs, user["id"])
    request_elevation(api, other, user["id"])
    approve, _ = elevation_links(server, e["id"])
    assert link_get(api, approve).status_code == 200
    imp = ok(api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e["id"]}))["token"]
    assert api.get("/users/me", token=imp).status_code == 200
    mine = eventually(lambda: ok(api.get("/staff/audit/me", token=cs["token"])), 10, "the outcome record",
                      until=lambda rows: any(r["kind"] == "request" and r["status"] == 200 for r in rows))
    kinds = [(r["kind"], r.get("action"), r.get("method"), r.get("path")) for r in mine]
    assert kinds[0] == ("request", None, "GET", "/users/me"), kinds
    assert ("action", "elevation.request", None, None) in kinds
    seqs = [r["seq"] for r in mine]
    assert seqs == sorted(seqs, reverse=True)
    for r in mine:
        assert set(r) <= AUDIT_RECORD_FIELDS and {"id", "seq", "kind", "detail", "status", "createdAt"} <= set(r)
    req = next(r for r in mine if r["kind"] == "request")
    assert req["elevationId"] == e["id"] and req["status"] == 200
    action = next(r for r in mine if r.get("action") == "elevation.request")
    assert action["targetId"] == user["id"] and action["targetRole"] == "user" and action["status"] is None
    assert action["detail"]["elevationId"] == e["id"]
    # another member's trail holds none of it
    theirs = ok(api.get("/staff/audit/me", token=other["token"]))
    assert theirs and not {r["id"] for r in theirs} & {r["id"] for r in mine}
    # paged: one at a time, newest first, the Link header to the next page
    r = api.get("/staff/audit/me?limit=1", token=cs["token"])
    assert r.status_code == 200 and [x["id"] for x in r.json()] == [mine[0]["id"]] and 'rel="next"' in r.headers["Link"]
    nxt = r.headers["Link"].split("<")[1].split(">")[0]
    r2 = api.session.get(nxt if nxt.startswith("http") else server.url + nxt,
                         headers={"Authorization": f"Bearer {cs['token']}"})
    assert [x["id"] for x in r2.json()] == [mine[1]["id"]]


def test_own_audit_trail_refusals(api):
    admin = admin_login(api)
    ts = make_staff(api, "internal_audit", admin)
    assert ok(api.get("/staff/audit/me", token=ts["token"])) == []
    r = api.get("/staff/audit/me")
    assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
    user = api.register_user()
    for token in (user["token"], admin):
        r = api.get("/staff/audit/me", token=token)
        assert (r.status_code, r.json()) == (403, FORBIDDEN)
    for q, msg in (("limit=0", "limit: must be an integer from 1 to 100"), ("cursor=nope", "cursor: is not valid")):
        r = api.get(f"/staff/audit/me?{q}", token=ts["token"])
        assert r.status_code == 400 and r.json()["error"] == msg, r.text


# ---------------------------------------------------------------- the administrator's approvals

def test_admin_lists_approves_and_denies_elevations(api, server):
    admin = admin_login(api)
    cs = make_staff(api, "customer_support", admin)
    u1, u2, u3 = api.register_user(), api.register_user(), api.register_user()
    e1, e2, e3 = (request_elevation(api, cs, u["id"]) for u in (u1, u2, u3))
    pending = ok(api.get("/admin/elevations?status=PENDING&limit=100", token=admin))
    ids = [e["id"] for e in pending]
    assert {e1["id"], e2["id"], e3["id"]} <= set(ids) and all(e["status"] == "PENDING" for e in pending)
    assert ids.index(e3["id"]) < ids.index(e2["id"]) < ids.index(e1["id"])  # newest first
    assert set(pending[0]) == ELEVATION_FIELDS
    every = ok(api.get("/admin/elevations", token=admin))
    assert {e1["id"], e2["id"], e3["id"]} <= {e["id"] for e in every}

    r = ok(api.post(f"/admin/elevations/{e1['id']}/approve", token=admin))
    assert (r["id"], r["status"]) == (e1["id"], "APPROVED") and r["resolvedAt"]
    r = ok(api.post(f"/admin/elevations/{e2['id']}/deny", token=admin))
    assert r["status"] == "REJECTED"
    # the approval works as the link's does: the owner starts the session
    imp = ok(api.post("/staff/impersonate", token=cs["token"], json={"elevationId": e1["id"]}))
    assert imp["identity"]["id"] == u1["id"]
    # deny ends an active one
    r = ok(api.post(f"/admin/elevations/{e1['id']}/deny", token=admin))
    assert r["status"] == "DEACTIVATED"
    assert api.get("/users/me", token=imp["token"]).status_code == 401
    # resolved: 409, nothing changes
    for action, eid, status in (("approve", e1["id"], "DEACTIVATED"), ("approve", e2["id"], "REJECTED"),
                                ("deny", e2["id"], "REJECTED")):
        r = api.post(f"/admin/elevations/{eid}/{action}", token=admin)
        assert r.status_code == 409 and r.json() == {"error": f"Elevation request is already {status}",
                                                     "code": "invalid_state"}, r.text
    # the emailed link of a request approved in the portal says it is resolved
    approve, _ = elevation_links(server, e2["id"])
    assert "already resolved" in link_get(api, approve).text
    # the filter
    rejected = ok(api.get("/admin/elevations?status=REJECTED&limit=100", token=admin))
    assert e2["id"] in {e["id"] for e in rejected} and all(e["status"] == "REJECTED" for e in rejected)
    # the audit trail names the administrator
    mine = ok(api.get("/staff/audit/me", token=cs["token"]))
    assert any(r.get("action") == "elevation.request" for r in mine)


def test_admin_elevation_routes_refusals(api):
    admin = admin_login(api)
    cs = make_staff(api, "customer_support", admin)
    user = api.register_user()
    e = request_elevation(api, cs, user["id"])
    missing = "c" + uuid.uuid4().hex[:24]
    for action in ("approve", "deny"):
        r = api.post(f"/admin/elevations/{missing}/{action}", token=admin)
        assert (r.status_code, r.json()) == (404, error_body(404, "Elevation request not found")), r.text
        r = api.post(f"/admin/elevations/{e['id']}/{action}")
        assert (r.status_code, r.json()) == (401, UNAUTHORIZED)
        for token in (cs["token"], user["token"]):
            r = api.post(f"/admin/elevations/{e['id']}/{action}", token=token)
            assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = api.get("/admin/elevations", token=cs["token"])
    assert (r.status_code, r.json()) == (403, FORBIDDEN)
    r = api.get("/admin/elevations?status=pending", token=admin)
    assert r.status_code == 400 and r.json()["error"].startswith("status: must be one of"), r.text
    r = api.get("/admin/elevations?limit=101", token=admin)
    assert r.status_code == 400 and r.json()["error"] == "limit: must be an integer from 1 to 100"
    assert ok(api.get(f"/staff/elevation", token=cs["token"]))[0]["status"] == "PENDING"  # nothing changed


# ---------------------------------------------------------------- the browser walk

@pytest.fixture
def portal_world(api, server):
    """Staff of every role, a customer with a completed paid job (and a message on it) with a
    verified provider, and a support ticket."""
    admin = admin_login(api)
    staff = {role: make_staff(api, role, admin, name=f"{role.replace('_', ' ').title()} {uuid.uuid4().hex[:4]}")
             for role in ("customer_support", "professional_support", "technical_support", "internal_audit")}
    tag = uuid.uuid4().hex[:6]
    zip_code = fresh_zip()[0]
    user = customer(api, zip_code, "pm_card_visa", name=f"Portal Customer {tag}")
    pro = provider(api, [zip_code], ["lawncare"], name=f"Portal Pro {tag}", companyName=f"Lawns {tag}")
    job = post_job(api, user)
    accept(api, user, quote(api, pro, job["id"], 100)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, pro, job["id"], status)
    eventually(lambda: payment_of(api, user, job["id"]), 20, "the job's capture",
               until=lambda p: p and p["status"] == "PAID")
    message = f"Please mow the back lawn too ({tag})"
    ok(api.post(f"/jobs/{job['id']}/messages", token=user["token"], json={"content": message}), 201)
    subject = f"The app crashes ({tag})"
    body = "The app closes when I open my jobs."
    ok(api.post("/users/me/support", token=user["token"], json={"subject": subject, "body": body, "category": "technical"}))
    tickets = ok(api.get("/staff/tickets?limit=100", token=staff["technical_support"]["token"]))
    ticket = next(t for t in tickets if t["subject"] == subject)
    return {
        "staff": {role: {**s, "role": role} for role, s in staff.items()},
        "admin": {"email": ADMIN_EMAIL, "password": ADMIN_PASSWORD, "role": "admin"},
        "customer": {"id": user["id"], "name": user["body"]["name"], "email": user["email"], "token": user["token"]},
        "provider": {"id": pro["id"], "name": pro["body"]["name"]},
        "job_id": job["id"], "message": message,
        "ticket": {"id": ticket["id"], "subject": subject, "body": body},
    }


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian's chromium is not installed (scripts/deps.sh test)")
@pytest.mark.unsanitized  # the SQLite (release) pass: the browser adds nothing under the sanitizers, nor on
@pytest.mark.engine_independent  # PostgreSQL, that the API tests of the same routes there do not cover
def test_the_portal_in_a_browser(api, server, portal_world, tmp_path):
    world = portal_world
    config = {**world, "url": server.url, "chromium": CHROMIUM, "ip": unique_ip(),
              "screenshots": os.environ.get("PORTAL_SCREENSHOTS") or None}
    path = tmp_path / "walk.json"
    path.write_text(json.dumps(config))
    p = subprocess.run(["node", os.path.join(ROOT, "tests", "api", "portal", "walk.mjs"), str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    out = p.stdout.strip().splitlines()
    report = json.loads(out[-1]) if out and out[-1].startswith("{") else {"error": p.stdout + p.stderr}
    assert p.returncode == 0 and "error" not in report, json.dumps(report, indent=1) + p.stderr[-3000:]
    assert report["axe"] >= 40 and report["pages"] >= 30, report
    # what the browser did, seen through the API
    cs = world["staff"]["customer_support"]
    detail = ok(api.get(f"/staff/customers/{world['customer']['id']}", token=cs["token"]))
    pay = next(x for x in detail["payments"] if x["jobId"] == world["job_id"] and x["kind"] == "job")
    assert pay["refundedAmount"] == 10
    assert pay["refunds"][-1]["reason"] == "Portal refund: the lawn was half mown"
    assert pay["refunds"][-1]["staffId"] == cs["id"]
    (elevation,) = detail["elevations"]
    assert elevation["status"] == "DEACTIVATED" and elevation["activatedAt"]
    trail = ok(api.get("/staff/audit/me?limit=100", token=cs["token"]))
    assert any(r["kind"] == "request" and r["path"] == f"/jobs/{world['job_id']}/messages" and
               r["elevationId"] == elevation["id"] for r in trail)
    sessions = ok(api.get("/staff/audit/sessions?limit=100", token=world["staff"]["internal_audit"]["token"]))
    (mine,) = [s for s in sessions if s["id"] == cs["id"]]
    assert any(ev["path"] == f"/jobs/{world['job_id']}/messages" for ev in mine["sessions"][0]["events"])
    tickets = ok(api.get("/staff/tickets?status=CLOSED&limit=100", token=world["staff"]["technical_support"]["token"]))
    closed = next(t for t in tickets if t["id"] == world["ticket"]["id"])
    assert closed["notes"] == "Asked the customer for a screenshot"
