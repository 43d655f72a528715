"""What an OAUTHBEARER login costs (issue 33): 100 connections opened one after another
against one broker (connect, ApiVersions, SaslHandshake, SaslAuthenticate), logging in with
PLAIN, with SCRAM-SHA-512, and with OAUTHBEARER carrying an RS256 JWT that the broker checks
against the identity provider's JWKS (tests/oidc_provider.py on loopback; the signature in
Rust with ring, the claims in Python). The token is fetched once and reused by the client,
as clients do, so the figure is the broker's side of a login; the JWKS is fetched at the
first token only. Also the validator alone, in-process: the time to check one token.

Run: python -m pytest benches/bench_oauthbearer.py --benchmark-only
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

import logbroker
from logbroker.client.connection import BrokerConnection

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from oidc_provider import OidcProvider  # noqa: E402

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";'
PLAIN = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "admin",
    "sasl.password": "admin-secret",
}
SCRAM = {
    "security.protocol": "SASL_PLAINTEXT",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "alice",
    "sasl.password": "alice-secret",
}
CONNECTIONS = 100


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with OidcProvider({"app": "app-secret"}) as idp:
        config = {
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
            "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
            "sasl.oauthbearer.expected.audience": "kafka",
        }
        with logbroker.Broker(
            data_dir=tmp_path_factory.mktemp("oauth") / "d", listener="SASL_PLAINTEXT", config=config
        ) as b:
            admin = AdminClient({"bootstrap.servers": b.bootstrap_servers, **PLAIN})
            up = UserScramCredentialUpsertion(
                "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"alice-secret"
            )
            for f in admin.alter_user_scram_credentials([up]).values():
                f.result(30)
            token = idp.token("app")
            oauth = {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER",
                "oauth.cb": lambda _c: (token, time.time() + 3000),
            }
            yield b, idp, {"PLAIN": PLAIN, "SCRAM-SHA-512": SCRAM, "OAUTHBEARER (RS256, JWKS)": oauth}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER (RS256, JWKS)"])
def test_login(benchmark, setup, mechanism):
    b, _idp, confs = setup
    conf = confs[mechanism]

    def run():
        for _ in range(CONNECTIONS):
            BrokerConnection(b.bootstrap_servers, config=conf).close()

    benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["mechanism"] = mechanism
    benchmark.extra_info["ms_per_login"] = benchmark.stats.stats.median * 1000 / CONNECTIONS


def test_validate_one_token(benchmark, setup):
    """The broker's validator alone (JWKS already fetched): parse, RS256 verify, claims."""
    import trio

    from logbroker.broker.jwks import JwksKeys
    from logbroker.common.oauthbearer import JwksValidator

    _b, idp, _confs = setup
    keys = JwksKeys(idp.jwks_url, 3_600_000, 100, 10_000)
    validator = JwksValidator(
        keys, expected_audience=["kafka"], expected_issuer="", sub_claim="sub", scope_claim="scope", skew_s=30
    )
    token = idp.token("app")

    async def many():
        for _ in range(1000):
            await validator.validate(token)

    trio.run(validator.validate, token)  # the JWKS fetch, outside the timing
    benchmark.pedantic(lambda: trio.run(many), rounds=5, iterations=1)
    benchmark.extra_info["us_per_token"] = benchmark.stats.stats.median * 1e6 / 1000
