"""SASL/OAUTHBEARER (KIP-255, KIP-768): tokens from a real identity provider on loopback
(tests/oidc_provider.py: a token endpoint issuing RS256 JWTs and its JWKS), checked by the
broker against the JWKS; Kafka's unsecured tokens for tests; each refusal (expiry, audience,
issuer, signature, alg none, missing claims, a key the provider dropped) answered as RFC 7628
says; key rotation followed; re-authentication when a token expires; and real clients:
librdkafka's `sasl.oauthbearer.method=oidc`, the Java client's OIDC login callback handler,
and ours, in a three-node cluster with ACLs on the token's principal."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from conftest import needs_java
from oidc_provider import OidcProvider, SigningKey, b64url
from replication_helpers import FAST

import logbroker
from logbroker.client.connection import BrokerConnection
from logbroker.common.acl import STANDARD_AUTHORIZER
from logbroker.protocol import REQUESTS, ErrorCode

PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret";'
)


def broker_config(idp: OidcProvider | None, **extra) -> dict[str, str]:
    config = {
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN,
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        **extra,
    }
    if idp is not None:
        config.update(
            {
                "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
                "sasl.oauthbearer.expected.audience": "kafka,other",
                "sasl.oauthbearer.expected.issuer": idp.issuer,
            }
        )
    return config


def oidc(idp: OidcProvider, client_id: str = "app", secret: str = "app-secret") -> dict[str, str]:
    """librdkafka's (and our client's) OIDC settings."""
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.token.endpoint.url": idp.token_url,
        "sasl.oauthbearer.scope": "kafka",
    }


def admin_conf(bs: str) -> dict[str, str]:
    return {
        "bootstrap.servers": bs,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }


def authenticate(b: logbroker.Broker, token: str, authzid: str = "") -> tuple[int, str | bytes, int]:
    """One raw OAUTHBEARER exchange: (error code, error message or the accepted reply, session lifetime)."""
    with BrokerConnection(b.bootstrap_servers) as c:
        assert c._roundtrip(17, 1, REQUESTS[17](mechanism="OAUTHBEARER")).error_code == 0
        message = f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=message))
        if r.error_code or not r.auth_bytes:
            return r.error_code, r.error_message or b"", r.session_lifetime_ms
        challenge = bytes(r.auth_bytes)
        assert json.loads(challenge)["status"] in ("invalid_token", "insufficient_scope")
        r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=b"\x01"))  # RFC 7628: the client's answer to an error
        assert r.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert json.loads(r.error_message) == json.loads(challenge)
        return r.error_code, r.error_message, 0


def roundtrip(conf: dict, topic: str, n: int = 50) -> list[bytes]:
    p = Producer(conf)
    for i in range(n):
        p.produce(topic, b"%s-%d" % (topic.encode(), i))
    assert p.flush(60) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}-{time.monotonic_ns()}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    return got


def test_jwks_validation_and_every_refusal(tmp_path):
    with (
        OidcProvider({"app": "app-secret"}) as idp,
        logbroker.Broker(
            data_dir=tmp_path / "d",
            listener="SASL_PLAINTEXT",
            config=broker_config(idp, **{"sasl.oauthbearer.clock.skew.seconds": "5"}),
        ) as b,
    ):
        code, reply, lifetime = authenticate(b, idp.token("alice"))
        assert code == 0 and 3_590_000 < lifetime <= 3_600_000  # the session ends with the token
        assert authenticate(b, idp.token("alice", aud=["other", "x"]))[0] == 0
        assert authenticate(b, idp.token("alice"), authzid="alice")[0] == 0
        stranger = SigningKey("key-1")  # the provider's key id, another key: a forged signature
        now = int(time.time())
        refused = {
            "expired": idp.token("alice", exp=now - 10, iat=now - 100),
            "not yet valid": idp.token("alice", nbf=now + 600),
            "issued in the future": idp.token("alice", iat=now + 600),
            "no exp": idp.token("alice", exp=None),
            "no iat": idp.token("alice", iat=None),
            "no subject": idp.keys[0].sign({k: v for k, v in idp.claims("alice").items() if k != "sub"}),
            "empty subject": idp.keys[0].sign({**idp.claims("alice"), "sub": " "}),
            "wrong audience": idp.token("alice", aud="someone-else"),
            "wrong issuer": idp.token("alice", iss="https://evil.test"),
            "forged": idp.token("alice", key=stranger),
            "unknown key id": idp.token("alice", key=SigningKey("key-99")),
            "changed claims": idp.token("alice").rsplit(".", 2)[0]
            + "."
            + b64url(json.dumps(idp.claims("admin")).encode())
            + "."
            + idp.token("alice").rsplit(".", 1)[1],
            "alg none": b64url(b'{"alg":"none"}') + "." + b64url(json.dumps(idp.claims("alice")).encode()) + ".",
            "HS256": idp.token("alice", header={"alg": "HS256"}),
            "not a JWT": "abc",
            "garbage base64": "!!.??.**",
            "authzid of another": None,
        }
        for why, token in refused.items():
            if token is None:
                code, message, _ = authenticate(b, idp.token("alice"), authzid="admin")
            else:
                code, message, _ = authenticate(b, token)
            assert code == ErrorCode.SASL_AUTHENTICATION_FAILED, why
            assert json.loads(message) == {"status": "invalid_token"}, (why, message)
        # a malformed message (not RFC 7628's form) is refused the same way
        with BrokerConnection(b.bootstrap_servers) as c:
            assert c._roundtrip(17, 1, REQUESTS[17](mechanism="OAUTHBEARER")).error_code == 0
            r = c._roundtrip(36, 2, REQUESTS[36](auth_bytes=b"Bearer abc"))
            assert json.loads(bytes(r.auth_bytes)) == {"status": "invalid_token"}
        # the broker still serves a good token after all that
        assert authenticate(b, idp.token("alice"))[0] == 0
        assert idp.jwks_requests >= 1


def test_key_rotation_is_followed(tmp_path):
    """A token signed with a new key (a kid the broker has not seen) makes it fetch the JWKS at
    once; a key the provider drops stops working at the next refresh."""
    with OidcProvider({"app": "app-secret"}) as idp:
        config = broker_config(idp, **{"sasl.oauthbearer.jwks.endpoint.refresh.ms": "2000"})
        with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
            old = idp.keys[0]
            assert authenticate(b, idp.token("alice"))[0] == 0
            fetched = idp.jwks_requests
            new = idp.rotate()
            assert authenticate(b, idp.token("alice", key=new))[0] == 0  # unknown kid: fetched at once
            assert idp.jwks_requests == fetched + 1
            assert authenticate(b, idp.token("alice", key=old))[0] == 0  # still published
            idp.rotate(drop_old=True)
            time.sleep(2.2)  # past sasl.oauthbearer.jwks.endpoint.refresh.ms
            assert authenticate(b, idp.token("alice", key=old))[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
            assert authenticate(b, idp.token("alice"))[0] == 0  # the newest key


def test_jwks_from_a_file_and_bad_settings(tmp_path):
    with OidcProvider({"app": "app-secret"}) as idp:
        url = idp.write_jwks(tmp_path / "jwks.json")
        config = {**broker_config(None), "sasl.oauthbearer.jwks.endpoint.url": url}
        with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
            assert authenticate(b, idp.token("alice"))[0] == 0
            assert (
                authenticate(b, idp.token("alice", key=SigningKey("key-1")))[0] == ErrorCode.SASL_AUTHENTICATION_FAILED
            )
    for settings, message in [
        ({"sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "missing.json").as_uri()}, "cannot read the JWKS"),
        ({"sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}, r"file:// path or an http\(s\):// URL"),
        (
            {
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            },
            "set sasl.oauthbearer.jwks.endpoint.url",
        ),
        (
            {"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
            "OAUTHBEARER validators served",
        ),
        ({"sasl.oauthbearer.clock.skew.seconds": "-1"}, "sasl.oauthbearer.clock.skew.seconds"),
    ]:
        with pytest.raises(Exception, match=message):
            logbroker.Broker(
                data_dir=tmp_path / "bad", listener="SASL_PLAINTEXT", config={**broker_config(None), **settings}
            ).start()


def test_unsecured_tokens_and_principals_under_acls(tmp_path):
    """Kafka's default validator (no JWKS URL): alg "none" tokens, as librdkafka's
    sasl.oauthbearer.config and our client build them; a required scope; and the principal
    (User:<sub>) is what the ACLs see."""
    jaas = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'unsecuredValidatorRequiredScope="kafka";'
    )
    config = broker_config(
        None,
        **{
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": jaas,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin",
        },
    )
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
        bs = b.bootstrap_servers
        admin = AdminClient(admin_conf(bs))
        for f in admin.create_topics([NewTopic("alices", 1, 1), NewTopic("secret", 1, 1)]).values():
            f.result(30)
        bindings = [
            AclBinding(rt, name, ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW)
            for rt, name, op in [
                (ResourceType.TOPIC, "alices", AclOperation.ALL),
                (ResourceType.GROUP, "*", AclOperation.ALL),
            ]
        ]
        for f in admin.create_acls(bindings).values():
            f.result(30)
        unsecured = {
            "bootstrap.servers": bs,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.config": "principal=alice scope=kafka,other",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
        }
        assert len(roundtrip(unsecured, "alices")) == 50
        p = Producer({**unsecured, "message.timeout.ms": 5000})
        errors: list = []
        p.produce("secret", b"x", on_delivery=lambda e, m: errors.append(e))
        p.flush(10)
        assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"
        # our client, the same token form
        ours = {k: v for k, v in unsecured.items() if k != "bootstrap.servers"}
        with logbroker.Producer(bs, **ours) as producer:
            producer.send("alices", b"from-ours")
            producer.flush(30)
        # no required scope: insufficient_scope, naming it
        now = int(time.time())
        claims = b64url(json.dumps({"sub": "alice", "iat": now, "exp": now + 60, "scope": "other"}).encode())
        code, message, _ = authenticate(b, b64url(b'{"alg":"none"}') + "." + claims + ".")
        assert code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert json.loads(message) == {"status": "insufficient_scope", "scope": "kafka"}
        # a signed token is not for this validator
        with OidcProvider({}) as idp:
            assert authenticate(b, idp.token("alice"))[0] == ErrorCode.SASL_AUTHENTICATION_FAILED


def test_reauthentication_when_the_token_expires(tmp_path):
    """Tokens live 5 s: the broker ends each session at its token's exp; our client and
    librdkafka fetch new tokens and re-authenticate, producing without a failure for 14 s."""
    with OidcProvider({"app": "app-secret"}, lifetime_s=5) as idp:
        config = broker_config(idp, **{"sasl.oauthbearer.clock.skew.seconds": "0"})
        with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
            code, _, lifetime = authenticate(b, idp.token("app"))
            assert code == 0 and 3_000 < lifetime <= 5_000
            ours = oidc(idp)
            rd = Producer({"bootstrap.servers": b.bootstrap_servers, **oidc(idp), "message.timeout.ms": 10000})
            failures: list = []
            with logbroker.Producer(b.bootstrap_servers, **ours, request_timeout_ms=10000) as producer:
                deadline = time.monotonic() + 14
                i = 0
                while time.monotonic() < deadline:
                    producer.send("ticks", b"ours-%d" % i).add_done_callback(
                        lambda f: f.exception() and failures.append(f.exception())
                    )
                    rd.produce("ticks", b"rd-%d" % i, on_delivery=lambda e, m: e and failures.append(e))
                    rd.poll(0)
                    i += 1
                    time.sleep(0.25)
                producer.flush(30)
            assert rd.flush(30) == 0
            assert failures == []
            assert idp.token_requests >= 2 * 3  # each client: a token per ~4 s


@needs_java
@pytest.mark.timeout(420)
def test_three_nodes_with_java_librdkafka_and_ours(tmp_path):
    """A three-node cluster whose client listener takes OAUTHBEARER (JWKS validation): the Java
    client with its OIDC login callback handler, librdkafka's oidc method and ours each write
    and read through it, as the token's principal, under ACLs."""
    from benches.peers.kafka import install

    tools = install()
    with OidcProvider({"app": "app-secret", "java-app": "java-secret", "nobody": "nobody-secret"}) as idp:
        config = {
            **FAST,
            **broker_config(idp),
            "offsets.topic.replication.factor": 3,
            "authorizer.class.name": STANDARD_AUTHORIZER,
            "super.users": "User:admin;User:ANONYMOUS",
        }
        with logbroker.Cluster(3, data_dir=tmp_path / "c", config=config, listeners=["SASL_PLAINTEXT"]) as cluster:
            bs = cluster.bootstrap("SASL_PLAINTEXT")
            admin = AdminClient(admin_conf(bs))
            admin.create_topics([NewTopic("events", 3, 3)])["events"].result(30)
            bindings = [
                AclBinding(
                    rt, name, ResourcePatternType.LITERAL, f"User:{who}", "*", AclOperation.ALL, AclPermissionType.ALLOW
                )
                for who in ("app", "java-app")
                for rt, name in [(ResourceType.TOPIC, "events"), (ResourceType.GROUP, "*")]
            ]
            for f in admin.create_acls(bindings).values():
                f.result(30)

            # librdkafka and ours, as User:app
            conf = {"bootstrap.servers": bs, **oidc(idp)}
            assert len(roundtrip(conf, "events", 100)) == 100
            with logbroker.Producer(bs, **oidc(idp)) as producer:
                for i in range(20):
                    producer.send("events", b"ours-%d" % i)
                producer.flush(30)
            # a client the provider knows but the ACLs do not: authenticated, then refused
            p = Producer({"bootstrap.servers": bs, **oidc(idp, "nobody", "nobody-secret"), "message.timeout.ms": 8000})
            errors: list = []
            p.produce("events", b"x", on_delivery=lambda e, m: errors.append(e))
            p.flush(20)
            assert errors and errors[0] is not None and errors[0].name() == "TOPIC_AUTHORIZATION_FAILED"
            # a wrong client secret: the provider refuses, no token, no connection
            with pytest.raises(Exception, match="refused client 'app'|401"):
                with logbroker.Producer(bs, **oidc(idp, "app", "wrong"), request_timeout_ms=5000) as bad:
                    bad.send("events", b"x")
                    bad.flush(10)

            # the Java client: Kafka's own OIDC login callback handler against the provider
            props = tmp_path / "java.properties"
            props.write_text(
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                "sasl.login.callback.handler.class="
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
                f"sasl.oauthbearer.token.endpoint.url={idp.token_url}\n"
                "sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'clientId="java-app" clientSecret="java-secret" scope="kafka";\n'
            )
            allow = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={idp.token_url}"
            lines = [f"java-{i}" for i in range(50)]
            cmd = tools.tools_java(
                "org.apache.kafka.tools.ConsoleProducer",
                ["--bootstrap-server", bs, "--topic", "events", "--command-config", str(props)],
            )
            cmd.insert(1, allow)
            r = subprocess.run(cmd, input="".join(x + "\n" for x in lines).encode(), capture_output=True, timeout=180)
            assert r.returncode == 0, r.stderr.decode()[-3000:]
            cmd = tools.tools_java(
                "org.apache.kafka.tools.consumer.ConsoleConsumer",
                [
                    "--bootstrap-server",
                    bs,
                    "--topic",
                    "events",
                    "--from-beginning",
                    "--max-messages",
                    "170",
                    "--timeout-ms",
                    "60000",
                    "--command-config",
                    str(props),
                ],
            )
            cmd.insert(1, allow)
            r = subprocess.run(cmd, capture_output=True, timeout=180)
            assert r.returncode == 0, r.stderr.decode()[-3000:]
            got = r.stdout.decode().splitlines()
            assert sorted(x for x in got if x.startswith("java-")) == sorted(lines)
            assert len(got) == 170
            assert "java-app" in idp.issued and "java-app" not in idp.refused and "app" in idp.refused
