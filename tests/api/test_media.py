"""Images sized for phones and files that cache (issue 33, item 6), and the message lists that
page under new messages (item 7): WebP variants at 256 and 1024 pixels on the long side made
with libvips at upload and listed as `variants` beside the originals; GET /files/:key with a
strong ETag, 304 to If-None-Match and `Cache-Control: private, max-age` up to the link's expiry;
GET /users/me/threads and /providers/me/threads paged while messages arrive; GET
/jobs/:id/messages?order=desc.

The project's docs/decisions.md ("Uploads and stored files", "Messages"): `variants` maps each
original's link, exactly as the object writes it, to [{width, height, url, contentType}] smallest
first; a variant only where smaller than the original; the member only when some image of the
object has variants; variants are deleted with their originals.
"""
import os
import shutil
import struct
import subprocess
import time
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest

from conftest import Api, Server, _fail_on, _stop_all
from fake_s3 import FakeS3
from flow_helpers import asap_job, fresh_zip, named_customer, named_provider, ok, quote
from helpers import error_body, eventually, pages, server_seconds

WEBP = "image/webp"


# ---------------------------------------------------------------- images


def png_of(width, height, seed=0):
    """A PNG of width x height that compresses well (a gradient with a seed-dependent shift):
    large in pixels, small on the wire."""
    row = bytes((x * 7 + seed * 31) & 0xFF for x in range(width * 3))
    raw = b"".join(b"\0" + row[y % 3:] + row[:y % 3] for y in range(height))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def jpeg_of(tmp_path, width, height):
    path = tmp_path / f"g{width}x{height}.jpg"
    subprocess.run(["convert", "-size", f"{width}x{height}", "gradient:orange-navy", "-strip", "-quality", "80",
                    str(path)], check=True, capture_output=True)
    return path.read_bytes()


def webp_size(data):
    """The pixel size in a WebP's header (VP8, VP8L or VP8X chunk)."""
    assert data[:4] == b"RIFF" and data[8:12] == b"WEBP", data[:16]
    kind = data[12:16]
    if kind == b"VP8 ":
        assert data[23:26] == b"\x9d\x01\x2a"
        return (int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF)
    if kind == b"VP8L":
        assert data[20] == 0x2F
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    assert kind == b"VP8X", kind
    return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1


def local(api, url):
    """GET of a file URL of the service through the test's address (same path and query)."""
    parts = urlsplit(url)
    return api.session.get(api.url + parts.path + "?" + parts.query, timeout=30)


def check_variants(api, variants, url, sizes):
    """variants[url] lists exactly sizes [(w, h), ...], each a WebP of that size served with the
    original's expiry."""
    assert url in variants, (url, variants)
    listed = variants[url]
    assert [(v["width"], v["height"]) for v in listed] == sizes, listed
    expires = parse_qs(urlsplit(url).query)["expires"]
    for v in listed:
        assert set(v) == {"width", "height", "url", "contentType"} and v["contentType"] == WEBP, v
        assert parse_qs(urlsplit(v["url"]).query)["expires"] == expires, (v["url"], url)
        r = local(api, v["url"])
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == WEBP
        assert webp_size(r.content) == (v["width"], v["height"])
    return listed


def message_photo_url(m):
    assert m["content"].startswith("[IMAGE]"), m
    return m["content"][len("[IMAGE]"):]


class Thread:
    """A customer, a verified provider that quoted on the customer's ASAP job."""

    def __init__(self, api):
        self.api = api
        self.zip = fresh_zip()[0]
        self.user = named_customer(api, self.zip)
        self.pro = named_provider(api, [self.zip])
        self.job = asap_job(api, self.user)
        quote(api, self.pro, self.job["id"], 80)

    def photo(self, data, name="p.png", ctype="image/png", token=None):
        r = self.api.post(f"/jobs/{self.job['id']}/messages/photo", token=token or self.pro["token"],
                          files={"photo": (name, data, ctype)}, data={"providerId": self.pro["id"]})
        return ok(r, 201)

    def post(self, content, token=None):
        r = self.api.post(f"/jobs/{self.job['id']}/messages", token=token or self.pro["token"],
                          json={"content": content})
        return ok(r, 201)


# ---------------------------------------------------------------- variants


def test_a_photo_message_lists_its_variants_in_every_answer(api):
    t = Thread(api)
    m = t.photo(png_of(1600, 1200))
    url = message_photo_url(m)
    check_variants(api, m["variants"], url, [(256, 192), (1024, 768)])
    assert set(m["variants"]) == {url}
    # the thread and the threads list write the same link and the same variants
    listed = ok(api.get(f"/jobs/{t.job['id']}/messages", token=t.user["token"], params={"providerId": t.pro["id"]}))
    assert listed["messages"] == [m]
    last = ok(api.get("/users/me/threads", token=t.user["token"]))[0]["lastMessage"]
    assert last == m
    # the original is served as it came
    r = local(api, url)
    assert r.status_code == 200 and r.headers["Content-Type"] == "image/png"


def test_the_media_library_loads_with_the_first_image(server_factory):
    """libvips and the document libraries are in marketplace-media.so, which a process loads
    when it first needs it (docs/decisions.md): a server that has handled no image has not."""
    srv = server_factory()
    api = Api(srv)

    def loaded():
        with open(f"/proc/{srv.proc.pid}/maps") as f:
            return "/marketplace-media.so" in f.read()

    asap_job(api, named_customer(api, fresh_zip()[0]))
    assert not loaded()
    t = Thread(api)  # the provider's documents are the first images
    m = t.photo(png_of(600, 400))
    check_variants(api, m["variants"], message_photo_url(m), [(256, 171)])
    assert loaded()


@pytest.mark.engine_independent
def test_a_media_library_that_cannot_load_leaves_images_without_variants(request, tmp_path):
    """A media library that is there but cannot load (one of its packages removed): the server
    serves and keeps each image as it came, without variants; each process says why once in the
    log (the server, and the one recognition helper, which then finds recognition unavailable)."""
    shutil.copy(request.config.getoption("--binary"), tmp_path / "marketplace")
    (tmp_path / "marketplace-media.so").write_bytes(b"not a shared object")
    srv = Server(str(tmp_path / "marketplace"), None, {"DB_POOL_SIZE": "4", "RECOGNITION_WORKERS": "1"}).start()

    def said():
        return srv.read_log().count('"level":"error","msg":"the media library could not load: ')

    try:
        api = Api(srv)
        t = Thread(api)  # the provider's documents: the first images, and recognition
        eventually(lambda: "recognition unavailable" in srv.read_log(), 30, "the documents' recognition tried")
        assert said() == 2
        photo = png_of(600, 400)
        for _ in range(2):
            m = t.photo(photo)
            assert "variants" not in m, m
            r = local(api, message_photo_url(m))
            assert r.status_code == 200 and r.content == photo
        assert said() == 2
    finally:
        _fail_on(_stop_all([srv]))


def test_variants_are_never_larger_than_the_original(api, tmp_path):
    t = Thread(api)
    # at most 256 on the long side: no variant, no member
    for w, h in ((200, 120), (256, 256), (16, 12)):
        m = t.photo(png_of(w, h))
        assert "variants" not in m, m
    # between 256 and 1024: the small one only; a portrait's long side is its height
    m = t.photo(png_of(600, 1000))
    check_variants(api, m["variants"], message_photo_url(m), [(154, 256)])
    m = t.photo(png_of(1024, 300))
    check_variants(api, m["variants"], message_photo_url(m), [(256, 75)])
    # JPEG and WebP originals too
    m = t.photo(jpeg_of(tmp_path, 2000, 500), "g.jpg", "image/jpeg")
    check_variants(api, m["variants"], message_photo_url(m), [(256, 64), (1024, 256)])
    webp = tmp_path / "w.webp"
    subprocess.run(["convert", "-size", "1300x1300", "gradient:green-white", str(webp)], check=True)
    m = t.photo(webp.read_bytes(), "w.webp", WEBP)
    check_variants(api, m["variants"], message_photo_url(m), [(256, 256), (1024, 1024)])
    # a text message has no variants
    assert "variants" not in t.post("hello")


def test_job_photos_have_variants_in_the_job(api):
    t = Thread(api)
    r = api.post(f"/jobs/{t.job['id']}/images", token=t.user["token"],
                 files=[("images", ("a.png", png_of(1200, 900, 1), "image/png")),
                        ("images", ("b.png", png_of(100, 80, 2), "image/png"))])
    body = ok(r)
    big, small = body["images"]
    check_variants(api, body["variants"], big, [(256, 192), (1024, 768)])
    assert set(body["variants"]) == {big}  # the small one is shown as it is
    job = ok(api.get(f"/jobs/{t.job['id']}", token=t.user["token"]))
    assert job["images"] == [big, small]
    assert job["variants"] == body["variants"]
    # a job without photos with variants has no member
    other = asap_job(api, t.user)
    assert "variants" not in ok(api.get(f"/jobs/{other['id']}", token=t.user["token"]))


def test_provider_images_have_variants(api):
    pro = named_provider(api, [fresh_zip()[0]])
    body = ok(api.post("/providers/me/headshots", token=pro["token"],
                       files={"headshot": ("h.png", png_of(900, 1200, 3), "image/png")}))
    shot = body["headshots"][-1]
    check_variants(api, body["variants"], shot, [(192, 256), (768, 1024)])
    logo = ok(api.post("/providers/me/logo", token=pro["token"],
                       files={"logo": ("l.png", png_of(2048, 1024, 4), "image/png")}))
    check_variants(api, logo["variants"], logo["logoUrl"], [(256, 128), (1024, 512)])
    me = ok(api.get("/providers/me", token=pro["token"]))
    assert me["headshots"][-1] == shot  # the verified provider's small headshot comes first
    assert set(me["variants"]) == {me["logoUrl"], shot}
    check_variants(api, me["variants"], shot, [(192, 256), (768, 1024)])
    public = ok(api.get(f"/providers/{pro['id']}/profile", token=named_customer(api)["token"]))
    check_variants(api, public["variants"], public["logoUrl"], [(256, 128), (1024, 512)])
    assert set(public["variants"]) == {public["logoUrl"]}  # the first headshot is small
    # removing the headshot removes its variants
    gone = me["variants"][shot]
    body = ok(api.delete(f"/providers/me/headshots/{len(me['headshots']) - 1}", token=pro["token"]))
    assert body["variants"].keys() == {body["logoUrl"]}
    for url in [shot] + [v["url"] for v in gone]:
        r = local(api, url)
        assert (r.status_code, r.json()) == (404, error_body(404, "File not found"))


def test_address_photos_and_job_steps_have_variants(api):
    user = api.register_user()
    aid = ok(api.post("/users/me/addresses", token=user["token"], json={"address": "1 First St", "zip": "60601"}),
             201)[0]["id"]
    a = ok(api.post(f"/users/me/addresses/{aid}/photos", token=user["token"],
                    files=[("streetViewPhoto", ("s.png", png_of(1280, 720, 11), "image/png")),
                           ("serviceAreaPhotos", ("a.png", png_of(640, 480, 12), "image/png")),
                           ("serviceAreaPhotos", ("b.png", png_of(64, 48, 13), "image/png"))]))
    check_variants(api, a["variants"], a["streetViewPhoto"], [(256, 144), (1024, 576)])
    check_variants(api, a["variants"], a["serviceAreaPhotos"][0], [(256, 192)])
    assert len(a["variants"]) == 2
    listed = ok(api.get("/users/me/addresses", token=user["token"]))
    assert listed[0]["variants"] == a["variants"]
    gone = [v["url"] for vs in a["variants"].values() for v in vs]
    cleared = ok(api.delete(f"/users/me/addresses/{aid}/photos", token=user["token"]))
    assert "variants" not in cleared
    assert all(local(api, u).status_code == 404 for u in gone)
    # a job's before and after photos
    from flow_helpers import accept, step
    t = Thread(api)
    quotes = ok(api.get(f"/quotes/job/{t.job['id']}", token=t.user["token"]))
    accept(api, t.user, quotes[0]["id"])
    step(api, t.pro, t.job["id"], "ON_THE_WAY")
    job = ok(api.post(f"/jobs/{t.job['id']}/start", token=t.pro["token"],
                      files=[("images", ("b.png", png_of(2000, 1000, 14), "image/png"))]))
    check_variants(api, job["variants"], job["beforeImages"][0], [(256, 128), (1024, 512)])
    job = ok(api.post(f"/jobs/{t.job['id']}/complete", token=t.pro["token"],
                      files=[("images", ("a.png", png_of(300, 600, 15), "image/png"))]))
    assert set(job["variants"]) == {job["beforeImages"][0], job["afterImages"][0]}
    check_variants(api, job["variants"], job["afterImages"][0], [(128, 256)])
    assert ok(api.get(f"/jobs/{t.job['id']}", token=t.user["token"]))["variants"] == job["variants"]


def test_variants_go_with_an_erased_account(api):
    t = Thread(api)
    m = t.photo(png_of(1400, 700, 5), token=t.user["token"])
    urls = [message_photo_url(m)] + [v["url"] for v in m["variants"][message_photo_url(m)]]
    assert all(local(api, u).status_code == 200 for u in urls)
    r = api.delete("/users/me", token=t.user["token"], json={"password": "password123"})
    assert r.status_code == 204, r.text
    for url in urls:
        assert local(api, url).status_code == 404


# ---------------------------------------------------------------- validators and caching


def test_files_have_a_strong_stable_etag_and_answer_304(api):
    t = Thread(api)
    m = t.photo(png_of(700, 500, 6))
    url = message_photo_url(m)
    variant = m["variants"][url][0]["url"]
    for link in (url, variant):
        first, again = local(api, link), local(api, link)
        etag = first.headers["ETag"]
        assert etag.startswith('"') and etag.endswith('"') and not etag.startswith("W/"), etag
        assert again.headers["ETag"] == etag
        for header in (etag, "*", f'"nope", W/{etag}', f'"a",{etag}'):
            r = api.session.get(api.url + urlsplit(link).path + "?" + urlsplit(link).query,
                                headers={"If-None-Match": header}, timeout=30)
            assert r.status_code == 304, (header, r.status_code)
            assert r.content == b""
            assert r.headers["ETag"] == etag
            assert r.headers["Cache-Control"] == first.headers["Cache-Control"] or \
                r.headers["Cache-Control"].startswith("private, max-age=")
        for header in ('"other"', 'W/"other", "more"', ""):
            r = api.session.get(api.url + urlsplit(link).path + "?" + urlsplit(link).query,
                                headers={"If-None-Match": header}, timeout=30)
            assert r.status_code == 200 and r.content == first.content, header
    # the two files have different tags
    assert local(api, url).headers["ETag"] != local(api, variant).headers["ETag"]


def max_age(r):
    cc = r.headers["Cache-Control"]
    assert cc.startswith("private, max-age="), cc
    return int(cc.split("=", 1)[1])


def test_cache_lifetime_is_the_links_and_never_longer(api):
    t = Thread(api)
    m = t.photo(png_of(400, 300, 7))
    url = message_photo_url(m)
    for link in (url, m["variants"][url][0]["url"]):
        expires = int(parse_qs(urlsplit(link).query)["expires"][0])
        before = server_seconds(api)  # the service's clock: another test may have moved it
        r = local(api, link)
        age = max_age(r)
        assert expires - before - 2 <= age <= expires - before + 1, (age, expires - before)
        assert age > 364 * 24 * 3600  # a photo's link lives a year
    # a licence document's link lives 15 minutes (rounded up to 5): so does its cache
    pro = named_provider(api, [fresh_zip()[0]])
    body = ok(api.post("/providers/me/id-documents", token=pro["token"],
                       files={"front": ("f.png", png_of(800, 500, 8), "image/png")}))
    front = body["idDocFront"]
    check_variants(api, body["variants"], front, [(256, 160)])
    for link in (front, body["variants"][front][0]["url"]):
        age = max_age(local(api, link))
        assert 15 * 60 - 2 <= age <= 20 * 60, age


def test_bad_links_are_not_cached_and_not_304(api):
    t = Thread(api)
    m = t.photo(png_of(300, 300, 9))
    variant = m["variants"][message_photo_url(m)][0]["url"]
    parts = urlsplit(variant)
    r = api.session.get(api.url + parts.path + "?" + parts.query.replace("sig=", "sig=0"),
                        headers={"If-None-Match": "*"}, timeout=30)
    assert (r.status_code, r.json()) == (403, error_body(403, "Invalid or expired file link"))
    assert r.headers["Cache-Control"] == "no-store" and "ETag" not in r.headers


# ---------------------------------------------------------------- S3


@pytest.fixture(scope="module")
def s3(make_server):
    keys = ("AKIAMARKETPLACETEST1", "test/secret+key/0123456789", "us-east-1", "mp-media")
    fake = FakeS3(*keys).start()
    srv = make_server(S3_ENDPOINT=fake.url, S3_BUCKET=keys[3], S3_REGION=keys[2], S3_ACCESS_KEY_ID=keys[0],
                      S3_SECRET_ACCESS_KEY=keys[1])
    yield fake, Api(srv)
    fake.stop()


def test_s3_variants_are_stored_served_and_deleted_with_their_original(s3):
    fake, api = s3
    pro = api.register_provider()
    body = ok(api.post("/providers/me/logo", token=pro["token"],
                       files={"logo": ("l.png", png_of(1500, 1000, 10), "image/png")}))
    variants = check_variants(api, body["variants"], body["logoUrl"], [(256, 171), (1024, 683)])
    keys = [urlsplit(u).path.rsplit("/", 1)[1] for u in [body["logoUrl"]] + [v["url"] for v in variants]]
    with fake.lock:
        assert all(k in fake.objects for k in keys)
        assert [fake.objects[k][1] for k in keys[1:]] == [WEBP, WEBP]
    r = local(api, variants[0]["url"])
    assert local(api, variants[0]["url"]).headers["ETag"] == r.headers["ETag"]
    # a new logo replaces the old one: its variants go too
    ok(api.post("/providers/me/logo", token=pro["token"], files={"logo": ("l.png", png_of(20, 20), "image/png")}))
    with fake.lock:
        assert not any(k in fake.objects for k in keys)


# ---------------------------------------------------------------- threads paged while messages arrive


def quoted_jobs(api, n):
    """A customer, a provider of the customer's ZIP, and n of the customer's jobs the provider
    quoted (so each may hold their thread), oldest first."""
    zip_code = fresh_zip()[0]
    user = named_customer(api, zip_code)
    pro = named_provider(api, [zip_code])
    jobs = []
    for i in range(n):
        job = asap_job(api, user)
        quote(api, pro, job["id"], 50 + i)
        jobs.append(job["id"])
    return user, pro, jobs


def test_threads_neither_skip_nor_repeat_when_messages_arrive_between_pages(api):
    user, pro, jobs = quoted_jobs(api, 7)
    for i, j in enumerate(jobs):
        ok(api.post(f"/jobs/{j}/messages", token=pro["token"], json={"content": f"m{i}"}), 201)
    newest_first = list(reversed(jobs))

    for role, account in (("user", user), ("provider", pro)):
        path = "/users/me/threads" if role == "user" else "/providers/me/threads"
        expected = [t["jobId"] for t in ok(api.get(path, token=account["token"]))]
        assert sorted(expected) == sorted(jobs)
        posted = []

        def between(page):
            # after each page: the oldest thread not listed yet and the newest listed one get a message
            later = expected[2 * (page + 1):]
            for j in ([later[-1]] if later else []) + [expected[0]]:
                ok(api.post(f"/jobs/{j}/messages", token=pro["token"],
                            json={"content": f"late {role} {page} {len(posted)}"}), 201)
                posted.append(j)

        got = pages(api, path, account["token"], limit=2, between=between)
        listed = [t["jobId"] for p in got for t in p]
        assert listed == expected  # every thread once, in the first page's order
        # each shows its newest message
        for p in got:
            for t in p:
                assert t["updatedAt"] == t["lastMessage"]["createdAt"]
        assert len(posted) >= 4
        # a fresh list puts the threads with new messages first
        fresh = [t["jobId"] for t in ok(api.get(path, token=account["token"]))]
        assert fresh[0] == posted[-1]
        assert fresh[1] == posted[-2]


def test_a_thread_begun_after_the_first_page_waits_for_the_next_list(api):
    user, pro, jobs = quoted_jobs(api, 4)
    for j in jobs[:3]:
        ok(api.post(f"/jobs/{j}/messages", token=user["token"], json={"content": "hi", "providerId": pro["id"]}), 201)
    r = api.get("/users/me/threads", token=user["token"], params={"limit": 1})
    first = [t["jobId"] for t in ok(r)]
    ok(api.post(f"/jobs/{jobs[3]}/messages", token=user["token"], json={"content": "new", "providerId": pro["id"]}),
       201)
    rest = []
    url = r.links.get("next", {}).get("url")
    while url:
        r = api.get(urlsplit(url).path + "?" + urlsplit(url).query, token=user["token"])
        rest += [t["jobId"] for t in ok(r)]
        url = r.links.get("next", {}).get("url")
    assert first + rest == list(reversed(jobs[:3]))
    assert [t["jobId"] for t in ok(api.get("/users/me/threads", token=user["token"]))][0] == jobs[3]


def test_a_threads_cursor_is_checked_with_its_snapshot(api):
    t = Thread(api)
    t.post("one")
    other = asap_job(api, t.user)
    quote(api, t.pro, other["id"], 90)
    ok(api.post(f"/jobs/{other['id']}/messages", token=t.pro["token"], json={"content": "two"}), 201)
    r = api.get("/providers/me/threads", token=t.pro["token"], params={"limit": 1})
    cursor = parse_qs(urlsplit(r.links["next"]["url"]).query)["cursor"][0]
    body, mac = cursor.rsplit(".", 1)
    import base64
    import json
    values = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert len(values) == 4 and isinstance(values[3], int)  # the key, then the snapshot
    forged = base64.urlsafe_b64encode(json.dumps(values[:3] + [values[3] + 10 ** 9]).encode()).decode().rstrip("=")
    for bad in (forged + "." + mac, body + "." + "0" * len(mac)):
        r = api.get("/providers/me/threads", token=t.pro["token"], params={"cursor": bad})
        assert (r.status_code, r.json()) == (400, error_body(400, "cursor: is not valid", "validation_failed",
                                                             "cursor"))


# ---------------------------------------------------------------- messages newest first


def test_messages_page_newest_first_with_order_desc(api):
    t = Thread(api)
    sent = []
    for i in range(7):  # both sides, alternately
        if i % 2:
            sent.append(t.post(f"n{i}"))
        else:
            sent.append(ok(api.post(f"/jobs/{t.job['id']}/messages", token=t.user["token"],
                                    json={"content": f"n{i}", "providerId": t.pro["id"]}), 201))
    path = f"/jobs/{t.job['id']}/messages"
    whole = ok(api.get(path, token=t.pro["token"], params={"order": "desc"}))["messages"]
    assert whole == list(reversed(sent))
    assert ok(api.get(path, token=t.pro["token"], params={"order": "asc"}))["messages"] == sent
    # pages of 3 newest first, a message arriving between pages neither repeats nor skips one
    late = []

    def between(n):
        late.append(t.post(f"late{n}"))

    got = pages(api, path, t.pro["token"], params={"order": "desc"}, wrap="messages", limit=3, between=between)
    assert [m["id"] for p in got for m in p] == [m["id"] for m in reversed(sent)]
    assert late  # newer than the first page: on the next first page
    first = ok(api.get(path, token=t.pro["token"], params={"order": "desc", "limit": 2}))
    assert [m["id"] for m in first["messages"]] == [late[-1]["id"], late[-2]["id"]]
    # the customer's side, by providerId, newest first too
    r = ok(api.get(path, token=t.user["token"], params={"order": "desc", "providerId": t.pro["id"], "limit": 1}))
    assert r["messages"][0]["id"] == late[-1]["id"] and "nextCursor" in r
    # a cursor belongs to its order
    r = api.get(path, token=t.pro["token"], params={"order": "asc", "cursor": first["nextCursor"]})
    assert (r.status_code, r.json()) == (400, error_body(400, "cursor: is not valid", "validation_failed", "cursor"))
    r = api.get(path, token=t.pro["token"], params={"order": "desc", "cursor": first["nextCursor"]})
    newest_first = list(reversed(sent + late))
    assert [m["id"] for m in ok(r)["messages"]] == [m["id"] for m in newest_first[2:]]


@pytest.mark.parametrize("order", ["DESC", "newest", "", "1"])
def test_a_bad_order_is_400_naming_the_field(api, order):
    t = Thread(api)
    r = api.get(f"/jobs/{t.job['id']}/messages", token=t.pro["token"], params={"order": order})
    assert r.status_code == 400, r.text
    assert r.json() == error_body(400, "order: must be one of: asc, desc", "validation_failed", "order")
