"""SCRAM credentials in the metadata log (KIP-554): the UserScramCredential records, the
controller's validation and key computation (RFC 7677's test vector), DescribeUserScramCredentials
and AlterUserScramCredentials over the wire with every error code Kafka gives, logbroker's
Admin and `logbroker user`, a restart, a three-node cluster (forwarded, on every node,
surviving the controller's death), and other clients: confluent-kafka's AdminClient and
Kafka's own kafka-configs."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import conftest
import pytest
from conftest import needs_java
from rawclient import RawClient

from logbroker import Broker, Cluster, scram
from logbroker.client import Admin
from logbroker.client.errors import (
    DuplicateResourceError,
    ResourceNotFoundError,
    UnacceptableCredentialError,
    UnsupportedSaslMechanismError,
)
from logbroker.coord.metadata.metadata import MetadataImage, ScramCredential
from logbroker.coord.metadata.metadata_records import (
    MetadataRecordError,
    apply,
    diff_records,
    encode_record,
    load_snapshot,
    snapshot,
)
from logbroker.protocol import REQUESTS, ErrorCode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

Describe, Alter = REQUESTS[50], REQUESTS[51]
SHA256, SHA512 = "SCRAM-SHA-256", "SCRAM-SHA-512"


def upsertion(
    name: str, mechanism: int = 1, iterations: int = 4096, password: bytes = b"pw", salt: bytes = b"salt-salt-salt"
):
    """An upsertion as a client sends it (a bad mechanism or iteration count salted as if good)."""
    mech = scram.MECHANISM_NAMES.get(mechanism, SHA256)
    rounds = iterations if scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS else 4096
    return Alter.ScramCredentialUpsertion(
        name=name,
        mechanism=mechanism,
        iterations=iterations,
        salt=salt,
        salted_password=scram.salted_password(mech, password, salt, rounds),
    )


def alter(c: RawClient, upsertions=(), deletions=()) -> dict[str, tuple[int, str | None]]:
    r = c.request(
        51,
        0,
        Alter(
            upsertions=list(upsertions),
            deletions=[Alter.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions],
        ),
    )
    return {x.user: (x.error_code, x.error_message) for x in r.results}


def describe(c: RawClient, users: list[str] | None) -> dict[str, tuple[int, list[tuple[int, int]]]]:
    r = c.request(50, 0, Describe(users=None if users is None else [Describe.UserName(name=u) for u in users]))
    assert r.error_code == 0, r.error_message
    return {x.user: (x.error_code, [(i.mechanism, i.iterations) for i in x.credential_infos]) for x in r.results}


def knows_password(image: MetadataImage, user: str, mechanism: str, password: bytes) -> bool:
    """Whether the stored credential is the one `password` gives (the keys a SCRAM login checks)."""
    c = image.scram_credential(user, mechanism)
    if c is None:
        return False
    salted = scram.salted_password(mechanism, password, c.salt, c.iterations)
    return (c.stored_key, c.server_key) == (scram.stored_key(mechanism, salted), scram.server_key(mechanism, salted))


# --- metadata records ------------------------------------------------------------------


def credential(mechanism: str = SHA256, iterations: int = 4096, tag: bytes = b"a") -> ScramCredential:
    return ScramCredential(mechanism, b"salt-" + tag, b"stored-" + tag, b"server-" + tag, iterations)


def test_records_apply_diff_and_snapshot_round_trip():
    old = MetadataImage("c", 1, {}, {}, 0)
    new = MetadataImage("c", 1, {}, {}, 0)
    new.scram_credentials = {
        "alice": {SHA256: credential(), SHA512: credential(SHA512, 8192, b"b")},
        "bob": {SHA512: credential(SHA512, tag=b"c")},
    }
    records = diff_records(old, new)
    assert [json.loads(r)["type"] for r in records] == ["UserScramCredential"] * 3
    assert [json.loads(r)["name"] for r in records] == ["alice", "alice", "bob"], "deterministic order"
    assert json.loads(records[0])["salt"] == base64.b64encode(b"salt-a").decode()
    for r in records:
        apply(old, r)
    assert old.scram_credentials == new.scram_credentials
    assert old.scram_credential("alice", SHA512).iterations == 8192
    assert old.scram_credential("alice", "SCRAM-SHA-1") is None and old.scram_credential("carol", SHA256) is None

    # replace one, remove one (bob's last: bob goes)
    newer = load_snapshot(snapshot(new), 1)
    assert newer.scram_credentials == new.scram_credentials, "snapshots carry the credentials"
    newer.scram_credentials["alice"][SHA256] = credential(tag=b"z")
    del newer.scram_credentials["bob"]
    records = diff_records(new, newer)
    assert [(json.loads(r)["type"], json.loads(r)["name"]) for r in records] == [
        ("UserScramCredential", "alice"),
        ("RemoveUserScramCredential", "bob"),
    ]
    for r in records:
        apply(new, r)
    assert new.scram_credentials == newer.scram_credentials and "bob" not in new.scram_credentials
    assert diff_records(new, newer) == []

    doc = new.to_json()
    assert MetadataImage.from_json(doc, 1, {}).scram_credentials == new.scram_credentials
    del doc["scram_credentials"]  # an image.json written before credentials existed
    assert MetadataImage.from_json(doc, 1, {}).scram_credentials == {}
    assert "stored" not in repr(new.scram_credential("alice", SHA256)), "keys stay out of logs"


@pytest.mark.parametrize(
    "record",
    [
        encode_record("RemoveUserScramCredential", name="nobody", mechanism=SHA256),
        encode_record("RemoveUserScramCredential", name="alice", mechanism=SHA512),
        encode_record(
            "UserScramCredential",
            name="alice",
            mechanism="SCRAM-SHA-1",
            salt="",
            stored_key="",
            server_key="",
            iterations=4096,
        ),
        encode_record(
            "UserScramCredential",
            name="alice",
            mechanism=SHA256,
            salt="not base64!",
            stored_key="",
            server_key="",
            iterations=4096,
        ),
        encode_record(
            "UserScramCredential", name="alice", mechanism=SHA256, salt="", stored_key="", server_key="", iterations=100
        ),
        encode_record("UserScramCredential", name="alice", mechanism=SHA256, salt="", iterations=4096),
        encode_record(
            "UserScramCredential", name="alice", mechanism=SHA256, salt=5, stored_key="", server_key="", iterations=4096
        ),
        encode_record(
            "UserScramCredential",
            name="alice",
            mechanism=SHA256,
            salt="",
            stored_key="",
            server_key="",
            iterations=None,
        ),
        encode_record(
            "UserScramCredential", name="", mechanism=SHA256, salt="", stored_key="", server_key="", iterations=4096
        ),
    ],
)
def test_records_that_do_not_fit_change_nothing(record):
    image = MetadataImage("c", 1, {}, {}, 0)
    image.scram_credentials = {"alice": {SHA256: credential()}}
    with pytest.raises(MetadataRecordError):
        apply(image, record)
    assert image.scram_credentials == {"alice": {SHA256: credential()}}


# --- the controller's keys: RFC 7677's example -----------------------------------------


def test_controller_keys_match_rfc_7677(tmp_path):
    """RFC 7677 section 3: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096
    iterations. The keys the controller stores from the salted password accept the RFC's
    client proof and give its server signature."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    auth_message = (
        f"n=user,r=rOprNGfwEbeRWgbNEkqO,r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,c=biws,r={nonce}"
    ).encode()
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        up = Alter.ScramCredentialUpsertion(
            name="user",
            mechanism=1,
            iterations=4096,
            salt=salt,
            salted_password=scram.salted_password(SHA256, b"pencil", salt, 4096),
        )
        assert alter(c, [up]) == {"user": (0, None)}
        cred = b.server.controller.image.scram_credential("user", SHA256)
    assert (cred.salt, cred.iterations) == (salt, 4096)
    assert scram.verify_proof(SHA256, cred.stored_key, auth_message, proof)
    assert not scram.verify_proof(SHA256, cred.stored_key, auth_message + b"x", proof)
    assert (
        base64.b64encode(scram.server_signature(SHA256, cred.server_key, auth_message)).decode()
        == "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    )


# --- over the wire -----------------------------------------------------------------------


def test_every_error_code_over_the_wire(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        assert describe(c, None) == {} and describe(c, []) == {}
        assert alter(c, [upsertion("alice"), upsertion("bob", 2, 16384)]) == {"alice": (0, None), "bob": (0, None)}
        assert describe(c, None) == {"alice": (0, [(1, 4096)]), "bob": (0, [(2, 16384)])}
        assert describe(c, []) == describe(c, None), "an empty list is every user too"

        got = alter(
            c,
            [
                upsertion("u0", mechanism=0),
                upsertion("u7", mechanism=7),
                upsertion("few", iterations=4095),
                upsertion("many", iterations=16385),
                upsertion(""),
                upsertion("carol"),
            ],
        )
        assert {u: code for u, (code, _m) in got.items()} == {
            "u0": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "u7": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "carol": ErrorCode.NONE,
        }
        assert "type 7" in got["u7"][1] and "'u7'" in got["u7"][1]
        assert "4095" in got["few"][1] and "16385" in got["many"][1] and "'few'" in got["few"][1]

        got = alter(c, deletions=[("alice", 2), ("nobody", 1), ("bob", 2)])
        assert got["alice"][0] == ErrorCode.RESOURCE_NOT_FOUND and SHA512 in got["alice"][1]
        assert got["nobody"][0] == ErrorCode.RESOURCE_NOT_FOUND and "'nobody'" in got["nobody"][1]
        assert got["bob"] == (0, None)

        # a user named twice in one request, whatever the mechanisms: DUPLICATE_RESOURCE, nothing changes
        got = alter(c, [upsertion("alice", 2), upsertion("dave"), upsertion("dave", 2)], deletions=[("alice", 1)])
        assert got["alice"][0] == got["dave"][0] == ErrorCode.DUPLICATE_RESOURCE and "'dave'" in got["dave"][1]
        got = alter(c, deletions=[("alice", 1), ("alice", 1)])
        assert got == {"alice": (ErrorCode.DUPLICATE_RESOURCE, got["alice"][1])}

        assert describe(c, None) == {"alice": (0, [(1, 4096)]), "carol": (0, [(1, 4096)])}
        got = describe(c, ["alice", "bob", "carol", "carol"])
        assert got == {
            "alice": (0, [(1, 4096)]),
            "bob": (ErrorCode.RESOURCE_NOT_FOUND, []),
            "carol": (ErrorCode.DUPLICATE_RESOURCE, []),
        }
        # replacing a credential keeps one per mechanism
        assert alter(c, [upsertion("alice", 1, 8192)]) == {"alice": (0, None)}
        assert describe(c, ["alice"]) == {"alice": (0, [(1, 8192)])}
        assert knows_password(b.server.controller.image, "alice", SHA256, b"pw")


def test_set_describe_delete_with_our_admin(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        admin.alter_user_scram_credentials(
            upsertions=[("alice", SHA256, "alice-secret", 8192), ("bob", SHA512, b"bob-secret", 4096)]
        )
        assert admin.describe_user_scram_credentials() == {"alice": [(SHA256, 8192)], "bob": [(SHA512, 4096)]}
        admin.alter_user_scram_credentials(upsertions=[("alice", SHA512, "alice-512", 4096)])
        assert admin.describe_user_scram_credentials(["alice"]) == {"alice": [(SHA256, 8192), (SHA512, 4096)]}
        image = b.server.controller.image
        assert knows_password(image, "alice", SHA256, b"alice-secret")
        assert knows_password(image, "alice", SHA512, b"alice-512")
        assert knows_password(image, "bob", SHA512, b"bob-secret")
        assert not knows_password(image, "alice", SHA256, b"wrong")
        first_salt = image.scram_credential("alice", SHA256).salt
        admin.alter_user_scram_credentials(upsertions=[("alice", SHA256, "alice-secret", 8192)])
        assert b.server.controller.image.scram_credential("alice", SHA256).salt != first_salt, "a fresh random salt"

        with pytest.raises(ResourceNotFoundError, match="'carol'"):
            admin.describe_user_scram_credentials(["carol"])
        with pytest.raises(ResourceNotFoundError, match="'bob'.*SCRAM-SHA-256"):
            admin.alter_user_scram_credentials(deletions=[("bob", SHA256)])
        with pytest.raises(DuplicateResourceError, match="'alice'"):
            admin.alter_user_scram_credentials(upsertions=[("alice", SHA256, "x", 4096)], deletions=[("alice", SHA512)])
        with pytest.raises(UnacceptableCredentialError, match="'alice'.*100 iterations"):
            admin.alter_user_scram_credentials(upsertions=[("alice", SHA256, "x", 100)])
        with pytest.raises(UnacceptableCredentialError, match="''"):
            admin.alter_user_scram_credentials(upsertions=[("", SHA256, "x", 4096)])
        with pytest.raises(UnsupportedSaslMechanismError, match="'alice'.*SCRAM-SHA-1"):
            admin.alter_user_scram_credentials(upsertions=[("alice", "SCRAM-SHA-1", "x", 4096)])

        admin.alter_user_scram_credentials(deletions=[("alice", SHA256)])
        assert admin.describe_user_scram_credentials() == {"alice": [(SHA512, 4096)], "bob": [(SHA512, 4096)]}
        admin.alter_user_scram_credentials(deletions=[("alice", SHA512)])
        assert admin.describe_user_scram_credentials() == {"bob": [(SHA512, 4096)]}


def test_credentials_survive_a_restart(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        admin.alter_user_scram_credentials(upsertions=[("alice", SHA512, "alice-secret", 10000)])
    with Broker(data_dir=tmp_path / "d") as b, Admin(b.bootstrap_servers) as admin:
        assert admin.describe_user_scram_credentials() == {"alice": [(SHA512, 10000)]}
        assert knows_password(b.server.controller.image, "alice", SHA512, b"alice-secret")


# --- logbroker user ----------------------------------------------------------------------


def user_cli(bs: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "user", "--bootstrap-server", bs, *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin if stdin is not None else "",
    )


def test_user_cli(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        r = user_cli(bs, "set-password", "alice", "--password", "alice-secret", "--iterations", "8192")
        assert r.returncode == 0 and "SCRAM-SHA-256" in r.stdout, r.stderr
        pw_file = tmp_path / "pw"
        pw_file.write_text("alice-512\nignored second line\n")
        r = user_cli(bs, "set-password", "alice", "--mechanism", SHA512, "--password-file", str(pw_file))
        assert r.returncode == 0, r.stderr
        r = user_cli(bs, "set-password", "bob", stdin="bob-secret\n")
        assert r.returncode == 0, r.stderr
        image = b.server.controller.image
        assert knows_password(image, "alice", SHA256, b"alice-secret")
        assert knows_password(image, "alice", SHA512, b"alice-512")
        assert knows_password(image, "bob", SHA256, b"bob-secret")

        r = user_cli(bs, "list")
        assert r.returncode == 0, r.stderr
        assert [line.split() for line in r.stdout.splitlines()] == [
            ["USER", "MECHANISM", "ITERATIONS"],
            ["alice", SHA256, "8192"],
            ["alice", SHA512, "4096"],
            ["bob", SHA256, "4096"],
        ]
        r = user_cli(bs, "list", "bob")
        assert r.returncode == 0, r.stderr
        assert r.stdout.splitlines() == ["USER  MECHANISM      ITERATIONS", f"bob   {SHA256}  4096"], r.stdout
        r = user_cli(bs, "list", "nobody")
        assert r.returncode == 1 and "'nobody'" in r.stderr and "RESOURCE_NOT_FOUND" in r.stderr

        assert user_cli(bs, "set-password", "carol", stdin="").returncode == 2, "no password"
        r = user_cli(bs, "set-password", "carol", "--password", "x", "--iterations", "100")
        assert r.returncode == 2 and "100" in r.stderr
        assert user_cli(bs, "set-password", "carol", "--password", "x", "--mechanism", "PLAIN").returncode == 2
        assert user_cli(bs, "set-password", "carol", "--password-file", str(tmp_path / "none")).returncode == 2

        r = user_cli(bs, "delete", "alice", "--mechanism", SHA512)
        assert r.returncode == 0 and SHA512 in r.stdout, r.stderr
        r = user_cli(bs, "delete", "alice", "--mechanism", SHA512)
        assert r.returncode == 1 and "RESOURCE_NOT_FOUND" in r.stderr and "'alice'" in r.stderr
        r = user_cli(bs, "delete", "bob")  # every credential bob has
        assert r.returncode == 0, r.stderr
        with Admin(bs) as admin:
            assert admin.describe_user_scram_credentials() == {"alice": [(SHA256, 8192)]}
        assert user_cli(bs, "delete", "bob").returncode == 1


# --- a cluster -----------------------------------------------------------------------------


def test_cluster_forwards_and_every_node_sees_the_credentials(tmp_path):
    from conftest import wait_until

    with Cluster(3, data_dir=tmp_path) as cluster:
        controller = cluster.controller_id()
        other = next(n for n in cluster.nodes if n.node_id != controller)
        with RawClient(other.bootstrap_servers) as c:  # not the active controller: forwarded
            assert alter(c, [upsertion("alice", 2, 8192)]) == {"alice": (0, None)}
            assert describe(c, ["alice"]) == {"alice": (0, [(2, 8192)])}, "the forwarding node waited for it"
            got = alter(c, deletions=[("nobody", 1)], upsertions=[upsertion("few", iterations=10)])
            assert {u: code for u, (code, _m) in got.items()} == {
                "nobody": ErrorCode.RESOURCE_NOT_FOUND,
                "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            }
        for n in cluster.nodes:
            with RawClient(n.bootstrap_servers) as c:
                assert wait_until(
                    lambda: describe(c, None) == {"alice": (0, [(2, 8192)])},
                    timeout=10,
                    what=f"alice on node {n.node_id}",
                )
        # through the controller listener of a node that is not the active controller: refused, not forwarded
        host, _ = other.bootstrap_servers.rsplit(":", 1)
        with RawClient(f"{host}:{other.controller_port}") as c:
            got = alter(c, [upsertion("eve")])
            assert got["eve"][0] == ErrorCode.NOT_CONTROLLER

        cluster.node(controller).kill()
        survivors = [n for n in cluster.nodes if n.node_id != controller]
        for n in survivors:
            with RawClient(n.bootstrap_servers) as c:
                assert describe(c, None) == {"alice": (0, [(2, 8192)])}, n.node_id
        with Admin(survivors[0].bootstrap_servers) as admin:
            wait_until(
                lambda: admin.alter_user_scram_credentials(upsertions=[("bob", SHA256, "bob-secret", 4096)]) is None,
                timeout=30,
                what="a new controller",
            )
        for n in survivors:
            with RawClient(n.bootstrap_servers) as c:
                assert wait_until(
                    lambda: describe(c, None) == {"alice": (0, [(2, 8192)]), "bob": (0, [(1, 4096)])},
                    timeout=10,
                    what=f"bob on node {n.node_id}",
                )
        cluster.node(controller).start()  # back: it catches up from the log
        with RawClient(cluster.node(controller).bootstrap_servers) as c:
            assert wait_until(
                lambda: describe(c, None) == {"alice": (0, [(2, 8192)]), "bob": (0, [(1, 4096)])},
                timeout=30,
                what="the restarted node catches up",
            )


# --- other clients -------------------------------------------------------------------------


def test_confluent_kafka_admin_client(tmp_path):
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    with Broker(data_dir=tmp_path / "d") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 10000), b"carol-secret"
                ),
                UserScramCredentialUpsertion(
                    "dave",
                    ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                    b"dave-secret",
                    b"a-salt-of-our-choosing",
                ),
            ]
        )
        for f in futures.values():
            f.result(10)
        image = b.server.controller.image
        assert knows_password(image, "carol", SHA512, b"carol-secret"), "librdkafka salted it as we do"
        assert knows_password(image, "dave", SHA256, b"dave-secret")
        assert image.scram_credential("dave", SHA256).salt == b"a-salt-of-our-choosing"

        every = admin.describe_user_scram_credentials().result(10)
        assert {u: [(i.mechanism, i.iterations) for i in d.scram_credential_infos] for u, d in every.items()} == {
            "carol": [(ScramMechanism.SCRAM_SHA_512, 10000)],
            "dave": [(ScramMechanism.SCRAM_SHA_256, 4096)],
        }
        named = admin.describe_user_scram_credentials(["carol", "nobody"])
        assert [(i.mechanism, i.iterations) for i in named["carol"].result(10).scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_512, 10000)
        ]
        with pytest.raises(Exception, match="(?i)not exist|no scram credential|RESOURCE_NOT_FOUND"):
            named["nobody"].result(10)

        futures = admin.alter_user_scram_credentials(
            [
                UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512),
                UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256),
                UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x"),
            ]
        )
        futures["carol"].result(10)
        with pytest.raises(Exception, match="'nobody'"):
            futures["nobody"].result(10)
        with pytest.raises(Exception, match="100 iterations"):
            futures["erin"].result(10)
        assert list(admin.describe_user_scram_credentials().result(10)) == ["dave"]


SCRAM_ADMIN = str(Path(__file__).resolve().parent / "java" / "ScramAdmin.java")


def kafka_configs(tools, bs: str, *args: str) -> str:
    """kafka-configs on users (SCRAM credentials are user configs)."""
    return conftest.kafka_configs(tools, bs, "--entity-type", "users", *args)


def java_describe(tools, bs: str, *users: str) -> list[str]:
    """Kafka's Java Admin describeUserScramCredentials (tests/java/ScramAdmin.java)."""
    cmd = [
        "java",
        "-Xmx256m",
        f"-Dlog4j2.configurationFile={tools.tools_log4j}",
        "-cp",
        tools.tools_cp,
        SCRAM_ADMIN,
        bs,
        *users,
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout.splitlines()


@needs_java
def test_kafka_configs_tool_and_java_admin(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
            "--entity-name",
            "alice",
        )
        kafka_configs(
            tools, bs, "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-512]", "--entity-name", "alice"
        )
        image = b.server.controller.image
        assert knows_password(image, "alice", SHA256, b"alice-secret"), "Kafka's Admin salted it as we do"
        assert image.scram_credential("alice", SHA256).iterations == 8192
        assert knows_password(image, "alice", SHA512, b"alice-512")
        assert java_describe(tools, bs) == [f"alice {SHA256} 8192", f"alice {SHA512} 4096"]
        kafka_configs(tools, bs, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-name", "alice")
        assert java_describe(tools, bs, "alice", "nobody") == [
            f"alice {SHA256} 8192",
            "nobody ERROR ResourceNotFoundException: user 'nobody' has no SCRAM credential",
        ]


@needs_java
def test_kafka_configs_tool_describes_users(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d") as b:
        bs = b.bootstrap_servers
        kafka_configs(
            tools,
            bs,
            "--alter",
            "--add-config",
            "SCRAM-SHA-256=[iterations=8192,password=alice-secret]",
            "--entity-name",
            "alice",
        )
        out = kafka_configs(tools, bs, "--describe")
        assert "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192" in out, out
