"""List filters in a query as the server reads them (issue 33 item 7): an F_CSV filter such as
GET /jobs?status= takes `status=A,B` (the document's form: style form, not exploded) and, the
same list, `status=A&status=B` (what most HTTP libraries write for an array); the bracket form
`status[]=A`, which it does not read, answers 400 instead of being left out. A single value
given twice is its first, as every key's first occurrence wins."""
from flow_helpers import ok, post_job


def test_a_status_list_in_both_forms_and_the_forms_refused(api):
    u = api.register_user()
    a = post_job(api, u)
    b = post_job(api, u)
    ok(api.post(f"/jobs/{b['id']}/cancel", token=u["token"]))

    def ids(query):
        return [j["id"] for j in ok(api.get("/jobs?" + query, token=u["token"]))["jobs"]]

    both = [b["id"], a["id"]]  # newest first
    assert ids("status=PENDING,CANCELLED") == both
    assert ids("status=PENDING&status=CANCELLED") == both
    assert ids("status=PENDING&status=CANCELLED,PENDING") == both
    assert ids("status=PENDING") == [a["id"]]
    assert ids("status=CANCELLED") == [b["id"]]
    assert ids("status=CANCELLED&limit=1&limit=0") == [b["id"]]  # a single value's first occurrence wins
    for query, error, field in (
            ("status[]=PENDING", "status: a list is written status=A,B or status=A&status=B, not status[]=A", "status"),
            ("status%5B%5D=PENDING&status%5B%5D=CANCELLED",
             "status: a list is written status=A,B or status=A&status=B, not status[]=A", "status"),
            ("status=PENDING&status=SHUT", "status: must be one of: PENDING, QUOTED, ACCEPTED, ON_THE_WAY, "
                                           "IN_PROGRESS, COMPLETED, CANCELLED", "status"),
            ("limit=0&limit=2", "limit: must be an integer from 1 to 100", "limit")):
        r = api.get("/jobs?" + query, token=u["token"])
        assert r.status_code == 400, (query, r.text)
        assert r.json() == {"error": error, "code": "validation_failed", "field": field}, query
