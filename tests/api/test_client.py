"""The generated TypeScript client (clients/typescript, `make client`): its types are what
openapi-typescript makes of the served document, and a Node test written against them
(openapi-fetch) runs the core flow against the real binary: register a customer and a provider,
verify the provider, post a job, quote it, accept the quote, read the job back."""
import os
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.engine_independent

BIN = os.path.join(ROOT, "node_modules", ".bin")
CLIENT = os.path.join(ROOT, "clients", "typescript")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """tsc type-checks the test against schema.d.ts and compiles it (into a directory of this
    run's own: the engines' passes may run at once)."""
    out = tmp_path_factory.mktemp("client-test")
    p = subprocess.run([os.path.join(BIN, "tsc"), "-p", os.path.join(CLIENT, "tsconfig.json"), "--outDir", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, "the client test does not type-check against the generated types:\n" + p.stdout + p.stderr
    return os.path.join(out, "test", "flow.test.js")


def test_the_generated_types_are_current(server, tmp_path):
    import requests
    doc = tmp_path / "openapi.json"
    doc.write_bytes(requests.get(server.url + "/openapi.json", timeout=30).content)
    out = tmp_path / "schema.d.ts"
    p = subprocess.run([os.path.join(BIN, "openapi-typescript"), str(doc), "-o", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(CLIENT, "schema.d.ts"), encoding="utf-8") as f:
        assert out.read_text() == f.read(), "clients/typescript/schema.d.ts is stale: run `make client`"


def test_the_node_client_runs_the_flow(server, compiled):
    env = dict(os.environ, MARKETPLACE_URL=server.url, MARKETPLACE_EXAMPLES=os.path.join(ROOT, "examples"),
               NODE_PATH=os.path.join(ROOT, "node_modules"))
    p = subprocess.run(["node", "--test", compiled], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    assert "# pass 1" in p.stdout and "# fail 0" in p.stdout
