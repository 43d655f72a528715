"""The SCRAM control manager (Kafka's ScramControlManager, KIP-554): users' SCRAM
credentials as UserScramCredential and RemoveUserScramCredential records. The password
never reaches the broker: an upsertion carries the salted password, from which the stored
and server keys are computed here.

Pure (see control.py).
"""

from __future__ import annotations

from logbroker import scram
from logbroker.coord.metadata.control import ControllerResult
from logbroker.coord.metadata.metadata import MetadataImage, ScramCredential
from logbroker.coord.metadata.metadata_records import encode_record
from logbroker.protocol import ErrorCode

# (user, error, message) per user named, in the order of first mention
UserResult = tuple[str, ErrorCode, str | None]


def scram_error(
    image: MetadataImage, user: str, mechanism: str, iterations: int | None
) -> tuple[ErrorCode, str] | None:
    """Why this deletion (iterations None) or upsertion is refused, or None."""
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "a SCRAM credential needs a user name; it is empty"
    if mechanism not in scram.MECHANISM_TYPES:
        return (
            ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            f"user {user!r}: unknown SCRAM mechanism {mechanism!r} (SCRAM-SHA-256 or SCRAM-SHA-512)",
        )
    if iterations is None:
        if image.scram_credential(user, mechanism) is None:
            return ErrorCode.RESOURCE_NOT_FOUND, f"user {user!r} has no {mechanism} credential to delete"
        return None
    if not scram.MIN_ITERATIONS <= iterations <= scram.MAX_ITERATIONS:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"user {user!r} ({mechanism}): {iterations} iterations, must be between "
            f"{scram.MIN_ITERATIONS} and {scram.MAX_ITERATIONS}",
        )
    return None


class ScramControlManager:
    def alter(
        self,
        image: MetadataImage,
        deletions: list[tuple[str, str]],
        upsertions: list[tuple[str, str, int, bytes, bytes]],
    ) -> ControllerResult[list[UserResult]]:
        """AlterUserScramCredentials: delete (user, mechanism) credentials and upsert (user,
        mechanism, iterations, salt, salted password) ones. Kafka's rules, per user: a user
        named more than once in the request, in deletions or upsertions, is
        DUPLICATE_RESOURCE; then `scram_error`. A failed user changes nothing; the accepted
        ones are written together."""
        order = list(dict.fromkeys([d[0] for d in deletions] + [u[0] for u in upsertions]))
        errors: dict[str, tuple[ErrorCode, str]] = {}
        to_delete: dict[str, str] = {}  # user -> mechanism
        to_upsert: dict[str, tuple[str, int, bytes, bytes]] = {}  # user -> (mechanism, iterations, salt, salted)

        def named_before(user: str) -> bool:  # and records DUPLICATE_RESOURCE the second time
            if user in errors:
                return True
            if to_delete.pop(user, None) is not None or to_upsert.pop(user, None) is not None:
                errors[user] = (
                    ErrorCode.DUPLICATE_RESOURCE,
                    f"user {user!r} is named more than once in one request; a user's credentials "
                    "can be altered once per request",
                )
                return True
            return False

        for user, mechanism in deletions:
            if not named_before(user):
                error = scram_error(image, user, mechanism, None)
                if error is None:
                    to_delete[user] = mechanism
                else:
                    errors[user] = error
        for user, mechanism, iterations, salt, salted in upsertions:
            if not named_before(user):
                error = scram_error(image, user, mechanism, iterations)
                if error is None:
                    to_upsert[user] = (mechanism, iterations, bytes(salt), bytes(salted))
                else:
                    errors[user] = error
        records, lines = [], []
        for user, mechanism in to_delete.items():
            records.append(encode_record("RemoveUserScramCredential", name=user, mechanism=mechanism))
            lines.append((f"user {user}: deleted the {mechanism} credential", {}))
        for user, (mechanism, iterations, salt, salted) in to_upsert.items():
            credential = ScramCredential(
                mechanism, salt, scram.stored_key(mechanism, salted), scram.server_key(mechanism, salted), iterations
            )
            records.append(encode_record("UserScramCredential", name=user, mechanism=mechanism, **credential.to_json()))
            lines.append((f"user {user}: set the {mechanism} credential ({iterations} iterations)", {}))
        results = [(u, *errors[u]) if u in errors else (u, ErrorCode.NONE, None) for u in order]
        return ControllerResult(records, results, lines)
