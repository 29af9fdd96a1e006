"""btswarm as an admin installs it: an sdist, a wheel built from it, a fresh venv, `btswarm demo`.

The suite's own venv holds the checkout editable, so a file missing from the
package data (btrepo/templates/copy.js was: bt-repo stopped at start with
FileNotFoundError) never showed. Here the wheel is built the way pip builds
it (setuptools' PEP 517 hooks, from the unpacked sdist), installed with
--no-deps into a new venv, and every program of the demo runs from that venv.
The dependencies come from the suite's venv through a .pth file naming its
site-packages directories (not processed as site dirs, so the editable
finder's .pth there stays inert); no index is asked for anything.
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("torrents", "btrepo", "btget", "btserver", "tracker", "btswarm")

pytestmark = pytest.mark.slow


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without the suite's path to the checkout (PYTHONPATH) or its venv."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME")}
    env.update(extra)
    return env


def source_files() -> list[str]:
    """The files of the tree as a checkout has them (tracked, plus new files git does not ignore)."""
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"needs the git checkout of the source ({listed.stderr.strip()})")
    return [f for f in listed.stdout.splitlines() if (ROOT / f).is_file()]


def build(hook: str, source: Path, out: Path) -> Path:
    """One PEP 517 hook of setuptools in `source`, as pip's build runs it; fails on any warning."""
    out.mkdir(exist_ok=True)
    done = subprocess.run([sys.executable, "-c", f"from setuptools import build_meta as b; print(b.{hook}({str(out)!r}))"],
                          cwd=source, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    warnings = [line for line in (done.stdout + done.stderr).splitlines() if re.search(r"warn", line, re.I)]
    assert warnings == [], "\n".join(warnings)
    return out / done.stdout.strip().splitlines()[-1]


def dependency_paths(venv: Path) -> list[str]:
    """The running interpreter's import path minus the stdlib and wherever the checkout is importable."""
    # The base interpreter's: inside a venv "platstdlib" is the venv's lib/pythonX.Y, which holds
    # site-packages (every dependency would be left out).
    bases = {"base": sys.base_prefix, "installed_base": sys.base_prefix, "platbase": sys.base_exec_prefix,
             "installed_platbase": sys.base_exec_prefix}
    stdlib = {os.path.realpath(sysconfig.get_path(k, vars=bases)) for k in ("stdlib", "platstdlib")}
    out = []
    for entry in sys.path:
        real = os.path.realpath(entry or ".")
        if not os.path.isdir(real) or real in stdlib or real.startswith(tuple(s + os.sep for s in stdlib)):
            continue
        if any(os.path.isdir(os.path.join(real, p)) for p in PACKAGES) or real.startswith(str(venv)):
            continue
        out.append(real)
    return out


def test_the_wheel_built_from_the_sdist_runs_the_demo(tmp_path):
    import setuptools
    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.fail(f"setuptools {setuptools.__version__} in {sys.prefix} cannot build wheels by itself: "
                    "pip install -e '.[test]' (it needs setuptools>=70.1)")
    files = source_files()
    src = tmp_path / "src"
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, src / f)
    # A developer's tree has byte code beside the sources: none of it may go into the sdist.
    (src / "tests" / "__pycache__").mkdir(exist_ok=True)
    (src / "tests" / "__pycache__" / "conftest.cpython-311.pyc").write_bytes(b"")

    sdist = build("build_sdist", src, tmp_path / "dist")
    with tarfile.open(sdist) as tar:
        # filter= from Python 3.11.4 (Debian 12 has 3.11.2); the archive is our own either way
        tar.extractall(tmp_path / "unpacked", **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
        in_sdist = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {f for f in files if not f.startswith("bench-results/")} <= in_sdist | {".gitignore"}
    assert not [n for n in in_sdist if "__pycache__" in n or n.endswith(".pyc")]
    wheel = build("build_wheel", tmp_path / "unpacked" / sdist.name.removesuffix(".tar.gz"), tmp_path / "dist")

    # Everything under the packages, code or data, is in the wheel, and nothing else of the tree.
    in_wheel = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    assert in_wheel == {f for f in files if f.split("/", 1)[0] in PACKAGES}

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--no-cache-dir", "--quiet", str(wheel)], check=True, env=clean_env(), timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    Path(site, "btswarm-test-dependencies.pth").write_text("\n".join(dependency_paths(venv)) + "\n")

    env = clean_env(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    where = subprocess.run([str(python), "-c", f"import {', '.join(PACKAGES)}; "
                            f"print('\\n'.join(m.__file__ for m in ({', '.join(PACKAGES)})))"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0, where.stderr
    assert all(Path(p).is_relative_to(venv) for p in where.stdout.split()), where.stdout

    state = tmp_path / "state"
    demo = subprocess.run([str(venv / "bin" / "btswarm"), "demo", "--state", str(state), "--sample-size", "16M"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    logs = "".join(f"\n--- {p.name}\n{p.read_text()[-1500:]}" for p in sorted(state.rglob("*.log")))
    assert demo.returncode == 0, demo.stderr[-3000:] + logs
    assert "verified: all 29 files in" in demo.stderr
    [name] = [p.name for p in (state / "data").iterdir() if p.is_dir()]
    fetched, source = state / "downloads" / name, state / "data" / name
    same = filecmp.cmpfiles(source, fetched, [p.name for p in source.iterdir()], shallow=False)[0]
    assert len(same) == 29
