"""Stored files: GET /files/:key through signed URLs, metadata stripping, and S3 storage.

decisions.md 2 (S3_*); the project's docs/decisions.md "Uploads and stored files": URLs are
{PUBLIC_URL}/files/<key>?expires=<unix>&sig=<hex>, photos signed for a year and licence and
insurance documents for 15 minutes; a bad or expired link or a key not of the service's shape
is 403 `Invalid or expired file link`, a valid link to a deleted file 404; JPEG APPn segments
other than APP0/APP2/APP14 and PNG eXIf/tEXt/zTXt/iTXt/tIME chunks are removed before storage.

Image and PDF helpers come from test_providers.py.
"""
import datetime
import http.client
import json
import os
import struct
import threading
import time
import urllib.parse

import pytest

import raw_http
from conftest import Api, contract_observe
from fake_s3 import FakeS3
from flow_helpers import post_job
from helpers import error_body, eventually, png_bytes, server_seconds
from test_providers import (GPS_SECRET, CERT_SIZE, assert_gone, assert_served, certificate_lines, exif_gps_app1, exif_of,
                            expected_ins, fetch, file_key, id_fields, identify_ok, jpeg_bytes, jpeg_segment_markers,
                            jpeg_with_metadata, licence_lines, me, png_chunk_types, server_today,
                            text_image, text_pdf, undecodable_png, upload, upload_insurance, upload_licence, url_query,
                            wait_check, webp_bytes, FILE_URL_RE)


BAD_LINK = error_body(403, "Invalid or expired file link")
PNG_METADATA = [
    (b"tEXt", b"Comment\0taken at 40.7449N 73.9868W " + GPS_SECRET),
    (b"zTXt", b"Author\0\0" + __import__("zlib").compress(b"Jane Smith " + GPS_SECRET)),
    (b"iTXt", b"XML:com.adobe.xmp\0\0\0\0\0<x:xmpmeta>" + GPS_SECRET + b"</x:xmpmeta>"),
    (b"tIME", bytes([0x07, 0xEA, 1, 2, 3, 4, 5])),
    (b"eXIf", b"MM\0*\0\0\0\x08\0\x01\x01\x0e\0\x02\0\0\0\x14\0\0\0\x1a\0\0\0\0" + GPS_SECRET),
]
PNG_METADATA_TYPES = {t for t, _ in PNG_METADATA}


def logo(api, token, data, name="logo.png", ctype="image/png"):
    r = upload(api, "/providers/me/logo", token, {"logo": (name, data, ctype)})
    assert r.status_code == 200, r.text
    return r.json()["logoUrl"]


def headshot(api, token, data, name="h.png", ctype="image/png"):
    r = upload(api, "/providers/me/headshots", token, {"headshot": (name, data, ctype)})
    assert r.status_code == 200, r.text
    return r.json()["headshots"][-1]


def with_query(url, **changes):
    """url with query parameters replaced (None removes one)."""
    parts = urllib.parse.urlsplit(url)
    q = dict(urllib.parse.parse_qsl(parts.query))
    for k, v in changes.items():
        if v is None:
            q.pop(k, None)
        else:
            q[k] = v
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(q)))


def with_key(url, key):
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(path="/files/" + key))


def assert_bad_link(url):
    r = fetch(url)
    assert r.status_code == 403, (url, r.status_code, r.text)
    assert r.json() == BAD_LINK
    assert r.headers["X-Content-Type-Options"] == "nosniff"


def raw_get(server, target):
    """A GET with the request target sent exactly as given (no client-side normalisation)."""
    c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        c.putrequest("GET", target, skip_accept_encoding=True)
        c.endheaders()
        r = c.getresponse()
        body = r.read()
        contract_observe(f"127.0.0.1:{server.port}", "GET", target, r.status, r.getheader("Content-Type"), body)
        return r.status, dict(r.getheaders()), body
    finally:
        c.close()


@pytest.fixture
def pro(api):
    return api.register_provider()


# ================================================================ serving

def test_url_shape_and_exact_bytes(server, api, pro):
    data = png_bytes(seed=101, width=40, height=30)
    url = logo(api, pro["token"], data)
    m = FILE_URL_RE.match(url)
    assert m, url
    assert int(m.group(1)) == server.port  # PUBLIC_URL is http://localhost:<port>
    before = server_seconds(api)
    r = assert_served(url, data, "image/png")
    after = server_seconds(api)  # the answer's time lies between: under load, seconds apart
    # cacheable for as long as the link is valid (issue 33), with a strong validator
    expires = int(url_query(url)["expires"])
    age = int(r.headers["Cache-Control"].removeprefix("private, max-age="))
    assert expires - after - 2 <= age <= expires - before + 1, (age, expires - after, expires - before)
    assert r.headers["ETag"].startswith('"')
    assert int(r.headers["Content-Length"]) == len(data)
    # the same link works again, and so does a fresh one for the same file
    assert_served(url, data, "image/png")
    assert_served(me(api, pro["token"])["logoUrl"], data, "image/png")


def test_each_type_is_served_with_its_content_type(api, pro, tmp_path):
    jpeg = jpeg_bytes(tmp_path)
    webp = webp_bytes(tmp_path)
    png = png_bytes(seed=102)
    for data, ctype, ext in ((png, "image/png", ".png"), (jpeg, "image/jpeg", ".jpg"), (webp, "image/webp", ".webp")):
        url = headshot(api, pro["token"], data, "photo.bin", "application/octet-stream")
        assert file_key(url).endswith(ext)
        assert_served(url, data, ctype)
    pdf = text_pdf(["A certificate with a text layer"])
    url = upload_insurance(api, pro["token"], pdf, "c.pdf", "application/pdf")["insDocUrl"]
    assert file_key(url).endswith(".pdf")
    assert_served(url, pdf, "application/pdf")


def test_keys_are_random_not_the_file_name(api, pro):
    a = headshot(api, pro["token"], png_bytes(seed=103), "same-name.png")
    b = headshot(api, pro["token"], png_bytes(seed=103), "same-name.png")
    assert file_key(a) != file_key(b)
    assert "same-name" not in a


def test_tampered_links_are_403(api, pro):
    data = png_bytes(seed=104)
    url = logo(api, pro["token"], data)
    q = url_query(url)
    sig, expires = q["sig"], int(q["expires"])
    flipped = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    for bad in (
        with_query(url, sig=flipped),
        with_query(url, sig=sig.upper()),
        with_query(url, sig=sig[:-2]),
        with_query(url, sig=""),
        with_query(url, sig=None),
        with_query(url, expires=str(expires + 1)),
        with_query(url, expires=str(expires - 1)),
        with_query(url, expires=str(expires + 10 * 365 * 86400)),
        with_query(url, expires="abc"),
        with_query(url, expires=""),
        with_query(url, expires=None),
        with_query(url, expires=None, sig=None),
    ):
        assert_bad_link(bad)
    assert_served(url, data, "image/png")


def test_a_signature_is_bound_to_its_key(api, pro):
    a = headshot(api, pro["token"], png_bytes(seed=105))
    b = headshot(api, pro["token"], png_bytes(seed=106))
    assert_bad_link(with_key(a, file_key(b)))  # a's signature on b's key
    other = api.register_provider()
    c = headshot(api, other["token"], png_bytes(seed=107))
    assert_bad_link(with_query(c, sig=url_query(a)["sig"], expires=url_query(a)["expires"]))


@pytest.mark.parametrize("key", [
    "passwd", "...", "marketplace.db", "jwt_secret", "uploads",
    "c" + "a" * 24 + ".gif", "c" + "a" * 24, "c" + "a" * 24 + ".", "C" + "A" * 24 + ".PNG",
    "c" + "a" * 23 + ".png", "c" + "a" * 25 + ".png", "c" + "a" * 24 + ".png.png", "x" + "a" * 24 + ".png",
    "c" + "a" * 23 + "_.png",
])
def test_keys_not_of_the_service_shape_are_403(api, pro, key):
    url = logo(api, pro["token"], png_bytes(seed=108))
    assert_bad_link(with_key(url, urllib.parse.quote(key, safe="")))


NO_ROUTE = (404, error_body(404, "Not found"))  # docs/decisions.md: an unknown route
NOT_A_KEY = (403, BAD_LINK)  # GET /files/:key with a key not of the service's shape


# The path is percent-decoded before it is matched (and repeated slashes are ignored), so an
# encoded slash makes more segments than GET /files/:key has: no route. One segment is a key.
@pytest.mark.parametrize("target,answer", [
    ("/files/..%2F..%2Fetc%2Fpasswd", NO_ROUTE),
    ("/files/..%2f..%2f..%2f..%2fetc%2fpasswd", NO_ROUTE),
    ("/files/%2e%2e%2f%2e%2e%2fetc%2fpasswd", NO_ROUTE),
    ("/files/../x", NO_ROUTE),
    ("/files/../../etc/passwd", NO_ROUTE),
    ("/files/..%2Fjwt_secret", NO_ROUTE),
    ("/files/..%2Fmarketplace.db", NO_ROUTE),
    ("/files/%2e%2e", NOT_A_KEY),
    ("/files/..", NOT_A_KEY),
    ("/files/....%2F%2F....%2F%2Fetc%2Fpasswd", NO_ROUTE),
    ("/files/%252e%252e%252fetc%252fpasswd", NOT_A_KEY),  # decoded once: "%2e%2e%2fetc%2fpasswd"
])
def test_path_traversal_never_reads_a_file(server, api, pro, target, answer):
    url = logo(api, pro["token"], png_bytes(seed=109))
    q = urllib.parse.urlsplit(url).query
    with open(os.path.join(server.data_dir, "jwt_secret"), "rb") as f:
        secret = f.read().strip()
    for t in (target, target + "?" + q):
        status, headers, body = raw_get(server, t)
        assert (status, json.loads(body)) == answer, (t, status, body)
        assert b"root:" not in body and b"SQLite format" not in body and secret not in body


def test_deleted_file_is_404_with_a_valid_link(api, pro):
    old = logo(api, pro["token"], png_bytes(seed=110))
    new = logo(api, pro["token"], png_bytes(seed=111))
    assert_gone(old)
    assert fetch(new).status_code == 200
    r = fetch(old)
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Cache-Control"] == "no-store"


# ================================================================ expiry (a private server: its clock moves)

def test_links_expire(server_factory):
    api = Api(server_factory())
    p = api.register_provider()
    photo, doc, cert = png_bytes(seed=120), png_bytes(seed=121), text_pdf(["certificate text layer 12345"])
    logo_url = logo(api, p["token"], photo)
    head_url = headshot(api, p["token"], photo)
    front_url = upload_licence(api, p["token"], front=doc)["idDocFront"]
    ins_url = upload_insurance(api, p["token"], cert, "c.pdf", "application/pdf")["insDocUrl"]
    for url, data, ctype in ((logo_url, photo, "image/png"), (head_url, photo, "image/png"),
                             (front_url, doc, "image/png"), (ins_url, cert, "application/pdf")):
        assert_served(url, data, ctype)

    api.advance_clock(14 * 60 * 1000)  # 14 minutes: everything still valid
    assert_served(front_url, doc, "image/png")
    assert_served(ins_url, cert, "application/pdf")

    # document links live 15 minutes, rounded up to the next 5 minutes: gone after 20
    api.advance_clock(7 * 60 * 1000)  # 21 minutes: document links are gone, photo links are not
    assert_bad_link(front_url)
    assert_bad_link(ins_url)
    assert_served(logo_url, photo, "image/png")
    assert_served(head_url, photo, "image/png")
    fresh = me(api, p["token"])  # the profile signs fresh document links
    assert_served(fresh["idDocFront"], doc, "image/png")
    assert_served(fresh["insDocUrl"], cert, "application/pdf")

    api.advance_clock((365 * 86400 + 3600) * 1000)  # a year and an hour later: photo links too
    assert_bad_link(logo_url)
    assert_bad_link(head_url)
    assert_bad_link(fresh["idDocFront"])
    r = api.post("/auth/provider/login", json={"email": p["email"], "password": p["password"]})
    assert r.status_code == 200, r.text
    fresh = me(api, r.json()["token"])
    assert_served(fresh["logoUrl"], photo, "image/png")
    assert_served(fresh["headshots"][0], photo, "image/png")
    assert_served(fresh["idDocFront"], doc, "image/png")


def expiry(url):
    return int(urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["expires"][0])


def test_links_are_stable_within_a_window(server_factory):
    """The same file keeps the same URL for a while (expiry rounded up to a boundary, never
    sooner than the documented lifetime), so clients and CDNs can cache it."""
    api = Api(server_factory())
    p = api.register_provider()
    logo(api, p["token"], png_bytes(seed=122))
    upload_licence(api, p["token"], front=png_bytes(seed=123))
    now = server_seconds(api)
    first = me(api, p["token"])
    second = me(api, p["token"])
    assert first["logoUrl"] == second["logoUrl"]
    assert first["idDocFront"] == second["idDocFront"]
    photo, doc = expiry(first["logoUrl"]), expiry(first["idDocFront"])
    assert photo % 3600 == 0 and now + 365 * 86400 <= photo <= now + 365 * 86400 + 3600 + 5
    assert doc % 300 == 0 and now + 15 * 60 <= doc <= now + 20 * 60 + 5
    api.advance_clock(3600 * 1000)  # the next window signs new links
    later = me(api, p["token"])
    assert expiry(later["logoUrl"]) >= photo + 3600
    assert later["idDocFront"] != first["idDocFront"] and expiry(later["idDocFront"]) % 300 == 0
    assert_served(later["logoUrl"], png_bytes(seed=122), "image/png")


def file_urls(value):
    """Every signed file URL in an answer, in document order ("[IMAGE]<url>" message contents
    included)."""
    if isinstance(value, dict):
        return [u for v in value.values() for u in file_urls(v)]
    if isinstance(value, list):
        return [u for v in value for u in file_urls(v)]
    if isinstance(value, str) and "/files/" in value:
        return [value[len("[IMAGE]"):] if value.startswith("[IMAGE]") else value]
    return []


def test_every_signed_url_is_stable_within_its_window(server_factory):
    """Issue 24, item 1: every answer that carries a file's link (job photos in every job list
    and view, a quote's provider logo, logos and headshots in a profile and in favorites,
    licence and insurance documents, address photos, photo messages) gives the same URL to
    reads a minute apart within one window, and each URL opens its file."""
    api = Api(server_factory())
    zip_code = "10001"
    pro = api.register_provider(serviceZips=[zip_code])
    pro_files = {"headshot": png_bytes(seed=130), "front": png_bytes(seed=131), "back": png_bytes(seed=132)}
    headshot(api, pro["token"], pro_files["headshot"])
    upload_licence(api, pro["token"], front=pro_files["front"], back=pro_files["back"])
    logo(api, pro["token"], png_bytes(seed=133))
    upload_insurance(api, pro["token"], png_bytes(seed=134))
    user = api.register_user(zip=zip_code)
    for path, body in (("/payments/payment-method", {"paymentMethodId": "pm_card_visa"}),
                       ("/payments/premium/subscribe", None), (f"/users/me/favorites/{pro['id']}", None)):
        r = api.post(path, token=user["token"], json=body)
        assert r.status_code in (200, 201), r.text
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "2 Side St", "zip": zip_code})
    aid = r.json()[-1]["id"]
    r = api.post(f"/users/me/addresses/{aid}/photos", token=user["token"],
                 files={"streetViewPhoto": ("s.png", png_bytes(seed=135), "image/png")})
    assert r.status_code == 200, r.text
    job = post_job(api, user, isAsap=True)["id"]
    r = api.post(f"/jobs/{job}/images", token=user["token"], files={"images": ("j.png", png_bytes(seed=136), "image/png")})
    assert r.status_code == 200, r.text
    quote = api.post("/quotes", token=pro["token"], json={"jobId": job, "amount": 80}).json()
    assert api.post(f"/quotes/{quote['id']}/accept", token=user["token"]).status_code == 200
    assert api.patch(f"/jobs/{job}/status", token=pro["token"], json={"status": "ON_THE_WAY"}).status_code == 200
    for step in ("start", "complete"):
        r = api.post(f"/jobs/{job}/{step}", token=pro["token"], files={"images": ("p.png", png_bytes(seed=137), "image/png")})
        assert r.status_code == 200, r.text
    r = api.post(f"/jobs/{job}/messages/photo", token=user["token"],
                 files={"photo": ("m.png", png_bytes(seed=138), "image/png")})
    assert r.status_code == 201, r.text

    reads = [("GET", "/jobs", user), ("GET", f"/jobs/{job}", user), ("GET", f"/jobs/{job}", pro),
             ("GET", "/jobs/reportable", user), ("GET", "/providers/me/jobs", pro),
             ("GET", f"/quotes/job/{job}", user), ("GET", "/providers/me", pro),
             ("GET", "/users/me/favorites", user), ("GET", "/users/me/addresses", user),
             ("GET", f"/jobs/{job}/messages", user), ("GET", f"/jobs/{job}/messages", pro)]

    def read_all():
        out = {}
        for method, path, who in reads:
            r = api.request(method, path, token=who["token"])
            assert r.status_code == 200, (path, r.text)
            out[(path, who["id"])] = file_urls(r.json())
        return out

    # just after a boundary of the 5-minute windows (and of the hour), so a minute stays inside
    now = server_seconds(api)
    api.advance_clock(((3600 - now % 3600) + 1) * 1000)
    first = read_all()
    api.advance_clock(60 * 1000)
    second = read_all()
    assert second == first
    counts = {path: len(urls) for (path, _), urls in first.items()}
    assert counts == {"/jobs": 3, f"/jobs/{job}": 3, "/jobs/reportable": 3, "/providers/me/jobs": 3,
                      f"/quotes/job/{job}": 1, "/providers/me": 5, "/users/me/favorites": 2,
                      "/users/me/addresses": 1, f"/jobs/{job}/messages": 1}, counts
    for urls in first.values():
        for url in urls:
            assert fetch(url).status_code == 200, url
    # the next window signs new photo links; the old ones still open their files
    api.advance_clock(3600 * 1000)
    third = read_all()
    assert third[("/users/me/favorites", user["id"])] != first[("/users/me/favorites", user["id"])]
    assert fetch(first[(f"/jobs/{job}/messages", user["id"])][0]).status_code == 200


# ================================================================ metadata stripping

META_ROUTES = [
    ("logo", "/providers/me/logo", lambda b: b["logoUrl"]),
    ("headshot", "/providers/me/headshots", lambda b: b["headshots"][-1]),
    ("front", "/providers/me/id-documents", lambda b: b["idDocFront"]),
    ("back", "/providers/me/id-documents", lambda b: b["idDocBack"]),
    ("insuranceDoc", "/providers/me/insurance-document", lambda b: b["insDocUrl"]),
]
meta_params = pytest.mark.parametrize("field,path,url_of", META_ROUTES, ids=[f for f, _, _ in META_ROUTES])


@meta_params
def test_jpeg_exif_gps_is_stripped(api, pro, tmp_path, field, path, url_of):
    clean = jpeg_bytes(tmp_path, size="120x80")
    dirty = jpeg_with_metadata(clean)
    # what was sent really carries the position
    sent_exif = exif_of(tmp_path, dirty, "sent.jpg")
    assert "GPSLatitude=40/1, 44/1, 5496/100" in sent_exif and "GPSLongitudeRef=W" in sent_exif, sent_exif
    assert [m for m in jpeg_segment_markers(dirty) if 0xE0 <= m <= 0xEF] == [0xE1, 0xE0, 0xE1, 0xED]

    r = upload(api, path, pro["token"], {field: ("camera.jpg", dirty, "image/jpeg")})
    assert r.status_code == 200, r.text
    url = url_of(r.json())
    assert file_key(url).endswith(".jpg")
    served = assert_served(url, clean, "image/jpeg").content  # exactly the image without its metadata
    assert b"Exif" not in served and GPS_SECRET not in served
    assert b"http://ns.adobe.com/xap/1.0/" not in served and b"Photoshop 3.0" not in served
    assert [m for m in jpeg_segment_markers(served) if 0xE0 <= m <= 0xEF] == [0xE0]  # JFIF kept
    assert "JPEG 120x80" in identify_ok(tmp_path, served, "served.jpg")
    assert "GPS" not in exif_of(tmp_path, served, "served2.jpg")


@meta_params
def test_png_text_and_exif_chunks_are_stripped(api, pro, tmp_path, field, path, url_of):
    clean = png_bytes(seed=130, width=48, height=32)
    dirty = png_bytes(seed=130, width=48, height=32, extra_chunks=PNG_METADATA)
    assert PNG_METADATA_TYPES <= set(png_chunk_types(dirty))
    identify_ok(tmp_path, dirty, "sent.png")
    r = upload(api, path, pro["token"], {field: ("shot.png", dirty, "image/png")})
    assert r.status_code == 200, r.text
    served = assert_served(url_of(r.json()), clean, "image/png").content
    assert png_chunk_types(served) == [b"IHDR", b"IDAT", b"IEND"]
    assert GPS_SECRET not in served
    assert "PNG 48x32" in identify_ok(tmp_path, served, "served.png")


def test_png_ancillary_chunks_that_are_not_metadata_stay(api, pro):
    """Only the metadata chunks go: gAMA (a colour property) is kept, pixels untouched."""
    kept = [(b"gAMA", (45455).to_bytes(4, "big"))]
    data = png_bytes(seed=131, extra_chunks=kept)
    served = assert_served(logo(api, pro["token"], data), data, "image/png").content
    assert png_chunk_types(served) == [b"IHDR", b"gAMA", b"IDAT", b"IEND"]


def test_png_metadata_is_stripped_even_with_trailing_bytes(api, pro, tmp_path):
    clean = png_bytes(seed=132, width=48, height=32)
    dirty = png_bytes(seed=132, width=48, height=32, extra_chunks=PNG_METADATA) + b"TRAILING-DATA-AFTER-IEND"
    identify_ok(tmp_path, dirty, "sent.png")  # decoders ignore what follows IEND
    served = fetch(logo(api, pro["token"], dirty)).content
    assert GPS_SECRET not in served
    assert not PNG_METADATA_TYPES & set(png_chunk_types(served))
    assert served.startswith(clean[:-12])  # the image itself is unchanged


def _riff(chunks):
    body = b"WEBP" + b"".join(kind + struct.pack("<I", size) + data + b"\0" * (len(data) % 2) for kind, size, data in chunks)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _unreadable_images(tmp_path):
    clean = jpeg_bytes(tmp_path, size="64x48")
    dirty = jpeg_with_metadata(clean)
    exif_end = 2 + len(exif_gps_app1())
    png = png_bytes(seed=133, extra_chunks=PNG_METADATA)
    ihdr_end = 8 + 25
    return {
        # a segment whose length runs past the end of the file (cut inside the IPTC segment)
        "jpeg-cut": dirty[:dirty.index(b"Photoshop 3.0") + 5],
        # a byte where the next marker must be
        "jpeg-garbage": dirty[:exif_end] + b"\x00" + dirty[exif_end:],
        # a chunk whose length runs past the end of the file
        "png-cut": png[:ihdr_end] + struct.pack(">I", 1 << 20) + b"IDAT" + png[ihdr_end + 8:],
        "webp-cut": _riff([(b"VP8X", 10, b"\x08" + b"\0" * 9), (b"EXIF", len(GPS_SECRET), GPS_SECRET),
                           (b"VP8L", 1 << 20, b"\x2f\0\0\0")]),
    }


@pytest.mark.parametrize("kind", ["jpeg-cut", "jpeg-garbage", "png-cut", "webp-cut"])
def test_an_image_whose_metadata_cannot_be_stripped_is_refused(server, api, pro, tmp_path, kind):
    """When the structure cannot be followed the file used to be stored as it came, GPS
    position included: it is refused and nothing is stored."""
    data = _unreadable_images(tmp_path)[kind]
    assert GPS_SECRET in data or b"Exif" in data or b"eXIf" in data
    before = _uploads(server)
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("x.bin", data, "application/octet-stream")})
    assert (r.status_code, r.json()) == (400, error_body(400, "logo: the image is damaged or incomplete")), kind
    assert me(api, pro["token"])["logoUrl"] is None
    assert _uploads(server) == before


def test_jpeg_metadata_after_the_scan_and_bytes_after_the_end_are_stripped(api, pro, tmp_path):
    """Segments may also sit between scans (progressive images); the stripper used to stop at
    the first scan and keep everything after it."""
    clean = jpeg_bytes(tmp_path, size="64x48")
    assert clean.endswith(b"\xff\xd9")
    dirty = clean[:-2] + exif_gps_app1() + b"\xff\xd9" + b"TRAILER " + GPS_SECRET
    identify_ok(tmp_path, dirty, "sent.jpg")
    served = fetch(logo(api, pro["token"], dirty, "x.jpg", "image/jpeg")).content
    assert GPS_SECRET not in served and b"Exif" not in served
    assert served == clean


# ================================================================ multipart parsing (raw sockets)

def _near(offsets, body_len, radius=8):
    """Every split offset within radius bytes of each offset, inside the body."""
    return sorted({o + d for o in offsets for d in range(-radius, radius + 1) if 0 < o + d < body_len})


def _auth(token):
    return [("Authorization", f"Bearer {token}"),
            ("Content-Type", f"multipart/form-data; boundary={raw_http.BOUNDARY}")]


def test_one_file_split_near_its_start_is_read_whole(server, api, pro):
    """A TCP segment that ends 1 to 4 bytes into a file's data made the parser start the file
    twice (400 `logo: at most 1 file`); every split near the part's start must read one file."""
    data = png_bytes(seed=150)
    body, starts = raw_http.multipart([("logo", "logo.png", data)])
    for split in _near([o for s in starts for o in s], len(body)):
        status, _, out = raw_http.send(server, "POST", "/providers/me/logo", _auth(pro["token"]), body, split=split)
        assert status == 200, (split, out)
        assert_served(json.loads(out)["logoUrl"], data, "image/png")


@pytest.mark.engine_independent  # multipart parsing, whatever the engine
def test_several_files_split_near_each_part_are_read_whole(server, api):
    user = api.register_user()
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "1 Split St", "zip": "10001"})
    assert r.status_code == 201, r.text
    aid = r.json()[0]["id"]
    street, area = png_bytes(seed=151), [png_bytes(seed=152 + i) for i in range(3)]
    body, starts = raw_http.multipart([("streetViewPhoto", "s.png", street)] +
                                      [("serviceAreaPhotos", f"a{i}.png", a) for i, a in enumerate(area)])
    for split in _near([o for s in starts for o in s], len(body)):
        status, _, out = raw_http.send(server, "POST", f"/users/me/addresses/{aid}/photos", _auth(user["token"]),
                                       body, split=split)
        assert status == 200, (split, out)
        got = json.loads(out)
        assert fetch(got["streetViewPhoto"]).content == street, split
        assert [fetch(u).content for u in got["serviceAreaPhotos"][-3:]] == area, split


@pytest.mark.engine_independent  # multipart parsing, whatever the engine
def test_text_field_split_inside_a_utf8_character_keeps_every_byte(server, api):
    """65 two-byte characters are one too many for providerId (at most 64): a value that lost
    bytes at a chunk boundary would pass the length rule and reach the handler instead."""
    user = api.register_user()
    value = "é" * 65
    body, starts = raw_http.multipart([("providerId", None, value.encode()), ("photo", "p.png", png_bytes(seed=160))])
    first, last = starts[0][1], starts[1][0]
    for split in range(first - 2, last + 2):
        status, _, out = raw_http.send(server, "POST", "/jobs/c000000000000000000000000/messages/photo",
                                       _auth(user["token"]), body, split=split)
        assert (status, json.loads(out)) == (400, error_body(400, "providerId: must be at most 64 characters")), split


def _uploads(srv):
    root = os.path.join(srv.data_dir, "uploads")
    return sorted(os.listdir(root)) if os.path.isdir(root) else []


def test_body_without_its_closing_boundary_is_400_and_stores_nothing(server, api, pro):
    data = png_bytes(seed=161)
    body, _ = raw_http.multipart([("logo", "logo.png", data)])
    cut = body[:body.rindex(b"\r\n--")]  # the last file's data, then the body just ends
    before = _uploads(server)
    for truncated in (cut, cut + b"\r\n", cut + b"\r\n--" + raw_http.BOUNDARY.encode()):
        status, _, out = raw_http.send(server, "POST", "/providers/me/logo", _auth(pro["token"]), truncated)
        assert (status, json.loads(out)) == (400, error_body(400, "body: malformed multipart/form-data")), truncated[-60:]
    assert me(api, pro["token"])["logoUrl"] is None
    assert _uploads(server) == before


@pytest.mark.parametrize("names", [["x"] * 5000, [f"x{i}" for i in range(5000)]], ids=["same", "distinct"])
def test_empty_text_fields_count_against_the_form_limit(server, api, pro, names):
    parts = [(n, None, b"") for n in names] + [("logo", "logo.png", png_bytes(seed=162))]
    body, _ = raw_http.multipart(parts)
    status, _, out = raw_http.send(server, "POST", "/providers/me/logo", _auth(pro["token"]), body)
    assert (status, json.loads(out)) == (413, error_body(413, "form fields too large"))
    assert me(api, pro["token"])["logoUrl"] is None


def test_an_empty_file_part_is_a_file_even_before_one_of_the_same_name(server, api, pro):
    """Every part counts: an empty `logo` followed by another `logo` of the same file name is two
    files (the old workaround for libmicrohttpd's parser merged them and dropped the empty one)."""
    body, _ = raw_http.multipart([("logo", "logo.png", b""), ("logo", "logo.png", png_bytes(seed=163))])
    status, _, out = raw_http.send(server, "POST", "/providers/me/logo", _auth(pro["token"]), body)
    assert (status, json.loads(out)) == (400, error_body(400, "logo: at most 1 file"))
    assert me(api, pro["token"])["logoUrl"] is None


def test_a_form_of_256_parts_is_accepted(server, api, pro):
    parts = [(f"x{i}", None, b"") for i in range(255)] + [("logo", "logo.png", png_bytes(seed=164))]
    body, _ = raw_http.multipart(parts)
    status, _, out = raw_http.send(server, "POST", "/providers/me/logo", _auth(pro["token"]), body)
    assert status == 200, out


def _peak_rss_kib(srv):
    with open(f"/proc/{srv.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


@pytest.mark.engine_independent  # multipart parsing, whatever the engine
def test_text_field_sent_in_small_pieces_costs_little_memory(server_factory):
    """Each chunk of a text field used to copy the whole value so far: 60 KiB arriving in
    about two thousand reads cost some 60 MiB (a byte at a time, gigabytes)."""
    srv = server_factory()
    token = Api(srv).register_user()["token"]
    value = b"v" * (60 * 1024)
    body, starts = raw_http.multipart([("providerId", None, value), ("photo", "p.png", png_bytes(seed=163))])
    before = _peak_rss_kib(srv)
    s = raw_http.connect(srv, timeout=60)
    try:
        s.sendall(raw_http.head("POST", "/jobs/c000000000000000000000000/messages/photo", _auth(token), len(body)))
        data_start = starts[0][1]
        s.sendall(body[:data_start])
        for i in range(data_start, data_start + len(value), 32):
            s.sendall(body[i:i + 32])
            time.sleep(0.0005)  # separate reads on the server
        s.sendall(body[data_start + len(value):])
        status, _, out = raw_http.read_response(s)
    finally:
        s.close()
    assert (status, json.loads(out)) == (400, error_body(400, "providerId: must be at most 64 characters"))
    assert _peak_rss_kib(srv) - before < 16 * 1024, "peak memory grew by more than 16 MiB"


# ================================================================ S3 storage

S3_AK, S3_SK, S3_REGION, S3_BUCKET = "AKIAMARKETPLACETEST1", "test/secret+key/0123456789", "us-east-1", "mp-files"


@pytest.fixture(scope="module")
def s3(make_server):
    fake = FakeS3(S3_AK, S3_SK, S3_REGION, S3_BUCKET).start()
    # one database-lane worker: a storage call made on that lane would hold up every other request
    srv = make_server(S3_ENDPOINT=fake.url, S3_BUCKET=S3_BUCKET, S3_REGION=S3_REGION, S3_ACCESS_KEY_ID=S3_AK,
                      S3_SECRET_ACCESS_KEY=S3_SK, HTTP_WORKERS="1")
    yield fake, srv, Api(srv)
    fake.stop()


def local_files(srv):
    root = os.path.join(srv.data_dir, "uploads")
    return [n for _, _, names in os.walk(root) for n in names]


def test_s3_upload_lands_in_the_bucket(s3, tmp_path):
    fake, srv, api = s3
    p = api.register_provider()
    clean = jpeg_bytes(tmp_path)
    url = logo(api, p["token"], jpeg_with_metadata(clean), "me.jpg", "image/jpeg")
    key = file_key(url)
    with fake.lock:
        assert fake.objects[key] == (clean, "image/jpeg")  # stripped before it was stored
    assert ("PUT", f"/{S3_BUCKET}/{key}") in fake.requests
    assert local_files(srv) == []
    # served from the bucket: change the object there and the link serves the change
    assert_served(url, clean, "image/jpeg")
    assert ("GET", f"/{S3_BUCKET}/{key}") in fake.requests
    with fake.lock:
        fake.objects[key] = (clean + b"\0edited-in-s3", "image/jpeg")
    assert_served(url, clean + b"\0edited-in-s3", "image/jpeg")


def test_s3_type_comes_from_the_bytes(s3):
    fake, srv, api = s3
    p = api.register_provider()
    data = png_bytes(seed=140)
    url = headshot(api, p["token"], data, "x.jpg", "image/jpeg")
    key = file_key(url)
    assert key.endswith(".png")
    with fake.lock:
        assert fake.objects[key] == (data, "image/png")
    assert_served(url, data, "image/png")


def test_s3_replaced_and_removed_files_are_deleted(s3):
    fake, srv, api = s3
    p = api.register_provider()
    first = logo(api, p["token"], png_bytes(seed=141))
    second = logo(api, p["token"], png_bytes(seed=142))
    with fake.lock:
        assert file_key(first) not in fake.objects and file_key(second) in fake.objects
    assert ("DELETE", f"/{S3_BUCKET}/{file_key(first)}") in fake.requests
    assert_gone(first)

    shot = headshot(api, p["token"], png_bytes(seed=143))
    with fake.lock:
        assert file_key(shot) in fake.objects
    r = api.delete("/providers/me/headshots/0", token=p["token"])
    assert r.status_code == 200 and r.json()["headshots"] == []
    with fake.lock:
        assert file_key(shot) not in fake.objects
    assert_gone(shot)

    doc = upload_insurance(api, p["token"], png_bytes(seed=144))["insDocUrl"]
    upload_insurance(api, p["token"], png_bytes(seed=145))
    with fake.lock:
        assert file_key(doc) not in fake.objects
    assert local_files(srv) == []


def test_s3_deleted_object_is_404(s3):
    fake, srv, api = s3
    p = api.register_provider()
    url = logo(api, p["token"], png_bytes(seed=146))
    with fake.lock:
        del fake.objects[file_key(url)]
    assert_gone(url)


def test_id_documents_answer_says_pending_when_the_check_ends_first(s3):
    """Spec 4: POST /providers/me/id-documents answers 'the updated Provider with idCheckStatus
    pending', whatever the background check does. Forced: replacing the front deletes the old
    one at the bucket after the upload committed and before the answer is written; the bucket
    holds that DELETE until the check of the new front (bytes no decoder reads, so it ends at
    once) has written its result."""
    fake, srv, api = s3
    p = api.register_provider()
    api.wait_queue_idle(timeout=120)  # the recognition worker is free
    upload_licence(api, p["token"], front=undecodable_png(1))
    first = wait_check(api, p["token"], "idCheckStatus")
    assert first["idCheckFlags"] == ["unreadable"]
    release = fake.hold("DELETE")
    answers = []
    try:
        t = threading.Thread(target=lambda: answers.append(Api(srv).post(
            "/providers/me/id-documents", token=p["token"],
            files={"front": ("front.png", undecodable_png(2), "image/png")})))
        t.start()
        checked = eventually(lambda: me(api, p["token"]), 30, "the new front checked while its answer waits",
                             until=lambda body: body["idCheckStatus"] != "pending"
                             and body["idCheckAt"] != first["idCheckAt"])
        assert answers == []  # the answer is still held at the bucket
    finally:
        release.set()
        fake.delay("DELETE", 0)
    t.join(30)
    assert (checked["idCheckStatus"], checked["idCheckFlags"]) == ("failed", ["unreadable"])
    (r,) = answers
    assert r.status_code == 200, r.text
    assert (r.json()["idCheckStatus"], r.json()["idCheckFlags"], r.json()["idCheckAt"]) == ("pending", [], None)
    assert file_key(r.json()["idDocFront"]) != file_key(first["idDocFront"])


def test_s3_recognition(s3, tmp_path):
    fake, srv, api = s3
    api.wait_queue_idle(timeout=120)  # the recognitions of earlier tests' documents are not this test's
    p = api.register_provider()
    today = server_today(api)
    expiry = today.replace(year=today.year + 3, day=1)
    upload_licence(api, p["token"], front=text_image(tmp_path / "front.png", licence_lines(expiry)))
    body = wait_check(api, p["token"], "idCheckStatus")
    assert id_fields(body) == {"idCheckStatus": "passed", "idCheckName": "JANE SMITH", "idCheckDOB": "1985-01-15",
                               "idCheckExpiry": expiry.isoformat(), "idCheckState": "CA", "idCheckFlags": []}
    front_key = file_key(body["idDocFront"])
    assert [m for m, path in fake.requests if path == f"/{S3_BUCKET}/{front_key}"].count("GET") >= 1

    cert_expiry = today + datetime.timedelta(days=150)
    effective = cert_expiry - datetime.timedelta(days=365)
    upload_insurance(api, p["token"], text_image(tmp_path / "cert.png", certificate_lines(cert_expiry, effective),
                                                 size=CERT_SIZE))
    body = wait_check(api, p["token"], "insCheckStatus")
    assert {k: body[k] for k in expected_ins("active", effective, cert_expiry)} == \
        expected_ins("active", effective, cert_expiry)
    assert local_files(srv) == []


def _bucket_keys(fake):
    with fake.lock:
        return set(fake.objects)


def test_s3_address_photos_that_fail_half_way_leave_no_object(s3):
    fake, srv, api = s3
    user = api.register_user()
    r = api.post("/users/me/addresses", token=user["token"], json={"address": "1 Bucket St", "zip": "10001"})
    aid = r.json()[0]["id"]
    before = _bucket_keys(fake)
    fake.fail_next(count=3, method="PUT", after=1)  # the first file lands, every try of the second fails
    files = [("streetViewPhoto", ("s.png", png_bytes(seed=170), "image/png"))] + [
        ("serviceAreaPhotos", (f"a{i}.png", png_bytes(seed=171 + i), "image/png")) for i in range(2)]
    r = api.post(f"/users/me/addresses/{aid}/photos", token=user["token"], files=files)
    assert (r.status_code, r.json()) == (503, error_body(503, "File storage unavailable"))  # issue 14, item 7
    assert _bucket_keys(fake) == before
    listed = api.get("/users/me/addresses", token=user["token"]).json()[0]
    assert (listed["streetViewPhoto"], listed["serviceAreaPhotos"]) == (None, [])


def test_s3_job_photos_that_fail_half_way_leave_no_object(s3):
    fake, srv, api = s3
    user = api.register_user()
    job = post_job(api, user)
    before = _bucket_keys(fake)
    fake.fail_next(count=3, method="PUT", after=2)
    files = [("images", (f"i{i}.png", png_bytes(seed=180 + i), "image/png")) for i in range(3)]
    r = api.post(f"/jobs/{job['id']}/images", token=user["token"], files=files)
    assert (r.status_code, r.json()) == (503, error_body(503, "File storage unavailable"))
    assert _bucket_keys(fake) == before
    assert api.get(f"/jobs/{job['id']}", token=user["token"]).json()["beforeImages"] == []


def _while_storage_deletes(fake, call, probe):
    """Runs call() while the bucket holds its DELETEs for 2 s; returns the seconds probe() took
    once the first DELETE had arrived."""
    done = []
    fake.delay("DELETE", 2.0)
    try:
        with fake.lock:
            seen = len(fake.requests)
        t = threading.Thread(target=lambda: done.append(call()))
        t.start()
        def delete_arrived():
            with fake.lock:
                return any(m == "DELETE" for m, _ in fake.requests[seen:])

        eventually(delete_arrived, 10, "a DELETE reaches the bucket", interval=0.01)
        t0 = time.perf_counter()
        probe()
        elapsed = time.perf_counter() - t0
        t.join(30)
    finally:
        fake.delay("DELETE", 0)
    assert done and done[0].status_code == 200, done
    return elapsed


def test_s3_deletes_do_not_hold_the_database_lane(s3):
    """DELETE /providers/me/headshots/:index and DELETE /users/me/addresses/:id/photos wait on
    the bucket: they run on the slow lane, so a database-bound request is not stuck behind them."""
    fake, srv, api = s3
    p = api.register_provider()
    headshot(api, p["token"], png_bytes(seed=190))
    probe = lambda: api.get("/providers/me", token=p["token"]).raise_for_status()  # noqa: E731
    assert _while_storage_deletes(fake, lambda: api.delete("/providers/me/headshots/0", token=p["token"]), probe) < 1.0

    user = api.register_user()
    aid = api.post("/users/me/addresses", token=user["token"], json={"address": "2 Lane St", "zip": "10001"}).json()[0]["id"]
    assert api.post(f"/users/me/addresses/{aid}/photos", token=user["token"],
                    files={"streetViewPhoto": ("s.png", png_bytes(seed=191), "image/png")}).status_code == 200
    probe = lambda: api.get("/users/me", token=user["token"]).raise_for_status()  # noqa: E731
    assert _while_storage_deletes(fake, lambda: api.delete(f"/users/me/addresses/{aid}/photos", token=user["token"]),
                                  probe) < 1.0
