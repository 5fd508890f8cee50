#!/usr/bin/python3
"""Writes the part of Stripe's OpenAPI description that tests/api/fake_stripe.py checks every
request against (called by scripts/stripe_openapi.sh, which fetches and verifies the file).

Usage: scripts/stripe_openapi.py SPEC OUT --package NAME --version V --file MEMBER --integrity SRI

OUT is a JSON object:
  source      {package, version, file, x-origin, sha256 (of SPEC), tarball_integrity, openapi}
  operations  [{method, path (Stripe's template, e.g. /v1/payment_intents/{intent}), operationId,
                servers (only when the operation names its own, e.g. files.stripe.com),
                parameters [{name, in (path|query), required, style, explode, schema}],
                requestBody {required, content_type, schema, encoding} or null}]
Every `$ref` is resolved inline and descriptions are dropped (the schemas keep only what a
validator needs). An operation missing from SPEC is an error: the fake must never serve a
route the description does not describe.
"""
import argparse
import hashlib
import json
import os
import sys

# The operations tests/api/fake_stripe.py implements (its ROUTES): keep the two lists together;
# the fake refuses to start when it serves a route that is not in this file's output.
OPERATIONS = [
    ("POST", "/v1/customers"),
    ("POST", "/v1/customers/{customer}"),
    ("POST", "/v1/setup_intents"),
    ("POST", "/v1/payment_methods/{payment_method}/attach"),
    ("POST", "/v1/payment_methods/{payment_method}/detach"),
    ("GET", "/v1/payment_methods/{payment_method}"),
    ("POST", "/v1/payment_intents"),
    ("GET", "/v1/payment_intents"),
    ("GET", "/v1/payment_intents/{intent}"),
    ("POST", "/v1/payment_intents/{intent}/capture"),
    ("POST", "/v1/payment_intents/{intent}/cancel"),
    ("POST", "/v1/subscriptions"),
    ("POST", "/v1/subscriptions/{subscription_exposed_id}"),
    ("GET", "/v1/subscriptions"),
    ("GET", "/v1/subscriptions/{subscription_exposed_id}"),
    ("POST", "/v1/refunds"),
    ("GET", "/v1/refunds"),
    ("GET", "/v1/refunds/{refund}"),
    ("GET", "/v1/charges/{charge}"),
    ("POST", "/v1/accounts"),
    ("GET", "/v1/accounts/{account}"),
    ("POST", "/v1/account_links"),
    ("POST", "/v1/transfers"),
    ("GET", "/v1/transfers"),
    ("GET", "/v1/transfers/{transfer}"),
    ("POST", "/v1/transfers/{id}/reversals"),
    ("GET", "/v1/transfers/{id}/reversals"),
    ("GET", "/v1/disputes"),
    ("GET", "/v1/disputes/{dispute}"),
    ("POST", "/v1/disputes/{dispute}"),
    ("POST", "/v1/disputes/{dispute}/close"),
    ("POST", "/v1/files"),
    ("GET", "/v1/files/{file}"),
]

# the keyword whose value maps names to schemas (its keys are never dropped)
SCHEMA_MAPS = {"properties", "patternProperties"}
DROPPED = {"description", "title", "x-stripeResource", "x-expandableFields", "x-resourceId", "x-stripeOperations"}


def resolve(spec, node, trail=()):
    """node with every $ref replaced by its target (recursively) and descriptions dropped."""
    if isinstance(node, list):
        return [resolve(spec, n, trail) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            raise SystemExit(f"stripe_openapi: external $ref {ref} is not supported")
        if ref in trail:
            raise SystemExit(f"stripe_openapi: $ref cycle through {ref} in a request schema")
        target = spec
        for part in ref[2:].split("/"):
            target = target[part.replace("~1", "/").replace("~0", "~")]
        merged = dict(target, **{k: v for k, v in node.items() if k != "$ref"})
        return resolve(spec, merged, trail + (ref,))
    out = {}
    for k, v in node.items():
        if k in DROPPED:
            continue
        if k in SCHEMA_MAPS and isinstance(v, dict):
            out[k] = {name: resolve(spec, s, trail) for name, s in v.items()}
        else:
            out[k] = resolve(spec, v, trail)
    return out


def extract(spec, method, path):
    item = spec["paths"].get(path)
    op = item and item.get(method.lower())
    if not op:
        raise SystemExit(f"stripe_openapi: {method} {path} is not in the description")
    params = []
    for p in (item.get("parameters") or []) + (op.get("parameters") or []):
        p = resolve(spec, p)
        params.append({"name": p["name"], "in": p["in"], "required": bool(p.get("required")),
                       "style": p.get("style"), "explode": p.get("explode"), "schema": p.get("schema", {})})
    body = None
    if op.get("requestBody"):
        rb = op["requestBody"]
        content = rb.get("content", {})
        if len(content) != 1:
            raise SystemExit(f"stripe_openapi: {method} {path}: expected one request content type, got {list(content)}")
        ctype, media = next(iter(content.items()))
        body = {"required": bool(rb.get("required")), "content_type": ctype,
                "schema": resolve(spec, media.get("schema", {})), "encoding": media.get("encoding", {})}
    out = {"method": method, "path": path, "operationId": op.get("operationId"), "parameters": params,
           "requestBody": body}
    if op.get("servers"):
        out["servers"] = [s["url"] for s in op["servers"]]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--package", required=True)
    ap.add_argument("--version", required=True)
    ap.add_argument("--file", required=True)
    ap.add_argument("--integrity", required=True)
    a = ap.parse_args()
    with open(a.spec, "rb") as fh:
        raw = fh.read()
    spec = json.loads(raw)
    origins = spec.get("info", {}).get("x-origin") or []
    source = {"package": a.package, "version": a.version, "file": a.file,
              "x-origin": origins[0]["url"] if origins else None,
              "sha256": hashlib.sha256(raw).hexdigest(), "tarball_integrity": a.integrity,
              "openapi": spec.get("openapi"), "paths_in_file": len(spec.get("paths", {}))}
    doc = {"source": source, "operations": [extract(spec, m, p) for m, p in OPERATIONS]}
    tmp = a.out + ".part"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.replace(tmp, a.out)
    print(f"stripe_openapi: {len(doc['operations'])} operations of {a.package}@{a.version}:{a.file} "
          f"(sha256 {source['sha256'][:16]}...) -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
