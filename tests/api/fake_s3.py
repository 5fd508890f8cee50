"""A local fake of an S3-compatible object store, for the service's S3 client (src/ext/s3.c).

It serves one bucket, path-style, with objects kept in memory:

    PUT    /<bucket>/<key>     store the body with its Content-Type (binary/octet-stream when none)
    GET    /<bucket>/<key>     the body, Content-Type, Content-Length, ETag, Last-Modified
    HEAD   /<bucket>/<key>     the same headers without the body
    DELETE /<bucket>/<key>     204, also for a key that does not exist (as S3)
    GET    /<bucket>?list-type=2[&prefix=P][&continuation-token=T][&max-keys=N]
                               ListObjectsV2: the keys starting with P in order, N (1000) a page,
                               IsTruncated and NextContinuationToken when more follow

and it checks AWS Signature Version 4 for real on every request, as S3 does: the canonical
request is rebuilt from what arrived (the path decoded and re-encoded with S3's rules, the query
sorted, the headers named in SignedHeaders trimmed and collapsed) and signed again with the
secret; the signature must match. Also checked:
- the Credential's access key (403 InvalidAccessKeyId), scope date (= x-amz-date's day),
  region, service "s3" and "aws4_request" (400 AuthorizationHeaderMalformed);
- SignedHeaders includes host, x-amz-content-sha256 and x-amz-date, every x-amz-* header
  sent, and on PUT content-type when one is sent (the client's contract; S3 itself is laxer);
- x-amz-date within `max_skew` seconds of the real clock (403 RequestTimeTooSkewed);
- x-amz-content-sha256 is the hex SHA-256 of the body received (400 XAmzContentSHA256Mismatch;
  UNSIGNED-PAYLOAD is not accepted).
A missing Authorization header is 403 AccessDenied, a bad signature 403 SignatureDoesNotMatch,
a missing key 404 NoSuchKey, another bucket 404 NoSuchBucket, anything else 501
NotImplemented. Errors are S3's XML: <Error><Code>..</Code><Message>..</Message>...</Error>.

API (thread-safe):
- `FakeS3(access_key, secret_key, region, bucket, max_skew=900)`, `.start()` (returns self),
  `.stop()`, `.url` ("http://127.0.0.1:<port>", for S3_ENDPOINT);
- `.objects`: dict key (str, decoded) -> (bytes, content_type); tests may read and edit it
  (hold `.lock` while iterating during traffic);
- `.requests`: list of (method, path), path as sent on the wire (still percent-encoded,
  without the query), for every request including refused ones;
- `.fail_next(count=1, status=500, method=None, after=0)`: the next `count` requests (of
  `method` only, when given, and after letting `after` such requests through) answer `status`
  with an InternalError body and change nothing (for the client's retries);
- `.delay(method, seconds)`: requests of `method` are held that long before they are handled
  (0 removes the delay);
- `.hold(method)`: requests of `method` are held until the returned threading.Event is set
  (at most 30 s), for a test that lets them through once something else happened;
  `.delay(method, 0)` removes the hold.
Module functions `sigv4_signature()` and `uri_encode()` are the verifier's own signing steps.
"""
import calendar
import hashlib
import hmac
import re
import secrets
import threading
import time
import urllib.parse
from email.utils import formatdate
from xml.sax.saxutils import escape

from fake_http import QuietHandler, ServedFake

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
_AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 +Credential=([^,]+), *SignedHeaders=([^,]+), *Signature=([0-9a-f]{64})$")
_REQUIRED = ("host", "x-amz-content-sha256", "x-amz-date")


def uri_encode(raw: bytes, keep_slash=True) -> str:
    """S3's URI encoding: every byte but A-Z a-z 0-9 - . _ ~ (and '/' for paths) as %XX."""
    return urllib.parse.quote_from_bytes(raw, safe="/~" if keep_slash else "~")


def canonical_query(query: str) -> str:
    pairs = []
    for part in query.split("&") if query else []:
        k, _, v = part.partition("=")
        pairs.append((uri_encode(urllib.parse.unquote_to_bytes(k), False),
                      uri_encode(urllib.parse.unquote_to_bytes(v), False)))
    return "&".join(f"{k}={v}" for k, v in sorted(pairs))


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_signature(secret_key, amz_date, region, canonical_request):
    """Hex signature of a canonical request (str) for service s3."""
    day = amz_date[:8]
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical_request.encode()).hexdigest()])
    k = _hmac(("AWS4" + secret_key).encode(), day)
    for part in (region, "s3", "aws4_request"):
        k = _hmac(k, part)
    return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()


class S3Error(Exception):
    def __init__(self, status, code, message, **extra):
        super().__init__(message)
        self.status, self.code, self.message, self.extra = status, code, message, extra


class FakeS3(ServedFake):
    def __init__(self, access_key, secret_key, region, bucket, max_skew=900):
        self.access_key, self.secret_key, self.region, self.bucket = access_key, secret_key, region, bucket
        self.max_skew = max_skew
        self.lock = threading.RLock()
        self.objects = {}       # key -> (bytes, content_type)
        self.requests = []      # (method, raw path)
        self._failures = []     # [remaining, status, method, let_through]
        self._delays = {}       # method -> seconds, or a threading.Event to wait for

    def start(self):
        class Handler(_Handler):
            pass

        Handler.fake = self
        return self.serve(Handler, "fake-s3", poll_interval=0.05)

    def fail_next(self, count=1, status=500, method=None, after=0):
        with self.lock:
            self._failures.append([count, status, method, after])

    def delay(self, method, seconds):
        with self.lock:
            if seconds:
                self._delays[method] = seconds
            else:
                self._delays.pop(method, None)

    def hold(self, method):
        release = threading.Event()
        with self.lock:
            self._delays[method] = release
        return release

    # ------------------------------------------------------------ request handling

    def handle(self, method, target, headers, body):
        """headers: list of (name, value) as received. Returns (status, extra headers, body bytes)."""
        raw_path, _, query = target.partition("?")
        with self.lock:
            self.requests.append((method, raw_path))
            failure = next((f for f in self._failures if f[0] > 0 and f[2] in (None, method)), None)
            if failure and failure[3] > 0:
                failure[3] -= 1
                failure = None
            elif failure:
                failure[0] -= 1
            wait = self._delays.get(method)
        if isinstance(wait, threading.Event):
            wait.wait(30)
        elif wait:
            time.sleep(wait)
        try:
            if failure:
                raise S3Error(failure[1], "InternalError", "We encountered an internal error. Please try again.")
            self._authenticate(method, raw_path, query, headers, body)
            params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
            listing = method == "GET" and params.get("list-type") == "2"
            bucket, key = self._locate(raw_path, listing)
            if listing and key is None:
                return self._list(params)
            return self._execute(method, key, _header(headers, "content-type"), body)
        except S3Error as e:
            resource = urllib.parse.unquote(raw_path)
            fields = "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in e.extra.items())
            xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{e.code}</Code>'
                   f"<Message>{escape(e.message)}</Message>{fields}<Resource>{escape(resource)}</Resource>"
                   f"<RequestId>{secrets.token_hex(8).upper()}</RequestId></Error>")
            return e.status, {"Content-Type": "application/xml"}, xml.encode()

    def _authenticate(self, method, raw_path, query, headers, body):
        auth = _header(headers, "authorization")
        if auth is None:
            raise S3Error(403, "AccessDenied", "Access Denied")
        m = _AUTH_RE.match(auth.strip())
        if not m:
            raise S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed.")
        credential, signed, signature = m.groups()
        parts = credential.split("/")
        if len(parts) != 5:
            raise S3Error(400, "AuthorizationHeaderMalformed", "The Credential is malformed.")
        access_key, day, region, service, terminator = parts
        if access_key != self.access_key:
            raise S3Error(403, "InvalidAccessKeyId",
                          "The AWS Access Key Id you provided does not exist in our records.",
                          AWSAccessKeyId=access_key)
        amz_date = _header(headers, "x-amz-date") or ""
        try:
            t = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            raise S3Error(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
        if day != amz_date[:8] or region != self.region or service != "s3" or terminator != "aws4_request":
            raise S3Error(400, "AuthorizationHeaderMalformed",
                          f"The authorization header is malformed; the Credential is wrong; expecting "
                          f"'{amz_date[:8]}/{self.region}/s3/aws4_request'.", Region=self.region)
        if abs(time.time() - t) > self.max_skew:
            raise S3Error(403, "RequestTimeTooSkewed",
                          "The difference between the request time and the current time is too large.",
                          RequestTime=amz_date, ServerTime=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
        names = signed.split(";")
        must = set(_REQUIRED) | {n.lower() for n, _ in headers if n.lower().startswith("x-amz-")}
        if method == "PUT" and _header(headers, "content-type") is not None:
            must.add("content-type")
        if names != sorted(set(names)) or not must <= set(names):
            raise S3Error(403, "AccessDenied",
                          f"SignedHeaders must be sorted and include: {';'.join(sorted(must))}")
        payload_hash = _header(headers, "x-amz-content-sha256") or ""
        canonical_headers = ""
        for n in names:
            values = [v for k, v in headers if k.lower() == n]
            canonical_headers += n + ":" + ",".join(" ".join(v.split()) for v in values) + "\n"
        canonical_request = "\n".join([
            method, uri_encode(urllib.parse.unquote_to_bytes(raw_path)), canonical_query(query),
            canonical_headers, signed, payload_hash])
        expected = sigv4_signature(self.secret_key, amz_date, self.region, canonical_request)
        if not hmac.compare_digest(expected, signature):
            raise S3Error(403, "SignatureDoesNotMatch",
                          "The request signature we calculated does not match the signature you provided. "
                          "Check your key and signing method.", AWSAccessKeyId=access_key,
                          CanonicalRequest=canonical_request)
        if payload_hash != hashlib.sha256(body).hexdigest():
            raise S3Error(400, "XAmzContentSHA256Mismatch",
                          "The provided 'x-amz-content-sha256' header does not match what was computed.",
                          ClientComputedContentSHA256=payload_hash,
                          S3ComputedContentSHA256=hashlib.sha256(body).hexdigest())

    def _list(self, params):
        prefix, after = params.get("prefix", ""), params.get("continuation-token", "")
        limit = max(1, min(1000, int(params.get("max-keys", "1000"))))
        with self.lock:
            keys = sorted(k for k in self.objects if k.startswith(prefix) and k > after)
            page = [(k, self.objects[k][0]) for k in keys[:limit]]
        more = len(keys) > limit
        contents = "".join(f"<Contents><Key>{escape(k)}</Key><Size>{len(d)}</Size><ETag>{escape(_etag(d))}</ETag>"
                           f"<StorageClass>STANDARD</StorageClass></Contents>" for k, d in page)
        xml = (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult><Name>{escape(self.bucket)}</Name>'
               f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(page)}</KeyCount><MaxKeys>{limit}</MaxKeys>"
               f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>{contents}"
               + (f"<NextContinuationToken>{escape(page[-1][0])}</NextContinuationToken>" if more else "")
               + "</ListBucketResult>")
        return 200, {"Content-Type": "application/xml"}, xml.encode()

    def _locate(self, raw_path, listing=False):
        segments = raw_path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(segments[0])
        if bucket != self.bucket:
            raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist", BucketName=bucket)
        if listing and (len(segments) < 2 or not segments[1]):
            return bucket, None
        if len(segments) < 2 or not segments[1]:
            raise S3Error(501, "NotImplemented", "Only object operations are implemented by this fake.")
        try:
            key = urllib.parse.unquote_to_bytes(segments[1]).decode("utf-8")
        except UnicodeDecodeError:
            raise S3Error(400, "InvalidURI", "Couldn't parse the specified URI.")
        return bucket, key

    def _execute(self, method, key, content_type, body):
        with self.lock:
            if method == "PUT":
                self.objects[key] = (body, content_type if content_type is not None else "binary/octet-stream")
                return 200, {"ETag": _etag(body)}, b""
            if method == "DELETE":
                self.objects.pop(key, None)
                return 204, {}, b""
            if method not in ("GET", "HEAD"):
                raise S3Error(501, "NotImplemented", f"{method} is not implemented by this fake.")
            if key not in self.objects:
                raise S3Error(404, "NoSuchKey", "The specified key does not exist.", Key=key)
            data, ctype = self.objects[key]
        return 200, {"Content-Type": ctype, "ETag": _etag(data), "Last-Modified": formatdate(usegmt=True)}, data


def _header(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _etag(data):
    return '"' + hashlib.md5(data).hexdigest() + '"'


class _Handler(QuietHandler):
    def _read_body(self):
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self):
        body = self._read_body()
        status, extra, data = self.fake.handle(self.command, self.path, list(self.headers.items()), body)
        self.send_response(status)
        for k, v in extra.items():
            self.send_header(k, v)
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amz-request-id", secrets.token_hex(8).upper())
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(data)

    do_GET = _serve
    do_PUT = _serve
    do_DELETE = _serve
    do_HEAD = _serve
    do_POST = _serve
