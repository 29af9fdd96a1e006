"""`bt-repo run` as a real process: serves, keeps its catalog across restarts, exits 0 on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.error
import urllib.request

from tests.support import command, free_port, http_ok, wait_for
from tests.repo.repo_support import SAMPLE, SECRETS, make_torrent, publish_body, publish_sync


def write_config(path, tracker_port: int):
    secrets = ", ".join(f'{k} = "{v}"' for k, v in SECRETS.items())
    path.write_text(f'[repo]\ntracker = "http://127.0.0.1:{tracker_port}"\nsite_secrets = {{ {secrets} }}\n')
    return path


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.load(resp)


def test_run_serves_keeps_state_and_exits_0_on_sigterm(procs, tmp_path):
    cfg = write_config(tmp_path / "btswarm.toml", free_port())
    state = tmp_path / "state"
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    args = [command("bt-repo"), "run", "--config", str(cfg), "--listen", f"127.0.0.1:{port}", "--state", str(state), "-v"]

    repo = procs.start("bt-repo", args)
    wait_for(lambda: http_ok(f"{url}/healthz"), timeout=20, what="bt-repo /healthz")
    assert get_json(f"{url}/healthz") == {"ok": True}
    torrent, meta, files = make_torrent(tmp_path, SAMPLE, {"a.root": 1000})
    status, answer = publish_sync(url, SAMPLE, publish_body(torrent, meta, files))
    assert (status, answer["result"]) == (201, "created")

    repo.popen.send_signal(signal.SIGTERM)
    assert repo.popen.wait(15) == 0, repo.log()
    assert "Traceback" not in repo.log()
    assert (state / "repo.sqlite3").is_file()

    # Started again on the same state, it still knows the dataset.
    again = procs.start("bt-repo-again", args)
    wait_for(lambda: http_ok(f"{url}/healthz"), timeout=20, what="bt-repo /healthz after restart")
    assert get_json(f"{url}/api/info-hashes") == {"info_hashes": [meta.info_hash]}
    assert again.stop() == 0


def test_bad_listen_address_is_a_one_line_error(tmp_path):
    result = subprocess.run([command("bt-repo"), "run", "--listen", "nowhere", "--state", str(tmp_path)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip() == "bt-repo: error: --listen: 'nowhere' is not HOST:PORT"


def test_an_over_long_address_gets_the_styled_page_not_the_parsers_words(procs, tmp_path):
    cfg = write_config(tmp_path / "btswarm.toml", free_port())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    procs.start("bt-repo", [command("bt-repo"), "run", "--config", str(cfg), "--listen", f"127.0.0.1:{port}",
                            "--state", str(tmp_path / "state")])
    wait_for(lambda: http_ok(f"{url}/healthz"), timeout=20, what="bt-repo /healthz")
    for path, kind in ((f"/search?q={'x' * 20_000}", "text/html"), (f"/api/datasets?q={'x' * 9_000}", "application/json")):
        try:
            urllib.request.urlopen(url + path, timeout=5)
            raise AssertionError("an over-long address was served")
        except urllib.error.HTTPError as exc:
            body = exc.read().decode()
            assert (exc.code, exc.headers.get_content_type()) == (414, kind)
        assert "bytes long; at most 8,192 are accepted" in body and "Got more than" not in body
        if kind == "text/html":
            assert "414 · Address too long" in body and 'href="/search"' in body
