//! `LogConfig`: the per-partition settings, with Kafka's topic-level key names.
//!
//! Every key's default and bounds come from the table of broker keys
//! (`python/logbroker/common/config_keys.toml`, the rows with `engine = true`), through the
//! generated [`crate::config_keys`] (its module doc lists them): the broker checks a topic's
//! configs against the same table before they reach the engine. What the keys do:
//!
//! | key | meaning |
//! |---|---|
//! | `segment.bytes` | roll when the active segment would grow past this |
//! | `segment.ms` | roll a non-empty active segment this long after its first append |
//! | `segment.index.bytes` | capacity of `.index`/`.timeindex` (entries live in memory; the files hold what is written, nothing preallocated); roll when full |
//! | `index.interval.bytes` | bytes of log between two index entries |
//! | `flush.messages` | fsync after this many unflushed messages (MAX: rely on the page cache) |
//! | `flush.ms` | fsync when the last flush is this old |
//! | `retention.ms` | delete segments whose newest record is older (-1: forever) |
//! | `retention.bytes` | delete oldest segments while the log is larger (-1: no limit) |
//! | `max.message.bytes` (alias `message.max.bytes`) | largest batch accepted |
//! | `message.timestamp.type` | CreateTime or LogAppendTime |
//! | `producer.id.expiration.ms` | forget idle idempotent producers after this |
//! | `cleanup.policy` | `delete`, `compact`, or both (`compact,delete`, any order) |
//! | `delete.retention.ms` | how long the cleaner keeps tombstones after it first saw them (delete horizon) |
//! | `min.compaction.lag.ms` | a segment is cleanable only once its newest record is this old |
//! | `max.compaction.lag.ms` | clean regardless of the dirty ratio once the oldest dirty batch is this old; also caps `segment.ms` for rolls |
//! | `min.cleanable.dirty.ratio` | clean when dirty bytes / cleanable bytes reaches this |
//! | `compression.type` | `producer`: store batches as the producer compressed them; a codec (`uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`): the leader's append recompresses every data batch of another codec (`Log::append_as_leader`, `batch::recompress`) |
//! | `compression.gzip.level`, `compression.zstd.level` | the level the broker's recompression uses (`compression.lz4.level` is accepted; the LZ4 encoder has one level) |
//! | `confluent.key.schema.validation`, `confluent.value.schema.validation` | a client's records must carry a schema id registered under `<topic>-key` / `<topic>-value` (server/schema_ids.rs; the check runs in `Log::append_as_leader_checked`) |
//! | `retention.archive` | (logbroker) segments due for time/size retention wait for the archiver (`Log::retention_plan`), which archives them and then raises the log start offset |
//! | `iceberg.enable` | (logbroker) the same wait, for the Iceberg table writer: the leader raises the log start offset only past records the topic's table holds |
//! | `remote.storage.enable` | tiered storage (KIP-405): the leader copies rolled segments to the object store; local retention then follows `local.retention.*` |
//! | `local.retention.ms` | with remote storage, how long a segment already copied stays on local disk (-2: `retention.ms`, see `effective_local_retention_ms`; -1: forever) |
//! | `local.retention.bytes` | with remote storage, the local size above which the oldest copied segments are deleted locally (-2: `retention.bytes`, see `effective_local_retention_bytes`; -1: no limit) |
//!
//! `cleanup.policy` decides what the periodic maintenance does: retention by time and size
//! (`Log::enforce_retention`) only when it contains `delete`, compaction (`Log::compact`) only
//! when it contains `compact`; a compacted topic also refuses records without a key. The log
//! start offset (DeleteRecords) applies under every policy.
//!
//! Parsing takes a string map (what the Python side has) and fails with
//! `LogError::InvalidConfig` naming the key and value. The broker's other topic keys
//! (`config_keys::OTHER_TOPIC_KEYS`) and keys Kafka knows but this engine does not act on
//! (throttled replicas, ...) are accepted and ignored, so the broker can pass a whole topic
//! config; any other key is rejected as a likely typo. `min.compaction.lag.ms` above
//! `max.compaction.lag.ms` is rejected (Kafka's check). The checks across the tiered-storage
//! keys (`local.retention.*` within `retention.*`, remote storage enabled on the broker, turning
//! it off) are the broker's (Python `BrokerConfig.check_topic_configs`): they need the broker's
//! settings and the topic's previous config, which the engine does not have.

use std::collections::HashMap;

use crate::compression::Codec;
use crate::config_keys::{self as keys, ChoiceKey, DoubleKey, IntKey};
use crate::error::{LogError, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::struct_excessive_bools)] // one field per Kafka topic key; its booleans are independent keys
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
    /// `iceberg.enable`: the topic is also an Iceberg table (python/logbroker/iceberg); like
    /// `retention.archive`, time/size retention only plans, and the leader deletes what the
    /// table already holds.
    pub iceberg_enable: bool,
    /// `remote.storage.enable`: tiered storage (KIP-405) for this topic.
    pub remote_storage_enable: bool,
    /// `local.retention.ms` as set: -2 means `retention.ms` (`effective_local_retention_ms`).
    pub local_retention_ms: i64,
    /// `local.retention.bytes` as set: -2 means `retention.bytes` (`effective_local_retention_bytes`).
    pub local_retention_bytes: i64,
    /// `compression.type`: `None` for `producer` (batches stored as they come), else the codec
    /// every stored data batch gets.
    pub compression: Option<Codec>,
    pub compression_gzip_level: i32,
    pub compression_lz4_level: i32,
    pub compression_zstd_level: i32,
    /// `confluent.key.schema.validation`: every record's key carries a schema id registered
    /// under `<topic>-key` (server/schema_ids.rs).
    pub key_schema_validation: bool,
    /// `confluent.value.schema.validation`: the same for values and `<topic>-value`.
    pub value_schema_validation: bool,
}

impl Default for LogConfig {
    /// The table's defaults (`config_keys`).
    fn default() -> Self {
        let (cleanup_delete, cleanup_compact) = parse_policy(keys::CLEANUP_POLICY.name, keys::CLEANUP_POLICY.default)
            .expect("the table's cleanup.policy default");
        LogConfig {
            segment_bytes: to_u64(keys::SEGMENT_BYTES.default),
            segment_ms: keys::SEGMENT_MS.default,
            segment_index_bytes: to_u64(keys::SEGMENT_INDEX_BYTES.default),
            index_interval_bytes: to_u64(keys::INDEX_INTERVAL_BYTES.default),
            flush_messages: keys::FLUSH_MESSAGES.default,
            flush_ms: keys::FLUSH_MS.default,
            retention_ms: keys::RETENTION_MS.default,
            retention_bytes: keys::RETENTION_BYTES.default,
            max_message_bytes: to_u64(keys::MAX_MESSAGE_BYTES.default),
            timestamp_type: parse_timestamp_type(
                keys::MESSAGE_TIMESTAMP_TYPE.name,
                keys::MESSAGE_TIMESTAMP_TYPE.default,
            )
            .expect("the table's message.timestamp.type default"),
            producer_id_expiration_ms: keys::PRODUCER_ID_EXPIRATION_MS.default,
            cleanup_delete,
            cleanup_compact,
            delete_retention_ms: keys::DELETE_RETENTION_MS.default,
            min_compaction_lag_ms: keys::MIN_COMPACTION_LAG_MS.default,
            max_compaction_lag_ms: keys::MAX_COMPACTION_LAG_MS.default,
            min_cleanable_dirty_ratio: keys::MIN_CLEANABLE_DIRTY_RATIO.default,
            retention_archive: keys::RETENTION_ARCHIVE.default,
            iceberg_enable: keys::ICEBERG_ENABLE.default,
            remote_storage_enable: keys::REMOTE_STORAGE_ENABLE.default,
            local_retention_ms: keys::LOCAL_RETENTION_MS.default,
            local_retention_bytes: keys::LOCAL_RETENTION_BYTES.default,
            compression: parse_compression(keys::COMPRESSION_TYPE.name, keys::COMPRESSION_TYPE.default)
                .expect("the table's compression.type default"),
            compression_gzip_level: to_i32(keys::COMPRESSION_GZIP_LEVEL.default),
            compression_lz4_level: to_i32(keys::COMPRESSION_LZ4_LEVEL.default),
            compression_zstd_level: to_i32(keys::COMPRESSION_ZSTD_LEVEL.default),
            key_schema_validation: keys::CONFLUENT_KEY_SCHEMA_VALIDATION.default,
            value_schema_validation: keys::CONFLUENT_VALUE_SCHEMA_VALIDATION.default,
        }
    }
}

/// Kafka topic keys the broker does not know, accepted and not used by the storage engine.
const IGNORED_KEYS: &[&str] = &[
    "file.delete.delay.ms",
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.downconversion.enable",
    "message.format.version",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms",
    "preallocate",
    "segment.jitter.ms",
];

/// An integer key's value: an integer within the table's bounds.
fn int(key: &IntKey, name: &str, value: &str) -> Result<i64> {
    let v = value.trim().parse::<i64>().map_err(|e| LogError::config(name, value, format!("not an integer: {e}")))?;
    if !(key.min..=key.max).contains(&v) {
        return Err(LogError::config(name, value, format!("value {v} is outside [{}, {}]", key.min, key.max)));
    }
    Ok(v)
}

/// A floating-point key's value: a number within the table's bounds.
fn double(key: &DoubleKey, name: &str, value: &str) -> Result<f64> {
    let v: f64 = value.trim().parse().map_err(|e| LogError::config(name, value, format!("not a number: {e}")))?;
    if !(key.min..=key.max).contains(&v) {
        return Err(LogError::config(name, value, format!("value {v} is outside [{}, {}]", key.min, key.max)));
    }
    Ok(v)
}

fn boolean(name: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(LogError::config(name, value, "must be true or false")),
    }
}

/// The items of a choice key's value (one for a choice, one or more for a list), each one
/// of the table's values: blank list items are ignored, none may repeat.
fn choices<'v>(key: &ChoiceKey, name: &str, value: &'v str) -> Result<Vec<&'v str>> {
    let items: Vec<&str> =
        if key.list { value.split(',').map(str::trim).filter(|s| !s.is_empty()).collect() } else { vec![value.trim()] };
    let valid = !items.is_empty()
        && items.iter().all(|i| key.values.contains(i))
        && items.iter().enumerate().all(|(n, i)| !items[..n].contains(i));
    if !valid {
        let what = if key.list { "a comma-separated list of" } else { "one of" };
        return Err(LogError::config(
            name,
            value,
            format!("must be {what} {} (each at most once)", key.values.join(", ")),
        ));
    }
    Ok(items)
}

/// `(delete, compact)` from a comma-separated `cleanup.policy` list.
fn parse_policy(name: &str, value: &str) -> Result<(bool, bool)> {
    let items = choices(&keys::CLEANUP_POLICY, name, value)?;
    Ok((items.contains(&"delete"), items.contains(&"compact")))
}

fn parse_timestamp_type(name: &str, value: &str) -> Result<TimestampType> {
    Ok(match choices(&keys::MESSAGE_TIMESTAMP_TYPE, name, value)?[0] {
        "LogAppendTime" => TimestampType::LogAppendTime,
        _ => TimestampType::CreateTime,
    })
}

/// `compression.type`: `None` for `producer`, else the codec (`uncompressed` is `Codec::None`).
fn parse_compression(name: &str, value: &str) -> Result<Option<Codec>> {
    Ok(match choices(&keys::COMPRESSION_TYPE, name, value)?[0] {
        "producer" => None,
        "gzip" => Some(Codec::Gzip),
        "snappy" => Some(Codec::Snappy),
        "lz4" => Some(Codec::Lz4),
        "zstd" => Some(Codec::Zstd),
        _ => Some(Codec::None),
    })
}

fn compression_name(c: Option<Codec>) -> &'static str {
    match c {
        None => "producer",
        Some(Codec::None) => "uncompressed",
        Some(codec) => codec.name(),
    }
}

/// The int keys' bounds fit an i32 (the table's int type).
fn to_i32(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
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
                "segment.bytes" => self.segment_bytes = to_u64(int(&keys::SEGMENT_BYTES, k, value)?),
                "segment.ms" => self.segment_ms = int(&keys::SEGMENT_MS, k, value)?,
                "segment.index.bytes" => self.segment_index_bytes = to_u64(int(&keys::SEGMENT_INDEX_BYTES, k, value)?),
                "index.interval.bytes" => {
                    self.index_interval_bytes = to_u64(int(&keys::INDEX_INTERVAL_BYTES, k, value)?);
                }
                "flush.messages" => self.flush_messages = int(&keys::FLUSH_MESSAGES, k, value)?,
                "flush.ms" => self.flush_ms = int(&keys::FLUSH_MS, k, value)?,
                "retention.ms" => self.retention_ms = int(&keys::RETENTION_MS, k, value)?,
                "retention.bytes" => self.retention_bytes = int(&keys::RETENTION_BYTES, k, value)?,
                "max.message.bytes" | "message.max.bytes" => {
                    self.max_message_bytes = to_u64(int(&keys::MAX_MESSAGE_BYTES, k, value)?);
                }
                "producer.id.expiration.ms" => {
                    self.producer_id_expiration_ms = int(&keys::PRODUCER_ID_EXPIRATION_MS, k, value)?;
                }
                "cleanup.policy" => (self.cleanup_delete, self.cleanup_compact) = parse_policy(k, value)?,
                "delete.retention.ms" => self.delete_retention_ms = int(&keys::DELETE_RETENTION_MS, k, value)?,
                "min.compaction.lag.ms" => self.min_compaction_lag_ms = int(&keys::MIN_COMPACTION_LAG_MS, k, value)?,
                "max.compaction.lag.ms" => self.max_compaction_lag_ms = int(&keys::MAX_COMPACTION_LAG_MS, k, value)?,
                "min.cleanable.dirty.ratio" => {
                    self.min_cleanable_dirty_ratio = double(&keys::MIN_CLEANABLE_DIRTY_RATIO, k, value)?;
                }
                "retention.archive" => self.retention_archive = boolean(k, value)?,
                "iceberg.enable" => self.iceberg_enable = boolean(k, value)?,
                "remote.storage.enable" => self.remote_storage_enable = boolean(k, value)?,
                "local.retention.ms" => self.local_retention_ms = int(&keys::LOCAL_RETENTION_MS, k, value)?,
                "local.retention.bytes" => self.local_retention_bytes = int(&keys::LOCAL_RETENTION_BYTES, k, value)?,
                "message.timestamp.type" => self.timestamp_type = parse_timestamp_type(k, value)?,
                "compression.type" => self.compression = parse_compression(k, value)?,
                "compression.gzip.level" => {
                    self.compression_gzip_level = to_i32(int(&keys::COMPRESSION_GZIP_LEVEL, k, value)?);
                }
                "compression.lz4.level" => {
                    self.compression_lz4_level = to_i32(int(&keys::COMPRESSION_LZ4_LEVEL, k, value)?);
                }
                "compression.zstd.level" => {
                    self.compression_zstd_level = to_i32(int(&keys::COMPRESSION_ZSTD_LEVEL, k, value)?);
                }
                "confluent.key.schema.validation" => self.key_schema_validation = boolean(k, value)?,
                "confluent.value.schema.validation" => self.value_schema_validation = boolean(k, value)?,
                _ if keys::OTHER_TOPIC_KEYS.contains(&k) || IGNORED_KEYS.contains(&k) => {}
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

    /// Every engine key (`config_keys::ENGINE_DEFAULTS` order) with its value as text, as
    /// `from_map` reads it back and as the broker writes it.
    pub fn to_map(&self) -> Vec<(&'static str, String)> {
        let policy = match (self.cleanup_compact, self.cleanup_delete) {
            (true, true) => "compact,delete",
            (true, false) => "compact",
            _ => "delete",
        };
        let timestamp_type = match self.timestamp_type {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        };
        vec![
            (keys::MAX_MESSAGE_BYTES.name, self.max_message_bytes.to_string()),
            (keys::SEGMENT_BYTES.name, self.segment_bytes.to_string()),
            (keys::SEGMENT_MS.name, self.segment_ms.to_string()),
            (keys::SEGMENT_INDEX_BYTES.name, self.segment_index_bytes.to_string()),
            (keys::INDEX_INTERVAL_BYTES.name, self.index_interval_bytes.to_string()),
            (keys::RETENTION_MS.name, self.retention_ms.to_string()),
            (keys::RETENTION_BYTES.name, self.retention_bytes.to_string()),
            (keys::RETENTION_ARCHIVE.name, self.retention_archive.to_string()),
            (keys::LOCAL_RETENTION_MS.name, self.local_retention_ms.to_string()),
            (keys::LOCAL_RETENTION_BYTES.name, self.local_retention_bytes.to_string()),
            (keys::REMOTE_STORAGE_ENABLE.name, self.remote_storage_enable.to_string()),
            (keys::ICEBERG_ENABLE.name, self.iceberg_enable.to_string()),
            (keys::FLUSH_MESSAGES.name, self.flush_messages.to_string()),
            (keys::FLUSH_MS.name, self.flush_ms.to_string()),
            (keys::MESSAGE_TIMESTAMP_TYPE.name, timestamp_type.to_owned()),
            (keys::COMPRESSION_TYPE.name, compression_name(self.compression).to_owned()),
            (keys::COMPRESSION_GZIP_LEVEL.name, self.compression_gzip_level.to_string()),
            (keys::COMPRESSION_LZ4_LEVEL.name, self.compression_lz4_level.to_string()),
            (keys::COMPRESSION_ZSTD_LEVEL.name, self.compression_zstd_level.to_string()),
            (keys::CONFLUENT_KEY_SCHEMA_VALIDATION.name, self.key_schema_validation.to_string()),
            (keys::CONFLUENT_VALUE_SCHEMA_VALIDATION.name, self.value_schema_validation.to_string()),
            (keys::PRODUCER_ID_EXPIRATION_MS.name, self.producer_id_expiration_ms.to_string()),
            (keys::CLEANUP_POLICY.name, policy.to_owned()),
            (keys::DELETE_RETENTION_MS.name, self.delete_retention_ms.to_string()),
            (keys::MIN_COMPACTION_LAG_MS.name, self.min_compaction_lag_ms.to_string()),
            (keys::MAX_COMPACTION_LAG_MS.name, self.max_compaction_lag_ms.to_string()),
            (keys::MIN_CLEANABLE_DIRTY_RATIO.name, self.min_cleanable_dirty_ratio.to_string()),
        ]
    }

    /// The codec a leader's append stores a data batch of codec `source` with, when it differs
    /// (Kafka's LogValidator: `producer` keeps every batch; a topic codec rewrites the others).
    pub fn recompress_to(&self, source: Codec) -> Option<Codec> {
        self.compression.filter(|&target| target != source)
    }

    /// The level passed to the encoder of `codec` when the broker recompresses.
    pub fn compression_level(&self, codec: Codec) -> i32 {
        match codec {
            Codec::Gzip => self.compression_gzip_level,
            Codec::Lz4 => self.compression_lz4_level,
            Codec::Zstd => self.compression_zstd_level,
            Codec::None | Codec::Snappy => 0,
        }
    }

    /// `local.retention.ms` with -2 resolved: `retention.ms` (Kafka's rule). -1 is no limit.
    pub fn effective_local_retention_ms(&self) -> i64 {
        if self.local_retention_ms == -2 {
            self.retention_ms
        } else {
            self.local_retention_ms
        }
    }

    /// `local.retention.bytes` with -2 resolved: `retention.bytes` (Kafka's rule). -1 is no limit.
    pub fn effective_local_retention_bytes(&self) -> i64 {
        if self.local_retention_bytes == -2 {
            self.retention_bytes
        } else {
            self.local_retention_bytes
        }
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
        assert!(e.contains("outside [-1, 9223372036854775807]"), "{e}");
        let e = LogConfig::from_map(&map(&[("message.timestamp.type", "Now")])).unwrap_err().to_string();
        assert!(e.contains("LogAppendTime"), "{e}");
        let e = LogConfig::from_map(&map(&[("segmnet.bytes", "1")])).unwrap_err().to_string();
        assert!(e.contains("unknown"), "{e}");
    }

    #[test]
    fn cleanup_policy_and_compaction_keys() {
        let c = LogConfig::default();
        assert!(c.cleanup_delete && !c.cleanup_compact);
        assert_eq!(
            (c.delete_retention_ms, c.min_compaction_lag_ms, c.max_compaction_lag_ms),
            (86_400_000, 0, i64::MAX)
        );
        assert!((c.min_cleanable_dirty_ratio - 0.5).abs() < f64::EPSILON);
        for (v, d, k) in [
            ("delete", true, false),
            ("compact", false, true),
            ("compact,delete", true, true),
            ("delete, compact", true, true),
            ("delete,", true, false),
        ] {
            let c = LogConfig::from_map(&map(&[("cleanup.policy", v)])).unwrap();
            assert_eq!((c.cleanup_delete, c.cleanup_compact), (d, k), "{v}");
        }
        for bad in ["", ",", "compacted", "delete,delete", "none"] {
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
        assert!(e.contains("outside [0, 1]"), "{e}");
        let e = LogConfig::from_map(&map(&[("min.compaction.lag.ms", "10"), ("max.compaction.lag.ms", "5")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("min.compaction.lag.ms") && e.contains("max.compaction.lag.ms"), "{e}");
    }

    const INT_KEYS: &[IntKey] = &[
        keys::MAX_MESSAGE_BYTES,
        keys::SEGMENT_BYTES,
        keys::SEGMENT_MS,
        keys::SEGMENT_INDEX_BYTES,
        keys::INDEX_INTERVAL_BYTES,
        keys::RETENTION_MS,
        keys::RETENTION_BYTES,
        keys::FLUSH_MESSAGES,
        keys::FLUSH_MS,
        keys::PRODUCER_ID_EXPIRATION_MS,
        keys::DELETE_RETENTION_MS,
        keys::MIN_COMPACTION_LAG_MS,
        keys::MAX_COMPACTION_LAG_MS,
        keys::COMPRESSION_GZIP_LEVEL,
        keys::COMPRESSION_LZ4_LEVEL,
        keys::COMPRESSION_ZSTD_LEVEL,
        keys::LOCAL_RETENTION_MS,
        keys::LOCAL_RETENTION_BYTES,
    ];

    #[test]
    fn defaults_are_the_tables() {
        // Each key at the table's default (as the broker sends it) changes nothing, alone or all together.
        let default = LogConfig::default();
        for (k, v) in keys::ENGINE_DEFAULTS {
            assert_eq!(LogConfig::from_map(&map(&[(k, v)])).unwrap(), default, "{k}={v}");
        }
        let all: Vec<(&str, &str)> = keys::ENGINE_DEFAULTS.to_vec();
        assert_eq!(LogConfig::from_map(&map(&all)).unwrap(), default);
        // to_map gives the defaults back as the table writes them, key for key.
        let text: Vec<(&str, String)> = all.iter().map(|(k, v)| (*k, (*v).to_owned())).collect();
        assert_eq!(default.to_map(), text);
        // Every engine key is read, not ignored: a value of the wrong type is refused.
        for (k, _) in keys::ENGINE_DEFAULTS {
            let e = LogConfig::from_map(&map(&[(k, "x")])).unwrap_err().to_string();
            assert!(e.contains(k) && e.contains('x'), "{e}");
        }
        // ... and the other topic keys are accepted.
        for k in keys::OTHER_TOPIC_KEYS {
            assert_eq!(LogConfig::from_map(&map(&[(k, "1")])).unwrap(), default, "{k}");
        }
    }

    #[test]
    fn tiered_storage_keys() {
        let c = LogConfig::default();
        assert!(!c.remote_storage_enable);
        assert_eq!((c.local_retention_ms, c.local_retention_bytes), (-2, -2));
        // -2: the local retention is the whole retention
        assert_eq!(c.effective_local_retention_ms(), c.retention_ms);
        assert_eq!(c.effective_local_retention_bytes(), c.retention_bytes);
        let c = LogConfig::from_map(&map(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("retention.bytes", "4096"),
            ("local.retention.ms", "10"),
            ("local.retention.bytes", "-1"),
        ]))
        .unwrap();
        assert!(c.remote_storage_enable);
        assert_eq!((c.effective_local_retention_ms(), c.effective_local_retention_bytes()), (10, -1));
        let e = LogConfig::from_map(&map(&[("local.retention.ms", "-3")])).unwrap_err().to_string();
        assert!(e.contains("local.retention.ms") && e.contains("-3"), "{e}");
        let e = LogConfig::from_map(&map(&[("remote.storage.enable", "yes")])).unwrap_err().to_string();
        assert!(e.contains("remote.storage.enable"), "{e}");
    }

    #[test]
    fn bounds_are_the_tables() {
        assert_eq!(INT_KEYS.len() + 9, keys::ENGINE_DEFAULTS.len(), "an engine key missing here");
        for key in INT_KEYS {
            let (lo, hi) = (key.min.to_string(), key.max.to_string());
            for ok in [&lo, &hi] {
                // max.compaction.lag.ms below min.compaction.lag.ms's default is refused by the cross-check
                LogConfig::from_map(&map(&[(key.name, ok)])).unwrap_or_else(|e| panic!("{}={ok}: {e}", key.name));
            }
            let below = key.min.checked_sub(1).map(|v| v.to_string());
            let above = key.max.checked_add(1).map_or_else(|| "9223372036854775808".to_owned(), |v| v.to_string());
            for bad in below.iter().chain([&above]) {
                let e = LogConfig::from_map(&map(&[(key.name, bad)])).unwrap_err().to_string();
                assert!(e.contains(key.name) && e.contains(bad.as_str()), "{e}");
            }
        }
        let r = keys::MIN_CLEANABLE_DIRTY_RATIO;
        for ok in [r.min, r.max] {
            LogConfig::from_map(&map(&[(r.name, &ok.to_string())])).unwrap();
        }
        for bad in [r.min - 0.01, r.max + 0.01] {
            LogConfig::from_map(&map(&[(r.name, &bad.to_string())])).unwrap_err();
        }
    }
}
