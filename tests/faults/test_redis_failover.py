"""Losing the Redis host under `btswarm up --redis --redis-replicas 1 --trackers 2` (a master, a replica,
three sentinels, two trackers following the master through them), on real processes: the master hung
(SIGSTOP) mid-fetch, then continued; the master killed mid-fetch (the supervisor starts it again, empty).
Each time the fetch in progress completes, a T3 started after the fault is served within 15 s, no site is
asked twice for its seed, and the old master comes back as a replica of the new one: one state."""

from __future__ import annotations

import os
import signal
import socket
import time
import tomllib

import hiredis
import pytest

from btswarm.trees import compare_trees
from tests.faults.conftest import bt_get_popen, get_json, service_pid
from tests.faults.test_tracker import seed_requests
from tests.faults.test_trackers import finish, two_trackers, uploaded
from tests.support import wait_for

pytestmark = pytest.mark.slow

SERVED_WITHIN = 15.0


@pytest.fixture(scope="module")
def fed(tmp_path_factory):
    # idle_ttl 60 s: the first fetch's seeds still run for the later ones, so any start POST is a second one.
    fed = two_trackers(tmp_path_factory.mktemp("failover"), "60s", "--redis-replicas", "1")
    config = tomllib.loads((fed.state / "config" / "tracker.toml").read_text())["tracker"]
    fed.sentinels = [int(a.rpartition(":")[2]) for a in config["redis_sentinels"]]
    yield fed
    assert fed.stop(timeout=30) == 0, fed.log()[-3000:]


def redis(port: int, *args: str, timeout: float = 2.0):
    """One command to the redis-server (or sentinel) on 127.0.0.1:port."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a.encode()) for a in args]))
        reader = hiredis.Reader()
        while (reply := reader.gets()) is False:
            reader.feed(s.recv(65536))
        return reply


def named(fed) -> set[int]:
    """The ports of the masters the sentinels name: one, unless a failover is under way."""
    return {int(redis(p, "SENTINEL", "get-master-addr-by-name", "btswarm")[1]) for p in fed.sentinels}


def master_port(fed) -> int:
    """The master all three sentinels name (they agree: asserted)."""
    ports = named(fed)
    assert len(ports) == 1, f"the sentinels disagree: {ports}"
    return ports.pop()


def role(port: int) -> str:
    try:
        return redis(port, "ROLE")[0].decode()
    except OSError:
        return "down"


def fetch_and_fault(fed, tmp_path, fault, record_property, label: str) -> tuple[int, int]:
    posts = seed_requests(fed)
    first = bt_get_popen(fed, tmp_path / "first", "--json", "--listen", "127.0.0.61")
    wait_for(lambda: uploaded(fed) > 6e6, timeout=30, interval=0.05, what="the first fetch to be a third done")
    old = master_port(fed)
    old_pid = fault(old)
    launched, t0 = time.time(), time.monotonic()
    t3 = bt_get_popen(fed, tmp_path / "t3", "--json", "--listen", "127.0.0.62", "--timeout", "60")
    wait_for(lambda: len(ports := named(fed)) == 1 and old not in ports, timeout=SERVED_WITHIN, interval=0.1,
             what="all three sentinels to name a new master")
    print(f"{label}: the sentinels named a new master {time.monotonic() - t0:.1f} s after the fault")
    doc = finish(t3)
    served = doc["first_byte_at"] - launched
    record_property(f"{label}_t3_first_byte_s", served)
    print(f"{label}: a T3 started at the fault had its first byte {served:.1f} s later")
    assert compare_trees(fed.source, tmp_path / "t3" / fed.dataset) == []
    assert served < SERVED_WITHIN, served
    finish(first)
    assert compare_trees(fed.source, tmp_path / "first" / fed.dataset) == []
    after = seed_requests(fed)
    assert all(after[n] - posts[n] <= 1 for n in posts), f"a site asked twice: {posts} -> {after}"
    return old, old_pid


def one_state(fed, old: int) -> None:
    """The old master is a replica of the one master the sentinels name, and holds what is written there."""
    new, t0 = master_port(fed), time.monotonic()
    wait_for(lambda: role(old) == "slave", timeout=30, interval=0.2, what="the old master to become a replica")
    print(f"the old master on {old} is a replica {time.monotonic() - t0:.1f} s after it was back")
    wait_for(lambda: b"master_link_status:up" in redis(old, "INFO", "replication"), timeout=20, interval=0.2,
             what="the old master to sync from the new one")
    assert b"master_port:%d" % new in redis(old, "INFO", "replication")
    assert [role(p) for p in (old, new)] == ["slave", "master"]
    marker = os.urandom(8).hex()
    redis(new, "SET", "failover-test", marker)
    wait_for(lambda: redis(old, "GET", "failover-test") == marker.encode(), timeout=10, interval=0.1,
             what="a write at the new master to reach the old one")
    # Both trackers answer from the same swarm: the sites' seeds are there.
    for url in fed.ready.tracker_urls:
        assert get_json(f"{url}/api/swarms/{fed.hash}")["seeds"] >= 1


def test_a_hung_master_fails_over_and_comes_back_as_a_replica(fed, tmp_path, record_property):
    stopped = []

    def hang(port: int) -> int:
        pid = service_pid(fed, "redis" if port == fed_master_port(fed) else f"redis:{port}")
        os.kill(pid, signal.SIGSTOP)
        stopped.append(pid)
        return pid

    try:
        old, pid = fetch_and_fault(fed, tmp_path, hang, record_property, "master hung")
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    one_state(fed, old)


def test_a_killed_master_fails_over_and_its_restart_is_a_replica(fed, tmp_path, record_property):
    def kill(port: int) -> int:
        pid = service_pid(fed, "redis" if port == fed_master_port(fed) else f"redis:{port}")
        os.kill(pid, signal.SIGKILL)
        return pid

    old, pid = fetch_and_fault(fed, tmp_path, kill, record_property, "master killed")
    wait_for(lambda: role(old) != "down", timeout=15, interval=0.1, what="the supervisor to start it again")
    one_state(fed, old)


def fed_master_port(fed) -> int:
    """The port of the Redis `btswarm up` started as master (the label "redis")."""
    return int(fed.ready.redis.rstrip("/").rpartition("/")[0].rpartition(":")[2])
