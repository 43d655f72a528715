"""SASL in our client (client/sasl.py, the wiring in client/network.py): the mechanisms'
state machines against RFC 7677's SCRAM-SHA-256 vector and a SCRAM server built from
logbroker.scram, the configuration keys, the password kept out of every repr and message,
and a `Connection` driven by an in-memory broker (handshake order, failures, KIP-368
re-authentication)."""

from __future__ import annotations

import base64
import os
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest

from logbroker import scram
from logbroker.client import config as _config
from logbroker.client import sasl, tls
from logbroker.client.errors import ConfigError, KafkaError, SaslAuthenticationError
from logbroker.client.network import Connection, Network
from logbroker.protocol import REQUESTS, RESPONSES, decode_request, encode_response

SECRET = "s3cr3t-Pa55"

# RFC 7677, section 3
RFC_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_client() -> sasl.ScramClient:
    return sasl.ScramClient("SCRAM-SHA-256", "user", sasl.Password("pencil"), nonce=RFC_NONCE)


# -- SCRAM --------------------------------------------------------------------------------


def test_scram_sha256_rfc7677_vector():
    c = rfc_client()
    assert c.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert c.respond(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert not c.complete
    assert c.respond(RFC_SERVER_FINAL) is None
    assert c.complete


def test_scram_wrong_server_signature_is_refused():
    c = rfc_client()
    c.first()
    c.respond(RFC_SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\x00" * 32)
    with pytest.raises(ValueError, match="not who it claims"):
        c.respond(forged)
    assert not c.complete


def test_scram_server_error_and_malformed_final_are_refused():
    c = rfc_client()
    c.first()
    c.respond(RFC_SERVER_FIRST)
    with pytest.raises(ValueError, match="refused: invalid-proof"):
        c.respond(b"e=invalid-proof")
    for bad in (b"x=1", b"v=not base64!", b"garbage"):
        c = rfc_client()
        c.first()
        c.respond(RFC_SERVER_FIRST)
        with pytest.raises(ValueError):
            c.respond(bad)


@pytest.mark.parametrize("nonce", ["someoneelse%xyz", RFC_NONCE, "rOprNGfwEbeRWgbNEkq"])
def test_scram_nonce_not_extending_ours_is_refused(nonce):
    c = rfc_client()
    c.first()
    with pytest.raises(ValueError, match="nonce"):
        c.respond(f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode())


def test_scram_too_few_iterations_are_refused():
    c = rfc_client()
    c.first()
    with pytest.raises(ValueError, match="4095 iterations"):
        c.respond(f"r={RFC_NONCE}abc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095".encode())


@pytest.mark.parametrize(
    "server_first",
    [
        b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # no nonce
        f"r={RFC_NONCE}x,s=!!!,i=4096".encode(),  # bad salt
        f"r={RFC_NONCE}x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=lots".encode(),  # bad count
        f"m=ext,r={RFC_NONCE}x,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode(),  # mandatory extension
        b"\xff\xfe",
    ],
)
def test_scram_malformed_server_first_is_refused(server_first):
    c = rfc_client()
    c.first()
    with pytest.raises(ValueError):
        c.respond(server_first)


class ScramServer:
    """The server side of SCRAM from logbroker.scram (as the broker stores a credential)."""

    def __init__(self, mechanism: str, password: str, iterations: int = 4096) -> None:
        self.mechanism = mechanism
        self.salt = os.urandom(16)
        self.iterations = iterations
        salted = scram.salted_password(mechanism, password.encode(), self.salt, iterations)
        self.stored = scram.stored_key(mechanism, salted)
        self.server_key = scram.server_key(mechanism, salted)
        self.user: str | None = None

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,")
        self.client_first_bare = text[3:]
        attrs = scram.parse_attributes(self.client_first_bare)
        self.user = scram.unescape_username(attrs["n"])
        self.nonce = attrs["r"] + "srv" + base64.b64encode(os.urandom(9)).decode()
        self.server_first = f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes | None:
        """server-final, or None when the proof is wrong."""
        text = client_final.decode()
        without_proof, _, proof = text.rpartition(",p=")
        assert without_proof == f"c=biws,r={self.nonce}"
        auth = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        if not scram.verify_proof(self.mechanism, self.stored, auth, base64.b64decode(proof)):
            return None
        sig = scram.server_signature(self.mechanism, self.server_key, auth)
        return b"v=" + base64.b64encode(sig)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_against_a_server(mechanism):
    server = ScramServer(mechanism, SECRET, iterations=8192)
    c = sasl.ScramClient(mechanism, "alice,=x", sasl.Password(SECRET))
    first = c.first()
    assert b"n=alice=2C=3Dx," in first  # RFC 5802 5.1 escaping
    final = server.final(c.respond(server.first(first)))
    assert server.user == "alice,=x" and final is not None
    assert c.respond(final) is None and c.complete
    # the wrong password: the server refuses the proof
    server = ScramServer(mechanism, SECRET)
    c = sasl.ScramClient(mechanism, "alice", sasl.Password("wrong"))
    assert server.final(c.respond(server.first(c.first()))) is None


def test_scram_nonces_are_random_and_printable():
    a, b = (sasl.ScramClient("SCRAM-SHA-256", "u", sasl.Password("p")) for _ in range(2))
    assert a.nonce != b.nonce and len(a.nonce) >= 32
    assert "," not in a.nonce and a.nonce.isprintable()


# -- PLAIN --------------------------------------------------------------------------------


def test_plain_message():
    p = sasl.Plain("alice", sasl.Password("alice-secret"))
    assert p.first() == b"\0alice\0alice-secret"
    assert p.respond(b"") is None and p.complete
    with pytest.raises(ValueError, match="NUL"):
        sasl.Plain("al\0ice", sasl.Password("x"))


# -- configuration ------------------------------------------------------------------------


def build(**given: Any) -> dict[str, Any]:
    return _config.build(_config.ADMIN, {k.replace("_", "."): v for k, v in given.items()})


def test_config_sasl_protocols_and_defaults():
    c = build(security_protocol="sasl_plaintext", sasl_username="alice", sasl_password=SECRET)
    assert c["security.protocol"] == "SASL_PLAINTEXT" and c["sasl.mechanism"] == "PLAIN"
    s = sasl.from_config(c)
    assert (s.mechanism, s.username, s.password.value) == ("PLAIN", "alice", SECRET)
    c = build(security_protocol="SASL_SSL", sasl_mechanism="scram-sha-512", sasl_username="bob", sasl_password=SECRET)
    assert sasl.from_config(c).mechanism == "SCRAM-SHA-512"
    assert tls.context(c) is not None  # SASL_SSL is TLS first
    assert tls.context(build(security_protocol="SASL_PLAINTEXT", sasl_username="a", sasl_password="b")) is None
    assert sasl.from_config(build()) is None
    # underscored keyword arguments, as the clients take them
    c = _config.build(
        _config.PRODUCER, {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "a", "sasl_password": "b"}
    )
    assert sasl.from_config(c).username == "a"


def test_config_gssapi():
    """GSSAPI takes librdkafka's sasl.kerberos.* keys or Java's Krb5LoginModule JAAS form
    (tests/test_kerberos.py logs in with both against a KDC)."""
    s = sasl.from_config(
        build(
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="gssapi",
            sasl_kerberos_keytab="/k/alice.keytab",
            sasl_kerberos_principal="alice@EXAMPLE.COM",
        )
    )
    assert (s.mechanism, s.service, s.principal, s.keytab) == (
        "GSSAPI",
        "kafka",
        "alice@EXAMPLE.COM",
        "/k/alice.keytab",
    )
    jaas = (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        'keyTab="/k/bob.keytab" principal="bob@EXAMPLE.COM" serviceName="kfk";'
    )
    s = sasl.from_config(build(security_protocol="SASL_SSL", sasl_mechanism="GSSAPI", sasl_jaas_config=jaas))
    assert (s.service, s.principal, s.keytab) == ("kfk", "bob@EXAMPLE.COM", "/k/bob.keytab")
    # a keytab without a principal logs in as librdkafka's default; none: the default ccache
    s = sasl.from_config(build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", sasl_kerberos_keytab="/k"))
    assert s.principal == "kafkaclient"
    s = sasl.from_config(build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI"))
    assert (s.principal, s.keytab) == (None, None)
    with pytest.raises(ConfigError, match="is not one of"):
        build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="KERBEROS")


@pytest.mark.parametrize(
    "settings,message",
    [
        ({}, "needs sasl.oauthbearer.method=oidc"),
        ({"sasl_oauthbearer_config": "principal=a"}, "enable.sasl.oauthbearer.unsecure.jwt=true"),
        ({"sasl_oauthbearer_config": "scope=x", "enable_sasl_oauthbearer_unsecure_jwt": True}, "principal=<name>"),
        ({"sasl_oauthbearer_method": "oidc"}, "token.endpoint.url"),
        ({"sasl_oauthbearer_method": "saml"}, "use default or oidc"),
        ({"oauth_cb": "not callable"}, "oauth_cb must be a callable"),
        ({"sasl_oauthbearer_extensions": "a b", "oauth_cb": lambda c: ("t", 1)}, "is not key=value"),
    ],
)
def test_oauthbearer_config_names_what_is_missing(settings, message):
    with pytest.raises(ConfigError, match=message):
        build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="oauthbearer", **settings)


def test_oauthbearer_tokens_are_fetched_again_after_80_percent_of_their_life():
    from logbroker.client.oauthbearer import TokenSource, unsecured_token

    now = [1000.0]
    fetched = []

    def fetch():
        fetched.append(now[0])
        return f"token-{len(fetched)}", now[0] + 100

    source = TokenSource(fetch, {}, "test", clock=lambda: now[0])
    assert source.token() == "token-1"
    now[0] += 79
    assert source.token() == "token-1"
    now[0] += 2  # past 80 s of 100
    assert source.token() == "token-2" and fetched == [1000.0, 1081.0]

    def failing():
        raise ValueError("the endpoint is down")

    source._fetch = failing
    now[0] += 81  # past the refresh point, the token still valid: kept
    assert source.token() == "token-2"
    now[0] += 20  # expired: the failure surfaces
    with pytest.raises(ValueError, match="the endpoint is down"):
        source.token()
    token, expiry = unsecured_token("principal=bob scope=a,b lifeSeconds=60", 5000.0)
    header, claims, sig = token.split(".")
    assert sig == "" and expiry == 5060.0
    import base64
    import json

    assert json.loads(base64.urlsafe_b64decode(claims + "==")) == {
        "sub": "bob",
        "iat": 5000,
        "exp": 5060,
        "scope": ["a", "b"],
    }


def test_config_refuses_unknown_mechanism_and_protocol():
    with pytest.raises(ConfigError, match="SCRAM-SHA-1"):
        build(sasl_mechanism="SCRAM-SHA-1")
    with pytest.raises(ConfigError, match="SASL_PLAINTEXT"):
        build(security_protocol="SASL")


@pytest.mark.parametrize(
    "given", [{}, {"sasl.username": "alice"}, {"sasl.password": SECRET}, {"sasl.username": "", "sasl.password": SECRET}]
)
def test_config_sasl_needs_user_and_password(given):
    with pytest.raises(ConfigError, match="needs a user and a password") as e:
        _config.build(_config.ADMIN, {"security.protocol": "SASL_SSL", **given})
    assert SECRET not in str(e.value)


def test_config_jaas():
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="alice-\\"secret\\"";'
    )
    c = build(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256", sasl_jaas_config=jaas)
    s = sasl.from_config(c)
    assert (s.username, s.password.value) == ("alice", 'alice-"secret"')
    # sasl.username / sasl.password win, each on its own
    s = sasl.from_config(build(security_protocol="SASL_PLAINTEXT", sasl_jaas_config=jaas, sasl_username="bob"))
    assert (s.username, s.password.value) == ("bob", 'alice-"secret"')
    s = sasl.from_config(build(security_protocol="SASL_PLAINTEXT", sasl_jaas_config=jaas, sasl_password="pw"))
    assert (s.username, s.password.value) == ("alice", "pw")
    assert sasl.parse_jaas(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n  username=alice\n  password="a b";'
    ) == {"username": "alice", "password": "a b"}


@pytest.mark.parametrize(
    "jaas",
    [
        f'username="alice" password="{SECRET}";',  # no login module
        f'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="{SECRET}"',  # no ';'
    ],
)
def test_config_bad_jaas_does_not_quote_it(jaas):
    with pytest.raises(ConfigError, match="sasl.jaas.config") as e:
        build(security_protocol="SASL_PLAINTEXT", sasl_jaas_config=jaas)
    assert SECRET not in str(e.value)


def test_password_never_in_repr_or_messages():
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="{SECRET}";'
    c = build(security_protocol="SASL_PLAINTEXT", sasl_password=SECRET, sasl_username="alice", sasl_jaas_config=jaas)
    s = sasl.from_config(c)
    texts = [
        repr(c),
        str(c),
        repr(s),
        str(s.password),
        repr(s.client()),
        repr(sasl.ScramClient("SCRAM-SHA-256", "alice", sasl.Password(SECRET))),
        str(SaslAuthenticationError("127.0.0.1:9092", "PLAIN", "alice", "Authentication failed", 58)),
    ]
    for text in texts:
        assert SECRET not in text, text
    assert isinstance(c["sasl.password"], sasl.Password) and c["sasl.password"] == sasl.Password(SECRET)
    # rebuilding from a built configuration keeps it
    assert sasl.from_config(_config.build(_config.ADMIN, c)).password.value == SECRET


def test_producer_refuses_sasl_without_credentials():
    import logbroker

    with pytest.raises(ConfigError):
        logbroker.Producer(bootstrap_servers="127.0.0.1:1", security_protocol="SASL_PLAINTEXT")


def test_sasl_authentication_error():
    e = SaslAuthenticationError("h:1 (node 1)", "SCRAM-SHA-256", "alice", "Authentication failed", 58)
    assert isinstance(e, KafkaError) and not e.retriable
    assert str(e) == (
        "SASL authentication of user 'alice' with SCRAM-SHA-256 at broker h:1 (node 1) failed: "
        "SASL_AUTHENTICATION_FAILED (58): Authentication failed"
    )
    import pickle

    assert str(pickle.loads(pickle.dumps(e))) == str(e)


# -- a Connection against an in-memory broker ----------------------------------------------

Handler = Callable[[int, int, Any], Any]


class MemoryBroker:
    """Answers what a `Connection` writes: `handler(api_key, version, request) -> response`
    (None: no answer yet, the request is kept in `held`)."""

    def __init__(self, conn: Connection, handler: Handler) -> None:
        self.conn = conn
        self.handler = handler
        self.seen: list[tuple[int, int, Any]] = []
        self.held: list[tuple[int, int, int, Any]] = []

    def pump(self, now: float = 0.0) -> None:
        """Read every frame the connection wrote, answer them in order (until one is held)."""
        while True:
            data = b"".join(bytes(c) for c in self.conn.outgoing())
            if not data:
                return
            while data:
                (size,) = struct.unpack(">i", data[:4])
                frame, data = data[4 : 4 + size], data[4 + size :]
                header, req = decode_request(frame)
                key, ver = header.request_api_key, header.request_api_version
                self.seen.append((key, ver, req))
                self.held.append((key, ver, header.correlation_id, req))
            self.answer(now)

    def answer(self, now: float = 0.0) -> None:
        while self.held:
            key, ver, corr, req = self.held[0]
            resp = self.handler(key, ver, req)
            if resp is None:
                return
            self.held.pop(0)
            self.feed(b"".join(encode_response(key, ver, corr, resp)), now)
            if self.conn.state == "closed":
                return

    def feed(self, data: bytes, now: float) -> None:
        while data and self.conn.state != "closed":
            target = self.conn.read_target()
            n = min(len(target), len(data))
            target[:n] = data[:n]
            data = data[n:]
            self.conn.advance(n, now)


def api_versions(skip: tuple[int, ...] = ()) -> Any:
    cls = RESPONSES[18]
    return cls(
        api_keys=[
            cls.ApiVersion(api_key=k, min_version=r.valid_versions[0], max_version=r.valid_versions[1])
            for k, r in REQUESTS.items()
            if k not in skip
        ]
    )


class Broker:
    """A SASL broker's answers: PLAIN with `users`, SCRAM with `scram` servers per user."""

    def __init__(
        self, users: dict[str, str], mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), lifetime_ms: int = 0
    ) -> None:
        self.users = users
        self.mechanisms = list(mechanisms)
        self.lifetime_ms = lifetime_ms
        self.mechanism: str | None = None
        self.scram: ScramServer | None = None
        self.authenticated = False
        self.hold: set[int] = set()
        self.forge_signature = False

    def __call__(self, key: int, version: int, req: Any) -> Any:
        if key in self.hold:
            return None
        if key == 18:
            return api_versions()
        if key == 17:
            if req.mechanism not in self.mechanisms:
                return RESPONSES[17](error_code=33, mechanisms=self.mechanisms)
            self.mechanism = req.mechanism
            return RESPONSES[17](mechanisms=self.mechanisms)
        if key == 36:
            return self.authenticate(bytes(req.auth_bytes))
        assert self.authenticated, f"API {key} before authentication"
        if key == 3:
            return RESPONSES[3](brokers=[], topics=[])
        raise AssertionError(key)

    def authenticate(self, data: bytes) -> Any:
        cls = RESPONSES[36]
        fail = cls(error_code=58, error_message="Authentication failed: Invalid username or password")
        if self.mechanism == "PLAIN":
            _, user, password = data.split(b"\0")
            if self.users.get(user.decode()) != password.decode():
                return fail
            return self.done(b"")
        if self.scram is None:
            user = scram.unescape_username(scram.parse_attributes(data.decode()[3:])["n"])
            self.scram = ScramServer(self.mechanism, self.users.get(user, "\0unknown"))
            return cls(auth_bytes=self.scram.first(data))
        final = self.scram.final(data)
        self.scram = None
        if final is None:
            return fail
        if self.forge_signature:
            final = b"v=" + base64.b64encode(b"\1" * len(base64.b64decode(final[2:])))
        return self.done(final)

    def done(self, auth_bytes: bytes) -> Any:
        self.authenticated = True
        return RESPONSES[36](auth_bytes=auth_bytes, session_lifetime_ms=self.lifetime_ms)


def sasl_conf(mechanism: str = "PLAIN", user: str = "alice", password: str = SECRET) -> sasl.SaslConfig:
    return sasl.SaslConfig(mechanism, user, sasl.Password(password))


def metadata() -> Any:
    return REQUESTS[3](topics=[])


def connect(broker: Broker, conf: sasl.SaslConfig | None, now: float = 0.0):
    results: list[Any] = []
    conn = Connection(1, "127.0.0.1", 9092, "test", conf, on_auth=lambda c, e: results.append(e))
    conn.connected(now)
    return conn, MemoryBroker(conn, broker), results


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_connection_authenticates_before_other_requests(mechanism):
    broker = Broker({"alice": SECRET})
    conn, mem, results = connect(broker, sasl_conf(mechanism))
    p = conn.request(metadata(), 0.0, 30.0)  # waits for the exchange
    assert not conn.usable
    mem.pump()
    assert p.done() and p.error is None
    assert conn.usable and conn.authenticated and results == [None]
    keys = [k for k, _, _ in mem.seen]
    assert keys == [18, 17, 36, 3] if mechanism == "PLAIN" else [18, 17, 36, 36, 3]
    handshake = mem.seen[1]
    assert handshake[1] == 1 and handshake[2].mechanism == mechanism
    assert {v for k, v, _ in mem.seen if k == 36} == {2}  # the highest both speak
    if mechanism == "PLAIN":
        assert bytes(mem.seen[2][2].auth_bytes) == b"\0alice\0" + SECRET.encode()


def test_connection_without_sasl_is_unchanged():
    broker = Broker({})
    broker.authenticated = True  # a PLAINTEXT listener
    conn, mem, results = connect(broker, None)
    p = conn.request(metadata(), 0.0, 30.0)
    mem.pump()
    assert p.error is None
    assert [k for k, _, _ in mem.seen] == [18, 3] and results == []


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_connection_wrong_password_fails_with_sasl_error(mechanism):
    conn, mem, results = connect(Broker({"alice": "the-real-one"}), sasl_conf(mechanism))
    p = conn.request(metadata(), 0.0, 30.0)
    mem.pump()
    assert conn.state == "closed" and p.done()
    err = p.error
    assert isinstance(err, SaslAuthenticationError) and not err.retriable
    assert err.error_code == 58 and err.user == "alice" and err.mechanism == mechanism
    assert "127.0.0.1:9092" in str(err) and "Invalid username or password" in str(err)
    assert SECRET not in str(err) and results == [err]
    assert [k for k, _, _ in mem.seen if k == 3] == []


def test_connection_unsupported_mechanism_names_both():
    conn, mem, _ = connect(Broker({"alice": SECRET}, mechanisms=("SCRAM-SHA-512",)), sasl_conf("PLAIN"))
    p = conn.request(metadata(), 0.0, 30.0)
    mem.pump()
    err = p.error
    assert isinstance(err, SaslAuthenticationError) and err.error_code == 33
    assert "does not enable PLAIN; it enables SCRAM-SHA-512" in str(err)


def test_connection_refuses_a_server_with_the_wrong_signature():
    broker = Broker({"alice": SECRET})
    broker.forge_signature = True
    conn, mem, _ = connect(broker, sasl_conf("SCRAM-SHA-256"))
    p = conn.request(metadata(), 0.0, 30.0)
    mem.pump()
    err = p.error
    assert isinstance(err, SaslAuthenticationError) and err.error_code is None
    assert "not who it claims" in str(err) and conn.state == "closed"


def test_connection_refuses_a_broker_without_sasl_authenticate():
    def handler(key, version, req):
        return api_versions(skip=(36,)) if key == 18 else None

    results: list[Any] = []
    conn = Connection(1, "127.0.0.1", 9092, "test", sasl_conf(), on_auth=lambda c, e: results.append(e))
    conn.connected(0.0)
    mem = MemoryBroker(conn, handler)
    p = conn.request(metadata(), 0.0, 30.0)
    mem.pump()
    assert isinstance(p.error, SaslAuthenticationError) and "KIP-152" in str(p.error)


def test_connection_reauthenticates_before_the_session_ends():
    broker = Broker({"alice": SECRET}, lifetime_ms=10_000)
    conn, mem, results = connect(broker, sasl_conf("SCRAM-SHA-512"))
    mem.pump()
    assert results == [None]
    assert 8.5 <= conn.reauth_at <= 9.5 and conn.next_deadline() == conn.reauth_at
    # a request in flight when the time comes
    broker.hold = {3}
    first = conn.request(metadata(), 5.0, 30.0)
    mem.pump(5.0)
    assert not first.done()
    conn.maybe_reauthenticate(9.6)
    second = conn.request(metadata(), 9.6, 30.0)  # waits: re-authentication is due
    mem.pump(9.6)
    assert [k for k, _, _ in mem.seen].count(17) == 1  # not while the first is in flight
    assert not conn.has_outgoing()
    broker.hold = set()
    mem.answer(9.7)  # the first is answered: re-authentication starts, then the second goes
    mem.pump(9.7)
    assert first.done() and second.done() and first.error is None and second.error is None
    tail = [k for k, _, _ in mem.seen][-5:]
    assert tail == [3, 17, 36, 36, 3], tail
    assert results == [None, None] and conn.usable
    assert 9.7 + 8.5 <= conn.reauth_at <= 9.7 + 9.5


def test_connection_reauthentication_failure_closes_it():
    broker = Broker({"alice": SECRET}, lifetime_ms=1000)
    conn, mem, results = connect(broker, sasl_conf("PLAIN"))
    mem.pump()
    broker.users["alice"] = "changed"
    conn.maybe_reauthenticate(0.96)
    p = conn.request(metadata(), 0.96, 30.0)
    mem.pump(0.96)
    assert isinstance(p.error, SaslAuthenticationError) and conn.state == "closed"
    assert results[0] is None and isinstance(results[1], SaslAuthenticationError)


def test_network_backs_off_after_an_authentication_failure():
    net = Network(
        [("127.0.0.1", 9092)], "test", 30.0, reconnect_backoff=0.05, reconnect_backoff_max=1.0, sasl=sasl_conf()
    )
    told: list[BaseException] = []
    net.on_auth_error = told.append
    broker = Broker({"alice": "other"})
    waits = []
    for _attempt in range(3):
        p = net.request(-1, metadata())
        (c,) = net.to_connect()
        net.on_connected(c)
        MemoryBroker(c, broker).pump(net.now)
        assert isinstance(p.error, SaslAuthenticationError)
        assert net.auth_error is p.error and told[-1] is p.error
        net.tick(net.now)
        retry_at = net._backoff[-1][0]
        waits.append(retry_at - net.now)
        assert net.to_connect() == []  # backing off
        net.now = retry_at
    assert waits == pytest.approx([0.05, 0.1, 0.2])
    # credentials that work: the backoff and the error are cleared
    broker.users["alice"] = SECRET
    p = net.request(-1, metadata())
    (c,) = net.to_connect()
    net.on_connected(c)
    MemoryBroker(c, broker).pump(net.now)
    assert p.error is None and net.auth_error is None and -1 not in net._backoff


def test_core_hooks_fail_waiters_fast():
    from logbroker.client.fetcher import ConsumerCore
    from logbroker.client.sender import ProducerCore

    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "alice", "sasl.password": SECRET}
    err = SaslAuthenticationError("h:1", "PLAIN", "alice", "Authentication failed", 58)
    consumer = ConsumerCore(_config.build(_config.CONSUMER, conf))
    assert consumer.net.sasl.username == "alice"
    waiter = consumer.wait_metadata(lambda: False, 60.0, "topic x")
    consumer.net.on_auth_error(err)
    consumer.net.on_auth_error(err)
    assert waiter.error is err and list(consumer.errors) == [err]  # poll() raises it, once
    producer = ProducerCore(_config.build_producer(conf))
    waiter = producer.wait_for_topic("t", 60.0)
    producer.net.on_auth_error(err)
    assert waiter.error is err


# -- end to end, against a broker with SASL listeners -------------------------------------

ADMIN_PASSWORD = "admin-secret"
BROKER_JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    f'password="{ADMIN_PASSWORD}" user_admin="{ADMIN_PASSWORD}" user_alice="alice-secret";'
)
SCRAM_USERS = {"bob": ("SCRAM-SHA-256", "bob-secret"), "carol": ("SCRAM-SHA-512", "carol-secret")}


def sasl_broker(tmp_path, listener: str = "SASL_PLAINTEXT", config: dict | None = None, **settings):
    import logbroker

    conf = {f"listener.name.{listener.lower()}.plain.sasl.jaas.config": BROKER_JAAS, **(config or {})}
    return logbroker.Broker(data_dir=tmp_path / "d", listener=listener, config=conf, **settings)


def ours(mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT", **extra) -> dict:
    return {
        "security_protocol": protocol,
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
        **extra,
    }


def admin_auth(**extra) -> dict:
    return ours("PLAIN", "admin", ADMIN_PASSWORD, **extra)


def add_scram_users(bs: str, **extra) -> None:
    import logbroker

    with logbroker.Admin(bs, **admin_auth(**extra)) as admin:
        admin.alter_user_scram_credentials(
            upsertions=[(user, mechanism, password, 4096) for user, (mechanism, password) in SCRAM_USERS.items()]
        )


def roundtrip_sync(bs: str, auth: dict, topic: str, n: int = 200) -> list[bytes]:
    import logbroker

    with logbroker.Producer(bs, **auth) as p:
        futs = [p.send(topic, b"%s-%d" % (topic.encode(), i)) for i in range(n)]
        p.flush(30)
        for f in futs:
            f.result(10)
    got: list[bytes] = []
    with logbroker.Consumer(bs, group_id=f"g-{topic}", auto_offset_reset="earliest", **auth) as c:
        c.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < n and time.monotonic() < deadline:
            got += [r.value for r in c.poll(0.5)]
    return sorted(got)


def expected(topic: str, n: int = 200) -> list[bytes]:
    return sorted(b"%s-%d" % (topic.encode(), i) for i in range(n))


JAAS_CAROL = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="carol-secret";'
)


def test_e2e_sync_clients_plain_and_scram(tmp_path):
    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        assert roundtrip_sync(bs, ours("PLAIN", "alice", "alice-secret"), "t-alice") == expected("t-alice")
        assert roundtrip_sync(bs, ours("SCRAM-SHA-256", "bob", "bob-secret"), "t-bob") == expected("t-bob")
        jaas = {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_jaas_config": JAAS_CAROL,
        }
        assert roundtrip_sync(bs, jaas, "t-carol") == expected("t-carol")


def test_e2e_trio_clients_scram(tmp_path):
    import trio

    import logbroker.aio

    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        auth = ours("SCRAM-SHA-512", "carol", "carol-secret")

        async def main() -> list[bytes]:
            async with logbroker.aio.Producer(bs, **auth) as p:
                for i in range(100):
                    await p.enqueue("t-aio", b"t-aio-%d" % i)
                await p.flush(30)
            got: list[bytes] = []
            async with logbroker.aio.Consumer(bs, group_id="g-aio", auto_offset_reset="earliest", **auth) as c:
                await c.subscribe(["t-aio"])
                with trio.move_on_after(30):
                    while len(got) < 100:
                        got += [r.value for r in await c.poll(0.5)]
            return sorted(got)

        assert trio.run(main) == expected("t-aio", 100)


@pytest.mark.parametrize(
    "mechanism,user,password",
    [
        ("PLAIN", "alice", "wrong"),
        ("SCRAM-SHA-256", "bob", "wrong"),
        ("SCRAM-SHA-512", "bob", "bob-secret"),  # bob has only a SCRAM-SHA-256 credential
        ("SCRAM-SHA-256", "nobody", "x"),
    ],
)
def test_e2e_wrong_credentials_fail_fast(tmp_path, mechanism, user, password):
    import logbroker

    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        auth = ours(mechanism, user, password, request_timeout_ms=20000)

        def fails(call) -> SaslAuthenticationError:
            start = time.monotonic()
            with pytest.raises(SaslAuthenticationError) as e:
                call()
            assert time.monotonic() - start < 5, "the failure must not wait for a timeout"
            err = e.value
            assert (err.user, err.mechanism, err.error_code) == (user, mechanism, 58)
            assert bs in str(err)
            if len(password) > 3:
                assert password not in str(err)
            return err

        with logbroker.Producer(bs, max_block_ms=30000, **auth) as p:
            fails(lambda: p.send("t", b"v"))
            fails(lambda: p.partitions_for("t"))
        with logbroker.Consumer(bs, group_id="g", **auth) as c:
            c.subscribe(["t"])
            fails(lambda: c.poll(10))
        with logbroker.Admin(bs, **auth) as a:
            fails(lambda: a.list_topics(timeout=20))
            fails(lambda: a.create_topics(["x"], timeout=20))
        # the broker goes on serving the others
        assert roundtrip_sync(bs, ours("PLAIN", "alice", "alice-secret"), "after", 10) == expected("after", 10)


def test_e2e_trio_wrong_password_fails_fast(tmp_path):
    import trio

    import logbroker.aio

    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        auth = ours("PLAIN", "alice", "wrong")

        async def main() -> None:
            with trio.fail_after(10):
                async with logbroker.aio.Producer(bs, **auth) as p:
                    with pytest.raises(SaslAuthenticationError, match="alice"):
                        await p.send("t", b"v")
                async with logbroker.aio.Admin(bs, **auth) as a:
                    with pytest.raises(SaslAuthenticationError, match="Authentication failed"):
                        await a.list_topics(timeout=20)
                async with logbroker.aio.Consumer(bs, group_id="g", **auth) as c:
                    await c.subscribe(["t"])
                    with pytest.raises(SaslAuthenticationError):
                        await c.poll(10)

        trio.run(main)


def test_e2e_sasl_ssl(tmp_path):
    from test_tls import Pki

    import logbroker

    pki = Pki(tmp_path)
    tls_conf = {"ssl_truststore_location": str(pki.ca_pem)}
    with sasl_broker(tmp_path, "SASL_SSL", ssl_keystore_location=str(pki.keystore)) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs, security_protocol="SASL_SSL", **tls_conf)
        auth = ours("SCRAM-SHA-256", "bob", "bob-secret", "SASL_SSL", **tls_conf)
        assert roundtrip_sync(bs, auth, "t-ssl", 100) == expected("t-ssl", 100)
        with pytest.raises(SaslAuthenticationError):
            with logbroker.Admin(bs, **ours("SCRAM-SHA-256", "bob", "wrong", "SASL_SSL", **tls_conf)) as a:
                a.list_topics(timeout=10)
        # SASL_SSL is TLS first: a client that does not trust the broker never gets to SASL
        with pytest.raises((KafkaError, ConnectionError), match="CERTIFICATE_VERIFY_FAILED|certificate"):
            with logbroker.Admin(
                bs,
                request_timeout_ms=3000,
                **ours("SCRAM-SHA-256", "bob", "bob-secret", "SASL_SSL", ssl_truststore_location=str(pki.other_ca_pem)),
            ) as a:
                a.list_topics(timeout=3)


def test_e2e_reauthentication_keeps_the_connection(tmp_path):
    """connections.max.reauth.ms=1500: the clients re-authenticate in place (KIP-368) and
    go on producing and consuming on the same connections."""
    import logbroker

    with sasl_broker(tmp_path, config={"connections.max.reauth.ms": "1500"}) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        auth = ours("SCRAM-SHA-256", "bob", "bob-secret")
        with (
            logbroker.Producer(bs, **auth) as p,
            logbroker.Consumer(bs, group_id="g-re", auto_offset_reset="earliest", **auth) as c,
        ):
            p.send("t-re", b"first").result(10)  # the topic exists before the group forms
            c.subscribe(["t-re"])
            got = c.poll(5)
            cores = (p._core, c._core)
            conns = {
                (i, node): (conn, conn.reauth_at)
                for i, core in enumerate(cores)
                for node, conn in core.net.conns.items()
                if conn.state == "ready"
            }
            assert conns and all(at is not None for _, at in conns.values())
            deadline = time.monotonic() + 5  # > 3 session lifetimes
            i = 0
            while time.monotonic() < deadline:
                p.send("t-re", b"v%d" % i).result(10)
                i += 1
                got += c.poll(0.05)
            while len(got) < i + 1 and time.monotonic() < deadline + 20:
                got += c.poll(0.5)
            assert sorted(r.value for r in got) == sorted([b"first"] + [b"v%d" % j for j in range(i)])
            # the connections were re-authenticated (a later session), not replaced
            for (i, node), (conn, first_at) in conns.items():
                assert cores[i].net.conns.get(node) is conn, node
                assert conn.state == "ready" and conn.reauth_at > first_at + 2.5, node


def test_e2e_broker_connection(tmp_path):
    from logbroker.client.connection import BrokerConnection, ClientError

    with sasl_broker(tmp_path) as b:
        bs = b.bootstrap_servers
        add_scram_users(bs)
        conf = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": JAAS_CAROL,
        }
        with BrokerConnection(bs, config=conf) as conn:
            assert conn.send(REQUESTS[3](topics=None)).brokers
        with pytest.raises(ClientError, match="SCRAM-SHA-512.*Authentication failed") as e:
            BrokerConnection(bs, config={**conf, "sasl.jaas.config": JAAS_CAROL.replace("carol-secret", "nope")})
        assert isinstance(e.value.__cause__, SaslAuthenticationError) and "nope" not in str(e.value)
