"""When bt-get fetches from the sites' web seeds (BEP 19) and when it goes back to BitTorrent peers. Pure.

The repository lists in each .torrent the web seeds of the sites that hold
the dataset now (docs/webseeds.md). A campus firewall that drops or refuses
peer ports leaves a T3 with nothing but those; a T3 whose peers are
reachable must not load the sites' HTTP doors at all. So, in the default
mode (`auto`), the web seeds are used only when BitTorrent does not deliver:

- no BitTorrent peer (not a sibling worker) connected for `after` seconds,
  since the start or since the last one left;
- peers blocked: connections attempted, refused or unanswered, and none
  made, `blocked_after` seconds after the first attempt (sooner than
  `after`: a reachable peer answers in a few round trips, a firewall that
  drops SYNs never does; counted from the attempt, not the run's start, so
  that a loaded host's slow start is not taken for a firewall);
- no peer can be known at all: every tracker fails, or there is none and no
  `--peer`;
- peers connected but silent for `idle_after` seconds (a swarm stuck on
  pieces none of them has; sooner than bt-get's blocked_after, 30 s);
- at once, when the peer wire is presumed out of reach (`unreachable`, the
  reason: the tracker is reached through an HTTP proxy, btget/resolve/reach.py).

A peer that is connected and waits its turn (a site serves `upload_slots`
T3s at a time, the others take pieces from those) is no reason: the web
seeds are the sites' uplinks too, and spared while the swarm works.

While they are in use the workers keep asking the tracker for peers
(btget/worker/process.py), so a peer that becomes reachable is tried again; once
BitTorrent peers have sent `back_bytes` since the switch, the web seeds are
dropped and the rest comes from peers. A web seed that sent pieces failing
their SHA1 check (libtorrent bans it) is never used again in this run.
`--web-seeds-always` uses them from the start; `--no-web-seeds` never.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from torrents.hostport import format_hostport, url_endpoint


class Mode(enum.Enum):
    AUTO = "auto"
    OFF = "off"
    ALWAYS = "always"


@dataclass(frozen=True)
class Source:
    """One web seed: its BEP 19 base URL and the site that lists it (None: given with --web-seed)."""

    url: str
    site: str | None = None

    @property
    def endpoint(self) -> str:
        """host:port, as libtorrent names the connection."""
        return format_hostport(*url_endpoint(self.url))

    @property
    def label(self) -> str:
        return f"{self.site} ({self.endpoint})" if self.site else self.endpoint


@dataclass(frozen=True)
class Rule:
    mode: Mode = Mode.AUTO
    sources: tuple[Source, ...] = ()
    after: float = 5.0
    blocked_after: float = 1.5
    idle_after: float = 20.0
    back_bytes: int = 256 * 1024
    peer_sources: bool = True  # the torrent has a tracker, or peers were given
    unreachable: str = ""  # why peers are presumed out of reach from the start ("": they are not)

    @property
    def usable(self) -> bool:
        return self.mode is not Mode.OFF and bool(self.sources)


@dataclass(frozen=True)
class Seen:
    """What the workers last said, summed over them."""

    peer_bytes: int = 0  # payload from BitTorrent peers that are not sibling workers
    peers_connected: int = 0  # such peers connected now
    connect_attempts: int = 0  # connections to such peers tried
    connect_failures: int = 0  # connections to such peers that failed (refused, timed out)
    trackers_failing: bool = False  # every worker's last announce failed


@dataclass
class State:
    active: bool
    since: float  # when the web seeds were last switched on or off (or the run started)
    peer_moved_at: float  # when BitTorrent peers last sent a byte (or the run started)
    connected_at: float  # when a BitTorrent peer was last seen connected (or the run started)
    tried_at: float | None = None  # when connections to peers were first seen attempted
    peer_bytes: int = 0
    peer_bytes_at_switch: int = 0
    ever_connected: bool = False
    banned: set[str] = field(default_factory=set)  # URLs libtorrent banned for corrupt pieces
    switches: list[tuple[float, bool, str]] = field(default_factory=list)  # (when, on, why)

    @classmethod
    def start(cls, rule: Rule, now: float) -> "State":
        return cls(active=rule.usable and rule.mode is Mode.ALWAYS, since=now, peer_moved_at=now, connected_at=now)


@dataclass(frozen=True)
class Switch:
    """The web seeds the workers use from now on (none: BitTorrent alone), and why."""

    sources: tuple[Source, ...]
    why: str
    probe: bool = False  # in use in auto mode: keep asking the tracker for peers to go back to
    warning: bool = False  # said as a warning, on stderr even in a batch job (the peer wire out of reach)


def usable(rule: Rule, state: State) -> tuple[Source, ...]:
    return tuple(s for s in rule.sources if s.url not in state.banned)


def initial(rule: Rule) -> tuple[Source, ...]:
    """What the workers start with: every web seed with --web-seeds-always, else none."""
    return rule.sources if rule.usable and rule.mode is Mode.ALWAYS else ()


def decide(rule: Rule, state: State, seen: Seen, now: float, complete: bool) -> Switch | None:
    """Switch the web seeds on or off, or leave them (None); updates `state`."""
    if seen.peer_bytes > state.peer_bytes:
        state.peer_bytes, state.peer_moved_at = seen.peer_bytes, now
    if seen.peers_connected:
        state.ever_connected, state.connected_at = True, now
    if state.tried_at is None and (seen.connect_attempts or seen.connect_failures):
        state.tried_at = now
    if not rule.usable or rule.mode is Mode.ALWAYS or complete:
        return None
    if state.active:
        moved = state.peer_bytes - state.peer_bytes_at_switch
        if moved < rule.back_bytes:
            return None
        return _switch(state, False, now, Switch((), f"BitTorrent peers reachable again ({moved} bytes from "
                                                     "them): the rest comes from peers"))
    sources = usable(rule, state)
    if not sources:
        return None
    why, warning = None, False
    if rule.unreachable and not state.switches:
        why, warning = rule.unreachable, True
    elif not rule.peer_sources:
        why = "no tracker and no peer to ask"
    elif seen.trackers_failing and not state.ever_connected:
        why = "no tracker answers"
    elif (state.tried_at is not None and not state.ever_connected and not state.peer_bytes
          and now - max(state.since, state.tried_at) >= rule.blocked_after):
        tried = max(seen.connect_attempts, seen.connect_failures)
        why = (f"no connection to a peer in {now - max(state.since, state.tried_at):.1f} s ({tried} tried, "
               f"{seen.connect_failures} refused or timed out): peer ports blocked?")
    elif not seen.peers_connected and now - max(state.since, state.connected_at) >= rule.after:
        why = f"no BitTorrent peer connected for {rule.after:g} s"
    elif now - max(state.since, state.peer_moved_at) >= rule.idle_after:
        why = f"no byte from the {seen.peers_connected} BitTorrent peers connected in {rule.idle_after:g} s"
    if why is None:
        return None
    names = ", ".join(s.label for s in sources)
    return _switch(state, True, now, Switch(sources, f"{why}; fetching from the web seeds of {names}", probe=True,
                                            warning=warning))


def banned(rule: Rule, state: State, url: str) -> Switch | None:
    """libtorrent banned the web seed `url` (its pieces failed the SHA1 check): never use it again."""
    if url in state.banned:
        return None
    state.banned.add(url)
    label = next((s.label for s in rule.sources if s.url == url), url)
    in_use = usable(rule, state) if state.active else ()
    return Switch(in_use, f"web seed {label} sent pieces that failed their SHA1 check: dropped",
                  probe=state.active and rule.mode is Mode.AUTO)


def _switch(state: State, on: bool, now: float, switch: Switch) -> Switch:
    state.active = on
    state.since = now
    state.peer_bytes_at_switch = state.peer_bytes
    state.switches.append((now, on, switch.why))
    return switch
