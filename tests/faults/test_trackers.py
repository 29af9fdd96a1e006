"""Two trackers sharing one Redis (`btswarm up --redis --trackers 2`), under faults on real processes:
a tracker SIGKILLed mid-transfer, a tracker hung (SIGSTOP) while a new T3 starts, Redis hung and
restarted mid-transfer, 200 first announces over both trackers, a tracker killed holding a start claim.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from btswarm.trees import compare_trees
from btswarm.redisserver import RedisServer
from tests.faults.conftest import bt_get_popen, get_json, metric, service_pid, start_throttled
from tests.faults.test_tracker import flood, seed_requests, timed_flood
from tests.support import command, free_port, http_ok, wait_for
from torrents import bencoding
from tracker.config import TrackerConfig

pytestmark = pytest.mark.slow

RATE = 2_000_000  # bytes/s per site: the 16 MiB sample takes ~4 s, long enough to break something meanwhile
INTERVAL = 4
START_WAIT = float(TrackerConfig().start_wait)  # s: how long an announce waits for a seed start (the default)


def two_trackers(tmp, idle_ttl: str, *more: str):
    """`btswarm up --redis --trackers 2` (and `more`) on two throttled sites, a 16 MiB sample, heartbeats 1 s."""
    fed = start_throttled(tmp, RATE, "--sites", "2", "--sample-files", "8", "--sample-size", "16M",
                          "--idle-ttl", idle_ttl, "--heartbeat", "1s", "--redis", "--trackers", "2", *more,
                          env={"BTSWARM_TRACKER_INTERVAL": str(INTERVAL), "BTSWARM_TRACKER_MIN_INTERVAL": "2",
                               "BTSWARM_TRACKER_REDIS_TIMEOUT": "0.5"})
    fed.hash = fed.info_hash(fed.dataset)
    assert len(fed.ready.trackers) == 2
    return fed


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    fed = two_trackers(tmp_path_factory.mktemp("trackers"), "3s")
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def finish(proc: subprocess.Popen, timeout: float = 90) -> dict:
    """The bt-get's --json document, once it exits (SIGINT while it seeds on: exit 0)."""
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate(timeout=10)
    assert proc.returncode == 0, stderr[-3000:]
    return json.loads(stdout)


def uploaded(fed) -> int:
    return sum(s["uploaded"] for n in ("site1", "site2") for s in fed.site_status(n)["seeds"])


def idle(fed) -> None:
    wait_for(lambda: fed.seeding() == {"site1": 0, "site2": 0}, timeout=30, interval=0.2, what="idle sites")
    wait_for(lambda: get_json(f"{fed.tracker_url}/api/swarms/{fed.hash}")["seeds"] == 0, timeout=3 * INTERVAL + 5,
             interval=0.2, what="no seed left in the swarm")


def test_a_tracker_killed_mid_transfer_the_other_has_the_whole_swarm(fed, tmp_path, record_property):
    idle(fed)
    out = tmp_path / "out"
    proc = bt_get_popen(fed, out, "--json", "--listen", "127.0.0.61")
    wait_for(lambda: uploaded(fed) > 3e6, timeout=30, interval=0.05, what="the transfer to be under way")
    victim = service_pid(fed, "tracker")
    os.kill(victim, signal.SIGKILL)
    # Before the supervisor has it back: the other tracker answers with every peer.
    other = get_json(f"{fed.ready.tracker_urls[1]}/api/swarms/{fed.hash}")
    assert other["leechers"] >= 1 and other["seeds"] >= 1 and other["sites"], other
    doc = finish(proc)
    assert compare_trees(fed.source, out / fed.dataset) == []
    record_property("bytes_downloaded_over_total", doc["bytes_downloaded"] / doc["bytes_total"])
    assert doc["bytes_downloaded"] <= 1.05 * doc["bytes_total"], "nothing fetched twice"


def test_a_hung_tracker_costs_a_new_client_one_tracker_timeout(fed, tmp_path, record_property):
    """SIGSTOP: the host accepts connections and never answers (a restart would hide it)."""
    idle(fed)
    victim = service_pid(fed, "tracker")  # the first in announce-list: every client asks it first
    os.kill(victim, signal.SIGSTOP)
    try:
        t0, launched = time.monotonic(), time.time()
        proc = bt_get_popen(fed, tmp_path / "out", "--json", "--listen", "127.0.0.62", "--timeout", "60")
        doc = finish(proc)
        took = time.monotonic() - t0
    finally:
        os.kill(victim, signal.SIGCONT)
    assert compare_trees(fed.source, tmp_path / "out" / fed.dataset) == []
    first_byte = doc["first_byte_at"] - launched
    record_property("failover_first_byte_s", first_byte)
    print(f"one tracker hung: first byte {first_byte:.1f} s after launch, done in {took:.1f} s")
    # libtorrent's tracker_completion_timeout (5 s, torrents/servicekit/ltsession.py), then the next tracker.
    assert 4.0 < first_byte < 12.0, first_byte  # was 30 s + start-up with the default timeouts


def store_down(fed) -> float:
    """Announces both trackers answered from memory, the store being unreachable or slow."""
    return sum(metric(u, "btswarm_tracker_announces_total", {"result": "store_down"}) for u in fed.ready.tracker_urls)


def test_200_first_announces_over_two_trackers_start_each_site_once(fed):
    # Right after the hung-tracker test, whose seeds have just idled out: a site's heartbeat built
    # before a start and received after it took the new seed out of the swarm, and the site was asked
    # again (2 runs in 10; the heartbeat's `built` stamp closes it: tests/tracker/test_seeding.py).
    idle(fed)
    posts = seed_requests(fed)
    memory_before = store_down(fed)
    h = bytes.fromhex(fed.hash)
    urls = []
    for i in range(200):
        q = urllib.parse.urlencode({"info_hash": h, "peer_id": b"-FL0002-" + f"{i:012d}".encode(),
                                    "port": 20000 + i, "left": 1000, "compact": 1, "event": "started"},
                               quote_via=urllib.parse.quote)  # a space byte is %20: '+' is a literal plus
        urls.append(f"{fed.ready.trackers[i % 2]}?{q}")
    timed = asyncio.run(timed_flood(urls, 200, 60))
    answers = [a for a, _ in timed]
    assert not any(b"failure reason" in a for a in answers)
    # A site counts a start when it answers it: on a loaded host the announces' start_wait can end
    # first. Wait for each site's count, then a moment for any second one.
    def starts() -> dict[str, float]:
        after = seed_requests(fed)
        return {n: after[n] - posts[n] for n in after}
    wait_for(lambda: all(v >= 1 for v in starts().values()), timeout=15, interval=0.2,
             what="each site to answer its start")
    time.sleep(1.0)
    delta = starts()
    print(f"200 first announces over two trackers: seed start POSTs per site {delta}")
    assert delta == {"site1": 1, "site2": 1}, delta  # every holder wanted: each site once, by one tracker
    # Every announce at either tracker waited for the starts: it has a seed, or (on a loaded host, where a
    # start can take longer than the tracker's start_wait, 2 s) it was answered only once start_wait ran out,
    # or Redis did not answer within its 0.5 s timeout and the tracker answered from memory (tracker/fallback.py,
    # counted: such an answer starts no seed).
    early = [round(took, 2) for a, took in timed if bencoding.decode(a)[b"complete"] < 1 and took < 0.95 * START_WAIT]
    from_memory = store_down(fed) - memory_before
    assert len(early) <= from_memory, \
        f"{len(early)} announces answered without a seed before start_wait ({from_memory:.0f} from memory): " \
        f"after {early[:10]} s"
    seeded = sum(1 for a in answers if bencoding.decode(a)[b"complete"] >= 1)
    print(f"{seeded} of 200 answers with a seed; the rest waited start_wait ({START_WAIT} s)")


def test_redis_hung_then_restarted_mid_transfer(fed, tmp_path, record_property):
    idle(fed)
    out = tmp_path / "out"
    proc = bt_get_popen(fed, out, "--json", "--listen", "127.0.0.63")
    wait_for(lambda: uploaded(fed) > 2e6, timeout=30, interval=0.05, what="the transfer to be under way")
    redis = service_pid(fed, "redis")
    down_before = metric(fed.tracker_url, "btswarm_tracker_announces_total", {"result": "store_down"})
    announce = (f"{fed.ready.trackers[1]}?info_hash={urllib.parse.quote_from_bytes(bytes.fromhex(fed.hash))}"
                "&peer_id=-FT0001-000000000001&port=7001&left=1&compact=1")
    os.kill(redis, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with urllib.request.urlopen(announce, timeout=10) as resp:
            answer = bencoding.decode(resp.read())
        # From the tracker's memory (tracker/fallback.py): the sites' seeds its heartbeats list, back in 5 s.
        assert answer[b"interval"] == min(5, INTERVAL) and answer[b"complete"] >= 1, answer
        assert time.monotonic() - t0 < 2.0
    finally:
        os.kill(redis, signal.SIGKILL)  # a stopped process dies too; the supervisor starts an empty one
    wait_for(lambda: service_pid(fed, "redis") not in (None, redis), timeout=15, interval=0.1,
             what="redis to be restarted")

    def answers() -> bool:
        with urllib.request.urlopen(announce, timeout=5) as resp:
            return b"failure reason" not in resp.read()
    wait_for(answers, timeout=10, interval=0.2, what="the trackers to use the new Redis")
    doc = finish(proc)
    assert compare_trees(fed.source, out / fed.dataset) == []
    assert doc["bytes_downloaded"] <= 1.05 * doc["bytes_total"]
    assert metric(fed.ready.tracker_urls[1], "btswarm_tracker_announces_total", {"result": "store_down"}) >= 1
    record_property("store_down_at_first_tracker", metric(fed.tracker_url, "btswarm_tracker_announces_total",
                                                          {"result": "store_down"}) - down_before)
    # Sites re-register by their next heartbeat: both trackers know them again.
    wait_for(lambda: all({s["name"] for s in get_json(u + "/api/sites")["sites"] if s["up"]} == {"site1", "site2"}
                         for u in fed.ready.tracker_urls), timeout=10, interval=0.2, what="sites up again")


# --- a tracker killed while it holds a start claim: its own processes, a slow stand-in site ----------

class SlowSite:
    """A site whose seed start takes 5 s to answer (real HTTP, signature checked), counting requests."""

    def __init__(self, secret: str) -> None:
        from aiohttp import web
        from torrents import auth

        self.posts: list[float] = []
        self.verifier = auth.Verifier({"site1": secret})
        app = web.Application()

        async def seeds(request: web.Request) -> web.Response:
            body = await request.read()
            self.verifier.verify(request.method, request.path_qs, request.headers, body)
            self.posts.append(time.monotonic())
            await asyncio.sleep(5)
            info_hash = json.loads(body)["info_hash"]
            return web.json_response({"state": "seeding", "info_hash": info_hash, "peers": ["127.0.0.2:6881"]})

        app.router.add_post("/api/seeds", seeds)
        self.app = app


def test_a_tracker_killed_holding_a_start_claim_the_claim_expires(tmp_path, procs):
    import threading

    from aiohttp import web
    from torrents import auth

    secret = "slow-site-secret"
    site = SlowSite(secret)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(site.app, shutdown_timeout=1.0)
    loop.run_until_complete(runner.setup())
    port = free_port("127.0.0.2")
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.2", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        with RedisServer(tmp_path / "redis") as redis:
            conf = tmp_path / "tracker.toml"
            conf.write_text(f'[tracker]\nsite_secrets = {{ site1 = "{secret}" }}\nstore = "redis"\n'
                            f'redis_url = "{redis.url}"\nstart_timeout = "2s"\nstart_wait = "1s"\n')
            urls = []
            trackers = []
            for k in range(2):
                p = free_port()
                trackers.append(procs.start(f"tracker{k}", [command("bt-tracker"), "run", "--config", str(conf),
                                                            "--listen", f"127.0.0.1:{p}"]))
                urls.append(f"http://127.0.0.1:{p}")
                wait_for(lambda: http_ok(urls[-1] + "/healthz"), timeout=20, what="bt-tracker")
            h = os.urandom(20)
            body = json.dumps({"site": "site1", "control_url": f"http://127.0.0.2:{port}", "peers": ["127.0.0.2:6881"],
                               "can_seed": [h.hex()], "seeding": [], "load": 0, "capacity": 10}).encode()
            path = "/api/sites/site1/heartbeat"
            req = urllib.request.Request(urls[0] + path, data=body, method="POST",
                                         headers={**auth.sign(secret, "site1", "POST", path, body),
                                                  "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200

            def announce(url: str, n: int, **extra: str) -> dict:
                q = urllib.parse.urlencode({"info_hash": h, "peer_id": b"-CL0001-" + b"%012d" % n, "port": 9000 + n,
                                            "left": 1, "compact": 1, **extra}, quote_via=urllib.parse.quote)
                with urllib.request.urlopen(f"{url}/announce?{q}", timeout=10) as resp:
                    return bencoding.decode(resp.read())

            # Tracker 2 learns H from Redis (a 'stopped' announce starts nothing).
            wait_for(lambda: b"failure reason" not in announce(urls[1], 0, event="stopped"), timeout=5,
                     what="tracker 2 to know H")
            # Tracker 1 claims the start and asks the site, which takes 5 s; it dies meanwhile.
            first = announce(urls[0], 1)
            assert len(site.posts) == 1 and first[b"complete"] == 0
            trackers[0].kill()
            claimed_at = site.posts[0]
            # While the claim lives (start_timeout 2 s + 2 s), tracker 2 does not ask again...
            second = announce(urls[1], 2)
            assert len(site.posts) == 1 and second[b"interval"] == 5, (site.posts, second)
            # ...and once it has expired, the next announce starts the seed.
            time.sleep(max(0.0, claimed_at + 4.2 - time.monotonic()))
            t0 = time.monotonic()
            third = announce(urls[1], 3)
            wait_for(lambda: len(site.posts) == 2, timeout=3, what="tracker 2 to ask the site")
            assert site.posts[1] - claimed_at < 6.0 and time.monotonic() - t0 < 3.0
            assert third is not None
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
