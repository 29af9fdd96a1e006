"""Clock offsets between the parts, and when to say them.

Signed control requests carry the signer's time and are refused beyond
`torrents.auth.MAX_SKEW` (300 s), so a host whose clock is wrong sees every
heartbeat and publish refused. Both ends then know the offset: the verifier
from the request's timestamp, the signer from the refusal (which carries it)
or from any answer's `Date` header. Each says it once, again only when it
moves by STEP (the measure itself jitters by a second or two), and once more
when the clocks agree again. Pure: offsets in, sentences out.
"""

from __future__ import annotations

import email.utils
from typing import Mapping

STEP = 30.0  # seconds an offset must move to be said again


def offset_from_date(date: str | None, sent: float, received: float) -> float | None:
    """This host's clock minus the server's, from an answer's RFC 9110 `Date` (whole seconds: ±1 s)."""
    if not date:
        return None
    try:
        server = email.utils.parsedate_to_datetime(date).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    # The server wrote Date somewhere between our send and receive, truncated to its second.
    return (sent + received) / 2 - (server + 0.5)


def describe(offset: float, whose: str) -> str:
    """'this host's clock is 600 s ahead of the tracker's' (offset: ours minus theirs)."""
    return f"this host's clock is {abs(round(offset))} s {'ahead of' if offset > 0 else 'behind'} {whose}"


class Reports:
    """Per peer (a site's name, a tracker's URL): the offset last said, so each is said once per change."""

    def __init__(self, step: float = STEP) -> None:
        self.step = step
        self._said: dict[str, float] = {}

    def off(self, key: str, offset: float) -> bool:
        """A request to or from `key` was refused for this offset: True when it is news worth a warning."""
        last = self._said.get(key)
        if last is not None and abs(offset - last) < self.step:
            return False
        self._said[key] = offset
        return True

    def in_step(self, key: str) -> bool:
        """A request to or from `key` went through: True once after a reported offset (then say so)."""
        return self._said.pop(key, None) is not None

    @property
    def reported(self) -> Mapping[str, float]:
        return dict(self._said)
