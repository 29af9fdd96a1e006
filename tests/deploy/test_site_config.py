"""A site's deployment settings refused at start when they cannot work: addresses told to others that
nobody can reach, half a TLS setup, certificates that are not ones. Each one line naming the file and key."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import command
from torrents.exitstatus import ExitStatus


def run(prog: str, config, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([command(prog), "run", "--config", str(config), *args], capture_output=True, text=True,
                          timeout=30, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


@pytest.mark.parametrize("body, problem", [
    ('peer_listen = "0.0.0.0:6881"\npeer_address = "0.0.0.0"',
     "[server] peer_address: '0.0.0.0' is not an address peers can reach (this host's own IP address)"),
    ('peer_address = "site.example"',
     "[server] peer_address: 'site.example' is not an address peers can reach (this host's own IP address)"),
])
def test_settings_that_cannot_work_are_refused_naming_file_and_key(body, problem, tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(f"[server]\n{body}\nstate = \"{tmp_path / 's'}\"\n")
    out = run("bt-server", config)
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines() == [f"bt-server: error: {config}: {problem}"]


def test_a_wildcard_control_address_needs_a_control_url(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(f"[server]\ncontrol_url = \"http://127.0.0.1:1\"\nstate = \"{tmp_path / 's'}\"\n")
    # A flag for listen, control_url from the file: checked together, not key by key.
    out = run("bt-server", config, "--listen", "0.0.0.0:0", "--peer-listen", "127.0.0.1:0", "--root", str(tmp_path))
    assert "control_url" not in out.stderr
    assert "the development secret" in out.stderr  # refused before any socket: nothing bound to 0.0.0.0
    config.write_text(f"[server]\nstate = \"{tmp_path / 's'}\"\n")
    out = run("bt-server", config, "--listen", "0.0.0.0:8700")
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines() == [
        "bt-server: error: [server] control_url: needed with listen = '0.0.0.0:8700': the tracker is told where the "
        "control API is (e.g. http://HOST:8700)"]


def test_a_certificate_needs_its_key(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text(f"[server]\ntls_cert = \"/etc/ssl/site.pem\"\nstate = \"{tmp_path / 's'}\"\n")
    out = run("bt-server", config)
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines() == [
        "bt-server: error: [server] tls_key: needed with tls_cert (the certificate and its private key, both "
        "PEM files)"]


@pytest.mark.parametrize("prog, section", [("bt-tracker", "tracker"), ("bt-repo", "repo"), ("bt-server", "server")])
def test_a_certificate_that_is_not_one_or_cannot_be_read(prog, section, tmp_path):
    bogus, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    bogus.write_text("not a certificate\n")
    key.write_text("not a key\n")
    config = tmp_path / "c.toml"
    config.write_text(f"[{section}]\nstate = \"{tmp_path / 's'}\"\n" if section != "tracker" else f"[{section}]\n")
    out = run(prog, config, "--tls-cert", str(bogus), "--tls-key", str(key))
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines()[-1].startswith(
        f"{prog}: error: [{section}] tls_cert: {bogus} and {key} are not a PEM certificate and its private key (")
    out = run(prog, config, "--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(key))
    assert out.stderr.splitlines()[-1] == (
        f"{prog}: error: [{section}] tls_cert: {tmp_path / 'missing.pem'}: cannot read (No such file or directory)")


def test_a_ca_file_that_cannot_be_read(tmp_path):
    out = subprocess.run([command("bt-get"), "some.dataset", "--ca-file", str(tmp_path / "ca.pem"),
                          "-o", str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == ExitStatus.USAGE, out.stderr
    assert out.stderr.splitlines() == [
        f"bt-get: error: ca_file: {tmp_path / 'ca.pem'}: cannot read (No such file or directory)"]
