#!/usr/bin/env python3
"""Runs the commands of docs/quickstart.md and compares their output with what the page shows.

The page's conventions, which this script relies on:
- every ```sh block is run, in page order, in one bash session (so variables set in one block
  are seen by the next), started in the repository's root with PORT and DATA_DIR naming the
  server under test's port and data directory; the page's first block reads them, and moves
  to a temporary directory (mktemp -d, under a TMPDIR of this script's own that it removes)
  where the answers the commands keep are written: nothing may appear in the repository;
- the fenced block that directly follows a ```sh block (only blank lines between) is its
  expected output: ```json (one or more JSON values, compared as values) or ```text (compared
  line by line); a ```sh block without one must print nothing;
- a block whose info string names a file (```html file=live.html, ```ts file=app.ts) is written
  to that file in the working directory, at its place in the page, for the sh blocks after it
  to run (the browser and React Native sections: scripts/run_in.mjs runs them in headless
  Chromium and in a React Native-like Node);
- other blocks (```console, ```bash, ...) are for the reader only and never run.
The commands name the server as `localhost:$PORT`, and the browser page's origin as
`localhost:$APP_PORT` (which the server's CORS_ORIGINS lists). Before comparing, values that differ on
every run are masked on both sides: ids, times, tokens, link signatures, the port in links,
page cursors and the simulated processor's ids.

Usage: scripts/quickstart.py BASE_URL DATA_DIR [--update]
  --update rewrites the page's output blocks with what the commands printed (review the diff).
The API tests run check() through tests/api/test_quickstart.py on both engines."""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
PAGE = os.path.join(ROOT, "docs", "quickstart.md")
FENCE = re.compile(r"^```([a-z]*)(?:\s+file=(\S+))?\s*$")
SEPARATOR = "@@quickstart-block@@"

MASKS = [
    (re.compile(r"eyJ[\w-]+\.[\w-]+\.[\w-]+"), "<token>"),
    (re.compile(r"expires=\d+&sig=[0-9a-f]{64}"), "expires=<expires>&sig=<sig>"),
    (re.compile(r'("refreshToken":\s*")[0-9a-f]{64}"'), r'\1<refresh token>"'),
    (re.compile(r"http://localhost:\d+/"), "http://localhost:<port>/"),
    (re.compile(r"\b(pi|pm|cus|seti|sub)_sim_[0-9a-z]+(_secret_[0-9a-z]+)?"), r"\1_sim_<id>"),
    (re.compile(r"[\w-]{4,}\.[0-9a-f]{32}\b"), "<cursor>"),
    (re.compile(r"\bc[0-9a-z]{24}\b"), "<id>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"), "<time>"),
    (re.compile(r"\b\d{13}-[^\s/]+\.eml\b"), "<mail>.eml"),
]


def mask(text):
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


class Block:
    def __init__(self, lang, lines, start, file=None):
        self.lang, self.lines, self.start, self.file = lang, lines, start, file
        self.expected = None  # the output block that follows a sh block

    @property
    def text(self):
        if self.file:  # written where the commands run
            return f"cat > {self.file} <<'QUICKSTART_FILE_END'\n" + "".join(self.lines) + "QUICKSTART_FILE_END\n"
        return "".join(self.lines)


def parse(page_text):
    """The page's fenced blocks; each sh block gets the output block that follows it."""
    blocks, lines, i = [], page_text.splitlines(keepends=True), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        blocks.append(Block(m.group(1), lines[i + 1:j], i, m.group(2)))
        blank_after = j + 1
        while blank_after < len(lines) and not lines[blank_after].strip():
            blank_after += 1
        blocks[-1].next_line = blank_after
        i = j + 1
    commands = []
    for k, b in enumerate(blocks):
        if b.file:
            commands.append(b)
            continue
        if b.lang != "sh":
            continue
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        if nxt and nxt.lang in ("json", "text") and nxt.start == b.next_line:
            b.expected = nxt
        commands.append(b)
    return commands


def run(commands, base_url, data_dir, timeout=300, env=None):
    """Runs every command block in one bash session; returns each block's output."""
    port = base_url.rsplit(":", 1)[1].rstrip("/")
    before = set(os.listdir(ROOT))
    with tempfile.TemporaryDirectory(prefix="quickstart-") as tmp:
        env = dict(os.environ, PORT=port, DATA_DIR=data_dir, TMPDIR=tmp, **(env or {}))
        script = "set -o pipefail\n"
        for b in commands:
            script += b.text + f"\necho {SEPARATOR}\n"
        done = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=timeout)
    left = sorted(set(os.listdir(ROOT)) - before)
    if left:
        raise AssertionError(f"the commands left files in the repository: {left}")
    outputs = done.stdout.split(SEPARATOR + "\n")
    if len(outputs) != len(commands) + 1:
        raise AssertionError(f"the commands stopped early (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return outputs[:-1], done.stderr


def json_values(text):
    decoder, values, at, text = json.JSONDecoder(), [], 0, text.strip()
    while at < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


def differences(commands, outputs):
    """A list of readable mismatches between the page and the outputs."""
    found = []
    for b, out in zip(commands, outputs):
        where = f"docs/quickstart.md line {b.start + 1}:\n{b.text.strip()}"
        if b.expected is None:
            if out.strip():
                found.append(f"{where}\nprinted, while the page shows no output:\n{out}")
            continue
        shown = mask(b.expected.text)
        got = mask(out)
        if b.expected.lang == "json":
            try:
                same = json_values(shown) == json_values(got)
            except ValueError as e:
                found.append(f"{where}\nis not JSON ({e}):\n{out}")
                continue
        else:
            same = [line.rstrip() for line in shown.strip().splitlines()] == \
                   [line.rstrip() for line in got.strip().splitlines()]
        if not same:
            found.append(f"{where}\nthe page shows:\n{b.expected.text}\nthe commands printed:\n{out}")
    return found


def check(base_url, data_dir, env=None):
    with open(PAGE, encoding="utf-8") as f:
        commands = parse(f.read())
    assert commands, "docs/quickstart.md has no sh blocks"
    outputs, stderr = run(commands, base_url, data_dir, env=env)
    found = differences(commands, outputs)
    assert not found, "\n\n".join(found) + (f"\n\nstderr:\n{stderr[-2000:]}" if stderr else "")
    return len(commands)


def update(base_url, data_dir, env=None):
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    commands = parse(text)
    outputs, stderr = run(commands, base_url, data_dir, env=env)
    lines = text.splitlines(keepends=True)
    for b, out in reversed(list(zip(commands, outputs))):
        if b.expected is None:
            if out.strip():
                print(f"line {b.start + 1}: printed output but has no output block:\n{out}", file=sys.stderr)
            continue
        if b.expected.lang == "json":
            body = "\n".join(json.dumps(v, indent=2, ensure_ascii=False) for v in json_values(out)) + "\n"
        else:
            body = out if out.endswith("\n") else out + "\n"
        first = b.expected.start + 1
        last = first + len(b.expected.lines)
        lines[first:last] = [body]
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write("".join(lines))
    if stderr:
        print(stderr, file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    if "--update" in sys.argv:
        update(sys.argv[1], sys.argv[2])
    else:
        print(f"{check(sys.argv[1], sys.argv[2])} command blocks match the page")
