"""The REST API, Confluent Schema Registry's (what its clients and serializers call):

    GET    /schemas/types                                   the schema types served
    GET    /schemas/ids/{id}[?subject=]                     {"schema", "schemaType"?, "references"?}
    GET    /schemas/ids/{id}/schema                         the schema text
    GET    /schemas/ids/{id}/subjects, /versions            where the id is registered
    GET    /subjects[?deleted=true]                         subject names
    GET    /subjects/{s}/versions[?deleted=true]            version numbers
    GET    /subjects/{s}/versions/{v|latest}[/schema]       one version (or its text)
    GET    /subjects/{s}/versions/{v}/referencedby          ids of schemas referencing it
    POST   /subjects/{s}/versions                           register: {"id", "version", ...}
    POST   /subjects/{s}                                    look up a schema under a subject
    DELETE /subjects/{s}[?permanent=true]                   soft (then hard) delete: the versions
    DELETE /subjects/{s}/versions/{v}[?permanent=true]      one version
    POST   /compatibility/subjects/{s}/versions[/{v}]       {"is_compatible", "messages"?}
    GET|PUT /config, GET|PUT|DELETE /config/{s}             compatibility levels
    GET|PUT /mode, GET|PUT|DELETE /mode/{s}                 READWRITE, READONLY, IMPORT

Errors are Confluent's: HTTP status and {"error_code": 40401, "message": "..."} (40401
subject, 40402 version, 40403 schema not found; 40404/40406 soft-deleted already; 40405/40407
not soft-deleted first; 40408/40409 no subject config/mode; 409 incompatible; 42201 invalid
schema; 42202 invalid version; 42203 invalid level; 42204 invalid mode; 42205 refused by the
mode; 42206 still referenced; 50001 storage; 50002 timeout).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote

import trio

from logbroker.broker.http import HttpError, Request, Response
from logbroker.common.acl import AclOperation as Op
from logbroker.schema_registry import compatibility, records
from logbroker.schema_registry.auth import ANONYMOUS, RegistryAuth, Unauthenticated
from logbroker.schema_registry.errors import InvalidSchema
from logbroker.schema_registry.kafka_store import TOPIC, KafkaStore, StoreError
from logbroker.schema_registry.records import Reference, SchemaValue
from logbroker.schema_registry.schema_types import TYPES
from logbroker.schema_registry.state import Content, RegistryState

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
RETRIES = 5  # a registration that loses a race with another node's (state.py) is tried again
READY_TIMEOUT_S = 30.0  # how long a request waits for the registry's first read of _schemas


class RegistryError(HttpError):
    def __init__(self, error_code: int, message: str) -> None:
        status = error_code if error_code < 1000 else error_code // 100
        super().__init__(status, message)
        self.error_code = error_code


def error_response(status: int, message: str, error_code: int | None = None) -> Response:
    body = {"error_code": error_code or status, "message": message}
    return Response(status, json.dumps(body).encode(), CONTENT_TYPE)


def ok(value: Any, status: int = 200) -> Response:
    return Response(status, json.dumps(value).encode(), CONTENT_TYPE)


def _flag(request: Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


class RegistryApi:
    def __init__(self, state: RegistryState, store: KafkaStore, auth: RegistryAuth | None = None) -> None:
        self.state = state
        self.store = store
        self.auth = auth
        self._writes = trio.Lock()  # this node's writes one at a time (other nodes': state.py)

    async def handle(self, request: Request) -> Response:
        try:
            principal = self.auth.principal(request.headers, request.peer) if self.auth is not None else ANONYMOUS
        except Unauthenticated as e:
            response = error_response(401, str(e), 40101)
            response.headers["WWW-Authenticate"] = 'Basic realm="logbroker schema registry"'
            return response
        try:
            return await self._route(request, principal)
        except RegistryError as e:
            return error_response(e.status, e.message, e.error_code)
        except StoreError as e:
            return error_response(500, str(e), 50001)

    async def _route(self, request: Request, principal: str) -> Response:
        parts = [unquote(p) for p in request.path.strip("/").split("/") if p]
        m = request.method
        if not self.store.ready.is_set():
            with trio.move_on_after(READY_TIMEOUT_S):
                await self.store.ready.wait()
            if not self.store.ready.is_set():
                raise RegistryError(
                    50002,
                    f"the registry has not read {TOPIC} yet (is the topic's "
                    "replication factor more than the brokers registered?); try again",
                )

        def check(operation: int, subject: str | None) -> None:
            if self.auth is not None and not self.auth.may(principal, request.peer, operation, subject):
                raise RegistryError(
                    40301,
                    f"User {principal} is denied operation {Op(operation).name} on "
                    f"{'Subject: ' + subject if subject is not None else 'the cluster'}",
                )

        def readable(subject: str) -> bool:
            return self.auth is None or self.auth.may(principal, request.peer, Op.DESCRIBE, subject)

        if len(parts) >= 2 and parts[0] in ("subjects", "config", "mode"):
            subject = parts[1]
            if parts[0] == "subjects":
                operation = {"GET": Op.DESCRIBE, "DELETE": Op.DELETE}.get(
                    m, Op.WRITE if parts[2:3] == ["versions"] else Op.DESCRIBE
                )
            else:
                operation = Op.DESCRIBE if m == "GET" else Op.ALTER_CONFIGS
            check(operation, subject)
        elif len(parts) >= 3 and parts[0] == "compatibility":
            check(Op.DESCRIBE, parts[2])
        elif parts[:1] in (["config"], ["mode"]) and m != "GET":
            check(Op.ALTER_CONFIGS, None)
        match parts:
            case []:
                return ok({})
            case ["schemas", "types"] if m == "GET":
                return ok(sorted(TYPES))
            case ["schemas", "ids", sid, *rest] if m == "GET":
                return self._by_id(_int(sid, "schema id", 40403), rest, request, readable)
            case ["subjects"] if m == "GET":
                return ok([s for s in self.state.subject_names(_flag(request, "deleted")) if readable(s)])
            case ["subjects", subject] if m == "POST":
                return self._lookup(subject, request)
            case ["subjects", subject] if m == "DELETE":
                return ok(await self._delete_subject(subject, _flag(request, "permanent")))
            case ["subjects", subject, "versions"] if m == "GET":
                vs = self.state.versions(subject, _flag(request, "deleted"))
                if not vs:
                    raise _subject_not_found(subject)
                return ok([sv.version for sv in vs])
            case ["subjects", subject, "versions"] if m == "POST":
                return ok(await self._register(subject, request))
            case ["subjects", subject, "versions", v] if m == "GET":
                sv = self._version(subject, v, _flag(request, "deleted"))
                described = _describe(sv)
                described["schema"] = self._rendered(sv.schema_type, sv.schema, sv.references, request)
                return ok(described)
            case ["subjects", subject, "versions", v, "schema"] if m == "GET":
                return Response(200, self._version(subject, v, _flag(request, "deleted")).schema.encode(), CONTENT_TYPE)
            case ["subjects", subject, "versions", v, "referencedby"] if m == "GET":
                sv = self._version(subject, v, True)
                return ok(self.state.referenced_by(sv.subject, sv.version))
            case ["subjects", subject, "versions", v] if m == "DELETE":
                return ok(await self._delete_version(subject, v, _flag(request, "permanent")))
            case ["compatibility", "subjects", subject, "versions", *v] if m == "POST" and len(v) <= 1:
                return ok(self._test_compatibility(subject, v[0] if v else None, request))
            case ["config"] if m == "GET":
                return ok({"compatibilityLevel": self.state.level(None)})
            case ["config"] | ["config", _] if m == "PUT":
                return ok(await self._set_config(parts[1] if len(parts) > 1 else None, request))
            case ["config", subject] if m == "GET":
                level = self.state.configs.get(subject)
                if level is None:
                    if not _flag(request, "defaultToGlobal"):
                        raise RegistryError(
                            40408, f"Subject '{subject}' does not have subject-level compatibility configured"
                        )
                    level = self.state.level(None)
                return ok({"compatibilityLevel": level})
            case ["config", subject] if m == "DELETE":
                level = self.state.configs.get(subject)
                if level is None:
                    raise _subject_not_found(subject)
                await self.store.write(records.config_key(subject), None)
                return ok({"compatibilityLevel": level})
            case ["mode"] if m == "GET":
                return ok({"mode": self.state.mode(None)})
            case ["mode"] | ["mode", _] if m == "PUT":
                return ok(await self._set_mode(parts[1] if len(parts) > 1 else None, request))
            case ["mode", subject] if m == "GET":
                mode = self.state.modes.get(subject)
                if mode is None:
                    if not _flag(request, "defaultToGlobal"):
                        raise RegistryError(40409, f"Subject '{subject}' does not have subject-level mode configured")
                    mode = self.state.mode(None)
                return ok({"mode": mode})
            case ["mode", subject] if m == "DELETE":
                mode = self.state.modes.get(subject)
                if mode is None:
                    raise _subject_not_found(subject)
                await self.store.write(records.mode_key(subject), None)
                return ok({"mode": mode})
        known = ("schemas", "subjects", "compatibility", "config", "mode")
        if parts and parts[0] in known:
            raise HttpError(
                405 if m not in ("GET", "POST", "PUT", "DELETE") else 404, f"{m} {request.path}: no such resource"
            )
        raise HttpError(404, f"{m} {request.path}: no such resource")

    # --- reads --------------------------------------------------------------------------

    def _by_id(self, schema_id: int, rest: list[str], request: Request, readable) -> Response:
        content = self.state.schemas.get(schema_id)
        usages = [sv for sv in self.state.usages(schema_id, True) if readable(sv.subject)]
        if content is None or not usages:  # unreadable is not found: ids say nothing to outsiders
            raise RegistryError(40403, f"Schema {schema_id} not found")
        match rest:
            case []:
                out: dict[str, Any] = {
                    "schema": self._rendered(content.schema_type, content.schema, content.references, request)
                }
                if content.schema_type != "AVRO":
                    out["schemaType"] = content.schema_type
                if content.references:
                    out["references"] = [r.to_json() for r in content.references]
                return ok(out)
            case ["schema"]:
                return Response(200, content.schema.encode(), CONTENT_TYPE)
            case ["subjects"]:
                return ok(sorted({sv.subject for sv in usages if _flag(request, "deleted") or not sv.deleted}))
            case ["versions"]:
                return ok(
                    [
                        {"subject": sv.subject, "version": sv.version}
                        for sv in usages
                        if _flag(request, "deleted") or not sv.deleted
                    ]
                )
        raise HttpError(404, f"GET {request.path}: no such resource")

    def _rendered(self, schema_type: str, schema: str, references: tuple[Reference, ...], request: Request) -> str:
        """The schema text, or with `?format=serialized` a Protobuf schema's base64
        FileDescriptorProto (what Confluent's Python Protobuf serde asks for)."""
        kind = TYPES[schema_type]
        if request.query.get("format") == "serialized" and hasattr(kind, "serialized"):
            try:
                return kind.serialized(kind.parse(schema, references, self._resolve))
            except InvalidSchema as e:
                raise RegistryError(50001, f"stored schema no longer parses: {e}") from None
        return schema

    def _version(self, subject: str, v: str, deleted: bool) -> SchemaValue:
        if subject not in self.state.subjects or not self.state.versions(subject, True):
            raise _subject_not_found(subject)
        if v == "latest" or v == "-1":
            sv = self.state.latest(subject, deleted)
        else:
            n = _int(v, "version", 42202)
            if n < 1:
                raise RegistryError(
                    42202,
                    f"The specified version '{v}' is not a valid version id. Allowed values "
                    'are between [1, 2^31-1] and the string "latest"',
                )
            sv = self.state.version(subject, n, deleted)
        if sv is None:
            raise RegistryError(40402, f"Version {v} not found.")
        return sv

    def _submitted(self, request: Request) -> tuple[Content, Any]:
        """The schema of a request body, in stored form and parsed; 42201 when invalid."""
        body = request.json()
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(42201, 'Invalid schema: the body needs a "schema" string')
        schema_type = str(body.get("schemaType") or "AVRO").upper()
        kind = TYPES.get(schema_type)
        if kind is None:
            raise RegistryError(
                42201, f"Invalid schema: unknown schemaType {schema_type!r} (served: {', '.join(sorted(TYPES))})"
            )
        try:
            refs = tuple(
                Reference(str(r["name"]), str(r["subject"]), int(r["version"])) for r in body.get("references") or []
            )
        except (KeyError, TypeError, ValueError) as e:
            raise RegistryError(42201, f"Invalid schema: a reference lacks name, subject or version ({e})") from None
        for ref in refs:
            if self.state.version(ref.subject, ref.version) is None:
                raise RegistryError(
                    42201,
                    f"Invalid schema: reference {ref.name} names {ref.subject} version "
                    f"{ref.version}, which is not registered",
                )
        try:
            stored = kind.stored_form(body["schema"])
            parsed = kind.parse(stored, refs, self._resolve)
            if hasattr(kind, "canonical"):  # Protobuf: type names as resolved, however written
                stored = kind.canonical(parsed)
        except InvalidSchema as e:
            raise RegistryError(42201, str(e)) from None
        return Content(schema_type, stored, refs), parsed

    def _resolve(self, ref: Reference) -> tuple[str, tuple[Reference, ...]]:
        sv = self.state.version(ref.subject, ref.version, True)
        if sv is None:
            raise InvalidSchema(f"reference {ref.name}: {ref.subject} version {ref.version} not found")
        return sv.schema, sv.references

    def _parsed(self, sv: SchemaValue) -> Any:
        return TYPES[sv.schema_type].parse(sv.schema, sv.references, self._resolve)

    def _lookup(self, subject: str, request: Request) -> Response:
        content, _parsed = self._submitted(request)
        deleted = _flag(request, "deleted")
        if not self.state.versions(subject, deleted):
            raise _subject_not_found(subject)
        for sv in self.state.versions(subject, deleted):
            if Content(sv.schema_type, sv.schema, sv.references) == content:
                return ok(_describe(sv))
        raise RegistryError(40403, "Schema not found")

    def _incompatibilities(
        self, subject: str, content: Content, parsed: Any, level: str, upto: SchemaValue | None = None
    ) -> list[str]:
        earlier = [upto] if upto is not None else self.state.versions(subject)
        kind = TYPES[content.schema_type]

        def incompatibilities(reader: Any, writer: Any) -> list[str]:
            if isinstance(reader, _OtherType) or isinstance(writer, _OtherType):
                other = reader if isinstance(reader, _OtherType) else writer
                return [f"schemaType changed between {other.schema_type} and {content.schema_type}"]
            return kind.incompatibilities(reader, writer)

        return compatibility.check(
            level,
            parsed,
            [
                (sv.version, self._parsed(sv) if sv.schema_type == content.schema_type else _OtherType(sv.schema_type))
                for sv in earlier
            ],
            incompatibilities,
        )

    def _test_compatibility(self, subject: str, v: str | None, request: Request) -> dict[str, Any]:
        content, parsed = self._submitted(request)
        level = self.state.level(subject)
        if v is None:
            messages = self._incompatibilities(subject, content, parsed, level)
        else:
            sv = self._version(subject, v, False)
            messages = self._incompatibilities(
                subject, content, parsed, level.removesuffix("_TRANSITIVE") if level != "NONE" else level, sv
            )
        out: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            out["messages"] = messages
        return out

    # --- writes -------------------------------------------------------------------------

    def _lock(self) -> trio.Lock:
        return self._writes

    def _writable(self, subject: str | None, importing: bool = False) -> str:
        mode = self.state.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(42205, f"Subject {subject or '(global)'} is in read-only mode")
        if mode == "IMPORT" and not importing:
            raise RegistryError(42205, f"Subject {subject or '(global)'} is in import mode: register with an id")
        return mode

    async def _register(self, subject: str, request: Request) -> dict[str, Any]:
        async with self._lock():
            body = request.json()
            for _attempt in range(RETRIES):
                await self.store.catch_up()
                content, parsed = self._submitted(request)
                wanted_id = body.get("id") if isinstance(body, dict) else None
                mode = self._writable(subject, importing=wanted_id is not None)
                for sv in self.state.versions(subject):
                    if Content(sv.schema_type, sv.schema, sv.references) == content:
                        return _describe(sv)
                if mode != "IMPORT":
                    messages = self._incompatibilities(subject, content, parsed, self.state.level(subject))
                    if messages:
                        raise RegistryError(
                            409,
                            f"Schema being registered is incompatible with an earlier schema "
                            f'for subject "{subject}", details: {messages}',
                        )
                schema_id = self.state.id_of(content)
                if wanted_id is not None:
                    schema_id = _int(str(wanted_id), "id", 42201)
                    held = self.state.schemas.get(schema_id)
                    if held is not None and held != content:
                        raise RegistryError(
                            42207,
                            f"Overwrite new schema with id {schema_id} is not permitted: the id names another schema",
                        )
                if schema_id is None:
                    schema_id = self.state.max_id + 1
                version = self.state.next_version(subject)
                if mode == "IMPORT" and isinstance(body, dict) and body.get("version") is not None:
                    version = _int(str(body["version"]), "version", 42202)
                sv = SchemaValue(subject, version, schema_id, content.schema, content.schema_type, content.references)
                await self.store.write(records.schema_key(subject, version), records.schema_value(sv))
                if self.state.version(subject, version) == sv:
                    return _describe(sv)
            raise RegistryError(
                50002, f"registering under {subject} lost {RETRIES} races with other writers; try again"
            )

    async def _delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._lock():
            await self.store.catch_up()
            self._writable(subject)
            every = self.state.versions(subject, True)
            if not every:
                raise _subject_not_found(subject)
            live = [sv for sv in every if not sv.deleted]
            for sv in every:
                if self.state.referenced_by(subject, sv.version):
                    raise RegistryError(
                        42206, f"One or more references exist to the schema {{subject={subject},version={sv.version}}}"
                    )
            if permanent:
                if live:
                    raise RegistryError(
                        40405, f"Subject '{subject}' was not deleted first before being deleted permanently"
                    )
                for sv in every:
                    await self.store.write(records.schema_key(subject, sv.version), None)
                await self.store.write(
                    records.subject_key("CLEAR_SUBJECT", subject), records.subject_value(subject, every[-1].version)
                )
                return [sv.version for sv in every]
            if not live:
                raise RegistryError(
                    40404, f"Subject '{subject}' was soft deleted. Set permanent=true to delete permanently"
                )
            await self.store.write(
                records.subject_key("DELETE_SUBJECT", subject), records.subject_value(subject, live[-1].version)
            )
            return [sv.version for sv in live]

    async def _delete_version(self, subject: str, v: str, permanent: bool) -> int:
        async with self._lock():
            await self.store.catch_up()
            self._writable(subject)
            sv = self._version(subject, v, permanent)
            if self.state.referenced_by(subject, sv.version):
                raise RegistryError(
                    42206, f"One or more references exist to the schema {{subject={subject},version={sv.version}}}"
                )
            if permanent:
                if not sv.deleted:
                    raise RegistryError(
                        40407,
                        f"Subject '{subject}' Version {sv.version} was not deleted first "
                        "before being deleted permanently",
                    )
                await self.store.write(records.schema_key(subject, sv.version), None)
            else:
                if sv.deleted:
                    raise RegistryError(
                        40406,
                        f"Subject '{subject}' Version {sv.version} was soft deleted. Set "
                        "permanent=true to delete permanently",
                    )
                gone = SchemaValue(sv.subject, sv.version, sv.id, sv.schema, sv.schema_type, sv.references, True)
                await self.store.write(records.schema_key(subject, sv.version), records.schema_value(gone))
            return sv.version

    async def _set_config(self, subject: str | None, request: Request) -> dict[str, str]:
        body = request.json()
        level = (
            str(body.get("compatibility") or body.get("compatibilityLevel") or "").upper()
            if isinstance(body, dict)
            else ""
        )
        if level not in compatibility.LEVELS:
            raise RegistryError(
                42203, f"Invalid compatibility level {level!r}: one of {', '.join(compatibility.LEVELS)}"
            )
        async with self._lock():
            await self.store.write(records.config_key(subject), records.config_value(level))
        return {"compatibility": level}

    async def _set_mode(self, subject: str | None, request: Request) -> dict[str, str]:
        body = request.json()
        mode = str(body.get("mode") or "").upper() if isinstance(body, dict) else ""
        if mode not in MODES:
            raise RegistryError(42204, f"Invalid mode {mode!r}: one of {', '.join(MODES)}")
        async with self._lock():
            await self.store.write(records.mode_key(subject), records.mode_value(mode))
        return {"mode": mode}


class _OtherType:
    """An earlier version of another schema type: never compatible."""

    def __init__(self, schema_type: str) -> None:
        self.schema_type = schema_type


def _int(text: str, what: str, error_code: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise RegistryError(error_code, f"{what} {text!r} is not an integer") from None


def _subject_not_found(subject: str) -> RegistryError:
    return RegistryError(40401, f"Subject '{subject}' not found.")


def _describe(sv: SchemaValue) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": sv.subject, "version": sv.version, "id": sv.id, "schema": sv.schema}
    if sv.schema_type != "AVRO":
        out["schemaType"] = sv.schema_type
    if sv.references:
        out["references"] = [r.to_json() for r in sv.references]
    return out
