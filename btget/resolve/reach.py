"""How this host reaches the federation, and whether it can be reached: proxies and closed nodes. Pure.

Three kinds of traffic leave a T3 (docs/architecture.md): HTTP to the
repository, the tracker and the sites' web seeds, and the BitTorrent peer
wire. The first go through the proxy `http_proxy`/`https_proxy`/`no_proxy`
name for each URL (torrents/proxyenv.py): the repository through bt-get's
aiohttp session, the announces through libtorrent's own proxy setting (one
per session: the proxy of the first tracker that has one), the web seeds
through btget/worker/doorrelay.py. The peer wire cannot go through an HTTP proxy
(a site's squid allows CONNECT to port 443 only, and BitTorrent is no HTTP).

So bt-get takes a tracker reached through a proxy as the sign of a node whose
way out is that proxy, and plans for it at once rather than after
web_seed_after of silence:

- the sites' web seeds are used from the start, through the proxy; peers are
  still tried, and take over as soon as they send (btget/transfer/webseeds.py), so a
  node that can in fact connect out directly loses a few seconds of its
  sites' HTTP doors, no more;
- the announces say `inbound=0`: they reach the tracker from the proxy's
  address, which is no peer, and nothing can connect in to such a node.

A closed node (`[get] closed`, `--closed`: NAT, a firewall that drops inbound
connections) says `inbound=0` too. The tracker then hands it the swarm's
peers but never hands it out to anyone (tracker/announcer.py): others would
wait `peer_connect_timeout` on it for nothing, and a closed seed would take
the place of a seed they can reach. It still uploads, on the connections
it makes itself, and the tracker asks it back every 5 s so that it finds the
peers that arrive after it; complete, it stays CLOSED_STAY (within linger)
for the same reason. A node cannot tell on its own that nothing reaches it
(only a third party could, by connecting back), so it is a setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence
from urllib.parse import urlsplit, urlunsplit

from torrents.proxyenv import Proxies, Proxy

CLOSED_PARAM = "inbound=0"  # in an announce: this peer accepts no inbound connection (tracker/protocol.py)
# How long a closed T3 stays once complete, whatever it sees (within [get] linger): its completion's announce
# brings it the T3s that came since the last one, and it must connect to them before it can tell whether
# they still need it (btget/transfer/runstate.py).
CLOSED_STAY = 5.0


@dataclass(frozen=True)
class Reach:
    tracker_proxy: Proxy | None = None  # the proxy libtorrent announces through (None: direct)
    closed: bool = False  # the announces say inbound=0
    unreachable: str = ""  # why the peer wire is presumed out of reach: web seeds from the start ("": it is not)
    note: str = ""  # said once at the start ("": nothing to say)


def plan(proxies: Proxies, trackers: Sequence[str], closed: bool) -> Reach:
    """What the proxies and the closed setting mean for a download from `trackers`."""
    proxy = next((p for p in map(proxies.for_url, trackers) if p is not None), None)
    if proxy is None:
        note = "this host accepts no inbound connection ([get] closed): the tracker is told not to hand it out" \
            if closed else ""
        return Reach(closed=closed, note=note)
    return Reach(tracker_proxy=proxy, closed=True,
                 unreachable=f"the tracker is reached through the proxy {proxy.url} and BitTorrent peers cannot be "
                             "(no HTTP proxy carries the peer wire; peers take over if they connect, --no-proxy "
                             "goes direct)")


def announce_url(url: str, closed: bool) -> str:
    """A tracker URL as this host announces to it: with inbound=0 when it is closed."""
    if not closed:
        return url
    parts = urlsplit(url)
    if CLOSED_PARAM in parts.query.split("&"):
        return url
    query = f"{parts.query}&{CLOSED_PARAM}" if parts.query else CLOSED_PARAM
    return urlunsplit(parts._replace(query=query))
