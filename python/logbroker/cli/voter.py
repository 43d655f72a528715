"""`logbroker cluster add-voter|remove-voter`: change the controller quorum's voters
(KIP-853's AddRaftVoter and RemoveRaftVoter), as `kafka-metadata-quorum add-controller`
and `remove-controller` do.

    logbroker cluster add-voter --bootstrap-server B --id 4 --data-dir /var/lib/node4 \\
        --endpoint 10.0.0.4:9093 [--listener CONTROLLER] [--timeout-ms 30000]
    logbroker cluster add-voter --bootstrap-server B --id 4 --directory-id <base64 uuid> --endpoint HOST:PORT
    logbroker cluster remove-voter --bootstrap-server B --id 3 [--directory-id <base64 uuid>]

The new voter must already run (a controller started with
`controller.quorum.bootstrap.servers` and the cluster's `cluster.id`) and have caught up as
an observer; its directory id is `directory.id` in its data directory's meta.properties
(`--data-dir` reads it there). `remove-voter` without `--directory-id` takes the voter's
from DescribeQuorum. Any broker will do: it forwards the request to the active controller.
Prints one line saying what changed. Exit codes: 0 done, 1 refused or unreachable (the
line names the Kafka error and why), 2 bad arguments.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from logbroker.cli.args import add_command_config, client_config
from logbroker.client import BrokerConnection, ClientError
from logbroker.common import directory_id
from logbroker.protocol import REQUESTS, ErrorCode, ProtocolError

TIMEOUT_S = 60.0


def add_parsers(cs) -> None:
    a = cs.add_parser("add-voter", help="make a running, caught-up controller a voter of the controller quorum")
    a.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="HOST:PORT of any broker")
    a.add_argument("--id", type=int, required=True, help="the new voter's node.id")
    a.add_argument("--directory-id", help="its metadata directory id (directory.id in its meta.properties)")
    a.add_argument("--data-dir", help="its data directory: read the directory id from its meta.properties")
    a.add_argument("--endpoint", required=True, help="HOST:PORT of its controller listener")
    a.add_argument("--listener", default="CONTROLLER", help="the controller listener's name (default CONTROLLER)")
    a.add_argument("--timeout-ms", type=int, default=30000, help="how long the controller waits for it to catch up")
    add_command_config(a)
    r = cs.add_parser("remove-voter", help="remove a voter from the controller quorum")
    r.add_argument("--bootstrap-server", default="127.0.0.1:9092", help="HOST:PORT of any broker")
    r.add_argument("--id", type=int, required=True, help="the voter's node.id")
    r.add_argument("--directory-id", help="its directory id (default: the one DescribeQuorum reports)")
    add_command_config(r)


def _directory_from_data_dir(path: str) -> str:
    meta = Path(path) / "meta.properties"
    try:
        for line in meta.read_text().splitlines():
            if line.startswith("directory.id="):
                return line.split("=", 1)[1].strip()
    except OSError as e:
        raise ValueError(f"cannot read {meta}: {e.strerror or e}") from None
    raise ValueError(f"{meta} has no directory.id (start the node once: it writes one)")


def _voter_directory(conn: BrokerConnection, node_id: int) -> uuid.UUID:
    Request = REQUESTS[55]
    r = conn.send(
        Request(
            topics=[
                Request.TopicData(
                    topic_name="__cluster_metadata", partitions=[Request.PartitionData(partition_index=0)]
                )
            ]
        ),
        version=min(2, conn.version_for(55)),
    )
    for t in r.topics:
        for p in t.partitions:
            for v in p.current_voters:
                if v.replica_id == node_id:
                    return getattr(v, "replica_directory_id", uuid.UUID(int=0))
    raise ValueError(
        f"node {node_id} is not a voter (DescribeQuorum: voters "
        f"{sorted(v.replica_id for t in r.topics for p in t.partitions for v in p.current_voters)})"
    )


def run(args) -> int:
    try:
        directory = None
        if args.directory_id:
            directory = directory_id.parse(args.directory_id)
        elif args.cluster_command == "add-voter":
            if not args.data_dir:
                raise ValueError("give --directory-id or --data-dir (the new voter's meta.properties has it)")
            directory = directory_id.parse(_directory_from_data_dir(args.data_dir))
        endpoint = None
        if args.cluster_command == "add-voter":
            host, sep, port = args.endpoint.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"--endpoint expects HOST:PORT, got {args.endpoint!r}")
            endpoint = (host, int(port))
    except ValueError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 2
    server = args.bootstrap_server.split(",")[0].strip()
    try:
        with BrokerConnection(
            server, client_id="logbroker-cluster-voters", timeout=TIMEOUT_S, config=client_config(args.command_config)
        ) as conn:
            if args.cluster_command == "add-voter":
                Request = REQUESTS[80]
                assert endpoint is not None and directory is not None
                request = Request(
                    cluster_id=None,
                    timeout_ms=args.timeout_ms,
                    voter_id=args.id,
                    voter_directory_id=directory,
                    listeners=[Request.Listener(name=args.listener, host=endpoint[0], port=endpoint[1])],
                )
                r = conn.send(request, version=conn.version_for(80))
            else:
                if directory is None:
                    directory = _voter_directory(conn, args.id)
                r = conn.send(
                    REQUESTS[81](cluster_id=None, voter_id=args.id, voter_directory_id=directory),
                    version=conn.version_for(81),
                )
    except ValueError as e:
        print(f"logbroker: {e}", file=sys.stderr)
        return 1
    except (ClientError, OSError, ProtocolError) as e:
        print(f"logbroker: {server}: {e or type(e).__name__}", file=sys.stderr)
        return 1
    if r.error_code:
        print(
            f"logbroker: {args.cluster_command} {args.id}: {ErrorCode(r.error_code).name}: {r.error_message or ''}",
            file=sys.stderr,
        )
        return 1
    what = "is a voter now" if args.cluster_command == "add-voter" else "is no longer a voter"
    print(f"node {args.id} (directory id {directory_id.text(directory)}) {what}")
    return 0
