//! The schema ids registered under each subject, for topics whose records must carry one
//! (`confluent.key.schema.validation`, `confluent.value.schema.validation`).
//!
//! The schema registry (python/logbroker/schema_registry) is the source: as it applies the
//! `_schemas` topic it tells this table each subject's ids (`set_subject`); the data path reads
//! it on every produce to such a topic. A record passes when its key (or value) is null, or
//! starts with Confluent's framing (magic byte 0, then the schema id as a big-endian int32)
//! naming an id registered under the topic's subject, `<topic>-key` or `<topic>-value`
//! (Confluent's default subject naming). Until a registry runs on this broker (`active`)
//! nothing passes: the refusal says so.
//!
//! The table can lag the registry: an id registered through another broker's registry is
//! acknowledged once *that* registry read it back. So a framed id missing here is not refused
//! at once: the partition waits while this broker's registry reads `_schemas` to its end, and
//! only then is a missing id refused (produce.rs, `Outcome::CatchUpSchemas`).

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasher;
use std::sync::RwLock;

#[derive(Default)]
pub struct SchemaIds {
    inner: RwLock<Inner>,
}

#[derive(Default)]
pub struct Inner {
    active: bool,
    by_subject: HashMap<String, HashSet<i32>>,
}

/// The schema id a key or value names (Confluent's framing), None when it is not framed.
pub fn framed_id(b: &[u8]) -> Option<i32> {
    (b.len() >= 5 && b[0] == 0).then(|| i32::from_be_bytes([b[1], b[2], b[3], b[4]]))
}

/// Why a record fails the check (None: it passes).
pub fn check_framed<S: BuildHasher>(
    bytes: Option<&[u8]>,
    subject: &str,
    ids: Option<&HashSet<i32, S>>,
) -> Option<String> {
    let b = bytes?;
    let Some(id) = framed_id(b) else {
        return Some(format!(
            "does not start with a schema id (magic byte 0 and 4 bytes; got {} byte(s){})",
            b.len(),
            if b.is_empty() { String::new() } else { format!(", first {:#04x}", b[0]) }
        ));
    };
    match ids {
        Some(set) if set.contains(&id) => None,
        _ => Some(format!("has schema id {id}, which is not registered under subject {subject}")),
    }
}

impl SchemaIds {
    pub fn set_active(&self, active: bool) {
        self.inner.write().expect("schema ids lock").active = active;
    }

    /// Replaces `subject`'s ids (empty: the subject is gone).
    pub fn set_subject(&self, subject: &str, ids: Vec<i32>) {
        let mut g = self.inner.write().expect("schema ids lock");
        if ids.is_empty() {
            g.by_subject.remove(subject);
        } else {
            g.by_subject.insert(subject.to_owned(), ids.into_iter().collect());
        }
    }

    /// The table for one produce request's checks, read-locked while it is held (the
    /// registry's updates wait for the append); Err when no registry runs on this broker.
    pub fn read(&self) -> Result<std::sync::RwLockReadGuard<'_, Inner>, String> {
        let g = self.inner.read().expect("schema ids lock");
        if !g.active {
            return Err(
                "this broker does not serve the schema registry (schema.registry.listen), which the check needs"
                    .to_owned(),
            );
        }
        Ok(g)
    }
}

impl Inner {
    /// The ids registered under `subject` (None: none).
    pub fn subject(&self, subject: &str) -> Option<&HashSet<i32>> {
        self.by_subject.get(subject)
    }
}
