"""A headless Chromium for the API tests (browser_driver.mjs: Debian's /usr/bin/chromium through
playwright-core), one per test module: `Browser().start()`, then `b.open(url)`, `b.fill(sel, v)`,
`b.submit(sel)`, `b.render(html)`, `b.axe()`; each answers the driver's dict (see the .mjs)."""
import json
import os
import subprocess
import threading

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DRIVER = os.path.join(os.path.dirname(__file__), "browser_driver.mjs")


class Browser:
    def __init__(self):
        self.proc = None
        self.lock = threading.Lock()

    def start(self, timeout=60):
        self.proc = subprocess.Popen(["node", DRIVER], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        first = self._read(timeout)
        assert first.get("ready"), first
        return self

    def _read(self, timeout):
        result = {}

        def read():
            line = self.proc.stdout.readline()
            result["line"] = line

        t = threading.Thread(target=read, daemon=True)
        t.start()
        t.join(timeout)
        line = result.get("line")
        if not line:
            err = self.proc.stderr.read() if self.proc.poll() is not None else "(still running)"
            raise AssertionError(f"the browser driver did not answer within {timeout} s: {err[-3000:]}")
        return json.loads(line)

    def call(self, op, timeout=60, **args):
        with self.lock:
            self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
            self.proc.stdin.flush()
            answer = self._read(timeout)
        assert answer.pop("ok"), answer.get("error")
        return answer

    def open(self, url):
        return self.call("open", url=url)

    def fill(self, selector, value):
        return self.call("fill", selector=selector, value=value)

    def submit(self, selector):
        return self.call("submit", selector=selector)

    def render(self, html):
        return self.call("render", html=html)

    def axe(self):
        return self.call("axe")["violations"]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
