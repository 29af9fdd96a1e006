"""Which seeds make a swarm's seeds enough: the sites' own. Pure.

Any peer may announce `left=0`. Counted as a seed, one that lies (a
corrupt copy whose resume data claims every piece) or an honest T3 seeding
on from behind a NAT that nobody can reach kept every site from being
asked: the leechers banned the one or never reached the other, then waited
out bt-get's 30 s stall limit and failed (issue 26).

What would show that a peer serves is its word or a leecher's: its
`uploaded` and `left`, a `completed` event, a leecher's `downloaded`
growing while it was the only seed. A liar says whatever it likes, and may
run the leechers that vouch for it, so none of these decides. What a peer
cannot forge is a site's signed heartbeat, and the address a TCP
connection comes from. So only sites count toward the seeds a swarm with
leechers wants: a seed of H in the swarm at a peer endpoint that a site's
heartbeat declares. A site that is down, or whose seed of H is stuck, does
not count. An announce first counts, without reading the swarm's seeds,
the sites whose heartbeat says they seed H, no more than the swarm has
seeds (`at_once`); when that is short, the start path reads the swarm.

Every other seed is still handed out, as an extra peer: an honest one
spares the sites' uplinks (the T3s take pieces from it), a dishonest one
costs a leecher one bad piece before it is banned. And whenever a site
seeds H, every leecher's answer carries one of its seeds (`site_seed`),
however many other seeds crowd the swarm, so a leecher that banned or
could not reach the others finds it in its next answer.
"""

from __future__ import annotations

import hashlib
import random
from typing import Iterable, Sequence

from tracker import protocol
from tracker.peerstore import SwarmView
from tracker.sites import SiteRegistry

Endpoint = tuple[str, int]


def seeding_sites(registry: SiteRegistry, info_hash: bytes, seeds: Iterable[Endpoint]) -> frozenset[str]:
    """The sites whose seeds of H count: up, not stuck on H, with one of `seeds` (the swarm's) at a peer
    endpoint they declared. The swarm decides, not the heartbeat: a seed that idled out says `stopped`
    before its site's next heartbeat says so."""
    site_at = registry.site_at
    return _usable(registry, info_hash, {name for ep in seeds if (name := site_at.get(ep)) is not None})


def said_seeding(registry: SiteRegistry, info_hash: bytes) -> frozenset[str]:
    """The sites whose last heartbeat says they seed H (up, not stuck on H): what an announce reads at once,
    without the swarm's seeds."""
    return _usable(registry, info_hash, registry.seeders.get(info_hash, ()))


def at_once(said: int, complete: int) -> int:
    """The sites' seeds an announce counts before it reads the swarm's seeds: those the heartbeats say, but
    no more than the swarm holds seeds. Fewer (a site's seed left, or liars crowd the swarm): the start path
    reads the swarm (`seeding_sites`) and decides."""
    return min(said, complete)


def _usable(registry: SiteRegistry, info_hash: bytes, names: Iterable[str]) -> frozenset[str]:
    out = set()
    for name in names:
        site = registry.get(name)
        if site is not None and registry.is_up(site) and info_hash not in site.stuck:
            out.add(name)
    return frozenset(out)


def holding_sites(registry: SiteRegistry, info_hash: bytes) -> list[str]:
    """The sites that could seed H now: up, listing it in their last heartbeat, their seed of it not stuck
    (nor their web seed: it reads the same hanging storage)."""
    return sorted(n for n in registry.holders.get(info_hash, ())
                  if (s := registry.get(n)) is not None and registry.is_up(s) and info_hash not in s.stuck)


def site_seed(registry: SiteRegistry, sites: Iterable[str], requester: Endpoint,
              rng: random.Random, *, ssl: bool = False) -> Endpoint | None:
    """One peer endpoint of the sites in `sites` (chosen at random, so leechers spread over them), not the
    requester's own, in the requester's address family where a site has one (BEP 7: a site on both families
    lists both, and a host that asked over IPv6 may have no IPv4 route); None when they have none."""
    # A restricted dataset's swarm (`ssl`): only the sites' SSL sockets, where its SSL torrent is seeded.
    by_site = registry.ssl_endpoints if ssl else registry.endpoints
    endpoints = [ep for name in sorted(sites) for ep in by_site.get(name, ()) if ep != requester]
    same = [ep for ep in endpoints if (":" in ep[0]) == (":" in requester[0])]
    endpoints = same or endpoints
    return endpoints[rng.randrange(len(endpoints))] if len(endpoints) > 1 else endpoints[0] if endpoints else None


def site_peer_id(site: str, endpoint: tuple[str, int]) -> bytes:
    """A stable 20-byte id for a seed the tracker added on a site's word (its own announce replaces it)."""
    return hashlib.sha1(f"{site}\0{endpoint[0]}:{endpoint[1]}".encode()).digest()


def with_site_seed(registry: SiteRegistry, ann: protocol.Announce, view: SwarmView, seeding: Iterable[str],
                   rng: random.Random) -> SwarmView:
    """`view` with a seed of one of the sites `seeding` among its peers: the swarm's other seeds may be liars
    or unreachable, however many they are."""
    if not seeding or ann.numwant <= 0:
        return view
    ep = site_seed(registry, seeding, (ann.ip, ann.port), rng, ssl=ann.info_hash in registry.restricted)
    if ep is None:
        return view
    numwant = min(ann.numwant, protocol.MAX_NUMWANT)
    if not ann.compact:
        name = registry.site_at.get(ep, "")
        return view._replace(listed=in_listed(view.listed or [], (*ep, site_peer_id(name, ep)), numwant))
    try:
        packed, ipv6 = protocol.compact_endpoint(*ep)
    except (OSError, ValueError):
        return view
    if ipv6:
        return view._replace(peers6=with_peer(view.peers6, packed, numwant - len(view.peers4) // 6))
    return view._replace(peers4=with_peer(view.peers4, packed, numwant - len(view.peers6) // 18))


def with_peer(peers: bytes, peer: bytes, numwant: int) -> bytes:
    """Compact `peers` (BEP 23 or BEP 7, all of `peer`'s width) with `peer` among them: as they are if it is
    there, else first, the last one dropped if that makes more than `numwant`."""
    width = len(peer)
    at = peers.find(peer)
    while at >= 0 and at % width:  # a match across two entries is not the peer
        at = peers.find(peer, at + 1)
    if at >= 0 or numwant <= 0:
        return peers
    return peer + peers[:max(0, numwant - 1) * width]


def in_listed(listed: Sequence[tuple[str, int, bytes]], peer: tuple[str, int, bytes],
              numwant: int) -> list[tuple[str, int, bytes]]:
    """The same for a non-compact answer's (ip, port, peer id) entries."""
    if numwant <= 0 or any(ip == peer[0] and port == peer[1] for ip, port, _ in listed):
        return list(listed)
    return [peer, *listed[:max(0, numwant - 1)]]
