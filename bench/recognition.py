#!/usr/bin/env python3
"""Recognition benchmark (issue 14, item 8; docs/performance.md, "Recognition").

Starts the service on SQLite in a temp dir (its own session, removed on exit), then:
  steady: a licence uploaded every 2 s for a minute (30 providers): each recognition must
          finish within 10 s of its upload;
  burst:  20 licences uploaded at once: all must finish within 60 s;
and during both a closed-loop probe reads GET /users/me every 5 ms: its p99 must stay under
10 ms. The same probe runs 20 s before any upload, as a control for the machine's own noise. The licence is a 2000x1260 photo-like card (textured background, sensor noise), the
kind recognition reads in one pass. Prints a table and writes bench/results/recognition/.
Bounded: every loop has a deadline; exits 0 whether or not the goals are met, 1 on failure.
Knobs: BIN (default build/marketplace), RECOGNITION_WORKERS (default the service's).
"""
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import requests

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
BIN = os.environ.get("BIN", os.path.join(ROOT, "build", "marketplace"))
OUT = os.path.join(ROOT, "bench", "results", "recognition")
STEADY_UPLOADS, STEADY_EVERY_S, STEADY_GOAL_S = 30, 2.0, 10.0
BURST_UPLOADS, BURST_GOAL_S = 20, 60.0
PROBE_GOAL_MS = 10.0
CONTROL_S = 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mp-bench-rec-")
        self.port = free_port()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PORT": str(self.port), "DATA_DIR": self.dir + "/data",
               "APP_ENV": "development", "BCRYPT_COST": "4", "TRUST_PROXY": "1"}  # register() names its address
        if os.environ.get("RECOGNITION_WORKERS"):
            env["RECOGNITION_WORKERS"] = os.environ["RECOGNITION_WORKERS"]
        self.log = open(self.dir + "/service.log", "wb")
        self.proc = subprocess.Popen([BIN, "serve"], env=env, stdout=self.log, stderr=self.log, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 30
        while True:
            try:
                if requests.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError("the service did not start: " + open(self.dir + "/service.log").read()[-2000:])
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def licence_image(path):
    subprocess.run(
        ["convert", "-seed", "7", "-size", "2000x1260", "plasma:grey90-grey70", "-font", "DejaVu-Sans", "-fill", "#202020",
         "-pointsize", "75", "-annotate", "+80+150", "CALIFORNIA", "-annotate", "+80+260", "DRIVER LICENSE",
         "-pointsize", "55", "-annotate", "+80+400", "DL I1234567", "-annotate", "+80+515", "EXP 08/31/2030",
         "-annotate", "+80+630", "LN SAMPLE", "-annotate", "+80+745", "FN ALEXANDER JOSEPH",
         "-annotate", "+80+860", "DOB 08/31/1977", "-attenuate", "0.4", "+noise", "Gaussian", "-quality", "85", path],
        check=True)
    with open(path, "rb") as f:
        return f.read()


def register(url, kind):
    """A new account's token. Each registration comes from an address of its own (X-Forwarded-For,
    trusted with TRUST_PROXY=1): one address may register 20 accounts an hour."""
    email = f"{kind}-{uuid.uuid4().hex[:10]}@example.com"
    n = uuid.uuid4().int
    client = {"X-Forwarded-For": f"10.{n % 250 + 1}.{(n >> 8) % 250 + 1}.{(n >> 16) % 250 + 1}"}
    if kind == "pro":
        body = {"email": email, "password": "password123", "name": "Bench Pro", "serviceZips": ["10001"],
                "services": ["lawncare"]}
        r = requests.post(url + "/auth/provider/register", json=body, headers=client, timeout=30)
    else:
        body = {"email": email, "password": "password123", "name": "Bench", "address": "1 Main St", "zip": "10001"}
        r = requests.post(url + "/auth/register", json=body, headers=client, timeout=30)
    r.raise_for_status()
    return r.json()["token"]


class Probe(threading.Thread):
    """GET /users/me in a closed loop, one request at a time, every 5 ms."""

    def __init__(self, url, token):
        super().__init__(daemon=True)
        self.url, self.headers = url + "/users/me", {"Authorization": f"Bearer {token}"}
        self.samples, self.errors, self.stop_at = [], 0, None
        self.halt = threading.Event()

    def run(self):
        s = requests.Session()
        while not self.halt.is_set():
            t0 = time.perf_counter()
            try:
                ok = s.get(self.url, headers=self.headers, timeout=10).status_code == 200
            except requests.RequestException:
                ok = False
            ms = (time.perf_counter() - t0) * 1000
            if ok:
                self.samples.append(ms)
            else:
                self.errors += 1
            self.halt.wait(0.005)

    def take(self):
        """The samples since the last take()."""
        out, self.samples = self.samples, []
        return out


def p(values, q):
    return sorted(values)[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def upload(url, token, data):
    t0 = time.monotonic()
    r = requests.post(url + "/providers/me/id-documents", headers={"Authorization": f"Bearer {token}"},
                      files={"front": ("front.jpg", data, "image/jpeg")}, timeout=60)
    r.raise_for_status()
    return t0


def wait_done(url, token, deadline):
    """When recognition of the provider's licence finished (monotonic), or None past deadline."""
    s = requests.Session()
    while time.monotonic() < deadline:
        me = s.get(url + "/providers/me", headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
        if me["idCheckStatus"] != "pending":
            return time.monotonic(), me["idCheckStatus"]
        time.sleep(0.1)
    return None, "pending"


def run_phase(svc, tokens, data, spacing_s, goal_s):
    """Uploads one licence per token, spacing_s apart (0: all at once); per upload the seconds
    from its upload to the end of its recognition."""
    results = [None] * len(tokens)

    def one(i):
        start = upload(svc.url, tokens[i], data)
        done, status = wait_done(svc.url, tokens[i], start + goal_s * 3)
        results[i] = (None if done is None else done - start, status)

    threads = []
    t0 = time.monotonic()
    for i in range(len(tokens)):
        if spacing_s:
            delay = t0 + i * spacing_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        th = threading.Thread(target=one, args=(i,))
        th.start()
        threads.append(th)
    for th in threads:
        th.join(timeout=goal_s * 4)
    return results, time.monotonic() - t0


def main():
    if not os.path.exists(BIN):
        sys.exit(f"{BIN} not built (make build/marketplace)")
    svc = Service()
    try:
        work = tempfile.mkdtemp(prefix="mp-bench-rec-img-")
        data = licence_image(os.path.join(work, "licence.jpg"))
        shutil.rmtree(work, ignore_errors=True)
        user = register(svc.url, "user")
        pros = [register(svc.url, "pro") for _ in range(STEADY_UPLOADS + BURST_UPLOADS)]
        probe = Probe(svc.url, user)
        probe.start()
        time.sleep(CONTROL_S)  # the same probe with no recognition running: the machine's own noise
        idle = probe.take()
        steady, steady_wall = run_phase(svc, pros[:STEADY_UPLOADS], data, STEADY_EVERY_S, STEADY_GOAL_S)
        steady_probe = probe.take()
        burst, burst_wall = run_phase(svc, pros[STEADY_UPLOADS:], data, 0, BURST_GOAL_S)
        burst_probe = probe.take()
        probe.halt.set()
        probe.join(timeout=15)
    finally:
        svc.stop()

    def secs(rs):
        return [r[0] for r in rs if r and r[0] is not None]

    s_lat, b_lat = secs(steady), secs(burst)
    rows = [
        ("steady: licences", f"{len(steady)} every {STEADY_EVERY_S:g} s", ""),
        ("steady: upload to result, p50 / max", f"{statistics.median(s_lat):.1f} s / {max(s_lat):.1f} s" if s_lat else "-",
         "PASS" if len(s_lat) == len(steady) and max(s_lat) <= STEADY_GOAL_S else "FAIL"),
        ("burst: licences at once", f"{len(burst)}", ""),
        ("burst: all finished after", f"{max(b_lat):.1f} s" if b_lat else "-",
         "PASS" if len(b_lat) == len(burst) and max(b_lat) <= BURST_GOAL_S else "FAIL"),
        (f"GET /users/me p99, {CONTROL_S} s without recognition", f"{p(idle, 0.99):.1f} ms ({len(idle)} requests)", ""),
        ("GET /users/me p99, during steady", f"{p(steady_probe, 0.99):.1f} ms ({len(steady_probe)} requests)",
         "PASS" if p(steady_probe, 0.99) < PROBE_GOAL_MS else "FAIL"),
        ("GET /users/me p99, during burst", f"{p(burst_probe, 0.99):.1f} ms ({len(burst_probe)} requests)",
         "PASS" if p(burst_probe, 0.99) < PROBE_GOAL_MS else "FAIL"),
        ("GET /users/me errors", f"{probe.errors}", "PASS" if probe.errors == 0 else "FAIL"),
        ("recognition results", json.dumps(sorted({r[1] for r in steady + burst if r})), ""),
    ]
    width = max(len(r[0]) for r in rows)
    text = "\n".join(f"{a:<{width}}  {b:<32} {c}" for a, b, c in rows) + "\n"
    print(text, end="")
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "latest.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(OUT, "latest.json"), "w") as f:
        json.dump({"steady_s": s_lat, "burst_s": b_lat, "steady_wall_s": steady_wall, "burst_wall_s": burst_wall,
                   "probe_ms": {"idle": idle, "steady": steady_probe, "burst": burst_probe}}, f)


if __name__ == "__main__":
    main()
