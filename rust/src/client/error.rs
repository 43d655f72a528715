//! Why the client engine refused a record: one enum for the accumulator, converted to the
//! Python client's exceptions in `py/client.rs`. Decoding errors of fetched data are the
//! storage engine's `LogError` (CRC mismatch, corrupt batch), since the same framing loop
//! finds them.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ClientError {
    /// The accumulator has no partition count for the topic yet: fetch metadata, then retry.
    #[error("topic {0:?} is not in the producer's metadata")]
    UnknownTopic(String),
    /// An explicit partition beyond the topic's partition count.
    #[error("partition {partition} of topic {topic:?} does not exist (the topic has {partitions})")]
    UnknownPartition { topic: String, partition: i32, partitions: u32 },
    /// `buffer.memory` is used up by records not yet acknowledged: wait and retry.
    #[error("buffer.memory of {limit} bytes is full ({used} bytes buffered)")]
    BufferFull { used: usize, limit: usize },
    /// One record larger than `max.request.size`.
    #[error("record of {size} bytes exceeds max.request.size {limit}")]
    RecordTooLarge { size: usize, limit: usize },
    /// The producer is closed.
    #[error("the producer is closed")]
    Closed,
}
