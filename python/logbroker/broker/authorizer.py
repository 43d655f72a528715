"""ACL authorization on the broker: Kafka's StandardAuthorizer rules, with the ACLs of the
metadata image.

The decision itself is made in Rust (rust/src/server/authorizer.rs, `_core.Authorizer`,
which has the rules), once for both sides: the network thread checks Produce (WRITE on
the topic, and on the transactional id) and Fetch (READ on the topic; CLUSTER_ACTION on the
cluster for a follower) itself, and the Python handlers ask through
`RequestContext.authorize`. This module owns the configuration and keeps the ACLs current:

    authorizer.class.name            empty (default): no authorization, every request allowed
                                     and the ACL APIs answer SECURITY_DISABLED, as in Kafka;
                                     org.apache.kafka.metadata.authorizer.StandardAuthorizer:
                                     ACLs are enforced
    super.users                      principals allowed everything, `User:admin;User:ops`
    allow.everyone.if.no.acl.found   a resource no ACL matches is open to everyone (default false)

The ACLs are the image's (`MetadataImage.acls`, written by the controller through
CreateAcls/DeleteAcls); `apply_metadata` hands them to the Rust authorizer after every
change of the image.
"""

from __future__ import annotations

import logging

from logbroker import _core
from logbroker.common.acl import CLUSTER_NAME, AclOperation, ResourceType, host_of

log = logging.getLogger("logbroker.broker.authorizer")


class AclAuthorizer:
    """The broker's authorizer: configured from the broker config, ACLs from the image."""

    def __init__(self, config, core: _core.Authorizer) -> None:
        self.core = core
        self.enabled = bool(config.get_str("authorizer.class.name"))
        if self.enabled:
            supers = [p.strip() for p in config.get_str("super.users").split(";") if p.strip()]
            core.configure(supers, config.get_bool("allow.everyone.if.no.acl.found"))
            log.info(
                "ACL authorization on (%s); super users %s; allow.everyone.if.no.acl.found=%s",
                config.get_str("authorizer.class.name"),
                supers or "none",
                config.get_bool("allow.everyone.if.no.acl.found"),
            )
        self._acls = None

    async def apply_metadata(self, image, delta=None) -> None:
        """The image changed: hand its ACLs to the Rust authorizer when they changed (a
        published image is never changed, and unchanged ACLs are the same dict)."""
        acls = getattr(image, "acls", {})
        if acls is self._acls or acls == self._acls:
            return
        self._acls = acls
        self.core.set_acls(
            [
                (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)
                for b in acls.values()
            ]
        )

    def authorize(self, principal: str, peer: str, resource_type: int, name: str, operation: int) -> bool:
        return self.core.authorize(principal, host_of(peer), resource_type, name, operation)

    def admit_node(self, principal: str, host: str) -> str | None:
        """Whether a connection may use the controller listener (quorum_transport.py): None,
        or why not. Kafka's controller APIs each require CLUSTER_ACTION on the cluster."""
        if self.core.authorize(principal, host, ResourceType.CLUSTER, CLUSTER_NAME, AclOperation.CLUSTER_ACTION):
            return None
        return (
            f"{principal} may not CLUSTER_ACTION the cluster (only other nodes may: name them in super.users, "
            "or grant them CLUSTER_ACTION)"
        )
