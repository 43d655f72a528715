"""ACLs in the metadata log: the Acl/RemoveAcl records, Kafka's filter semantics, the Rust
rules (`_core.Authorizer`), DescribeAcls/CreateAcls/DeleteAcls over the wire with every error
Kafka gives (SECURITY_DISABLED without an authorizer, CLUSTER_AUTHORIZATION_FAILED, each
INVALID_REQUEST), logbroker's Admin and `logbroker acl`, a restart, a three-node cluster
(forwarded, in every node's image and authorizer), and other clients: confluent-kafka's
AdminClient and Kafka's own kafka-acls.

On a PLAINTEXT listener the principal is User:ANONYMOUS, so the brokers here make it a super
user to manage ACLs (or open the cluster with allow.everyone.if.no.acl.found)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_java
from rawclient import RawClient

from logbroker import Broker, Cluster, _core
from logbroker.client.admin import AclBinding as Acl
from logbroker.client.admin import AclBindingFilter as AclFilter
from logbroker.client.admin import Admin
from logbroker.client.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    SecurityDisabledError,
)
from logbroker.common.acl import (
    CLUSTER_NAME,
    STANDARD_AUTHORIZER,
)
from logbroker.common.acl import (
    AclOperation as Op,
)
from logbroker.common.acl import (
    AclPermissionType as Perm,
)
from logbroker.common.acl import (
    PatternType as Pat,
)
from logbroker.common.acl import (
    ResourceType as Res,
)
from logbroker.coord.metadata.metadata import AclBinding, AclBindingFilter, MetadataImage
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

Describe, Create, Delete = REQUESTS[29], REQUESTS[30], REQUESTS[31]
SECURE = {"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"}


def binding(
    rt=Res.TOPIC, name="orders", pt=Pat.LITERAL, principal="User:alice", host="*", op=Op.READ, perm=Perm.ALLOW
) -> AclBinding:
    return AclBinding(int(rt), name, int(pt), principal, host, int(op), int(perm))


ALICE_READS_ORDERS = binding()


# --- raw requests ------------------------------------------------------------------------


def create(c: RawClient, *acls: AclBinding, version: int = 3) -> list[tuple[int, str | None]]:
    r = c.request(
        30,
        version,
        Create(
            creations=[
                Create.AclCreation(
                    resource_type=a.resource_type,
                    resource_name=a.resource_name,
                    resource_pattern_type=a.pattern_type,
                    principal=a.principal,
                    host=a.host,
                    operation=a.operation,
                    permission_type=a.permission_type,
                )
                for a in acls
            ]
        ),
    )
    return [(x.error_code, x.error_message) for x in r.results]


# The default filter of describe_raw/describe: every ACL (AclBindingFilter is frozen).
ANY_ACL = AclBindingFilter()


def describe_raw(c: RawClient, f: AclBindingFilter = ANY_ACL, version: int = 3):
    return c.request(
        29,
        version,
        Describe(
            resource_type_filter=f.resource_type,
            resource_name_filter=f.resource_name,
            pattern_type_filter=f.pattern_type,
            principal_filter=f.principal,
            host_filter=f.host,
            operation=f.operation,
            permission_type=f.permission_type,
        ),
    )


def describe(c: RawClient, f: AclBindingFilter = ANY_ACL, version: int = 3) -> list[AclBinding]:
    r = describe_raw(c, f, version)
    assert r.error_code == 0, (r.error_code, r.error_message)
    return [
        AclBinding(
            res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation, a.permission_type
        )
        for res in r.resources
        for a in res.acls
    ]


def delete(c: RawClient, *filters: AclBindingFilter, version: int = 3) -> list[tuple[int, str | None, list]]:
    r = c.request(
        31,
        version,
        Delete(
            filters=[
                Delete.DeleteAclsFilter(
                    resource_type_filter=f.resource_type,
                    resource_name_filter=f.resource_name,
                    pattern_type_filter=f.pattern_type,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=f.operation,
                    permission_type=f.permission_type,
                )
                for f in filters
            ]
        ),
    )
    return [
        (
            x.error_code,
            x.error_message,
            [
                AclBinding(
                    m.resource_type,
                    m.resource_name,
                    m.pattern_type,
                    m.principal,
                    m.host,
                    m.operation,
                    m.permission_type,
                )
                for m in x.matching_acls
            ],
        )
        for x in r.filter_results
    ]


# --- metadata records ----------------------------------------------------------------------


def test_records_apply_diff_and_snapshot_round_trip():
    old = MetadataImage("c", 1, {}, {}, 0)
    new = MetadataImage("c", 1, {}, {}, 0)
    new.acls = {"b" * 32: binding(), "a" * 32: binding(pt=Pat.PREFIXED, name="pay-", op=Op.WRITE, perm=Perm.DENY)}
    records = diff_records(old, new)
    assert [(json.loads(r)["type"], json.loads(r)["id"]) for r in records] == [("Acl", "a" * 32), ("Acl", "b" * 32)], (
        "deterministic order"
    )
    assert json.loads(records[1])["resource_name"] == "orders" and json.loads(records[0])["pattern_type"] == 4
    for r in records:
        apply(old, r)
    assert old.acls == new.acls

    newer = load_snapshot(snapshot(new), 1)
    assert newer.acls == new.acls, "snapshots carry the ACLs"
    del newer.acls["a" * 32]
    newer.acls["c" * 32] = binding(principal="User:*", host="10.0.0.1")
    records = diff_records(new, newer)
    assert [(json.loads(r)["type"], json.loads(r)["id"]) for r in records] == [
        ("RemoveAcl", "a" * 32),
        ("Acl", "c" * 32),
    ]
    for r in records:
        apply(new, r)
    assert new.acls == newer.acls and diff_records(new, newer) == []

    doc = new.to_json()
    assert MetadataImage.from_json(doc, 1, {}).acls == new.acls
    del doc["acls"]  # an image.json written before ACLs existed
    assert MetadataImage.from_json(doc, 1, {}).acls == {}


ACL_FIELDS = dict(
    resource_type=2,
    resource_name="orders",
    pattern_type=3,
    principal="User:alice",
    host="*",
    operation=3,
    permission_type=3,
)


@pytest.mark.parametrize(
    "record",
    [
        encode_record("RemoveAcl", id="nope"),
        encode_record("RemoveAcl", id=""),
        encode_record("Acl", id="", **ACL_FIELDS),
        encode_record("Acl", id=5, **ACL_FIELDS),
        encode_record("Acl", id="x", **{**ACL_FIELDS, "pattern_type": 1}),
        encode_record("Acl", id="x", **{**ACL_FIELDS, "permission_type": 1}),
        encode_record("Acl", id="x", **{**ACL_FIELDS, "resource_name": ""}),
        encode_record("Acl", id="x", **{**ACL_FIELDS, "operation": "READ"}),
        encode_record("Acl", id="x", **{**ACL_FIELDS, "principal": None}),
        encode_record("Acl", id="x", **{k: v for k, v in ACL_FIELDS.items() if k != "host"}),
    ],
)
def test_records_that_do_not_fit_change_nothing(record):
    image = MetadataImage("c", 1, {}, {}, 0)
    image.acls = {"a": binding()}
    with pytest.raises(MetadataRecordError):
        apply(image, record)
    assert image.acls == {"a": binding()}


def test_filter_semantics_are_kafkas():
    literal, wildcard = binding(), binding(name="*")
    prefixed = binding(name="ord", pt=Pat.PREFIXED)
    other_prefix = binding(name="pay", pt=Pat.PREFIXED)
    group = binding(rt=Res.GROUP)
    acls = [literal, wildcard, prefixed, other_prefix, group]

    def matching(**kw) -> list[AclBinding]:
        return [a for a in acls if AclBindingFilter(**kw).matches(a)]

    assert matching() == acls, "ANY and null match everything"
    assert matching(resource_type=Res.GROUP) == [group]
    assert matching(resource_name="orders", pattern_type=Pat.LITERAL) == [literal, group]
    assert matching(resource_name="orders", pattern_type=Pat.ANY) == [literal, group], "ANY: equal names only"
    assert matching(resource_name="ord", pattern_type=Pat.PREFIXED) == [prefixed]
    assert matching(resource_name="ord", pattern_type=Pat.LITERAL) == []
    assert matching(resource_type=Res.TOPIC, resource_name="orders", pattern_type=Pat.MATCH) == [
        literal,
        wildcard,
        prefixed,
    ], "MATCH: what applies to topic orders"
    assert matching(resource_type=Res.TOPIC, pattern_type=Pat.MATCH) == [literal, wildcard, prefixed, other_prefix]
    assert matching(pattern_type=Pat.PREFIXED) == [prefixed, other_prefix]
    assert matching(principal="User:bob") == [] and matching(host="10.0.0.1") == []
    assert matching(operation=Op.WRITE) == [] and matching(operation=Op.READ) == acls
    assert matching(permission_type=Perm.DENY) == [] and matching(permission_type=Perm.ALLOW) == acls


# --- the Rust rules ------------------------------------------------------------------------


def test_rust_authorizer_rules():
    a = _core.PartitionTable().authorizer
    assert not a.enabled
    assert a.authorize("User:x", "h", Res.TOPIC, "t", Op.READ), "off: everything allowed"
    a.configure(["User:admin"], False)
    assert a.enabled
    assert not a.authorize("User:x", "h", Res.TOPIC, "t", Op.READ), "no ACL and allow.everyone false"
    assert a.authorize("User:admin", "h", Res.TOPIC, "t", Op.DELETE), "a super user"
    acls = [
        binding(),  # alice reads orders
        binding(name="pay-", pt=Pat.PREFIXED, principal="User:*", op=Op.WRITE),
        binding(name="pay-secret", principal="User:bob", host="10.0.0.1", op=Op.ALL, perm=Perm.DENY),
        binding(name="*", principal="User:carol", op=Op.ALTER_CONFIGS),
        binding(rt=Res.GROUP, name="g", principal="User:dave", host="10.0.0.2", op=Op.READ),
    ]
    a.set_acls(
        [
            (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)
            for b in acls
        ]
    )
    assert a.authorize("User:alice", "h", Res.TOPIC, "orders", Op.READ), "literal"
    assert not a.authorize("User:alice", "h", Res.TOPIC, "orders2", Op.READ), "literal is the whole name"
    assert a.authorize("User:alice", "h", Res.TOPIC, "orders", Op.DESCRIBE), "DESCRIBE implied by READ"
    assert not a.authorize("User:alice", "h", Res.TOPIC, "orders", Op.WRITE)
    assert not a.authorize("User:bob", "h", Res.TOPIC, "orders", Op.READ), "another principal"
    assert a.authorize("User:bob", "h", Res.TOPIC, "pay-in", Op.WRITE), "prefixed, User:*"
    assert a.authorize("User:bob", "h", Res.TOPIC, "pay-in", Op.DESCRIBE), "DESCRIBE implied by WRITE"
    assert not a.authorize("User:bob", "h", Res.TOPIC, "pa", Op.WRITE), "shorter than the prefix"
    assert a.authorize("User:bob", "h", Res.TOPIC, "pay-secret", Op.WRITE), "the deny is for another host"
    assert not a.authorize("User:bob", "10.0.0.1", Res.TOPIC, "pay-secret", Op.WRITE), "deny wins over allow"
    assert a.authorize("User:carol", "h", Res.TOPIC, "anything", Op.DESCRIBE_CONFIGS), "wildcard; implied"
    assert not a.authorize("User:carol", "h", Res.GROUP, "anything", Op.DESCRIBE_CONFIGS), "another type"
    assert a.authorize("User:dave", "10.0.0.2", Res.GROUP, "g", Op.READ), "host match"
    assert not a.authorize("User:dave", "10.0.0.3", Res.GROUP, "g", Op.READ), "another host"
    a.configure([], True)
    assert a.authorize("User:x", "h", Res.GROUP, "other", Op.READ), "allow.everyone: no ACL on the group"
    assert not a.authorize("User:x", "h", Res.TOPIC, "orders", Op.READ), "ACLs on the topic, none for x"
    assert not a.authorize("User:admin", "h", Res.TOPIC, "orders", Op.READ), "no longer a super user"
    a.set_acls([])
    assert a.authorize("User:x", "h", Res.TOPIC, "orders", Op.READ)


# --- over the wire -------------------------------------------------------------------------


def test_security_disabled_without_an_authorizer(tmp_path):
    with Broker(data_dir=tmp_path / "d") as b, RawClient(b.bootstrap_servers) as c:
        r = describe_raw(c)
        assert (r.error_code, r.error_message) == (
            ErrorCode.SECURITY_DISABLED,
            "No Authorizer is configured on the broker",
        )
        assert (
            create(c, ALICE_READS_ORDERS, binding(op=Op.WRITE))
            == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        )
        assert delete(c, AclBindingFilter()) == [(ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])]
        assert b.server.controller.image.acls == {}
        with Admin(b.bootstrap_servers) as admin:
            with pytest.raises(SecurityDisabledError, match="No Authorizer"):
                admin.describe_acls()
            with pytest.raises(SecurityDisabledError):
                admin.create_acls([Acl("topic", "orders", "literal", "User:alice", "*", "read", "allow")])
            with pytest.raises(SecurityDisabledError):
                admin.delete_acls([AclFilter()])


@pytest.mark.parametrize("version", [1, 2, 3])
def test_create_describe_delete_over_the_wire(tmp_path, version):
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b, RawClient(b.bootstrap_servers) as c:
        assert describe(c, version=version) == []
        acls = [
            ALICE_READS_ORDERS,
            binding(op=Op.DESCRIBE),
            binding(name="pay-", pt=Pat.PREFIXED, op=Op.WRITE),
            binding(rt=Res.GROUP, name="g1", principal="User:bob", host="10.0.0.1"),
            binding(rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ops", op=Op.ALTER, perm=Perm.DENY),
        ]
        assert create(c, *acls, version=version) == [(0, None)] * 5
        assert create(c, ALICE_READS_ORDERS, version=version) == [(0, None)], "an existing ACL: no-op success"
        assert sorted(b.server.controller.image.acls.values(), key=repr) == sorted(acls, key=repr)
        assert len(b.server.controller.image.acls) == 5

        r = describe_raw(c, version=version)
        assert [(x.resource_type, x.resource_name, x.pattern_type, len(x.acls)) for x in r.resources] == [
            (Res.TOPIC, "orders", Pat.LITERAL, 2),
            (Res.TOPIC, "pay-", Pat.PREFIXED, 1),
            (Res.GROUP, "g1", Pat.LITERAL, 1),
            (Res.CLUSTER, CLUSTER_NAME, Pat.LITERAL, 1),
        ], "grouped by resource"
        assert describe(c, AclBindingFilter(Res.TOPIC, "pay-in", Pat.MATCH), version) == [acls[2]]
        assert describe(c, AclBindingFilter(Res.TOPIC, "orders", Pat.MATCH), version) == acls[:2]
        assert describe(c, AclBindingFilter(principal="User:bob"), version) == [acls[3]]
        assert describe(c, AclBindingFilter(permission_type=Perm.DENY), version) == [acls[4]]
        assert describe(c, AclBindingFilter(operation=Op.DESCRIBE), version) == [acls[1]]
        assert describe(c, AclBindingFilter(host="10.0.0.1"), version) == [acls[3]]

        got = delete(
            c,
            AclBindingFilter(Res.TOPIC, "orders", Pat.LITERAL),
            AclBindingFilter(operation=Op.READ, principal="User:alice"),
            AclBindingFilter(Res.TOPIC, "nothing"),
            version=version,
        )
        assert got == [(0, None, acls[:2]), (0, None, [acls[0]]), (0, None, [])], (
            "an ACL two filters match is reported by both"
        )
        assert describe(c, version=version) == acls[2:]
        assert delete(c, AclBindingFilter(), version=version) == [(0, None, [acls[2], acls[3], acls[4]])]
        assert describe(c, version=version) == [] and b.server.controller.image.acls == {}


def test_every_validation_error(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b, RawClient(b.bootstrap_servers) as c:
        bad = {
            "resource type ANY": binding(rt=Res.ANY),
            "resource type UNKNOWN": binding(rt=Res.UNKNOWN),
            "resource type UNKNOWN (9)": binding(rt=9),
            "pattern type ANY": binding(pt=Pat.ANY),
            "pattern type MATCH": binding(pt=Pat.MATCH),
            "pattern type UNKNOWN": binding(pt=Pat.UNKNOWN),
            "operation ANY": binding(op=Op.ANY),
            "operation UNKNOWN": binding(op=Op.UNKNOWN),
            "operation UNKNOWN (42)": binding(op=42),
            "permission type ANY": binding(perm=Perm.ANY),
            "permission type UNKNOWN": binding(perm=Perm.UNKNOWN),
            "resource name is empty": binding(name=""),
            "CLUSTER resource is kafka-cluster": binding(rt=Res.CLUSTER, name="my-cluster", op=Op.ALTER),
            "principal 'alice'": binding(principal="alice"),
            "principal 'User:'": binding(principal="User:"),
            "principal ':alice'": binding(principal=":alice"),
            "host is empty": binding(host=""),
        }
        got = create(c, *bad.values(), ALICE_READS_ORDERS)
        for (what, _acl), (code, message) in zip(bad.items(), got):
            assert code == ErrorCode.INVALID_REQUEST, what
            assert what in message, (what, message)
        assert got[-1] == (0, None), "the good one is created"
        assert list(b.server.controller.image.acls.values()) == [ALICE_READS_ORDERS]

        for f, what in [
            (AclBindingFilter(resource_type=Res.UNKNOWN), "resource type"),
            (AclBindingFilter(pattern_type=Pat.UNKNOWN), "pattern type"),
            (AclBindingFilter(operation=Op.UNKNOWN), "operation"),
            (AclBindingFilter(permission_type=Perm.UNKNOWN), "permission type"),
            (AclBindingFilter(resource_type=12), "resource type"),
        ]:
            r = describe_raw(c, f)
            assert r.error_code == ErrorCode.INVALID_REQUEST and what in r.error_message, (f, r.error_message)
            [(code, message, matched)] = delete(c, f)
            assert code == ErrorCode.INVALID_REQUEST and what in message and matched == []
        assert list(b.server.controller.image.acls.values()) == [ALICE_READS_ORDERS], "nothing deleted"

        with Admin(b.bootstrap_servers) as admin:
            with pytest.raises(InvalidRequestError, match="principal 'alice'"):
                admin.create_acls([Acl("topic", "orders", "literal", "alice", "*", "read", "allow")])
            with pytest.raises(InvalidRequestError, match="only valid name for the CLUSTER"):
                admin.create_acls([Acl("cluster", "c", "literal", "User:alice", "*", "alter", "allow")])
            with pytest.raises(ValueError, match="operation"):
                admin.create_acls([Acl("topic", "orders", "literal", "User:alice", "*", "reed", "allow")])


def test_the_acl_apis_need_cluster_permissions(tmp_path):
    # no super user: with allow.everyone.if.no.acl.found, anyone may manage ACLs until the
    # cluster resource has ACLs; then the ACLs decide
    config = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    with Broker(data_dir=tmp_path / "d", config=config) as b, RawClient(b.bootstrap_servers) as c:
        anonymous_all = binding(rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ANONYMOUS", op=Op.ALL)
        no_describe = binding(
            rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ANONYMOUS", op=Op.DESCRIBE, perm=Perm.DENY
        )
        assert create(c, anonymous_all, no_describe) == [(0, None)] * 2
        r = describe_raw(c)
        assert r.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and "User:ANONYMOUS" in r.error_message
        assert r.resources == []
        assert create(c, ALICE_READS_ORDERS) == [(0, None)], "ALTER is still allowed"
        assert delete(c, AclBindingFilter(permission_type=Perm.DENY))[0][:2] == (0, None)
        assert describe(c) == [ALICE_READS_ORDERS, anonymous_all], "DESCRIBE implied by ALL again"

        no_alter = binding(rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:*", op=Op.ALTER, perm=Perm.DENY)
        assert create(c, no_alter) == [(0, None)]
        got = create(c, binding(op=Op.WRITE), binding(op=Op.CREATE))
        assert [code for code, _m in got] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED] * 2
        [(code, _m, matched)] = delete(c, AclBindingFilter())
        assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED and matched == []
        assert describe(c) == [ALICE_READS_ORDERS, no_alter, anonymous_all], "describe is allowed, nothing changed"
        with Admin(b.bootstrap_servers) as admin:
            with pytest.raises(ClusterAuthorizationFailedError):
                admin.create_acls([Acl("topic", "t", "literal", "User:alice", "*", "read", "allow")])

    # an authorizer without super users and without allow.everyone: nobody manages ACLs
    with (
        Broker(data_dir=tmp_path / "e", config={"authorizer.class.name": STANDARD_AUTHORIZER}) as b,
        RawClient(b.bootstrap_servers) as c,
    ):
        assert describe_raw(c).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert create(c, ALICE_READS_ORDERS)[0][0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert delete(c, AclBindingFilter())[0][0] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_our_admin(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b, Admin(b.bootstrap_servers) as admin:
        assert admin.describe_acls() == []
        alice = Acl("topic", "orders", "literal", "User:alice", "*", "read", "allow")
        bob = Acl("topic", "pay-", "prefixed", "User:bob", "10.0.0.1", "write", "deny")
        group = Acl("group", "g1", "literal", "User:alice", "*", "read", "allow")
        cluster = Acl("cluster", "kafka-cluster", "literal", "User:ops", "*", "idempotent_write", "allow")
        admin.create_acls([alice, bob, group, cluster])
        admin.create_acls([alice])  # exists: nothing happens
        assert admin.describe_acls() == [alice, bob, group, cluster]
        assert admin.describe_acls(AclFilter("topic", "pay-now", "match")) == [bob]
        assert admin.describe_acls(AclFilter(principal="User:alice")) == [alice, group]
        assert admin.describe_acls(AclFilter("TOPIC", pattern_type="PREFIXED")) == [bob], "any case"
        assert admin.delete_acls([AclFilter("topic"), AclFilter(principal="User:bob")]) == [[alice, bob], [bob]]
        assert admin.describe_acls() == [group, cluster]
        assert admin.delete_acls([AclFilter(operation="write")]) == [[]]
        image_acls = set(b.server.controller.image.acls.values())
        assert image_acls == {
            binding(rt=Res.GROUP, name="g1"),
            binding(rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ops", op=Op.IDEMPOTENT_WRITE),
        }
        with pytest.raises(ValueError, match="resource type"):
            admin.describe_acls(AclFilter("topics"))


def test_acls_survive_a_restart(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b, Admin(b.bootstrap_servers) as admin:
        admin.create_acls(
            [
                Acl("topic", "orders", "literal", "User:alice", "*", "read", "allow"),
                Acl("topic", "*", "literal", "User:bob", "*", "all", "deny"),
            ]
        )
        ids = dict(b.server.controller.image.acls)
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b, Admin(b.bootstrap_servers) as admin:
        assert admin.describe_acls() == [
            Acl("topic", "*", "literal", "User:bob", "*", "all", "deny"),
            Acl("topic", "orders", "literal", "User:alice", "*", "read", "allow"),
        ]
        assert b.server.controller.image.acls == ids, "the same ids"
        core = b.server.authorizer.core
        assert core.authorize("User:alice", "127.0.0.1", Res.TOPIC, "orders", Op.READ), "the authorizer has them"
        assert not core.authorize("User:bob", "127.0.0.1", Res.TOPIC, "orders", Op.READ)


# --- logbroker acl -------------------------------------------------------------------------


def acl_cli(bs: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "logbroker", "acl", *args, "--bootstrap-server", bs],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )


def rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("RESOURCE_TYPE"))
    return [line.split() for line in lines[start + 1 :]]


def test_acl_cli(tmp_path):
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b:
        bs = b.bootstrap_servers
        r = acl_cli(
            bs,
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--operation",
            "Describe",
            "--topic",
            "orders",
        )
        assert r.returncode == 0, r.stderr
        assert rows(r.stdout) == [
            ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
            ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        ]
        r = acl_cli(
            bs,
            "add",
            "--deny-principal",
            "User:bob",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "write",
            "--topic",
            "pay-",
            "--resource-pattern-type",
            "prefixed",
        )
        assert r.returncode == 0, r.stderr
        r = acl_cli(bs, "add", "--allow-principal", "User:carol", "--consumer", "--topic", "events", "--group", "g1")
        assert r.returncode == 0, r.stderr
        r = acl_cli(
            bs,
            "add",
            "--allow-principal",
            "User:dave",
            "--producer",
            "--idempotent",
            "--topic",
            "events",
            "--transactional-id",
            "tx1",
        )
        assert r.returncode == 0, r.stderr
        r = acl_cli(
            bs,
            "add",
            "--allow-principal",
            "User:erin",
            "--producer",
            "--idempotent",
            "--topic",
            "pay-",
            "--resource-pattern-type",
            "prefixed",
        )
        assert r.returncode == 0, r.stderr
        r = acl_cli(bs, "add", "--allow-principal", "User:ops", "--cluster", "--operation", "DescribeConfigs")
        assert r.returncode == 0, r.stderr

        r = acl_cli(bs, "list")
        assert r.returncode == 0, r.stderr
        assert rows(r.stdout) == [
            ["TOPIC", "events", "LITERAL", "User:carol", "*", "READ", "ALLOW"],
            ["TOPIC", "events", "LITERAL", "User:carol", "*", "DESCRIBE", "ALLOW"],
            ["TOPIC", "events", "LITERAL", "User:dave", "*", "WRITE", "ALLOW"],
            ["TOPIC", "events", "LITERAL", "User:dave", "*", "CREATE", "ALLOW"],
            ["TOPIC", "events", "LITERAL", "User:dave", "*", "DESCRIBE", "ALLOW"],
            ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"],
            ["TOPIC", "orders", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
            ["TOPIC", "pay-", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY"],
            ["TOPIC", "pay-", "PREFIXED", "User:erin", "*", "WRITE", "ALLOW"],
            ["TOPIC", "pay-", "PREFIXED", "User:erin", "*", "CREATE", "ALLOW"],
            ["TOPIC", "pay-", "PREFIXED", "User:erin", "*", "DESCRIBE", "ALLOW"],
            ["GROUP", "g1", "LITERAL", "User:carol", "*", "READ", "ALLOW"],
            ["CLUSTER", "kafka-cluster", "LITERAL", "User:dave", "*", "IDEMPOTENT_WRITE", "ALLOW"],
            ["CLUSTER", "kafka-cluster", "LITERAL", "User:erin", "*", "IDEMPOTENT_WRITE", "ALLOW"],
            ["CLUSTER", "kafka-cluster", "LITERAL", "User:ops", "*", "DESCRIBE_CONFIGS", "ALLOW"],
            ["TRANSACTIONAL_ID", "tx1", "LITERAL", "User:dave", "*", "WRITE", "ALLOW"],
            ["TRANSACTIONAL_ID", "tx1", "LITERAL", "User:dave", "*", "DESCRIBE", "ALLOW"],
        ]
        r = acl_cli(bs, "list", "--topic", "pay-now", "--resource-pattern-type", "match", "--principal", "User:bob")
        assert rows(r.stdout) == [["TOPIC", "pay-", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY"]]
        r = acl_cli(bs, "list", "--topic", "pay-now", "--resource-pattern-type", "match")
        assert len(rows(r.stdout)) == 4
        r = acl_cli(bs, "list", "--principal", "User:carol")
        assert [row[0] for row in rows(r.stdout)] == ["TOPIC", "TOPIC", "GROUP"]
        r = acl_cli(bs, "list", "--topic", "orders", "--group", "g1")
        assert len(rows(r.stdout)) == 3

        # usage errors: exit 2, nothing sent
        for args in [
            ["add", "--topic", "t"],  # no principal
            ["add", "--allow-principal", "alice", "--topic", "t"],
            ["add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"],
            ["add", "--allow-principal", "User:a", "--operation", "Read", "--cluster"],
            ["add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
            ["add", "--allow-principal", "User:a", "--consumer", "--topic", "t"],
            ["add", "--allow-principal", "User:a", "--producer", "--operation", "Read", "--topic", "t"],
            ["add", "--allow-principal", "User:a", "--idempotent", "--topic", "t"],
            ["add", "--allow-principal", "User:a"],
            ["remove", "--force"],
        ]:
            r = acl_cli(bs, *args)
            assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert len(b.server.controller.image.acls) == 17

        r = acl_cli(bs, "remove", "--topic", "orders", stdin="n\n")
        assert r.returncode == 1 and len(b.server.controller.image.acls) == 17, "not confirmed"
        r = acl_cli(
            bs, "remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders", stdin="y\n"
        )
        assert r.returncode == 0 and rows(r.stdout) == [
            ["TOPIC", "orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"]
        ], r.stdout + r.stderr
        r = acl_cli(bs, "remove", "--topic", "events", "--force")
        assert r.returncode == 0 and len(rows(r.stdout)) == 5, r.stderr
        r = acl_cli(bs, "remove", "--topic", "pay-", "--resource-pattern-type", "prefixed", "--force")
        assert r.returncode == 0 and len(rows(r.stdout)) == 4
        r = acl_cli(
            bs, "remove", "--cluster", "--allow-principal", "User:erin", "--operation", "IdempotentWrite", "--force"
        )
        assert r.returncode == 0 and len(rows(r.stdout)) == 1
        r = acl_cli(bs, "remove", "--topic", "nothing", "--force")
        assert r.returncode == 0 and "removed 0 ACL(s)" in r.stdout
        with Admin(bs) as admin:
            assert [(a.resource_type, a.name) for a in admin.describe_acls()] == [
                ("topic", "orders"),
                ("group", "g1"),
                ("cluster", "kafka-cluster"),
                ("cluster", "kafka-cluster"),
                ("transactional_id", "tx1"),
                ("transactional_id", "tx1"),
            ]

    with Broker(data_dir=tmp_path / "e") as b:  # no authorizer
        r = acl_cli(b.bootstrap_servers, "list")
        assert r.returncode == 1 and "SECURITY_DISABLED" in r.stderr, r.stderr


# --- a cluster -----------------------------------------------------------------------------


def test_cluster_forwards_and_every_node_enforces(tmp_path):
    from conftest import wait_until

    config = {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}
    with Cluster(3, data_dir=tmp_path, config=config) as cluster:
        controller = cluster.controller_id()
        other = next(n for n in cluster.nodes if n.node_id != controller)
        anonymous_all = binding(rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ANONYMOUS", op=Op.ALL)
        no_describe = binding(
            rt=Res.CLUSTER, name=CLUSTER_NAME, principal="User:ANONYMOUS", op=Op.DESCRIBE, perm=Perm.DENY
        )
        with RawClient(other.bootstrap_servers) as c:  # not the active controller: forwarded
            got = create(c, ALICE_READS_ORDERS, anonymous_all, binding(name=""))
            assert got[:2] == [(0, None)] * 2
            assert got[2][0] == ErrorCode.INVALID_REQUEST and "resource name is empty" in got[2][1], got
            assert describe(c) == [ALICE_READS_ORDERS, anonymous_all], "the forwarding node waited for them"
        for n in cluster.nodes:
            with RawClient(n.bootstrap_servers) as c:
                assert wait_until(
                    lambda: describe(c) == [ALICE_READS_ORDERS, anonymous_all],
                    timeout=10,
                    what=f"the ACLs on node {n.node_id}",
                )

        # every node's authorizer: a DENY created through a non-controller refuses DescribeAcls everywhere
        with RawClient(other.bootstrap_servers) as c:
            assert create(c, no_describe) == [(0, None)]
        for n in cluster.nodes:
            with RawClient(n.bootstrap_servers) as c:
                assert wait_until(
                    lambda: describe_raw(c).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    timeout=10,
                    what=f"the deny on node {n.node_id}",
                )
        with RawClient(other.bootstrap_servers) as c:
            [(code, _m, matched)] = delete(c, AclBindingFilter(permission_type=Perm.DENY))
            assert (code, matched) == (0, [no_describe])
        for n in cluster.nodes:
            with RawClient(n.bootstrap_servers) as c:
                assert wait_until(
                    lambda: describe_raw(c).error_code == 0, timeout=10, what=f"the deny gone on node {n.node_id}"
                )
                assert describe(c) == [ALICE_READS_ORDERS, anonymous_all]

        # through the controller listener of a node that is not the active controller: refused, not forwarded
        host, _ = other.bootstrap_servers.rsplit(":", 1)
        with RawClient(f"{host}:{other.controller_port}") as c:
            assert create(c, binding(op=Op.WRITE))[0][0] == ErrorCode.NOT_CONTROLLER
            assert delete(c, AclBindingFilter())[0][0] == ErrorCode.NOT_CONTROLLER


# --- other clients -------------------------------------------------------------------------


def test_confluent_kafka_admin_client(tmp_path):
    from confluent_kafka.admin import (
        AclBinding as CkBinding,
    )
    from confluent_kafka.admin import (
        AclBindingFilter as CkFilter,
    )
    from confluent_kafka.admin import (
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    with Broker(data_dir=tmp_path / "d", config=SECURE) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        alice = CkBinding(
            ResourceType.TOPIC,
            "orders",
            ResourcePatternType.LITERAL,
            "User:alice",
            "*",
            AclOperation.READ,
            AclPermissionType.ALLOW,
        )
        bob = CkBinding(
            ResourceType.GROUP,
            "g-",
            ResourcePatternType.PREFIXED,
            "User:bob",
            "10.0.0.1",
            AclOperation.ALL,
            AclPermissionType.DENY,
        )
        for f in admin.create_acls([alice, bob]).values():
            assert f.result(10) is None
        assert set(b.server.controller.image.acls.values()) == {
            ALICE_READS_ORDERS,
            binding(Res.GROUP, "g-", Pat.PREFIXED, "User:bob", "10.0.0.1", Op.ALL, Perm.DENY),
        }
        bad = CkBinding(
            ResourceType.BROKER,
            "nope",
            ResourcePatternType.LITERAL,
            "User:x",
            "*",
            AclOperation.ALTER,
            AclPermissionType.ALLOW,
        )
        with pytest.raises(Exception, match="kafka-cluster"):
            admin.create_acls([bad])[bad].result(10)

        every = CkFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
        assert sorted(admin.describe_acls(every).result(10), key=str) == sorted([alice, bob], key=str)
        match = CkFilter(
            ResourceType.GROUP, "g-1", ResourcePatternType.MATCH, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
        assert admin.describe_acls(match).result(10) == [bob]
        topics = CkFilter(
            ResourceType.TOPIC, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
        )
        assert admin.delete_acls([topics])[topics].result(10) == [alice]
        assert admin.describe_acls(every).result(10) == [bob]

    with Broker(data_dir=tmp_path / "e") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        with pytest.raises(Exception, match="SECURITY_DISABLED.*No Authorizer is configured"):
            admin.create_acls([alice])[alice].result(10)
        with pytest.raises(Exception, match="SECURITY_DISABLED"):
            admin.delete_acls([every])[every].result(10)
        # librdkafka drops DescribeAcls' top-level error code (rd_kafka_DescribeAclsResponse_parse
        # returns no error whatever the broker said): SECURITY_DISABLED reads as no ACLs
        assert admin.describe_acls(every).result(10) == []


def kafka_acls(tools, bs: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = tools.tools_java("org.apache.kafka.tools.AclCommand", ["--bootstrap-server", bs, *args])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r


@needs_java
def test_kafka_acls_tool(tmp_path):
    from benches.peers.kafka import install

    tools = install()
    with Broker(data_dir=tmp_path / "d", config=SECURE) as b:
        bs = b.bootstrap_servers

        def image() -> set[AclBinding]:
            return set(b.server.controller.image.acls.values())

        kafka_acls(tools, bs, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
        assert image() == {ALICE_READS_ORDERS}
        kafka_acls(
            tools,
            bs,
            "--add",
            "--deny-principal",
            "User:bob",
            "--deny-host",
            "10.0.0.1",
            "--operation",
            "Write",
            "--topic",
            "pay-",
            "--resource-pattern-type",
            "prefixed",
        )
        kafka_acls(
            tools, bs, "--add", "--allow-principal", "User:carol", "--consumer", "--topic", "events", "--group", "g1"
        )
        kafka_acls(
            tools,
            bs,
            "--add",
            "--allow-principal",
            "User:dave",
            "--producer",
            "--topic",
            "events",
            "--transactional-id",
            "tx1",
        )
        assert image() == {
            ALICE_READS_ORDERS,
            binding(name="pay-", pt=Pat.PREFIXED, principal="User:bob", host="10.0.0.1", op=Op.WRITE, perm=Perm.DENY),
            binding(name="events", principal="User:carol", op=Op.READ),
            binding(name="events", principal="User:carol", op=Op.DESCRIBE),
            binding(rt=Res.GROUP, name="g1", principal="User:carol", op=Op.READ),
            binding(name="events", principal="User:dave", op=Op.WRITE),
            binding(name="events", principal="User:dave", op=Op.DESCRIBE),
            binding(name="events", principal="User:dave", op=Op.CREATE),
            binding(rt=Res.TRANSACTIONAL_ID, name="tx1", principal="User:dave", op=Op.WRITE),
            binding(rt=Res.TRANSACTIONAL_ID, name="tx1", principal="User:dave", op=Op.DESCRIBE),
        }

        out = kafka_acls(tools, bs, "--list", "--topic", "orders").stdout
        assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in out, out
        assert "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in out, out
        out = kafka_acls(tools, bs, "--list").stdout
        for expected in [
            "name=pay-, patternType=PREFIXED",
            "principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY",
            "resourceType=GROUP, name=g1",
            "resourceType=TRANSACTIONAL_ID, name=tx1",
        ]:
            assert expected in out, (expected, out)
        out = kafka_acls(tools, bs, "--list", "--topic", "pay-now", "--resource-pattern-type", "match").stdout
        assert "name=pay-, patternType=PREFIXED" in out and "orders" not in out, out
        out = kafka_acls(tools, bs, "--list", "--principal", "User:carol").stdout
        assert "User:carol" in out and "User:dave" not in out, out

        kafka_acls(
            tools,
            bs,
            "--remove",
            "--force",
            "--allow-principal",
            "User:alice",
            "--operation",
            "Read",
            "--topic",
            "orders",
        )
        assert ALICE_READS_ORDERS not in image()
        kafka_acls(tools, bs, "--remove", "--force", "--topic", "pay-", "--resource-pattern-type", "prefixed")
        kafka_acls(tools, bs, "--remove", "--force", "--topic", "events")
        kafka_acls(tools, bs, "--remove", "--force", "--group", "g1", "--transactional-id", "tx1")
        assert image() == set()
        assert "ResourcePattern" not in kafka_acls(tools, bs, "--list").stdout

        r = kafka_acls(
            tools, bs, "--add", "--allow-principal", "User:x", "--operation", "Alter", "--topic", "", check=False
        )
        assert r.returncode != 0

    with Broker(data_dir=tmp_path / "e") as b:
        r = kafka_acls(tools, b.bootstrap_servers, "--list", check=False)
        assert "SecurityDisabledException" in r.stdout + r.stderr and "No Authorizer" in r.stdout + r.stderr, (
            r.stdout[-2000:] + r.stderr[-2000:]
        )
