"""Bad input refused: forged control requests to a real bt-server, hostile .torrents given to bt-get,
datasets that point outside a site's storage roots or carry unsafe names."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.faults.conftest import metric
from tests.support import command, free_port, wait_for, http_ok
from torrents import auth, sample

pytestmark = pytest.mark.slow

HOSTILE = Path(__file__).resolve().parents[1] / "data" / "hostile"
SECRET = "faults-secret-0123456789"


def write_config(path: Path, **server) -> Path:
    lines = ["[server]"] + [f"{k} = {json.dumps(v)}" for k, v in server.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def server(procs, tmp_path):
    """A real bt-server (no tracker, no repository) with one small dataset."""
    root = tmp_path / "root"
    sample.generate(root, files=2, total_size=2 * 2**20)
    port = free_port()
    cfg = write_config(tmp_path / "server.toml", site="siteA", secret=SECRET, listen=f"127.0.0.1:{port}",
                       peer_listen="127.0.0.1:0", state=str(tmp_path / "state"), roots=[str(root)], tracker="",
                       repo="")
    proc = procs.start("bt-server", [command("bt-server"), "run", "--config", str(cfg)])
    url = f"http://127.0.0.1:{port}"
    status = wait_for(lambda: http_ok(url + "/healthz") and (s := _get(url, "/api/status"))["datasets"] and s,
                      timeout=30, what="bt-server ready")
    return url, status["datasets"][0]["info_hash"], proc


def _get(url: str, path: str) -> dict:
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=5)
    conn.request("GET", path)
    return json.loads(conn.getresponse().read())


def send(url: str, method: str, path: str, body: bytes | object, headers: dict) -> tuple[int, dict]:
    conn = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
    chunked = not isinstance(body, bytes)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **headers},
                 encode_chunked=chunked)
    resp = conn.getresponse()
    raw = resp.read()
    try:
        return resp.status, json.loads(raw)
    except ValueError:
        return resp.status, {"raw": raw[:200].decode(errors="replace")}


def test_forged_control_requests_are_refused(server):
    url, info_hash, _ = server
    body = json.dumps({"info_hash": info_hash}).encode()
    other = json.dumps({"info_hash": "0" * 40}).encode()
    cases = {
        "unsigned": {},
        "wrong key": auth.sign("not-the-secret", "siteA", "POST", "/api/seeds", body),
        "unknown site": auth.sign(SECRET, "siteB", "POST", "/api/seeds", body),
        "stale (clock 10 min behind)": auth.sign(SECRET, "siteA", "POST", "/api/seeds", body, now=time.time() - 600),
        "from the future": auth.sign(SECRET, "siteA", "POST", "/api/seeds", body, now=time.time() + 600),
        "signed for another path": auth.sign(SECRET, "siteA", "POST", "/api/seeds/x", body),
    }
    for what, headers in cases.items():
        code, answer = send(url, "POST", "/api/seeds", body, headers)
        assert code == 401, (what, code, answer)
        assert "error" in answer, (what, answer)
    # Body tampered after signing: the signature covers the body's digest.
    code, _ = send(url, "POST", "/api/seeds", body, auth.sign(SECRET, "siteA", "POST", "/api/seeds", other))
    assert code == 401
    assert _get(url, "/api/status")["seeds"] == []
    assert metric(url, "btswarm_server_seed_requests_total") == 0

    # A good request starts a seed; the same bytes sent again are a replay.
    good = auth.sign(SECRET, "siteA", "POST", "/api/seeds", body)
    assert send(url, "POST", "/api/seeds", body, good)[0] == 200
    path = f"/api/seeds/{info_hash}"
    assert send(url, "DELETE", path, b"", auth.sign(SECRET, "siteA", "DELETE", path, b""))[0] == 200
    code, answer = send(url, "POST", "/api/seeds", body, good)
    assert code == 401 and "replay" in answer["error"], answer
    assert _get(url, "/api/status")["seeds"] == []
    assert metric(url, "btswarm_server_seed_requests_total") == 1

    # Oversized bodies: refused before they are read whole, with or without a Content-Length.
    big = b"{" + b" " * (2 * 2**20) + b"}"
    code, _ = send(url, "POST", "/api/seeds", big, auth.sign(SECRET, "siteA", "POST", "/api/seeds", big))
    assert code == 413
    code, _ = send(url, "POST", "/api/seeds", iter([b" " * 65536] * 40), {})
    assert code == 413
    assert _get(url, "/api/status")["seeds"] == []
    assert http_ok(url + "/healthz")


def test_hostile_torrents_are_refused_by_bt_get(tmp_path, capsys, monkeypatch):
    """Every file in tests/data/hostile through bt-get's real entry point (in-process: 58 interpreter starts
    would take half a minute on 2 cores), then a few through the console script."""
    from btget.cli import main as bt_get_main

    cases = sorted(HOSTILE.glob("*.torrent"))
    assert len(cases) >= 50
    for torrent in cases:
        work = tmp_path / torrent.stem
        (work / "out").mkdir(parents=True)
        monkeypatch.chdir(work)
        code = bt_get_main([str(torrent), "-o", str(work / "out"), "--repo", "http://127.0.0.1:9"])
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert code in (1, 2), (torrent.name, code, err)
        assert len(lines) == 1 and lines[0].startswith("bt-get: error: "), (torrent.name, err)
        assert "internal error" not in lines[0], (torrent.name, lines[0])
        # Nothing written: not in DIR, not beside it, not in the working directory.
        assert sorted(p.name for p in work.iterdir()) == ["out"], (torrent.name, list(work.iterdir()))
        assert list((work / "out").iterdir()) == [], torrent.name
    for name in ("path_dotdot.torrent", "name_slash.torrent", "pieces_for_a_petabyte.torrent"):
        work = tmp_path / f"cli-{name}"
        (work / "out").mkdir(parents=True)
        result = subprocess.run([command("bt-get"), str(HOSTILE / name), "-o", str(work / "out")],
                                capture_output=True, text=True, timeout=60, cwd=work)
        assert result.returncode == 1, (name, result.stderr)
        assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"bt-get: error: {HOSTILE / name}: "), result.stderr
        assert sorted(p.name for p in work.iterdir()) == ["out"] and not list((work / "out").iterdir())
    assert not (tmp_path.parent / "etc").exists() and not (tmp_path.parent / "outside").exists()


def test_scan_refuses_links_outside_roots_and_unsafe_names(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    sample.generate(root, name="good.dataset", files=2, total_size=65536)
    sample.generate(outside, name="elsewhere", files=1, total_size=4096)
    secret_file = next((outside / "elsewhere").iterdir())
    # A directory symlink inside a dataset, a file symlink, and a dataset directory that is a link: all leave the root.
    (root / "dirlink.dataset").mkdir()
    (root / "dirlink.dataset" / "a.root").write_bytes(b"x" * 100)
    os.symlink(outside / "elsewhere", root / "dirlink.dataset" / "sub")
    (root / "filelink.dataset").mkdir()
    os.symlink(secret_file, root / "filelink.dataset" / "b.root")
    os.symlink(outside / "elsewhere", root / "linked.dataset")
    (root / "ctl\x07name").mkdir()
    (root / "ctl\x07name" / "c.root").write_bytes(b"c")
    manifests = []
    entry = {"lfn": "p.root", "size": secret_file.stat().st_size, "pfns": [str(secret_file)]}
    for i, name in enumerate(["manifest.outside", "a/b", "..", "esc\x1b[2Jape"]):
        m = tmp_path / f"m{i}.json"
        m.write_text(json.dumps({"name": name, "files": [entry]}))
        manifests.append(str(m))
    cfg = write_config(tmp_path / "scan.toml", site="siteA", secret=SECRET, state=str(tmp_path / "state"),
                       roots=[str(root)], manifests=manifests, tracker="", repo="")
    result = subprocess.run([command("bt-server"), "scan", "--json", "--config", str(cfg)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 8, result.stderr  # PROBLEMS
    doc = json.loads(result.stdout)
    # Each link leaving the roots is refused on its own; what is left of its dataset is served.
    assert [d["name"] for d in doc["datasets"]] == ["dirlink.dataset", "good.dataset"]
    problems = "\n".join(doc["problems"])
    expected = [
        f"dirlink.dataset/sub: directory link to {outside / 'elsewhere'} leaves the dataset; not followed",
        "linked.dataset: dataset directory is a symlink; refused",
        f"filelink.dataset/b.root: link to {secret_file} leaves the storage roots; refused",
        "filelink.dataset: dataset has no files",
        f"manifest.outside/p.root: {secret_file} resolves to {secret_file}, outside the storage roots",
        "dataset name contains '/'",
        "'..'",
        "control character",
    ]
    for text in expected:
        assert text in problems, f"{text!r} not in:\n{problems}"
    # Nothing from outside made it into a farm.
    farm = tmp_path / "state" / "farm"
    assert sorted(p.name for p in farm.iterdir()) == ["dirlink.dataset", "good.dataset"]
    assert sorted(p.name for p in (farm / "dirlink.dataset").iterdir()) == ["a.root"]
