"""The ready document: what `btswarm up` writes once its federation serves, and every reader reads.

One typed structure: `up` builds it (btswarm.topology.ready_document) and
writes it (`write`, `to_json`); the running handle (btswarm.federation),
`btswarm run`, the demo, the tests and the benchmarks read it (`read`,
`from_json`) and use its attributes. The JSON keys are the field names;
a document that lacks one, or holds one of the wrong type (an older
`btswarm up`, a hand-edited file), is a BtswarmError naming the file and
the key. Pure but for `read` and `write`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from btswarm.hosts import Host
from btswarm.shaping import Link, LinkSpec
from torrents.errors import BtswarmError


@dataclass(frozen=True)
class SiteInfo:
    """One site as a client sees it: its peer address, control API and web seed ('' when none)."""
    name: str
    peer: str
    control_url: str
    web_url: str = ""


@dataclass(frozen=True)
class T3Info:
    """The federation's T3 (`bt-get --share --config CONFIG`); its bt-server runs only once a share starts it."""
    name: str
    peer: str
    control_url: str
    config: Path


@dataclass(frozen=True)
class RseInfo:
    rse: str
    prefix: Path


@dataclass(frozen=True)
class RucioInfo:
    """`btswarm up --rucio`: the local Rucio the sites read from; `dir` holds its etc/rucio.cfg."""
    url: str
    dir: Path
    scope: str
    rses: dict[str, RseInfo]  # by site name


@dataclass(frozen=True)
class MembersInfo:
    """`btswarm up --restricted`: the token issuer (`btswarm token` asks it), the CA of the federation's https
    and peer wire, a member's bt-get configuration, and the scopes only members read."""
    issuer: str
    ca_file: Path
    config: Path
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class Ready:
    tracker: str  # the first tracker's announce URL
    tracker_url: str
    trackers: tuple[str, ...]  # every tracker's announce URL
    tracker_urls: tuple[str, ...]
    redis: str  # the trackers' shared Redis; '' when they keep their state in memory
    repo: str
    sites: tuple[SiteInfo, ...]
    datasets: tuple[str, ...]
    state: Path
    data: Path
    t3: T3Info | None = None
    netns: str | None = None  # the private network namespace of a shaped federation
    links: tuple[Link, ...] = ()  # its shaped uplinks
    rucio: RucioInfo | None = None
    hosts: tuple[Host, ...] = ()  # btswarm up --hosts: each part on a host (network namespace) of its own
    members: MembersInfo | None = None  # btswarm up --restricted

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def site(self, name: str) -> SiteInfo:
        for s in self.sites:
            if s.name == name:
                return s
        raise KeyError(name)

    def to_json(self) -> str:
        doc: dict[str, Any] = {
            "netns": self.netns,
            "links": [link.as_dict() for link in self.links],
            "tracker": self.tracker,
            "tracker_url": self.tracker_url,
            "trackers": list(self.trackers),
            "tracker_urls": list(self.tracker_urls),
            "redis": self.redis,
            "repo": self.repo,
            "sites": [{"name": s.name, "peer": s.peer, "control_url": s.control_url, "web_url": s.web_url}
                      for s in self.sites],
            "t3": None if self.t3 is None else {"name": self.t3.name, "peer": self.t3.peer,
                                                "control_url": self.t3.control_url, "config": str(self.t3.config)},
            "datasets": list(self.datasets),
            "state": str(self.state),
            "data": str(self.data),
        }
        if self.hosts:
            doc["hosts"] = [{"name": h.name, "role": h.role, "address": h.address, "netns": h.netns, "mac": h.mac,
                             **({"rate": h.link.rate, "rtt": float(h.link.rtt)} if h.link else {})}
                            for h in self.hosts]
        if self.rucio is not None:
            doc["rucio"] = {"url": self.rucio.url, "dir": str(self.rucio.dir), "scope": self.rucio.scope,
                            "rses": {site: {"rse": r.rse, "prefix": str(r.prefix)} for site, r in self.rucio.rses.items()}}
        if self.members is not None:
            doc["members"] = {"issuer": self.members.issuer, "ca_file": str(self.members.ca_file),
                              "config": str(self.members.config), "scopes": list(self.members.scopes)}
        return json.dumps(doc, indent=2)

    @classmethod
    def read(cls, path: Path) -> "Ready":
        """The ready document at `path` (FileNotFoundError when there is none: nothing is up)."""
        return cls.from_json(path.read_text(), path)

    def write(self, path: Path) -> None:
        """Atomically: a reader that sees the file sees all of it (its presence is the readiness signal)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(self.to_json())
        os.replace(tmp, path)

    @classmethod
    def from_json(cls, text: str, source: str | os.PathLike = "ready document") -> "Ready":
        """Parse a document; BtswarmError(source, "...: key ...") on bad JSON, a missing key or a wrong type."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise BtswarmError(source, f"unreadable ready document ({exc})") from None
        r = _Reader(doc, str(source), "")
        t3 = r.optional("t3", dict)
        rucio = r.optional("rucio", dict)
        members = r.optional("members", dict)
        return cls(
            tracker=r.get("tracker", str), tracker_url=r.get("tracker_url", str),
            trackers=tuple(r.items("trackers", str)), tracker_urls=tuple(r.items("tracker_urls", str)),
            redis=r.get("redis", str), repo=r.get("repo", str),
            sites=tuple(SiteInfo(s.get("name", str), s.get("peer", str), s.get("control_url", str),
                                 s.optional("web_url", str) or "") for s in r.records("sites")),
            datasets=tuple(r.items("datasets", str)),
            state=Path(r.get("state", str)), data=Path(r.get("data", str)),
            t3=None if t3 is None else T3Info(t3.get("name", str), t3.get("peer", str), t3.get("control_url", str),
                                              Path(t3.get("config", str))),
            netns=r.optional("netns", str),
            links=tuple(Link(x.get("address", str), x.get("rate", int), x.get("label", str),
                             x.optional("rtt", float) or 0.0) for x in r.records("links", required=False)),
            rucio=None if rucio is None else RucioInfo(
                rucio.get("url", str), Path(rucio.get("dir", str)), rucio.get("scope", str),
                {site: RseInfo(x.get("rse", str), Path(x.get("prefix", str)))
                 for site, x in rucio.mapping("rses").items()}),
            hosts=tuple(Host(x.get("name", str), x.get("role", str), x.get("address", str), x.get("netns", str),
                             LinkSpec(x.get("rate", int), x.optional("rtt", float) or 0.0)
                             if x.optional("rate", int) is not None else None)
                        for x in r.records("hosts", required=False)),
            members=None if members is None else MembersInfo(
                members.get("issuer", str), Path(members.get("ca_file", str)), Path(members.get("config", str)),
                tuple(members.items("scopes", str))),
        )


class _Reader:
    """Typed access to one JSON object of the document; errors name the file and the key path."""

    def __init__(self, doc: object, source: str, where: str) -> None:
        self.doc, self.source, self.where = doc, source, where
        if not isinstance(doc, dict):
            raise BtswarmError(source, f"key {where}: not an object" if where else "not a ready document (no object)")

    def _key(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _bad(self, key: str, problem: str) -> BtswarmError:
        return BtswarmError(self.source, f"key {self._key(key)}: {problem} (written by another btswarm up? "
                                         "restart it)")

    def _typed(self, key: str, value: object, kind: type) -> Any:
        if kind is dict:
            return _Reader(value, self.source, self._key(key))
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self._bad(key, f"{type(value).__name__} where {kind.__name__} belongs")
        return value

    def get(self, key: str, kind: type) -> Any:
        if key not in self.doc:
            raise self._bad(key, "missing")
        return self._typed(key, self.doc[key], kind)

    def optional(self, key: str, kind: type) -> Any:
        value = self.doc.get(key)
        return None if value is None else self._typed(key, value, kind)

    def items(self, key: str, kind: type, required: bool = True) -> list[Any]:
        values = self.get(key, list) if required or key in self.doc else []
        return [self._typed(f"{key}[{i}]", v, kind) for i, v in enumerate(values)]

    def records(self, key: str, required: bool = True) -> list["_Reader"]:
        return self.items(key, dict, required)

    def mapping(self, key: str) -> dict[str, "_Reader"]:
        value = self.get(key, dict).doc
        return {k: self._typed(f"{key}.{k}", v, dict) for k, v in value.items()}
