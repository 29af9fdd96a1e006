"""The one contract of every btswarm command: how it ends, how it says why.

`run_main(command, prog)` is each console script's entry point and the one
place where exceptions become exit statuses (torrents.exitstatus) and
messages: one line `prog: error: subject: problem` on stderr, a traceback
only with -vv; click's usage errors the same way after the usage line;
Ctrl-C `prog: interrupted`. Results go to stdout, progress and logs to
stderr. `command_settings` gives every command `-h` as well as `--help`.
"""

from __future__ import annotations

import sys
import traceback
from typing import Sequence

import click

from torrents.errors import BtswarmError, UsageError
from torrents.exitstatus import ExitStatus, status_for

command_settings = {"help_option_names": ["-h", "--help"]}


def run_main(command: click.Command, prog: str, argv: Sequence[str] | None = None) -> int:
    """Run a click command as `prog`; return its exit status (never raises)."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbosity = verbosity_of(args)
    try:
        result = command.main(args=args, prog_name=prog, standalone_mode=False)
        return int(result) if isinstance(result, int) else int(ExitStatus.OK)
    except click.exceptions.Exit as exc:  # --help, --version, ctx.exit(code)
        return exc.exit_code
    except click.UsageError as exc:
        if exc.ctx is not None:
            click.echo(exc.ctx.get_usage(), err=True)
        return fail(prog, UsageError(_subject(exc), exc.format_message()), verbosity)
    except (KeyboardInterrupt, click.Abort):
        click.echo(f"{prog}: interrupted", err=True)
        return int(ExitStatus.INTERRUPTED)
    except BtswarmError as exc:
        return fail(prog, exc, verbosity)
    except SystemExit as exc:  # a library that exits on its own
        return exc.code if isinstance(exc.code, int) else int(ExitStatus.ERROR)
    except Exception as exc:  # a bug: still one line, unless asked for the traceback
        return fail(prog, BtswarmError(prog, f"internal error: {type(exc).__name__}: {exc}"), verbosity, exc)


def fail(prog: str, exc: BtswarmError, verbosity: int = 0, cause: BaseException | None = None) -> int:
    """Say `prog: error: subject: problem` once; the status the error carries."""
    if verbosity >= 2:
        traceback.print_exception(cause or exc, file=sys.stderr)
    click.echo(f"{prog}: error: {exc}", err=True)
    return int(status_for(exc))


def verbosity_of(args: Sequence[str]) -> int:
    """How many -v the command line holds (known before click parses it: tracebacks need it)."""
    count = sum(a.count("v") for a in args if a.startswith("-v") and set(a[1:]) == {"v"})
    return count + sum(1 for a in args if a == "--verbose")


def _subject(exc: click.UsageError) -> str:
    param = getattr(exc, "param", None)
    if param is not None and getattr(param, "opts", None):
        return param.opts[-1]
    return "usage"
