"""Kafka error codes and the codec's own exception.

`ErrorCode` is the table of `org.apache.kafka.common.protocol.Errors` as of Apache
Kafka 4.1.1 (codes -1 and 0..133), with each code's `retriable` flag and default
`message`: generated into `error_codes.py` by tools/gen_errors.py from the vendored table
`specs/errors/errors.json` (the Rust consts in rust/src/protocol/error_codes.rs come from
the same table). The numbers are part of the wire protocol and never change; the names
are Kafka's.

`ProtocolError` is the one exception the codec raises for input it cannot decode (or a
message it cannot encode at the requested version). It names the message, version,
field and byte position, and carries the `ErrorCode` a broker should answer with
(`INVALID_REQUEST` for malformed bytes, `UNSUPPORTED_VERSION` for a version outside the
spec's range).
"""

from __future__ import annotations

from logbroker.protocol.error_codes import ErrorCode

__all__ = ["ErrorCode", "ProtocolError"]


class ProtocolError(Exception):
    """Malformed or truncated input, or a message the requested version cannot carry.

    Attributes: `api` (message name, e.g. "ProduceRequest", or None), `version`,
    `field` (dotted spec path such as "TopicProduceData.Records", or None), `position`
    (byte offset into the buffer given to the decoder, or None), `reason`, and
    `error_code` (the `ErrorCode` to answer with).
    """

    def __init__(
        self,
        reason: str,
        *,
        api: str | None = None,
        version: int | None = None,
        field: str | None = None,
        position: int | None = None,
        error_code: ErrorCode = ErrorCode.INVALID_REQUEST,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.api = api
        self.version = version
        self.field = field
        self.position = position
        self.error_code = error_code

    def _fill(self, api: str, version: int) -> None:
        """Set the message name and version if an inner decoder did not know them."""
        if self.api is None:
            self.api = api
        if self.version is None:
            self.version = version

    def __str__(self) -> str:
        parts = []
        if self.api is not None:
            parts.append(self.api if self.version is None else f"{self.api} v{self.version}")
        if self.field is not None:
            parts.append(f"field {self.field}")
        if self.position is not None:
            parts.append(f"at byte {self.position}")
        where = ", ".join(parts)
        return f"{where}: {self.reason}" if where else self.reason

    def __reduce__(self):  # keep keyword attributes through pickling
        return (_rebuild, (self.reason, self.api, self.version, self.field, self.position, int(self.error_code)))


def _rebuild(reason, api, version, field, position, code):
    return ProtocolError(reason, api=api, version=version, field=field, position=position, error_code=ErrorCode(code))
