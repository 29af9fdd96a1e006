"""The benchmarks `btswarm bench` runs: every scripts/bench_NAME.py of a source checkout is benchmark NAME.

Found, never listed by hand, so a new script is run and listed without
another edit. Names that share a first word form a group (`wan`: every
`wan_*` scenario), which `--only` takes too. A script's summary is the first
line of its docstring, read without importing it.
"""

from __future__ import annotations

import ast
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"  # a source checkout's; a wheel has none


def find(scripts: Path = SCRIPTS) -> dict[str, Path]:
    """Benchmark name -> its script, by name."""
    if not scripts.is_dir():
        return {}
    return {p.stem.removeprefix("bench_"): p for p in sorted(scripts.glob("bench_*.py"))}


def groups(names: list[str]) -> dict[str, list[str]]:
    """First word -> the benchmarks named `WORD_...`, where there are two or more."""
    out: dict[str, list[str]] = {}
    for name in names:
        word, sep, _ = name.partition("_")
        if sep:
            out.setdefault(word, []).append(name)
    return {word: members for word, members in out.items() if len(members) > 1 and word not in names}


def expand(only: list[str], names: list[str]) -> list[str]:
    """The benchmarks `--only` names (all of them when none), a group as its members, in order, once each."""
    members = groups(names)
    chosen = [n for o in only for n in members.get(o, [o])] if only else names
    return list(dict.fromkeys(chosen))


def summary(script: Path) -> str:
    """The first line of the script's docstring, without its "Benchmark NAME: " prefix."""
    doc = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    name = script.stem.removeprefix("bench_")
    return first.removeprefix(f"Benchmark {name}: ")
