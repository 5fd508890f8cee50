"""Self-test of tests/api/fake_s3.py, the S3 stand-in for the service's S3 client.

The fake is only useful if its SigV4 check is right: too lax and a broken client passes, too
strict (or wrong) and a correct client fails. So these tests sign requests with a second,
independent SigV4 signer written here (checked first against AWS's documented "GET Object"
example), and expect the fake to accept what it signs and to refuse every tampered variant.
They need neither the binary nor a build, and are not product coverage (`make fakes`); the
client's own tests drive S3 through the upload endpoints (tests/api/test_files.py).
"""
import hashlib
import hmac
import http.client
import threading
import time
import urllib.parse

import pytest

import fake_s3
from fake_s3 import FakeS3

AK = "AKIAFAKES3TEST000001"
SK = "fake/secret+key0123456789abcdefghijklmnop"
REGION = "eu-test-1"
BUCKET = "marketplace-test"

# AWS's example for GET Object (Amazon S3 API reference, "Signature Calculations for the
# Authorization Header: Transferring Payload in a Single Chunk", example "GET Object").
AWS_AK = "AKIAIOSFODNN7EXAMPLE"
AWS_SK = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
AWS_AUTH = ("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
EMPTY = hashlib.sha256(b"").hexdigest()


def authorization(method, path, headers, payload_hash, amz_date, region, access_key, secret_key):
    """The test's own SigV4 signer. path is the already-encoded URI; every header is signed."""
    names = sorted(k.lower() for k in headers)
    lower = {k.lower(): " ".join(str(v).split()) for k, v in headers.items()}
    canonical = "\n".join([method, path, "", "".join(f"{n}:{lower[n]}\n" for n in names), ";".join(names),
                           payload_hash])
    scope = f"{amz_date[:8]}/{region}/s3/aws4_request"
    string_to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n" + hashlib.sha256(canonical.encode()).hexdigest()
    key = ("AWS4" + secret_key).encode()
    for part in (amz_date[:8], region, "s3", "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(key, string_to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={access_key}/{scope},SignedHeaders={';'.join(names)},Signature={signature}"


def object_path(key, bucket=BUCKET):
    return "/" + urllib.parse.quote(bucket, safe="") + "/" + urllib.parse.quote(key, safe="/~")


class Client:
    """Raw signed requests to the fake; `tamper` changes the request after it was signed."""

    def __init__(self, fake, access_key=AK, secret_key=SK, region=REGION):
        self.fake, self.access_key, self.secret_key, self.region = fake, access_key, secret_key, region

    def request(self, method, key, body=b"", content_type=None, payload_hash=None, amz_date=None, tamper=None,
                bucket=BUCKET):
        host = self.fake.url[len("http://"):]
        path = object_path(key, bucket)
        amz_date = amz_date or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        payload_hash = payload_hash or hashlib.sha256(body).hexdigest()
        headers = {"Host": host, "x-amz-date": amz_date, "x-amz-content-sha256": payload_hash}
        if content_type is not None:
            headers["Content-Type"] = content_type
        headers["Authorization"] = authorization(method, path, headers, payload_hash, amz_date, self.region,
                                                 self.access_key, self.secret_key)
        if tamper:
            path, headers, body = tamper(path, headers, body)
        conn = http.client.HTTPConnection(host, timeout=10)
        try:
            conn.request(method, path, body=body if method == "PUT" else None, headers=headers)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()


@pytest.fixture
def fake():
    f = FakeS3(AK, SK, REGION, BUCKET).start()
    yield f
    f.stop()


@pytest.fixture
def client(fake):
    return Client(fake)


def error_code(body):
    return body.split(b"<Code>", 1)[1].split(b"</Code>", 1)[0].decode() if b"<Code>" in body else None


# ---------------------------------------------------------------- both signers know AWS's answer

def test_test_signer_matches_aws_documented_example():
    headers = {"Host": "examplebucket.s3.amazonaws.com", "Range": "bytes=0-9", "x-amz-content-sha256": EMPTY,
               "x-amz-date": "20130524T000000Z"}
    assert authorization("GET", "/test.txt", headers, EMPTY, "20130524T000000Z", "us-east-1", AWS_AK,
                         AWS_SK) == AWS_AUTH


def test_fake_signature_matches_aws_documented_example():
    canonical = ("GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
                 f"x-amz-content-sha256:{EMPTY}\nx-amz-date:20130524T000000Z\n\n"
                 f"host;range;x-amz-content-sha256;x-amz-date\n{EMPTY}")
    assert fake_s3.sigv4_signature(AWS_SK, "20130524T000000Z", "us-east-1", canonical) == AWS_AUTH[-64:]


def test_fake_uri_encoding():
    assert fake_s3.uri_encode("a b/ü~x+y*.txt".encode()) == "a%20b/%C3%BC~x%2By%2A.txt"
    assert fake_s3.canonical_query("b=2&a=x%20y&a=1") == "a=1&a=x%20y&b=2"


# ---------------------------------------------------------------- a correct client is served

def test_put_get_head_delete_round_trip(fake, client):
    key = "photos/2024/hello world ü.txt"
    status, headers, _ = client.request("PUT", key, b"hello, s3", content_type="text/plain; charset=utf-8")
    assert status == 200 and headers["etag"] == '"' + hashlib.md5(b"hello, s3").hexdigest() + '"'
    assert fake.objects == {key: (b"hello, s3", "text/plain; charset=utf-8")}

    status, headers, body = client.request("GET", key)
    assert (status, body, headers["content-type"]) == (200, b"hello, s3", "text/plain; charset=utf-8")

    status, headers, body = client.request("HEAD", key)
    assert (status, headers["content-length"], body) == (200, "9", b"")

    status, _, _ = client.request("DELETE", key)
    assert status == 204 and fake.objects == {}
    status, _, body = client.request("GET", key)
    assert (status, error_code(body)) == (404, "NoSuchKey")
    status, _, body = client.request("HEAD", key)
    assert status == 404
    status, _, _ = client.request("DELETE", key)  # deleting what is gone still succeeds, as on S3
    assert status == 204

    encoded = object_path(key)
    assert "%20" in encoded and "%C3%BC" in encoded
    assert fake.requests == [("PUT", encoded), ("GET", encoded), ("HEAD", encoded), ("DELETE", encoded),
                             ("GET", encoded), ("HEAD", encoded), ("DELETE", encoded)]


def test_put_without_content_type_and_empty_body(fake, client):
    status, _, _ = client.request("PUT", "empty", b"")
    assert status == 200 and fake.objects["empty"] == (b"", "binary/octet-stream")
    status, _, body = client.request("GET", "empty")
    assert (status, body) == (200, b"")


def test_other_bucket_is_no_such_bucket(client):
    status, _, body = client.request("GET", "x", bucket="someone-else")
    assert (status, error_code(body)) == (404, "NoSuchBucket")


def test_fail_next_answers_server_error_then_recovers(fake, client):
    fake.fail_next(2, 503)
    for _ in range(2):
        status, _, body = client.request("PUT", "k", b"v")
        assert (status, error_code(body)) == (503, "InternalError")
    assert "k" not in fake.objects
    assert client.request("PUT", "k", b"v")[0] == 200 and fake.objects["k"][0] == b"v"


# ---------------------------------------------------------------- anything else is refused

def test_fail_next_can_target_a_method_after_some_pass(fake, client):
    fake.fail_next(2, 500, method="PUT", after=1)
    assert client.request("GET", "missing")[0] == 404  # another method: not counted
    assert client.request("PUT", "a", b"1")[0] == 200  # let through
    assert [client.request("PUT", "b", b"2")[0] for _ in range(2)] == [500, 500]
    assert client.request("PUT", "b", b"2")[0] == 200
    assert set(fake.objects) == {"a", "b"}


def test_delay_holds_one_method(fake, client):
    # CI runs this at the lowest priority beside the API passes: an undelayed request took
    # 0.404 s there once, so the delay is long enough that "not held" stays plain
    fake.delay("DELETE", 2.0)
    t0 = time.time()
    assert client.request("GET", "missing")[0] == 404
    assert time.time() - t0 < 1.5
    t0 = time.time()
    assert client.request("DELETE", "missing")[0] == 204
    assert time.time() - t0 >= 2.0
    fake.delay("DELETE", 0)
    t0 = time.time()
    client.request("DELETE", "missing")
    assert time.time() - t0 < 3  # no longer held (a hold lasts until released); CI's low priority


def test_hold_keeps_one_method_until_released(fake, client):
    release = fake.hold("DELETE")
    answers = []
    t = threading.Thread(target=lambda: answers.append(client.request("DELETE", "missing")[0]))
    t.start()
    assert client.request("GET", "missing")[0] == 404  # other methods pass
    t.join(0.3)
    assert answers == [] and t.is_alive()
    release.set()
    t.join(5)
    assert answers == [204]
    fake.delay("DELETE", 0)
    t0 = time.time()
    client.request("DELETE", "missing")
    assert time.time() - t0 < 3  # no longer held (a hold lasts until released); CI's low priority


def test_wrong_secret_is_signature_does_not_match(fake):
    status, headers, body = Client(fake, secret_key=SK + "x").request("PUT", "k", b"v", content_type="text/plain")
    assert (status, error_code(body)) == (403, "SignatureDoesNotMatch")
    assert headers["content-type"] == "application/xml" and b"<Message>" in body
    assert fake.objects == {}
    assert Client(fake, secret_key="").request("GET", "k")[0] == 403


def test_wrong_access_key_and_region(fake):
    status, _, body = Client(fake, access_key="AKIAOTHER").request("GET", "k")
    assert (status, error_code(body)) == (403, "InvalidAccessKeyId")
    status, _, body = Client(fake, region="us-east-1").request("GET", "k")
    assert (status, error_code(body)) == (400, "AuthorizationHeaderMalformed")


def test_unsigned_request_is_access_denied(fake, client):
    def drop(path, headers, body):
        return path, {k: v for k, v in headers.items() if k != "Authorization"}, body

    status, _, body = client.request("GET", "k", tamper=drop)
    assert (status, error_code(body)) == (403, "AccessDenied")


@pytest.mark.parametrize("what", ["path", "content-type", "date", "host"])
def test_changes_after_signing_are_refused(fake, client, what):
    def tamper(path, headers, body):
        headers = dict(headers)
        if what == "path":
            path = path.replace("a.txt", "b.txt")
        elif what == "content-type":
            headers["Content-Type"] = "text/html"
        elif what == "date":  # one second off, same day, so only the signature can tell
            d = headers["x-amz-date"]
            headers["x-amz-date"] = d[:-2] + ("1" if d[-2] == "0" else "0") + "Z"
        else:
            headers["Host"] = headers["Host"].replace("127.0.0.1", "localhost")
        return path, headers, body

    status, _, body = client.request("PUT", "a.txt", b"data", content_type="text/plain", tamper=tamper)
    assert (status, error_code(body)) == (403, "SignatureDoesNotMatch")
    assert fake.objects == {}


def test_body_must_match_signed_payload_hash(fake, client):
    status, _, body = client.request("PUT", "k", b"the real body", payload_hash=hashlib.sha256(b"other").hexdigest())
    assert (status, error_code(body)) == (400, "XAmzContentSHA256Mismatch")
    status, _, body = client.request("PUT", "k", b"the real body", payload_hash="UNSIGNED-PAYLOAD")
    assert status == 400
    assert fake.objects == {}


def test_content_type_must_be_signed_on_put(fake, client):
    def unsigned_type(path, headers, body):
        return path, dict(headers, **{"Content-Type": "text/plain"}), body

    status, _, body = client.request("PUT", "k", b"v", tamper=unsigned_type)
    assert (status, error_code(body)) == (403, "AccessDenied")
    assert fake.objects == {}


def test_stale_date_is_too_skewed(fake, client):
    old = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() - 3600))
    status, _, body = client.request("GET", "k", amz_date=old)
    assert (status, error_code(body)) == (403, "RequestTimeTooSkewed")
