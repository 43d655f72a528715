"""The schema registry (python/logbroker/schema_registry/) with Confluent's own Python client
and Avro serializers against a real broker: registration, ids shared across subjects,
compatibility levels, soft and hard deletes, modes, Confluent's error codes, and the state
surviving a restart because it lives in the `_schemas` topic."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from logbroker import Broker

V1 = json.dumps(
    {"type": "record", "name": "User", "namespace": "lb.test", "fields": [{"name": "name", "type": "string"}]}
)
V2 = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "lb.test",
        "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": -1}],
    }
)
NO_DEFAULT = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "lb.test",
        "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": "string"}],
    }
)


def registry_url(b: Broker) -> str:
    host, port = b.server.schema_registry_address
    return f"http://{host}:{port}"


def http(method: str, url: str, body: dict | None = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


@pytest.fixture
def broker(tmp_path):
    with Broker(data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0") as b:
        yield b


@pytest.fixture
def clients():
    """SchemaRegistryClient(url), closed after the test (its HTTP connections with it)."""
    made: list[SchemaRegistryClient] = []

    def make(url: str, **conf: str) -> SchemaRegistryClient:
        made.append(SchemaRegistryClient({"url": url, **{k.replace("_", "."): v for k, v in conf.items()}}))
        return made[-1]

    yield make
    for c in made:
        c.close()


def test_avro_serializer_round_trip(broker, clients):
    sr = clients(registry_url(broker))
    ser = AvroSerializer(sr, V2)
    de = AvroDeserializer(sr)
    p = Producer({"bootstrap.servers": broker.bootstrap_servers})
    users = [{"name": f"u{i}", "age": i} for i in range(20)]
    for u in users:
        p.produce("users", ser(u, SerializationContext("users", MessageField.VALUE)))
    assert p.flush(10) == 0
    latest = sr.get_latest_version("users-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str) == json.loads(V2)
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g", "auto.offset.reset": "earliest"})
    c.subscribe(["users"])
    got = []
    while len(got) < len(users):
        m = c.poll(10)
        assert m is not None and not m.error()
        assert m.value()[0] == 0 and int.from_bytes(m.value()[1:5], "big") == latest.schema_id  # Confluent framing
        got.append(de(m.value(), SerializationContext("users", MessageField.VALUE)))
    c.close()
    assert got == users


def test_versions_ids_and_compatibility(broker, clients):
    url = registry_url(broker)
    sr = clients(url)
    id1 = sr.register_schema("s-value", Schema(V1, "AVRO"))
    id2 = sr.register_schema("s-value", Schema(V2, "AVRO"))  # a field with a default: BACKWARD compatible
    assert id2 == id1 + 1
    assert sr.register_schema("s-value", Schema(V2, "AVRO")) == id2  # again: the same id, no new version
    assert sr.get_versions("s-value") == [1, 2]
    assert sr.register_schema("other-value", Schema(V1, "AVRO")) == id1  # one schema, one id, any subject
    with pytest.raises(SchemaRegistryError) as e:
        sr.register_schema("s-value", Schema(NO_DEFAULT, "AVRO"))
    assert e.value.http_status_code == 409 and e.value.error_code == 409
    assert "incompatible" in e.value.error_message and "email" in e.value.error_message
    assert not sr.test_compatibility("s-value", Schema(NO_DEFAULT, "AVRO"))
    assert sr.test_compatibility("s-value", Schema(V1, "AVRO"))
    # NONE lets it in; the level is per subject
    assert sr.set_compatibility("s-value", "NONE") == {"compatibility": "NONE"}
    assert sr.get_compatibility("s-value") == "NONE" and sr.get_compatibility() == "BACKWARD"
    id3 = sr.register_schema("s-value", Schema(NO_DEFAULT, "AVRO"))
    assert sr.get_versions("s-value") == [1, 2, 3] and id3 == id2 + 1
    found = sr.lookup_schema("s-value", Schema(V2, "AVRO"))
    assert (found.schema_id, found.version) == (id2, 2)
    assert sr.get_schema(id1).schema_str == json.dumps(json.loads(V1), separators=(",", ":"))
    status, body = http("GET", f"{url}/schemas/ids/{id1}/versions")
    assert status == 200 and body == [{"subject": "other-value", "version": 1}, {"subject": "s-value", "version": 1}]


def test_errors_are_confluents(broker):
    url = registry_url(broker)
    assert http("GET", f"{url}/subjects/nope/versions") == (
        404,
        {"error_code": 40401, "message": "Subject 'nope' not found."},
    )
    assert http("GET", f"{url}/schemas/ids/999")[1]["error_code"] == 40403
    status, body = http("POST", f"{url}/subjects/bad/versions", {"schema": '{"type": "recrd"}'})
    assert status == 422 and body["error_code"] == 42201
    http("POST", f"{url}/subjects/x/versions", {"schema": V1})
    assert http("GET", f"{url}/subjects/x/versions/7")[1]["error_code"] == 40402
    assert http("GET", f"{url}/subjects/x/versions/zero")[1]["error_code"] == 42202
    assert http("PUT", f"{url}/config", {"compatibility": "SIDEWAYS"})[1]["error_code"] == 42203
    assert http("GET", f"{url}/config/x")[1]["error_code"] == 40408
    assert http("GET", f"{url}/config/x?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    # a read-only subject refuses registrations
    assert http("PUT", f"{url}/mode/x", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = http("POST", f"{url}/subjects/x/versions", {"schema": V2})
    assert status == 422 and body["error_code"] == 42205
    assert http("DELETE", f"{url}/mode/x") == (200, {"mode": "READONLY"})
    assert http("POST", f"{url}/subjects/x/versions", {"schema": V2})[0] == 200


def test_soft_and_hard_deletes(broker, clients):
    url = registry_url(broker)
    sr = clients(url)
    sid = sr.register_schema("d-value", Schema(V1, "AVRO"))
    sr.register_schema("d-value", Schema(V2, "AVRO"))
    assert http("DELETE", f"{url}/subjects/d-value?permanent=true")[1]["error_code"] == 40405  # soft first
    assert sr.delete_subject("d-value") == [1, 2]
    assert "d-value" not in sr.get_subjects()
    assert http("GET", f"{url}/subjects?deleted=true")[1] == ["d-value"]
    assert http("GET", f"{url}/subjects/d-value/versions/1?deleted=true")[1]["id"] == sid
    assert http("GET", f"{url}/schemas/ids/{sid}")[0] == 200  # soft-deleted schemas stay readable by id
    assert sr.delete_subject("d-value", permanent=True) == [1, 2]
    assert http("GET", f"{url}/subjects?deleted=true")[1] == []
    assert http("GET", f"{url}/schemas/ids/{sid}")[1]["error_code"] == 40403
    # a new registration starts over at version 1 and keeps ids increasing
    assert sr.register_schema("d-value", Schema(V1, "AVRO")) > sid
    assert sr.get_versions("d-value") == [1]


def test_registry_survives_a_restart(tmp_path, clients):
    with Broker(data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0") as b:
        sr = clients(registry_url(b))
        ids = [sr.register_schema("r-value", Schema(s, "AVRO")) for s in (V1, V2)]
        sr.set_compatibility("r-value", "FULL")
    with Broker(data_dir=tmp_path / "d", schema_registry_listen="127.0.0.1:0") as b:
        url = registry_url(b)
        sr = clients(url)
        assert sr.get_versions("r-value") == [1, 2]
        assert [sr.get_version("r-value", v).schema_id for v in (1, 2)] == ids
        assert sr.get_compatibility("r-value") == "FULL"
        assert sr.register_schema("new-value", Schema(NO_DEFAULT, "AVRO")) == ids[-1] + 1


def wait_for(fn, timeout: float = 30.0):
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fn()
            if got:
                return got
        except SchemaRegistryError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {fn}")
        time.sleep(0.2)


def test_every_node_serves_the_registry_and_it_survives_the_leaders_death(clients):
    """Three nodes: a schema registered on one is read on the others; the leader of _schemas
    is killed and the survivors go on registering; two nodes registering into one subject at
    once both succeed, with distinct versions and ids (a lost race is retried)."""
    import threading

    from confluent_kafka.admin import AdminClient

    from logbroker import Cluster

    with Cluster(3, schema_registry=True, config={"schema.registry.topic.replication.factor": 3}) as c:
        srs = {n.node_id: clients(n.schema_registry_url) for n in c.nodes}
        id1 = srs[1].register_schema("c-value", Schema(V1, "AVRO"))
        for n in (2, 3):
            assert wait_for(lambda n=n: srs[n].get_latest_version("c-value")).schema_id == id1
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
        md = admin.list_topics("_schemas", timeout=10).topics["_schemas"].partitions[0]
        assert len(md.replicas) == 3
        c.nodes[md.leader - 1].kill()
        alive = [n for n in (1, 2, 3) if n != md.leader]
        id2 = wait_for(lambda: srs[alive[0]].register_schema("c-value", Schema(V2, "AVRO")), timeout=60)
        assert id2 == id1 + 1
        assert wait_for(lambda: srs[alive[1]].get_version("c-value", 2)).schema_id == id2
        srs[alive[0]].set_compatibility("race-value", "NONE")
        wait_for(lambda: srs[alive[1]].get_compatibility("race-value") == "NONE")
        results: dict[int, int] = {}

        def register(n: int, schema: str) -> None:
            results[n] = srs[n].register_schema("race-value", Schema(schema, "AVRO"))

        threads = [threading.Thread(target=register, args=(n, s)) for n, s in zip(alive, (V1, NO_DEFAULT))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(results) == 2
        versions = wait_for(
            lambda: len(srs[alive[0]].get_versions("race-value")) == 2 and srs[alive[0]].get_versions("race-value")
        )
        assert versions == [1, 2]
        by_version = {v: srs[alive[1]].get_version("race-value", v).schema_id for v in (1, 2)}
        assert sorted(by_version.values()) == sorted(results.values())


PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name"],
}


def test_json_schema_serializer_and_compatibility(broker, clients):
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    url = registry_url(broker)
    sr = clients(url)
    ser = JSONSerializer(json.dumps(PERSON), sr)
    de = JSONDeserializer(json.dumps(PERSON))
    ctx = SerializationContext("people", MessageField.VALUE)
    people = [{"name": f"p{i}", "age": i} for i in range(5)]
    assert [de(ser(p, ctx), ctx) for p in people] == people
    latest = sr.get_latest_version("people-value")
    assert latest.schema.schema_type == "JSON" and json.loads(latest.schema.schema_str) == PERSON

    def compatible(schema: dict) -> bool:
        return sr.test_compatibility("people-value", Schema(json.dumps(schema), "JSON"))

    widened = {**PERSON, "properties": {**PERSON["properties"], "age": {"type": "number"}}}
    assert compatible(widened)  # integer -> number: every old document still valid
    assert not compatible({**PERSON, "required": ["name", "age"]})  # a new required property
    narrowed = {**PERSON, "properties": {**PERSON["properties"], "age": {"type": "integer", "maximum": 10}}}
    assert not compatible(narrowed)
    # an open content model: an old document may already carry any "email"; closed, it may not
    with_email = {**PERSON, "properties": {**PERSON["properties"], "email": {"type": "string"}}}
    assert not compatible(with_email)
    sr.set_compatibility("closed-value", "BACKWARD")
    closed = {**PERSON, "additionalProperties": False}
    sr.register_schema("closed-value", Schema(json.dumps(closed), "JSON"))
    assert sr.test_compatibility(
        "closed-value", Schema(json.dumps({**with_email, "additionalProperties": False}), "JSON")
    )
    status, body = http(
        "POST", f"{url}/subjects/bad-json/versions", {"schemaType": "JSON", "schema": json.dumps({"type": "strin"})}
    )
    assert status == 422 and body["error_code"] == 42201 and "strin" in body["message"]
    # a subject's schema type does not change under a compatibility level
    status, body = http("POST", f"{url}/subjects/people-value/versions", {"schema": V1})
    assert status == 409 and "schemaType" in body["message"]
    assert http("GET", f"{url}/schemas/types")[1] == ["AVRO", "JSON", "PROTOBUF"]


def test_basic_authentication_and_acls(tmp_path, clients):
    """BASIC: the broker's users (SCRAM and PLAIN) with their passwords; no or a wrong password
    is 401. With an authorizer, the broker's ACLs on the subject's topic decide (403 when
    denied; unreadable subjects and ids are not listed or found); super users do anything."""
    import base64

    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    jaas = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
    )
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "schema.registry.listen": "127.0.0.1:0",
        "schema.registry.authentication.method": "BASIC",
    }
    with Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        kafka_admin = AdminClient(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            }
        )
        for fut in kafka_admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion(
                    "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret"
                )
            ]
        ).values():
            fut.result(30)
        url = registry_url(b)

        def call(method: str, path: str, user: str | None, password: str = "", body: dict | None = None):
            req = urllib.request.Request(
                url + path,
                method=method,
                data=None if body is None else json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            if user is not None:
                req.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    return r.status, json.loads(r.read() or b"null"), dict(r.headers)
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read() or b"null"), dict(e.headers)

        status, body, headers = call("GET", "/subjects", None)
        assert (status, body["error_code"]) == (401, 40101) and headers["WWW-Authenticate"].startswith("Basic")
        assert call("GET", "/subjects", "bob", "wrong")[:2] == (401, {"error_code": 40101, "message": "Unauthorized"})
        assert call("GET", "/subjects", "nobody", "x")[1]["message"] == "Unauthorized"
        admin_sr = clients(url, basic_auth_user_info="admin:admin-secret")
        admin_sr.register_schema("payments-value", Schema(V1, "AVRO"))
        # bob: authenticated, but no ACL yet
        assert call("GET", "/subjects", "bob", "bob-secret")[:2] == (200, [])
        status, body, _ = call("POST", "/subjects/orders-value/versions", "bob", "bob-secret", {"schema": V1})
        assert (status, body["error_code"]) == (403, 40301) and "WRITE" in body["message"]
        bindings = [
            AclBinding(
                ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:bob", "*", op, AclPermissionType.ALLOW
            )
            for op in (AclOperation.WRITE, AclOperation.DESCRIBE)
        ]
        for fut in kafka_admin.create_acls(bindings).values():
            fut.result(30)
        bob = clients(url, basic_auth_user_info="bob:bob-secret")
        sid = wait_for(lambda: bob.register_schema("orders-value", Schema(V2, "AVRO")))
        assert bob.get_versions("orders-value") == [1]
        assert bob.get_subjects() == ["orders-value"]  # payments-value is not his to see
        pid = admin_sr.get_latest_version("payments-value").schema_id
        assert call("GET", f"/schemas/ids/{pid}", "bob", "bob-secret")[1]["error_code"] == 40403
        assert call("GET", f"/schemas/ids/{sid}", "bob", "bob-secret")[0] == 200
        assert call("DELETE", "/subjects/orders-value", "bob", "bob-secret")[1]["error_code"] == 40301
        assert call("PUT", "/config", "bob", "bob-secret", {"compatibility": "NONE"})[1]["error_code"] == 40301
        # a PLAIN user of the listener's JAAS config authenticates too
        assert call("GET", "/subjects", "alice", "alice-secret")[:2] == (200, [])
        assert admin_sr.get_subjects() == ["orders-value", "payments-value"]


USER_PROTO = """syntax = "proto3";
package lb.test;

import "google/protobuf/timestamp.proto";

message Person {
  string name = 1;
  optional int32 age = 2;
  map<string, Address> homes = 3;
  repeated Role roles = 4;
  google.protobuf.Timestamp seen = 5;
  oneof contact {
    string email = 6;
    string phone = 7;
  }
  message Address {
    string street = 1;
  }
  enum Role {
    GUEST = 0;
    ADMIN = 1;
  }
}
"""


def test_protobuf_text_and_serialized(broker, clients):
    """Protobuf as the Java serializer registers it (.proto text) and as the Python one does
    (a base64 FileDescriptorProto, read back with format=serialized), with a well-known type
    import; Confluent's Protobuf compatibility rules."""
    url = registry_url(broker)
    sr = clients(url)
    sid = sr.register_schema("proto-value", Schema(USER_PROTO, "PROTOBUF"))
    got = sr.get_schema(sid)
    assert got.schema_type == "PROTOBUF" and "message Person" in got.schema_str
    status, body = http("GET", f"{url}/schemas/ids/{sid}?format=serialized")
    assert status == 200
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2  # noqa: F401

    fd = descriptor_pb2.FileDescriptorProto.FromString(__import__("base64").b64decode(body["schema"]))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(timestamp_pb2.DESCRIPTOR.serialized_pb))
    fd.name = "person.proto"
    pool.Add(fd)
    person = pool.FindMessageTypeByName("lb.test.Person")
    assert person.fields_by_name["homes"].message_type.GetOptions().map_entry
    assert person.fields_by_name["seen"].message_type.full_name == "google.protobuf.Timestamp"
    # the same schema as a base64 descriptor is the same schema: same id, no new version
    from google.protobuf import message_factory

    cls = message_factory.GetMessageClass(person)
    b64 = __import__("base64").b64encode(fd.SerializeToString()).decode()
    assert sr.register_schema("proto-value", Schema(b64, "PROTOBUF")) == sid
    assert sr.get_versions("proto-value") == [1]
    # Confluent's Protobuf serializer and deserializer with a message class of that descriptor
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    ser = ProtobufSerializer(cls, sr, {"use.deprecated.format": False})
    de = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    ctx = SerializationContext("proto", MessageField.VALUE)
    msg = cls(name="ann", age=3, roles=[1], email="a@x")
    msg.homes["home"].street = "Main St"
    data = ser(msg, ctx)
    assert int.from_bytes(data[1:5], "big") == sid
    assert de(data, ctx) == msg

    def compatible(text: str) -> bool:
        return sr.test_compatibility("proto-value", Schema(text, "PROTOBUF"))

    assert compatible(USER_PROTO.replace("  string name = 1;\n", "  string name = 1;\n  int64 visits = 8;\n"))
    assert compatible(USER_PROTO.replace("  string name = 1;\n", "  bytes name = 1;\n"))  # wire-compatible
    assert not compatible(USER_PROTO.replace("  string name = 1;\n", "  int64 name = 1;\n"))
    assert not compatible(USER_PROTO.replace("package lb.test;", "package lb.other;"))
    status, body = http(
        "POST",
        f"{url}/subjects/bad-proto/versions",
        {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3"; message M { Missing m = 1; }'},
    )
    assert status == 422 and "Missing" in body["message"]


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_registry_over_a_tls_listener(tmp_path, clients, protocol):
    """The registry's own clients reach a TLS-only broker: on SSL with client certificates
    required (they present the broker's keystore, trust its truststore file), on SASL_SSL as
    the node's SASL user (the truststore given inline: written to a private file). A schema
    registered through the REST API lands in `_schemas`, read back over TLS by librdkafka."""
    from test_tls import Pki

    (tmp_path / "pki").mkdir()
    pki = Pki(tmp_path / "pki")
    config = {"schema.registry.listen": "127.0.0.1:0"}
    if protocol == "SSL":
        config.update({"ssl.client.auth": "required", "ssl.truststore.location": str(pki.ca_pem)})
        kafka = {
            "security.protocol": "SSL",
            "ssl.certificate.location": str(pki.client_cert),
            "ssl.key.location": str(pki.client_key),
        }
    else:  # this test is about the TLS listener: its REST API without a login (on a SASL broker, BASIC by default)
        config["schema.registry.authentication.method"] = "NONE"
        config.update(
            {
                "ssl.truststore.certificates": pki.ca_pem.read_text(),
                "listener.name.sasl_ssl.plain.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                'password="admin-secret" user_admin="admin-secret";',
            }
        )
        kafka = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    with Broker(
        data_dir=tmp_path / "d", listener=protocol, ssl_keystore_location=str(pki.keystore), config=config
    ) as b:
        sr = clients(registry_url(b))
        sid = sr.register_schema("tls-value", Schema(V1, "AVRO"))
        assert sr.get_latest_version("tls-value").schema_id == sid
        c = Consumer(
            {
                "bootstrap.servers": b.bootstrap_servers,
                "group.id": "tls-check",
                "ssl.ca.location": str(pki.ca_pem),
                "auto.offset.reset": "earliest",
                **kafka,
            }
        )
        c.subscribe(["_schemas"])
        keys = []
        deadline = __import__("time").monotonic() + 30
        while not any(b"tls-value" in k for k in keys) and __import__("time").monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                keys.append(m.key() or b"")
        c.close()
        assert any(b"tls-value" in k for k in keys), keys
    if protocol == "SASL_SSL":
        written = tmp_path / "d" / "__own_clients_tls" / "truststore.pem"
        assert written.read_text().strip() == pki.ca_pem.read_text().strip() and written.stat().st_mode & 0o077 == 0
