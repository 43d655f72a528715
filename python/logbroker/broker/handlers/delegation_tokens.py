"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41): delegation tokens (KIP-48, KIP-373), kept in the metadata log
by the active controller (coord/metadata/delegation_token_control.py), their HMACs derived from
`delegation.token.secret.key` (common/delegation_tokens.py).

Kafka's rules, checked here on the broker that took the client's request:
- no `delegation.token.secret.key`: DELEGATION_TOKEN_AUTH_DISABLED;
- a connection that may not ask for tokens: DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. Tokens are
  handed out to principals a listener authenticated: SASL connections, and SSL ones with a
  client certificate; never on PLAINTEXT, never to an anonymous principal, and never on a
  connection that itself logged in with a token (a token cannot mint tokens);
- create: the owner is the requester, unless the request names another (v3), which needs
  CREATE_TOKENS on that USER resource (else DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers
  are principals of type User;
- renew and expire name the token by its HMAC; only its owner and its renewers may
  (DELEGATION_TOKEN_OWNER_MISMATCH); an unknown HMAC is DELEGATION_TOKEN_NOT_FOUND, an
  expired token DELEGATION_TOKEN_EXPIRED;
- describe shows, of the tokens of the owners named (null or none named: of every owner, as
  `kafka-delegation-tokens --describe` without --owner-principal expects), those whose
  owner, requester or renewer the principal is, and those of owners it has DESCRIBE_TOKENS
  on (USER resource).

On the CONTROLLER listener (a broker forwarding) the broker has already checked all that:
create takes the owner it names (the requester is recorded as the owner: the forwarded
request does not carry who asked), renew and expire find the token by its HMAC.
"""

from __future__ import annotations

import logging

from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.common.delegation_tokens import token_hmac, token_id_of_hmac
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_channel import serving_controller_listener
from logbroker.coord.metadata.metadata import DelegationToken
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode

log = logging.getLogger("logbroker.admin")

CreateResponse, RenewResponse, ExpireResponse, DescribeResponse = (RESPONSES[k] for k in (38, 39, 40, 41))
ANONYMOUS = "User:ANONYMOUS"


def _secret(ctx) -> str:
    return ctx.broker.config.get_str("delegation.token.secret.key")


def _on_controller_listener(ctx) -> bool:
    """A request a broker forwarded to this controller (coord/metadata/controller_channel.py)."""
    return serving_controller_listener.get()


def _refusal(ctx) -> tuple[ErrorCode, str] | None:
    """Why this connection may not use delegation tokens, or None (Kafka's order: the
    connection first, then whether tokens are on)."""
    if not _on_controller_listener(ctx):
        protocol = ctx.broker.config.security_protocol(ctx.listener)
        token_login = bool(ctx.connection and ctx.connection.get("token_authenticated"))
        if protocol == "PLAINTEXT" or ctx.principal in (None, ANONYMOUS) or token_login:
            why = (
                "a connection that logged in with a delegation token"
                if token_login
                else f"an unauthenticated {protocol} connection ({ctx.principal})"
            )
            return ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, (
                f"delegation token requests are not allowed on {why}; use a SASL or client-certificate login"
            )
    if not _secret(ctx):
        return ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, (
            "delegation tokens are off on this cluster: set delegation.token.secret.key (the same on every node)"
        )
    return None


def _principal(kind: str | None, name: str | None) -> str:
    return f"{kind or 'User'}:{name}"


async def create(ctx, request):
    def answer(code: ErrorCode, message: str = "") -> CreateResponse:
        if code != ErrorCode.NONE:
            log.info(
                "delegation token for %s from %s refused (%s): %s",
                ctx.principal,
                ctx.peer,
                code.name,
                message,
                extra=fields(peer=ctx.peer),
            )
        kind, _, name = (ctx.principal or ANONYMOUS).partition(":")
        return CreateResponse(
            error_code=code,
            principal_type=kind,
            principal_name=name,
            **_requester(ctx, kind, name),
            issue_timestamp_ms=-1,
            expiry_timestamp_ms=-1,
            max_timestamp_ms=-1,
            token_id="",
            hmac=b"",
            throttle_time_ms=0,
        )

    refused = _refusal(ctx)
    if refused is not None:
        return answer(*refused)
    owner_name = getattr(request, "owner_principal_name", None) if ctx.version >= 3 else None
    if owner_name:
        owner = _principal(request.owner_principal_type, owner_name)
    elif _on_controller_listener(ctx):
        return answer(ErrorCode.INVALID_REQUEST, "a forwarded CreateDelegationToken names its owner")
    else:
        owner = ctx.principal
    renewers = [_principal(r.principal_type, r.principal_name) for r in request.renewers]
    for p in [owner, *renewers]:
        if not p.startswith("User:") or p == "User:":
            return answer(
                ErrorCode.INVALID_PRINCIPAL_TYPE, f"principal {p!r}: token owners and renewers are User principals"
            )
    if (
        owner != ctx.principal
        and not _on_controller_listener(ctx)
        and not ctx.authorize(Op.CREATE_TOKENS, Res.USER, owner.partition(":")[2])
    ):
        return answer(
            ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
            f"{ctx.principal} may not create tokens for {owner} (CREATE_TOKENS on the user)",
        )
    requester = owner if _on_controller_listener(ctx) else ctx.principal
    try:
        token = await ctx.controller.create_delegation_token(owner, requester, renewers, request.max_lifetime_ms)
    except ControllerError as e:
        ctx.audit_change("create_delegation_token", "USER", owner, e.code, e.message)
        return answer(e.code, e.message)
    ctx.audit_change(
        "create_delegation_token",
        "DELEGATION_TOKEN",
        token.token_id,
        owner=token.owner,
        renewers=list(token.renewers),
        expiry_ms=token.expiry_ms,
        max_ms=token.max_ms,
    )
    kind, _, name = token.owner.partition(":")
    rkind, _, rname = token.requester.partition(":")
    return CreateResponse(
        error_code=ErrorCode.NONE,
        principal_type=kind,
        principal_name=name,
        **_requester(ctx, rkind, rname),
        issue_timestamp_ms=token.issue_ms,
        expiry_timestamp_ms=token.expiry_ms,
        max_timestamp_ms=token.max_ms,
        token_id=token.token_id,
        hmac=token_hmac(_secret(ctx), token.token_id),
        throttle_time_ms=0,
    )


def _requester(ctx, kind: str, name: str) -> dict[str, str]:
    """The requester fields, which responses carry from v3 (KIP-373)."""
    return {"token_requester_principal_type": kind, "token_requester_principal_name": name} if ctx.version >= 3 else {}


def _may_change(ctx, token: DelegationToken) -> bool:
    return _on_controller_listener(ctx) or ctx.principal == token.owner or ctx.principal in token.renewers


async def _renew_or_expire(ctx, request, response, period_ms: int, renew: bool):
    what = "renewing" if renew else "expiring"

    def answer(code: ErrorCode, message: str, expiry: int = -1):
        if code != ErrorCode.NONE:
            log.info(
                "%s a delegation token for %s from %s refused (%s): %s",
                what,
                ctx.principal,
                ctx.peer,
                code.name,
                message,
                extra=fields(peer=ctx.peer),
            )
        return response(error_code=code, expiry_timestamp_ms=expiry, throttle_time_ms=0)

    refused = _refusal(ctx)
    if refused is not None:
        return answer(*refused)
    image = ctx.controller.image
    token_id = token_id_of_hmac(_secret(ctx), image.delegation_tokens, bytes(request.hmac))
    if token_id is None:
        return answer(ErrorCode.DELEGATION_TOKEN_NOT_FOUND, "no delegation token has that HMAC")
    token = image.delegation_tokens[token_id]
    if not _may_change(ctx, token):
        return answer(
            ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH,
            f"{ctx.principal} is neither the owner ({token.owner}) nor a renewer of token {token_id}",
        )
    try:
        if renew:
            expiry = await ctx.controller.renew_delegation_token(token_id, bytes(request.hmac), period_ms)
        else:
            expiry = await ctx.controller.expire_delegation_token(token_id, bytes(request.hmac), period_ms)
    except ControllerError as e:
        ctx.audit_change(
            f"{'renew' if renew else 'expire'}_delegation_token", "DELEGATION_TOKEN", token_id, e.code, e.message
        )
        return answer(e.code, e.message)
    ctx.audit_change(
        f"{'renew' if renew else 'expire'}_delegation_token",
        "DELEGATION_TOKEN",
        token_id,
        owner=token.owner,
        expiry_ms=expiry,
    )
    return answer(ErrorCode.NONE, "", expiry)


async def renew(ctx, request):
    return await _renew_or_expire(ctx, request, RenewResponse, request.renew_period_ms, True)


async def expire(ctx, request):
    return await _renew_or_expire(ctx, request, ExpireResponse, request.expiry_time_period_ms, False)


async def describe(ctx, request):
    refused = _refusal(ctx)
    if refused is not None:
        return DescribeResponse(error_code=refused[0], tokens=[], throttle_time_ms=0)
    owners = {_principal(o.principal_type, o.principal_name) for o in request.owners or []} or None
    secret = _secret(ctx)
    described = []
    for token_id, t in sorted(ctx.controller.image.delegation_tokens.items()):
        if owners is not None and t.owner not in owners:
            continue
        mine = ctx.principal in (t.owner, t.requester) or ctx.principal in t.renewers
        if not mine and not ctx.authorize(Op.DESCRIBE_TOKENS, Res.USER, t.owner.partition(":")[2]):
            continue
        kind, _, name = t.owner.partition(":")
        rkind, _, rname = t.requester.partition(":")
        described.append(
            DescribeResponse.DescribedDelegationToken(
                principal_type=kind,
                principal_name=name,
                **_requester(ctx, rkind, rname),
                issue_timestamp=t.issue_ms,
                expiry_timestamp=t.expiry_ms,
                max_timestamp=t.max_ms,
                token_id=token_id,
                hmac=token_hmac(secret, token_id),
                renewers=[
                    DescribeResponse.DescribedDelegationTokenRenewer(
                        principal_type=r.partition(":")[0], principal_name=r.partition(":")[2]
                    )
                    for r in t.renewers
                ],
            )
        )
    return DescribeResponse(error_code=ErrorCode.NONE, tokens=described, throttle_time_ms=0)


ENTRIES = [
    (38, 1, 3, create),
    (39, 1, 2, renew),
    (40, 1, 2, expire),
    (41, 1, 3, describe),
]
