"""Paging on every list (issue 24, item 2), route by route, on both engines.

One world of accounts and records (a premium customer with jobs in every state, quotes,
addresses, favorites and a thread; providers; staff of each role) is read through every paged
list: followed page by page through `Link: <...>; rel="next"` (and `nextCursor` in the wrapped
answers), the pages hold exactly the list's unpaged answer, in its order, nothing twice; every
route refuses a bad `limit` and a bad or foreign `cursor` with the documented 400s. The filters
(`status=`, `unread=`) and rows arriving between pages are tested with their lists
(test_jobs.py, test_notifications.py) and here for the job lists.
"""
import urllib.parse
import uuid

import pytest

from conftest import Api, admin_login
from flow_helpers import accept, customer, ok, post_job, private_zip, provider, quote, step
from helpers import error_body, next_link, pages
from staff_helpers import make_staff, request_elevation

LIMIT_ERROR = error_body(400, "limit: must be an integer from 1 to 100")
CURSOR_ERROR = error_body(400, "cursor: is not valid")
STATUS_ERROR = error_body(400, "status: must be one of: PENDING, QUOTED, ACCEPTED, ON_THE_WAY, IN_PROGRESS, "
                               "COMPLETED, CANCELLED")


class World:
    """Everything every paged list needs a few rows of, made once for the file."""

    def __init__(self, api):
        self.marker = uuid.uuid4().hex[:10]
        self.zip = private_zip()
        self.user = customer(api, self.zip, "pm_card_visa", name=f"Paging {self.marker} 0")
        ok(api.post("/payments/premium/subscribe", token=self.user["token"]))
        self.pros = [provider(api, [self.zip], name=f"Paging {self.marker} pro {i}") for i in range(3)]
        p0 = self.pros[0]
        self.jobs = [post_job(api, self.user)["id"] for _ in range(7)]
        for p in self.pros:
            quote(api, p, self.jobs[0])
        for j, target in ((1, "ACCEPTED"), (2, "COMPLETED"), (3, "ON_THE_WAY"), (4, "COMPLETED")):
            accept(api, self.user, quote(api, p0, self.jobs[j])["id"])
            order = ["ON_THE_WAY", "IN_PROGRESS", "COMPLETED"]
            for s in order[:order.index(target) + 1] if target != "ACCEPTED" else []:
                step(api, p0, self.jobs[j], s)
        for p in self.pros:
            ok(api.post(f"/users/me/favorites/{p['id']}", token=self.user["token"]))
        for i in range(3):
            ok(api.post("/users/me/addresses", token=self.user["token"],
                        json={"address": f"{i} Paging Row", "zip": self.zip}), 201)
        for i in range(5):
            ok(api.post(f"/jobs/{self.jobs[1]}/messages", token=p0["token"], json={"content": f"m{i}"}), 201)
        for p in self.pros[1:]:  # two more threads of the customer's, on the job they quoted
            ok(api.post(f"/jobs/{self.jobs[0]}/messages", token=p["token"], json={"content": "hello"}), 201)
        for i in range(3):
            customer(api, self.zip, name=f"Paging {self.marker} {i + 1}")
            ok(api.post("/users/me/support", token=self.user["token"],
                        json={"subject": f"Help {i}", "body": "Please", "category": "feedback"}))
        admin = admin_login(api)
        self.staff = {role: make_staff(api, role, admin) for role in
                      ("customer_support", "professional_support", "technical_support", "internal_audit")}
        self.staff["admin"] = {"token": admin}
        others = [customer(api, self.zip) for _ in range(3)]
        for other in others:
            request_elevation(api, self.staff["customer_support"], other["id"])

    def lists(self):
        """(path, token, params, wrapper, page size) of every paged list."""
        u, p0, p1 = self.user["token"], self.pros[0]["token"], self.pros[1]["token"]
        s = self.staff
        return [
            ("/jobs", u, {}, "jobs", 2),
            ("/jobs", p1, {}, "jobs", 1),  # the provider feed: the open jobs of its ZIP
            ("/jobs/reportable", u, {}, None, 1),
            ("/providers/me/jobs", p0, {}, None, 1),
            ("/providers/me/schedule", p0, {}, None, 1),
            (f"/jobs/{self.jobs[1]}/messages", u, {}, "messages", 2),
            (f"/jobs/{self.jobs[1]}/messages", p0, {}, "messages", 3),
            ("/users/me/notifications", u, {}, None, 4),
            ("/providers/me/notifications", p0, {}, None, 2),
            ("/users/me/addresses", u, {}, None, 2),
            ("/users/me/favorites", u, {}, None, 2),
            (f"/quotes/job/{self.jobs[0]}", u, {}, None, 2),
            ("/providers/me/quotes", p0, {}, None, 2),
            ("/users/me/threads", u, {}, None, 1),
            ("/staff/customers", s["customer_support"]["token"], {"q": self.marker}, None, 2),
            ("/staff/providers", s["professional_support"]["token"], {"q": self.marker}, None, 2),
            ("/staff/elevation", s["customer_support"]["token"], {}, None, 2),
            ("/staff/list", s["admin"]["token"], {}, None, 3),
            ("/staff/audit/sessions", s["internal_audit"]["token"], {}, None, 3),
            ("/staff/tickets", s["technical_support"]["token"], {}, None, 2),
        ]


@pytest.fixture(scope="module")
def world(server):
    return World(Api(server))


def ids(items):
    """Each item's identity: its id, or a thread's job and counterpart."""
    return [i["id"] if "id" in i else (i["jobId"], i["counterpart"]["id"]) for i in items]


def test_every_list_pages_to_its_whole_answer(api, world):
    for path, token, params, wrap, size in world.lists():
        r = api.get(path, token=token, params=params)
        assert r.status_code == 200 and "Link" not in r.headers, (path, r.text)
        whole = r.json()[wrap] if wrap else r.json()
        if wrap:
            assert "nextCursor" not in r.json(), path
        assert len(whole) > size, (path, len(whole))  # at least two pages
        got = pages(api, path, token, params, wrap, limit=size)
        assert len(got) == -(-len(whole) // size), (path, [len(p) for p in got])
        assert [item for page in got for item in page] == whole, path
        assert len(set(ids(whole))) == len(whole), path


def test_the_lists_have_the_rows_they_should(api, world):
    """The world's own rows, so the test above pages real lists."""
    expect = {("/jobs", world.user["token"]): 7, ("/jobs", world.pros[1]["token"]): 3,
              ("/jobs/reportable", world.user["token"]): 2, ("/providers/me/jobs", world.pros[0]["token"]): 4,
              ("/providers/me/schedule", world.pros[0]["token"]): 2, ("/users/me/addresses", world.user["token"]): 3,
              ("/users/me/favorites", world.user["token"]): 3, (f"/quotes/job/{world.jobs[0]}", world.user["token"]): 3,
              ("/providers/me/quotes", world.pros[0]["token"]): 5, ("/users/me/threads", world.user["token"]): 3}
    for (path, token), n in expect.items():
        body = ok(api.get(path, token=token))
        assert len(body["jobs"] if path == "/jobs" else body) == n, path
    found = ok(api.get("/staff/customers", token=world.staff["customer_support"]["token"], params={"q": world.marker}))
    assert len(found) == 4


def test_every_list_refuses_a_bad_limit(api, world):
    for path, token, params, _, _ in world.lists():
        for bad in ("0", "101", "-3", "2.5", "two", "", "0x10", "99999999999999999999"):
            r = api.get(path, token=token, params={**params, "limit": bad})
            assert (r.status_code, r.json()) == (400, LIMIT_ERROR), (path, bad)
        for good in ("1", "100"):
            assert api.get(path, token=token, params={**params, "limit": good}).status_code == 200, path


def cursor_of(r):
    url = next_link(r)
    assert url, r.headers
    return urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["cursor"][0]


def test_every_list_refuses_a_forged_or_foreign_cursor(api, world):
    lists = world.lists()
    cursors = {}
    for path, token, params, _, _ in lists:
        cursors[(path, token)] = cursor_of(api.get(path, token=token, params={**params, "limit": 1}))
    for path, token, params, _, _ in lists:
        own = cursors[(path, token)]
        assert api.get(path, token=token, params={**params, "cursor": own}).status_code == 200, path
        for other, cursor in cursors.items():
            if other == (path, token):
                continue
            r = api.get(path, token=token, params={**params, "cursor": cursor})
            assert (r.status_code, r.json()) == (400, CURSOR_ERROR), (path, other)
        body, mac = own.rsplit(".", 1)
        for bad in ("", "x", own[:-1], own + "0", body + "." + "0" * 32, "e30." + mac, own.replace(".", ""),
                    body[:-2] + "." + mac):
            r = api.get(path, token=token, params={**params, "cursor": bad})
            assert (r.status_code, r.json()) == (400, CURSOR_ERROR), (path, bad)


def test_the_link_keeps_the_request_and_a_cursor_continues_without_limit(api, world):
    token = world.staff["customer_support"]["token"]
    r = api.get("/staff/customers", token=token, params={"q": world.marker, "limit": 1})
    url = urllib.parse.urlsplit(next_link(r))
    assert url.path == "/staff/customers"
    query = urllib.parse.parse_qs(url.query)
    assert query["q"] == [world.marker] and query["limit"] == ["1"] and len(query["cursor"]) == 1
    assert url.netloc == urllib.parse.urlsplit(api.url).netloc.replace("127.0.0.1", "localhost")
    # a cursor alone continues in pages of 100: here, the rest of the list
    rest = ok(api.get("/staff/customers", token=token, params={"q": world.marker, "cursor": query["cursor"][0]}))
    whole = ok(api.get("/staff/customers", token=token, params={"q": world.marker}))
    assert [r.json()[0]] + rest == whole


def test_the_link_is_built_from_the_parsed_parameters_only(api, world):
    """Nothing of the raw query string reaches the header: parameters the route does not take,
    repeated ones and its spelling of values are left out or rewritten."""
    token = world.staff["customer_support"]["token"]
    raw = f"q={world.marker}&limit=01&utm=%3E%3B%20rel%3D%22evil%22&limit=1&x=<a>"
    r = api.get("/staff/customers?" + raw, token=token)
    assert r.status_code == 200, r.text  # parameters a route does not take are ignored
    link = r.headers["Link"]
    assert link.count("<") == 1 and link.endswith('>; rel="next"'), link
    assert "utm" not in link and "evil" not in link and "x=" not in link, link
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(next_link(r)).query)
    assert set(query) == {"q", "limit", "cursor"} and query["limit"] == ["1"] and query["q"] == [world.marker]


def test_job_lists_filter_by_status(api, world):
    u, p1 = world.user["token"], world.pros[1]["token"]
    jobs = ok(api.get("/jobs", token=u))["jobs"]
    by_status = {}
    for j in jobs:
        by_status.setdefault(j["status"], []).append(j["id"])
    assert sorted(by_status) == ["ACCEPTED", "COMPLETED", "ON_THE_WAY", "PENDING", "QUOTED"]
    for statuses in (["COMPLETED"], ["PENDING", "QUOTED"], ["ACCEPTED", "ON_THE_WAY", "COMPLETED"], ["CANCELLED"],
                     ["QUOTED", "QUOTED"]):
        got = ok(api.get("/jobs", token=u, params={"status": ",".join(statuses)}))["jobs"]
        assert ids(got) == [j["id"] for j in jobs if j["status"] in statuses], statuses
    # paged and filtered at once
    got = pages(api, "/jobs", u, {"status": "COMPLETED,PENDING"}, "jobs", limit=1)
    assert [j["id"] for p in got for j in p] == [j["id"] for j in jobs if j["status"] in ("COMPLETED", "PENDING")]
    # the provider feed holds open jobs: PENDING and QUOTED filter it, the others leave nothing
    feed = ok(api.get("/jobs", token=p1))["jobs"]
    assert {j["status"] for j in feed} == {"PENDING", "QUOTED"}
    for status in ("PENDING", "QUOTED"):
        got = ok(api.get("/jobs", token=p1, params={"status": status}))["jobs"]
        assert got == [j for j in feed if j["status"] == status], status
        got = pages(api, "/jobs", p1, {"status": status}, "jobs", limit=1)
        assert [j for p in got for j in p] == [j for j in feed if j["status"] == status], status
    assert ok(api.get("/jobs", token=p1, params={"status": "QUOTED,PENDING"}))["jobs"] == feed
    assert ok(api.get("/jobs", token=p1, params={"status": "ACCEPTED,COMPLETED"}))["jobs"] == []
    for bad in ("DONE", "completed", "", ",", "PENDING,", "PENDING,,QUOTED", " PENDING"):
        for token in (u, p1):
            r = api.get("/jobs", token=token, params={"status": bad})
            assert (r.status_code, r.json()) == (400, STATUS_ERROR), bad


def test_job_pages_neither_repeat_nor_skip_while_jobs_arrive(api):
    """New jobs posted between pages belong before the first page (newest first for the
    customer; the feed puts ASAP jobs first): later pages neither repeat nor skip a job."""
    zip_code = private_zip()
    u = customer(api, zip_code)
    pro = provider(api, [zip_code])
    posted = [post_job(api, u, preferredAt=f"2031-06-{d:02d}T09:00:00.000Z")["id"] for d in range(1, 8)]

    def arrive(i):
        post_job(api, u, isAsap=True)

    got = pages(api, "/jobs", u["token"], {}, "jobs", between=arrive, limit=3)
    assert [j["id"] for p in got for j in p] == posted[::-1]
    feed_then = [j["id"] for j in ok(api.get("/jobs", token=pro["token"]))["jobs"]]
    got = pages(api, "/jobs", pro["token"], {}, "jobs", between=arrive, limit=3)
    assert [j["id"] for p in got for j in p] == feed_then
    assert len(ok(api.get("/jobs", token=u["token"]))["jobs"]) == 7 + 2 + 2  # two arrivals per reading


def test_a_thread_cursor_stays_in_its_thread(api):
    """A customer's two threads on one job are two lists: a cursor of one is refused by the other."""
    zip_code = private_zip()
    u = customer(api, zip_code)
    a, b = provider(api, [zip_code]), provider(api, [zip_code])
    job = post_job(api, u)["id"]
    for p in (a, b):
        quote(api, p, job)
        for i in range(3):
            ok(api.post(f"/jobs/{job}/messages", token=p["token"], json={"content": f"{p['id']} {i}"}), 201)
    r = api.get(f"/jobs/{job}/messages", token=u["token"], params={"providerId": a["id"], "limit": 1})
    cursor = r.json()["nextCursor"]
    r = api.get(f"/jobs/{job}/messages", token=u["token"], params={"providerId": b["id"], "cursor": cursor})
    assert (r.status_code, r.json()) == (400, CURSOR_ERROR)
    rest = ok(api.get(f"/jobs/{job}/messages", token=u["token"], params={"providerId": a["id"], "cursor": cursor}))
    assert [m["content"] for m in rest["messages"]] == [f"{a['id']} 1", f"{a['id']} 2"]
    assert "nextCursor" not in rest


def test_a_feed_of_several_zips_and_services_pages_in_feed_order(api):
    """The feed merges one part per (service, ZIP); a page continues every part from the cursor's job."""
    zips = [private_zip(), private_zip()]
    pro = provider(api, zips, services=("lawncare", "handyman"))
    for i in range(8):
        u = customer(api, zips[i % 2])
        body = {"service": ("lawncare", "handyman")[i // 4 % 2]}
        if i % 3 == 0:
            post_job(api, u, isAsap=True, **body)
        else:
            post_job(api, u, preferredAt=f"2031-07-{10 - i:02d}T09:00:00.000Z", **body)
    whole = ok(api.get("/jobs", token=pro["token"]))["jobs"]
    assert len(whole) == 8
    assert [j["isAsap"] for j in whole] == [True] * 3 + [False] * 5
    assert [j["preferredAt"] for j in whole[3:]] == sorted(j["preferredAt"] for j in whole[3:])
    for size in (1, 3, 7):
        got = pages(api, "/jobs", pro["token"], {}, "jobs", limit=size)
        assert [j for p in got for j in p] == whole, size
