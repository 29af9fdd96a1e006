"""A federation deployed the way an admin deploys one: a config file per service, each started by its command.

Unlike `btswarm up` (which writes its own configs on loopback, plain HTTP),
this is where tests choose what a deployment chooses: TLS certificates, a
private CA, secrets. Real processes on 127.0.0.x, stopped by PID whatever
happens (`Deployment` is a context manager).
"""

from __future__ import annotations

import json
import secrets
import shutil
import ssl
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from btswarm.topology import toml
from torrents.hostport import format_hostport
from tests.support import Proc, command, free_port, wait_for


@dataclass(frozen=True)
class Pki:
    """A CA made for one test, and one server certificate it signed for the federation's addresses."""
    ca: Path
    cert: Path
    key: Path


def make_pki(directory: Path, ips: list[str], *, name: str = "btswarm test CA") -> Pki:
    """CA + server certificate (SAN IP:... for each of `ips`), EC P-256, two days, with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command (scripts/install-system-deps.sh installs it)")
    directory.mkdir(parents=True, exist_ok=True)
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    cert, key, csr = directory / "server.pem", directory / "server.key", directory / "server.csr"
    ext = directory / "server.ext"
    ext.write_text("subjectAltName=" + ",".join(f"IP:{ip}" for ip in ips) +
                   "\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (
        ["openssl", "req", "-x509", *ec, "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", f"/CN={name}",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        ["openssl", "req", *ec, "-keyout", key, "-out", csr, "-subj", f"/CN={ips[0]}"],
        ["openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", cert,
         "-days", "2", "-extfile", ext],
    ):
        subprocess.run([str(a) for a in argv], check=True, capture_output=True, timeout=60)
    return Pki(ca, cert, key)


@dataclass
class SiteSpec:
    name: str
    ip: str
    control_port: int = 0
    peer_port: int = 0
    secret: str = field(default_factory=lambda: secrets.token_hex(16))


class Deployment:
    """Tracker, repository and sites, each with its own TOML file under `root`/config, started in that order."""

    def __init__(self, root: Path, data: Path, *, sites: int = 2, pki: Pki | None = None,
                 extra: dict[str, dict] | None = None, host: str = "127.0.0.1",
                 site_ips: list[str] | None = None, shared: dict[str, dict] | None = None) -> None:
        """`host`: the tracker's and the repository's address; `site_ips`: each site's (default 127.0.0.2, ...);
        `shared`: sections every part's file holds the same (e.g. {"access": {...}})."""
        self.root, self.data, self.pki = root, data, pki
        self.scheme = "https" if pki else "http"
        self.host = host
        self.tracker_port, self.repo_port = free_port(host), free_port(host)
        self.sites = [SiteSpec(f"site{i + 1}", site_ips[i] if site_ips else f"127.0.0.{i + 2}")
                      for i in range(sites)]
        for s in self.sites:
            s.control_port, s.peer_port = free_port(s.ip), free_port(s.ip)
        self.extra = extra or {}
        self.shared = shared or {}
        self.procs: dict[str, Proc] = {}

    @property
    def tracker_url(self) -> str:
        return f"{self.scheme}://{format_hostport(self.host, self.tracker_port)}"

    @property
    def repo_url(self) -> str:
        return f"{self.scheme}://{format_hostport(self.host, self.repo_port)}"

    def control_url(self, site: SiteSpec) -> str:
        return f"{self.scheme}://{format_hostport(site.ip, site.control_port)}"

    def _tls(self) -> dict[str, str]:
        if self.pki is None:
            return {}
        return {"tls_cert": str(self.pki.cert), "tls_key": str(self.pki.key), "ca_file": str(self.pki.ca)}

    def configs(self) -> dict[str, dict[str, dict]]:
        site_secrets = {s.name: s.secret for s in self.sites}
        out = {
            "tracker": {"tracker": {"listen": format_hostport(self.host, self.tracker_port), "site_secrets": site_secrets,
                                    "repo": self.repo_url, "min_seeds": len(self.sites), "repo_poll": 1,
                                    **self._tls(), **self.extra.get("tracker", {})}},
            "repo": {"repo": {"listen": format_hostport(self.host, self.repo_port), "state": str(self.root / "repo"),
                              "tracker": self.tracker_url, "site_secrets": site_secrets, **self._tls(),
                              **self.extra.get("repo", {})}},
        }
        for s in self.sites:
            out[s.name] = {"server": {
                "site": s.name, "secret": s.secret, "listen": format_hostport(s.ip, s.control_port),
                "peer_listen": format_hostport(s.ip, s.peer_port), "control_url": self.control_url(s),
                "state": str(self.root / "sites" / s.name), "roots": [str(self.data)], "tracker": self.tracker_url,
                "repo": self.repo_url, "heartbeat_interval": 1, **self._tls(), **self.extra.get(s.name, {})}}
        return {label: {**sections, **self.shared} for label, sections in out.items()}

    def config_path(self, label: str) -> Path:
        return self.root / "config" / f"{label}.toml"

    def write(self) -> None:
        (self.root / "config").mkdir(parents=True, exist_ok=True)
        for label, sections in self.configs().items():
            self.config_path(label).write_text(toml(sections))

    def argv(self, label: str) -> list[str]:
        prog = {"tracker": "bt-tracker", "repo": "bt-repo"}.get(label, "bt-server")
        return [command(prog), "run", "--config", str(self.config_path(label)), "-v"]  # as deploy/systemd/ runs them

    def start(self, label: str, env: dict | None = None) -> Proc:
        proc = Proc(self.argv(label), self.root / f"{label}.log", env=env)
        self.procs[label] = proc
        return proc

    def health_url(self, label: str) -> str:
        if label == "tracker":
            return f"{self.tracker_url}/healthz"
        if label == "repo":
            return f"{self.repo_url}/healthz"
        return f"{self.control_url(next(s for s in self.sites if s.name == label))}/healthz"

    def wait_ready(self, label: str, timeout: float = 60) -> None:
        proc = self.procs[label]
        wait_for(lambda: proc.popen.poll() is not None or self.ok(self.health_url(label)), timeout=timeout,
                 what=f"{label} to answer")
        assert proc.popen.poll() is None, f"{label} exited {proc.popen.returncode}:\n{proc.log()[-3000:]}"

    def __enter__(self) -> "Deployment":
        self.write()
        try:
            for label in ["tracker", "repo", *(s.name for s in self.sites)]:
                self.start(label)
                self.wait_ready(label)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> dict[str, int | None]:
        codes = {}
        for label, proc in reversed(list(self.procs.items())):
            codes[label] = proc.stop()
        return codes

    # --- talking to it, verifying its certificates ------------------------------------------
    def context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.pki.ca)) if self.pki else None

    def get(self, url: str, timeout: float = 5.0) -> bytes:
        with urllib.request.urlopen(url, timeout=timeout, context=self.context()) as resp:
            return resp.read()

    def get_json(self, url: str) -> object:
        return json.loads(self.get(url))

    def ok(self, url: str) -> bool:
        try:
            self.get(url, timeout=2)
            return True
        except OSError:
            return False

    def published(self, count: int = 1, timeout: float = 90) -> list[str]:
        """Dataset names once the repository lists `count` of them, each held by every site."""
        def names() -> list[str] | None:
            try:
                doc = self.get_json(f"{self.repo_url}/api/datasets?per_page=100")
            except OSError:
                return None
            found = [d["name"] for d in doc["datasets"] if len(d.get("sites", [])) == len(self.sites)]
            return found if len(found) >= count else None
        return wait_for(names, timeout=timeout, what=f"{count} datasets published by every site", interval=0.2)
