"""`btswarm up --rucio`: the federation's datasets registered in a local Rucio, one POSIX RSE per site.

Each site gets an RSE whose prefix is STATE/rse/<site>/; every dataset
directory of the site's data is placed there (hard links where the file
system allows, so the sample costs no space twice), registered with its
bytes and adler32, and attached to the dataset DID SCOPE:<directory name>.
The sites then read `SCOPE:*` from Rucio ([server.rucio]) instead of
scanning directories: a dataset registered later in that scope appears
after one refresh.

The Rucio lives in its own directory (STATE/rucio by default). If one is
already running there it is used and left running; otherwise it is
started here and stopped with the federation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from btswarm import topology
from btswarm.localrucio import LocalRucio
from torrents.did import parse_did
from torrents.errors import BtswarmError


@dataclass
class Opened:
    server: LocalRucio
    owned: bool  # started here: stopped with the federation

    def stop(self) -> None:
        if self.owned:
            self.server.stop()


def rse_name(site: str, state: Path) -> str:
    """SITE1_3FA2C1: the site, and a tag of the state directory, so that federations sharing
    one Rucio (tests) never register into each other's RSEs. Upper case, as Rucio wants."""
    tag = hashlib.sha1(str(state).encode()).hexdigest()[:6]
    return f"{site}_{tag}".upper()


def open_rucio(root: Path, report: Callable[[str], None]) -> Opened:
    existing = LocalRucio.running_at(root)
    if existing is not None:
        report(f"rucio: using the one already running at {existing.url} ({root})")
        return Opened(existing, owned=False)
    server = LocalRucio(root)
    report(f"rucio: starting a local Rucio server in {root}")
    server.start()
    report(f"started rucio: {server.url}")
    return Opened(server, owned=True)


def register(server: LocalRucio, scope: str, names: Sequence[str], site_data: Sequence[tuple[str, Path]],
             state: Path, refresh: float, report: Callable[[str], None]) -> topology.RucioPlan:
    """Place and register every dataset of each site's data at the site's RSE; the sites' Rucio topology."""
    for name in names:
        parse_did(f"{scope}:{name}")  # a directory name Rucio (and a btswarm dataset name) can take
    server.add_scope(scope)
    rses = []
    for site, data in site_data:
        rse = rse_name(site, state)
        prefix = server.add_rse(rse, state / "rse" / site)
        count = 0
        for name in names:
            source = data / name
            nested = [p.name for p in source.iterdir() if p.is_dir()]
            if nested:
                raise BtswarmError(source, f"has subdirectories ({', '.join(sorted(nested)[:3])}); "
                                           "btswarm up --rucio registers flat dataset directories only")
            count += len(server.register_dataset(rse, scope, name, source, link=True))
        report(f"rucio: {site} holds {len(names)} datasets ({count} files) at RSE {rse}")
        rses.append((site, rse, prefix))
    return topology.RucioPlan(url=server.url, root=server.root, password_file=server.password_file, scope=scope,
                          rses=tuple(rses), refresh=refresh)
