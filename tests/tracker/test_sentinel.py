"""The tracker's Redis client against real redis-servers: an ACL user (AUTH user password), TLS
(rediss:// with the federation's CA), and Redis Sentinel: a master, a replica and three sentinels,
the master hung (SIGSTOP) under a tracker, which follows the failover and keeps the swarm; the old
master continued rejoins as a replica of the new one."""

from __future__ import annotations

import hashlib
import os
import signal
import time

import pytest

from btswarm.redisserver import RedisServer, Sentinel, ping
from torrents import bencoding
from tracker.config import TrackerConfig
from tracker.resp import RedisClient, StoreUnavailable

from tests.deploy.deployment import make_pki
from tests.support import until
from tests.tracker.conftest import client_factory
from tests.tracker.helpers import SECRETS, get_raw, query

H = hashlib.sha1(b"sentinel").digest()


@pytest.fixture
async def make_app():
    async for make in client_factory():
        yield make


async def announce_raw(app, q: str) -> dict:
    status, body = await get_raw(app, "/announce?" + q)
    assert status == 200
    return bencoding.decode(body)


def from_store(answer: dict) -> bool:
    """Answered from Redis (the configured 60 s interval), not from the tracker's memory while it is
    unavailable (tracker/fallback.py: 5 s)."""
    return answer.get(b"interval", 0) >= 60


def open_config(url: str, **kw) -> TrackerConfig:
    return TrackerConfig(site_secrets=SECRETS, store="redis", redis_url=url, open=True, redis_timeout=0.5, **kw)


async def test_an_acl_user_authenticates_with_its_password(make_app, tmp_path, caplog):
    acl = ("--user", "default", "off", "--user", "tracker", "on", ">s3cret", "~*", "&*", "+@all")
    with RedisServer(tmp_path / "redis", extra=acl) as server:
        good = await make_app(open_config(f"redis://tracker:s3cret@127.0.0.1:{server.port}/2"))
        assert from_store(await announce_raw(good, query(H, port=7001)))
        for url in (f"redis://tracker:wrong@127.0.0.1:{server.port}/2", f"redis://127.0.0.1:{server.port}/2"):
            bad = await make_app(open_config(url))
            assert not from_store(await announce_raw(bad, query(H, port=7002)))
        assert "refused the connection (WRONGPASS" in caplog.text and "refused the connection (NOAUTH" in caplog.text
        # What the tracker wrote is the ACL user's, in database 2.
        client = RedisClient(f"redis://tracker:s3cret@127.0.0.1:{server.port}/2")
        try:
            assert await client.call("ACL", "WHOAMI") == b"tracker"
            assert await client.call("DBSIZE") > 0
        finally:
            await client.close()


async def test_rediss_verifies_the_server_against_the_ca_file(make_app, tmp_path, caplog):
    pki = make_pki(tmp_path / "pki", ["127.0.0.1"])
    tls_port = RedisServer(tmp_path / "unused").port
    extra = ("--tls-port", str(tls_port), "--tls-cert-file", str(pki.cert), "--tls-key-file", str(pki.key),
             "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "no")
    with RedisServer(tmp_path / "redis", extra=extra):
        url = f"rediss://127.0.0.1:{tls_port}/0"
        good = await make_app(open_config(url, redis_ca_file=str(pki.ca)))
        assert from_store(await announce_raw(good, query(H, port=7001)))
        untrusted = await make_app(open_config(url))
        assert not from_store(await announce_raw(untrusted, query(H, port=7002)))
        assert "certificate not trusted" in caplog.text and "[tracker] redis_ca_file" in caplog.text


class Group:
    """A master, a replica and three sentinels on 127.0.0.1, each a child process stopped by its PID."""

    def __init__(self, root) -> None:
        self.master = RedisServer(root / "master")
        self.replica = RedisServer(root / "replica", extra=("--replicaof", "127.0.0.1", str(self.master.port)))
        self.sentinels = [Sentinel(root / f"sentinel{i}", ("127.0.0.1", self.master.port), down_after_ms=1000,
                                   failover_timeout_ms=3000) for i in range(3)]

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(f"127.0.0.1:{s.port}" for s in self.sentinels)

    async def promoted(self) -> None:
        """Until the sentinels have made the replica master. Not the tracker's doing, so bounded loosely: an
        election whose votes split is retried after twice the failover timeout (6 s here); on a loaded CI
        host, announces were once not answered through a new master within 15 s."""
        async def master() -> bool:
            return await unless_busy(role(self.replica.port)) == b"master"
        await until(master, 45, interval=0.2, what="the sentinels to promote the replica")

    def __enter__(self) -> "Group":
        for part in (self.master, self.replica, *self.sentinels):
            part.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for part in (*self.sentinels, self.replica, self.master):
            if part.proc is not None and part.proc.poll() is None:
                os.kill(part.proc.pid, signal.SIGCONT)
            part.stop()


async def command(port: int, *args: str):
    client = RedisClient(f"redis://127.0.0.1:{port}/0", timeout=0.5)
    try:
        return await client.call(*args)
    finally:
        await client.close()


async def role(port: int) -> bytes:
    return (await command(port, "ROLE"))[0]


async def unless_busy(answer):
    """The awaited answer, or None when the server did not give it within 0.5 s (busy loading a resync)."""
    try:
        return await answer
    except StoreUnavailable:
        return None


async def test_a_hung_master_the_tracker_follows_the_failover_and_keeps_the_swarm(make_app, tmp_path):
    with Group(tmp_path) as group:
        async def replica_in_sync() -> bool:
            return b"master_link_status:up" in await command(group.replica.port, "INFO", "replication")
        await until(replica_in_sync, 10, what="the replica to sync")
        app = await make_app(open_config("redis://127.0.0.1:1/0", redis_sentinels=group.addresses,
                                         redis_master="btswarm"))
        assert from_store(await announce_raw(app, query(H, port=7001, left=0)))  # a seed, at the master
        # Replication is asynchronous: a write the master answered but had not yet passed on is lost in a
        # failover (the tracker's state is soft: the next announce writes it again). Hung once it is copied.
        async def seed_copied() -> bool:
            return await command(group.replica.port, "ZCARD", f"{app_prefix(app)}{{{H.hex()}}}:s") == 1
        await until(seed_copied, 10, what="the replica to hold the seed")
        os.kill(group.master.proc.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        await group.promoted()
        t1 = time.monotonic()

        async def served() -> bool:
            return from_store(await announce_raw(app, query(H, b"-TT0001-000000000002", port=7002)))
        await until(served, 15, interval=0.2, what="announces answered through the new master")
        print(f"hung master: the replica promoted {t1 - t0:.1f} s after the SIGSTOP, announces answered "
              f"{time.monotonic() - t1:.1f} s later")
        answer = await announce_raw(app, query(H, b"-TT0001-000000000003", port=7003))
        assert answer[b"complete"] == 1 and answer[b"incomplete"] == 2, "the seed recorded before the hang is kept"
        assert await role(group.replica.port) == b"master"
        # The old master continued: the sentinels make it a replica of the new one, which it copies.
        os.kill(group.master.proc.pid, signal.SIGCONT)

        async def demoted() -> bool:
            return ping("127.0.0.1", group.master.port) and await unless_busy(role(group.master.port)) == b"slave"
        await until(demoted, 30, interval=0.2, what="the old master to come back as a replica")
        async def copied() -> bool:
            key = f"{app_prefix(app)}{{{H.hex()}}}:l"
            return await unless_busy(command(group.master.port, "ZCARD", key)) == 2
        await until(copied, 10, interval=0.2, what="the old master to hold the new master's swarm")
        assert (await announce_raw(app, query(H, b"-TT0001-000000000004", port=7004)))[b"incomplete"] == 3


def app_prefix(app) -> str:
    from tracker.app import ANNOUNCER
    return app.server.app[ANNOUNCER].store.prefix.decode()


async def test_a_connection_idle_over_the_hang_writes_to_the_new_master_not_the_old_one(tmp_path):
    """The old master, continued, calls itself master for ~10 s more: a client whose connection to it sent
    nothing during the hang would write there (lost at its resync) if +switch-master did not drop it."""
    with Group(tmp_path) as group:
        client = RedisClient("redis://127.0.0.1:1/0", sentinels=[("127.0.0.1", s.port) for s in group.sentinels],
                             master="btswarm", timeout=0.5)
        try:
            await client.call("PING")
            assert client.address == f"127.0.0.1:{group.master.port}"
            async def subscribed() -> bool:
                lists = [await command(s.port, "CLIENT", "LIST") for s in group.sentinels]
                return any(b"cmd=subscribe" in text for text in lists)
            await until(subscribed, 5, what="the client's +switch-master subscription at a sentinel")
            os.kill(group.master.proc.pid, signal.SIGSTOP)

            await group.promoted()
            os.kill(group.master.proc.pid, signal.SIGCONT)
            assert await role(group.master.port) == b"master"  # not demoted yet
            await until(lambda: not client.connected, 5, what="the failover to drop the connection")
            await client.call("SET", "written-after-the-failover", "1")
            assert client.address == f"127.0.0.1:{group.replica.port}"
            assert await command(group.replica.port, "GET", "written-after-the-failover") == b"1"
        finally:
            await client.close()
