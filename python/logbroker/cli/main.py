"""The `logbroker` command.

    logbroker serve [--data-dir DIR] [--listen HOST:PORT | NAME://HOST:PORT,...] [--node-id N]
                    [--voters ID@HOST:PORT,...] [--roles broker|controller|broker,controller] [--rack RACK]
                    [--config FILE] [--set key=value ...]
    logbroker group list|describe GROUP|reset-offsets GROUP --topic T --to-...|delete GROUP
    logbroker cluster status [--bootstrap-server HOST:PORT] [--json]
    logbroker user set-password NAME [--mechanism M] [--iterations N] [--password P | --password-file F]
    logbroker user delete NAME [--mechanism M] | list [NAME ...]
    logbroker acl add|list|remove [--allow-principal P] [--operation OP] [--topic T | --group G | --cluster ...]

Prints one line on stdout when the broker accepts connections, logs to stderr, and
shuts down cleanly (logs flushed and closed, checkpoints written) on SIGINT or SIGTERM.
Exit codes: 0 clean stop, 2 bad configuration or arguments, 1 anything else.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import trio

from logbroker import gc_policy, log_format
from logbroker.common.config import BrokerConfig, ConfigError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logbroker", description="A Kafka-compatible commit-log broker.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="run a broker (one node, combined broker and controller)")
    s.add_argument("--data-dir", help="data directory (config key log.dirs; default ./logbroker-data)")
    s.add_argument("--listen", help="HOST:PORT to listen on (config key listeners; default 127.0.0.1:9092)")
    s.add_argument("--node-id", type=int, help="this node's id (config key node.id; default 1)")
    s.add_argument("--voters", help="the controller quorum, ID@HOST:PORT,... (config key controller.quorum.voters)")
    s.add_argument(
        "--roles",
        help="broker,controller (combined, the default), controller (controller-only) or broker (config key process.roles)",
    )
    s.add_argument("--rack", help="this broker's rack (config key broker.rack)")
    s.add_argument("--config", help="Java-properties file with broker config keys")
    s.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override one config key (repeatable)"
    )
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR (default INFO)")
    s.add_argument(
        "--log-format",
        choices=["text", "json"],
        default="text",
        help="text lines, or one JSON object per line (docs/operations.md, Log levels)",
    )
    sub.add_parser("config-keys", help="list the broker configuration keys with defaults")
    from logbroker.cli.group import add_parser as add_group_parser

    add_group_parser(sub)
    from logbroker.cli.cluster import add_parser as add_cluster_parser

    add_cluster_parser(sub)
    from logbroker.cli.topic import add_parser as add_topic_parser

    add_topic_parser(sub)
    from logbroker.cli.produce_consume import add_parser as add_produce_consume_parser

    add_produce_consume_parser(sub)
    from logbroker.cli.bench import add_parser as add_bench_parser

    add_bench_parser(sub)
    from logbroker.cli.mirror import add_parser as add_mirror_parser

    add_mirror_parser(sub)
    from logbroker.cli.archive import add_parser as add_archive_parser

    add_archive_parser(sub)
    from logbroker.cli.user import add_parser as add_user_parser

    add_user_parser(sub)
    from logbroker.cli.acl import add_parser as add_acl_parser

    add_acl_parser(sub)
    from logbroker.cli.quota import add_parser as add_quota_parser

    add_quota_parser(sub)
    return p


async def _serve(config: BrokerConfig) -> None:
    from logbroker.broker import BrokerServer
    from logbroker.broker.controller_server import ControllerServer

    server = BrokerServer(config) if config.is_broker else ControllerServer(config)
    heap = gc_policy.install()  # the metadata image out of the cyclic GC while it grows
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heap.run)
            host, port = await nursery.start(server.run)
            assert server.advertised is not None
            what = "listening on" if config.is_broker else "a controller-only node, controller listener on"
            print(
                f"logbroker ready: node {config.node_id} {what} {host}:{port}, "
                f"data dir {config.data_dir}, cluster {server.cluster_id}",
                flush=True,
            )
            async for signum in signals:
                logging.getLogger("logbroker").info("received %s, shutting down", signal.Signals(signum).name)
                # a second signal while leaderships move stops at once
                with trio.CancelScope() as moving:
                    nursery.start_soon(_cancel_on_signal, signals, moving)
                    await server.controlled_shutdown()
                nursery.cancel_scope.cancel()
                break


async def _cancel_on_signal(signals, scope: trio.CancelScope) -> None:
    async for _ in signals:
        scope.cancel()
        return


# subcommand -> (module, its entry point taking the parsed arguments)
SUBCOMMANDS = {
    "group": ("group", "run"),
    "topic": ("topic", "run"),
    "mirror": ("mirror", "run"),
    "archive": ("archive", "run"),
    "bench": ("bench", "run"),
    "cluster": ("cluster", "run"),
    "produce": ("produce_consume", "run_produce"),
    "consume": ("produce_consume", "run_consume"),
    "user": ("user", "run"),
    "acl": ("acl", "run"),
    "quota": ("quota", "run"),
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command in SUBCOMMANDS:
        import importlib

        from logbroker.cli.args import UsageError

        module, function = SUBCOMMANDS[args.command]
        try:
            return getattr(importlib.import_module(f"logbroker.cli.{module}"), function)(args)
        except UsageError as e:  # bad arguments or a bad --command-config, from any subcommand
            print(f"logbroker: {e}", file=sys.stderr)
            return 2
    if args.command == "config-keys":
        from logbroker.common.config import BROKER_KEYS

        for key in BROKER_KEYS.values():
            print(f"{key.name} = {key.default}\n    {key.doc}")
        return 0
    log_format.configure(args.log_level, args.log_format)
    try:
        config = BrokerConfig.load(
            args.config,
            args.set,
            **{
                "log.dirs": args.data_dir,
                "listeners": args.listen,
                "node.id": args.node_id,
                "controller.quorum.voters": args.voters,
                "broker.rack": args.rack,
                "process.roles": args.roles,
            },
        )
    except ConfigError as e:
        print(f"logbroker: bad configuration: {e}", file=sys.stderr)
        return 2
    log_format.configure(args.log_level, args.log_format, config.node_id)
    try:
        trio.run(_serve, config)
    except BaseException as e:  # noqa: BLE001 - sorted below; anything else is re-raised
        cause = _startup_error(e)
        if isinstance(cause, ConfigError):
            print(f"logbroker: bad configuration: {cause}", file=sys.stderr)
            return 2
        if isinstance(cause, OSError):
            print(f"logbroker: cannot start: {cause}", file=sys.stderr)
            return 1
        fatal = _fatal_error(e)
        if fatal is not None:
            # logged where it happened; the node stops as a Kafka node does when its
            # metadata log cannot be written (e.g. a full disk): free space and restart it
            print(f"logbroker: stopped: {fatal}", file=sys.stderr)
            return 1
        raise
    return 0


def _fatal_error(e: BaseException) -> BaseException | None:
    """The metadata-log failure that ended the node, if that is what ended it."""
    from logbroker import _core

    if isinstance(e, BaseExceptionGroup):
        for sub in e.exceptions:
            found = _fatal_error(sub)
            if found is not None:
                return found
        return None
    return e if isinstance(e, _core.RaftError) else None


def _startup_error(e: BaseException) -> BaseException | None:
    """The ConfigError or OSError behind a failed start (trio may wrap it in exception groups)."""
    from logbroker.broker.service import start_failure

    e = start_failure(e)
    return e if isinstance(e, (ConfigError, OSError)) else None


if __name__ == "__main__":
    sys.exit(main())
