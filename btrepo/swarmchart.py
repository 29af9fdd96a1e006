"""The pages' pictures of the last day, from btrepo/swarmlog.py's samples.

The dataset page: its swarm (seeds and leechers as lines, the day's
completions in the legend) and the bytes served of it (by the sites and, as
estimated from the completions, by T3s: btrepo/served.py); the site page:
its egress. Each against hours before now, over the whole day. Pure:
samples and the time in, SVG text out (torrents.svgchart), shown inline (no
script, nothing fetched: the page's Content-Security-Policy stays as it is).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from torrents import svgchart
from torrents.units import human_size

from btrepo import served

HOURS = 24
MB = 1e6


def render(samples: Sequence[tuple[float, int, int, int]], now: float, name: str) -> str | None:
    """(epoch, seeds, leechers, completed) oldest first → SVG; None with fewer than two samples."""
    if len(samples) < 2:
        return None
    completed = samples[-1][3] - samples[0][3]
    span = now - samples[0][0]
    seeds = svgchart.Series("seeds", tuple((_hours(at, now), float(s)) for at, s, _, _ in samples),
                            note=f"now {samples[-1][1]}, most {max(s for _, s, _, _ in samples)}")
    leechers = svgchart.Series("leechers", tuple((_hours(at, now), float(n)) for at, _, n, _ in samples),
                               note=f"now {samples[-1][2]}, most {max(n for _, _, n, _ in samples)}; "
                                    f"{completed} completed in {span / 3600:.1f} h")
    return _last_day(f"Swarm over the last {HOURS} hours", name, (seeds, leechers), y_label="peers",
                     y_step=_whole_step)


def render_bytes_served(samples: Sequence[tuple[float, int, Mapping[str, int]]], total_size: int, now: float,
                        name: str) -> str | None:
    """(epoch, completed, {site: bytes of it sent}) oldest first → SVG of the bytes served since the first
    sample, stacked: the sites', then the T3s' (estimated); None with fewer than two samples, or when no
    sample has a site's count (a tracker that does not say: the T3s' figure would be all of it)."""
    if len(samples) < 2 or not any(counts for _, _, counts in samples):
        return None
    points = served.bytes_served(samples, total_size)
    _, sites, t3s = points[-1]
    by_sites = svgchart.Series("by sites", tuple((_hours(at, now), float(s)) for at, s, _ in points),
                               note=human_size(sites))
    by_t3s = svgchart.Series("by T3s", tuple((_hours(at, now), float(t)) for at, _, t in points),
                             note=f"{human_size(t3s)}, estimated from completions")
    return _last_day(f"Bytes served over the last {HOURS} hours", name, (by_sites, by_t3s), stacked=True,
                     **svgchart.byte_axis(sites + t3s, "served"))


def render_egress(samples: Sequence[tuple[float, int]], now: float, site: str) -> str | None:
    """(epoch, bytes the site had sent) oldest first → SVG of its egress in MB/s; None with fewer than two."""
    rates = served.egress(samples)
    if not rates:
        return None
    sent = sum(served.increments([n for _, n in samples]))
    line = svgchart.Series("egress", tuple((_hours(at, now), rate / MB) for at, rate in rates),
                           note=f"now {_mb_per_s(rates[-1][1])}, most {_mb_per_s(max(r for _, r in rates))}; "
                                f"{human_size(sent)} in {(now - samples[0][0]) / 3600:.1f} h")
    return _last_day(f"Egress over the last {HOURS} hours", site, (line,), y_label="MB/s")


def _mb_per_s(rate: float) -> str:
    value = rate / MB
    return f"{value:.3g} MB/s" if value < 100 else f"{value:.0f} MB/s"


def _hours(at: float, now: float) -> float:
    return (at - now) / 3600


def _last_day(title: str, subtitle: str, series: tuple[svgchart.Series, ...], **kw: Any) -> str:
    """The chart of the day, sampled or not, against hours before now; `kw`: the rest of svgchart.Chart."""
    chart = svgchart.Chart(title=title, subtitle=subtitle, x_label="hours before now", series=series,
                           x_format=lambda v: f"{v:g} h" if v else "now", width=640, height=240,
                           x_range=(-float(HOURS), 0.0), **kw)
    return svgchart.render(chart)


def _whole_step(top: float) -> float:
    return max(1.0, svgchart.nice_step(top, 4))
