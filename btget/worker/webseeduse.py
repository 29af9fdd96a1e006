"""The web seeds one worker's torrent uses now: added and dropped as the parent says (btget/transfer/webseeds.py
decides when), each through its relay (btget/worker/doorrelay.py), and those that sent bad pieces dropped and
reported to the parent."""

from __future__ import annotations

from typing import Any

from torrents.hostport import url_endpoint
from torrents.proxyenv import NONE, Proxies
from torrents.servicekit import tls

from btget import events
from btget.resolve.bearer import TokenSource
from btget.worker import doorrelay, sources

PROBE_EVERY = 5.0  # seconds between announces while web seeds stand in for peers (peers blocked: try again)
# A web seed dropped once it took part in this many pieces that failed their SHA1 check: libtorrent
# bans one at once only when it alone sent the piece, and a web seed that goes on sending bad
# ranges costs a re-fetch each time.
HASHFAILS = 2


class WebSeedUse:
    def __init__(self, index: int, ledger: sources.Ledger, urls: tuple[str, ...], proxies: Proxies = NONE,
                 token: TokenSource | None = None) -> None:
        self.index = index
        self.ledger = ledger
        # libtorrent asks each http web seed through a relay; for a members-only dataset https ones too, the
        # relay adding the current token (verified with the CAs the session trusts: tls.py)
        self.relays = (doorrelay.Relays(proxies, token.header, tls.client_context()) if token
                       else doorrelay.Relays(proxies))
        self.urls = set(urls)  # in use now, as the parent names them
        self.probe = False  # web seeds stand in for peers: keep asking the tracker for them
        self.next_probe = 0.0
        self.bans_seen = False  # libtorrent banned some peer: maybe a web seed (see banned)
        self.handle: Any = None  # the torrent's, once added

    def relayed(self, url: str) -> str:
        """The URL libtorrent is given for web seed `url`: its relay's, counted as a web seed's endpoint."""
        local = self.relays.local(url)
        self.ledger.web_seeds |= self.relays.endpoints
        return local

    def use(self, command: events.WebSeeds, now: float) -> None:
        """Use exactly the web seeds the parent named (adding and removing url seeds on the handle)."""
        wanted = set(command.urls)
        for url in sorted(self.urls - wanted):
            self.handle.remove_url_seed(self.relays.local(url))  # its connection closes; its requests go back
        for url in sorted(wanted - self.urls):
            self.handle.add_url_seed(self.relayed(url))
        self.urls = wanted
        self.ledger.web_seeds |= endpoints(command.urls)
        self.probe = command.probe
        self.next_probe = now + PROBE_EVERY

    def probe_due(self, now: float) -> bool:
        """Whether to announce now: while web seeds stand in for blocked peers, every PROBE_EVERY. Blocked
        peers are given up after a few failures; handed out again by the tracker they are tried again, so
        one that became reachable is found."""
        if not self.probe or now < self.next_probe:
            return False
        self.next_probe = now + PROBE_EVERY
        return True

    def peer_banned(self) -> list[events.WebSeedBanned]:
        """libtorrent banned a peer: maybe a web seed (looked at now, and again at each `recheck`)."""
        if not self.urls:
            return []
        self.bans_seen = True
        return self.banned()

    def recheck(self) -> list[events.WebSeedBanned]:
        return self.banned() if self.bans_seen and self.urls else []

    def bad(self, connections: list[sources.Connection]) -> list[events.WebSeedBanned]:
        """Drop the web seeds whose connections took part in HASHFAILS failed pieces."""
        bad = {(c.ip, c.port) for c in connections if c.web_seed and c.hashfails >= HASHFAILS}
        return self.banned({u for u in self.urls if endpoints((u,)) & bad}) if bad else []

    def banned(self, also: set[str] = frozenset()) -> list[events.WebSeedBanned]:
        """Web seeds that sent pieces failing their SHA1 check: those libtorrent banned (it removes them
        from the torrent, so they are the URLs gone from the handle) and `also` (dropped here)."""
        for url in also & self.urls:
            self.handle.remove_url_seed(self.relays.local(url))
        gone = (self.urls - {self.relays.original(u) for u in self.handle.url_seeds()}) | (also & self.urls)
        self.urls -= gone
        return [events.WebSeedBanned(self.index, url) for url in sorted(gone)]


def endpoints(urls: tuple[str, ...]) -> set[tuple[str, int]]:
    """(host, port) of http(s) URLs."""
    return {ep for ep in map(url_endpoint, urls) if ep[0]}
