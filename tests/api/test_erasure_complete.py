"""An erased account leaves nothing of it behind (issue 32): the tables come from the ownership map,
src/domain/tables.json, so a table declared there is covered without a change here.

For each way an account goes (its owner's erasure, DELETE /users/me and /providers/me; an
administrator's deletion, DELETE /admin/accounts/:id) and each role, a customer and a provider are
given a record in every table the map marks personal (through the API: addresses with photos,
favorites, notes, a seasonal alert, a completed job with its payment, tip, quote, messages and
photos, review, report and recurring request, an open job with photos and a pending quote,
notifications, banners, support tickets, reset links, email changes, stream tickets and sessions, push tokens,
the provider's logo, documents, schedule and payout account). Before the erasure every column the
map says names the account must name it in some row (a table declared later without its record
here fails, until the world below makes one); after it, and after the background work it left
(refunds, voided holds), no row may name it, except those the map
declares kept for that way, and those only as the map says (`only`, `anonymised`). The map must
also list exactly the database's tables. Direct database reads: staff_helpers.sql (sqlite3, or the
private cluster's psql).
"""
import json
import os

import pytest

from conftest import ADMIN_ENV, Api, admin_login, unique_email, unique_ip
from flow_helpers import accept, customer, fresh_zip, image_files, ok, post_job, provider, quote, step
from helpers import eventually, png_bytes
from staff_helpers import sql

MAP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src", "domain", "tables.json")
with open(MAP, encoding="utf-8") as _f:
    TABLES = json.load(_f)["tables"]

DAY_MS = 24 * 3600 * 1000
SNOW = (73, 28.0, 19.0)  # the fake forecast's day of snow (test_premium.py)
ALL_DAY = {d: {"start": "00:00", "end": "23:59", "on": True} for d in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")}
SCENARIOS = [("erase", "user"), ("erase", "provider"), ("delete", "user"), ("delete", "provider")]
PASSWORD = "password123"


# ---------------------------------------------------------------- the map, read


def naming(spec, role, acct_id):
    """The SQL condition of the rows that spec's column names the account by; None when the
    column never names an account of role."""
    col = spec["column"]
    if "value" in spec:
        return f"{col} = '{spec['value'].format(role=role, id=acct_id)}'"
    if "role_column" in spec:
        return f"{col} = '{acct_id}' AND {spec['role_column']} = '{role}'"
    return f"{col} = '{acct_id}'" if spec["role"] == role else None


def kept_whole(rule):
    return rule is not None and "only" not in rule and "anonymised" not in rule


def left_wrongly(rule):
    """The SQL condition of a row that may not be left: any, unless the rule keeps some; then
    those failing its `only` or an `anonymised` column's condition (NULL counts as failing)."""
    if rule is None:
        return "1 = 1"
    conds = ([rule["only"]] if "only" in rule else []) + [f"{c} {v}" for c, v in rule.get("anonymised", {}).items()]
    return f"CASE WHEN {' AND '.join(conds)} THEN 0 ELSE 1 END = 1"


def specs(role):
    """(table, spec, naming) of every personal table's account column that can name role's
    accounts."""
    for table, entry in TABLES.items():
        if not entry["personal"]:
            continue
        assert entry.get("accounts") or entry.get("note"), f"{table}: personal, yet no column names an account " \
                                                           "and no note says why"
        for spec in entry.get("accounts", []):
            if naming(spec, role, "x") is not None:
                yield table, spec


def count(srv, pg_cluster, table, where):
    return int(sql(srv, pg_cluster, f"SELECT COUNT(*) FROM {table} WHERE {where}")[0][0])


# ---------------------------------------------------------------- the world


@pytest.fixture(scope="module")
def world_server(make_server, fake_geo):
    """A server of its own: the seasonal alert needs its clock a day on."""
    srv = make_server(DB_POOL_SIZE="4", WEATHER_URL=fake_geo.url, **ADMIN_ENV)
    Api(srv).wait_queue_idle()  # the start-up day's run is over before anyone opts in
    return srv


def made(r):
    assert 200 <= r.status_code < 300, f"{r.request.method} {r.request.path_url}: {r.status_code} {r.text}"
    return r.json() if r.content else None


def opted_in_pair(api, fake_geo):
    """A premium customer opted in to seasonal alerts in a ZIP with snow in the forecast, and a
    verified provider there."""
    zip_code, lat, lng = fresh_zip()
    fake_geo.set_forecast(lat, lng, [SNOW] * 14)
    user = customer(api, zip_code, "pm_card_visa")
    made(api.post("/payments/premium/subscribe", token=user["token"]))
    made(api.patch("/users/me/seasonal-alerts", token=user["token"], json={"enabled": True}))
    return {"zip": zip_code, "user": user, "pro": provider(api, [zip_code])}


def fill(api, admin, w):
    """Everything else of the pair's accounts, through the API."""
    u, p = w["user"], w["pro"]
    ut, pt = u["token"], p["token"]
    made(api.patch("/users/me", token=ut, json={"phone": "555-0101"}))
    made(api.post("/users/me/push-token", token=ut, json={"token": "ExponentPushToken[erasure-user]"}))
    made(api.post("/providers/me/push-token", token=pt, json={"token": "ExponentPushToken[erasure-pro]"}))
    address = made(api.post("/users/me/addresses", token=ut, json={"label": "Cabin", "address": "3 Lake Rd",
                                                                    "zip": w["zip"]}))[-1]
    made(api.post(f"/users/me/addresses/{address['id']}/photos", token=ut,
                  files={"streetViewPhoto": ("s.png", png_bytes(71), "image/png")}))
    made(api.post(f"/users/me/favorites/{p['id']}", token=ut))
    made(api.put(f"/users/me/pro-notes/{p['id']}", token=ut, json={"note": "Punctual"}))
    made(api.post("/providers/me/logo", token=pt, files={"logo": ("l.png", png_bytes(72), "image/png")}))
    made(api.put("/providers/me/availability", token=pt, json={"availability": ALL_DAY}))
    made(api.post("/providers/me/payout-account", token=pt))
    # a completed job with its payment, tip, review, report, recurring request and messages
    job_id = post_job(api, u)["id"]
    accept(api, u, quote(api, p, job_id, 90)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, p, job_id, status)
    made(api.post(f"/jobs/{job_id}/tip", token=ut, json={"amount": 5}))
    made(api.post("/reviews", token=ut, json={"jobId": job_id, "rating": 4, "comment": "Good"}))
    made(api.post(f"/jobs/{job_id}/report", token=ut, json={"description": "A missed corner"}))
    made(api.post(f"/jobs/{job_id}/recurring", token=ut,
                  json={"dayOfWeek": 2, "timeSlot": "morning", "endDate": "2031-12-31T00:00:00.000Z"}))
    for token, seed in ((ut, 73), (pt, 74)):
        made(api.post(f"/jobs/{job_id}/messages", token=token, json={"content": "Hello"}))
        made(api.post(f"/jobs/{job_id}/messages/photo", token=token,
                      files={"photo": ("p.png", png_bytes(seed), "image/png")}))
    made(api.post(f"/jobs/{job_id}/messages/read", token=pt, json={}))
    # an open job with photos and a pending quote
    open_id = post_job(api, u)["id"]
    made(api.post(f"/jobs/{open_id}/images", token=ut, files=image_files(1, seed=75)))
    quote(api, p, open_id, 60)
    for acct, role, mine in ((u, "user", "/users/me"), (p, "provider", "/providers/me")):
        made(api.post("/admin/notify", token=admin, json={"userId": acct["id"], "role": role, "title": "Hello",
                                                          "body": "A banner"}))
        made(api.post(f"{mine}/support", token=acct["token"],
                      json={"subject": "Erasure", "body": "Hello", "category": "feedback"}))
        made(api.post("/auth/forgot-password", json={"email": acct["email"], "role": role}, ip=unique_ip()))
        made(api.post("/auth/change-email", token=acct["token"],
                      json={"currentPassword": PASSWORD, "email": unique_email("moving")}))
        made(api.post("/events/ticket", token=acct["token"]))
        made(api.post("/events/session", token=acct["token"]))


@pytest.fixture(scope="module")
def worlds(world_server, fake_geo):
    """A customer and a provider with a record in every personal table, for each scenario."""
    api = Api(world_server)
    pairs = {s: opted_in_pair(api, fake_geo) for s in SCENARIOS}
    api.advance_clock(DAY_MS)  # the next day's seasonal-alert run: a seasonal_alerts row each
    for w in pairs.values():
        eventually(lambda: [n["title"] for n in made(api.get("/users/me/notifications", token=w["user"]["token"]))],
                   30, "the seasonal alert", interval=0.1, until=lambda titles: "Snow in the forecast" in titles)
    admin = admin_login(api)
    for w in pairs.values():
        fill(api, admin, w)
    api.wait_queue_idle()
    return api, admin, pairs


def erase(api, admin, mode, role, acct):
    if mode == "delete":
        r = api.delete(f"/admin/accounts/{acct['id']}", token=admin, params={"role": role})
        assert r.status_code == 200, r.text
    else:
        r = api.delete("/users/me" if role == "user" else "/providers/me", token=acct["token"],
                       json={"password": PASSWORD})
        assert r.status_code == 204, r.text


# ---------------------------------------------------------------- the checks


def test_the_map_lists_every_table_of_the_database(world_server, pg_cluster):
    if world_server.env["DATABASE_URL"].startswith("sqlite:"):
        rows = sql(world_server, pg_cluster, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                             "AND name NOT LIKE 'sqlite_%'")
    else:
        rows = sql(world_server, pg_cluster, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    names = {r[0] for r in rows}
    assert (sorted(names - set(TABLES)), sorted(set(TABLES) - names)) == ([], [])


@pytest.mark.parametrize("role,members", [
    ("user", ["exportedAt", "account", "billing", "devicePushToken", "addresses", "jobs", "quotes", "payments",
              "reviews", "reports", "recurringRequests", "messages", "favorites", "proNotes", "notifications",
              "supportTickets", "seasonalAlerts", "pendingEmailChange"]),
    ("provider", ["exportedAt", "account", "devicePushToken", "jobs", "quotes", "reviews", "recurringRequests",
                  "messages", "notifications", "supportTickets", "payoutAccount", "transfers", "pendingEmailChange"]),
])
def test_the_export_gathers_every_domain_part_in_its_order(world_server, role, members):
    api = Api(world_server)
    acct = api.register_user() if role == "user" else api.register_provider()
    x = ok(api.get("/users/me/export" if role == "user" else "/providers/me/export", token=acct["token"]))
    assert list(x) == members


@pytest.mark.parametrize("mode,role", SCENARIOS)
def test_an_erased_account_leaves_no_row_naming_it(worlds, world_server, pg_cluster, mode, role):
    api, admin, pairs = worlds
    acct = pairs[(mode, role)]["user" if role == "user" else "pro"]
    checks = [(table, spec, naming(spec, role, acct["id"])) for table, spec in specs(role)]
    missing = [f"{table}.{spec['column']}" for table, spec, where in checks
               if not kept_whole(spec.get(mode)) and count(world_server, pg_cluster, table, where) == 0]
    assert missing == [], "the world makes no row naming the account in these (give it one in fill())"

    erase(api, admin, mode, role, acct)
    api.wait_queue_idle()  # and what the erasure left to the background (refunds, voids) is done

    left = {f"{table}.{spec['column']}": n for table, spec, where in checks if not kept_whole(spec.get(mode))
            for n in [count(world_server, pg_cluster, table, f"({where}) AND {left_wrongly(spec.get(mode))}")] if n}
    assert left == {}, f"rows still naming the {role} after its {mode} (rows per column)"
