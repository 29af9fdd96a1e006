"""The dataset page's picture of its swarm over the last day, from btrepo/swarmlog.py's samples.

Seeds and leechers as lines against hours before now, the completions of
the day in the legend. Pure: samples and the time in, SVG text out
(torrents.svgchart), shown inline (no script, nothing fetched: the page's
Content-Security-Policy stays as it is).
"""

from __future__ import annotations

from typing import Sequence

from torrents import svgchart

HOURS = 24


def render(samples: Sequence[tuple[float, int, int, int]], now: float, name: str) -> str | None:
    """(epoch, seeds, leechers, completed) oldest first → SVG; None with fewer than two samples."""
    if len(samples) < 2:
        return None

    def hours(at: float) -> float:
        return (at - now) / 3600

    completed = samples[-1][3] - samples[0][3]
    span = now - samples[0][0]
    seeds = svgchart.Series("seeds", tuple((hours(at), float(s)) for at, s, _, _ in samples),
                            note=f"now {samples[-1][1]}, most {max(s for _, s, _, _ in samples)}")
    leechers = svgchart.Series("leechers", tuple((hours(at), float(n)) for at, _, n, _ in samples),
                               note=f"now {samples[-1][2]}, most {max(n for _, _, n, _ in samples)}; "
                                    f"{completed} completed in {span / 3600:.1f} h")
    chart = svgchart.Chart(title=f"Swarm over the last {HOURS} hours", subtitle=name,
                           x_label="hours before now", y_label="peers", series=(seeds, leechers),
                           x_format=lambda v: f"{v:g} h" if v else "now", y_step=_whole_step,
                           width=640, height=240, x_range=(-float(HOURS), 0.0))  # the whole day, sampled or not
    return svgchart.render(chart)


def _whole_step(top: float) -> float:
    return max(1.0, svgchart.nice_step(top, 4))
