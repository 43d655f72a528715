"""How the Spark data source's connections log in: the `kafka.`-prefixed client options
(as with Spark's own Kafka source), and delegation tokens so executors carry no password.

Options (the data source's and the sink's; keys as logbroker's client takes them, after
`kafka.`): `kafka.security.protocol`, `kafka.sasl.mechanism`, `kafka.sasl.username`,
`kafka.sasl.password`, `kafka.sasl.jaas.config`, `kafka.sasl.oauthbearer.*`,
`kafka.ssl.truststore.location`, `kafka.ssl.keystore.location`, ... .

`delegationToken=true` (KIP-48): on the driver, when the reader or writer is made, the
data source logs in with those options and creates a delegation token owned by that user
(`delegationToken.maxLifetimeMs`, default the broker's max); what Spark ships to the
executors then holds only the token (SCRAM with `tokenauth=true`: its id and HMAC), never the
user's password or JAAS text. The executors act as the token's owner, under the owner's
ACLs. The token lives as the broker says (`delegation.token.expiry.time.ms`, a day by
default): a batch reader and a batch or streaming writer use one token; a streaming reader
creates a new one on the driver when 80% of the current one's life has passed (its
micro-batches' tasks carry the newest).
"""

from __future__ import annotations

import base64
import time

from logbroker.client.connection import BrokerConnection, ClientError
from logbroker.protocol import REQUESTS, ErrorCode

SECURITY_PREFIXES = ("security.protocol", "sasl.", "ssl.")
TOKEN_OPTIONS = ("delegationtoken", "delegationtoken.maxlifetimems")
REFRESH_AT = 0.8


class TokenError(Exception):
    """No delegation token could be had, naming the broker and the error."""


def client_settings(options: dict) -> dict[str, str]:
    """The client's security settings from the (lower-cased) data source options."""
    out = {}
    for k, v in options.items():
        key = k[len("kafka.") :] if k.startswith("kafka.") else None
        if key is not None and key.startswith(SECURITY_PREFIXES):
            out[key] = str(v)
    return out


def wants_token(options: dict) -> bool:
    return str(options.get("delegationtoken", "false")).lower() == "true"


class TokenLogin:
    """The executors' settings when they log in with a delegation token: made on the driver
    (`refresh`), shipped as plain data (`settings`, `expires_ms`)."""

    def __init__(self, bootstrap: str, user_settings: dict[str, str], max_lifetime_ms: int = -1) -> None:
        self._bootstrap = bootstrap.split(",")[0].strip()
        self._user = dict(user_settings)  # the driver's; dropped before pickling (__getstate__)
        self.max_lifetime_ms = max_lifetime_ms
        self.settings: dict[str, str] = {}
        self.issued_ms = 0
        self.expires_ms = 0
        self.token_id = ""
        self.refresh()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_user"] = None  # the executors get the token, not the password
        return state

    def due(self, now_ms: int | None = None) -> bool:
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        return now_ms >= self.issued_ms + (self.expires_ms - self.issued_ms) * REFRESH_AT

    def refresh(self) -> None:
        """A new token (driver only)."""
        if self._user is None:
            raise TokenError("a delegation token is made on the driver, with the user's own settings")
        try:
            with BrokerConnection(self._bootstrap, client_id="logbroker-spark-token", config=self._user) as c:
                req = REQUESTS[38]
                r = c._roundtrip(38, min(3, c.version_for(38)), req(renewers=[], max_lifetime_ms=self.max_lifetime_ms))
        except ClientError as e:
            raise TokenError(f"creating a delegation token at {self._bootstrap}: {e}") from None
        if r.error_code != ErrorCode.NONE:
            raise TokenError(
                f"creating a delegation token at {self._bootstrap} as "
                f"{self._user.get('sasl.username') or 'the configured user'}: "
                f"{ErrorCode(r.error_code).name}"
            )
        mechanism = self._user.get("sasl.mechanism", "").upper()
        mechanism = mechanism if mechanism.startswith("SCRAM-") else "SCRAM-SHA-512"
        hmac_b64 = base64.b64encode(bytes(r.hmac)).decode()
        keep = {k: v for k, v in self._user.items() if k.startswith("ssl.")}
        self.settings = {
            **keep,
            "security.protocol": self._user.get("security.protocol", "SASL_PLAINTEXT"),
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{r.token_id}" password="{hmac_b64}" tokenauth="true";',
        }
        self.token_id = r.token_id
        self.issued_ms, self.expires_ms = r.issue_timestamp_ms, r.expiry_timestamp_ms


def connection_settings(options: dict, bootstrap: str) -> tuple[dict[str, str], TokenLogin | None]:
    """(the settings the connections use, the token login when delegationToken=true)."""
    settings = client_settings(options)
    if not wants_token(options):
        return settings, None
    life = int(options.get("delegationtoken.maxlifetimems", -1))
    login = TokenLogin(bootstrap, settings, life)
    return login.settings, login
