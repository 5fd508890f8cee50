"""The provider profile (GET/PATCH /providers/me), its uploads (logo, headshots, licence images,
insurance certificate) and the background document recognition that follows them.

Spec: marketplace-api.md sections 2 (Provider), 3 (licence and insurance checks), 4 (Providers),
8 (Limits); decisions.md section 4 (near expiry = 30 days, label variants); the project's
docs/decisions.md ("Uploads and stored files", "Providers").

Every image and PDF is made here, in tmp_path or in memory: pure-Python PNGs, ImageMagick
(`convert`, DejaVu Sans) for documents that OCR must read, and hand-written PDFs (ImageMagick's
policy forbids writing PDF). Expiry dates are relative to the service's own clock (POST
/__test/clock with 0), since other modules may have moved the shared server's clock forward.

test_files.py imports the image and PDF helpers from here.
"""
import datetime
import os
import re
import struct
import subprocess
import urllib.parse

import pytest
import requests

from conftest import Api
from helpers import (assert_error, error_body, eventually, next_link, png_bytes, png_chunk, send_raw_json,
                     server_seconds)

MB = 1024 * 1024
UNAUTHORIZED = error_body(401, "Unauthorized")
FORBIDDEN = error_body(403, "Forbidden")
ID_RE = re.compile(r"^c[0-9a-z]{24}$")
ISO_MS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
FILE_URL_RE = re.compile(r"^http://localhost:(\d+)/files/(c[0-9a-z]{24}\.(png|jpg|webp|pdf))\?expires=(\d+)&sig=([0-9a-f]{64})$")
SERVICES_MSG = "must be one of: lawncare, snowplowing, handyman, home_cleaning"
IMAGE_TYPES_MSG = "must be a PNG, JPEG or WebP image"
DOC_TYPES_MSG = "must be a PNG or JPEG image or a PDF"
RECOGNITION_TIMEOUT = 30

PROFILE_KEYS = {
    "id", "email", "name", "phone", "companyName", "companyUrl", "insuranceInfo", "logoUrl", "services",
    "serviceZips", "headshots", "idDocFront", "idDocBack", "availability", "isPremium", "premiumSince",
    "idCheckStatus", "idCheckName", "idCheckDOB", "idCheckExpiry", "idCheckState", "idCheckFlags", "idCheckAt",
    "insDocUrl", "insCheckStatus", "insCheckCarrier", "insCheckPolicy", "insCheckEffective", "insCheckExpiry",
    "insCheckCoverage", "insCheckFlags", "insCheckAt", "createdAt",
}
DEFAULT_AVAILABILITY = {
    day: {"start": "08:00", "end": "17:00", "on": day not in ("sat", "sun")}
    for day in ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
}

# ================================================================ files made for the tests

CONVERT = "/usr/bin/convert" if os.path.exists("/usr/bin/convert") else "convert"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def png_chunk_types(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    types, i = [], 8
    while i + 12 <= len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        types.append(data[i + 4:i + 8])
        i += 12 + n
        if types[-1] == b"IEND":
            break
    return types


def padded_png(size):
    """A valid PNG grown to exactly size bytes by zero bytes after IEND (libmagic still says PNG)."""
    base = png_bytes(seed=size % 97, width=8, height=8)
    assert size >= len(base)
    return base + b"\0" * (size - len(base))


def run_convert(*args):
    subprocess.run([CONVERT, *map(str, args)], check=True, capture_output=True, timeout=60)


def jpeg_bytes(tmp_path, name="photo.jpg", size="96x64"):
    """A JPEG from ImageMagick with no metadata segment but APP0 (JFIF)."""
    path = tmp_path / name
    run_convert("-size", size, "gradient:orange-navy", "-strip", "-quality", "85", path)
    data = path.read_bytes()
    assert data[:2] == b"\xff\xd8"
    return data


def webp_bytes(tmp_path, name="photo.webp"):
    path = tmp_path / name
    run_convert("-size", "64x48", "gradient:green-white", path)
    data = path.read_bytes()
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP"
    return data


def text_image(path, lines, size="1400x900", pointsize=40):
    """Black DejaVu Sans text on white, one line per entry, as a PNG (what OCR reads)."""
    args = ["-size", size, "xc:white", "-font", FONT if os.path.exists(FONT) else "DejaVu-Sans",
            "-pointsize", pointsize, "-fill", "black"]
    y = 70
    for line in lines:
        args += ["-annotate", f"+40+{y}", line]
        y += int(pointsize * 1.8)
    run_convert(*args, path)
    return path.read_bytes()


def noise_png(width=200, height=150, seed=7):
    """Grey random noise: nothing a reader can read."""
    return png_bytes(seed=seed, width=width, height=height, gray=True)


# ---- PDFs, written by hand

def build_pdf(objects):
    """A PDF of the given object bodies (object 1 is the catalog), with a correct xref table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def _pdf_stream(data, extra=b""):
    return b"<< /Length %d%s >>\nstream\n" % (len(data), extra) + data + b"\nendstream"


def text_pdf(lines):
    """A one-page PDF whose text layer holds lines (Helvetica, one line per entry)."""
    esc = [line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") for line in lines]
    content = "\n".join(["BT", "/F1 14 Tf", "18 TL", "50 740 Td"] + [f"({s}) Tj T*" for s in esc] + ["ET"])
    return build_pdf([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        _pdf_stream(content.encode("latin-1")),
    ])


# ---- EXIF, written by hand (exiftool is not installed)

def _tiff_ifd(entries, at):
    """One big-endian IFD at offset `at` of the TIFF block: entries [(tag, type, count, value
    bytes)]; values over 4 bytes follow the IFD."""
    data_at = at + 2 + 12 * len(entries) + 4
    head, data = struct.pack(">H", len(entries)), b""
    for tag, kind, count, value in entries:
        if len(value) <= 4:
            head += struct.pack(">HHI", tag, kind, count) + value.ljust(4, b"\0")
        else:
            head += struct.pack(">HHII", tag, kind, count, data_at + len(data))
            data += value + (b"\0" if len(value) % 2 else b"")
    return head + struct.pack(">I", 0) + data


def _rationals(*pairs):
    return b"".join(struct.pack(">II", n, d) for n, d in pairs)


GPS_SECRET = b"SECRET-HOME-LOCATION"


def exif_gps_app1():
    """A JPEG APP1 Exif segment: IFD0 with ImageDescription (GPS_SECRET) and a GPS IFD
    (40 44' 54.96" N, 73 59' 12.34" W)."""
    desc = GPS_SECRET + b"\0"
    ifd0_len = 2 + 12 * 2 + 4 + len(desc) + len(desc) % 2
    gps_at = 8 + ifd0_len
    ifd0 = _tiff_ifd([(0x010E, 2, len(desc), desc), (0x8825, 4, 1, struct.pack(">I", gps_at))], 8)
    gps = _tiff_ifd([(0x0000, 1, 4, bytes([2, 3, 0, 0])),
                     (0x0001, 2, 2, b"N\0"), (0x0002, 5, 3, _rationals((40, 1), (44, 1), (5496, 100))),
                     (0x0003, 2, 2, b"W\0"), (0x0004, 5, 3, _rationals((73, 1), (59, 1), (1234, 100)))], gps_at)
    payload = b"Exif\0\0" + b"MM\0\x2a" + struct.pack(">I", 8) + ifd0 + gps
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def app_segment(marker, payload):
    return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload


XMP_APP1 = app_segment(0xE1, b"http://ns.adobe.com/xap/1.0/\0<x:xmpmeta xmlns:x='adobe:ns:meta/'>"
                             b"<exif:GPSLatitude>40,44.916N</exif:GPSLatitude></x:xmpmeta>")
IPTC_APP13 = app_segment(0xED, b"Photoshop 3.0\08BIM\x04\x04\0\0\0\0\0\x0c\x1c\x02\x78\0\x08CAPTION!")


def jpeg_with_metadata(clean):
    """clean (SOI, APP0, ...) with an Exif/GPS APP1 before APP0 and XMP and IPTC after it."""
    assert clean[2:4] == b"\xff\xe0"
    app0_end = 4 + ((clean[4] << 8) | clean[5])
    return clean[:2] + exif_gps_app1() + clean[2:app0_end] + XMP_APP1 + IPTC_APP13 + clean[app0_end:]


def jpeg_segment_markers(data):
    """The markers of a JPEG's segments up to the first SOS (0xDA included)."""
    assert data[:2] == b"\xff\xd8"
    out, i = [], 2
    while i + 4 <= len(data):
        marker = data[i + 1]
        out.append(marker)
        if marker == 0xDA:
            break
        i += 2 + ((data[i + 2] << 8) | data[i + 3])
    return out


def identify_ok(tmp_path, data, name):
    path = tmp_path / name
    path.write_bytes(data)
    r = subprocess.run(["identify", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def exif_of(tmp_path, data, name):
    path = tmp_path / name
    path.write_bytes(data)
    r = subprocess.run(["identify", "-format", "%[EXIF:*]", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


# ================================================================ API helpers

def me(api, token):
    r = api.get("/providers/me", token=token)
    assert r.status_code == 200, r.text
    return r.json()


def server_today(api):
    """The service's current UTC date (its clock may have been moved forward by other tests)."""
    now = api.advance_clock(0)
    return datetime.date.fromisoformat(now[:10])


def us_date(d):
    return d.strftime("%m/%d/%Y")


def upload(api, path, token, files):
    """POSTs multipart files: {field: (filename, bytes, content type)} or a list of (field, tuple)."""
    return api.post(path, token=token, files=files)


def file_key(url):
    m = FILE_URL_RE.match(url)
    assert m, url
    return m.group(2)


def url_query(url):
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))


def fetch(url):
    return requests.get(url, timeout=30)


def assert_served(url, data, content_type):
    r = fetch(url)
    assert r.status_code == 200, r.text
    assert r.headers["Content-Type"] == content_type
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.content == data
    return r


def assert_gone(url):
    r = fetch(url)
    assert r.status_code == 404, r.text
    assert r.json() == error_body(404, "File not found")


def wait_check(api, token, field, timeout=RECOGNITION_TIMEOUT):
    """Polls GET /providers/me until field (idCheckStatus / insCheckStatus) leaves pending.
    Under ASan (a full stack per Tesseract allocation, and the whole CI on two cores) recognition
    runs ten times slower: the wait is four times longer there."""
    if "asan" in api.server.binary.split(os.sep):
        timeout *= 4
    return eventually(lambda: me(api, token), timeout, f"{field} checked", interval=0.1,
                      until=lambda body: body[field] not in ("pending", None))


def upload_licence(api, token, front=None, back=None):
    files = {}
    if front is not None:
        files["front"] = ("front.png", front, "image/png")
    if back is not None:
        files["back"] = ("back.png", back, "image/png")
    r = upload(api, "/providers/me/id-documents", token, files)
    assert r.status_code == 200, r.text
    # "pending" by the spec, even when the check ends first (test_files'
    # test_id_documents_answer_says_pending_when_the_check_ends_first forces that case)
    assert r.json()["idCheckStatus"] == "pending", r.json()
    return r.json()


def upload_insurance(api, token, data, name="certificate.png", ctype="image/png"):
    r = upload(api, "/providers/me/insurance-document", token, {"insuranceDoc": (name, data, ctype)})
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"insDocUrl", "insCheckStatus"} and r.json()["insCheckStatus"] == "pending", r.json()
    return r.json()


def licence_lines(expiry, dob="01/15/1985", state="CALIFORNIA"):
    lines = [f"{state} DRIVER LICENSE", "DL D1234567", "LN SMITH", "FN JANE"]
    if dob:
        lines.append(f"DOB {dob}")
    if expiry:
        lines.append(f"EXP {us_date(expiry)}")
    return lines


LICENCE_BACK = ["CLASS C   RSTR NONE", "ISS 01/10/2022", "ORGAN DONOR"]


def certificate_lines(expiry, effective=None):
    effective = effective or expiry - datetime.timedelta(days=365)
    return ["CERTIFICATE OF LIABILITY INSURANCE", "Carrier: State Farm", "Policy Number: GL-4827361",
            f"Effective Date: {us_date(effective)}", f"Expiration Date: {us_date(expiry)}",
            "Coverage Amount: $1,000,000"]


CERT_SIZE = "1700x1000"


# ================================================================ GET /providers/me

def test_get_me_returns_every_field(api):
    p = api.register_provider(name="Pat Pro", serviceZips=["10001", "10002"], services=["lawncare", "handyman"])
    body = me(api, p["token"])
    assert PROFILE_KEYS <= set(body), PROFILE_KEYS - set(body)
    assert body["id"] == p["id"] and ID_RE.match(body["id"])
    assert body["email"] == p["email"]
    assert body["name"] == "Pat Pro"
    assert body["services"] == ["lawncare", "handyman"]
    assert body["serviceZips"] == ["10001", "10002"]
    for key in ("phone", "companyName", "companyUrl", "insuranceInfo", "logoUrl", "idDocFront", "idDocBack",
                "premiumSince", "idCheckStatus", "idCheckName", "idCheckDOB", "idCheckExpiry", "idCheckState",
                "idCheckAt", "insDocUrl", "insCheckStatus", "insCheckCarrier", "insCheckPolicy", "insCheckEffective",
                "insCheckExpiry", "insCheckCoverage", "insCheckAt"):
        assert body[key] is None, (key, body[key])
    assert body["headshots"] == []
    assert body["idCheckFlags"] == [] and body["insCheckFlags"] == []
    assert body["isPremium"] is False
    assert body["availability"] == DEFAULT_AVAILABILITY
    assert ISO_MS_RE.match(body["createdAt"]), body["createdAt"]
    assert not any("password" in k.lower() for k in body)


def test_get_me_is_per_caller(api):
    a = api.register_provider(name="Alpha")
    b = api.register_provider(name="Beta")
    assert me(api, a["token"])["name"] == "Alpha"
    assert me(api, b["token"])["name"] == "Beta"


ME_ROUTES = [
    ("GET", "/providers/me", None),
    ("PATCH", "/providers/me", {"json": {"name": "X"}}),
    ("POST", "/providers/me/logo", {"field": "logo"}),
    ("POST", "/providers/me/headshots", {"field": "headshot"}),
    ("DELETE", "/providers/me/headshots/0", None),
    ("POST", "/providers/me/id-documents", {"field": "front"}),
    ("POST", "/providers/me/insurance-document", {"field": "insuranceDoc"}),
]


def _call(api, method, path, extra, token):
    kw = {}
    if extra and "json" in extra:
        kw["json"] = extra["json"]
    if extra and "field" in extra:
        kw["files"] = {extra["field"]: ("a.png", png_bytes(), "image/png")}
    return api.request(method, path, token=token, **kw)


@pytest.mark.parametrize("method,path,extra", ME_ROUTES, ids=[f"{m} {p}" for m, p, _ in ME_ROUTES])
def test_without_token_is_401(api, method, path, extra):
    r = _call(api, method, path, extra, None)
    assert r.status_code == 401, r.text
    assert r.json() == UNAUTHORIZED
    r = _call(api, method, path, extra, "not-a-jwt")
    assert r.status_code == 401, r.text
    assert r.json() == UNAUTHORIZED


@pytest.mark.parametrize("method,path,extra", ME_ROUTES, ids=[f"{m} {p}" for m, p, _ in ME_ROUTES])
def test_customer_token_is_403(api, method, path, extra):
    u = api.register_user()
    r = _call(api, method, path, extra, u["token"])
    assert r.status_code == 403, r.text
    assert r.json() == FORBIDDEN


def test_customer_upload_refused_before_a_large_body(api):
    """The token is checked from the headers, so a refused upload is answered whatever follows."""
    u = api.register_user()
    r = upload(api, "/providers/me/id-documents", u["token"], {"front": ("a.png", padded_png(3 * MB), "image/png")})
    assert r.status_code == 403 and r.json() == FORBIDDEN


# ================================================================ PATCH /providers/me

def patch(api, token, body):
    return api.patch("/providers/me", token=token, json=body)


def assert_field_error(r, field, message=None):
    assert r.status_code == 400, r.text
    if message is None:
        assert r.json()["error"].startswith(f"{field}: "), r.json()
    else:
        assert r.json()["error"] == f"{field}: {message}", r.json()
    assert r.json() == error_body(400, r.json()["error"], field=field)


@pytest.mark.parametrize("field,value", [
    ("name", "Renamed Pro"),
    ("phone", "+1 (555) 010-0199"),
    ("companyName", "Green Lawns LLC"),
    ("companyUrl", "https://greenlawns.example.com/about"),
    ("serviceZips", ["02134", "10001", "94110"]),
    ("services", ["snowplowing", "home_cleaning"]),
])
def test_patch_updates_each_field(api, field, value):
    p = api.register_provider()
    before = me(api, p["token"])
    r = patch(api, p["token"], {field: value})
    assert r.status_code == 200, r.text
    body = r.json()
    assert PROFILE_KEYS <= set(body)
    assert body[field] == value
    after = me(api, p["token"])
    assert after == body
    for key in PROFILE_KEYS - {field}:
        assert after[key] == before[key], key


def test_patch_several_fields_at_once(api):
    p = api.register_provider()
    r = patch(api, p["token"], {"name": "Multi", "phone": "555-0100", "companyName": "Multi Co",
                                 "companyUrl": "https://multi.example", "serviceZips": ["60601"],
                                 "services": ["handyman"]})
    assert r.status_code == 200, r.text
    got = me(api, p["token"])
    assert (got["name"], got["phone"], got["companyName"], got["companyUrl"], got["serviceZips"], got["services"]) == \
        ("Multi", "555-0100", "Multi Co", "https://multi.example", ["60601"], ["handyman"])


def test_patch_single_values_are_normalised_to_arrays(api):
    p = api.register_provider()
    r = patch(api, p["token"], {"serviceZips": "30301", "services": "handyman"})
    assert r.status_code == 200, r.text
    assert r.json()["serviceZips"] == ["30301"]
    assert r.json()["services"] == ["handyman"]
    r = patch(api, p["token"], {"serviceZips": ["30301", "30302", "30301"], "services": ["lawncare", "lawncare"]})
    assert r.status_code == 200, r.text
    assert r.json()["serviceZips"] == ["30301", "30302"]
    assert r.json()["services"] == ["lawncare"]
    assert me(api, p["token"])["serviceZips"] == ["30301", "30302"]


def test_patch_bounds_at_the_limit_are_accepted(api):
    p = api.register_provider()
    body = {"name": "n" * 100, "phone": "5" * 20, "companyName": "c" * 100,
            "companyUrl": "https://example.com/" + "u" * (300 - len("https://example.com/"))}
    r = patch(api, p["token"], body)
    assert r.status_code == 200, r.text
    got = me(api, p["token"])
    for k, v in body.items():
        assert got[k] == v
    # characters, not bytes
    r = patch(api, p["token"], {"name": "é" * 100})
    assert r.status_code == 200, r.text
    assert me(api, p["token"])["name"] == "é" * 100


@pytest.mark.parametrize("body,field,message", [
    ({"name": ""}, "name", "must not be empty"),
    ({"name": "   "}, "name", "must not be empty"),
    ({"name": "n" * 101}, "name", "must be at most 100 characters"),
    ({"name": 42}, "name", "must be a string"),
    ({"phone": "5" * 21}, "phone", "must be at most 20 characters"),
    ({"companyName": "c" * 101}, "companyName", "must be at most 100 characters"),
    ({"companyUrl": "u" * 301}, "companyUrl", "must be at most 300 characters"),
])
def test_patch_string_bounds(api, body, field, message):
    p = api.register_provider()
    before = me(api, p["token"])
    r = patch(api, p["token"], body)
    assert_field_error(r, field, message)
    assert me(api, p["token"]) == before


@pytest.mark.parametrize("body,error", [
    ({"serviceZips": "1234"}, "serviceZips[0]: must be exactly 5 digits"),
    ({"serviceZips": ["10001", "abcde"]}, "serviceZips[1]: must be exactly 5 digits"),
    ({"serviceZips": ["123456"]}, "serviceZips[0]: must be exactly 5 digits"),
    ({"serviceZips": [10001]}, "serviceZips[0]: must be exactly 5 digits"),
    ({"serviceZips": []}, "serviceZips: must contain at least 1 item"),
    ({"services": "plumbing"}, "services[0]: " + SERVICES_MSG),
    ({"services": ["lawncare", "Lawncare"]}, "services[1]: " + SERVICES_MSG),
    ({"services": []}, "services: must contain at least 1 item"),
])
def test_patch_bad_zips_and_services(api, body, error):
    p = api.register_provider()
    before = me(api, p["token"])
    r = patch(api, p["token"], body)
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, error)
    assert me(api, p["token"]) == before


def test_patch_failure_changes_nothing_even_for_valid_fields(api):
    p = api.register_provider(name="Keep Me")
    r = patch(api, p["token"], {"name": "Changed", "serviceZips": ["bad"]})
    assert r.status_code == 400
    assert me(api, p["token"])["name"] == "Keep Me"


def test_patch_ignores_insurance_info(api):
    p = api.register_provider()
    r = patch(api, p["token"], {"insuranceInfo": "Fake Insurer, policy 123", "name": "Honest Pro"})
    assert r.status_code == 200, r.text
    assert r.json()["insuranceInfo"] is None
    assert r.json()["name"] == "Honest Pro"
    r = patch(api, p["token"], {"insuranceInfo": "only this"})
    assert r.status_code == 200, r.text
    assert me(api, p["token"])["insuranceInfo"] is None


def test_patch_empty_body_changes_nothing(api):
    p = api.register_provider(name="Same Pro")
    patch(api, p["token"], {"phone": "555-0123", "companyName": "Same Co"})
    before = me(api, p["token"])
    r = patch(api, p["token"], {})
    assert r.status_code == 200, r.text
    assert r.json() == before
    r = api.patch("/providers/me", token=p["token"])  # no body at all counts as {}
    assert r.status_code == 200, r.text
    assert me(api, p["token"]) == before


def test_patch_malformed_json(api):
    p = api.register_provider()
    assert_error(send_raw_json(api, "PATCH", "/providers/me", p["token"], "{not json"), 400, "body: malformed JSON")


# ================================================================ GET /providers/:id/profile (issue 24)

PUBLIC_PROFILE_FIELDS = {"id", "name", "companyName", "headshotUrl", "logoUrl", "services", "serviceZips",
                         "averageRating", "totalReviews", "completedJobs", "memberSince", "preferredPro", "insured",
                         "verified", "reviews"}
PUBLIC_REVIEW_FIELDS = {"id", "rating", "comment", "service", "reviewerName", "createdAt"}


def profile(api, token, provider_id):
    r = api.get(f"/providers/{provider_id}/profile", token=token)
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == PUBLIC_PROFILE_FIELDS, body
    assert all(set(v) == PUBLIC_REVIEW_FIELDS for v in body["reviews"]), body["reviews"]
    return body


def completed_job_reviewed(api, user, pro, rating, comment=None):
    """One more job of user done by pro, and reviewed."""
    from flow_helpers import accept, post_job, quote, step
    job = post_job(api, user)
    accept(api, user, quote(api, pro, job["id"], 60)["id"])
    for status in ("ON_THE_WAY", "IN_PROGRESS", "COMPLETED"):
        step(api, pro, job["id"], status)
    api.advance_clock(5)  # reviews a few milliseconds apart: their order is the time they were written
    r = api.post("/reviews", token=user["token"], json={"jobId": job["id"], "rating": rating, "comment": comment})
    assert r.status_code == 201, r.text
    return r.json()


def test_a_providers_public_profile_shows_nothing_private(api, admin_token):
    from flow_helpers import customer, private_zip, provider
    from staff_helpers import make_staff
    zip_code = private_zip()
    pro = provider(api, [zip_code], services=["lawncare", "handyman"], name="Pat Public", phone="212-555-0199")
    ok = requests.codes.ok
    assert api.patch("/providers/me", token=pro["token"],
                     json={"companyName": "Pat's Lawns", "companyUrl": "https://pats.example"}).status_code == ok
    logo = api.post("/providers/me/logo", token=pro["token"], files={"logo": ("l.png", png_bytes(71), "image/png")})
    assert logo.status_code == ok
    casey = customer(api, zip_code, "pm_card_visa", name="Casey  van Tran")
    prince = customer(api, zip_code, "pm_card_visa", name="Prince")
    first = completed_job_reviewed(api, casey, pro, 5, "Spotless")
    second = completed_job_reviewed(api, prince, pro, 4)
    third = completed_job_reviewed(api, casey, pro, 4, "Good again")

    p = profile(api, casey["token"], pro["id"])
    assert (p["id"], p["name"], p["companyName"]) == (pro["id"], "Pat Public", "Pat's Lawns")
    assert p["services"] == ["lawncare", "handyman"] and p["serviceZips"] == [zip_code]
    assert (p["averageRating"], p["totalReviews"], p["completedJobs"]) == (4.33, 3, 3)
    assert p["preferredPro"] is False and p["insured"] is False and p["verified"] is True
    assert p["memberSince"] == me(api, pro["token"])["createdAt"]
    assert requests.get(p["headshotUrl"], timeout=30).status_code == ok
    assert requests.get(p["logoUrl"], timeout=30).status_code == ok
    assert [(v["id"], v["rating"], v["comment"], v["reviewerName"], v["service"]) for v in p["reviews"]] == [
        (third["id"], 4, "Good again", "Casey T.", "lawncare"), (second["id"], 4, None, "Prince", "lawncare"),
        (first["id"], 5, "Spotless", "Casey T.", "lawncare")]
    text = api.get(f"/providers/{pro['id']}/profile", token=casey["token"]).text
    for private in (pro["email"], "212-555-0199", "pats.example", "idDoc", "insDoc", "insCheck", "idCheck",
                    "Casey  van Tran", casey["id"], "email", "phone"):
        assert private not in text, private
    # every signed-in account may read it: customers, providers, staff, administrators
    staff = make_staff(api, "technical_support", admin_token)
    for token in (prince["token"], pro["token"], api.register_provider()["token"], staff["token"], admin_token):
        assert profile(api, token, pro["id"])["totalReviews"] == 3
    # Preferred Pro shows at once
    assert api.post("/providers/me/preferred-pro/apply", token=pro["token"]).status_code == ok
    assert profile(api, casey["token"], pro["id"])["preferredPro"] is True


def test_a_new_providers_profile_and_the_refusals(api):
    from flow_helpers import provider
    pro = provider(api, verified=False)
    p = profile(api, pro["token"], pro["id"])
    assert (p["headshotUrl"], p["logoUrl"], p["companyName"], p["averageRating"]) == (None, None, None, None)
    assert (p["totalReviews"], p["completedJobs"], p["verified"], p["reviews"]) == (0, 0, False, [])
    r = api.get("/providers/cnosuchprovider0000000000/profile", token=pro["token"])
    assert (r.status_code, r.json()["error"]) == (404, "Provider not found")
    user = api.register_user()
    r = api.get(f"/providers/{user['id']}/profile", token=pro["token"])  # a customer's id is no provider
    assert (r.status_code, r.json()["error"]) == (404, "Provider not found")
    r = api.get(f"/providers/{pro['id']}/profile")
    assert (r.status_code, r.json()["error"]) == (401, "Unauthorized")


def test_a_profile_shows_the_newest_20_reviews(api):
    from flow_helpers import customer, private_zip, provider
    zip_code = private_zip()
    pro = provider(api, [zip_code])
    fan = customer(api, zip_code, "pm_card_visa", name="Robin Reviewer")
    written = [completed_job_reviewed(api, fan, pro, 1 + i % 5, f"review {i}") for i in range(21)]
    p = profile(api, fan["token"], pro["id"])
    assert (p["totalReviews"], p["completedJobs"]) == (21, 21)
    assert [v["id"] for v in p["reviews"]] == [w["id"] for w in reversed(written)][:20]
    assert p["averageRating"] == round(sum(1 + i % 5 for i in range(21)) / 21, 2)
    # the reviews page: newest first, the next page in the Link header and reviewsNextCursor
    seen, params = [], {"limit": 8}
    while True:
        r = api.get(f"/providers/{pro['id']}/profile", token=fan["token"], params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert set(body) - {"reviewsNextCursor"} == PUBLIC_PROFILE_FIELDS and body["totalReviews"] == 21
        seen += [v["id"] for v in body["reviews"]]
        link = next_link(r)
        if not link:
            assert "reviewsNextCursor" not in body
            break
        assert f"cursor={body['reviewsNextCursor']}" in link and len(body["reviews"]) == 8
        params = {"limit": 8, "cursor": body["reviewsNextCursor"]}
    assert seen == [w["id"] for w in reversed(written)]
    # a cursor is this provider's reviews' only; limits keep their bounds
    other = provider(api, [zip_code])
    first = api.get(f"/providers/{pro['id']}/profile", token=fan["token"], params={"limit": 1}).json()
    r = api.get(f"/providers/{other['id']}/profile", token=fan["token"],
                params={"cursor": first["reviewsNextCursor"]})
    assert (r.status_code, r.json()) == (400, error_body(400, "cursor: is not valid"))
    for bad in ("0", "101", "x"):
        r = api.get(f"/providers/{pro['id']}/profile", token=fan["token"], params={"limit": bad})
        assert (r.status_code, r.json()) == (400, error_body(400, "limit: must be an integer from 1 to 100"))


# ================================================================ upload rules, on every upload route

class Route:
    def __init__(self, name, path, field, limit_mb, pdf, none_message="No file uploaded"):
        self.name, self.path, self.field, self.limit_mb, self.pdf = name, path, field, limit_mb, pdf
        self.none_message = none_message
        # the field a request without a file names: the route's one file field, else the body
        self.none_field = "body" if path == "/providers/me/id-documents" else field
        self.types_msg = DOC_TYPES_MSG if pdf else IMAGE_TYPES_MSG

    def stored_url(self, response):
        """The URL of the file the route just stored."""
        if self.field == "logo":
            return response["logoUrl"]
        if self.field == "headshot":
            return response["headshots"][-1]
        if self.field == "front":
            return response["idDocFront"]
        if self.field == "back":
            return response["idDocBack"]
        return response["insDocUrl"]


UPLOAD_ROUTES = [
    Route("logo", "/providers/me/logo", "logo", 5, False),
    Route("headshot", "/providers/me/headshots", "headshot", 8, False),
    Route("licence-front", "/providers/me/id-documents", "front", 10, False,
          "No file uploaded: send front and/or back"),
    Route("licence-back", "/providers/me/id-documents", "back", 10, False,
          "No file uploaded: send front and/or back"),
    Route("insurance", "/providers/me/insurance-document", "insuranceDoc", 10, True),
]
route_params = pytest.mark.parametrize("route", UPLOAD_ROUTES, ids=[r.name for r in UPLOAD_ROUTES])


def assert_nothing_stored(body):
    assert (body["logoUrl"], body["headshots"], body["idDocFront"], body["idDocBack"], body["insDocUrl"]) == \
        (None, [], None, None, None), body
    assert body["idCheckStatus"] is None and body["insCheckStatus"] is None


def assert_upload_refused(api, pro, route, files, status, message, code=None, field=None):
    """Uploading files to the route answers status with error_body(status, message, code, field), storing nothing."""
    r = upload(api, route.path, pro["token"], files)
    assert r.status_code == status, r.text
    assert r.json() == error_body(status, message, code, field)
    assert_nothing_stored(me(api, pro["token"]))


@pytest.fixture
def pro(api):
    return api.register_provider()


@route_params
def test_upload_over_the_limit_is_413(api, pro, route):
    data = padded_png(route.limit_mb * MB + 1)
    assert_upload_refused(api, pro, route, {route.field: ("big.png", data, "image/png")},
                          413, f"{route.field}: file larger than {route.limit_mb} MB")


@route_params
def test_upload_at_the_limit_is_accepted(api, pro, route):
    r = upload(api, route.path, pro["token"], {route.field: ("big.png", padded_png(route.limit_mb * MB), "image/png")})
    assert r.status_code == 200, r.text
    assert file_key(route.stored_url(r.json())).endswith(".png")


def test_body_far_over_every_limit_is_413(api, pro):
    """A Content-Length beyond what the route's files allow is refused before it is read."""
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("huge.png", padded_png(7 * MB), "image/png")})
    assert r.status_code == 413
    assert r.json() == error_body(413, "Request body too large")
    assert me(api, pro["token"])["logoUrl"] is None


@route_params
def test_upload_unexpected_field_is_400(api, pro, route):
    assert_upload_refused(api, pro, route, {"photo": ("a.png", png_bytes(), "image/png")},
                          400, "photo: unexpected file field")


@route_params
def test_upload_two_files_in_one_field_is_400(api, pro, route):
    files = [(route.field, ("a.png", png_bytes(seed=1), "image/png")),
             (route.field, ("b.png", png_bytes(seed=2), "image/png"))]
    assert_upload_refused(api, pro, route, files, 400, f"{route.field}: at most 1 file")


@route_params
def test_upload_without_a_file_is_400(api, pro, route):
    # a text field only
    assert_upload_refused(api, pro, route, {"note": (None, "hello")},
                          400, route.none_message, "validation_failed", route.none_field)
    # an empty file input (no file chosen in a browser form)
    r = upload(api, route.path, pro["token"], {route.field: ("", b"", "application/octet-stream")})
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, route.none_message, "validation_failed", route.none_field)


@route_params
def test_upload_json_body_is_400(api, pro, route):
    r = api.post(route.path, token=pro["token"], json={route.field: "data:image/png;base64,AAAA"})
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "body: must be multipart/form-data")
    r = api.post(route.path, token=pro["token"])
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "body: must be multipart/form-data")


@pytest.mark.parametrize("ctype", [None, "text/plain", "image/png", "multipart/form-data"])
def test_upload_raw_body_is_400(api, pro, ctype):
    """The bytes of a PNG as the whole body, not in a form (multipart without a boundary too)."""
    r = api.post("/providers/me/logo", token=pro["token"], data=png_bytes(),
                 headers={"Content-Type": ctype} if ctype else {})
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "body: must be multipart/form-data")
    assert_nothing_stored(me(api, pro["token"]))


@route_params
def test_upload_text_renamed_png_is_400(api, pro, route):
    text = b"this is plain text, not a picture\n" * 20
    assert_upload_refused(api, pro, route, {route.field: ("photo.png", text, "image/png")},
                          400, f"{route.field}: {route.types_msg}")


@route_params
def test_upload_png_declared_as_jpeg_is_stored_as_png(api, pro, route):
    data = png_bytes(seed=11)
    r = upload(api, route.path, pro["token"], {route.field: ("x.jpg", data, "image/jpeg")})
    assert r.status_code == 200, r.text
    url = route.stored_url(r.json())
    assert file_key(url).endswith(".png")
    assert_served(url, data, "image/png")


@route_params
def test_upload_pdf(api, pro, route):
    data = text_pdf(["Nothing to see here, just a PDF document"])
    r = upload(api, route.path, pro["token"], {route.field: ("doc.pdf", data, "application/pdf")})
    if route.pdf:
        assert r.status_code == 200, r.text
        url = route.stored_url(r.json())
        assert file_key(url).endswith(".pdf")
        assert_served(url, data, "application/pdf")
    else:
        assert r.status_code == 400, r.text
        assert r.json() == error_body(400, f"{route.field}: {IMAGE_TYPES_MSG}")
        assert_nothing_stored(me(api, pro["token"]))


@route_params
def test_upload_webp(api, pro, route, tmp_path):
    data = webp_bytes(tmp_path)
    r = upload(api, route.path, pro["token"], {route.field: ("p.webp", data, "image/webp")})
    if route.pdf:  # the insurance certificate takes PNG, JPEG and PDF only
        assert r.status_code == 400, r.text
        assert r.json() == error_body(400, f"insuranceDoc: {DOC_TYPES_MSG}")
    else:
        assert r.status_code == 200, r.text
        url = route.stored_url(r.json())
        assert file_key(url).endswith(".webp")
        assert_served(url, data, "image/webp")


@route_params
def test_upload_jpeg(api, pro, route, tmp_path):
    data = jpeg_bytes(tmp_path)
    r = upload(api, route.path, pro["token"], {route.field: ("p.jpeg", data, "image/jpeg")})
    assert r.status_code == 200, r.text
    url = route.stored_url(r.json())
    assert file_key(url).endswith(".jpg")
    assert_served(url, data, "image/jpeg")


def test_first_problem_is_reported(api, pro):
    """An unexpected field before an oversized file: the first problem wins."""
    files = [("photo", ("a.png", png_bytes(), "image/png")),
             ("logo", ("big.png", padded_png(5 * MB + 1), "image/png"))]
    r = upload(api, "/providers/me/logo", pro["token"], files)
    assert r.status_code == 400 and r.json() == error_body(400, "photo: unexpected file field")
    files = [("logo", ("big.png", padded_png(5 * MB + 1), "image/png")),
             ("photo", ("a.png", png_bytes(), "image/png"))]
    r = upload(api, "/providers/me/logo", pro["token"], files)
    assert r.status_code == 413 and r.json() == error_body(413, "logo: file larger than 5 MB")


# ================================================================ logo

def test_logo_upload_and_replace(api, pro):
    first = png_bytes(seed=21)
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("logo.png", first, "image/png")})
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["logoUrl"]
    url1 = r.json()["logoUrl"]
    assert FILE_URL_RE.match(url1)
    assert_served(url1, first, "image/png")
    assert file_key(me(api, pro["token"])["logoUrl"]) == file_key(url1)

    second = png_bytes(seed=22)
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("logo2.png", second, "image/png")})
    assert r.status_code == 200, r.text
    url2 = r.json()["logoUrl"]
    assert file_key(url2) != file_key(url1)
    assert_served(url2, second, "image/png")
    assert file_key(me(api, pro["token"])["logoUrl"]) == file_key(url2)
    assert_gone(url1)  # the replaced logo is deleted


def test_logo_url_is_signed_for_a_year(api, pro):
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("logo.png", png_bytes(), "image/png")})
    now = server_seconds(api)
    expires = int(url_query(r.json()["logoUrl"])["expires"])
    assert expires % 3600 == 0 and now + 365 * 86400 <= expires <= now + 365 * 86400 + 3600 + 5


def test_failed_upload_keeps_the_current_logo(api, pro):
    data = png_bytes(seed=31)
    url = upload(api, "/providers/me/logo", pro["token"], {"logo": ("l.png", data, "image/png")}).json()["logoUrl"]
    r = upload(api, "/providers/me/logo", pro["token"], {"logo": ("l.txt", b"text, not an image", "text/plain")})
    assert r.status_code == 400
    assert file_key(me(api, pro["token"])["logoUrl"]) == file_key(url)
    assert_served(url, data, "image/png")


# ================================================================ headshots

def add_headshot(api, token, data):
    r = upload(api, "/providers/me/headshots", token, {"headshot": ("h.png", data, "image/png")})
    assert r.status_code == 200, r.text
    return r.json()


def test_headshots_accumulate_in_order(api, pro):
    images = [png_bytes(seed=40 + i) for i in range(3)]
    for i, data in enumerate(images):
        body = add_headshot(api, pro["token"], data)
        assert PROFILE_KEYS <= set(body)
        assert len(body["headshots"]) == i + 1
    urls = me(api, pro["token"])["headshots"]
    assert len(urls) == 3 and len({file_key(u) for u in urls}) == 3
    for url, data in zip(urls, images):
        assert_served(url, data, "image/png")


def test_concurrent_headshot_uploads_all_land(api, pro):
    import concurrent.futures
    images = [png_bytes(seed=45 + i) for i in range(8)]

    def one(data):
        return requests.post(api.url + "/providers/me/headshots", headers={"Authorization": f"Bearer {pro['token']}"},
                             files={"headshot": ("h.png", data, "image/png")}, timeout=60).status_code

    with concurrent.futures.ThreadPoolExecutor(len(images)) as pool:
        assert list(pool.map(one, images)) == [200] * len(images)
    urls = me(api, pro["token"])["headshots"]
    assert len(urls) == len(images)
    served = {fetch(u).content for u in urls}
    assert served == set(images)


def test_delete_headshot_shifts_the_rest(api, pro):
    images = [png_bytes(seed=50 + i) for i in range(3)]
    for data in images:
        add_headshot(api, pro["token"], data)
    urls = me(api, pro["token"])["headshots"]
    r = api.delete("/providers/me/headshots/1", token=pro["token"])
    assert r.status_code == 200, r.text
    assert PROFILE_KEYS <= set(r.json())
    left = r.json()["headshots"]
    assert [file_key(u) for u in left] == [file_key(urls[0]), file_key(urls[2])]
    assert_gone(urls[1])
    assert_served(left[0], images[0], "image/png")
    assert_served(left[1], images[2], "image/png")

    r = api.delete("/providers/me/headshots/0", token=pro["token"])
    assert r.status_code == 200, r.text
    assert [file_key(u) for u in r.json()["headshots"]] == [file_key(urls[2])]
    assert_gone(urls[0])
    r = api.delete("/providers/me/headshots/0", token=pro["token"])
    assert r.status_code == 200, r.text
    assert r.json()["headshots"] == []
    assert me(api, pro["token"])["headshots"] == []
    assert_gone(urls[2])


@pytest.mark.parametrize("index", ["2", "3", "-1", "99999999999999999999"])
def test_delete_headshot_out_of_range_is_400(api, pro, index):
    add_headshot(api, pro["token"], png_bytes(seed=60))
    add_headshot(api, pro["token"], png_bytes(seed=61))
    before = me(api, pro["token"])["headshots"]
    r = api.delete(f"/providers/me/headshots/{index}", token=pro["token"])
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "Headshot index out of range", "validation_failed", "index")
    assert [file_key(u) for u in me(api, pro["token"])["headshots"]] == [file_key(u) for u in before]


def test_delete_headshot_when_there_is_none_is_400(api, pro):
    r = api.delete("/providers/me/headshots/0", token=pro["token"])
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "Headshot index out of range", "validation_failed", "index")


@pytest.mark.parametrize("index", ["abc", "1.5", "1x", "0x1"])
def test_delete_headshot_non_integer_is_400(api, pro, index):
    add_headshot(api, pro["token"], png_bytes(seed=62))
    r = api.delete(f"/providers/me/headshots/{index}", token=pro["token"])
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "index: must be an integer")
    assert len(me(api, pro["token"])["headshots"]) == 1


# ================================================================ licence images

def test_id_documents_front_and_back(api, pro):
    front, back = png_bytes(seed=70), png_bytes(seed=71)
    body = upload_licence(api, pro["token"], front=front, back=back)
    assert PROFILE_KEYS <= set(body)
    assert_served(body["idDocFront"], front, "image/png")
    assert_served(body["idDocBack"], back, "image/png")
    assert file_key(body["idDocFront"]) != file_key(body["idDocBack"])


def undecodable_png(seed):
    """Bytes that libmagic calls PNG (signature and IHDR tag), whose chunks add up (so the
    metadata stripper accepts them), but no decoder reads: recognition gives up on them at
    once (test_files' test_id_documents_answer_says_pending_when_the_check_ends_first)."""
    return b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", bytes([seed % 256]) * 13) + png_chunk(b"IEND", b"")


def test_id_document_urls_are_signed_for_15_minutes_rounded_up_to_5(api, pro):
    body = upload_licence(api, pro["token"], front=png_bytes(seed=72))
    now = server_seconds(api)
    expires = int(url_query(body["idDocFront"])["expires"])
    assert expires % 300 == 0 and now + 15 * 60 - 5 <= expires <= now + 20 * 60 + 5


def test_id_documents_front_only_then_back_only(api, pro):
    front, back, back2 = png_bytes(seed=73), png_bytes(seed=74), png_bytes(seed=75)
    body = upload_licence(api, pro["token"], front=front)
    assert body["idDocBack"] is None
    front_url = body["idDocFront"]
    body = upload_licence(api, pro["token"], back=back)
    assert file_key(body["idDocFront"]) == file_key(front_url)  # kept
    back_url = body["idDocBack"]
    assert_served(back_url, back, "image/png")
    body = upload_licence(api, pro["token"], back=back2)
    assert file_key(body["idDocFront"]) == file_key(front_url)
    assert file_key(body["idDocBack"]) != file_key(back_url)
    assert_gone(back_url)  # the replaced side is deleted
    assert_served(body["idDocFront"], front, "image/png")
    assert_served(body["idDocBack"], back2, "image/png")


def test_id_documents_replace_deletes_the_old_front(api, pro):
    body = upload_licence(api, pro["token"], front=png_bytes(seed=76))
    old = body["idDocFront"]
    body = upload_licence(api, pro["token"], front=png_bytes(seed=77))
    assert file_key(body["idDocFront"]) != file_key(old)
    assert_gone(old)


# ================================================================ insurance certificate

def test_insurance_document_answer_and_replace(api, pro, tmp_path):
    data = jpeg_bytes(tmp_path)
    body = upload_insurance(api, pro["token"], data, "cert.jpg", "image/jpeg")
    url = body["insDocUrl"]
    assert file_key(url).endswith(".jpg")
    assert_served(url, data, "image/jpeg")
    assert me(api, pro["token"])["insDocUrl"] is not None
    now = server_seconds(api)
    expires = int(url_query(url)["expires"])
    assert expires % 300 == 0 and now + 15 * 60 - 5 <= expires <= now + 20 * 60 + 5

    pdf = text_pdf(["Another certificate"])
    body2 = upload_insurance(api, pro["token"], pdf, "cert.pdf", "application/pdf")
    assert file_key(body2["insDocUrl"]).endswith(".pdf")
    assert file_key(me(api, pro["token"])["insDocUrl"]) == file_key(body2["insDocUrl"])
    assert_gone(url)


# ================================================================ licence recognition
# Upload -> recognition -> fields stored, through the real Tesseract: a licence that passes,
# one near expiry, an unreadable image, a re-check and a stale check; the rules themselves
# (every status, label, date format and layout) are tests/unit/domain/test_recognition.c's
# tables, and what OCR makes of blank, tiny and scanned documents tests/unit/ext/test_ocr.c's.

def licence_check(api, token, front, back=None):
    upload_licence(api, token, front=front, back=back)
    return wait_check(api, token, "idCheckStatus")


def id_fields(body):
    return {k: body[k] for k in ("idCheckStatus", "idCheckName", "idCheckDOB", "idCheckExpiry", "idCheckState",
                                 "idCheckFlags")}


def test_licence_passed(api, pro, tmp_path):
    today = server_today(api)
    expiry = today.replace(year=today.year + 4, day=1)
    front = text_image(tmp_path / "front.png", licence_lines(expiry))
    back = text_image(tmp_path / "back.png", LICENCE_BACK)
    body = licence_check(api, pro["token"], front, back)
    assert id_fields(body) == {"idCheckStatus": "passed", "idCheckName": "JANE SMITH", "idCheckDOB": "1985-01-15",
                               "idCheckExpiry": expiry.isoformat(), "idCheckState": "CA", "idCheckFlags": []}
    assert ISO_MS_RE.match(body["idCheckAt"])
    assert FILE_URL_RE.match(body["idDocFront"]) and FILE_URL_RE.match(body["idDocBack"])


def test_licence_near_expiry_is_review(api, pro, tmp_path):
    """10 days left (9 if the service's date turns during the check: near expiry all the same)."""
    expiry = server_today(api) + datetime.timedelta(days=10)
    body = licence_check(api, pro["token"], text_image(tmp_path / "front.png", licence_lines(expiry)))
    assert id_fields(body) == {"idCheckStatus": "review", "idCheckName": "JANE SMITH", "idCheckDOB": "1985-01-15",
                               "idCheckExpiry": expiry.isoformat(), "idCheckState": "CA",
                               "idCheckFlags": ["near_expiry"]}


def test_unreadable_licence(api, pro):
    body = licence_check(api, pro["token"], noise_png())
    assert id_fields(body) == {"idCheckStatus": "failed", "idCheckName": None, "idCheckDOB": None,
                               "idCheckExpiry": None, "idCheckState": None, "idCheckFlags": ["unreadable"]}


def test_new_upload_clears_the_previous_result(api, pro, tmp_path):
    expiry = server_today(api).replace(day=1) + datetime.timedelta(days=2000)
    body = licence_check(api, pro["token"], text_image(tmp_path / "front.png", licence_lines(expiry)))
    assert body["idCheckStatus"] == "passed"
    body = upload_licence(api, pro["token"], back=text_image(tmp_path / "back.png", LICENCE_BACK))
    assert id_fields(body) == {"idCheckStatus": "pending", "idCheckName": None, "idCheckDOB": None,
                               "idCheckExpiry": None, "idCheckState": None, "idCheckFlags": []}
    assert body["idCheckAt"] is None
    # the kept front and the new back are read together again
    body = wait_check(api, pro["token"], "idCheckStatus")
    assert body["idCheckStatus"] == "passed" and body["idCheckExpiry"] == expiry.isoformat()


def test_newest_licence_upload_wins(api, pro, tmp_path):
    """A check of a replaced document never overwrites the newer document's result."""
    receipt = text_image(tmp_path / "receipt.png", ["CORNER DELI", "COFFEE LARGE 2.50", "BAGEL 1.75", "TOTAL 4.25"],
                         size="2400x1600", pointsize=60)
    expiry = server_today(api) + datetime.timedelta(days=1500)
    good = text_image(tmp_path / "front.png", licence_lines(expiry))
    upload_licence(api, pro["token"], front=receipt)
    upload_licence(api, pro["token"], front=good)
    body = wait_check(api, pro["token"], "idCheckStatus")
    assert body["idCheckStatus"] == "passed", id_fields(body)
    assert body["idCheckExpiry"] == expiry.isoformat()
    api.wait_queue_idle()  # a late result of the first check would show up by now
    assert id_fields(me(api, pro["token"])) == id_fields(body)


# ================================================================ insurance recognition

def ins_fields(body):
    return {k: body[k] for k in ("insCheckStatus", "insCheckCarrier", "insCheckPolicy", "insCheckEffective",
                                 "insCheckExpiry", "insCheckCoverage", "insCheckFlags", "insuranceInfo")}


def insurance_check(api, token, data, name="certificate.png", ctype="image/png"):
    upload_insurance(api, token, data, name, ctype)
    return wait_check(api, token, "insCheckStatus")


def expected_ins(status, effective, expiry, flags=()):
    return {"insCheckStatus": status, "insCheckCarrier": "State Farm", "insCheckPolicy": "GL-4827361",
            "insCheckEffective": effective.isoformat(), "insCheckExpiry": expiry.isoformat(),
            "insCheckCoverage": "1000000", "insCheckFlags": list(flags),
            "insuranceInfo": f"State Farm, policy GL-4827361, effective {effective.isoformat()}, "
                             f"expires {expiry.isoformat()}, coverage $1,000,000"}


def test_insurance_certificate_image(api, pro, tmp_path):
    expiry = server_today(api) + datetime.timedelta(days=200)
    effective = expiry - datetime.timedelta(days=365)
    data = text_image(tmp_path / "cert.png", certificate_lines(expiry, effective), size=CERT_SIZE)
    body = insurance_check(api, pro["token"], data)
    assert ins_fields(body) == expected_ins("active", effective, expiry)
    assert ISO_MS_RE.match(body["insCheckAt"])


def test_insurance_text_pdf(api, pro):
    expiry = server_today(api) + datetime.timedelta(days=250)
    effective = expiry - datetime.timedelta(days=365)
    body = insurance_check(api, pro["token"], text_pdf(certificate_lines(expiry, effective)), "cert.pdf",
                           "application/pdf")
    assert file_key(body["insDocUrl"]).endswith(".pdf")
    assert ins_fields(body) == expected_ins("active", effective, expiry)


def test_insurance_reupload_resets_the_check(api, pro, tmp_path):
    expiry = server_today(api) + datetime.timedelta(days=180)
    effective = expiry - datetime.timedelta(days=365)
    body = insurance_check(api, pro["token"], text_pdf(certificate_lines(expiry, effective)), "c.pdf",
                           "application/pdf")
    assert body["insCheckStatus"] == "active"
    upload_insurance(api, pro["token"], png_bytes(seed=90))
    body = me(api, pro["token"])
    if body["insCheckStatus"] == "pending":  # (unless the new check already finished)
        for k in ("insCheckCarrier", "insCheckPolicy", "insCheckEffective", "insCheckExpiry", "insCheckCoverage",
                  "insCheckAt"):
            assert body[k] is None, k
        assert body["insCheckFlags"] == []
    body = wait_check(api, pro["token"], "insCheckStatus")
    # random pixels: nothing found, so no expiry, and insuranceInfo is cleared
    assert ins_fields(body) == {"insCheckStatus": "review", "insCheckCarrier": None, "insCheckPolicy": None,
                                "insCheckEffective": None, "insCheckExpiry": None, "insCheckCoverage": None,
                                "insCheckFlags": ["no_expiry"], "insuranceInfo": None}


# ================================================================ recognition unavailable

def test_recognition_unavailable_is_error(server_factory, tmp_path):
    # Tesseract finds no language data there, so recognition cannot run
    (tmp_path / "no-tessdata").mkdir()
    api = Api(server_factory(TESSDATA_PREFIX=str(tmp_path / "no-tessdata")))
    p = api.register_provider()
    expiry = server_today(api) + datetime.timedelta(days=1000)
    upload_licence(api, p["token"], front=text_image(tmp_path / "front.png", licence_lines(expiry)))
    body = wait_check(api, p["token"], "idCheckStatus")
    assert id_fields(body) == {"idCheckStatus": "error", "idCheckName": None, "idCheckDOB": None,
                               "idCheckExpiry": None, "idCheckState": None, "idCheckFlags": []}
    assert ISO_MS_RE.match(body["idCheckAt"])
    upload_insurance(api, p["token"], text_image(tmp_path / "cert.png", certificate_lines(expiry), size=CERT_SIZE))
    body = wait_check(api, p["token"], "insCheckStatus")
    assert body["insCheckStatus"] == "error" and body["insCheckFlags"] == [] and body["insuranceInfo"] is None
    # a certificate with a text layer needs no OCR
    effective = expiry - datetime.timedelta(days=365)
    upload_insurance(api, p["token"], text_pdf(certificate_lines(expiry, effective)), "c.pdf", "application/pdf")
    body = wait_check(api, p["token"], "insCheckStatus")
    assert ins_fields(body) == expected_ins("active", effective, expiry)


# ================================================================ nothing left behind on disk

def _files_under(root):
    """Files under root, but the lock of each process's temporary directory (core/tmpdir.h)."""
    out = []
    for base, _, names in os.walk(root):
        out += [os.path.relpath(os.path.join(base, n), root) for n in names if n != ".lock"]
    return sorted(out)


def wait_no_files(root, timeout=5):
    """Temporary files go when the request is done, just after its answer: wait a moment."""
    return eventually(lambda: _files_under(root), timeout, f"no file under {root}", until=lambda files: files == [])


def test_refused_uploads_leave_no_file(server_factory):
    disk_server = server_factory()
    api = Api(disk_server)
    p = api.register_provider()
    u = api.register_user()
    tmp = os.path.join(disk_server.data_dir, "tmp")
    uploads = os.path.join(disk_server.data_dir, "uploads")
    attempts = [
        (None, {"logo": ("a.png", png_bytes(), "image/png")}, 401),                       # no token
        (u["token"], {"logo": ("a.png", png_bytes(), "image/png")}, 403),                 # wrong role
        (p["token"], {"logo": ("a.txt", b"plain text " * 50, "image/png")}, 400),         # wrong type
        (p["token"], {"logo": ("big.png", padded_png(5 * MB + 1), "image/png")}, 413),    # too large
        (p["token"], [("logo", ("a.png", png_bytes(), "image/png")),
                      ("logo", ("b.png", png_bytes(), "image/png"))], 400),              # two files
        (p["token"], [("logo", ("a.png", png_bytes(), "image/png")),
                      ("photo", ("b.png", png_bytes(), "image/png"))], 400),             # unexpected field
    ]
    for token, files, status in attempts:
        r = upload(api, "/providers/me/logo", token, files)
        assert r.status_code == status, r.text
        assert wait_no_files(tmp) == [], r.text
    assert _files_under(uploads) == []
    # an accepted upload is moved into uploads/, under its key
    r = upload(api, "/providers/me/logo", p["token"], {"logo": ("a.png", png_bytes(), "image/png")})
    assert r.status_code == 200
    assert _files_under(uploads) == [file_key(r.json()["logoUrl"])]
    assert wait_no_files(tmp) == []
