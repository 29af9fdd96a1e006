"""Sizes, checked in this one place: no function of the product over 60 lines, no class over 250.

A function that long holds more than one decision, and a class that long more than one job (issue 46): split
along what each part does (the pure rule apart from the I/O), not at an arbitrary line. Sizes are Python's
own (`end_lineno - lineno + 1` of each def and class, decorators not counted). The packages are the ones
setup.cfg ships; one test each, so `-k` can pick one.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION = 60
MAX_CLASS = 250


def packages() -> list[str]:
    """The top-level packages setup.cfg ships ([options.packages.find] include)."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    names = cfg["options.packages.find"]["include"].split()
    return sorted({name.split(".")[0] for name in names})


def offenders(package: str, root: Path = ROOT) -> list[str]:
    """`path:line name N lines` for each function over MAX_FUNCTION lines and each class over MAX_CLASS."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                limit = MAX_FUNCTION
            elif isinstance(node, ast.ClassDef):
                limit = MAX_CLASS
            else:
                continue
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} {lines} lines")
    return found


def test_the_packages_are_found():
    assert {"torrents", "btserver", "btget", "tracker", "btrepo", "btswarm"} <= set(packages())


@pytest.mark.parametrize("package", packages())
def test_no_function_over_60_lines_and_no_class_over_250(package):
    found = offenders(package)
    assert not found, (f"over {MAX_FUNCTION} lines (a function) or {MAX_CLASS} (a class): split by what each "
                       "part does\n" + "\n".join(found))


def test_an_offender_is_named_with_its_place_and_size(tmp_path):
    (tmp_path / "pkg").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(60))
    (tmp_path / "pkg" / "long.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert offenders("pkg", tmp_path) == ["pkg/long.py:5 long 61 lines"]
