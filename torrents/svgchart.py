"""Small charts as SVG text: series over time, stacked or as lines, with axes and a legend.

For pictures where people look (`btswarm plot` of a bt-get result, the
repository's pages): no plotting library, nothing to install, text that a
browser shows inline or as a file. Every label is escaped (a source or a
dataset name is text, never markup). Pure: data in, a string out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence
from xml.sax.saxutils import escape, quoteattr

# Tableau 10, the first colours told apart by most people, colour-blind included.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


@dataclass(frozen=True)
class Series:
    name: str
    points: tuple[tuple[float, float], ...]  # (x, y), x ascending
    note: str = ""  # after the name in the legend


@dataclass(frozen=True)
class Mark:
    """A vertical line at x with a short label (an event: a switch to the web seeds)."""

    x: float
    label: str


@dataclass(frozen=True)
class Chart:
    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    stacked: bool = False  # areas on top of each other (parts of a whole), else lines
    x_format: Callable[[float], str] = field(default=lambda v: f"{v:g}")
    y_format: Callable[[float], str] = field(default=lambda v: f"{v:g}")
    y_step: Callable[[float], float] | None = None  # top of the axis → tick step; default 1-2-5
    marks: tuple[Mark, ...] = ()
    subtitle: str = ""
    x_range: tuple[float, float] | None = None  # the x axis's ends; default the data's
    width: int = 720
    height: int = 360


def nice_step(span: float, ticks: int = 5) -> float:
    """A 1, 2 or 5 × 10^k step giving about `ticks` ticks over `span`."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= raw)


BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def byte_unit(top: float) -> tuple[float, str]:
    """The binary unit to label an axis reaching `top` bytes: (its size, its name)."""
    k = max(0, min(len(BYTE_UNITS) - 1, int(math.log(top, 1024)))) if top >= 1 else 0
    return float(1024 ** k), BYTE_UNITS[k]


def byte_step(span: float, ticks: int = 5) -> float:
    """A step of 1, 2 or 5 × 10^j of the axis's binary unit (round figures in MiB, GiB)."""
    unit, _ = byte_unit(span)
    return nice_step(span / unit, ticks) * unit


def byte_axis(top: float, what: str) -> dict[str, Any]:
    """A Chart's y axis in bytes reaching `top` (y_label "WHAT, MiB", y_format, y_step): ticks in one unit."""
    unit, name = byte_unit(top)
    return {"y_label": f"{what}, {name}", "y_format": lambda v: f"{v / unit:g}", "y_step": byte_step}


def fit(text: str, width: float, char_width: float) -> str:
    """`text` cut with an ellipsis to about `width` pixels (SVG text does not wrap; the whole title
    stays in the document's <title>)."""
    most = max(1, int(width / char_width))
    return text if len(text) <= most else text[:most - 1] + "…"


def _stack(series: Sequence[Series]) -> list[list[tuple[float, float, float]]]:
    """Each series as (x, bottom, top) on the union of all x, later series on earlier ones;
    a series is held at its last value after its last point, and 0 before its first."""
    xs = sorted({x for s in series for x, _ in s.points})
    base = {x: 0.0 for x in xs}
    out = []
    for s in series:
        layer = []
        for x in xs:
            y = _value_at(s.points, x)
            layer.append((x, base[x], base[x] + y))
            base[x] += y
        out.append(layer)
    return out


def _value_at(points: Sequence[tuple[float, float]], x: float) -> float:
    value = 0.0
    for px, py in points:
        if px > x:
            break
        value = py
    return value


def render(chart: Chart) -> str:
    """The chart as a standalone SVG document (also valid inline in HTML)."""
    layers = _stack(chart.series) if chart.stacked else [[(x, 0.0, y) for x, y in s.points] for s in chart.series]
    frame = _Frame.of(chart, layers)
    w, h = chart.width, frame.height
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" '
           f'role="img" aria-label={quoteattr(chart.title)} font-family="sans-serif" font-size="12">',
           f"<title>{escape(chart.title)}</title>",
           f'<rect width="{w}" height="{h}" fill="#fff"/>',
           f'<text x="12" y="22" font-size="14" font-weight="bold">{escape(fit(chart.title, w - 24, 8.5))}</text>']
    if chart.subtitle:
        out.append(f'<text x="12" y="40" fill="#444">{escape(fit(chart.subtitle, w - 24, 7))}</text>')
    out += _axes(chart, frame)
    out += _data(chart, layers, frame)
    out += _legend(chart, frame.left)
    out.append("</svg>")
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class _Frame:
    """Where the plot lies in the picture, and the ranges its axes show."""

    left: int
    top: int
    pw: float  # the plot's width and height
    ph: float
    height: int  # the picture's, legend included
    x0: float
    x1: float
    y1: float
    y_step: float

    @classmethod
    def of(cls, chart: Chart, layers: list[list[tuple[float, float, float]]]) -> _Frame:
        left, right, top, bottom = 72, 16, 52 if chart.subtitle else 36, 44
        legend_h = 18 * len(chart.series) + 8 if chart.series else 0
        all_x = [x for layer in layers for x, _, _ in layer] + [m.x for m in chart.marks]
        x0, x1 = chart.x_range or ((min(all_x), max(all_x)) if all_x else (0.0, 1.0))
        if x1 <= x0:
            x1 = x0 + 1.0
        y_top = max([t for layer in layers for _, _, t in layer] or [0.0])
        step_of = chart.y_step or nice_step
        y_step = step_of(y_top or 1.0)
        y1 = max(y_step, math.ceil(y_top / y_step) * y_step)
        return cls(left, top, chart.width - left - right, chart.height - top - bottom, chart.height + legend_h,
                   x0, x1, y1, y_step)

    def sx(self, x: float) -> float:
        return self.left + (x - self.x0) / (self.x1 - self.x0) * self.pw

    def sy(self, y: float) -> float:
        return self.top + self.ph - y / self.y1 * self.ph


def _axes(chart: Chart, f: _Frame) -> list[str]:
    """The grid with the y ticks, the x ticks, the axes and their labels."""
    out = []
    left, top, pw, ph, y_step = f.left, f.top, f.pw, f.ph, f.y_step
    k = 0
    while k * y_step <= f.y1 + y_step / 1e6:
        y = f.sy(k * y_step)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e4e4e4"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" fill="#444">'
                   f"{escape(chart.y_format(k * y_step))}</text>")
        k += 1
    x_step = nice_step(f.x1 - f.x0)
    first = math.ceil(f.x0 / x_step) * x_step
    k = 0
    while first + k * x_step <= f.x1 + x_step / 1e6:
        v = first + k * x_step
        out.append(f'<line x1="{f.sx(v):.1f}" x2="{f.sx(v):.1f}" y1="{top + ph}" y2="{top + ph + 4}" stroke="#444"/>')
        out.append(f'<text x="{f.sx(v):.1f}" y="{top + ph + 17}" text-anchor="middle" fill="#444">'
                   f"{escape(chart.x_format(v))}</text>")
        k += 1
    out.append(f'<line x1="{left}" x2="{left + pw}" y1="{top + ph}" y2="{top + ph}" stroke="#444"/>')
    out.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 36}" text-anchor="middle">{escape(chart.x_label)}</text>')
    out.append(f'<text transform="translate(14 {top + ph / 2:.1f}) rotate(-90)" text-anchor="middle">'
               f"{escape(chart.y_label)}</text>")
    return out


def _data(chart: Chart, layers: list[list[tuple[float, float, float]]], f: _Frame) -> list[str]:
    """Each series, an area of the stack or a line; then the marks."""
    out = []
    sx, sy = f.sx, f.sy
    for i, (s, layer) in enumerate(zip(chart.series, layers)):
        colour = PALETTE[i % len(PALETTE)]
        name = quoteattr(s.name)
        if not layer:
            continue
        if chart.stacked:
            upper = " ".join(f"{sx(x):.1f},{sy(t):.1f}" for x, _, t in layer)
            lower = " ".join(f"{sx(x):.1f},{sy(b):.1f}" for x, b, _ in reversed(layer))
            out.append(f'<polygon class="series" data-name={name} points="{upper} {lower}" fill="{colour}" '
                       f'fill-opacity="0.85" stroke="{colour}"/>')
        else:
            line = " ".join(f"{sx(x):.1f},{sy(t):.1f}" for x, _, t in layer)
            out.append(f'<polyline class="series" data-name={name} points="{line}" fill="none" '
                       f'stroke="{colour}" stroke-width="2"/>')
    for m in chart.marks:
        x = sx(m.x)
        out.append(f'<line class="mark" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{f.top + f.ph}" stroke="#333" '
                   f'stroke-dasharray="4 3"/>')
        out.append(f'<text x="{x + 4:.1f}" y="{f.top + 12}" fill="#333">{escape(m.label)}</text>')
    return out


def _legend(chart: Chart, left: int) -> list[str]:
    """Under the plot: one row per series, the largest (bottom of the stack) first."""
    out = []
    y = chart.height + 4
    for i, s in enumerate(chart.series):
        colour = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{left}" y="{y}" width="12" height="12" fill="{colour}"/>')
        label = s.name + (f"  {s.note}" if s.note else "")
        out.append(f'<text class="legend" x="{left + 18}" y="{y + 10}">{escape(label)}</text>')
        y += 18
    return out
