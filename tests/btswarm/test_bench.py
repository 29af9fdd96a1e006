"""`btswarm bench`: the benchmarks it finds in scripts/, its listing against docs/benchmarks.md, the wan scenarios'
own flags. (Running a benchmark needs root and minutes: the scripts are run by hand, docs/benchmarks.md.)"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from btswarm import benches

ROOT = Path(__file__).resolve().parents[2]
BTSWARM = [sys.executable, "-c", "import sys; from btswarm.cli import main; sys.exit(main())"]
WAN = sorted(n for n in benches.find() if n.startswith("wan_"))


def btswarm(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*BTSWARM, *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def docs_table() -> list[tuple[str, str]]:
    """(name, what it measures) of each row of docs/benchmarks.md's "The benchmarks" table."""
    text = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    section = text.split("\n## The benchmarks\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([a-z_]+)` \| (.*?) \|(?: [^|]* \|){2}$", section, flags=re.M)
    return [(name, what.replace("\\|", "|")) for name, what in rows]


def test_the_listing_names_every_script_and_agrees_with_the_docs():
    out = btswarm("bench", "--list")
    assert out.returncode == 0, out.stderr
    listed = [tuple(line.split(None, 1)) for line in out.stdout.splitlines()]
    scripts = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "scripts").glob("bench_*.py"))
    assert [name for name, _ in listed] == scripts
    assert listed == docs_table()


def test_a_name_that_is_no_benchmark_is_one_line_naming_it():
    out = btswarm("bench", "--only", "nosuch")
    assert out.returncode == 2
    assert "'nosuch' is not one of" in out.stderr


def test_wan_is_a_group_of_its_scenarios():
    names = list(benches.find())
    assert benches.expand(["wan"], names) == WAN
    assert benches.expand(["wan_swarm", "wan", "get"], names) == ["wan_swarm", *[n for n in WAN if n != "wan_swarm"],
                                                                  "get"]
    assert benches.expand([], names) == names
    assert "seed" not in benches.groups(names)  # seed_start alone: no group of one


def test_every_wan_scenario_is_a_file_of_its_own():
    assert WAN == ["wan_arrival", "wan_batch", "wan_hetero", "wan_hung", "wan_single", "wan_smallfiles", "wan_swarm"]
    assert not (ROOT / "scripts" / "bench_wan.py").exists()


SHARED = ["--out", "--quick", "--keep", "--runs", "--rate", "--client-rate", "--rtt", "--client-rtt", "--link-mtu"]
OWN = {"wan_swarm": ["--size", "--clients", "--aria2c", "--no-curl", "--slow-clients", "--slow-rate"],
       "wan_batch": ["--size", "--shards"], "wan_smallfiles": ["--small-files"]}


@pytest.mark.parametrize("name", WAN)
def test_a_wan_scenario_takes_the_flags_it_uses_and_no_other(name):
    out = subprocess.run([sys.executable, str(benches.find()[name]), "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    flags = set(re.findall(r"^  (--[a-z0-9-]+)", out.stdout, flags=re.M))  # argparse's option lines
    assert flags == set(SHARED) | set(OWN.get(name, ["--size"]))
