"""The delegation token control manager (Kafka's DelegationTokenControlManager, KIP-48):
tokens as DelegationToken and RemoveDelegationToken records. Who may do what is checked by
the broker that took the client's request (broker/handlers/delegation_tokens.py); this
manager checks the token's state and computes its times, as Kafka does:

- create: max = issue + (the request's max lifetime if > 0, capped by
  `delegation.token.max.lifetime.ms`, else that key); expiry = min(issue +
  `delegation.token.expiry.time.ms`, max).
- renew: the token must exist and not have expired; expiry = min(now + (the period if >= 0,
  else `delegation.token.expiry.time.ms`), max).
- expire: the token must exist and not have expired; a negative period removes it now,
  else expiry = min(now + period, max).
- expire_due: every token whose expiry has passed goes (the controller's periodic sweep).

Pure (see control.py): times come in as `now_ms`.
"""

from __future__ import annotations

from logbroker.coord.metadata.control import ControllerError, ControllerResult
from logbroker.coord.metadata.metadata import DelegationToken, MetadataImage
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode


def _live(image: MetadataImage, token_id: str, now_ms: int) -> DelegationToken:
    token = image.delegation_tokens.get(token_id)
    if token is None:
        raise ControllerError(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, f"delegation token {token_id} does not exist")
    if token.expiry_ms < now_ms:
        raise ControllerError(
            ErrorCode.DELEGATION_TOKEN_EXPIRED,
            f"delegation token {token_id} expired at {token.expiry_ms} (now {now_ms})",
        )
    return token


class DelegationTokenControlManager:
    def __init__(self, max_lifetime_ms: int, expiry_time_ms: int) -> None:
        self.max_lifetime_ms = max_lifetime_ms
        self.expiry_time_ms = expiry_time_ms

    def create(
        self, token_id: str, owner: str, requester: str, renewers: list[str], max_lifetime_ms: int, now_ms: int
    ) -> ControllerResult[DelegationToken]:
        life = min(max_lifetime_ms, self.max_lifetime_ms) if max_lifetime_ms > 0 else self.max_lifetime_ms
        token = DelegationToken(
            token_id,
            owner,
            requester,
            tuple(renewers),
            now_ms,
            now_ms + life,
            min(now_ms + self.expiry_time_ms, now_ms + life),
        )
        return ControllerResult(
            [encode_record("DelegationToken", **token.to_json())],
            token,
            [
                (
                    f"delegation token {token_id}: created for {owner} (requested by {requester}), "
                    f"expires at {token.expiry_ms}, at most {token.max_ms}",
                    {},
                )
            ],
        )

    def renew(self, image: MetadataImage, token_id: str, period_ms: int, now_ms: int) -> ControllerResult[int]:
        token = _live(image, token_id, now_ms)
        expiry = min(now_ms + (period_ms if period_ms >= 0 else self.expiry_time_ms), token.max_ms)
        renewed = DelegationToken(
            token.token_id,
            token.owner,
            token.requester,
            token.renewers,
            token.issue_ms,
            token.max_ms,
            max(expiry, token.issue_ms),
        )
        return ControllerResult(
            [encode_record("DelegationToken", **renewed.to_json())],
            renewed.expiry_ms,
            [(f"delegation token {token_id}: renewed until {renewed.expiry_ms}", {})],
        )

    def expire(self, image: MetadataImage, token_id: str, period_ms: int, now_ms: int) -> ControllerResult[int]:
        token = _live(image, token_id, now_ms)
        if period_ms < 0:
            return ControllerResult(
                [encode_record("RemoveDelegationToken", token_id=token_id)],
                now_ms,
                [(f"delegation token {token_id}: expired now, removed", {})],
            )
        expiry = max(min(now_ms + period_ms, token.max_ms), token.issue_ms)
        changed = DelegationToken(
            token.token_id, token.owner, token.requester, token.renewers, token.issue_ms, token.max_ms, expiry
        )
        return ControllerResult(
            [encode_record("DelegationToken", **changed.to_json())],
            expiry,
            [(f"delegation token {token_id}: expires at {expiry}", {})],
        )

    def expire_due(self, image: MetadataImage, now_ms: int) -> ControllerResult[list[str]]:
        due = sorted(i for i, t in image.delegation_tokens.items() if t.expiry_ms < now_ms)
        return ControllerResult(
            [encode_record("RemoveDelegationToken", token_id=i) for i in due],
            due,
            [(f"delegation token {i}: expired, removed", {}) for i in due],
        )
