//! `LogConfig`: the per-partition settings, with Kafka's topic-level key names and defaults.
//!
//! | key | default | meaning |
//! |---|---|---|
//! | `segment.bytes` | 1073741824 | roll when the active segment would grow past this |
//! | `segment.ms` | 604800000 | roll a non-empty active segment this long after its first append |
//! | `segment.index.bytes` | 10485760 | preallocated size of `.index`/`.timeindex`; roll when full |
//! | `index.interval.bytes` | 4096 | bytes of log between two index entries |
//! | `flush.messages` | i64::MAX | fsync after this many unflushed messages (MAX: rely on the page cache) |
//! | `flush.ms` | i64::MAX | fsync when the last flush is this old |
//! | `retention.ms` | 604800000 | delete segments whose newest record is older (-1: forever) |
//! | `retention.bytes` | -1 | delete oldest segments while the log is larger (-1: no limit) |
//! | `message.max.bytes` (alias `max.message.bytes`) | 1048588 | largest batch accepted |
//! | `message.timestamp.type` | CreateTime | or LogAppendTime |
//! | `producer.id.expiration.ms` | 86400000 | forget idle idempotent producers after this |
//! | `cleanup.policy` | delete | `delete`, `compact`, or both (`compact,delete`, any order) |
//! | `delete.retention.ms` | 86400000 | how long the cleaner keeps tombstones after it first saw them (delete horizon) |
//! | `min.compaction.lag.ms` | 0 | a segment is cleanable only once its newest record is this old |
//! | `max.compaction.lag.ms` | i64::MAX | clean regardless of the dirty ratio once the oldest dirty batch is this old; also caps `segment.ms` for rolls |
//! | `min.cleanable.dirty.ratio` | 0.5 | clean when dirty bytes / cleanable bytes reaches this (0..=1) |
//! | `retention.archive` | false | (logbroker) segments due for time/size retention wait for the archiver (`Log::retention_plan`), which archives them and then raises the log start offset |
//!
//! `cleanup.policy` decides what the periodic maintenance does: retention by time and size
//! (`Log::enforce_retention`) only when it contains `delete`, compaction (`Log::compact`) only
//! when it contains `compact`; a compacted topic also refuses records without a key. The log
//! start offset (DeleteRecords) applies under every policy.
//!
//! Parsing takes a string map (what the Python side has) and fails with
//! `LogError::InvalidConfig` naming the key and value. Keys Kafka knows but this engine does
//! not act on (compression type, ...) are accepted and ignored, so the broker can pass a whole
//! topic config; any other key is rejected as a likely typo. `min.compaction.lag.ms` above
//! `max.compaction.lag.ms` is rejected (Kafka's check).

use std::collections::HashMap;

use crate::error::{LogError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_index_bytes: u64,
    pub index_interval_bytes: u64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub max_message_bytes: u64,
    pub timestamp_type: TimestampType,
    pub producer_id_expiration_ms: i64,
    /// `cleanup.policy` contains `delete`.
    pub cleanup_delete: bool,
    /// `cleanup.policy` contains `compact`.
    pub cleanup_compact: bool,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    /// `retention.archive`: time/size retention only plans (`Log::retention_plan`); the
    /// archiver deletes by raising the log start offset once the segments are archived.
    pub retention_archive: bool,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            segment_index_bytes: 10_485_760,
            index_interval_bytes: 4096,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            producer_id_expiration_ms: 86_400_000,
            cleanup_delete: true,
            cleanup_compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            retention_archive: false,
        }
    }
}

/// Kafka topic keys accepted but not used by the storage engine.
const IGNORED_KEYS: &[&str] = &[
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "file.delete.delay.ms",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.storage.enable",
    "segment.jitter.ms",
    "unclean.leader.election.enable",
];

fn parse_i64(key: &str, value: &str) -> Result<i64> {
    value.trim().parse::<i64>().map_err(|e| LogError::config(key, value, format!("not an integer: {e}")))
}

fn at_least(key: &str, value: &str, min: i64) -> Result<i64> {
    let v = parse_i64(key, value)?;
    if v < min {
        return Err(LogError::config(key, value, format!("must be at least {min}")));
    }
    Ok(v)
}

/// `(delete, compact)` from a comma-separated `cleanup.policy` list.
fn parse_policy(key: &str, value: &str) -> Result<(bool, bool)> {
    let (mut delete, mut compact) = (false, false);
    for item in value.split(',').map(str::trim) {
        match item {
            "delete" => delete = true,
            "compact" => compact = true,
            _ => return Err(LogError::config(key, value, "must be delete, compact, or compact,delete")),
        }
    }
    Ok((delete, compact))
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

impl LogConfig {
    /// Defaults overridden by `map`. Errors name the offending key and value.
    pub fn from_map(map: &HashMap<String, String>) -> Result<LogConfig> {
        let mut c = LogConfig::default();
        c.apply(map)?;
        Ok(c)
    }

    /// Applies overrides on top of `self`.
    pub fn apply(&mut self, map: &HashMap<String, String>) -> Result<()> {
        // Deterministic error reporting: check keys in sorted order.
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for key in keys {
            let value = map[key].as_str();
            let k = key.as_str();
            match k {
                // Kafka's minimum is 14 (a v0 message); we need room for one batch header.
                "segment.bytes" => self.segment_bytes = to_u64(at_least(k, value, 14)?),
                "segment.ms" => self.segment_ms = at_least(k, value, 1)?,
                "segment.index.bytes" => self.segment_index_bytes = to_u64(at_least(k, value, 4 * 12)?),
                "index.interval.bytes" => self.index_interval_bytes = to_u64(at_least(k, value, 0)?),
                "flush.messages" => self.flush_messages = at_least(k, value, 1)?,
                "flush.ms" => self.flush_ms = at_least(k, value, 0)?,
                "retention.ms" => self.retention_ms = at_least(k, value, -1)?,
                "retention.bytes" => self.retention_bytes = at_least(k, value, -1)?,
                "message.max.bytes" | "max.message.bytes" => self.max_message_bytes = to_u64(at_least(k, value, 0)?),
                "producer.id.expiration.ms" => self.producer_id_expiration_ms = at_least(k, value, 1)?,
                "cleanup.policy" => (self.cleanup_delete, self.cleanup_compact) = parse_policy(k, value)?,
                "delete.retention.ms" => self.delete_retention_ms = at_least(k, value, 0)?,
                "min.compaction.lag.ms" => self.min_compaction_lag_ms = at_least(k, value, 0)?,
                "max.compaction.lag.ms" => self.max_compaction_lag_ms = at_least(k, value, 1)?,
                "min.cleanable.dirty.ratio" => {
                    let r: f64 = value.trim().parse().map_err(|e| LogError::config(k, value, format!("not a number: {e}")))?;
                    if !(0.0..=1.0).contains(&r) {
                        return Err(LogError::config(k, value, "must be between 0 and 1"));
                    }
                    self.min_cleanable_dirty_ratio = r;
                }
                "retention.archive" => {
                    self.retention_archive = match value.trim() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(LogError::config(k, value, "must be true or false")),
                    }
                }
                "message.timestamp.type" => {
                    self.timestamp_type = match value.trim() {
                        "CreateTime" => TimestampType::CreateTime,
                        "LogAppendTime" => TimestampType::LogAppendTime,
                        _ => return Err(LogError::config(k, value, "must be CreateTime or LogAppendTime")),
                    }
                }
                _ if IGNORED_KEYS.contains(&k) => {}
                _ => return Err(LogError::config(k, value, "unknown log configuration key")),
            }
        }
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms {
            let v = self.min_compaction_lag_ms.to_string();
            return Err(LogError::config(
                "min.compaction.lag.ms",
                &v,
                format!("must not exceed max.compaction.lag.ms = {}", self.max_compaction_lag_ms),
            ));
        }
        Ok(())
    }

    /// How long the active segment may live before a roll: `segment.ms`, capped by
    /// `max.compaction.lag.ms` on compacted topics (Kafka's rule: the cleaner never touches
    /// the active segment, so it must roll for the lag bound to hold).
    pub fn roll_ms(&self) -> i64 {
        if self.cleanup_compact {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        }
    }

    /// Entries an index file of `segment.index.bytes` holds, for `entry_size`-byte entries.
    pub fn index_entries(&self, entry_size: u64) -> u64 {
        (self.segment_index_bytes / entry_size).max(4)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn defaults_are_kafkas() {
        let c = LogConfig::default();
        assert_eq!(c.segment_bytes, 1 << 30);
        assert_eq!(c.max_message_bytes, 1_048_588);
        assert_eq!(c.retention_bytes, -1);
        assert_eq!(c.flush_messages, i64::MAX);
        assert_eq!(c.timestamp_type, TimestampType::CreateTime);
    }

    #[test]
    fn overrides_parse() {
        let c = LogConfig::from_map(&map(&[
            ("segment.bytes", "1024"),
            ("retention.ms", "-1"),
            ("message.timestamp.type", "LogAppendTime"),
            ("max.message.bytes", "500"),
            ("cleanup.policy", "delete"),
        ]))
        .unwrap();
        assert_eq!(c.segment_bytes, 1024);
        assert_eq!(c.retention_ms, -1);
        assert_eq!(c.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(c.max_message_bytes, 500);
    }

    #[test]
    fn bad_values_name_key_and_value() {
        let e = LogConfig::from_map(&map(&[("segment.bytes", "lots")])).unwrap_err().to_string();
        assert!(e.contains("segment.bytes") && e.contains("lots"), "{e}");
        let e = LogConfig::from_map(&map(&[("retention.ms", "-2")])).unwrap_err().to_string();
        assert!(e.contains("at least -1"), "{e}");
        let e = LogConfig::from_map(&map(&[("message.timestamp.type", "Now")])).unwrap_err().to_string();
        assert!(e.contains("LogAppendTime"), "{e}");
        let e = LogConfig::from_map(&map(&[("segmnet.bytes", "1")])).unwrap_err().to_string();
        assert!(e.contains("unknown"), "{e}");
    }

    #[test]
    fn cleanup_policy_and_compaction_keys() {
        let c = LogConfig::default();
        assert!(c.cleanup_delete && !c.cleanup_compact);
        assert_eq!((c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms), (86_400_000, 0, i64::MAX));
        assert!((c.min_cleanable_dirty_ratio - 0.5).abs() < f64::EPSILON);
        for (v, d, k) in [("delete", true, false), ("compact", false, true), ("compact,delete", true, true), ("delete, compact", true, true)] {
            let c = LogConfig::from_map(&map(&[("cleanup.policy", v)])).unwrap();
            assert_eq!((c.cleanup_delete, c.cleanup_compact), (d, k), "{v}");
        }
        for bad in ["", "compacted", "delete,", "none"] {
            let e = LogConfig::from_map(&map(&[("cleanup.policy", bad)])).unwrap_err().to_string();
            assert!(e.contains("cleanup.policy"), "{e}");
        }
        let c = LogConfig::from_map(&map(&[
            ("cleanup.policy", "compact"),
            ("delete.retention.ms", "5"),
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "100"),
            ("min.cleanable.dirty.ratio", "0.25"),
            ("segment.ms", "1000"),
        ]))
        .unwrap();
        assert_eq!((c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms), (5, 10, 100));
        assert!((c.min_cleanable_dirty_ratio - 0.25).abs() < f64::EPSILON);
        assert_eq!(c.roll_ms(), 100);
        let e = LogConfig::from_map(&map(&[("min.cleanable.dirty.ratio", "1.5")])).unwrap_err().to_string();
        assert!(e.contains("between 0 and 1"), "{e}");
        let e = LogConfig::from_map(&map(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")])).unwrap_err().to_string();
        assert!(e.contains("min.compaction.lag.ms") && e.contains("max.compaction.lag.ms"), "{e}");
    }
}
