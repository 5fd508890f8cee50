"""The TypeScript client, ready to publish (clients/typescript, issue 24 item 7): its types are
what openapi-typescript makes of the served document, uploads typed Blob | File
(scripts/generate.mjs, `make client`); the package builds and packs what a consumer imports;
and its Node test, written against createMarketplaceClient on openapi-fetch with no cast, runs
the whole flow against the real binary (retries with one Idempotency-Key, errors thrown by
code). Everything runs on the repository's pinned npm tools (package-lock.json)."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.engine_independent

BIN = os.path.join(ROOT, "node_modules", ".bin")
CLIENT = os.path.join(ROOT, "clients", "typescript")


def run(cmd, cwd=ROOT, timeout=300, **kw):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{' '.join(cmd)}:\n{p.stdout[-5000:]}\n{p.stderr[-3000:]}"
    return p


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """tsc type-checks the client and its test against schema.d.ts (strict, no cast) and
    compiles them (into a directory of this run's own: the engines' passes may run at once)."""
    out = tmp_path_factory.mktemp("client-test")
    run([os.path.join(BIN, "tsc"), "-p", os.path.join(CLIENT, "tsconfig.json"), "--outDir", str(out)])
    # the package is an ES module; its imports resolve to the repository's pinned npm packages
    (out / "package.json").write_text('{"type": "module", "private": true}')
    os.symlink(os.path.join(ROOT, "node_modules"), out / "node_modules")
    return os.path.join(out, "test", "flow.test.js")


@pytest.mark.once
def test_the_generated_types_are_current(server, tmp_path):
    import requests
    doc = tmp_path / "openapi.json"
    doc.write_bytes(requests.get(server.url + "/openapi.json", timeout=30).content)
    out = tmp_path / "schema.d.ts"
    run(["node", os.path.join(CLIENT, "scripts", "generate.mjs"), str(doc), str(out)])
    with open(os.path.join(CLIENT, "schema.d.ts"), encoding="utf-8") as f:
        assert out.read_text() == f.read(), "clients/typescript/schema.d.ts is stale: run `make client`"


def test_uploads_are_typed_as_blobs():
    with open(os.path.join(CLIENT, "schema.d.ts"), encoding="utf-8") as f:
        text = f.read()
    # Blobs and Files, and React Native's { uri, name, type } (platform.ts)
    native = "{\n                        uri: string;\n                        name: string;\n                        type: string;\n"
    assert "headshot: Blob | File | " + native in text and "images: (Blob | File | {" in text
    assert "Format: binary" in text


def test_the_node_client_runs_the_flow(server, compiled):
    env = dict(os.environ, MARKETPLACE_URL=server.url, MARKETPLACE_EXAMPLES=os.path.join(ROOT, "examples"))
    p = subprocess.run(["node", "--test", compiled], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    assert "# pass 1" in p.stdout and "# fail 0" in p.stdout


def test_the_node_client_refreshes_a_session(server, compiled):
    """clients/typescript/test/refresh.test.ts (issue 33): a request refused 401 invalid_token is
    refreshed once and sent again once; requests refused together share one refresh; a refused
    refresh throws the request's 401 without a loop."""
    test_file = os.path.join(os.path.dirname(compiled), "refresh.test.js")
    env = dict(os.environ, MARKETPLACE_URL=server.url)
    p = subprocess.run(["node", "--test", test_file], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    assert "# pass 4" in p.stdout and "# fail 0" in p.stdout


def test_the_client_on_react_native(server, compiled):
    """test/react-native.test.ts under a React Native-like Node (test/react-native-env.ts: no
    crypto.randomUUID, a fetch that cannot stream, xhr2 as XMLHttpRequest, FormData that takes
    { uri, name, type }): keys, device uploads, live updates over XMLHttpRequest, no retry of a
    password change or a deletion, list filters, and the types (tsc compiled it)."""
    test_file = os.path.join(os.path.dirname(compiled), "react-native.test.js")
    env = dict(os.environ, MARKETPLACE_URL=server.url, MARKETPLACE_EXAMPLES=os.path.join(ROOT, "examples"))
    p = subprocess.run(["node", "--test", test_file], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-5000:] + p.stderr[-3000:]
    assert "# pass 6" in p.stdout and "# fail 0" in p.stdout


@pytest.mark.once
def test_npm_pack_works_from_a_copy_of_the_package_alone(tmp_path):
    """The package's directory copied anywhere, with its own node_modules (what `npm ci` there
    installs: here the repository's, linked), packs: prepack builds it with nothing outside the
    directory, and the tarball holds what a consumer imports, the changelog and the types."""
    pkg = tmp_path / "client"
    shutil.copytree(CLIENT, pkg, ignore=shutil.ignore_patterns("node_modules", "dist", "build"))
    os.symlink(os.path.join(ROOT, "node_modules"), pkg / "node_modules")
    packed = _pack_json(run(["npm", "pack", "--json"], cwd=pkg).stdout)
    assert (pkg / packed[0]["filename"]).exists()
    with open(os.path.join(CLIENT, "package.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    assert manifest["publishConfig"]["access"] == "public" and "CHANGELOG.md" in manifest["files"]
    with open(os.path.join(CLIENT, "CHANGELOG.md"), encoding="utf-8") as f:
        assert f"## {manifest['version']}" in f.read()
    for name in ("tsconfig.json", "tsconfig.build.json"):
        with open(os.path.join(CLIENT, name), encoding="utf-8") as f:
            assert "../" not in f.read(), name  # nothing outside the directory
    assert "../" not in manifest["scripts"]["build"] + manifest["scripts"]["prepack"]


def _pack_json(out):
    """npm pack --json's answer (after whatever the prepack script printed)."""
    return json.loads(out[out.index("\n[") + 1:] if not out.lstrip().startswith("[") else out)


@pytest.mark.once
def test_the_package_builds_packs_and_is_importable(tmp_path):
    """What `npm publish` would ship: the built client, its declarations and the schema; and a
    consumer's strict TypeScript that imports it by the package's name compiles."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    run([os.path.join(BIN, "tsc"), "-p", os.path.join(CLIENT, "tsconfig.build.json"), "--outDir", str(pkg / "dist")])
    for name in ("package.json", "schema.d.ts", "README.md", "CHANGELOG.md"):
        shutil.copy(os.path.join(CLIENT, name), pkg / name)
    packed = json.loads(run(["npm", "pack", "--dry-run", "--json", "--ignore-scripts"], cwd=pkg).stdout)
    files = sorted(f["path"] for f in packed[0]["files"])
    assert files == ["CHANGELOG.md", "README.md"] + [f"dist/{m}.{ext}" for m in ("events", "index", "platform", "typed", "xhr")
                                                      for ext in ("d.ts", "js", "js.map")] + \
        ["package.json", "schema.d.ts"], files
    assert packed[0]["name"] == "@marketplace/client"
    # a consumer: node_modules/@marketplace/client is the package, its dependencies the pinned ones
    os.symlink(os.path.join(ROOT, "node_modules"), pkg / "node_modules")
    consumer = tmp_path / "consumer"
    (consumer / "node_modules" / "@marketplace").mkdir(parents=True)
    os.symlink(pkg, consumer / "node_modules" / "@marketplace" / "client")
    (consumer / "app.ts").write_text(
        'import { createMarketplaceClient, events, MarketplaceError, type components, type StreamEvent }\n'
        '  from "@marketplace/client";\n'
        'type Job = components["schemas"]["Job"];\n'
        'export async function firstMessage(token: string): Promise<string | undefined> {\n'
        '  for await (const ev of events({ baseUrl: "http://localhost:8080", token }))\n'
        '    if (ev.event === "message.created") return ev.data.message.content;\n'
        '  return undefined;\n'
        '}\n'
        'export const kinds: StreamEvent["event"][] = ["payout.updated"];\n'
        'const api = createMarketplaceClient({ baseUrl: "http://localhost:8080", token: "t" });\n'
        'export async function photo(file: Blob): Promise<Job | undefined> {\n'
        '  try {\n'
        '    const { data } = await api.POST("/jobs/{id}/start", { params: { path: { id: "j" } },\n'
        '                                                           body: { images: [file] } });\n'
        '    return data;\n'
        '  } catch (e) {\n'
        '    if (e instanceof MarketplaceError && e.is("account_busy")) return undefined;\n'
        '    throw e;\n'
        '  }\n'
        '}\n')
    (consumer / "package.json").write_text('{"type": "module", "private": true}')
    (consumer / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": True,
                            "noEmit": True, "types": ["node"], "typeRoots": [os.path.join(ROOT, "node_modules", "@types")]},
        "files": ["app.ts"]}))
    run([os.path.join(BIN, "tsc"), "-p", str(consumer / "tsconfig.json")], cwd=consumer)
    # and it runs: the built module loads and makes a client
    run(["node", "--input-type=module", "-e",
         'import { createMarketplaceClient, events, MarketplaceError } from "@marketplace/client";'
         'const api = createMarketplaceClient({ baseUrl: "http://127.0.0.1:9" });'
         'if (typeof api.GET !== "function" || typeof MarketplaceError !== "function") process.exit(1);'
         'if (typeof events !== "function") process.exit(1);'],
        cwd=consumer)


def test_the_package_pins_the_versions_the_tests_use():
    with open(os.path.join(CLIENT, "package.json"), encoding="utf-8") as f:
        client = json.load(f)
    with open(os.path.join(ROOT, "package.json"), encoding="utf-8") as f:
        tools = json.load(f)["devDependencies"]
    with open(os.path.join(CLIENT, "package-lock.json"), encoding="utf-8") as f:
        locked = json.load(f)["packages"]
    for deps in (client["dependencies"], client["devDependencies"]):
        for name, version in deps.items():
            assert version == tools[name], (name, version, tools[name])  # exact, and what the tests ran
            assert locked[f"node_modules/{name}"]["version"] == version, name


def test_every_event_kind_and_required_body_is_in_the_document_and_the_types():
    """/docs and the types show what GET /events sends, kind by kind (not a "string"), and a
    JSON body is required where one of its fields is (a missing body counts as {})."""
    with open(os.path.join(ROOT, "docs", "openapi.json"), encoding="utf-8") as f:
        doc = json.load(f)
    schemas = doc["components"]["schemas"]
    media = doc["paths"]["/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
    assert media["schema"]["$ref"] == "#/components/schemas/StreamEvent"
    kinds = {}
    for ref in schemas["StreamEvent"]["oneOf"]:
        ev = schemas[ref["$ref"].rsplit("/", 1)[1]]
        event = ev["properties"]["event"]
        for kind in [event["const"]] if "const" in event else event["enum"]:
            kinds[kind] = ev["properties"]["data"]["$ref"].rsplit("/", 1)[1]
    for kind in ("message.created", "quote.created", "job.created", "job.updated", "payment.updated",
                 "payout.updated", "notification.created", "banner", "reset", "replaced", "shutdown", "token.expired"):
        assert kind in kinds and kinds[kind] in schemas, kind
    with open(os.path.join(CLIENT, "schema.d.ts"), encoding="utf-8") as f:
        types = f.read()
    assert '"text/event-stream": components["schemas"]["StreamEvent"];' in types
    assert 'event: "message.created";' in types and 'data: components["schemas"]["MessageCreated"];' in types
    ops = {(m.upper(), p): o for p, item in doc["paths"].items() for m, o in item.items() if isinstance(o, dict)}
    login = ops[("POST", "/auth/login")]["requestBody"]
    assert login["required"] is True
    patch_me = ops[("PATCH", "/users/me")]["requestBody"]  # every field optional
    assert patch_me["required"] is False
    for (method, path), op in ops.items():
        body = op.get("requestBody", {}).get("content", {}).get("application/json")
        if body and path != "/webhooks":
            assert op["requestBody"]["required"] == bool(body["schema"].get("required")), (method, path)
