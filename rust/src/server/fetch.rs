//! Fetch (API key 1, versions 4-12), served on the network thread without Python.
//!
//! Reads never copy record bytes: the log returns `FileRegion`s that the connection sends
//! with sendfile(2). Limits follow Kafka (KIP-74): the response holds at most `max_bytes` and
//! each partition at most its `partition_max_bytes`, except that the first partition with
//! data returns at least one whole batch, so a consumer always gets past a batch larger
//! than its limits. Consumers read up to the high watermark (read_committed too: the last
//! stable offset equals the HW while transactions are unsupported); a follower
//! (`replica_id >= 0`) reads up to the LEO and its fetch offset is its LEO for the HW.
//!
//! Long poll: with less than `min_bytes` available and no partition in error, the request is
//! parked on its partitions until the HW moves or `max_wait_ms` passes.
//!
//! Fetch sessions (KIP-227) are not kept yet: every response carries session id 0, which
//! tells clients to send full requests; a request naming a session gets
//! FETCH_SESSION_ID_NOT_FOUND.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::partition::{Partition, PartitionTable};
use super::request::{code, error_code_for, frame_response};
use super::LogLine;
use crate::protocol::messages::fetch_request::FetchRequest;
use crate::protocol::messages::fetch_response::{FetchResponse, FetchableTopicResponse, PartitionData};
use crate::protocol::{Bytes, Chunk, ProtocolError, Reader, Records};

pub const MIN_VERSION: i16 = 4;
pub const MAX_VERSION: i16 = 12;
const FLEXIBLE_MIN: i16 = 12;

/// A Fetch waiting for data.
pub struct PendingFetch {
    req: FetchRequest,
    version: i16,
    correlation_id: i32,
    peer: String,
    pub deadline: Instant,
    /// The partitions it waits on.
    pub waiting_on: Vec<Arc<Partition>>,
}

/// What serving a Fetch produced.
pub enum Outcome {
    Done(Vec<Chunk>),
    Wait(Box<PendingFetch>),
}

/// The leader check every partition-level read makes: the partition, or an error code.
/// A client-supplied current leader epoch (-1: not checked) older than ours is
/// FENCED_LEADER_EPOCH, newer is UNKNOWN_LEADER_EPOCH.
pub fn leader_partition(table: &PartitionTable, topic: &str, index: i32, current_leader_epoch: i32) -> Result<Arc<Partition>, i16> {
    let part = table.get(topic, index).filter(|p| !p.is_removed()).ok_or(code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let st = part.state();
    if st.leader != part.node_id {
        return Err(code::NOT_LEADER_OR_FOLLOWER);
    }
    if current_leader_epoch >= 0 && current_leader_epoch != st.leader_epoch {
        return Err(if current_leader_epoch < st.leader_epoch { code::FENCED_LEADER_EPOCH } else { code::UNKNOWN_LEADER_EPOCH });
    }
    Ok(part)
}

pub fn handle(
    table: &PartitionTable,
    r: &mut Reader,
    version: i16,
    correlation_id: i32,
    peer: &str,
    logs: &mut Vec<LogLine>,
) -> Result<Outcome, ProtocolError> {
    let req = FetchRequest::decode(r, version)?;
    if req.session_id != 0 {
        let resp = FetchResponse { error_code: code::FETCH_SESSION_ID_NOT_FOUND, ..Default::default() };
        return Ok(Outcome::Done(frame_response(&resp, version, correlation_id, version >= FLEXIBLE_MIN)?));
    }
    if req.replica_id >= 0 {
        // A follower's fetch offset is its log end offset (for the leader's HW).
        for t in &req.topics {
            for p in &t.partitions {
                if let Ok(part) = leader_partition(table, &t.topic, p.partition, p.current_leader_epoch) {
                    part.record_follower_leo(req.replica_id, p.fetch_offset);
                    part.maybe_increment_hw();
                }
            }
        }
    }
    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms.max(0)).unwrap_or(0));
    let mut pending = PendingFetch {
        req,
        version,
        correlation_id,
        peer: peer.to_owned(),
        deadline: Instant::now() + wait,
        waiting_on: Vec::new(),
    };
    match pending.try_complete(table, false, logs)? {
        Some(chunks) => Ok(Outcome::Done(chunks)),
        None => Ok(Outcome::Wait(Box::new(pending))),
    }
}

impl PendingFetch {
    /// Reads every partition; the response if there is enough data, an error, nothing to
    /// wait on, or `expired`; otherwise `None` with `waiting_on` set.
    pub fn try_complete(&mut self, table: &PartitionTable, expired: bool, logs: &mut Vec<LogLine>) -> Result<Option<Vec<Chunk>>, ProtocolError> {
        let req = &self.req;
        let follower = req.replica_id >= 0;
        let response_max = u64::try_from(req.max_bytes.max(0)).unwrap_or(0);
        let mut total: u64 = 0;
        let mut errors = false;
        let mut readable = Vec::new();
        let mut topics = Vec::with_capacity(req.topics.len());
        for t in &req.topics {
            let mut out = FetchableTopicResponse { topic: t.topic.clone(), ..Default::default() };
            for p in &t.partitions {
                let epoch = if self.version >= 9 { p.current_leader_epoch } else { -1 };
                let mut data = PartitionData {
                    partition_index: p.partition,
                    high_watermark: -1,
                    last_stable_offset: -1,
                    log_start_offset: -1,
                    preferred_read_replica: -1,
                    records: Some(Records::Bytes(Bytes::new())),
                    aborted_transactions: Some(Vec::new()),
                    ..Default::default()
                };
                match leader_partition(table, &t.topic, p.partition, epoch) {
                    Err(c) => {
                        data.error_code = c;
                        data.aborted_transactions = None;
                        errors = true;
                    }
                    Ok(part) => {
                        let lg = &part.log;
                        let hw = lg.high_watermark();
                        let leo = lg.log_end_offset();
                        let log_start = lg.log_start_offset();
                        data.high_watermark = hw;
                        data.last_stable_offset = hw;
                        data.log_start_offset = log_start;
                        let upper = if follower { leo } else { hw };
                        let budget = u64::try_from(p.partition_max_bytes.max(0)).unwrap_or(0).min(response_max.saturating_sub(total));
                        if p.fetch_offset < log_start || p.fetch_offset > leo {
                            data.error_code = code::OFFSET_OUT_OF_RANGE;
                            data.aborted_transactions = None;
                            errors = true;
                            logs.push(LogLine::new(
                                LogLine::INFO,
                                format!(
                                    "fetch from {}: fetch offset {} of {} is outside [log start {log_start}, LEO {leo}]",
                                    self.peer,
                                    p.fetch_offset,
                                    part.name()
                                ),
                            ));
                        } else if p.fetch_offset < upper && !(budget == 0 && total > 0) {
                            match lg.read(p.fetch_offset, budget, Some(upper), total == 0) {
                                Ok(Some(region)) if region.length > 0 => {
                                    total += region.length;
                                    data.records = Some(Records::File(region));
                                }
                                Ok(_) => {}
                                Err(e) => {
                                    data.error_code = error_code_for(&e);
                                    data.aborted_transactions = None;
                                    errors = true;
                                }
                            }
                        }
                        readable.push(part);
                    }
                }
                out.partitions.push(data);
            }
            topics.push(out);
        }
        let min_bytes = u64::try_from(req.min_bytes.max(0)).unwrap_or(0);
        if total >= min_bytes || errors || readable.is_empty() || expired || Instant::now() >= self.deadline {
            let resp = FetchResponse { responses: topics, ..Default::default() };
            return frame_response(&resp, self.version, self.correlation_id, self.version >= FLEXIBLE_MIN).map(Some);
        }
        self.waiting_on = readable;
        Ok(None)
    }
}
