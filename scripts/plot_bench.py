"""Plot the benchmark results: DIR/*.json → DIR/*.png (matplotlib, Agg).

    .venv/bin/python scripts/plot_bench.py [--out DIR] [--img DIR2]

One PNG per benchmark found: egress.png (T2 egress and time against the
number of clients), wan.png (the wan scenarios' wan_*.json together:
fractions of the physical bound; N T3s against the Kumar-Ross bound and
curl) and wan-timeline.png (one 8-T3 run of each swarm: each T3's bytes and
each site's uplink over time), and a bar chart of each other benchmark against its
baseline or target (get, coldstart, smallfiles, build, tracker, seed_start),
with the target drawn as a red dashed line; scale.png (tracker memory and
latency against swarms and peers per swarm). Small (about 700x380
px) so they can be committed under docs/img/ (--img copies them there).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

OURS, BASE, TARGET = "#1f77b4", "#999999", "#d62728"
SIZE = (7.0, 3.8)
DPI = 100


def _subtitle(doc: dict) -> str:
    m = doc.get("machine") or {}
    if not m:
        return ""
    return f"{m.get('nproc')} cores, {m.get('cpu_model', '')[:40]}, {m.get('date', '')[:10]}"


def _annotate(ax, bars, values: list[float], fmt: str = "{:.0f}") -> None:
    """Each bar's value above its top (stacked bars: pass the top segments and the totals)."""
    for b, v in zip(bars, values):
        ax.annotate(fmt.format(v), (b.get_x() + b.get_width() / 2, b.get_y() + b.get_height()), ha="center",
                    va="bottom", fontsize=9, xytext=(0, 2), textcoords="offset points")


def _bars(ax, labels: list[str], values: list[float], ours: list[bool], fmt: str = "{:.0f}") -> None:
    _annotate(ax, ax.bar(labels, values, color=[OURS if o else BASE for o in ours]), values, fmt)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)


def _save(fig, out: Path, name: str, doc: dict) -> Path:
    sub = _subtitle(doc)
    if sub:
        fig.text(0.99, 0.01, sub, ha="right", va="bottom", fontsize=7, color="#666666")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = out / f"{name}.png"
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_get(doc: dict, out: Path) -> Path:
    med = doc["median"]
    labels = list(med)
    fig, ax = plt.subplots(figsize=SIZE)
    _bars(ax, labels, [med[k]["mb_s"] for k in labels], [k.startswith("bt-get") for k in labels])
    curl = med["curl<-nginx"]["mb_s"]
    ax.axhline(0.8 * curl, color=TARGET, ls="--", lw=1, label="target 0.8x curl")
    ax.axhline(1.2 * med["aria2c"]["mb_s"], color="#ff7f0e", ls=":", lw=1, label="target 1.2x aria2c")
    ax.set_ylabel("MB/s (median)")
    ax.set_title(f"1 client from 3 sites, {doc['dataset']['bytes'] / 1e9:.1f} GB in {doc['dataset']['files']} files")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, out, "get", doc)


def plot_egress(doc: dict, out: Path) -> Path:
    med, clients = doc["median"], doc["clients"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SIZE)
    for label, color, marker in (("bt-get", OURS, "o"), ("curl<-nginx", BASE, "s")):
        a1.plot(clients, [med[label][str(n)]["egress_x"] for n in clients], marker=marker, color=color, label=label)
        a2.plot(clients, [med[label][str(n)]["seconds"] for n in clients], marker=marker, color=color, label=label)
    a1.axhline(doc["target"]["egress_x_max"], color=TARGET, ls="--", lw=1, label="target (8 clients)")
    a1.set_title("T2 egress", fontsize=10)
    a1.set_ylabel("bytes uploaded by T2 / dataset")
    a2.set_title("time until all complete", fontsize=10)
    a2.set_ylabel("seconds (median)")
    for a in (a1, a2):
        a.set_xlabel("concurrent clients")
        a.set_xticks(clients)
        a.grid(alpha=0.3)
        a.set_ylim(bottom=0)
    a1.legend(fontsize=8)
    fig.suptitle(f"{doc['dataset']['bytes'] / 1e6:.0f} MB dataset, {doc['sites']} sites", fontsize=10)
    return _save(fig, out, "egress", doc)


def plot_coldstart(doc: dict, out: Path) -> Path:
    sets = doc["sets"]
    labels = list(sets)
    fig, ax = plt.subplots(figsize=SIZE)
    parts = [("seed up", "seed_up_s", OURS), ("connect + first block", "connect_s", "#aec7e8")]
    bottom = [0.0] * len(labels)
    for name, key, color in parts:
        vals = [max(0.0, sets[k]["median"][key]) for k in labels]
        ax.bar(labels, vals, bottom=bottom, color=color, label=name, width=0.5)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for i, k in enumerate(labels):
        fb, target = sets[k]["median"]["first_byte_s"], sets[k]["target_s"]
        # inside the bar, below its top: a first byte close to its target would print over the target line
        ax.annotate(f"{fb:.2f} s", (i, bottom[i]), ha="center", va="top", fontsize=9, xytext=(0, -4),
                    textcoords="offset points", color="white", fontweight="bold")
        ax.hlines(target, i - 0.3, i + 0.3, color=TARGET, ls="--", lw=1.5, label="target" if i == 0 else None)
    ax.set_ylabel("launch to first byte, s (median)")
    ax.set_title(f"cold start: seeds started on demand, median of {doc.get('runs', '?')}")
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, out, "coldstart", doc)


def plot_smallfiles(doc: dict, out: Path) -> Path:
    med = doc["median"]
    labels = list(med)
    fig, ax = plt.subplots(figsize=SIZE)
    _bars(ax, labels, [med[k]["files_per_s"] for k in labels], [k.startswith("bt-get") for k in labels])
    ax.axhline(doc["target"] * med["tar c | tar x"]["files_per_s"], color=TARGET, ls="--", lw=1,
               label=f"target {doc['target']}x tar")
    ax.set_ylabel("files/s (median)")
    ax.set_title(f"{doc['dataset']['files']} small files, {doc['dataset']['bytes'] / 1e6:.0f} MB")
    ax.legend(fontsize=8)
    return _save(fig, out, "smallfiles", doc)


def _target_line(ax, x: float, y: float, label: str | None, color: str = TARGET) -> None:
    ax.hlines(y, x - 0.4, x + 0.4, color=color, ls="--", lw=1.5, label=label)


def plot_build(doc: dict, out: Path) -> Path | None:
    results = doc.get("results") or []
    if not results:
        return None
    targets = doc.get("targets") or {}
    fig, axes = plt.subplots(1, len(results), figsize=(SIZE[0], SIZE[1] + 0.6), squeeze=False)
    for ax, r in zip(axes[0], results):
        rates = r.get("median_mb_s") or {}
        labels = list(rates)
        _bars(ax, labels, [rates[k] for k in labels], [k == "btswarm" for k in labels])
        # a target is a line over the btswarm bar: what btswarm must reach
        ours = labels.index("btswarm") if "btswarm" in labels else 0
        mk = next((k for k in labels if k.startswith("mktorrent")), None)
        limit = next((k for k in labels if k.startswith("memory limit")), None)
        if r.get("set") == "large":
            if mk and "large_vs_mktorrent" in targets:
                _target_line(ax, ours, targets["large_vs_mktorrent"] * rates[mk],
                             f"target {targets['large_vs_mktorrent']}x mktorrent")
            if limit and "large_vs_memory_limit" in targets:
                _target_line(ax, ours, targets["large_vs_memory_limit"] * rates[limit],
                             f"target {targets['large_vs_memory_limit']}x memory limit", color="#ff7f0e")
        elif mk and "small_vs_mktorrent" in targets:
            _target_line(ax, ours, targets["small_vs_mktorrent"] * rates[mk],
                         f"target {targets['small_vs_mktorrent']}x mktorrent")
        ax.set_title(f"{r.get('set', '')}: {r.get('files', '?')} files, {r.get('bytes', 0) / 1e9:.2f} GB",
                     fontsize=10)
        ax.set_ylabel("MB/s hashed (median)")
        ax.set_xticks(range(len(labels)), [k.replace(" (", "\n(") for k in labels])
        ax.tick_params(axis="x", labelrotation=30, labelsize=7)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"torrent build, page cache warm, median of {results[0].get('runs', '?')}", fontsize=10)
    return _save(fig, out, "build", doc)


def plot_tracker(doc: dict, out: Path) -> Path | None:
    med = doc.get("median") or {}
    if not med:
        return None
    keys = list(med)
    ours = [k.startswith("bt-tracker") for k in keys]
    # Short names under the bars: the store, and the process count.
    labels = [{"bt-tracker": "memory", "bt-tracker redis": "redis", "bt-tracker redis x2": "redis x2"}.get(k, k)
              for k in keys]
    med = {label: med[k] for label, k in zip(labels, keys)}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=SIZE)
    _bars(a1, labels, [med[k]["announces_per_s"] for k in labels], ours)
    if "opentracker" in med and "target_ratio" in doc and "memory" in labels:
        _target_line(a1, labels.index("memory"), doc["target_ratio"] * med["opentracker"]["announces_per_s"],
                     f"target {doc['target_ratio']}x opentracker")
        a1.legend(fontsize=8, loc="upper right")
    a1.set_ylabel("announces/s (median)")
    a1.set_title(f"throughput (ratio {doc.get('ratio_announces_per_s', float('nan')):.2f})", fontsize=10)
    user = [med[k].get("user_us_per_announce", 0.0) for k in labels]
    kern = [med[k].get("sys_us_per_announce", 0.0) for k in labels]
    a2.bar(labels, user, color=[OURS if o else BASE for o in ours], label="user")
    _annotate(a2, a2.bar(labels, kern, bottom=user, color="#aec7e8", label="kernel"),
              [med[k]["cpu_us_per_announce"] for k in labels])
    a2.set_ylabel("µs CPU per announce (median)")
    a2.set_title("CPU per announce", fontsize=10)
    a2.margins(y=0.15)
    a2.grid(axis="y", alpha=0.3)
    a2.legend(fontsize=8)
    fig.suptitle(f"tracker, one connection per announce, {doc.get('runs', '?')} runs of "
                 f"{doc.get('duration_s', '?')} s", fontsize=10)
    return _save(fig, out, "tracker", doc)


def plot_seed_start(doc: dict, out: Path) -> Path | None:
    sets = doc.get("sets") or {}
    if not sets:
        return None
    labels = list(sets)
    x = range(len(labels))
    fig, ax = plt.subplots(figsize=SIZE)
    w = 0.35
    start = [sets[k]["median"]["start_s"] * 1000 for k in labels]
    stop = [sets[k]["median"]["stop_s"] * 1000 for k in labels]
    b1 = ax.bar([i - w / 2 for i in x], start, w, color=OURS, label="start (POST /api/seeds)")
    b2 = ax.bar([i + w / 2 for i in x], stop, w, color="#aec7e8", label="stop (DELETE)")
    _annotate(ax, b1, start, "{:.1f}")
    _annotate(ax, b2, stop, "{:.1f}")
    ax.axhline(doc["target_start_s"] * 1000, color=TARGET, ls="--", lw=1,
               label=f"target start {doc['target_start_s'] * 1000:.0f} ms")
    ax.set_xticks(list(x), labels)
    ax.set_yscale("log")
    ax.set_ylabel("ms (median, log scale)")
    ax.set_title(f"bt-server seed start/stop on a prepared dataset, median of {doc.get('runs', '?')}")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return _save(fig, out, "seed_start", doc)


def plot_scale(doc: dict, out: Path) -> Path | None:
    growth = doc.get("growth") or []
    if not growth:
        return None
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(10.5, 3.8))
    colors = {"memory": OURS, "redis": "#ff7f0e"}
    for g in growth:
        c = colors.get(g["store"], BASE)
        xs = [r["swarms"] for r in g["by_swarms"]]
        a1.plot(xs, [r["tracker_rss_mb"] for r in g["by_swarms"]], "o-", color=c, label=f"tracker, {g['store']}")
        if g["store"] == "redis":
            a1.plot(xs, [r["redis_mb"] for r in g["by_swarms"]], "s--", color=c, label="redis-server")
        for key, style in (("p50_ms", "o-"), ("p99_ms", "^:")):
            a2.plot(xs, [r[key] for r in g["by_swarms"]], style, color=c, label=f"{g['store']} {key[:3]}")
            a3.plot([r["peers"] for r in g["by_peers"]], [r[key] for r in g["by_peers"]], style, color=c,
                    label=f"{g['store']} {key[:3]}")
    a1.axhline(doc.get("targets", {}).get("tracker_rss_mb_at_100k", 200), color=TARGET, ls="--", lw=1,
               label="target at 100,000")
    for ax, xl in ((a1, "registered info-hashes (each with a peer)"), (a2, "registered info-hashes"),
                   (a3, "peers in the swarm announced to")):
        ax.set_xscale("log")
        ax.set_xlabel(xl, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    a1.set_ylabel("RSS, MB")
    a1.set_title("memory", fontsize=10)
    a2.set_ylabel("announce latency, ms (fresh connection)")
    a2.set_title("latency vs swarms", fontsize=10)
    a3.set_title("latency vs peers per swarm", fontsize=10)
    fig.suptitle("bt-tracker growth, memory and Redis stores", fontsize=10)
    return _save(fig, out, "scale", doc)


def plot_wan(doc: dict, out: Path) -> Path:
    """Left: each scenario's fraction of its bound, target marked. Right: N T3s at once against the bound and curl."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.0, 3.8), gridspec_kw={"width_ratios": [1.2, 1]})
    bars: list[tuple[str, float, float]] = []  # label, fraction of bound, target
    if "single" in doc:
        bars.append(("1 T3 <- 3", doc["single"]["fraction"], 0.92))
    sw = doc.get("swarm", {}).get("median", {})
    for n, target in (("8", 0.85), ("16", 0.8)):
        if n in sw:
            bars.append((f"{n} T3s", sw[n]["fraction"], target))
    slow = doc.get("swarm_slow", {})
    for n, r in slow.get("median", {}).items():  # 16 and 32 T3s on slower links (bench_wan_swarm --slow-rate)
        bars.append((f"{n} T3s, {slow['rate'] / 1e6:g} Mbit/s", r["fraction"], 0.8))
    for n, r in doc.get("batch", {}).get("by_shards", {}).items():
        bars.append((f"{n} shards", 1 / r["x_bound"], 1 / 1.15))
    if "hetero" in doc:
        bars.append(("R/10 site", doc["hetero"]["fraction"], 0.85))
    for fault in ("sigstop", "fuse"):
        if fault in doc.get("hung", {}).get("median", {}):
            bars.append((f"hung {fault}", doc["hung"]["median"][fault]["fraction"], 0.7))
    if "smallfiles" in doc:
        bars.append(("small files", doc["smallfiles"]["fraction"], float("nan")))
    labels = [b[0] for b in bars]
    _bars(a1, labels, [b[1] for b in bars], [True] * len(bars), fmt="{:.2f}")
    for i, (_, _, target) in enumerate(bars):
        if target == target:
            _target_line(a1, i, target, "target" if i == 0 else None)
    a1.axhline(1.0, color="#666666", lw=0.8)
    a1.set_ylabel("bound / measured time (median)")
    a1.set_title("fraction of the physical bound", fontsize=10)
    a1.tick_params(axis="x", labelrotation=35, labelsize=8)
    a1.legend(fontsize=8, loc="lower left")
    if sw:
        ns = [int(n) for n in sw]
        a2.plot(ns, [sw[str(n)]["seconds"] for n in ns], marker="o", color=OURS, label="bt-get, last done")
        a2.plot(ns, [sw[str(n)]["bound_s"] for n in ns], ls="--", color=TARGET, label="Kumar-Ross bound")
        a2.plot(ns, [sw[str(n)]["curl_s"] for n in ns], marker="s", color=BASE, label="N curls <- nginx (R)")
        a2.set_yscale("log")
        a2.set_xscale("log", base=2)
        a2.set_xticks(ns, [str(n) for n in ns])
        a2.set_xlabel("T3s at once")
        a2.set_ylabel("seconds (median)")
        ax3 = a2.twinx()
        ax3.plot(ns, [sw[str(n)]["egress_x"] for n in ns], marker="^", color="#2ca02c", lw=0.8, label="T2 egress")
        ax3.set_ylabel("T2 egress (x dataset)", color="#2ca02c", fontsize=8)
        ax3.set_ylim(0, max(3.0, max(sw[str(n)]["egress_x"] for n in ns) * 1.2))
        a2.legend(fontsize=7, loc="upper left")
        a2.grid(alpha=0.3)
        a2.set_title("N T3s at once", fontsize=10)
    fig.suptitle(f"shaped links: R {doc['rate'] / 1e6:g} Mbit/s per site, C {doc['client_rate'] / 1e6:g} Mbit/s "
                 f"per T3, {doc['dataset']['bytes'] / 1e6:.0f} MB", fontsize=10)
    return _save(fig, out, "wan", doc)


def plot_repo(doc: dict, out: Path) -> Path | None:
    med = doc.get("median") or {}
    if not med:
        return None
    labels = list(med)
    ours = [k != "nginx" for k in labels]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(SIZE[0] + 2, SIZE[1]))
    _bars(a1, labels, [med[k]["requests_per_s"] for k in labels], ours)
    target = (doc.get("targets") or {}).get("requests_per_s")
    if target:
        a1.axhline(target, color=TARGET, linestyle="--", linewidth=1, label=f"target {target:.0f}/s")
        a1.legend(fontsize=8, loc="upper left")
    a1.set_yscale("log")
    a1.set_ylabel("requests/s (median, log)")
    a1.set_title(f"{doc.get('connections', '?')} connections", fontsize=10)
    _bars(a2, labels, [med[k]["cpu_us_per_request"] for k in labels], ours)
    a2.set_yscale("log")
    a2.set_ylabel("µs CPU per request (median, log)")
    a2.set_title("CPU per request", fontsize=10)
    for ax in (a1, a2):
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    fig.suptitle(f"repository under a batch start: {doc.get('files', '?')}-file dataset, {doc.get('runs', '?')} runs "
                 f"of {doc.get('duration_s', '?')} s", fontsize=10)
    return _save(fig, out, "repo", doc)


def _rate(t: list[float], cum: list[int], span: float = 1.0) -> list[float]:
    """Mbit/s over the last `span` seconds at each sample of a cumulative byte count."""
    out, j = [], 0
    for i, x in enumerate(t):
        while t[j] < x - span:
            j += 1
        out.append((cum[i] - cum[j]) * 8 / 1e6 / (x - t[j]) if x > t[j] else 0.0)
    return out


def plot_wan_timeline(doc: dict, out: Path) -> Path | None:
    """One N-T3 run of each swarm: each T3's bytes on disk over time (top), each site's uplink (bottom)."""
    tls = doc.get("swarm", {}).get("timelines") or {}
    if not tls:
        return None
    fig, axes = plt.subplots(2, len(tls), figsize=(3.6 * len(tls), 5.0), sharex=True, squeeze=False)
    colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    size_mb = doc["dataset"]["bytes"] / 1e6
    for col, (label, tl) in enumerate(tls.items()):
        t = tl["t"]
        top, bottom = axes[0][col], axes[1][col]
        for k, got in enumerate(tl["client_got"]):
            top.plot(t, [min(g / 1e6, size_mb) for g in got], lw=1, color=colors[k % len(colors)])
        top.set_title(f"{len(tl['client_got'])} x {label}", fontsize=9)
        top.set_ylabel("MB on disk, each T3" if col == 0 else "")
        top.grid(alpha=0.3)
        for k, (site, sent) in enumerate(tl["site_sent"].items()):
            bottom.plot(t, _rate(t, sent), lw=1.2, color=colors[k], label=site)
        ups = [_rate(t, c) for c in tl["client_sent"]]
        bottom.plot(t, [sum(v) / len(ups) for v in zip(*ups)], lw=1, ls="--", color="#555555",
                    label="T3 uplink, mean")
        bottom.set_ylabel("Mbit/s (1 s)" if col == 0 else "")
        bottom.set_xlabel("s since launch")
        bottom.grid(alpha=0.3)
        if col == 0:
            bottom.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"who waited on whom: R {doc['rate'] / 1e6:g} Mbit/s per site, C {doc['client_rate'] / 1e6:g} "
                 f"Mbit/s per T3, {size_mb:.0f} MB", fontsize=10)
    return _save(fig, out, "wan-timeline", doc)


PLOTS = {"get": plot_get, "egress": plot_egress, "coldstart": plot_coldstart, "smallfiles": plot_smallfiles,
         "build": plot_build, "tracker": plot_tracker, "seed_start": plot_seed_start, "wan": plot_wan,
         "scale": plot_scale, "repo": plot_repo}


def result(out: Path, name: str) -> tuple[Path, dict | None]:
    """OUT/NAME.json; for wan, the scenarios' OUT/wan_*.json as one document (each holds its scenario's keys,
    the links and the dataset of the first found), or an older OUT/wan.json with all of them."""
    parts = sorted(out.glob("wan_*.json")) if name == "wan" else []
    if parts:
        doc: dict = {}
        for part in parts:
            for key, value in json.loads(part.read_text()).items():
                doc.setdefault(key, value)
        return out / "wan_*.json", doc
    path = out / f"{name}.json"
    return path, json.loads(path.read_text()) if path.exists() else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench-results"))
    ap.add_argument("--img", type=Path, default=None, help="also copy the PNGs here (e.g. docs/img)")
    args = ap.parse_args()
    made = []
    for name, plot in PLOTS.items():
        path, doc = result(args.out, name)
        if doc is None:
            continue
        try:
            png = plot(doc, args.out)
        except (KeyError, TypeError, ValueError) as exc:  # a result file of another shape: skip, say so
            print(f"plot_bench: {path}: cannot plot ({exc.__class__.__name__}: {exc})", file=sys.stderr)
            continue
        for extra in ([plot_wan_timeline(doc, args.out)] if name == "wan" else []):
            if extra:
                made.append(extra)
                print(f"wrote {extra}", file=sys.stderr)
        if png:
            made.append(png)
            print(f"wrote {png}", file=sys.stderr)
    if args.img:
        args.img.mkdir(parents=True, exist_ok=True)
        for png in made:
            shutil.copy(png, args.img / png.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
