"""How bt-server, bt-tracker and bt-repo start serving, said once: TLS options, the secrets check, listening.

Each service's `run` command loads its config and builds its app; what is
the same for all three is here, so that a sixth flag or a fourth service is
one change:

- `tls_options(partners)`: `--tls-cert`, `--tls-key` and `--ca-file`, one
  help text (what `--ca-file` is trusted for differs: `partners`);
- `check_secrets(...)`: the development-secret rule (torrents/devsecret.py),
  its loopback warning logged, refused off loopback;
- `serve(start, listen, processes=N, name=...)`: one process, or N on one
  port (SO_REUSEPORT, torrents/servicekit/prefork.py); an address that
  cannot be listened on is one error naming it, in either case.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import click

from torrents import devsecret
from torrents.errors import BtswarmError
from torrents.hostport import parse_hostport
from torrents.servicekit import prefork


def tls_options(partners: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """--tls-cert, --tls-key, --ca-file (`partners`: whom the CAs are for, e.g. 'an https tracker')."""
    def decorate(f: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed((
                click.option("--tls-cert", metavar="PEM", help="Serve https with this certificate (and --tls-key)."),
                click.option("--tls-key", metavar="PEM", help="The private key of --tls-cert."),
                click.option("--ca-file", metavar="PEM", help=f"CAs trusted besides the system's, for {partners} "
                             "(default: $BTSWARM_<PART>_CA_FILE, then the config's ca_file)."))):
            f = option(f)
        return f
    return decorate


def check_secrets(log: logging.Logger, key: str, secrets: Mapping[str, str], addresses: Iterable[tuple[str, str]],
                  how: str) -> None:
    """The development-secret rule: ConfigError off loopback; on loopback a line in the log (-v, as the
    units run it), not on a test's or a demo's terminal."""
    warning = devsecret.check(key, secrets, addresses, how)
    if warning:
        log.info("%s", warning)


def serve(start: Callable[[str, int, int, bool], None], listen: str, *, processes: int = 1, name: str) -> None:
    """Serve until SIGTERM or SIGINT: `start(host, port, index, reuse_port)` in this process, or in each of
    `processes` forked children on one port. Returns when stopped; BtswarmError when it cannot listen."""
    host, port = parse_hostport(listen)
    if processes <= 1:
        try:
            start(host, port, 0, False)
        except OSError as exc:  # the address is taken, or not this host's
            raise BtswarmError(listen, f"cannot listen ({exc.strerror or exc})") from None
        return

    def child(index: int) -> int:
        return prefork.listening(lambda: start(host, port, index, True), name, listen)

    if prefork.run(processes, child, name=name) != 0:
        raise BtswarmError(name, f"{processes} processes: stopped after a failure (see above)")
