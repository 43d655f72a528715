"""Console logins (console/sessions.py) on a broker whose primary listener is SASL_PLAINTEXT,
with an authorizer: raw HTTP requests (no cookie, a wrong password, a missing or forged CSRF
token, a request from another origin, a session replayed after logout, the cookie's flags),
each user's requests made as that user so the broker's ACLs decide what the console shows
and does, and the page in headless Chromium (log in, a denied action, log out)."""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import urlparse

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
from conftest import wait_until
from test_console import browser, by_id, wait_text  # noqa: F401 - the browser fixture

import logbroker

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_carol="carol-secret";'
)
CONFIG = {
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin",
    "console.listen": "127.0.0.1:0",
}


class Http:
    """One client of the console: keeps the cookie it is given, as a browser does."""

    def __init__(self, base: str) -> None:
        u = urlparse(base)
        self.host, self.port = u.hostname, u.port
        self.cookie: str | None = None
        self.csrf: str | None = None
        self.last_headers: http.client.HTTPMessage | None = None

    def call(
        self, method: str, path: str, body: object = None, headers: dict[str, str] | None = None, csrf: bool = True
    ) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        h = {"Content-Type": "application/json", **(headers or {})}
        if self.cookie:
            h["Cookie"] = self.cookie
        if csrf and self.csrf and method != "GET":
            h.setdefault("X-CSRF-Token", self.csrf)
        try:
            conn.request(method, path, None if body is None else json.dumps(body), h)
            r = conn.getresponse()
            self.last_headers = r.headers
            doc = json.loads(r.read())
            set_cookie = r.headers.get("Set-Cookie")
            if set_cookie:
                self.cookie = set_cookie.split(";")[0]
            return r.status, doc
        finally:
            conn.close()

    def login(self, user: str, password: str) -> dict:
        status, doc = self.call("POST", "/api/login", {"username": user, "password": password})
        assert status == 200, doc
        self.csrf = doc["csrf_token"]
        return doc


def setup_users(bootstrap: str) -> None:
    """alice: a SCRAM user who may describe and read `orders` only; carol: a PLAIN user with no ACLs."""
    admin = AdminClient(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin-secret",
        }
    )
    for fut in admin.alter_user_scram_credentials(
        [
            UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"alice-secret"
            )
        ]
    ).values():
        fut.result(30)
    bindings = [
        AclBinding(
            ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", op, AclPermissionType.ALLOW
        )
        for op in (AclOperation.DESCRIBE, AclOperation.READ)
    ]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def test_console_login_sessions_csrf_and_acls(tmp_path):
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=CONFIG) as b:
        setup_users(b.bootstrap_servers)
        anon = Http(b.console_url)
        # the page loads (it holds the login form); no route answers without a session
        conn = http.client.HTTPConnection(anon.host, anon.port, timeout=10)
        conn.request("GET", "/")
        assert conn.getresponse().status == 200
        conn.close()
        for method, path in [
            ("GET", "/api/topics"),
            ("GET", "/api/cluster"),
            ("GET", "/api/session"),
            ("GET", "/api/groups"),
            ("GET", "/api/throughput"),
            ("POST", "/api/topics"),
            ("DELETE", "/api/topics/orders"),
            ("GET", "/api/topics/orders/messages"),
        ]:
            status, doc = anon.call(method, path, {"name": "x"} if method == "POST" else None)
            assert status == 401 and "log in" in doc["error"], (method, path, status, doc)
        # wrong passwords and unknown users: 401, saying neither which
        for user, password in [
            ("alice", "wrong"),
            ("nobody", "alice-secret"),
            ("admin", ""),
            ("carol", "alice-secret"),
        ]:
            started = time.monotonic()
            status, doc = anon.call("POST", "/api/login", {"username": user, "password": password})
            assert status == 401 and doc["error"] == "login refused: unknown user or wrong password"
            assert time.monotonic() - started >= 0.9  # a refused login is answered late
        assert anon.call("POST", "/api/login", {"username": 1})[0] == 400
        assert anon.call("GET", "/api/login")[0] == 405

        # the admin (a PLAIN user of the listener, a super user) creates two topics
        admin = Http(b.console_url)
        doc = admin.login("admin", "admin-secret")
        assert (doc["user"], doc["mechanism"]) == ("admin", "PLAIN")
        cookie = admin.last_headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert "Secure" not in cookie  # plain http: a browser would not send a Secure cookie back
        for name in ("orders", "secret"):
            status, doc = admin.call("POST", "/api/topics", {"name": name, "partitions": 1, "replication_factor": 1})
            assert status == 201, doc
        with logbroker.Producer(
            b.bootstrap_servers,
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "admin",
                "sasl.password": "admin-secret",
            },
        ) as p:
            for i in range(5):
                p.send("orders", b"order-%d" % i, partition=0)
            p.send("secret", b"hidden", partition=0)

        # alice (SCRAM-SHA-256) sees and reads only what her ACLs allow
        alice = Http(b.console_url)
        doc = alice.login("alice", "alice-secret")
        assert (doc["user"], doc["mechanism"]) == ("alice", "SCRAM-SHA-256")
        assert alice.call("GET", "/api/session")[1]["user"] == "alice"
        status, topics = alice.call("GET", "/api/topics")
        assert status == 200 and [t["topic"] for t in topics] == ["orders"]
        status, doc = alice.call("GET", "/api/topics/orders/messages?partition=0&offset=0&limit=10")
        assert status == 200 and [r["value"] for r in doc["records"]] == [f"order-{i}" for i in range(5)]
        status, doc = alice.call("GET", "/api/topics/secret/messages?partition=0&offset=0")
        assert status in (403, 404) and "secret" in doc["error"], doc
        status, doc = alice.call("GET", "/api/topics")  # admin's topics are unchanged for admin
        assert sorted(t["topic"] for t in admin.call("GET", "/api/topics")[1]) == ["orders", "secret"]

        # CSRF: a change without the token, or with a forged one, is refused before Kafka is asked
        status, doc = alice.call("POST", "/api/topics", {"name": "mine"}, csrf=False)
        assert status == 403 and "CSRF" in doc["error"] and "kafka_error" not in doc
        status, doc = alice.call("DELETE", "/api/topics/orders", headers={"X-CSRF-Token": "forged" + alice.csrf[6:]})
        assert status == 403 and "CSRF" in doc["error"]
        status, doc = admin.call("DELETE", "/api/topics/orders", headers={"X-CSRF-Token": alice.csrf})
        assert status == 403 and "CSRF" in doc["error"]  # another session's token
        status, doc = alice.call("POST", "/api/topics", {"name": "mine"}, headers={"Origin": "http://evil.example"})
        assert status == 403 and "another origin" in doc["error"]
        # with the token, the change reaches the broker, which refuses alice
        status, doc = alice.call("POST", "/api/topics", {"name": "mine", "partitions": 1, "replication_factor": 1})
        assert status == 403 and doc["kafka_error"] in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED")
        status, doc = alice.call("DELETE", "/api/topics/orders")
        assert status == 403 and doc["kafka_error"] == "TOPIC_AUTHORIZATION_FAILED"
        assert sorted(t["topic"] for t in admin.call("GET", "/api/topics")[1]) == ["orders", "secret"]

        # throughput: sampled as the node's own user, each user shown only their topics
        wait_until(
            lambda: "secret" in admin.call("GET", "/api/throughput")[1]["totals"],
            timeout=30,
            what="the throughput sampler's totals",
        )
        assert list(alice.call("GET", "/api/throughput")[1]["totals"]) == ["orders"]

        # logout: the session is forgotten; its cookie replayed is 401, the other session lives on
        replay = alice.cookie
        status, doc = alice.call("POST", "/api/logout")
        assert status == 200 and "Max-Age=0" in alice.last_headers["Set-Cookie"]
        thief = Http(b.console_url)
        thief.cookie, thief.csrf = replay, alice.csrf
        for method, path in [("GET", "/api/topics"), ("POST", "/api/logout"), ("DELETE", "/api/topics/orders")]:
            status, doc = thief.call(method, path)
            assert status == 401, (method, path, doc)
        assert admin.call("GET", "/api/topics")[0] == 200
        # a made-up session id is no better than none
        thief.cookie = "logbroker_console=" + "A" * 43
        assert thief.call("GET", "/api/topics")[0] == 401


def test_console_login_page_in_chromium(tmp_path, browser):  # noqa: F811 - the fixture
    with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=CONFIG) as b:
        setup_users(b.bootstrap_servers)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())
        page.goto(b.console_url)
        by_id(page, "login-form").wait_for(state="visible", timeout=30_000)
        assert by_id(page, "page-cluster").is_hidden()

        page.fill('[data-testid="login-user"]', "alice")
        page.fill('[data-testid="login-password"]', "wrong")
        page.click('[data-testid="login-submit"]')
        wait_text(page, "notice", "login refused: unknown user or wrong password")
        page.fill('[data-testid="login-password"]', "alice-secret")
        page.click('[data-testid="login-submit"]')
        wait_text(page, "who", "logged in as alice")
        wait_text(page, "broker-status-1", "online")

        # a denied action: alice may not create topics; the broker's refusal is shown
        page.click('[data-testid="tab-topics"]')
        page.fill('[data-testid="create-topic-name"]', "alices")
        page.fill('[data-testid="create-topic-partitions"]', "1")
        page.fill('[data-testid="create-topic-rf"]', "1")
        page.click('[data-testid="create-topic-submit"]')
        wait_text(
            page,
            "notice",
            lambda t: "uthorization" in t or "not authorized" in t.lower() or "denied" in t.lower(),
            what="the refusal of alice's create",
        )
        cookies = page.context.cookies()
        [cookie] = [c for c in cookies if c["name"] == "logbroker_console"]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"

        # log out: the login form again, and a reload does not get past it
        page.click('[data-testid="logout"]')
        by_id(page, "login-form").wait_for(state="visible", timeout=30_000)
        assert by_id(page, "who").is_hidden()
        page.reload()
        by_id(page, "login-form").wait_for(state="visible", timeout=30_000)
        assert by_id(page, "page-topics").is_hidden()
        # the page's own requests now answer 401
        status = page.evaluate("fetch('/api/topics').then(r => r.status)")
        assert status == 401
        assert errors == []


def test_console_login_with_an_oauth_token(tmp_path):
    """A broker that takes OAUTHBEARER: an access token from the identity provider logs in to
    the console (checked by the broker's validator against the JWKS), the console acts as the
    token's subject under the ACLs, and the session ends when the token expires."""
    from oidc_provider import OidcProvider, SigningKey

    with OidcProvider({}) as idp:
        config = {
            **CONFIG,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
            "sasl.oauthbearer.expected.audience": "kafka",
            "sasl.oauthbearer.clock.skew.seconds": "0",
        }
        with logbroker.Broker(data_dir=tmp_path / "d", listener="SASL_PLAINTEXT", config=config) as b:
            setup_users(b.bootstrap_servers)  # alice may describe and read `orders`
            admin = Http(b.console_url)
            admin.login("admin", "admin-secret")
            for name in ("orders", "secret"):
                assert (
                    admin.call("POST", "/api/topics", {"name": name, "partitions": 1, "replication_factor": 1})[0]
                    == 201
                )

            alice = Http(b.console_url)
            status, doc = alice.call("POST", "/api/login", {"token": idp.token("alice")})
            assert status == 200 and (doc["user"], doc["mechanism"]) == ("alice", "OAUTHBEARER"), doc
            alice.csrf = doc["csrf_token"]
            assert [t["topic"] for t in alice.call("GET", "/api/topics")[1]] == ["orders"]
            status, doc = alice.call("DELETE", "/api/topics/orders")
            assert status == 403 and doc["kafka_error"] == "TOPIC_AUTHORIZATION_FAILED"

            for bad in (idp.token("alice", key=SigningKey("key-1")), idp.token("alice", aud="other"), "x.y.z"):
                status, doc = Http(b.console_url).call("POST", "/api/login", {"token": bad})
                assert status == 401 and doc["error"] == "login refused: the token is not valid here"

            short = Http(b.console_url)
            now = int(time.time())
            status, doc = short.call("POST", "/api/login", {"token": idp.token("alice", exp=now + 3)})
            assert status == 200
            assert short.call("GET", "/api/topics")[0] == 200
            time.sleep(3.5)
            status, doc = short.call("GET", "/api/topics")
            assert status == 401 and "expired" in doc["error"]
