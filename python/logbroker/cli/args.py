"""What the `logbroker` subcommands share: the usage error (exit code 2), KEY=VALUE
arguments, client properties (`--command-config`, as Kafka's tools take them: TLS settings
and other client keys), and a progress bar on stderr for long work."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path


class UsageError(Exception):
    """Bad arguments: reported in one line, exit code 2."""


def key_values(items: list[str], what: str) -> list[tuple[str, str]]:
    """`KEY=VALUE` arguments in order (keys may repeat); UsageError naming `what` otherwise."""
    out = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{what} {item!r} is not KEY=VALUE")
        out.append((key, value))
    return out


def add_command_config(parser, flag: str = "--command-config", whose: str = "") -> None:
    parser.add_argument(
        flag,
        metavar="FILE",
        help=f"client properties{whose} (security.protocol=SSL or "
        "SASL_SSL, ssl.truststore.location, sasl.mechanism, sasl.jaas.config, ...), as Kafka's "
        "tools take them",
    )


def client_config(path: str | None) -> dict[str, str]:
    """The client keys of a `--command-config` properties file ({} without one)."""
    if not path:
        return {}
    from logbroker.common.config import ConfigError, parse_properties

    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"), path)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror or e}") from None
    except ConfigError as e:
        raise UsageError(str(e)) from None


def run_admin_command(args, client_id: str, command) -> int:
    """Run `command(admin, args)` with an Admin for `--bootstrap-server` and
    `--command-config`: its exit code; a usage error is 2, a Kafka or value error 1, each
    reported in one line."""
    from logbroker.client import Admin, KafkaError

    try:
        with Admin(args.bootstrap_server, client_id=client_id, **client_config(args.command_config)) as admin:
            return command(admin, args)
    except UsageError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 2
    except (KafkaError, ValueError) as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1


@contextlib.contextmanager
def progress_bar(total: int | None, label: str) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr, when stderr is a terminal and `total` is known; yields
    `done(n)`, which sets how much is done (a no-op without a bar)."""
    if total is None or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.update(task, completed=n)
