"""Who may announce in a restricted dataset's swarm: a peer that proves it is a member.

The proof is the peer certificate of the federation's peer CA (torrents.peerca) presented on the https
announce: libtorrent presents an SSL torrent's certificate to an https tracker, and the tracker's TLS
listener, given `[tracker] peer_ca`, asks for one and lets only a valid one through (signed by that CA,
not expired). What is left to decide here, purely: does a certificate's list of datasets cover this one.
A site's certificate names `*` (every dataset); a T3's names the datasets it was issued for.

Sites say which of their info-hashes are restricted, and under which name, in their signed heartbeats
(docs/contracts.md), and where their SSL peer sockets are: the swarm of a restricted info-hash is handed
only those (and members' own announces, made from their SSL sockets), never a plain endpoint.
"""

from __future__ import annotations

from typing import Any, Mapping

from torrents.peerca import EVERY_DATASET
NO_PROOF = "restricted dataset {name}: announce over https with a peer certificate of the federation for it"
NOT_FOR = "restricted dataset {name}: the peer certificate presented is not for it"


def cert_names(peercert: Mapping[str, Any] | None) -> frozenset[str]:
    """The dataset names of a verified peer certificate (ssl's getpeercert() dict); none without one."""
    if not peercert:
        return frozenset()
    return frozenset(value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS")


def refusal(name: str, names: frozenset[str]) -> str | None:
    """The failure reason for an announce in restricted dataset `name`'s swarm with a certificate naming
    `names` (empty: none presented), or None when it is a member's."""
    if EVERY_DATASET in names or name in names:
        return None
    return (NOT_FOR if names else NO_PROOF).format(name=name)


def of_transport(transport: Any) -> frozenset[str]:
    """The names proven on a connection: its verified client certificate's, if TLS asked for one."""
    if transport is None:
        return frozenset()
    try:
        return cert_names(transport.get_extra_info("peercert"))
    except (AttributeError, ValueError):
        return frozenset()
