"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): the SCRAM
credentials kept in the metadata log (KIP-554; coord/metadata/metadata.py `ScramCredential`).

Describe answers from this broker's metadata image: for each user its mechanisms and
iteration counts, never a salt or a key (as Kafka). No users (null or empty) means every
user with a credential; a named user without one is RESOURCE_NOT_FOUND, a user named twice
DUPLICATE_RESOURCE. Alter goes to the active controller (`Controller.alter_scram_credentials`,
which validates and turns each salted password into stored and server keys) and answers
once per user named. Describe needs DESCRIBE on the cluster, Alter ALTER on it, else
CLUSTER_AUTHORIZATION_FAILED, as Kafka.
"""

from __future__ import annotations

import logging
from collections import Counter

from logbroker.common.acl import CLUSTER_NAME
from logbroker.common.acl import AclOperation as Op
from logbroker.common.acl import ResourceType as Res
from logbroker.coord.metadata.control import ControllerError
from logbroker.log_format import fields
from logbroker.protocol import RESPONSES, ErrorCode
from logbroker.scram import MECHANISM_NAMES, MECHANISM_TYPES

log = logging.getLogger("logbroker.admin")

DescribeResponse = RESPONSES[50]
AlterResponse = RESPONSES[51]


def _mechanism_name(code: int) -> str:
    """A wire mechanism type as the controller names it; an unknown type keeps its number so
    the controller's refusal (UNSUPPORTED_SASL_MECHANISM) can say which."""
    return MECHANISM_NAMES.get(code, f"type {code}")


async def describe(ctx, request):
    if not ctx.authorize(Op.DESCRIBE, Res.CLUSTER, CLUSTER_NAME):  # Kafka: top-level and on each user named
        code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        return DescribeResponse(
            throttle_time_ms=0,
            error_code=code,
            error_message=message,
            results=[
                DescribeResponse.DescribeUserScramCredentialsResult(
                    user=u.name, error_code=code, error_message=message, credential_infos=[]
                )
                for u in request.users or []
            ],
        )
    image = ctx.controller.image
    named = Counter(u.name for u in request.users or [])
    if not named:
        named = Counter(sorted(image.scram_credentials))
    results = []
    for name, times in named.items():
        if times > 1:
            results.append(
                DescribeResponse.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=ErrorCode.DUPLICATE_RESOURCE,
                    credential_infos=[],
                    error_message=f"user {name!r} is named more than once; describe each user once per request",
                )
            )
            continue
        creds = image.scram_credentials.get(name, {})
        if not creds:
            results.append(
                DescribeResponse.DescribeUserScramCredentialsResult(
                    user=name,
                    error_code=ErrorCode.RESOURCE_NOT_FOUND,
                    credential_infos=[],
                    error_message=f"user {name!r} has no SCRAM credential",
                )
            )
            continue
        results.append(
            DescribeResponse.DescribeUserScramCredentialsResult(
                user=name,
                error_code=ErrorCode.NONE,
                error_message=None,
                credential_infos=[
                    DescribeResponse.CredentialInfo(mechanism=MECHANISM_TYPES[m], iterations=c.iterations)
                    for m, c in sorted(creds.items())
                ],
            )
        )
    return DescribeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)


async def alter(ctx, request):
    if not ctx.authorize(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):  # Kafka: every user named, once
        users = sorted({d.name for d in request.deletions} | {u.name for u in request.upsertions})
        return AlterResponse(
            throttle_time_ms=0,
            results=[
                AlterResponse.AlterUserScramCredentialsResult(
                    user=user,
                    error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message="Cluster authorization failed.",
                )
                for user in users
            ],
        )
    deletions = [(d.name, _mechanism_name(d.mechanism)) for d in request.deletions]
    upsertions = [
        (u.name, _mechanism_name(u.mechanism), u.iterations, u.salt, u.salted_password) for u in request.upsertions
    ]
    try:
        results = await ctx.controller.alter_scram_credentials(deletions, upsertions)
    except ControllerError as e:  # no controller reached (or this one stopped leading): every user fails alike
        users = dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions])
        results = [(user, e.code, e.message) for user in users]
    for user, code, message in results:  # the audit log: which mechanisms, never a salt or a password
        ctx.audit_change(
            "alter_scram_credentials",
            "USER",
            user,
            code,
            message,
            upserted=[m for u, m, *_rest in upsertions if u == user],
            deleted=[m for u, m in deletions if u == user],
        )
        if code != ErrorCode.NONE:
            log.info(
                "altering the SCRAM credentials of user %s from %s refused (%s): %s",
                user,
                ctx.peer,
                ErrorCode(code).name,
                message,
                extra=fields(peer=ctx.peer),
            )
    return AlterResponse(
        throttle_time_ms=0,
        results=[
            AlterResponse.AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)
            for user, code, message in results
        ],
    )


ENTRIES = [
    (50, 0, 0, describe),
    (51, 0, 0, alter),
]
