"""docs/quickstart.md runs as shown: scripts/quickstart.py runs every ```sh block of the page
against a server of its own (its port and data directory given as PORT and DATA_DIR, neither
the page's defaults) and fails on the first answer that differs from the page, once ids,
times, tokens and signatures are masked, or when the commands leave a file in the
repository."""
import importlib.util
import os

import pytest

from conftest import ROOT, port_kept_free

_spec = importlib.util.spec_from_file_location("quickstart", os.path.join(ROOT, "scripts", "quickstart.py"))
quickstart = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(quickstart)


@pytest.mark.once
def test_quickstart_page_runs_as_shown(server_factory):
    """Its browser section runs in headless Chromium, from the app's origin on APP_PORT (which the
    server's CORS_ORIGINS lists), and its React Native section in a React Native-like Node."""
    app_port = port_kept_free()  # listened on some 40 s later
    srv = server_factory(CORS_ORIGINS=f"http://localhost:{app_port}")
    assert srv.port != 8080 and os.path.realpath(srv.data_dir) != os.path.join(ROOT, "data")
    assert quickstart.check(srv.url, srv.data_dir, env={"APP_PORT": str(app_port)}) >= 23


def test_the_checker_sees_a_changed_answer():
    """The comparison itself: a masked difference passes, a real one is reported."""
    page = "```sh\necho '{\"id\": \"c0123456789abcdefghijklmn\", \"n\": 1}'\n```\n\n```json\n{\"id\": \"%s\", \"n\": %d}\n```\n"
    same = quickstart.parse(page % ("czyxwvutsrqponmlkjihgfedc", 1))
    assert quickstart.differences(same, ['{"id": "c0123456789abcdefghijklmn", "n": 1}\n']) == []
    changed = quickstart.parse(page % ("czyxwvutsrqponmlkjihgfedc", 2))
    assert len(quickstart.differences(changed, ['{"id": "c0123456789abcdefghijklmn", "n": 1}\n'])) == 1
    silent = quickstart.parse("```sh\ntrue\n```\n")
    assert quickstart.differences(silent, ["unexpected\n"]) != []
