"""Live updates that leak nothing (issue 31, item 2).

A provider's replay (Last-Event-ID) gives an open job's event only if the provider held the
job's service and ZIP since before the event was written and can still read the job (open, or
assigned to it); erasing an account deletes the outbox events addressed to it.
"""
from flow_helpers import accept, customer, ok, post_job, private_zip, provider, quote
from helpers import eventually
from staff_helpers import sql
from test_events import about, settle, streams  # noqa: F401 (fixture)


# ---------------------------------------------------------------- replays


def test_a_provider_replays_only_what_it_held_then_and_can_read_now(api, server, pg_cluster, streams, admin_token):
    """The leak: a provider that adds ZIPs and replays from before got every open job written
    there in the last 24 hours, jobs cancelled or taken by another provider since, and the jobs
    of customers who erased their account."""
    held, added = private_zip(), private_zip()
    pro = provider(api, [held], verified=False)
    start = streams(pro["token"])
    eventually(lambda: start.ids, 10, "the stream's position")
    before = start.ids[0]  # a position before every event of this test
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
    assert got == [("job.created", kept["id"]), ("job.created", newer["id"])]
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
