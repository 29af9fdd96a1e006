"""`btswarm plot RESULT.json`: a `bt-get --json` result as a picture of bytes per source over time.

The document's `sources_over_time` (docs/bt-get.md) holds, about once a
second, the bytes received so far from each source; drawn stacked, the top
edge is the whole download and each band one source's part of it: which
site carried the run, when the web seeds took over (the run's
`web_seed_switches`, dashed), when a source went quiet. Pure: a document
in, SVG text out (torrents.svgchart).
"""

from __future__ import annotations

from typing import Any, Mapping

from torrents import svgchart
from torrents.errors import BtswarmError
from torrents.units import human_rate, human_size

MAX_SOURCES = 8  # bands; the smaller sources share one, "N others"


def result_chart(doc: Any, subject: str = "result") -> svgchart.Chart:
    """The chart of a `bt-get --json` document; BtswarmError naming `subject` when it is not one."""
    if not isinstance(doc, dict) or "dataset" not in doc or "sources" not in doc:
        raise BtswarmError(subject, "not a bt-get --json result (no dataset and sources)")
    samples = doc.get("sources_over_time")
    if not isinstance(samples, list) or not samples:
        raise BtswarmError(subject, "has no sources_over_time (written by bt-get --json since it samples "
                                    "bytes per source; run bt-get again)")
    try:
        points = [(float(s["t"]), {str(k): int(v) for k, v in s["sources"].items()}) for s in samples]
    except (TypeError, KeyError, ValueError, AttributeError):
        raise BtswarmError(subject, "sources_over_time: each sample must be {\"t\": seconds, \"sources\": "
                                    "{name: bytes}}") from None
    if points[0][0] > 0:
        points.insert(0, (0.0, {}))  # the start: nothing received yet
    totals: dict[str, int] = {}
    for _, sources in points:
        for name, n in sources.items():
            totals[name] = max(totals.get(name, 0), n)
    names = sorted(totals, key=lambda n: (-totals[n], n))
    shown, rest = names[:MAX_SOURCES], names[MAX_SOURCES:]
    if len(rest) == 1:
        shown, rest = names, []
    whole = sum(totals.values()) or 1
    series = [svgchart.Series(name, tuple((t, float(s.get(name, 0))) for t, s in points),
                              note=f"{human_size(totals[name])} ({100 * totals[name] / whole:.0f}%)")
              for name in shown]
    if rest:
        others = sum(totals[n] for n in rest)
        series.append(svgchart.Series(f"{len(rest)} others", tuple((t, float(sum(s.get(n, 0) for n in rest)))
                                                                   for t, s in points),
                                      note=f"{human_size(others)} ({100 * others / whole:.0f}%)"))
    seconds = float(doc.get("seconds") or points[-1][0])
    done = int(doc.get("bytes_downloaded") or sum(totals.values()))
    subtitle = (f"{human_size(done)} in {seconds:.1f} s ({human_rate(done / seconds if seconds else 0)}), "
                f"{len(names)} sources, exit {doc.get('exit_status', '?')}")
    marks = tuple(svgchart.Mark(float(s["after_s"]), f"to {s['to']}") for s in _switches(doc))
    return svgchart.Chart(title=str(doc["dataset"]), subtitle=subtitle, x_label="seconds since the download started",
                          series=tuple(series), stacked=True, marks=marks,
                          **svgchart.byte_axis(sum(totals.values()), "received"))


def _switches(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    value = doc.get("web_seed_switches") or []
    return [s for s in value if isinstance(s, dict) and isinstance(s.get("after_s"), (int, float)) and "to" in s]


def render(doc: Any, subject: str = "result") -> str:
    return svgchart.render(result_chart(doc, subject))
