"""Forwarding metadata changes from any broker to the active controller.

In a cluster only the active controller (the Raft leader) writes the metadata log. When a
broker that is not the active controller is asked to create or delete a topic, add
partitions or change topic configs (by a client, by Metadata's auto-creation, by the group
coordinator creating __consumer_offsets), `Controller` hands the call to `Forwarder`, which
sends the matching Kafka request to the active controller's CONTROLLER listener
(controller_channel.py), turns a per-topic error back into `ControllerError` with the
controller's code and message, and on success waits (bounded) until this broker's own
image shows the change, so the client's next Metadata on this broker sees it.

    create_topic          CreateTopics v7
    delete_topic          DeleteTopics v6
    create_partitions     CreatePartitions v3
    alter_topic_configs   AlterConfigs v2 (replace) or IncrementalAlterConfigs v1
    alter_group_configs   the same, for a GROUP resource
    alter_client_metrics_configs  the same, for a CLIENT_METRICS resource
    elect_leaders         ElectLeaders v2
    alter_reassignments   AlterPartitionReassignments v1
    alter_scram_credentials  AlterUserScramCredentials v0 (per-user results returned as they come)
    alter_client_quotas   AlterClientQuotas v1 (per-entity results returned as they come)
    create_acls           CreateAcls v3 (per-ACL results returned as they come)
    create_delegation_token  CreateDelegationToken v3, the owner named (KIP-373)
    renew_delegation_token   RenewDelegationToken v2
    expire_delegation_token  ExpireDelegationToken v2
    delete_acls           DeleteAcls v3 (per-filter results, with the ACLs each deleted)
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

import trio

from logbroker.coord.metadata.config_control import Change
from logbroker.coord.metadata.control import ControllerError
from logbroker.coord.metadata.controller_channel import ControllerClient, ControllerUnavailable
from logbroker.coord.metadata.metadata import (
    AclBinding,
    AclBindingFilter,
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicState,
)
from logbroker.protocol import REQUESTS, ErrorCode
from logbroker.scram import MECHANISM_TYPES

if TYPE_CHECKING:
    from logbroker.coord.metadata.replication_control import NewTopicSpec

log = logging.getLogger("logbroker.controller")

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
GROUP_RESOURCE = 32
CLIENT_METRICS_RESOURCE = 16
TOPIC_CONFIG_SOURCE = 1  # CreateTopics result configs: set on the topic
SET, DELETE = 0, 1
CATCH_UP_SECONDS = 5.0

# The client's own timeout_ms (CreateTopics, DeleteTopics, CreatePartitions) bounds how long a
# forwarded request waits for a controller; set by the handler with `client_timeout`.
_client_timeout: contextvars.ContextVar[float | None] = contextvars.ContextVar("client_timeout", default=None)


@contextlib.contextmanager
def client_timeout(timeout_ms: int):
    """Within this block a forwarded request waits at most the client's `timeout_ms` (at
    least 1 s, at most the forwarder's own limit) for the active controller."""
    token = _client_timeout.set(max(1.0, timeout_ms / 1000))
    try:
        yield
    finally:
        _client_timeout.reset(token)


class ImageSource(Protocol):
    """What the forwarder uses of the controller (coord/metadata/controller.py): this node's image,
    to wait until a forwarded change shows in it, and its identity."""

    image: MetadataImage
    local: BrokerRegistration

    async def image_changed(self) -> None: ...


class Forwarder:
    def __init__(self, controller: ImageSource, client: ControllerClient, timeout: float = 30.0) -> None:
        self.controller = controller
        self.client = client
        self.timeout = timeout

    async def _send(self, api_key: int, version: int, body, result_of: Callable[[object], object]):
        """Send and return the result `result_of` picks (the one per-topic result, or the
        response itself when its error code is top-level); NOT_CONTROLLER (leadership moved
        while the request travelled) is retried, any other error raised."""
        response = await self._request(
            api_key, version, body, lambda r: result_of(r).error_code == ErrorCode.NOT_CONTROLLER
        )
        result = result_of(response)
        if result.error_code != ErrorCode.NONE:
            raise ControllerError(
                ErrorCode(result.error_code),
                getattr(result, "error_message", None) or ErrorCode(result.error_code).name,
            )
        return result

    async def _caught_up(self, done: Callable[[MetadataImage], bool], what: str) -> None:
        with trio.move_on_after(CATCH_UP_SECONDS):
            while not done(self.controller.image):
                await self.controller.image_changed()
            return
        log.warning(
            "node %d: %s was committed by the controller but is not in this node's image after %.0f s",
            self.controller.local.node_id,
            what,
            CATCH_UP_SECONDS,
        )

    async def create_topics(self, specs: list[NewTopicSpec], validate_only: bool) -> list[TopicState | ControllerError]:
        """One CreateTopics v7 with every topic; each result is the topic (once this node's
        image has it) or its error."""
        req = REQUESTS[19]
        body = req(
            topics=[
                req.CreatableTopic(
                    name=s.name,
                    num_partitions=s.num_partitions if not s.assignments else -1,
                    replication_factor=s.replication_factor if not s.assignments else -1,
                    assignments=[
                        req.CreatableReplicaAssignment(partition_index=p, broker_ids=list(b))
                        for p, b in sorted((s.assignments or {}).items())
                    ],
                    configs=[req.CreatableTopicConfig(name=k, value=v) for k, v in sorted(s.configs.items())],
                )
                for s in specs
            ],
            timeout_ms=int(self.timeout * 1000),
            validate_only=validate_only,
        )
        response = await self._request(
            19, 7, body, lambda r: any(t.error_code == ErrorCode.NOT_CONTROLLER for t in r.topics)
        )
        out: list[TopicState | ControllerError] = []
        created: dict[str, object] = {}
        for s, res in zip(specs, response.topics):
            if res.error_code != ErrorCode.NONE:
                out.append(
                    ControllerError(ErrorCode(res.error_code), res.error_message or ErrorCode(res.error_code).name)
                )
            elif validate_only:
                parts = {
                    p: PartitionState(p, -1, 0, [-1] * res.replication_factor, [], 0) for p in range(res.num_partitions)
                }
                overrides = {c.name: c.value for c in res.configs or [] if c.config_source == TOPIC_CONFIG_SOURCE}
                out.append(TopicState(s.name, res.topic_id, parts, overrides))
            else:
                created[s.name] = res.topic_id
                out.append(TopicState(s.name, res.topic_id, {}, {}))
        if created:
            await self._caught_up(
                lambda im: all(n in im.topics and im.topics[n].topic_id == i for n, i in created.items()),
                f"{len(created)} topic(s) ({', '.join(list(created)[:3])}...)",
            )
            out = [
                self.controller.image.topics.get(t.name, t) if isinstance(t, TopicState) and t.name in created else t
                for t in out
            ]
        return out

    async def delete_topic(self, name: str) -> TopicState:
        topic = self.controller.image.topics.get(name)
        req = REQUESTS[20]
        body = req(topics=[req.DeleteTopicState(name=name)], timeout_ms=int(self.timeout * 1000))
        res = await self._send(20, 6, body, lambda r: r.responses[0])
        await self._caught_up(
            lambda im: name not in im.topics or im.topics[name].topic_id != res.topic_id, f"deletion of topic {name!r}"
        )
        if topic is None:
            raise ControllerError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
        return topic

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        req = REQUESTS[37]
        t = req.CreatePartitionsTopic(
            name=name,
            count=count,
            assignments=None
            if assignments is None
            else [req.CreatePartitionsAssignment(broker_ids=list(a)) for a in assignments],
        )
        body = req(topics=[t], timeout_ms=int(self.timeout * 1000), validate_only=validate_only)
        await self._send(37, 3, body, lambda r: r.results[0])
        if not validate_only:
            await self._caught_up(
                lambda im: name in im.topics and len(im.topics[name].partitions) >= count,
                f"topic {name!r} with {count} partitions",
            )

    async def alter_topic_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        await self._alter_configs(TOPIC_RESOURCE, name, changes, replace, validate_only)
        if not validate_only:

            def applied(im: MetadataImage) -> bool:  # values may be normalised: look at the keys
                t = im.topics.get(name)
                return t is not None and all((k in t.configs) == (v is not None) for k, v in changes.items())

            await self._caught_up(applied, f"the configs of topic {name!r}")

    async def alter_group_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        await self._alter_configs(GROUP_RESOURCE, name, changes, replace, validate_only)
        if not validate_only:

            def applied(im: MetadataImage) -> bool:
                c = im.group_configs.get(name, {})
                return all((k in c) == (v is not None) for k, v in changes.items())

            await self._caught_up(applied, f"the configs of group {name!r}")

    async def alter_client_metrics_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        await self._alter_configs(CLIENT_METRICS_RESOURCE, name, changes, replace, validate_only)
        if not validate_only:

            def applied(im: MetadataImage) -> bool:
                c = im.client_metrics.get(name, {})
                if replace:
                    return set(c) == {k for k, v in changes.items() if v is not None}
                return all((k in c) == (v is not None) for k, v in changes.items())

            await self._caught_up(applied, f"the client-metrics subscription {name!r}")

    async def alter_broker_configs(
        self, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        await self._alter_configs(BROKER_RESOURCE, name, changes, replace, validate_only)
        if not validate_only:

            def applied(im: MetadataImage) -> bool:
                c = im.broker_configs.get(name, {})
                return all((k in c) == (v is not None) for k, v in changes.items())

            await self._caught_up(applied, f"the configs of broker {name or '(cluster default)'}")

    async def _alter_configs(
        self, resource_type: int, name: str, changes: Mapping[str, Change], replace: bool, validate_only: bool
    ) -> None:
        if replace:
            req = REQUESTS[33]
            res = req.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[req.AlterableConfig(name=k, value=v) for k, v in sorted(changes.items()) if v is not None],
            )
            await self._send(33, 2, req(resources=[res], validate_only=validate_only), lambda r: r.responses[0])
        else:
            req = REQUESTS[44]
            res = req.AlterConfigsResource(
                resource_type=resource_type,
                resource_name=name,
                configs=[
                    req.AlterableConfig(name=k, config_operation=v[0], value=v[1])
                    if isinstance(v, tuple)
                    else req.AlterableConfig(name=k, config_operation=DELETE if v is None else SET, value=v)
                    for k, v in sorted(changes.items())
                ],
            )
            await self._send(44, 1, req(resources=[res], validate_only=validate_only), lambda r: r.responses[0])

    async def _caught_up_to(self, epochs: dict[tuple[str, int], int], what: str) -> None:
        """Wait until this node's image has every partition at least at the given partition
        epoch."""

        def done(im: MetadataImage) -> bool:
            for (name, i), pe in epochs.items():
                t = im.topics.get(name)
                if t is None or i not in t.partitions or t.partitions[i].partition_epoch < pe:
                    return False
            return True

        await self._caught_up(done, what)

    async def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, list[int]]] | None
    ) -> list[tuple[str, int, ErrorCode, str]]:
        req = REQUESTS[43]
        body = req(
            election_type=election_type,
            timeout_ms=int(self.timeout * 1000),
            topic_partitions=None
            if partitions is None
            else [req.TopicPartitions(topic=n, partitions=list(ps)) for n, ps in partitions],
        )
        before = {
            (t.name, ps.partition): ps.partition_epoch
            for t in self.controller.image.topics.values()
            for ps in t.partitions.values()
        }
        response = await self._send(43, 2, body, lambda r: r)
        results = [
            (r.topic, p.partition_id, ErrorCode(p.error_code), p.error_message or "")
            for r in response.replica_election_results
            for p in r.partition_result
        ]
        moved = {(n, i): before.get((n, i), -1) + 1 for n, i, code, _m in results if code == ErrorCode.NONE}
        await self._caught_up_to(moved, "leader election")
        return results

    async def alter_reassignments(
        self, items: list[tuple[str, int, list[int] | None]], allow_replication_factor_change: bool
    ) -> list[tuple[str, int, ErrorCode, str]]:
        req = REQUESTS[45]
        topics: dict[str, list] = {}
        for name, i, target in items:
            topics.setdefault(name, []).append(req.ReassignablePartition(partition_index=i, replicas=target))
        body = req(
            timeout_ms=int(self.timeout * 1000),
            allow_replication_factor_change=allow_replication_factor_change,
            topics=[req.ReassignableTopic(name=n, partitions=ps) for n, ps in topics.items()],
        )
        # not waited for in this node's image: an accepted target equal to the current
        # replicas commits nothing, so there is no epoch to wait for
        response = await self._send(45, 1, body, lambda r: r)
        return [
            (t.name, p.partition_index, ErrorCode(p.error_code), p.error_message or "")
            for t in response.responses
            for p in t.partitions
        ]

    async def alter_scram_credentials(
        self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, str, int, bytes, bytes]]
    ) -> list[tuple[str, ErrorCode, str | None]]:
        req = REQUESTS[51]
        # an unknown mechanism name goes as type 0 (Kafka's UNKNOWN), which the controller refuses
        body = req(
            deletions=[req.ScramCredentialDeletion(name=u, mechanism=MECHANISM_TYPES.get(m, 0)) for u, m in deletions],
            upsertions=[
                req.ScramCredentialUpsertion(
                    name=u, mechanism=MECHANISM_TYPES.get(m, 0), iterations=i, salt=salt, salted_password=salted
                )
                for u, m, i, salt, salted in upsertions
            ],
        )

        response = await self._request(
            51, 0, body, lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER for x in r.results)
        )
        results = [(r.user, ErrorCode(r.error_code), r.error_message) for r in response.results]
        done = {user for user, code, _m in results if code == ErrorCode.NONE}

        def applied(im: MetadataImage) -> bool:
            for user, mechanism in deletions:
                if user in done and im.scram_credential(user, mechanism) is not None:
                    return False
            for user, mechanism, iterations, salt, _salted in upsertions:
                c = im.scram_credential(user, mechanism)
                if user in done and (c is None or (c.salt, c.iterations) != (salt, iterations)):
                    return False
            return True

        if done:
            await self._caught_up(applied, f"the SCRAM credentials of user(s) {sorted(done)}")
        return results

    async def create_delegation_token(self, owner: str, renewers: list[str], max_lifetime_ms: int):
        req = REQUESTS[38]
        kind, _, name = owner.partition(":")
        body = req(
            owner_principal_type=kind,
            owner_principal_name=name,
            max_lifetime_ms=max_lifetime_ms,
            renewers=[
                req.CreatableRenewers(principal_type=r.partition(":")[0], principal_name=r.partition(":")[2])
                for r in renewers
            ],
        )
        r = await self._send(38, 3, body, lambda r: r)
        token_id = r.token_id
        await self._caught_up(lambda im: token_id in im.delegation_tokens, f"delegation token {token_id}")
        token = self.controller.image.delegation_tokens.get(token_id)
        if token is None:
            raise ControllerError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"delegation token {token_id} was created but has not reached this node yet; describe it in a moment",
            )
        return token

    async def renew_delegation_token(self, token_id: str, hmac: bytes, period_ms: int) -> int:
        return await self._token_expiry(39, REQUESTS[39](hmac=hmac, renew_period_ms=period_ms), token_id)

    async def expire_delegation_token(self, token_id: str, hmac: bytes, period_ms: int) -> int:
        return await self._token_expiry(40, REQUESTS[40](hmac=hmac, expiry_time_period_ms=period_ms), token_id)

    async def _token_expiry(self, api_key: int, body, token_id: str) -> int:
        """Renew (39) or Expire (40) v2: the token's new expiry, once this node's image has it
        (or no longer has the token)."""
        expiry = (await self._send(api_key, 2, body, lambda r: r)).expiry_timestamp_ms
        await self._caught_up(
            lambda im: token_id not in im.delegation_tokens or im.delegation_tokens[token_id].expiry_ms == expiry,
            f"delegation token {token_id}",
        )
        return expiry

    async def alter_client_quotas(
        self, entries: list[tuple[list[tuple[str, str | None]], list[tuple[str, float, bool]]]], validate_only: bool
    ) -> list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]]:
        from logbroker.coord.metadata import client_quotas

        req = REQUESTS[49]
        body = req(
            entries=[
                req.EntryData(
                    entity=[req.EntityData(entity_type=t, entity_name=n) for t, n in comps],
                    ops=[req.OpData(key=k, value=v, remove=r) for k, v, r in ops],
                )
                for comps, ops in entries
            ],
            validate_only=validate_only,
        )

        response = await self._request(
            49, 1, body, lambda r: any(e.error_code == ErrorCode.NOT_CONTROLLER for e in r.entries)
        )
        results = [
            ([(c.entity_type, c.entity_name) for c in e.entity], ErrorCode(e.error_code), e.error_message)
            for e in response.entries
        ]
        if validate_only:
            return results
        wanted = {}
        for (comps, ops), (_c, code, _m) in zip(entries, results):
            if code == ErrorCode.NONE:
                wanted[client_quotas.validated_entity(comps)] = {k: None if r else float(v) for k, v, r in ops}

        def applied(im: MetadataImage) -> bool:
            return all(
                im.client_quotas.get(entity, {}).get(k) == v for entity, kv in wanted.items() for k, v in kv.items()
            )

        if wanted:
            await self._caught_up(
                applied, "client quotas of " + "; ".join(client_quotas.entity_name(e) for e in wanted)
            )
        return results

    async def unregister_broker(self, node_id: int) -> None:
        """UnregisterBroker v0; waits until this node's image no longer shows the broker's
        registration of the time the request was sent (it may register again at once)."""
        epoch = getattr(self.controller.image.brokers.get(node_id), "epoch", None)
        await self._send(64, 0, REQUESTS[64](broker_id=node_id), lambda r: r)
        await self._caught_up(
            lambda im: getattr(im.brokers.get(node_id), "epoch", None) != epoch or epoch is None,
            f"the unregistration of broker {node_id}",
        )

    async def unregister_controller(self, node_id: int) -> None:
        """UnregisterController v0 (Kafka 4.4)."""
        await self._send(94, 0, REQUESTS[94](controller_id=node_id), lambda r: r)

    async def _request(self, api_key: int, version: int, body, moved: Callable[[object], bool]):
        """Send a request whose results are per item; ControllerError only when no active
        controller answered."""
        try:
            timeout = min(self.timeout, _client_timeout.get() or self.timeout)
            return await self.client.request(api_key, version, body, timeout, retry_on=moved)
        except ControllerUnavailable as e:
            raise ControllerError(ErrorCode.REQUEST_TIMED_OUT, str(e)) from None

    async def update_features(
        self, updates: list[tuple[str, int, int]], validate_only: bool
    ) -> list[tuple[str, ErrorCode, str | None]]:
        """UpdateFeatures v1 (per-feature results); waits until this node's image shows the
        accepted levels."""
        req = REQUESTS[57]
        body = req(
            timeout_ms=int(self.timeout * 1000),
            validate_only=validate_only,
            feature_updates=[
                req.FeatureUpdateKey(feature=n, max_version_level=level, upgrade_type=kind)
                for n, level, kind in updates
            ],
        )
        response = await self._request(57, 1, body, lambda r: r.error_code == ErrorCode.NOT_CONTROLLER)
        if response.error_code != ErrorCode.NONE:
            raise ControllerError(ErrorCode(response.error_code), response.error_message or "UpdateFeatures failed")
        results = [(r.feature, ErrorCode(r.error_code), r.error_message) for r in response.results]
        wanted = {
            n: max(level, 0) for (n, level, _k), (_f, code, _m) in zip(updates, results) if code == ErrorCode.NONE
        }
        if wanted and not validate_only and all(c == ErrorCode.NONE for _f, c, _m in results):
            await self._caught_up(
                lambda im: all(im.features.get(n, 0) == v for n, v in wanted.items()),
                "feature levels " + ", ".join(f"{n}={v}" for n, v in wanted.items()),
            )
        return results

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        req = REQUESTS[30]
        body = req(
            creations=[
                req.AclCreation(
                    resource_type=b.resource_type,
                    resource_name=b.resource_name,
                    resource_pattern_type=b.pattern_type,
                    principal=b.principal,
                    host=b.host,
                    operation=b.operation,
                    permission_type=b.permission_type,
                )
                for b in bindings
            ]
        )
        response = await self._request(
            30, 3, body, lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER for x in r.results)
        )
        results = [(ErrorCode(r.error_code), r.error_message) for r in response.results]
        created = [b for b, (code, _m) in zip(bindings, results) if code == ErrorCode.NONE]
        if created:
            await self._caught_up(lambda im: set(created) <= set(im.acls.values()), f"{len(created)} new ACL(s)")
        return results

    async def delete_acls(
        self, filters: list[AclBindingFilter]
    ) -> list[tuple[ErrorCode, str | None, list[AclBinding]]]:
        req = REQUESTS[31]
        body = req(
            filters=[
                req.DeleteAclsFilter(
                    resource_type_filter=f.resource_type,
                    resource_name_filter=f.resource_name,
                    pattern_type_filter=f.pattern_type,
                    principal_filter=f.principal,
                    host_filter=f.host,
                    operation=f.operation,
                    permission_type=f.permission_type,
                )
                for f in filters
            ]
        )
        response = await self._request(
            31, 3, body, lambda r: any(x.error_code == ErrorCode.NOT_CONTROLLER for x in r.filter_results)
        )
        results = [
            (
                ErrorCode(r.error_code),
                r.error_message,
                [
                    AclBinding(
                        m.resource_type,
                        m.resource_name,
                        m.pattern_type,
                        m.principal,
                        m.host,
                        m.operation,
                        m.permission_type,
                    )
                    for m in r.matching_acls
                ],
            )
            for r in response.filter_results
        ]
        deleted = {b for _c, _m, matched in results for b in matched}
        if deleted:
            await self._caught_up(
                lambda im: not deleted & set(im.acls.values()), f"the deletion of {len(deleted)} ACL(s)"
            )
        return results
