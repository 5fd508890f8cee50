"""One error condition has one code (issue 33, item 7): the same condition answers the same
`code` on every route that can meet it. The project's docs/decisions.md, "Errors and validation".
"""
from conftest import unique_email
from helpers import error_body

TAKEN = error_body(409, "Email already registered", "email_taken")


def test_a_duplicate_email_is_email_taken_on_every_route(api, admin_token):
    user, pro = api.register_user(), api.register_provider()
    other = api.register_user()
    user_body = {"password": "password123", "name": "Twin", "address": "1 Main St", "zip": "10001"}
    pro_body = {"password": "password123", "name": "Twin", "serviceZips": ["10001"], "services": ["lawncare"]}
    answers = [
        api.post("/auth/register", json={**user_body, "email": user["email"]}),
        api.post("/auth/register", json={**user_body, "email": user["email"].upper()}),
        api.post("/auth/provider/register", json={**pro_body, "email": pro["email"]}),
        api.post("/auth/provider/register", json={**pro_body, "email": pro["email"].title()}),
        api.post("/auth/change-email", token=other["token"],
                 json={"currentPassword": "password123", "email": user["email"]}),
        api.post("/auth/change-email", token=pro["token"], json={"currentPassword": "password123",
                                                                 "email": api.register_provider()["email"]}),
    ]
    staff = {"name": "Twin", "email": unique_email("staff"), "password": "password123", "role": "internal_audit"}
    assert api.post("/staff/create", token=admin_token, json=staff).status_code == 201
    answers.append(api.post("/staff/create", token=admin_token, json={**staff, "email": staff["email"].upper()}))
    assert [(r.status_code, r.json()) for r in answers] == [(409, TAKEN)] * len(answers)


def test_a_refused_input_is_validation_failed_with_its_field(api):
    u = api.register_user()
    answers = {
        "body": api.post("/jobs", token=u["token"], data="{bad", headers={"Content-Type": "application/json"}),
        "service": api.post("/jobs", token=u["token"], json={"service": "gardening", "isAsap": True}),
        "limit": api.get("/jobs", token=u["token"], params={"limit": 0}),
        "cursor": api.get("/jobs", token=u["token"], params={"cursor": "x.y"}),
        "status": api.get("/jobs", token=u["token"], params={"status": "DONE"}),
    }
    for field, r in answers.items():
        assert r.status_code == 400, (field, r.text)
        assert (r.json()["code"], r.json()["field"]) == ("validation_failed", field), r.json()
        assert r.json()["error"].startswith(field + ": "), r.json()
