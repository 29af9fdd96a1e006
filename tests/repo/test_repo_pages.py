"""bt-repo HTML pages against the real app on a real port, with a real tracker stand-in or none."""

from __future__ import annotations

import html
import re

import pytest

from tests.support import free_port
from tests.repo.repo_support import SAMPLE, SECRETS, make_torrent, publish, publish_body, tracker_app
from btrepo.config import RepoConfig
from btrepo.app import create_app

FILES = {"DPD_IDCOMM.051203._00001.pool.root.1": 3 * 2**20, "DPD_IDCOMM.051203._00002.pool.root.1": 2**20}
XSS_NAME = "<img src=x onerror=alert(1)>"
XSS_DESCRIPTION = "<script>alert(1)</script> and <img src=x onerror=alert(2)>"


def config(tmp_path, tracker: str, **kw) -> RepoConfig:
    return RepoConfig(state=str(tmp_path / "state"), tracker=tracker, site_secrets=SECRETS, **kw)


@pytest.fixture
async def repo(aiohttp_client, tmp_path):
    return await aiohttp_client(create_app(config(tmp_path, f"http://127.0.0.1:{free_port()}")))


async def put(client, tmp_path, name, files=FILES, *, site="site1", description=""):
    torrent, meta, record = make_torrent(tmp_path / name.replace("/", "_")[:20], name, files)
    status, answer = await publish(client.session, str(client.make_url("/")), name,
                                   publish_body(torrent, meta, record, site=site, description=description),
                                   site=site)
    assert status in (200, 201), answer
    return meta


async def page(client, path, status=200):
    resp = await client.get(path)
    text = await resp.text()
    assert resp.status == status, text
    assert resp.content_type == "text/html"
    return resp, text


def visible(text: str) -> str:
    """The page's text as a reader sees it: tags dropped, entities decoded, spaces collapsed."""
    body = re.sub(r"<script\b.*?</script>", " ", text, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


async def test_home_lists_recent_datasets_with_human_sizes(repo, tmp_path):
    _, text = await page(repo, "/")
    assert "No dataset has been published yet" in visible(text)
    await put(repo, tmp_path, SAMPLE, description="ATLAS cosmics")
    _, text = await page(repo, "/")
    seen = visible(text)
    assert SAMPLE in seen and "4.0 MiB" in seen and "ATLAS cosmics" in seen
    assert 'name="q"' in text and 'action="/search"' in text


async def test_search_page_finds_sorts_and_pages(repo, tmp_path):
    await put(repo, tmp_path, SAMPLE)
    for i in range(4):
        await put(repo, tmp_path, f"mc08.10520{i}.ttbar.AOD", {f"AOD.{i}.root": 1000 * (i + 1)}, site="site2")
    _, text = await page(repo, "/search?q=IDCosmic")
    assert SAMPLE in visible(text) and "ttbar" not in visible(text)
    assert "1 dataset" in visible(text)

    _, text = await page(repo, "/search?sort=size&per_page=2")
    seen = visible(text)
    assert "5 datasets, page 1 of 3" in seen
    assert seen.index(SAMPLE) < seen.index("mc08.105203.ttbar.AOD")  # 4 MiB before 4 KiB
    assert 'href="/search?sort=size&amp;page=2&amp;per_page=2"' in text  # next page keeps the order

    _, text = await page(repo, "/search?sort=name&page=3&per_page=2")
    assert "mc08.105203.ttbar.AOD" in visible(text) and "Previous" in visible(text)
    _, text = await page(repo, "/search?site=site2")
    assert "4 datasets" in visible(text) and SAMPLE not in visible(text)

    _, text = await page(repo, "/search?q=nothing-like-this")
    assert "Nothing matches" in visible(text)
    _, text = await page(repo, "/search?page=zero", status=400)
    assert "page=zero: must be a whole number of at least 1" in visible(text)


async def test_dataset_page_when_the_tracker_is_down(repo, tmp_path):
    meta = await put(repo, tmp_path, SAMPLE, description="Merged DPD from the 2008 cosmics run")
    await put(repo, tmp_path, SAMPLE, site="site2")
    resp, text = await page(repo, f"/datasets/{SAMPLE}")
    seen = visible(text)
    assert "Swarm state unknown" in seen
    assert "Merged DPD from the 2008 cosmics run" in seen
    for lfn in FILES:
        assert lfn in seen
    assert "3.0 MiB" in seen and "1.0 MiB" in seen and "4.0 MiB" in seen
    assert re.search(r"\b[0-9a-f]{8}\b", seen)  # adler32 column
    assert "site1" in seen and "site2" in seen
    base = str(repo.make_url("")).rstrip("/")
    assert f'<code id="bt-get-command">bt-get {SAMPLE} --repo {base}</code>' in text
    assert f'href="/datasets/{SAMPLE}.torrent"' in text
    assert f'href="{html.escape(meta.magnet())}"' in text
    assert "Other versions" not in seen
    assert "script-src 'sha256-" in resp.headers["Content-Security-Policy"]


async def test_dataset_page_shows_live_swarm_and_older_versions(aiohttp_client, aiohttp_server, tmp_path):
    swarms: dict = {}
    tracker = await aiohttp_server(tracker_app(swarms))
    repo = await aiohttp_client(create_app(config(tmp_path, str(tracker.make_url("")),
                                                  public_url="https://repo.example.org/")))
    old = await put(repo, tmp_path / "old", SAMPLE, {"a.root": 10})
    # the only site holding it changed it: a new version (another site's other files would be a conflict)
    new = await put(repo, tmp_path / "new", SAMPLE, FILES)
    swarms[new.info_hash] = {"seeds": 3, "leechers": 7, "completed": 12, "sites": ["site2", "site1"]}

    _, text = await page(repo, f"/datasets/{SAMPLE}")
    seen = visible(text)
    assert "Seeds 3" in seen and "Leechers 7" in seen and "Completed 12" in seen
    assert "Seeding sites site1, site2" in seen
    assert "unknown" not in seen
    assert f"bt-get {SAMPLE} --repo https://repo.example.org" in seen
    assert "Other versions" in seen and old.info_hash in seen
    assert f'href="/datasets/{SAMPLE}.torrent?info_hash={old.info_hash}"' in text

    doc = await (await repo.get(f"/api/datasets/{SAMPLE}")).json()
    assert doc["swarm"] == {"seeds": 3, "leechers": 7, "completed": 12, "sites": ["site1", "site2"]}

    # A swarm the tracker does not know yet is empty, not unknown.
    del swarms[new.info_hash]
    _, text = await page(repo, f"/datasets/{SAMPLE}")
    assert "Seeds 0" in visible(text) and "none yet" in visible(text)


async def test_markup_in_names_and_descriptions_is_text(repo, tmp_path):
    await put(repo, tmp_path, XSS_NAME, {"<b>bold</b>.root": 10}, description=XSS_DESCRIPTION)
    for path in ("/", "/search?q=img", f"/datasets/{XSS_NAME}"):
        _, text = await page(repo, path)
        assert "<script>alert" not in text and "<img src=x" not in text and "<b>bold" not in text, path
        assert XSS_NAME in visible(text), path
    _, text = await page(repo, f"/datasets/{XSS_NAME}")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert XSS_DESCRIPTION in visible(text) and "<b>bold</b>.root" in visible(text)
    # The command to paste is shell-quoted, so the name cannot be a redirection.
    assert "bt-get '<img src=x onerror=alert(1)>' --repo" in visible(text)
    resp = await repo.get(f"/datasets/{XSS_NAME}.torrent")
    assert resp.status == 200
    assert resp.headers["Content-Disposition"].startswith('attachment; filename="_img_src_x_onerror_alert_1__.torrent"')


async def test_not_found_and_sites_pages(repo, tmp_path):
    _, text = await page(repo, "/datasets/no.such.dataset", status=404)
    assert "404 · Not found" in visible(text) and "no.such.dataset: no such dataset" in visible(text)
    _, text = await page(repo, "/no/such/page", status=404)
    assert "/no/such/page: no such page" in visible(text)
    resp = await repo.get("/datasets/no.such.dataset.torrent")
    assert resp.status == 404

    _, text = await page(repo, "/sites")
    assert "No site has published yet" in visible(text)
    await put(repo, tmp_path, SAMPLE)
    await put(repo, tmp_path, "user.jdoe.v1", {"n.root": 5}, site="site2")
    await put(repo, tmp_path, "user.jdoe.v2", {"n.root": 6}, site="site2")
    _, text = await page(repo, "/sites")
    seen = visible(text)
    assert re.search(r"site1 1 \d{4}-\d\d-\d\d \d\d:\d\d UTC", seen), seen
    assert re.search(r"site2 2 \d{4}-", seen)
    assert 'href="/search?site=site2"' in text and 'href="/sites/site2"' in text


async def test_a_site_page_when_the_tracker_is_down_and_an_unknown_site(repo, tmp_path):
    await put(repo, tmp_path, SAMPLE)
    _, text = await page(repo, "/sites/site1")
    seen = visible(text)
    assert "Tier T2" in seen and "Datasets 1" in seen
    assert "What it seeds is unknown: the tracker did not answer." in seen
    assert "Not sampled yet" in seen and "<svg" not in text
    _, text = await page(repo, "/sites/site9", status=404)
    assert "404 · Not found" in visible(text) and "site9: no such site" in visible(text)
    _, text = await page(repo, "/sites/%3Cb%3Enobody%3C%2Fb%3E", status=404)
    assert "<b>nobody" not in text and "&lt;b&gt;nobody&lt;/b&gt;: no such site" in text


async def test_static_stylesheet_is_served(repo):
    resp = await repo.get("/static/style.css")
    assert resp.status == 200 and "max-width" in await resp.text()
