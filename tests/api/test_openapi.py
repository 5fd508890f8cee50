"""The OpenAPI document (GET /openapi.json, docs/openapi.json, GET /docs): generated from the route
table, complete (every route with a documented answer), valid (JSON Schema 2020-12, Redocly's
linter), the committed copy equal to what the binary serves, and the reference page self-hosted.
conftest.py checks every answer the suite receives against this document."""
import json
import os
import re
import subprocess

import jsonschema
import pytest

from conftest import ROOT, Contract

pytestmark = pytest.mark.engine_independent

COMMITTED = os.path.join(ROOT, "docs", "openapi.json")


@pytest.fixture(scope="module")
def doc(server):
    import requests
    r = requests.get(server.url + "/openapi.json", timeout=30)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    return r.json()


def operations(doc):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            yield method.upper(), path, op


def test_the_committed_document_is_what_the_binary_serves(doc):
    with open(COMMITTED, encoding="utf-8") as f:
        committed = json.load(f)
    assert committed == doc, "docs/openapi.json is stale: run `make openapi` and commit it"


def test_every_route_is_documented_with_its_answer(api, doc):
    routes = api.get("/__test/routes").json()["routes"]
    documented = {(m, p) for m, p, _ in operations(doc)}
    for r in routes:
        if r["path"].startswith("/__test/"):
            continue
        path = re.sub(r"[:*]([A-Za-z0-9_]+)", r"{\1}", r["path"])  # a last *rest is a parameter too
        assert (r["method"], path) in documented, f"{r['method']} {r['path']} is missing from the document"
    for method, path, op in operations(doc):
        success = [code for code in op["responses"] if code.startswith("2")]
        assert len(success) == 1, (method, path)
        answer = op["responses"][success[0]]
        assert answer.get("content") or success[0] == "204", \
            f"{method} {path}: the route row names no response (.response)"
        assert op["summary"], (method, path)
        assert "500" in op["responses"]
        if op.get("security"):
            assert "401" in op["responses"] and op["x-roles"], (method, path)
    assert not any(p.startswith("/__test/") for _, p, _ in operations(doc))  # test-only routes stay out


def test_schemas_are_valid_and_every_reference_resolves(doc):
    def refs(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "$ref":
                    yield v
                else:
                    yield from refs(v)
        elif isinstance(node, list):
            for v in node:
                yield from refs(v)

    for ref in set(refs(doc)):
        assert ref.startswith("#/"), ref
        node = doc
        for part in ref[2:].split("/"):
            assert part in node, f"{ref} does not resolve"
            node = node[part]
    for name, schema in doc["components"]["schemas"].items():
        jsonschema.Draft202012Validator.check_schema(schema)


def test_request_bodies_come_from_the_validation_rows(doc):
    body = doc["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert list(body["properties"]) == ["service", "description", "preferredAt", "details", "addressId", "isAsap"]
    assert body["required"] == ["service"]
    assert body["properties"]["service"]["enum"] == ["lawncare", "snowplowing", "handyman", "home_cleaning"]
    assert body["properties"]["description"]["maxLength"] == 2000
    assert "null" in body["properties"]["description"]["type"]  # optional: null counts as absent
    assert body["properties"]["preferredAt"]["description"] == "required unless isAsap is true"
    tip = doc["paths"]["/jobs/{id}/tip"]["post"]
    amount = tip["requestBody"]["content"]["application/json"]["schema"]["properties"]["amount"]
    assert (amount["type"], amount["minimum"], amount["maximum"]) == ("number", 1, 25)
    assert {"$ref": "#/components/parameters/IdempotencyKey"} in tip["parameters"]
    assert {"400", "401", "402", "403", "404", "409", "413", "422", "500", "503"} <= set(tip["responses"])
    assert tip["x-roles"] == ["user"]
    upload = doc["paths"]["/jobs/{id}/start"]["post"]["requestBody"]["content"]["multipart/form-data"]
    images = upload["schema"]["properties"]["images"]
    assert images["maxItems"] == 10 and images["x-max-bytes"] == 10 * 1024 * 1024
    assert upload["encoding"]["images"]["contentType"] == "image/png, image/jpeg, image/webp"
    forgot = doc["paths"]["/auth/forgot-password"]["post"]
    assert forgot["x-rate-limit"] == {"name": "forgot-password", "max": 5, "windowSeconds": 900}
    assert "429" in forgot["responses"] and forgot["security"] == []
    market = doc["paths"]["/quotes/market-rate"]["get"]["parameters"]
    assert market[0]["in"] == "query" and market[0]["name"] == "service"


@pytest.mark.once
def test_redocly_lint_passes(doc, tmp_path):
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(doc))
    p = subprocess.run([os.path.join(ROOT, "node_modules", ".bin", "redocly"), "lint", str(path),
                        "--config", os.path.join(ROOT, "redocly.yaml"), "--format=stylish"],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_reference_page_loads_nothing_from_another_host(api):
    page = api.get("/docs")
    assert page.status_code == 200
    assert page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert 'spec-url="/openapi.json"' in page.text and 'src="/docs/redoc.standalone.js"' in page.text
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text)
    script = api.get("/docs/redoc.standalone.js")
    assert script.status_code == 200
    assert script.headers["Content-Type"] == "application/javascript; charset=utf-8"
    with open(os.path.join(ROOT, "node_modules", "redoc", "bundles", "redoc.standalone.js"), "rb") as f:
        assert script.content == f.read()  # the pinned npm bundle, byte for byte


def test_the_contract_check_finds_undocumented_fields_and_statuses(doc):
    contract = Contract(doc)
    user = {"id": "c1", "email": "a@example.com", "name": "A", "phone": None, "address": "1 St", "zip": "10001",
            "lat": None,
            "lng": None, "isPremium": False, "premiumSince": None, "seasonalAlertsEnabled": False,
            "createdAt": "2030-01-01T00:00:00.000Z"}
    ok = contract.problems("GET", "/users/me", 200, "application/json", json.dumps(user))
    assert ok == []
    extra = contract.problems("GET", "/users/me", 200, "application/json", json.dumps({**user, "secret": 1}))
    assert extra and "secret" in extra[0]
    missing = contract.problems("GET", "/users/me", 200, "application/json", json.dumps({"id": "c1"}))
    assert missing
    assert contract.problems("GET", "/users/me", 418, "application/json", "{}")
    assert contract.problems("GET", "/users/me", 401, "application/json", json.dumps({"error": "x", "oops": 1}))
    # static segments win, as in the router
    assert contract.operation("GET", "/jobs/reportable")["operationId"] == "getJobsReportable"
    assert contract.operation("GET", "/jobs/cabc")["operationId"] == "getJobsById"
