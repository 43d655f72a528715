"""`ConsoleServer`: the console's HTTP server, its REST routes (listed in the package doc)
and the throughput sampler, run by the broker (`console.listen`) in its own nursery."""

from __future__ import annotations

import functools
import json
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import trio

from logbroker.admin_views import (
    RESET_TO,
    GroupNotEmptyError,
    StatusError,
    collect,
    describe_group,
    describe_topics,
    leaders_of,
    log_offsets,
    render_bytes,
    reset_offsets,
)
from logbroker.broker.http import HttpError, HttpServer, Request, Response, json_response
from logbroker.client import Admin, Consumer, KafkaError, KafkaTimeoutError, NewTopic
from logbroker.client.errors import BrokerResponseError, KafkaConnectionError
from logbroker.common.sasl_scram import AuthenticationFailed
from logbroker.console.sessions import SAFE_METHODS, Session, SessionError, Sessions, clear_cookie, set_cookie
from logbroker.console.throughput import SAMPLE_INTERVAL_S, Throughput, sample

log = logging.getLogger("logbroker.console")

STATIC = Path(__file__).with_name("static")
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
THREADS = 4  # client calls in flight at once (the broker's own disk work has trio's default limiter)
TIMEOUT_S = 10.0  # each Kafka call the console makes
MAX_BODY = 64 * 1024
MAX_RECORDS = 500
LOGIN_FAILURE_DELAY_S = 1.0  # before a refused login is answered
FORMATS = ("text", "json", "hex")
# How a Kafka error answers over HTTP; a code not named here is 502 (the cluster refused).
STATUS_BY_ERROR = {
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "UNKNOWN_TOPIC_ID": 404,
    "GROUP_ID_NOT_FOUND": 404,
    "TOPIC_ALREADY_EXISTS": 409,
    "NON_EMPTY_GROUP": 409,
    "UNKNOWN_MEMBER_ID": 409,
    "REBALANCE_IN_PROGRESS": 409,
    "INVALID_TOPIC_EXCEPTION": 400,
    "INVALID_PARTITIONS": 400,
    "INVALID_REPLICATION_FACTOR": 400,
    "INVALID_REPLICA_ASSIGNMENT": 400,
    "INVALID_CONFIG": 400,
    "INVALID_REQUEST": 400,
    "POLICY_VIOLATION": 400,
    "INVALID_GROUP_ID": 400,
    "OFFSET_OUT_OF_RANGE": 400,
    "TOPIC_AUTHORIZATION_FAILED": 403,
    "GROUP_AUTHORIZATION_FAILED": 403,
    "CLUSTER_AUTHORIZATION_FAILED": 403,
    "TOPIC_DELETION_DISABLED": 403,
}


def json_error(status: int, message: str, kafka_error: str | None = None) -> Response:
    body: dict[str, Any] = {"error": message}
    if kafka_error is not None:
        body["kafka_error"] = kafka_error
    return json_response(body, status)


def _http_error(e: Exception) -> tuple[int, str, str | None]:
    if isinstance(e, GroupNotEmptyError):
        return 409, str(e), "NON_EMPTY_GROUP"
    if isinstance(e, KafkaTimeoutError):
        return 504, str(e), None
    if isinstance(e, KafkaConnectionError):
        return 503, str(e), "NETWORK_EXCEPTION"
    if isinstance(e, BrokerResponseError) and e.code is not None:
        name = e.code.name
        return STATUS_BY_ERROR.get(name, 503 if e.retriable else 502), str(e), name
    if isinstance(e, ValueError):
        return 400, str(e), None
    return 502, str(e) or type(e).__name__, None


# --- input --------------------------------------------------------------------------------


def _int(
    text: str | None, what: str, *, default: int | None = None, lo: int | None = None, hi: int | None = None
) -> int | None:
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"{what} must be an integer, not {text[:40]!r}") from None
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise HttpError(400, f"{what} must be between {lo} and {hi}, not {value}")
    return value


def _json_int(body: dict[str, Any], key: str, default: int | None = None) -> int | None:
    value = body.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        raise HttpError(400, f"{key!r} must be an integer, not {json.dumps(value)[:40]}")
    return value


def _object(request: Request) -> dict[str, Any]:
    body = request.json()
    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object")
    return body


def _string_map(value: Any, what: str) -> dict[str, str | None]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise HttpError(400, f"{what} must be an object of key: value")
    out: dict[str, str | None] = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)):
            raise HttpError(400, f"{what}: the value of {k!r} must be a string or a number")
        out[str(k)] = None if v is None else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


# --- what the routes do, in a worker thread ---------------------------------------------------


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def cluster_view(bootstrap: str, client_config: dict[str, str]) -> dict[str, Any]:
    try:
        status = collect(bootstrap, client_config)
    except StatusError as e:
        raise KafkaConnectionError(str(e)) from None
    for n in status["nodes"]:
        if n["host"] is None or n["port"] is None:
            n["reachable"] = None
        else:
            n["reachable"] = _reachable(n["host"], n["port"])
        n["fenced"] = n["state"] == "fenced"
        n["status"] = "offline" if n["reachable"] is False else "fenced" if n["fenced"] else "online"
    return status


RemoteSizes = Callable[[str, int], "tuple[int, int] | None"]


def with_remote_sizes(doc: dict[str, Any], remote_sizes: RemoteSizes | None) -> dict[str, Any]:
    """Adds each partition's bytes in remote storage (tiered storage; None without it) and
    the topic's sum (`remote_size_bytes`); `size_bytes` is the local log's."""
    total = None
    for p in doc["partitions"]:
        got = remote_sizes(doc["topic"], p["partition"]) if remote_sizes else None
        p["remote_size_bytes"] = None if got is None else got[0]
        if got is not None:
            total = (total or 0) + got[0]
    doc["remote_size_bytes"] = total
    return doc


def topics_view(admin: Admin, internal: bool, remote_sizes: RemoteSizes | None = None) -> list[dict[str, Any]]:
    out = []
    for d in describe_topics(admin, None, sizes=True, timeout=TIMEOUT_S):
        with_remote_sizes(d, remote_sizes)
        if d["internal"] and not internal:
            continue
        parts = d["partitions"]
        records = [
            p["latest_offset"] - p["earliest_offset"]
            for p in parts
            if p["latest_offset"] is not None and p["earliest_offset"] is not None
        ]
        sizes = [p["size_bytes"] for p in parts if p["size_bytes"] is not None]
        out.append(
            {
                "topic": d["topic"],
                "internal": d["internal"],
                "partitions": len(parts),
                "replication_factor": len(parts[0]["replicas"]) if parts else 0,
                "under_replicated": sum(p["state"] == "under-replicated" for p in parts),
                "offline": sum(p["state"] == "offline" for p in parts),
                "records": sum(records),
                "size_bytes": sum(sizes),
                "remote_size_bytes": d["remote_size_bytes"],
            }
        )
    return out


def visible_topics(admin: Admin) -> set[str]:
    """The topics the admin's user may describe (the broker leaves the others out)."""
    return set(admin.describe_topics(None, timeout=TIMEOUT_S))


def topic_view(admin: Admin, name: str, remote_sizes: RemoteSizes | None = None) -> dict[str, Any]:
    [doc] = describe_topics(admin, [name], configs=True, sizes=True, timeout=TIMEOUT_S)
    return with_remote_sizes(doc, remote_sizes)


def create_topic(admin: Admin, body: dict[str, Any]) -> dict[str, Any]:
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise HttpError(400, "'name' (the topic's name) is required")
    partitions = _json_int(body, "partitions", -1)
    rf = _json_int(body, "replication_factor", -1)
    assert partitions is not None and rf is not None
    configs = {k: v for k, v in _string_map(body.get("configs"), "'configs'").items() if v is not None}
    admin.create_topics([NewTopic(name.strip(), partitions, rf, configs)], timeout=TIMEOUT_S)
    return topic_view(admin, name.strip())


def alter_config(admin: Admin, name: str, body: dict[str, Any]) -> dict[str, Any]:
    changes = _string_map(body.get("set"), "'set'")
    deletes = body.get("delete") or []
    if not isinstance(deletes, list) or not all(isinstance(k, str) for k in deletes):
        raise HttpError(400, "'delete' must be a list of config keys")
    changes.update(dict.fromkeys(deletes))
    if not changes:
        raise HttpError(400, "nothing to change: give 'set' {key: value} and/or 'delete' [key]")
    admin.describe_topics([name], timeout=TIMEOUT_S)  # 404 for an unknown topic, not a config error
    admin.alter_configs({("topic", name): changes}, timeout=TIMEOUT_S)
    configs = admin.describe_configs([("topic", name)], timeout=TIMEOUT_S)[("topic", name)]
    return {"topic": name, "configs": dict(sorted(configs.items()))}


def delete_topic(admin: Admin, name: str) -> dict[str, Any]:
    admin.delete_topics([name], timeout=TIMEOUT_S)
    return {"deleted": name}


def groups_view(admin: Admin) -> list[dict[str, Any]]:
    return [{"group": g, "protocol_type": t, "state": s} for g, t, s in admin.list_groups(timeout=TIMEOUT_S)]


def group_view(admin: Admin, group: str) -> dict[str, Any]:
    d = describe_group(admin, group, timeout=TIMEOUT_S)
    if d["state"] == "Dead" and not d["members"] and not d["partitions"]:
        raise HttpError(404, f"group {group!r} not found (no members, no committed offsets)")
    return d


def reset_group(admin: Admin, group: str, body: dict[str, Any]) -> dict[str, Any]:
    topic = body.get("topic")
    if not isinstance(topic, str) or not topic:
        raise HttpError(400, "'topic' is required")
    to = body.get("to")
    if to not in RESET_TO:
        raise HttpError(400, f"'to' must be one of {', '.join(RESET_TO)}, not {json.dumps(to)[:40]}")
    value = _json_int(body, "value")
    if to in ("offset", "timestamp") and value is None:
        raise HttpError(400, f"resetting to {to} needs a 'value'")
    if value is not None and value < 0:
        raise HttpError(400, f"'value' must be >= 0, not {value}")
    done = reset_offsets(admin, group, topic, to, value, timeout=TIMEOUT_S)
    return {"group": group, "topic": topic, "offsets": [{"partition": p, "offset": o} for (_, p), o in done.items()]}


def delete_group(admin: Admin, group: str) -> dict[str, Any]:
    admin.delete_groups([group], timeout=TIMEOUT_S)
    return {"deleted": group}


def _as_json(b: bytes | None) -> tuple[Any, bool]:
    """(the bytes as a JSON value, True) when they are a JSON document, else (the CLI's json
    rendering: a UTF-8 string or {"base64": ...}, False)."""
    if b is None:
        return None, True
    try:
        return json.loads(b), True
    except ValueError:  # UnicodeDecodeError is one
        return render_bytes(b, "json"), False


def _record(r: Any, fmt: str) -> dict[str, Any]:
    out: dict[str, Any] = {"offset": r.offset, "timestamp": r.timestamp}
    if fmt != "json":
        out.update(
            key=render_bytes(r.key, fmt),
            value=render_bytes(r.value, fmt),
            headers=[[k, render_bytes(v, fmt)] for k, v in r.headers],
        )
        return out
    not_json = []
    out["key"], ok = _as_json(r.key)
    if not ok:
        not_json.append("key")
    out["value"], ok = _as_json(r.value)
    if not ok:
        not_json.append("value")
    headers = []
    for k, v in r.headers:
        shown, ok = _as_json(v)
        headers.append([k, shown])
        if not ok:
            not_json.append(f"header {k}")
    out["headers"] = headers
    out["not_json"] = not_json
    return out


def read_messages(
    admin: Admin,
    bootstrap: str,
    client_config: dict[str, str],
    topic: str,
    partition: int,
    offset: int | None,
    timestamp: int | None,
    limit: int,
    fmt: str,
) -> dict[str, Any]:
    found = admin.describe_topics([topic], timeout=TIMEOUT_S)
    leaders = {k: v for k, v in leaders_of(found).items() if k == (topic, partition)}
    if not leaders:
        raise HttpError(404, f"topic {topic!r} has no partition {partition} (it has {len(found[topic].partitions)})")
    key = (topic, partition)
    earliest = log_offsets(admin, leaders, "earliest", TIMEOUT_S)[key]
    latest = log_offsets(admin, leaders, "latest", TIMEOUT_S)[key]
    if earliest is None or latest is None:
        raise HttpError(503, f"{topic}-{partition}: no leader answered (leader {leaders[key]})")
    if timestamp is not None:
        at = log_offsets(admin, leaders, timestamp, TIMEOUT_S)[key]
        start = latest if at is None or at < 0 else at
    elif offset is not None:
        start = min(max(offset, earliest), latest)
    else:
        start = max(earliest, latest - limit)
    records: list[dict[str, Any]] = []
    if start < latest:
        with Consumer(
            bootstrap,
            client_id="logbroker-console",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            **client_config,
        ) as consumer:
            consumer.assign([key])
            consumer.seek(key, start)
            deadline = time.monotonic() + TIMEOUT_S / 2
            while len(records) < limit and time.monotonic() < deadline:
                batch = consumer.poll(0.2, max_records=limit - len(records))
                records += [_record(r, fmt) for r in batch]
                if records and records[-1]["offset"] >= latest - 1:
                    break
    return {
        "topic": topic,
        "partition": partition,
        "earliest_offset": earliest,
        "latest_offset": latest,
        "start_offset": start,
        "format": fmt,
        "records": records,
        "next_offset": records[-1]["offset"] + 1 if records else start,
    }


# --- the server ----------------------------------------------------------------------------


class ConsoleServer:
    """Serves the console on `serve(host, port)`; `bootstrap` is the broker's own listener.

    `client_config`: the settings of the console's own clients (broker/own_clients.py), or
    None when it has no identity of its own. `sessions`: logins (console/sessions.py), when
    the broker has a SASL listener; each logged-in user's requests are then made by clients
    set up by `login_config(session.login)`, and the console's own clients only sample
    throughput (each user is shown the topics they may describe)."""

    def __init__(
        self,
        bootstrap: str,
        node_id: int,
        client_config: dict[str, str] | None = None,
        sessions: Sessions | None = None,
        login_config: Callable[[tuple[str, str, str]], dict[str, Any]] | None = None,
        token_login: Callable[[str], Awaitable[Any]] | None = None,
        audit: Any = None,
        login_bootstrap: str | None = None,
        remote_sizes: RemoteSizes | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.remote_sizes = remote_sizes  # tiered storage: (topic, partition) -> (bytes, segments) remote
        # where the logged-in users' clients connect: a SASL listener (None: `bootstrap`)
        self.login_bootstrap = login_bootstrap or bootstrap
        self.node_id = node_id
        self.client_config = client_config
        self.sessions = sessions
        self.login_config = login_config
        self.token_login = token_login  # the broker's OAUTHBEARER validator's validate(token), if it takes tokens
        self.audit = audit  # the broker's audit log (broker/audit_log.py): logins and logouts, if any
        self.admin: Admin | None = None
        self.limiter = trio.CapacityLimiter(THREADS)
        self.throughput = Throughput()
        self.address: tuple[str, int] | None = None
        self.http = HttpServer(self._handle, "console", max_body=MAX_BODY, error=json_error)
        self.static = {p.name: p for p in STATIC.iterdir() if p.suffix in CONTENT_TYPES} if STATIC.is_dir() else {}
        self._stopping = False
        # (method, pattern over the percent-encoded path, handler(request, session, *decoded groups))
        self.routes: list[tuple[str, re.Pattern[str], Callable[..., Any]]] = [
            (m, re.compile(p), h)
            for m, p, h in [
                ("GET", r"/api/cluster", self._cluster),
                ("GET", r"/api/topics", self._topics),
                ("POST", r"/api/topics", self._create_topic),
                ("GET", r"/api/topics/([^/]+)", self._topic),
                ("DELETE", r"/api/topics/([^/]+)", self._delete_topic),
                ("POST", r"/api/topics/([^/]+)/config", self._alter_config),
                ("GET", r"/api/topics/([^/]+)/messages", self._messages),
                ("GET", r"/api/groups", self._groups),
                ("GET", r"/api/groups/([^/]+)", self._group),
                ("DELETE", r"/api/groups/([^/]+)", self._delete_group),
                ("POST", r"/api/groups/([^/]+)/reset-offsets", self._reset_group),
                ("GET", r"/api/throughput", self._throughput),
                ("GET", r"/api/session", self._session),
                ("POST", r"/api/logout", self._logout),
                ("GET", r"/", self._page),
                ("GET", r"/static/([^/]+)", self._static),
            ]
        ]

    async def serve(self, host: str, port: int, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        if self.client_config is not None:
            self.admin = Admin(
                self.bootstrap,
                client_id="logbroker-console",
                request_timeout_ms=int(TIMEOUT_S * 1000),
                metadata_max_age_ms=5000,
                **self.client_config,
            )
        try:
            async with trio.open_nursery() as nursery:
                self.address = await nursery.start(self.http.serve, host, port)
                log.info(
                    "console on %s://%s:%d/%s",
                    "https" if self.http.tls else "http",
                    *self.address,
                    " (login required)" if self.sessions is not None else "",
                )
                if self.admin is not None:
                    nursery.start_soon(self._sample_throughput)
                if self.sessions is not None:
                    nursery.start_soon(self._forget_expired)
                task_status.started(self.address)
        finally:
            self._stopping = True
            admin, self.admin = self.admin, None
            closing = [admin] if admin is not None else []
            if self.sessions is not None:
                closing += [c for s in self.sessions.expired_all() for c in s.clients.values()]
            with trio.CancelScope(shield=True), trio.move_on_after(10):
                for client in closing:
                    await trio.to_thread.run_sync(client.close, abandon_on_cancel=True)

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` in a worker thread; a Kafka error becomes the HTTP error it means."""
        try:
            return await trio.to_thread.run_sync(
                functools.partial(fn, *args), limiter=self.limiter, abandon_on_cancel=True
            )
        except HttpError:
            raise
        except (KafkaError, ValueError) as e:
            status, message, name = _http_error(e)
            raise _KafkaHttpError(status, message, name) from None

    def _bootstrap_for(self, session: Session | None) -> str:
        return self.bootstrap if session is None else self.login_bootstrap

    def _config_for(self, session: Session | None) -> dict[str, str]:
        if session is None:
            return self.client_config or {}
        assert self.login_config is not None
        return self.login_config(session.login)

    def _admin_of(self, session: Session | None) -> Admin:
        """The admin client a request's Kafka calls go through: the logged-in user's, or the
        console's own."""
        if self._stopping:
            raise HttpError(503, "the console is shutting down")
        if session is None:
            if self.admin is None:
                raise HttpError(503, "the console is shutting down")
            return self.admin
        admin = session.clients.get("admin")
        if admin is None:
            admin = session.clients["admin"] = Admin(
                self.login_bootstrap,
                client_id="logbroker-console",
                request_timeout_ms=int(TIMEOUT_S * 1000),
                metadata_max_age_ms=5000,
                **self._config_for(session),
            )
        return admin

    async def _admin_call(self, session: Session | None, fn: Callable[..., Any], *args: Any) -> Any:
        return await self._run(fn, self._admin_of(session), *args)

    async def _sample_throughput(self) -> None:
        while True:
            started = trio.current_time()
            if self.admin is not None:
                try:
                    totals = await trio.to_thread.run_sync(
                        sample, self.admin, TIMEOUT_S / 2, limiter=self.limiter, abandon_on_cancel=True
                    )
                except KafkaError as e:
                    self.throughput.last_error = str(e)
                    log.debug("throughput sample failed: %s", e)
                else:
                    self.throughput.add(totals)
                    self.throughput.last_error = None
            await trio.sleep_until(started + SAMPLE_INTERVAL_S)

    async def _forget_expired(self) -> None:
        """Closes the clients of sessions past their time (a request finds them expired anyway)."""
        assert self.sessions is not None
        while True:
            await trio.sleep(min(60.0, self.sessions.idle_s))
            for session in self.sessions.expired():
                log.info("console: the session of %s expired", session.principal)
                await self._close_clients(session)

    async def _close_clients(self, session: Session) -> None:
        clients, session.clients = list(session.clients.values()), {}
        for client in clients:
            await trio.to_thread.run_sync(client.close, abandon_on_cancel=True)

    # --- routing -------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        if self.sessions is not None and path == "/api/login":
            if request.method != "POST":
                response = json_error(405, f"{request.method} is not served on {request.path}; use POST")
                response.headers["Allow"] = "POST"
                return response
            return await self._login(request)
        allowed = []
        for method, pattern, handler in self.routes:
            m = pattern.fullmatch(path)
            if m is None:
                continue
            if method != request.method:
                allowed.append(method)
                continue
            session = None
            if self.sessions is not None and path.startswith("/api/"):
                try:
                    session = self.sessions.session_of(request.headers.get("cookie"))
                    self.sessions.check_change(session, request.method, request.headers, self._own_origins(request))
                except SessionError as e:
                    if e.status == 403 and self.audit is not None and session is not None:
                        # a forged or missing CSRF token, another origin: a denial for the audit log
                        self.audit.denied(
                            session.principal,
                            request.peer,
                            "console",
                            f"{request.method} {path}",
                            "CSRF" if "CSRF" in e.message else "ORIGIN",
                            "CONSOLE_ROUTE",
                            path,
                        )
                    return json_error(e.status, e.message)
            elif path.startswith("/api/") and request.method not in SAFE_METHODS:
                origin = request.headers.get("origin")
                if origin is not None and origin not in self._own_origins(request):
                    return json_error(403, f"refused: a {request.method} from another origin ({origin[:100]})")
            try:
                return await handler(request, session, *(unquote(g) for g in m.groups()))
            except _KafkaHttpError as e:
                return json_error(e.status, e.message, e.kafka_error)
        if allowed:
            response = json_error(405, f"{request.method} is not served on {request.path}; use {', '.join(allowed)}")
            response.headers["Allow"] = ", ".join(allowed)
            return response
        raise HttpError(404, f"no such page or route: {request.method} {request.path}")

    def _own_origins(self, request: Request) -> set[str]:
        """The origins of the console's own pages: its scheme and the Host the browser asked for."""
        scheme = "https" if self.http.tls else "http"
        return {f"{scheme}://{request.headers.get('host', '')}"}

    # --- login ---------------------------------------------------------------------------

    async def _login(self, request: Request) -> Response:
        assert self.sessions is not None
        origin = request.headers.get("origin")
        if origin is not None and origin not in self._own_origins(request):
            return json_error(403, f"refused: a login from another origin ({origin[:100]})")
        body = _object(request)
        if "token" in body:
            return await self._token_login(request, body.get("token"))
        user, password = body.get("username"), body.get("password")
        if not isinstance(user, str) or not isinstance(password, str):
            raise HttpError(400, "'username' and 'password' (strings), or 'token', are required")
        mechanism = await trio.to_thread.run_sync(self.sessions.check_password, user, password, limiter=self.limiter)
        if mechanism is None:
            log.info("console: login refused for User:%s from %s", user[:100], request.peer or "?")
            self._audit("failure", f"User:{user[:200]}", request.peer, None, "unknown user or wrong password")
            await trio.sleep(LOGIN_FAILURE_DELAY_S)  # slows guessing; other requests go on
            return json_error(401, "login refused: unknown user or wrong password")
        return await self._start_session(request, user, mechanism, password)

    async def _token_login(self, request: Request, token: Any) -> Response:
        """A login with an OAuth access token, checked by the broker's OAUTHBEARER validator."""
        assert self.sessions is not None
        if self.token_login is None:
            raise HttpError(
                400, "this broker does not take OAuth tokens (OAUTHBEARER is not in sasl.enabled.mechanisms)"
            )
        if not isinstance(token, str) or not token:
            raise HttpError(400, "'token' must be the access token (a string)")
        try:
            validated = await self.token_login(token)
        except AuthenticationFailed as e:
            log.info("console: token login refused from %s: %s", request.peer or "?", e)
            self._audit("failure", "", request.peer, "OAUTHBEARER", str(e))
            await trio.sleep(LOGIN_FAILURE_DELAY_S)
            return json_error(401, "login refused: the token is not valid here")
        lifetime_s = validated.expires_ms / 1000 - time.time()
        return await self._start_session(request, validated.principal_name, "OAUTHBEARER", token, lifetime_s)

    async def _start_session(
        self, request: Request, user: str, mechanism: str, password: str, lifetime_s: float | None = None
    ) -> Response:
        assert self.sessions is not None
        session, evicted = self.sessions.create(user, mechanism, password, lifetime_s)
        for old in evicted:
            await self._close_clients(old)
        log.info("console: %s logged in from %s (%s)", session.principal, request.peer or "?", mechanism)
        self._audit("success", session.principal, request.peer, mechanism, None)
        response = json_response(self._session_doc(session))
        response.headers["Set-Cookie"] = set_cookie(session.id, secure=self.http.tls is not None)
        return response

    def _audit(self, outcome: str, principal: str, client: str, mechanism: str | None, reason: str | None) -> None:
        """A console login for the audit log (listener "console")."""
        if self.audit is not None:
            self.audit.authentication(outcome, principal, client, "console", mechanism, reason)

    @staticmethod
    def _session_doc(session: Session) -> dict[str, Any]:
        return {
            "user": session.user,
            "principal": session.principal,
            "mechanism": session.mechanism,
            "csrf_token": session.csrf_token,
        }

    async def _session(self, request: Request, session: Session | None) -> Response:
        if session is None:
            return json_response({"user": None, "login_required": False})
        return json_response({**self._session_doc(session), "login_required": True})

    async def _logout(self, request: Request, session: Session | None) -> Response:
        if session is None:
            raise HttpError(400, "this console has no logins (its broker has no SASL listener)")
        assert self.sessions is not None
        self.sessions.forget(session)
        await self._close_clients(session)
        log.info("console: %s logged out", session.principal)
        response = json_response({"logged_out": session.user})
        response.headers["Set-Cookie"] = clear_cookie(secure=self.http.tls is not None)
        return response

    # --- pages and routes ----------------------------------------------------------------

    async def _page(self, request: Request, session: Session | None) -> Response:
        return await self._static(request, session, "index.html")

    async def _static(self, request: Request, session: Session | None, name: str) -> Response:
        path = self.static.get(name)
        if path is None:
            raise HttpError(404, f"no such file: {name}")
        body = await trio.Path(path).read_bytes()
        return Response(200, body, CONTENT_TYPES[path.suffix], {"Cache-Control": "no-cache"})

    async def _cluster(self, request: Request, session: Session | None) -> Response:
        return json_response(await self._run(cluster_view, self._bootstrap_for(session), self._config_for(session)))

    async def _topics(self, request: Request, session: Session | None) -> Response:
        internal = request.query.get("internal", "") not in ("", "0", "false")
        return json_response(await self._admin_call(session, topics_view, internal, self.remote_sizes))

    async def _topic(self, request: Request, session: Session | None, name: str) -> Response:
        return json_response(await self._admin_call(session, topic_view, name, self.remote_sizes))

    async def _create_topic(self, request: Request, session: Session | None) -> Response:
        return json_response(await self._admin_call(session, create_topic, _object(request)), 201)

    async def _alter_config(self, request: Request, session: Session | None, name: str) -> Response:
        return json_response(await self._admin_call(session, alter_config, name, _object(request)))

    async def _delete_topic(self, request: Request, session: Session | None, name: str) -> Response:
        return json_response(await self._admin_call(session, delete_topic, name))

    async def _messages(self, request: Request, session: Session | None, name: str) -> Response:
        q = request.query
        partition = _int(q.get("partition"), "partition", default=0, lo=0, hi=2**31 - 1)
        offset = _int(q.get("offset"), "offset", lo=0, hi=2**63 - 1)
        timestamp = _int(q.get("timestamp"), "timestamp", lo=0, hi=2**63 - 1)
        if offset is not None and timestamp is not None:
            raise HttpError(400, "give offset or timestamp, not both")
        limit = _int(q.get("limit"), "limit", default=50, lo=1, hi=MAX_RECORDS)
        fmt = q.get("format") or "text"
        if fmt not in FORMATS:
            raise HttpError(400, f"format must be one of {', '.join(FORMATS)}, not {fmt[:20]!r}")
        return json_response(
            await self._admin_call(
                session,
                read_messages,
                self._bootstrap_for(session),
                self._config_for(session),
                name,
                partition,
                offset,
                timestamp,
                limit,
                fmt,
            )
        )

    async def _groups(self, request: Request, session: Session | None) -> Response:
        return json_response(await self._admin_call(session, groups_view))

    async def _group(self, request: Request, session: Session | None, group: str) -> Response:
        return json_response(await self._admin_call(session, group_view, group))

    async def _reset_group(self, request: Request, session: Session | None, group: str) -> Response:
        return json_response(await self._admin_call(session, reset_group, group, _object(request)))

    async def _delete_group(self, request: Request, session: Session | None, group: str) -> Response:
        return json_response(await self._admin_call(session, delete_group, group))

    async def _throughput(self, request: Request, session: Session | None) -> Response:
        visible = None if session is None else await self._admin_call(session, visible_topics)
        rates = self.throughput.rates(visible)
        if self.admin is None and rates["error"] is None:
            rates["error"] = (
                "not sampled: the console has no Kafka user of its own (set this node's SASL user in "
                "the primary listener's JAAS config)"
            )
        return json_response(rates)


class _KafkaHttpError(HttpError):
    def __init__(self, status: int, message: str, kafka_error: str | None) -> None:
        super().__init__(status, message)
        self.kafka_error = kafka_error
