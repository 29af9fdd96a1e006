"""One contract for the five commands: -h and --version everywhere, a bad configuration ends every
command the same way, errors said once as `prog: error: subject: problem` naming where the value came from."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import command
from torrents.exitstatus import ExitStatus

# A command line that reads the configuration, per command.
READS_CONFIG = {
    "bt-get": ["some.dataset"],
    "bt-server": ["scan"],
    "bt-tracker": ["run"],
    "bt-repo": ["run"],
}


def run(prog: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([command(prog), *args], capture_output=True, text=True, timeout=60, env=env)


def errors(out: subprocess.CompletedProcess) -> list[str]:
    return [line for line in out.stderr.splitlines() if ": error: " in line]


@pytest.mark.parametrize("prog", ["bt-get", "bt-server", "bt-tracker", "bt-repo", "btswarm"])
def test_help_and_version_on_every_command(prog):
    for flag in ("-h", "--help"):
        out = run(prog, flag)
        assert out.returncode == 0 and "Usage:" in out.stdout, (flag, out.stderr)
    out = run(prog, "--version")
    assert out.returncode == 0 and out.stdout.startswith(f"{prog}, version "), out.stdout


@pytest.mark.parametrize("prog", sorted(READS_CONFIG))
def test_a_bad_config_file_ends_every_command_alike(prog, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[gett]\nworkers = 2\n")
    out = run(prog, *READS_CONFIG[prog], "--config", str(path))
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert errors(out) == [f"{prog}: error: {path}: [gett]: unknown section (known: get, server, tracker, repo, access)"]


@pytest.mark.parametrize("prog, section, key, value, problem", [
    ("bt-server", "server", "listen", '"nonsense"', "'nonsense' is not HOST:PORT"),
    ("bt-tracker", "tracker", "interval", "0", "must be at least 1, got 0"),
    ("bt-repo", "repo", "listen", '"::1"', "'::1' is not HOST:PORT (write an IPv6 address as [::1]:PORT)"),
    ("bt-get", "get", "stall_timeout", '"soon"', "not a duration (examples: 30, 30s, 10m, 2h), got 'soon'"),
])
def test_a_bad_value_names_the_file_and_the_key(prog, section, key, value, problem, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(f"[{section}]\n{key} = {value}\n")
    out = run(prog, *READS_CONFIG[prog], "--config", str(path))
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert errors(out) == [f"{prog}: error: {path}: [{section}] {key}: {problem}"]


@pytest.mark.parametrize("prog", ["bt-server", "bt-tracker", "bt-repo"])
def test_a_bad_flag_value_names_the_flag(prog, tmp_path):
    out = run(prog, "run", "--listen", "nonsense", "--config", str(tmp_path / "none.toml"))
    assert out.returncode == ExitStatus.USAGE  # the config file named does not exist: said first
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    out = run(prog, "run", "--listen", "nonsense", "--config", str(empty))
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert errors(out) == [f"{prog}: error: --listen: 'nonsense' is not HOST:PORT"]


def test_an_environment_value_names_the_variable(tmp_path):
    import os
    out = run("bt-get", "some.dataset", env={**os.environ, "BTSWARM_GET_TIMEOUT": "-3"})
    assert out.returncode == ExitStatus.USAGE
    assert errors(out) == ["bt-get: error: $BTSWARM_GET_TIMEOUT: duration is negative, got '-3'"]
