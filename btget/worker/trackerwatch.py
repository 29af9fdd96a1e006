"""What a worker makes of its trackers' failures: what the parent is told, and whether it is final.

libtorrent reports each announce that failed as an alert; the worker hands
its parts here (`failure_of`: a `Failure`) and sends what comes back to the parent, whose
btget/transfer/runstate.py decides the run. A dead or refusing tracker is the usual
reason for "0 seeds": the user is told, rather than left to watch a still bar.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Any

from torrents.hostport import ANY, format_hostport, url_endpoint
from torrents.servicekit import tls

from btget import events

SKIPPED = "skipping tracker announce"  # libtorrent's words when a listen address has no route to a tracker
REFUSALS_DEFINITIVE = 3  # connections a tracker refused in a row before that is its answer
REASONS_DEFINITIVE = 2  # refusals with a reason in a row before that is its answer
REASON_RECHECK = 3  # seconds before asking a tracker that gave a reason once more


@dataclass(frozen=True)
class Failure:
    url: str
    said: str  # the tracker's own failure reason, "" when it gave none
    error: str  # libtorrent's message
    code: int  # its errno value
    times_in_row: int
    local: str  # the listen endpoint it was announced from


def failure_of(alert: Any) -> Failure:
    """A tracker_error_alert's parts."""
    return Failure(alert.tracker_url(), alert.failure_reason(), alert.error.message(), alert.error.value(),
                   alert.times_in_row, format_hostport(str(alert.local_endpoint[0]), int(alert.local_endpoint[1])))


@dataclass
class TrackerWatch:
    index: int  # the worker's
    listen_ip: str
    listening: set[str] = field(default_factory=set)  # TCP listen endpoints: one per address of the host with ANY
    skipped: dict[str, set[str]] = field(default_factory=dict)  # URL → the endpoints with no route to it

    def replied(self, alert: Any) -> events.TrackerReply:
        """A tracker_reply_alert, for the parent."""
        return events.TrackerReply(self.index, True, alert.tracker_url(), f"{alert.num_peers} peers")

    def failed(self, f: Failure) -> tuple[events.TrackerReply | None, float | None]:
        """What to tell the parent (None: nothing yet), and in how many seconds to ask again (None: when
        libtorrent would)."""
        if self._unreachable_from_some(f):
            return None, None
        reason = f.said or f.error
        # An https tracker whose certificate we cannot verify: final at once (our CAs do not change while we run).
        untrusted = None if f.said else tls.libtorrent_problem(reason, tls.FLAG_HINT)
        # It answered with a reason twice (once may be a tracker that has not yet heard the
        # site's heartbeat for a dataset just published), or nobody listens there, every time.
        often = f.times_in_row >= (REASONS_DEFINITIVE if f.said else REFUSALS_DEFINITIVE)
        definitive = bool(untrusted) or often and (bool(f.said) or f.code == errno.ECONNREFUSED)
        if not f.said and not untrusted:
            reason += bound_elsewhere(self.listen_ip, f.url)
        # A reason given once: ask again soon rather than after libtorrent's half-minute back-off.
        again = REASON_RECHECK if f.said and not definitive else None
        return events.TrackerReply(self.index, False, f.url, untrusted or reason, definitive), again

    def _unreachable_from_some(self, f: Failure) -> bool:
        """Listening everywhere, libtorrent announces from each address, and one that has no route to the
        tracker (loopback, for a tracker on another host) is skipped: not the tracker's failure while
        another address may reach it. True for such a skip (said once every address has skipped)."""
        if self.listen_ip != ANY or SKIPPED not in f.error:
            return False
        skipped = self.skipped.setdefault(f.url, set())
        skipped.add(f.local)
        return not self.listening <= skipped


def bound_elsewhere(listen_ip: str, url: str) -> str:
    """Why a tracker may be out of reach, when it is that: our sessions are bound to `listen_ip` (--listen)
    and this host reaches the tracker from another address, which a bound connection cannot use ("" when
    not bound, or bound to the right one)."""
    from torrents.hostport import is_local, source_address

    if listen_ip == ANY:
        return ""
    host, port = url_endpoint(url)
    try:
        source = source_address(host, port)
    except (OSError, ValueError):
        return f" (bt-get is bound to {listen_ip} by --listen/[get] listen, and this host has no route to {host})"
    if source == listen_ip or (":" in source) == (":" in listen_ip) and is_local(host):
        return ""  # bound or not, a connection to this host's own address stays on it
    return f" (bt-get is bound to {listen_ip} by --listen/[get] listen, but this host reaches {host} " \
           f"from {source}: leave listen unset to use every address)"

