//! ACL authorization with the semantics of Kafka's StandardAuthorizer, in one place for the
//! data path (Produce and Fetch, here in the network thread) and the Python handlers (every
//! other API, through `_core.Authorizer`).
//!
//! A request by `principal` from `host` to perform `operation` on a resource (type, name) is
//! decided so:
//! 1. authorization off (`authorizer.class.name` empty): allowed;
//! 2. the principal is one of `super.users`: allowed;
//! 3. the ACLs that match the resource: LITERAL with the resource's name or `*`, PREFIXED
//!    with a prefix of it. None at all: `allow.everyone.if.no.acl.found` decides;
//! 4. of those, the ones for the principal (or `User:*`) and the host (or `*`): a DENY for
//!    the operation or ALL denies;
//! 5. an ALLOW for the operation or ALL allows; DESCRIBE is implied by READ, WRITE, DELETE
//!    and ALTER, DESCRIBE_CONFIGS by ALTER_CONFIGS;
//! 6. otherwise denied.
//!
//! The ACLs come from the metadata image (`set_acls`, replaced whole on every change); the
//! lookups take a read lock and scan the ACLs of the resource type (tens to hundreds in
//! practice: cheaper than a cache keyed by strings).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

use super::LogLine;

/// Kafka's resource type codes.
pub mod resource {
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
    pub const TRANSACTIONAL_ID: i8 = 5;
    pub const DELEGATION_TOKEN: i8 = 6;
    pub const USER: i8 = 7;

    /// Kafka's name of a resource type (`ResourceType`).
    pub fn name(resource_type: i8) -> &'static str {
        match resource_type {
            TOPIC => "TOPIC",
            GROUP => "GROUP",
            CLUSTER => "CLUSTER",
            TRANSACTIONAL_ID => "TRANSACTIONAL_ID",
            DELEGATION_TOKEN => "DELEGATION_TOKEN",
            USER => "USER",
            _ => "UNKNOWN",
        }
    }
}

/// Kafka's ACL operation codes.
pub mod op {
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const IDEMPOTENT_WRITE: i8 = 12;

    /// Kafka's name of an operation (`AclOperation`).
    pub fn name(operation: i8) -> &'static str {
        match operation {
            ALL => "ALL",
            READ => "READ",
            WRITE => "WRITE",
            CREATE => "CREATE",
            DELETE => "DELETE",
            ALTER => "ALTER",
            DESCRIBE => "DESCRIBE",
            CLUSTER_ACTION => "CLUSTER_ACTION",
            DESCRIBE_CONFIGS => "DESCRIBE_CONFIGS",
            ALTER_CONFIGS => "ALTER_CONFIGS",
            IDEMPOTENT_WRITE => "IDEMPOTENT_WRITE",
            _ => "UNKNOWN",
        }
    }
}

pub const LITERAL: i8 = 3;
pub const PREFIXED: i8 = 4;
pub const DENY: i8 = 2;
pub const ALLOW: i8 = 3;
pub const WILDCARD: &str = "*";
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// The one CLUSTER resource's name.
pub const CLUSTER_NAME: &str = "kafka-cluster";

/// One ACL (an access control entry on a resource pattern).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    pub resource_type: i8,
    pub name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission: i8,
}

impl Acl {
    fn matches_resource(&self, resource_type: i8, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern_type {
                LITERAL => self.name == name || self.name == WILDCARD,
                PREFIXED => name.starts_with(self.name.as_str()),
                _ => false,
            }
    }

    fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == WILDCARD || self.host == host)
    }

    fn grants(&self, operation: i8) -> bool {
        self.operation == op::ALL
            || self.operation == operation
            || (operation == op::DESCRIBE && matches!(self.operation, op::READ | op::WRITE | op::DELETE | op::ALTER))
            || (operation == op::DESCRIBE_CONFIGS && self.operation == op::ALTER_CONFIGS)
    }
}

#[derive(Debug, Default)]
struct State {
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
    acls: Vec<Acl>,
}

#[derive(Debug, Default)]
pub struct Authorizer {
    enabled: AtomicBool,
    state: RwLock<State>,
}

impl Authorizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns authorization on with these settings (`super.users`, `allow.everyone.if.no.acl.found`).
    pub fn configure(&self, super_users: Vec<String>, allow_if_no_acl: bool) {
        let mut s = self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        s.super_users = super_users.into_iter().collect();
        s.allow_if_no_acl = allow_if_no_acl;
        self.enabled.store(true, Ordering::Release);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Replaces every ACL (the metadata image's, after each change).
    pub fn set_acls(&self, acls: Vec<Acl>) {
        self.state.write().unwrap_or_else(std::sync::PoisonError::into_inner).acls = acls;
    }

    /// Whether `principal` from `host` may perform `operation` on the resource (module doc).
    pub fn authorize(&self, principal: &str, host: &str, resource_type: i8, name: &str, operation: i8) -> bool {
        if !self.enabled() {
            return true;
        }
        let s = self.state.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.super_users.contains(principal) {
            return true;
        }
        let mut any = false;
        let mut allowed = false;
        for acl in s.acls.iter().filter(|a| a.matches_resource(resource_type, name)) {
            any = true;
            if !acl.applies_to(principal, host) {
                continue;
            }
            if acl.permission == DENY && (acl.operation == op::ALL || acl.operation == operation) {
                return false;
            }
            if acl.permission == ALLOW && acl.grants(operation) {
                allowed = true;
            }
        }
        if !any {
            return s.allow_if_no_acl;
        }
        allowed
    }
}

/// Who sent a request: the peer address and the connection's principal.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    pub peer: &'a str,
    pub principal: &'a str,
    /// The index of the listener the request came in on; 0 is the inter-broker listener,
    /// whose addresses the data path's leader hints (KIP-951) name.
    pub listener: usize,
    /// The request header's client id ("" without one), for client quotas.
    pub client_id: &'a str,
    /// The network loop's id of the connection (fetch sessions end with it).
    pub conn: u64,
}

impl Caller<'_> {
    /// Whether leader hints (KIP-951 node endpoints) may be sent: they carry the inter-broker
    /// listener's addresses, which are only right for its own clients.
    pub fn takes_hints(&self) -> bool {
        self.listener == 0
    }
}

impl<'a> Caller<'a> {
    pub fn host(&self) -> &'a str {
        host_of(self.peer)
    }

    /// Whether the caller may perform `operation` on the resource.
    pub fn may(&self, authorizer: &Authorizer, resource_type: i8, name: &str, operation: i8) -> bool {
        authorizer.authorize(self.principal, self.host(), resource_type, name, operation)
    }

    /// The DEBUG line for a request of `api` denied `operation` on the resource, which the
    /// control plane's audit log reads (Python's `log_format.DENIAL_LINE`):
    /// `User:bob from 127.0.0.1:5000 denied WRITE on TOPIC "orders" (Produce, listener 1)`.
    pub fn denial(&self, operation: i8, resource_type: i8, name: &str, api: &str) -> LogLine {
        LogLine::new(
            LogLine::DEBUG,
            format!(
                "{} from {} denied {} on {} {name:?} ({api}, listener {})",
                self.principal,
                self.peer,
                op::name(operation),
                resource::name(resource_type),
                self.listener
            ),
        )
    }
}

/// The host part of a peer address ("127.0.0.1:5000" -> "127.0.0.1", "[::1]:5000" -> "::1").
pub fn host_of(peer: &str) -> &str {
    let host = peer.rsplit_once(':').map_or(peer, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: i8, name: &str, pattern: i8, principal: &str, host: &str, operation: i8, permission: i8) -> Acl {
        Acl {
            resource_type: rt,
            name: name.into(),
            pattern_type: pattern,
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        }
    }

    #[test]
    fn kafka_rules() {
        let a = Authorizer::new();
        assert!(a.authorize("User:x", "h", resource::TOPIC, "t", op::READ), "off: everything allowed");
        a.configure(vec!["User:admin".into()], false);
        assert!(!a.authorize("User:x", "h", resource::TOPIC, "t", op::READ), "no ACL, allow.everyone false");
        assert!(a.authorize("User:admin", "h", resource::TOPIC, "t", op::DELETE), "super user");
        a.set_acls(vec![
            acl(resource::TOPIC, "orders", LITERAL, "User:alice", "*", op::READ, ALLOW),
            acl(resource::TOPIC, "pay-", PREFIXED, "User:*", "*", op::WRITE, ALLOW),
            acl(resource::TOPIC, "pay-secret", LITERAL, "User:bob", "10.0.0.1", op::ALL, DENY),
            acl(resource::TOPIC, "*", LITERAL, "User:carol", "*", op::ALTER_CONFIGS, ALLOW),
        ]);
        assert!(a.authorize("User:alice", "h", resource::TOPIC, "orders", op::READ));
        assert!(a.authorize("User:alice", "h", resource::TOPIC, "orders", op::DESCRIBE), "implied by READ");
        assert!(!a.authorize("User:alice", "h", resource::TOPIC, "orders", op::WRITE));
        assert!(!a.authorize("User:bob", "h", resource::TOPIC, "orders", op::READ));
        assert!(a.authorize("User:bob", "h", resource::TOPIC, "pay-in", op::WRITE), "prefixed, any user");
        assert!(a.authorize("User:bob", "h", resource::TOPIC, "pay-secret", op::WRITE), "deny is for another host");
        assert!(!a.authorize("User:bob", "10.0.0.1", resource::TOPIC, "pay-secret", op::WRITE), "deny wins");
        assert!(a.authorize("User:carol", "h", resource::TOPIC, "anything", op::DESCRIBE_CONFIGS), "implied, wildcard");
        assert!(!a.authorize("User:carol", "h", resource::GROUP, "anything", op::DESCRIBE_CONFIGS), "another type");
        a.configure(vec![], true);
        assert!(a.authorize("User:x", "h", resource::GROUP, "g", op::READ), "no ACL on the group: allowed");
        assert!(!a.authorize("User:x", "h", resource::TOPIC, "orders", op::READ), "ACLs on it: not for x");
    }

    #[test]
    fn denial_lines() {
        let caller = Caller { peer: "127.0.0.1:5000", principal: "User:bob", listener: 1, client_id: "c", conn: 7 };
        let line = caller.denial(op::WRITE, resource::TOPIC, "orders", "Produce");
        assert_eq!(line.level, LogLine::DEBUG);
        assert_eq!(
            line.message,
            r#"User:bob from 127.0.0.1:5000 denied WRITE on TOPIC "orders" (Produce, listener 1)"#
        );
        let line = caller.denial(op::CLUSTER_ACTION, resource::CLUSTER, CLUSTER_NAME, "Fetch");
        assert_eq!(
            line.message,
            r#"User:bob from 127.0.0.1:5000 denied CLUSTER_ACTION on CLUSTER "kafka-cluster" (Fetch, listener 1)"#
        );
    }

    #[test]
    fn hosts() {
        assert_eq!(host_of("127.0.0.1:5000"), "127.0.0.1");
        assert_eq!(host_of("[::1]:5000"), "::1");
    }
}
