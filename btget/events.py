"""What bt-get's worker processes and their parent say to each other: one dataclass per message.

Both sides import these, so a renamed or missing field fails loudly where it
is made, not as a silent 0 in the report. Workers send events; the parent
sends commands; `WorkerGone`, `Tick` and `Verified` are the parent's own
(a broken pipe, time passing, the checksum check done), fed to the same
pure decision function (btget.transfer.runstate.step).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Phase(enum.Enum):
    RUNNING = "running"  # fetching its share (or seeding it, once finished)
    FINISHED = "finished"  # every wanted piece passed its check and is on disk
    STOPPED = "stopped"  # the last event of a worker: its resume state is on disk


# Progress.state values before libtorrent knows what is on disk (resume state read, files hashed).
CHECKING = frozenset({"starting", "checking_resume_data", "checking_files", "allocating"})

WEB_SEED = "web seed "  # Progress.sources: the key of a web seed's bytes is this and its endpoint


# --- worker → parent --------------------------------------------------------------------------

@dataclass(frozen=True)
class Listening:
    worker: int
    ip: str
    port: int
    marks: dict[str, float] = field(default_factory=dict)  # epoch seconds: "session" up, "torrent_added"


@dataclass(frozen=True)
class Progress:
    worker: int
    phase: Phase = Phase.RUNNING
    done: int = 0  # wanted bytes verified
    wanted: int = 0
    rate: int = 0  # payload bytes/s down
    up_rate: int = 0
    peers: int = 0
    seeds: int = 0
    downloaded: int = 0  # payload bytes received in this run
    uploaded: int = 0
    redundant: int = 0  # bytes received twice (end-game, straddling pieces)
    hash_failures: int = 0
    sources: dict[str, int] = field(default_factory=dict)  # peer endpoint → payload bytes from it
    state: str = "starting"  # libtorrent's torrent state
    flushed: bool = False  # complete and on disk (seeding from here on)
    first_byte_at: float | None = None  # epoch seconds of the first payload byte
    connected: bool = False  # some peer connected at some point
    connected_at: float | None = None  # epoch seconds of the first peer connection
    files: dict[int, int] | None = None  # file index → verified bytes (first event after the check, finished, stopped)
    found: int | None = None  # wanted bytes verified on disk before this run fetched any (first event after the check)
    siblings: dict[str, int] = field(default_factory=dict)  # endpoint of a connection from another worker → its index
    peer_hash_failures: dict[str, int] = field(default_factory=dict)  # endpoint → failed pieces it took part in
    banned: tuple[str, ...] = ()  # endpoints banned for corrupt pieces
    # BitTorrent peers that are neither sibling workers nor web seeds (btget/transfer/webseeds.py decides on these):
    peer_bytes: int = 0  # payload received from them in this run
    peers_remote: int = 0  # connected now
    connect_attempts: int = 0  # connections to them tried
    connect_failures: int = 0  # connections to them that failed (refused, timed out)
    leechers: int = 0  # once complete: connected peers still downloading (they may take pieces from us)


@dataclass(frozen=True)
class WorkerFailed:
    """libtorrent cannot go on (a full disk, a file error, a port it cannot listen on)."""

    worker: int
    kind: str  # disk_full | file | listen | torrent
    subject: str
    problem: str


@dataclass(frozen=True)
class WebSeedBanned:
    """libtorrent banned a web seed: pieces from it failed their SHA1 check."""

    worker: int
    url: str


@dataclass(frozen=True)
class TrackerReply:
    """Each announce's outcome (a dead tracker is the usual reason for no seeds)."""

    worker: int
    ok: bool
    url: str
    message: str
    definitive: bool = False  # the tracker said no (a failure reason), or refused the connection again and again


# --- parent → worker --------------------------------------------------------------------------

@dataclass(frozen=True)
class Connect:
    """Connect to these peers (the sibling workers: they trade pieces)."""

    peers: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class WebSeeds:
    """Use exactly these web seeds (BEP 19 base URLs; none: BitTorrent peers alone). `probe`: meanwhile
    keep asking the tracker for peers, so that a peer that becomes reachable is tried again."""

    urls: tuple[str, ...]
    probe: bool = False


@dataclass(frozen=True)
class Rates:
    """This worker's part of the run's caps, bytes/s (0: none): btget/transfer/ratecap.py split them."""

    download: int
    upload: int


@dataclass(frozen=True)
class Stop:
    """Save the resume state, send a last Progress (phase STOPPED) and leave."""


# --- the parent's own -------------------------------------------------------------------------

@dataclass(frozen=True)
class WorkerGone:
    """A worker's pipe broke before it said it stopped."""

    worker: int
    exitcode: int | None


@dataclass(frozen=True)
class Tick:
    """Time passed with nothing said."""


@dataclass(frozen=True)
class Verified:
    """The whole-file checksum check is done (its results are read at the end)."""


WorkerEvent = Listening | Progress | WorkerFailed | TrackerReply | WebSeedBanned
Event = WorkerEvent | WorkerGone | Tick | Verified
Command = Connect | WebSeeds | Rates | Stop
