"""Live updates that leak nothing and stop with their token (issue 31, items 2 and 3).

A provider's replay (Last-Event-ID) gives an open job's event only if the provider held the
job's service and ZIP since before the event was written and can still read the job (open, or
assigned to it); erasing an account deletes the outbox events addressed to it. A stream ends with
`token.expired` within a second of whatever ended its token, without the minute's re-check: the
service clock never moves in these tests, so that check is never due. (A stream on another
instance ending: test_events.py, with its two instances.)
"""
import pytest

from conftest import unique_ip
from flow_helpers import accept, customer, ok, post_job, private_zip, provider, quote
from helpers import eventually
from sse_client import ended_within, still_open
from staff_helpers import impersonate, make_staff, sql
from test_auth import request_reset
from test_cli import binary, cli_staff, run, shared_db_env  # noqa: F401 (fixtures)
from test_events import about, settle, streams  # noqa: F401 (fixture)

pytestmark = pytest.mark.pooler


def login(api, account, role="user"):
    """Another token of the account."""
    path = "/auth/login" if role == "user" else "/auth/provider/login"
    r = api.post(path, json={"email": account["email"], "password": account["password"]}, ip=unique_ip())
    return ok(r)["token"]


# ---------------------------------------------------------------- replays


def test_a_provider_replays_only_what_it_held_then_and_can_read_now(api, server, pg_cluster, streams, admin_token):
    """The leak: a provider that adds ZIPs and replays from before got every open job written
    there in the last 24 hours, jobs cancelled or taken by another provider since, and the jobs
    of customers who erased their account."""
    held, added = private_zip(), private_zip()
    pro = provider(api, [held], verified=False)
    start = streams(pro["token"])
    # a position before every event of this test, and one a replay can start from: an event of
    # now (the newest event on this shared server may be older than a day by its clock, which
    # other tests move days on, and a replay from it gets a reset instead)
    settle(api, admin_token, start, pro, "provider")
    before = start.of("banner")[-1]["id"]
    start.close()

    kept = post_job(api, customer(api, held))  # open, in a pair held all along
    mine = customer(api, held)
    cancelled = post_job(api, mine)
    ok(api.post(f"/jobs/{cancelled['id']}/cancel", token=mine["token"]))
    payer, rival = customer(api, held, card="pm_card_visa"), provider(api, [held])
    taken = post_job(api, payer)
    accept(api, payer, quote(api, rival, taken["id"])["id"])  # assigned to another provider
    leaving = customer(api, held)
    erased = post_job(api, leaving)
    older = post_job(api, customer(api, added))  # in the ZIP before the provider added it

    ok(api.patch("/providers/me", token=pro["token"], json={"serviceZips": [held, added]}))
    newer = post_job(api, customer(api, added))
    r = api.delete("/users/me", token=leaving["token"], json={"password": leaving["password"]})
    assert r.status_code == 204, r.text

    back = streams(pro["token"], last_event_id=before)
    back.wait("job.created", about(newer["id"]))
    settle(api, admin_token, back, pro, "provider")
    got = [(e["event"], e["json"]["id"]) for e in back.events if e["event"] != "banner"]
    names = {j["id"]: name for name, j in [("kept", kept), ("cancelled", cancelled), ("taken", taken),
                                           ("erased", erased), ("older", older), ("newer", newer)]}
    assert got == [("job.created", kept["id"]), ("job.created", newer["id"])], \
        [(kind, names.get(i, i)) for kind, i in got]
    # REST agrees: the provider cannot read the jobs left out (the one from before it held the
    # ZIP it can read now, from its feed; the replay still leaves its old event out)
    for job in (cancelled, taken, erased):
        assert api.get(f"/jobs/{job['id']}", token=pro["token"]).status_code == 404
    assert ok(api.get(f"/jobs/{older['id']}", token=pro["token"]))["id"] == older["id"]
    # nothing the erased customer's events carried is left in the outbox
    quoted = "'%" + erased["id"] + "%'"
    assert sql(server, pg_cluster, f"SELECT COUNT(*) FROM events WHERE data LIKE {quoted}")[0][0] in (0, "0")
    assert sql(server, pg_cluster, "SELECT COUNT(*) FROM event_recipients "
                                   f"WHERE recipient = 'user:{leaving['id']}'")[0][0] in (0, "0")


# ---------------------------------------------------------------- streams end with their token


def test_logout_ends_the_streams_of_its_token_at_once(api, streams):
    u = api.register_user()
    other = login(api, u)
    ticket = ok(api.post("/events/ticket", token=u["token"]))["ticket"]
    by_header, by_ticket, kept = streams(u["token"]), streams(ticket=ticket), streams(other)
    ok(api.post("/auth/logout", token=u["token"]))
    ended_within(by_header, by_ticket)
    still_open(kept)


def test_a_staff_logout_ends_its_stream(api, streams, admin_token):
    staff = make_staff(api, "customer_support", admin=admin_token)
    s = streams(staff["token"])
    assert api.post("/staff/logout", token=staff["token"]).status_code == 204
    ended_within(s)


def test_logout_all_ends_every_stream_of_the_account(api, streams):
    u, neighbour = api.register_user(), api.register_user()
    second = login(api, u)
    mine, kept = [streams(u["token"]), streams(second)], streams(neighbour["token"])
    ok(api.post("/auth/logout-all", token=u["token"]))
    ended_within(*mine)
    still_open(kept)


@pytest.mark.parametrize("role", ["user", "provider"])
def test_a_password_change_ends_the_other_tokens_streams(api, streams, role):
    a = api.register_user() if role == "user" else api.register_provider()
    s = [streams(a["token"]), streams(login(api, a, role))]
    r = api.post("/auth/change-password", token=a["token"],
                 json={"currentPassword": a["password"], "newPassword": "changed-pw-123"})
    fresh = ok(r)["token"]
    ended_within(*s)
    still_open(streams(fresh))


def test_a_password_reset_ends_the_accounts_streams(api, streams):
    u = api.register_user()
    s = streams(u["token"])
    token = request_reset(api, u["email"])
    ok(api.post("/auth/reset-password", json={"token": token, "newPassword": "reset-pw-1234"}))
    ended_within(s)


@pytest.mark.parametrize("role", ["user", "provider"])
def test_an_erasure_ends_the_accounts_streams(api, streams, role):
    a = api.register_user() if role == "user" else api.register_provider()
    s = [streams(a["token"]), streams(login(api, a, role))]
    r = api.delete("/users/me" if role == "user" else "/providers/me", token=a["token"],
                   json={"password": a["password"]})
    assert r.status_code == 204, r.text
    ended_within(*s)


def test_an_ended_elevation_ends_the_impersonation_stream(api, server, streams, admin_token):
    staff = make_staff(api, "customer_support", admin=admin_token)
    target = api.register_user()
    elevation, imp = impersonate(api, server, staff, target["id"])
    as_target, own, targets = streams(imp), streams(staff["token"]), streams(target["token"])
    ok(api.patch(f"/staff/elevation/{elevation['id']}/deactivate", token=staff["token"]))
    ended_within(as_target)
    still_open(own, targets)


@pytest.mark.parametrize("change", ["disable", "role", "password"])
def test_a_staff_change_ends_its_streams_and_its_impersonations(binary, shared_db_env, api, server, streams, change):
    """`marketplace staff disable` and `staff create` of an existing member (another role, another
    password) run in another process: the instance reads their end from the outbox."""
    cs = cli_staff(binary, shared_db_env, api)
    target = api.register_user()
    _, imp = impersonate(api, server, cs, target["id"])
    s, as_target, targets = streams(cs["token"]), streams(imp), streams(target["token"])
    if change == "disable":
        p = run(binary, "staff", "disable", "--email", cs["email"], env=shared_db_env)
    else:
        role = "technical_support" if change == "role" else "customer_support"
        p = run(binary, "staff", "create", "--email", cs["email"], "--name", "Desk", "--role", role,
                env=shared_db_env, stdin="another-password\n")
    assert p.returncode == 0, p.stderr
    ended_within(s, as_target)
    still_open(targets)
