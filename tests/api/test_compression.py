"""Compression (docs/decisions.md, HTTP): JSON answers of 1 KiB or more are gzip-compressed when
the request's Accept-Encoding admits gzip, with `Content-Encoding: gzip` and
`Vary: Accept-Encoding`; smaller answers and clients that do not take gzip get plain JSON."""
import gzip
import json

import pytest
import requests

from flow_helpers import customer, ok, post_job, private_zip, provider
from helpers import error_body

pytestmark = pytest.mark.engine_independent


def raw_get(api, path, token, accept_encoding):
    """GET with exactly this Accept-Encoding (None: no header); the undecoded body."""
    headers = {"Authorization": f"Bearer {token}", "Accept-Encoding": accept_encoding}
    r = requests.get(api.url + path, headers=headers, stream=True, timeout=30)
    body = r.raw.read(decode_content=False)
    return r, body


@pytest.fixture(scope="module")
def feed_of_200(server):
    """A provider whose feed holds 200 open jobs (its own private ZIP)."""
    from conftest import Api
    api = Api(server)
    zip_code = private_zip()
    pro = provider(api, [zip_code])
    user = customer(api, zip_code)
    for i in range(200):
        post_job(api, user, description=f"Mow the front lawn and edge the beds, visit {i}",
                 preferredAt=f"2031-05-{i % 28 + 1:02d}T09:00:00.000Z")
    return pro


def test_the_200_job_feed_shrinks_about_7x(api, feed_of_200):
    plain, plain_body = raw_get(api, "/jobs", feed_of_200["token"], "identity")
    assert plain.status_code == 200
    assert "Content-Encoding" not in plain.headers
    assert len(json.loads(plain_body)["jobs"]) == 200
    zipped, zipped_body = raw_get(api, "/jobs", feed_of_200["token"], "gzip, deflate, br")
    assert zipped.status_code == 200
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert zipped.headers["Content-Type"] == "application/json; charset=utf-8"
    assert "Accept-Encoding" in zipped.headers["Vary"]
    assert int(zipped.headers["Content-Length"]) == len(zipped_body)
    assert json.loads(gzip.decompress(zipped_body)) == json.loads(plain_body)
    ratio = len(plain_body) / len(zipped_body)
    assert ratio >= 6.5, f"{len(plain_body)} -> {len(zipped_body)} bytes ({ratio:.1f}x)"


@pytest.mark.parametrize("accept, compressed", [
    ("gzip", True),
    ("GZIP", True),
    ("x-gzip", True),
    ("*", True),
    ("deflate, gzip;q=0.5", True),
    ("br;q=1.0, gzip;q=0.001", True),
    (None, False),
    ("identity", False),
    ("deflate, br", False),
    ("gzip;q=0", False),
    ("*, gzip;q=0", False),
    ("*;q=0", False),
])
def test_accept_encoding_decides(api, feed_of_200, accept, compressed):
    r, body = raw_get(api, "/jobs", feed_of_200["token"], accept)
    assert r.status_code == 200
    assert (r.headers.get("Content-Encoding") == "gzip") == compressed
    # the answer depends on Accept-Encoding either way, so caches must key on it
    assert "Accept-Encoding" in r.headers["Vary"]
    data = gzip.decompress(body) if compressed else body
    assert len(json.loads(data)["jobs"]) == 200


def test_small_answers_are_not_compressed(api):
    user = customer(api)
    r, body = raw_get(api, "/users/me", user["token"], "gzip")
    assert r.status_code == 200 and len(body) < 1024
    assert "Content-Encoding" not in r.headers
    assert "Accept-Encoding" not in r.headers.get("Vary", "")
    assert json.loads(body)["id"] == user["id"]


def test_one_kib_is_the_threshold(api):
    """An answer just under 1024 bytes stays plain; one at 1024 or more is compressed."""
    user = customer(api)
    job = post_job(api, user, description="")
    base = len(json.dumps(ok(api.get(f"/jobs/{job['id']}", token=user["token"])), separators=(",", ":")))
    for size, compressed in ((1023, False), (1024, True)):
        job = post_job(api, user, description="d" * (size - base))
        r, body = raw_get(api, f"/jobs/{job['id']}", user["token"], "gzip")
        data = gzip.decompress(body) if compressed else body
        assert len(data) == size, (size, len(data))
        assert (r.headers.get("Content-Encoding") == "gzip") == compressed


def test_errors_and_files_are_never_compressed(api):
    r, body = raw_get(api, "/jobs/cnotajob00000000000000000", customer(api)["token"], "gzip")
    assert r.status_code == 404 and "Content-Encoding" not in r.headers
    assert json.loads(body) == error_body(404, "Job not found")
