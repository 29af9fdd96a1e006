"""bt-repo in a real headless Chromium, against a real `bt-repo run` and a tracker stand-in.

Chromium is Debian's (/usr/bin/chromium), driven by Playwright. Missing
Chromium is a failure with a clear message, not a skip: CI installs it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.support import command, wait_for
from tests.repo.repo_support import (SAMPLE, ThreadedServer, make_torrent, publish_body, publish_sync, repo_process,
                                     sized_torrent, tracker_app)
from torrents import metainfo
from torrents.sample import sample_lfn

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
XSS_NAME = "<img src=x onerror=alert(1)>"
XSS_DESCRIPTION = "<script>alert(1)</script> <img src=x onerror=alert(2)>"
SWARM = {"seeds": 2, "leechers": 5, "completed": 9, "sites": ["site1", "site2"]}
SHOTS = Path("/tmp")


def sample_files(count: int = 29, seed: int = 51203) -> dict[str, int]:
    rng = random.Random(seed)
    return {sample_lfn(i): int(10.3 * 2**20 * rng.uniform(0.7, 1.3)) for i in range(1, count + 1)}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    """A running `bt-repo run` with published datasets; yields (base URL, newest sample Metainfo)."""
    tmp = tmp_path_factory.mktemp("repo-browser")
    swarms: dict = {}
    with ThreadedServer(tracker_app(swarms)) as tracker, repo_process(tmp, tracker.url) as (url, _):
        files = sample_files()
        old = sized_torrent(SAMPLE, dict(list(files.items())[:27]))
        new = sized_torrent(SAMPLE, files)
        description = ("Merged DPD_IDCOMM from the 2008 cosmic-ray run 91949 (physics_IDCosmic stream), "
                       "reprocessed with r653, p26.")
        for torrent, meta, record, site in ((*old, "site1"), (*new, "site1"), (*new, "site2")):
            status, answer = publish_sync(url, SAMPLE, publish_body(torrent, meta, record, site=site,
                                                                    description=description), site=site)
            assert status in (200, 201), answer
        for name, size in (("mc08.105200.T1_McAtNlo_Jimmy.recon.AOD.e357_s462_r541", 7 * 2**30),
                           ("data09_900GeV.00141811.physics_MinBias.merge.AOD.f187_m305", 350 * 2**20)):
            torrent, meta, record = sized_torrent(name, {"AOD.027139._00001.pool.root.1": size})
            assert publish_sync(url, name, publish_body(torrent, meta, record, site="site2"),
                                site="site2")[0] == 201
        torrent, meta, record = make_torrent(tmp, XSS_NAME, {"a.root": 100})
        assert publish_sync(url, XSS_NAME, publish_body(torrent, meta, record, description=XSS_DESCRIPTION))[0] == 201
        swarms[new[1].info_hash] = SWARM
        yield url, new[1]


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM}: Chromium is not installed; the browser tests need Debian's chromium package "
                    "(apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, repo):
    url, _ = repo
    context = browser.new_context(base_url=url, accept_downloads=True,
                                  permissions=["clipboard-read", "clipboard-write"])
    context.set_default_timeout(10_000)
    pg = context.new_page()
    dialogs: list[str] = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.dialogs, pg.console_errors = dialogs, errors  # type: ignore[attr-defined]
    yield pg
    context.close()


def test_search_open_download_and_see_the_swarm(page, repo, tmp_path):
    url, meta = repo
    page.goto("/")
    page.get_by_role("searchbox", name="Search datasets").fill("IDCosmic")
    page.get_by_role("button", name="Search").click()
    page.wait_for_url("**/search?q=IDCosmic")
    assert "1 dataset" in page.locator(".count").inner_text()
    page.get_by_role("link", name=SAMPLE).click()
    page.wait_for_url(f"**/datasets/{SAMPLE}")

    assert page.locator("h1").inner_text() == SAMPLE
    assert page.locator(".swarm .seeds").inner_text() == "2"
    assert page.locator(".swarm .leechers").inner_text() == "5"
    assert page.locator(".swarm .completed").inner_text() == "9"
    assert page.locator(".files tbody tr").count() == 29
    assert "Other versions" in page.locator("main").inner_text()

    command_text = f"bt-get {SAMPLE} --repo {url}"
    assert page.locator("#bt-get-command").inner_text() == command_text
    copy = page.get_by_role("button", name="Copy")
    copy.click()  # visible only because the script ran: CSP allowed it by hash
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == command_text

    with page.expect_download() as info:
        page.get_by_role("link", name="Download .torrent").click()
    download = info.value
    assert download.suggested_filename == f"{SAMPLE}.torrent"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    parsed = metainfo.parse(saved.read_bytes())
    assert (parsed.info_hash, parsed.name, len(parsed.files)) == (meta.info_hash, SAMPLE, 29)
    assert page.get_by_role("link", name="Magnet link").get_attribute("href") == meta.magnet()
    assert page.console_errors == []  # type: ignore[attr-defined]


def test_markup_in_name_and_description_is_shown_as_text(page):
    page.goto("/search?q=img")
    page.get_by_role("link", name=XSS_NAME).click()
    assert page.locator("h1").inner_text() == XSS_NAME
    assert page.locator(".description").inner_text() == XSS_DESCRIPTION
    assert page.locator("main img").count() == 0
    page.goto("/")
    assert XSS_NAME in page.locator("main").inner_text()
    assert page.dialogs == []  # type: ignore[attr-defined]


def test_dataset_page_at_desktop_and_phone_width(page):
    for width, height, shot in ((1280, 900, "repo-dataset.png"), (375, 812, "repo-dataset-375.png")):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"/datasets/{SAMPLE}")
        # Nothing runs off the right edge: long names and hashes wrap, wide tables scroll in their box.
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.screenshot(path=str(SHOTS / shot), full_page=True)
    page.goto("/search?q=AOD")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(SHOTS / "repo-search-375.png"), full_page=True)
    page.goto("/no/such/page")
    assert "404" in page.locator("h1").inner_text()
