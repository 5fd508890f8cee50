#!/usr/bin/env python3
"""Seeds, through the service's own HTTP API, what bench/run.sh's step 3 reads (issue 36 item 2),
then checks that every read answers 200 with a full page.

  seed_reads.py BASE_URL OUT_FILE

Through the API rather than into the tables (as bench/seed_jobs.py does for a million jobs):
the data is small, and the service then writes every row a read touches the way it does in
production (the quotes' and messages' notifications, the thread rows, sequence numbers).

One customer (ZIP 10001) posts one lawncare job; PROVIDERS verified providers (a headshot and
both ID documents uploaded, as a provider verifies itself) quote on it, so it is QUOTED with
PROVIDERS pending quotes. The customer and the first provider hold a thread of THREAD messages
in turn, customer first; the other providers then write to the customer in threads of their own
until the customer holds more than a default page of notifications (each quote and each
provider's message is one). The reads, as the customer (the job's owner):

  job_detail     GET /jobs/:id
  job_quotes     GET /quotes/job/:jobId                      (every quote: PROVIDERS)
  notifications  GET /users/me/notifications                 (no query: the default, the last 50)
  messages_page  GET /jobs/:id/messages?providerId=P&limit=50 (the portal's page size; a job not
                 yet assigned has no default thread, so a customer names the provider's)

Each is checked to answer 200 with the page full (and the thread's page with a next cursor)
before anything is measured. OUT_FILE gets the customer's token on its first line, then one
"<scenario> <path>" line per read.
"""
import json
import sys
import time
import urllib.error
import urllib.request
import uuid

PROVIDERS = 5
THREAD = 60
PAGE = 50  # the default page of notifications; the page of messages the portal asks for
NOTIFICATIONS = PAGE + 5  # a full default page, and older ones past it
PASSWORD = "bench-password-12"
ZIP = "10001"
EXAMPLES = __file__.rsplit("/", 2)[0] + "/examples"


class Api:
    def __init__(self, base):
        self.base = base

    def call(self, method, path, token=None, body=None, files=None, expect=200):
        headers = {}
        data = None
        if token:
            headers["Authorization"] = "Bearer " + token
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if files is not None:
            boundary = "bench" + uuid.uuid4().hex
            parts = []
            for field, (name, content, ctype) in files.items():
                parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{field}"; filename="{name}"\r\n'
                             f"Content-Type: {ctype}\r\n\r\n".encode() + content + b"\r\n")
            data = b"".join(parts) + f"--{boundary}--\r\n".encode()
            headers["Content-Type"] = f"multipart/form-data; boundary={boundary}"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        if status != expect:
            sys.exit(f"seed_reads: {method} {path} answered {status}, not {expect}: {text[:300]!r}")
        return json.loads(text) if text else None


def example(name):
    with open(f"{EXAMPLES}/{name}", "rb") as f:
        return f.read()


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    api, out = Api(sys.argv[1]), sys.argv[2]
    tag = uuid.uuid4().hex[:8]
    customer = api.call("POST", "/auth/register", body={
        "email": f"reads-{tag}@example.com", "password": PASSWORD, "name": "Reads Customer",
        "address": "1 Main St", "zip": ZIP}, expect=201)["token"]
    preferred = time.strftime("%Y-%m-%dT09:00:00.000Z", time.gmtime(time.time() + 30 * 86400))
    job = api.call("POST", "/jobs", customer, {
        "service": "lawncare", "preferredAt": preferred,
        "description": "Mow the front and back lawn, edge the driveway and bag the clippings."}, expect=201)["id"]

    headshot, front, back = example("headshot.png"), example("licence-front.png"), example("licence-back.png")
    pros = []
    for i in range(PROVIDERS):
        r = api.call("POST", "/auth/provider/register", body={
            "email": f"reads-pro-{i}-{tag}@example.com", "password": PASSWORD, "name": f"Reads Pro {i}",
            "serviceZips": [ZIP], "services": ["lawncare"]}, expect=201)
        token = r["token"]
        api.call("POST", "/providers/me/headshots", token, files={"headshot": ("head.png", headshot, "image/png")})
        api.call("POST", "/providers/me/id-documents", token, files={
            "front": ("front.png", front, "image/png"), "back": ("back.png", back, "image/png")})
        api.call("POST", "/quotes", token, {"jobId": job, "amount": 120 + 5 * i,
                                            "note": "Can come on the preferred day, clippings taken away."},
                 expect=201)
        pros.append((r["provider"]["id"], token))

    first_id, first_token = pros[0]
    for k in range(THREAD):
        if k % 2 == 0:
            api.call("POST", f"/jobs/{job}/messages", customer,
                     {"providerId": first_id, "content": f"Customer message {k}: is the side gate wide enough?"},
                     expect=201)
        else:
            api.call("POST", f"/jobs/{job}/messages", first_token,
                     {"content": f"Provider message {k}: yes, the mower fits, I will bring the edger too."},
                     expect=201)

    def notifications():
        return api.call("GET", f"/users/me/notifications?limit={NOTIFICATIONS}", customer)

    held, k = len(notifications()), 0
    while held < NOTIFICATIONS:  # the other providers' threads, in turn
        if k >= 4 * NOTIFICATIONS:
            sys.exit(f"seed_reads: the customer holds {held} notifications after {k} more messages")
        _, token = pros[1 + k % (PROVIDERS - 1)]
        api.call("POST", f"/jobs/{job}/messages", token,
                 {"content": f"Provider note {k}: happy to answer any question about the quote."}, expect=201)
        held, k = len(notifications()), k + 1

    reads = [("job_detail", f"/jobs/{job}"),
             ("job_quotes", f"/quotes/job/{job}"),
             ("notifications", "/users/me/notifications"),
             ("messages_page", f"/jobs/{job}/messages?providerId={first_id}&limit={PAGE}")]
    got = {s: api.call("GET", p, customer) for s, p in reads}  # every one 200, else it exits
    checks = [("job_detail", got["job_detail"].get("id") == job and got["job_detail"].get("status") == "QUOTED"),
              ("job_quotes", isinstance(got["job_quotes"], list) and len(got["job_quotes"]) == PROVIDERS),
              ("notifications", isinstance(got["notifications"], list) and len(got["notifications"]) == PAGE),
              ("messages_page", len(got["messages_page"].get("messages", [])) == PAGE
               and bool(got["messages_page"].get("nextCursor")))]
    bad = [s for s, ok in checks if not ok]
    if bad:
        sys.exit(f"seed_reads: not the page expected: {', '.join(bad)}: {json.dumps(got)[:600]}")
    with open(out, "w") as f:
        f.write(customer + "\n")
        f.writelines(f"{s} {p}\n" for s, p in reads)


if __name__ == "__main__":
    main()
