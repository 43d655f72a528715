"""The Kafka protocol server: request dispatch over the Rust network layer.

Sockets belong to the Rust network thread (`_core.NetworkServer`, rust/src/server/): it
accepts connections, reads size-prefixed frames (buffers that grow as bytes arrive, all of
them bounded by `queued.max.request.bytes`) and writes responses (bytes, and segment ranges
with sendfile). This module waits on its notify fd, takes the complete request frames in
bulk and serves each in a trio task: decode the header, dispatch on (api_key, api_version),
encode the response and hand its chunks back. A connection is muted while its request is
served (Kafka's rule, which keeps responses in request order); many connections are served
concurrently.

Client quotas: while a `request_percentage` quota is set (KIP-124), each request's
handler time (its task's running time, broker/quotas.py `RequestTimes`) is recorded against
the user and client id's quota as Kafka's request quota does; over it, the response carries
the throttle time and the network thread mutes the connection for it (`respond`'s
`throttle_ms`). Exempt as in Kafka: Kafka's cluster actions (`CLUSTER_ACTIONS`), requests
before SASL authentication, and the controller listener's (the cluster's own nodes).

On a SASL listener (common/sasl.py) each connection has a `SaslSession`; until it has
authenticated, its frames come here with no principal and only ApiVersions, SaslHandshake
and SaslAuthenticate are served. A completed exchange tells the network thread the
principal (`authenticated`) before the answer goes out; a failed one is answered and the
connection closed once the answer is written. Every request's context carries its
connection's principal.

Bad input never crashes the broker: a frame larger than `socket.request.max.bytes`, a
negative size, a header or body that does not decode, or an API version we do not serve
closes the connection after a log line naming the peer, API, version and cause (as Kafka
does); ApiVersions at an unknown version gets the KIP-511 v0 error reply.
"""

from __future__ import annotations

import functools
import logging
import time

import trio

from logbroker import _core
from logbroker.broker.add_partitions_to_txn import for_produce
from logbroker.broker.audit_log import AuditLog, claimed_user
from logbroker.broker.handlers import CONTROLLER_HANDLERS, HANDLERS, BrokerView, RequestContext
from logbroker.broker.jwks import JwksError, JwksKeys, fetch, parse_jwks
from logbroker.common.config import ConfigError
from logbroker.common.delegation_tokens import token_credential
from logbroker.common.oauthbearer import JwksValidator, UnsecuredValidator, validator_from_config
from logbroker.common.sasl import SaslSession, jaas_options, jaas_users, raw_token
from logbroker.common.sasl_gssapi import GssapiListeners
from logbroker.coord.metadata.controller_channel import serving_controller_listener
from logbroker.log_format import DATAPATH_LINES, fields, parse_fields
from logbroker.protocol import (
    API_NAMES,
    ErrorCode,
    ProtocolError,
    decode_request_header,
    encode_response,
)

log = logging.getLogger("logbroker.broker.dispatch")
PRE_AUTHENTICATION_APIS = (18, 17, 36)  # ApiVersions, SaslHandshake, SaslAuthenticate
# Kafka's cluster actions (ApiKeys.clusterAction), exempt from the request quota: LeaderAndIsr,
# StopReplica, UpdateMetadata, ControlledShutdown, WriteTxnMarkers, Vote, BeginQuorumEpoch,
# EndQuorumEpoch, AlterPartition, Envelope, BrokerRegistration, BrokerHeartbeat,
# AllocateProducerIds and the share-group state APIs (DescribeQuorum and UpdateFeatures a
# Kafka broker forwards, and throttles like any forwarded request)
CLUSTER_ACTIONS = frozenset((4, 5, 6, 7, 27, 52, 53, 54, 56, 58, 62, 63, 67, 83, 84, 85, 86, 87))
datapath_log = logging.getLogger("logbroker.datapath")


class KafkaServer:
    def __init__(self, broker: BrokerView) -> None:
        self.broker = broker
        self.max_frame = broker.config.get_int("socket.request.max.bytes")
        self.idle_ms = broker.config.get_int("connections.max.idle.ms")
        self.queued_max = broker.config.get_int("queued.max.request.bytes")
        self.fetch_session_slots = broker.config.get_int("max.incremental.fetch.session.cache.slots")
        self.net: _core.NetworkServer | None = None
        cfg = broker.config
        # the listeners, primary (inter-broker) first: the network thread's listener indexes
        # (none on a controller-only node, which serves only its controller listener's frames)
        self.listeners: list[str] = [name for name, _, _ in cfg.listeners_primary_first()] if cfg.is_broker else []
        self.sasl = [cfg.security_protocol(name).startswith("SASL_") for name in self.listeners]
        self.sessions: dict[int, SaslSession] = {}  # SASL listeners: each connection's exchange
        self.connections: dict[int, dict] = {}  # each open connection's state (RequestContext.connection)
        self.jwks: JwksKeys | None = None  # OAUTHBEARER's key set (sasl.oauthbearer.jwks.endpoint.url)
        self._oauth_validators: dict[str, UnsecuredValidator | JwksValidator] = {}
        self.gssapi = GssapiListeners(lambda: broker.config)  # Kerberos: each SASL listener's keytab credential
        # logins and data-path denials go to the broker's audit log (broker/audit_log.py), if any
        self.audit: AuditLog | None = getattr(broker, "audit", None)

    def bind(self, partitions: _core.PartitionTable) -> dict[str, tuple[str, int]]:
        """Binds every listener and starts the network thread, which serves Produce and Fetch
        from `partitions`; returns each listener's bound address by name."""
        cfg = self.broker.config
        cfg.check_listeners()
        if "OAUTHBEARER" in cfg.get_str("sasl.enabled.mechanisms").split(","):
            self._check_oauthbearer()
        if "GSSAPI" in cfg.get_str("sasl.enabled.mechanisms").split(","):
            self.gssapi.check([name for name, sasl in zip(self.listeners, self.sasl) if sasl])
        specs = [
            (name, host, port, cfg.listener_tls(name), sasl)
            for (name, host, port), sasl in zip(cfg.listeners_primary_first(), self.sasl)
        ]
        try:
            self.net = _core.NetworkServer(
                specs,
                self.max_frame,
                self.queued_max,
                self.idle_ms,
                self.fetch_session_slots,
                partitions,
                cfg.get_int("sasl.server.max.receive.size"),
                cfg.get_str("ssl.principal.mapping.rules"),
            )
        except ValueError as e:  # the TLS settings and mapping rules, as the engine read them
            raise ConfigError(str(e)) from None
        return dict(zip(self.listeners, self.net.addresses))

    async def serve(self, *, task_status: trio.TaskStatus = trio.TASK_STATUS_IGNORED) -> None:
        """Serves requests until cancelled (the service closes the network thread: `close`)."""
        net = self.net
        assert net is not None, "bind() first"
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                await trio.lowlevel.wait_readable(net.notify_fd)
                for conn, frame, peer, message, level, verification, listener in net.take_events():
                    if isinstance(verification, str):
                        nursery.start_soon(self._catch_up_schemas, net, conn, peer, verification)
                    elif verification is not None:
                        nursery.start_soon(self._verify_produce, net, conn, frame, peer, verification)
                    elif frame is not None:  # a request: the message is the connection's principal
                        nursery.start_soon(self._serve_request, net, conn, frame, peer, message, listener)
                    elif conn == -2:
                        datapath_log.log(level, "%s", message, extra=parse_fields(message, DATAPATH_LINES))
                        if self.audit is not None:  # a denied Produce or Fetch (audit_log.DENIAL_LINE)
                            self.audit.datapath_line(message, self.listeners)
                    elif conn == -3:  # the HW of a watched partition moved: peer is its topic, level its index
                        if self.broker.replicas is not None:
                            self.broker.replicas.high_watermark_moved(peer, level)
                    elif conn < 0:
                        log.log(level, "network thread: %s", message)
                    else:
                        self._forget(conn)
                        log.log(level, "connection from %s closed: %s", peer, message, extra=fields(peer=peer))

    def close(self) -> None:
        """Closes the listener and every connection (idempotent)."""
        if self.net is not None:
            self.net.shutdown()

    def _forget(self, conn: int) -> None:
        """A connection closed: its state goes (and the client telemetry instance it carried)."""
        self.sessions.pop(conn, None)
        if self.connections.pop(conn, None) is not None:
            telemetry = getattr(self.broker, "client_telemetry", None)
            if telemetry is not None:
                telemetry.connection_closed(conn)

    def _session(self, conn: int, peer: str, listener: str) -> SaslSession:
        session = self.sessions.get(conn)
        if session is None:
            cfg = self.broker.config
            controller = self.broker.controller

            def credential(user: str, mechanism: str):
                return None if controller is None else controller.image.scram_credential(user, mechanism)

            session = SaslSession(
                peer,
                cfg.get_str("sasl.enabled.mechanisms").split(","),
                jaas_users(cfg.jaas_config("PLAIN", listener)),
                credential,
                cfg.get_int("connections.max.reauth.ms"),
                functools.partial(self._oauthbearer_validator, listener),
                self._token_credential,
                functools.partial(self.gssapi.server, listener),
            )
            self.sessions[conn] = session
        return session

    def _token_credential(self, token_id: str, mechanism: str):
        """(the SCRAM credential, the owner) of a live delegation token, or None
        (common/delegation_tokens.py)."""
        secret = self.broker.config.get_str("delegation.token.secret.key")
        controller = self.broker.controller
        if not secret or controller is None:
            return None
        token = controller.image.delegation_tokens.get(token_id)
        if token is None or token.expiry_ms < time.time() * 1000:
            return None
        return token_credential(secret, token_id, mechanism), token.owner

    def _check_oauthbearer(self) -> None:
        """OAUTHBEARER's settings, checked at start: each SASL listener's validator, and a
        file:// JWKS read (an http(s) one is fetched at the first token). ConfigError."""
        for name, sasl in zip(self.listeners, self.sasl):
            if sasl:
                try:
                    self._oauthbearer_validator(name)
                except ValueError as e:
                    raise ConfigError(str(e)) from None
        url = self.broker.config.get_str("sasl.oauthbearer.jwks.endpoint.url")
        if url and not url.startswith(("file:", "http://", "https://")):
            raise ConfigError(
                f"sasl.oauthbearer.jwks.endpoint.url={url!r}: a file:// path or an http(s):// URL is needed"
            )
        if url.startswith("file:"):
            try:
                parse_jwks(fetch(url), url)
            except JwksError as e:
                raise ConfigError(f"sasl.oauthbearer.jwks.endpoint.url: {e}") from None

    def _oauthbearer_validator(self, listener: str) -> UnsecuredValidator | JwksValidator:
        """The listener's OAUTHBEARER validator (common/oauthbearer.py), made once; the JWKS is
        the broker's one (broker/jwks.py)."""
        validator = self._oauth_validators.get(listener)
        if validator is None:
            cfg = self.broker.config
            if self.jwks is None and cfg.get_str("sasl.oauthbearer.jwks.endpoint.url"):
                self.jwks = JwksKeys(
                    cfg.get_str("sasl.oauthbearer.jwks.endpoint.url"),
                    cfg.get_int("sasl.oauthbearer.jwks.endpoint.refresh.ms"),
                    cfg.get_int("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"),
                    cfg.get_int("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"),
                )
            validator = validator_from_config(
                cfg, listener, self.jwks, jaas_options(cfg.jaas_config("OAUTHBEARER", listener))
            )
            self._oauth_validators[listener] = validator
        return validator

    async def _serve_request(
        self, net: _core.NetworkServer, conn: int, frame: bytes, peer: str, principal: str | None, listener: int
    ) -> None:
        name = self.listeners[listener]
        session = self._session(conn, peer, name) if self.sasl[listener] else None
        state = self.connections.get(conn)
        if state is None:
            state = self.connections[conn] = {"id": conn}
        mechanism = session.mechanism if session is not None else None  # the exchange under way, if any
        if session is not None and session.raw_tokens:  # after SaslHandshake v0: a raw token
            reply, _ = await raw_token(session, bytes(frame))
            chunks, throttle_ms = ([reply] if reply is not None else None), 0
        else:
            try:
                chunks, throttle_ms = await self._handle_frame(frame, peer, principal, session, name, state)
            except ProtocolError as e:
                self._forget(conn)
                net.close(conn, str(e))
                return
            except Exception:
                # A bug in a handler must cost one connection, never the broker.
                log.exception("internal error serving %s; connection closed", peer, extra=fields(peer=peer))
                self._forget(conn)
                net.close(conn)
                return
        if session is not None and session.failed is not None:
            reason, session.failed = session.failed, None
            self._forget(conn)
            if self.audit is not None:
                claimed = claimed_user(reason)
                self.audit.authentication(
                    "failure",
                    session.principal or (f"User:{claimed}" if claimed else ""),
                    peer,
                    name,
                    mechanism,
                    reason,
                )
            # connection.failed.authentication.delay.ms: a password guesser waits for each answer
            await trio.sleep(self.broker.config.get_int("connection.failed.authentication.delay.ms") / 1000)
            net.respond_and_close(conn, chunks or [], reason)
            return
        if session is not None and session.completed is not None:
            who, session.completed = session.completed, None
            lifetime = session.granted_ms or None
            if session.token_authenticated:
                state["token_authenticated"] = True
            net.authenticated(conn, who, lifetime)
            if self.audit is not None:
                self.audit.authentication("success", who, peer, name, session._authenticated_mechanism)
            log.debug(
                "%s authenticated as %s%s",
                peer,
                who,
                f" for {lifetime} ms" if lifetime else "",
                extra=fields(peer=peer),
            )
        net.respond(conn, chunks, throttle_ms)

    async def _catch_up_schemas(self, net: _core.NetworkServer, conn: int, peer: str, missing: str) -> None:
        """A Produce with partitions naming a schema id this broker's table does not hold
        (`missing`, e.g. `orders-value id 7 (a record for orders-0)`), held back by the network
        thread: another broker's registry may have registered it a moment ago, so this broker's
        registry reads `_schemas` to its end (schema_registry/server.py); then the network
        thread appends them, refusing an id still missing (INVALID_RECORD)."""
        registry = self.broker.schema_registry
        if registry is not None:
            await registry.catch_up_for_produce(missing, peer)
        net.serve_caught_up(conn)

    async def _verify_produce(
        self,
        net: _core.NetworkServer,
        conn: int,
        frame: bytes,
        peer: str,
        verification: tuple[str, int, int, list[tuple[str, int]], bool, int],
    ) -> None:
        """A transactional Produce whose partitions its transaction coordinator must add
        (v2) or find in the transaction (v1) first (broker/add_partitions_to_txn.py); the
        network thread then serves it with the coordinator's verdicts."""
        txn_id, producer_id, producer_epoch, partitions, verify_only, version = verification
        try:
            manager = self.broker.add_partitions_to_txn
            if manager is None:
                added = {tp: (ErrorCode.NOT_ENOUGH_REPLICAS, "the broker is starting") for tp in partitions}
            else:
                added = await manager.add(txn_id, producer_id, producer_epoch, partitions, verify_only)
        except Exception:
            log.exception(
                "internal error adding %s to transactional id %r for %s; connection closed",
                partitions,
                txn_id,
                peer,
                extra=fields(transactional_id=txn_id, peer=peer),
            )
            net.close(conn)
            return
        verdicts = []
        for (topic, partition), (code, message) in added.items():
            if code != ErrorCode.NONE:
                code, message = for_produce(code, message, version)
                log.debug(
                    "produce to %s-%d from %s: %s (%s)",
                    topic,
                    partition,
                    peer,
                    ErrorCode(code).name if code in ErrorCode._value2member_map_ else code,
                    message,
                    extra=fields(topic=topic, partition=partition, peer=peer),
                )
            verdicts.append((topic, partition, code, message))
        net.serve_verified(conn, frame, verdicts)

    async def handle_frame(
        self,
        frame: bytes,
        peer: str,
        principal: str | None = "User:ANONYMOUS",
        session: SaslSession | None = None,
        listener: str | None = None,
        connection: dict | None = None,
    ) -> list | None:
        """Serve one request frame (without its size prefix); on a connection of the
        controller listener (coord/metadata/controller_channel.py) with the controller's table.
        `principal` None: a SASL connection that has not authenticated yet."""
        chunks, _throttle_ms = await self._handle_frame(frame, peer, principal, session, listener, connection)
        return chunks

    async def _handle_frame(
        self,
        frame: bytes,
        peer: str,
        principal: str | None,
        session: SaslSession | None,
        listener: str | None,
        connection: dict | None,
    ) -> tuple[list | None, int]:
        """`handle_frame`'s answer, and the request quota's throttle time (ms, 0: none)."""
        try:
            header, pos = decode_request_header(memoryview(frame))
        except ProtocolError as e:
            raise ProtocolError(f"request header from {peer} does not decode: {e}") from None
        api_key, version = header.request_api_key, header.request_api_version
        if principal is None and api_key not in PRE_AUTHENTICATION_APIS:
            raise ProtocolError(
                f"{API_NAMES.get(api_key, f'api {api_key}')} from {peer} before SASL authentication "
                "(only ApiVersions, SaslHandshake and SaslAuthenticate are served until then)"
            )
        table = CONTROLLER_HANDLERS if serving_controller_listener.get() else HANDLERS
        entry = table.get(api_key)
        if entry is not None and not entry.served_by(self.broker):
            entry = None
        name = API_NAMES.get(api_key, f"api {api_key}")
        if entry is not None and entry.handler is None:
            raise ProtocolError(f"{name} from {peer} reached the Python handlers; the network thread serves it")
        if entry is None or not entry.min_version <= version <= entry.max_version:
            if api_key == 18:  # ApiVersions: KIP-511 fallback reply at v0
                from logbroker.broker.handlers.api_versions import unsupported_version_response

                return encode_response(18, 0, header.correlation_id, unsupported_version_response()), 0
            raise ProtocolError(
                f"{name} v{version} from {peer} (client {header.client_id!r}) is not supported"
                + (f"; this broker serves v{entry.min_version}-{entry.max_version}" if entry else "")
            )
        # the request quota times the request from its decoding to its answer (not its waits)
        quotas = getattr(self.broker, "client_quotas", None)
        timer = None if quotas is None else quotas.request_times
        if timer is not None and (principal is None or api_key in CLUSTER_ACTIONS or table is not HANDLERS):
            timer = None  # exempt, as in Kafka
        task = timer.start() if timer is not None else None
        try:
            request, end = entry.request_class.decode(memoryview(frame), pos, version)
        except ProtocolError as e:
            if timer is not None:
                timer.forget(task)
            raise ProtocolError(f"{name} v{version} request from {peer} does not decode: {e}") from None
        if end != len(frame):
            log.debug(
                "%s v%d from %s: %d trailing bytes ignored",
                name,
                version,
                peer,
                len(frame) - end,
                extra=fields(peer=peer),
            )
        if listener is None:  # the controller listener's frames name none; a broker's primary one otherwise
            listener = (
                self.listeners[0]
                if self.listeners
                else self.broker.config.get_str("controller.listener.names").split(",")[0].strip().upper()
            )
        ctx = RequestContext(self.broker, header, peer, table, principal or "", session, listener, connection)
        try:
            response = await entry.handler(ctx, request)
        except ProtocolError as e:
            raise ProtocolError(f"{name} v{version} from {peer}: {e}") from None
        finally:
            took_ns = timer.stop(task) if timer is not None else 0
        throttle_ms = 0
        if timer is not None:
            user = principal.split(":", 1)[1] if ":" in principal else principal
            throttle_ms = quotas.core.record_request(user, header.client_id or "", took_ns)
            if throttle_ms > 0 and response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle_ms)
        if response is None:
            return None, throttle_ms
        return encode_response(api_key, version, header.correlation_id, response), throttle_ms
