//! Produce (API key 0, versions 3-12), served on the network thread without Python.
//!
//! Per partition, in request order: acks must be 0, 1 or -1; the partition must
//! exist (UNKNOWN_TOPIC_OR_PARTITION, naming whether the topic exists) and be led by this
//! broker (NOT_LEADER_OR_FOLLOWER; from v10 with the current leader and its endpoint,
//! KIP-951, whether or not this broker holds a replica); the records must be present (INVALID_RECORD); with acks=-1 the
//! ISR must be at least `min.insync.replicas` (NOT_ENOUGH_REPLICAS). Then the log appends
//! (validating every batch: framing, CRC-32C, sizes, producer sequences, transaction state;
//! all or nothing per partition) and the high watermark moves, waking waiting fetches. A
//! transactional producer's batches open its transaction on the partition (the last stable
//! offset stops there until the coordinator's marker closes it, WriteTxnMarkers); control
//! batches from clients are INVALID_RECORD.
//!
//! Transactions v2 (KIP-890 part 2, Produce v12+): the producer sends no AddPartitionsToTxn;
//! the partition's leader adds the partition to the transaction. A transactional batch whose
//! producer has no transaction open here under the batch's epoch needs its coordinator first:
//! nothing of the request is appended, and it goes to the Python side (`Outcome::Verify`),
//! which asks the transaction coordinator to add the partitions (AddPartitionsToTxn v5) and
//! hands the frame back with a verdict per partition (`Verdict`); then the request is served
//! again, appending where the coordinator agreed and answering its error elsewhere. A batch
//! that arrives after the transaction ended is refused by the producer epoch: in v2 every end
//! marker carries a bumped epoch.
//!
//! Schema-id topics (`confluent.{key,value}.schema.validation`, schema_ids.rs): a partition
//! whose records name an id this broker's table does not hold (another broker's registry may
//! have registered it a moment ago) is not answered yet: nothing of it is appended, the rest of
//! the request is served, and the request waits (`Outcome::CatchUpSchemas`) while the Python
//! side's registry reads `_schemas` to its end; then `finish_caught_up` appends those
//! partitions, refusing an id still missing (INVALID_RECORD).
//!
//! Transactions v1 (Produce v3-11) with partition verification on (KIP-890 part 1,
//! `PartitionTable::verify_transactions_v1`): the same detour, but the coordinator only
//! checks that the producer added the partition (AddPartitionsToTxn VerifyOnly); a batch for a
//! partition outside the open transaction is refused (INVALID_TXN_STATE, or
//! TRANSACTION_ABORTABLE from v11) instead of opening a transaction no marker will close.
//!
//! acks=0: no response. acks=1: answered after the leader append. acks=-1: answered once the
//! HW covers every appended batch (at once while the ISR is the leader alone), else parked
//! until it does or `timeout_ms` passes (REQUEST_TIMED_OUT for the partitions still short).
//! A parked partition whose leadership changed meanwhile (another leader, or a new leader
//! epoch: its tail may have been truncated and rewritten) answers NOT_LEADER_OR_FOLLOWER at
//! once; one whose ISR shrank below `min.insync.replicas` by the time the HW covers the
//! batch answers NOT_ENOUGH_REPLICAS_AFTER_APPEND (written, but not as durable as asked).

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::authorizer::{op, resource, Caller};
use super::metrics::PartitionStats;
use super::partition::{Partition, PartitionTable};
use super::request::{error_code_for, frame_response};
use super::schema_ids::{check_framed, framed_id};
use super::LogLine;
use crate::batch::{BatchHeader, HEADER_LEN, MAGIC_AT};
use crate::error::LogError;
use crate::protocol::error_codes as code;
use crate::protocol::messages::produce_request::ProduceRequest;
use crate::protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, ProduceResponse,
    TopicProduceResponse,
};
use crate::protocol::{Chunk, ProtocolError, Reader, Records};

pub const MIN_VERSION: i16 = 3;
pub const MAX_VERSION: i16 = 13;
/// From v13 topics are named by id (KIP-516): `name_topics` gives each its name.
const TOPIC_ID_VERSION: i16 = 13;
/// The first version of transactions v2 (the leader adds partitions to transactions).
pub const TRANSACTION_V2_VERSION: i16 = 12;

/// An acks=-1 produce waiting for the HW.
pub struct PendingProduce {
    response: ProduceResponse,
    waits: Vec<Wait>,
    version: i16,
    correlation_id: i32,
    timeout_ms: i32,
    pub deadline: Instant,
}

/// One partition of a parked acks=-1 produce.
struct Wait {
    /// topic index and partition index in the response
    topic: usize,
    index: usize,
    part: Arc<Partition>,
    /// the offset the HW must reach, and the leader epoch the batches were appended under
    offset: i64,
    leader_epoch: i32,
    done: bool,
}

impl PendingProduce {
    pub fn partitions(&self) -> impl Iterator<Item = &Arc<Partition>> {
        self.waits.iter().map(|w| &w.part)
    }

    /// The response if every wait is settled, or (`expired`) with the rest timed out.
    pub fn try_complete(&mut self, expired: bool) -> Result<Option<Vec<Chunk>>, ProtocolError> {
        let timeout_ms = self.timeout_ms;
        let mut short = false;
        for w in self.waits.iter_mut().filter(|w| !w.done) {
            let name = w.part.name();
            let st = w.part.state();
            let settled = if w.part.is_removed() {
                Some((code::NOT_LEADER_OR_FOLLOWER, format!("{name} is no longer hosted here")))
            } else if st.leader != w.part.node_id || st.leader_epoch != w.leader_epoch {
                Some((
                    code::NOT_LEADER_OR_FOLLOWER,
                    format!(
                        "leadership of {name} moved (leader {} epoch {}, appended under epoch {})",
                        st.leader, st.leader_epoch, w.leader_epoch
                    ),
                ))
            } else if w.part.log.high_watermark() >= w.offset {
                let isr = i32::try_from(st.isr.len()).unwrap_or(i32::MAX);
                (isr < st.min_insync_replicas)
                    .then(|| {
                        (
                            code::NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                            format!(
                                "ISR of {name} shrank to {:?}, below min.insync.replicas={}",
                                st.isr, st.min_insync_replicas
                            ),
                        )
                    })
                    .or(Some((code::NONE, String::new())))
            } else {
                None
            };
            drop(st);
            if let Some((c, msg)) = settled {
                w.done = true;
                if c != code::NONE {
                    let r = &mut self.response.responses[w.topic].partition_responses[w.index];
                    r.error_code = c;
                    r.error_message = Some(msg);
                }
            } else {
                short = true;
            }
        }
        if short && !expired {
            return Ok(None);
        }
        for w in self.waits.iter_mut().filter(|w| !w.done) {
            w.done = true;
            let r = &mut self.response.responses[w.topic].partition_responses[w.index];
            r.error_code = code::REQUEST_TIMED_OUT;
            r.error_message =
                Some(format!("HW of {} did not reach {} within {timeout_ms} ms", w.part.name(), w.offset));
        }
        frame_response(&self.response, self.version, self.correlation_id).map(Some)
    }
}

/// What serving a Produce produced.
pub enum Outcome {
    /// The response now (`None`: acks=0, no response at all).
    Done(Option<Vec<Chunk>>),
    /// Parked until the HW moves or the deadline.
    Wait(PendingProduce),
    /// Nothing appended yet: the coordinator must add these partitions first (transactions v2).
    Verify(Verification),
    /// Some partitions name a schema id this broker does not hold yet: the rest is served; the
    /// registry reads `_schemas` to its end, then `finish_caught_up`.
    CatchUpSchemas(Box<CaughtUpLater>),
}

/// A Produce with partitions held back until the schema registry has read `_schemas` to its
/// end (`Outcome::CatchUpSchemas`); the others are served already.
pub struct CaughtUpLater {
    pending: PendingProduce,
    acks: i16,
    peer: String,
    /// Never empty.
    held: Vec<Held>,
}

impl CaughtUpLater {
    /// The first missing id, `"<subject> id <id> (a record for <topic>-<partition>)"`.
    pub fn missing(&self) -> &str {
        &self.held[0].missing
    }
}

/// One held-back partition: where its answer goes, and its records.
struct Held {
    topic: usize,
    index: usize,
    part: Arc<Partition>,
    records: Records,
    /// The first id of its records this broker does not hold (`Appended::Missing`).
    missing: String,
}

/// Partitions a transactional Produce needs added to (v2) or checked in (v1, `verify_only`)
/// its producer's transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub partitions: Vec<(String, i32)>,
    pub verify_only: bool,
    /// The Produce version (the errors a client understands depend on it).
    pub version: i16,
}

/// Whether the first batch of a transaction on a partition goes to the coordinator.
fn verifies(table: &PartitionTable, req: &ProduceRequest, version: i16) -> bool {
    req.transactional_id.as_deref().is_some_and(|t| !t.is_empty())
        && (version >= TRANSACTION_V2_VERSION || table.verify_transactions_v1())
}

/// The coordinator's answer for one partition of a `Verification` (`error_code` 0: added).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub topic: String,
    pub partition: i32,
    pub error_code: i16,
    pub message: String,
}

/// `(producer id, epoch)` when `records` open a transaction this partition has not seen
/// under that epoch: a transactional data batch whose producer has no transaction open here.
fn needs_verification(part: &Partition, records: Option<&Records>) -> Option<(i64, i16)> {
    let Some(Records::Bytes(b)) = records else { return None };
    if b.len() < HEADER_LEN || b[MAGIC_AT] != 2 {
        return None; // the append refuses it
    }
    let h = BatchHeader::parse(&b[..HEADER_LEN]);
    if !h.is_transactional() || h.is_control() || h.producer_id < 0 {
        return None;
    }
    (!part.log.has_ongoing_transaction(h.producer_id, h.producer_epoch)).then_some((h.producer_id, h.producer_epoch))
}

/// The partitions of a transactional request that need the coordinator, or None.
fn to_verify(table: &PartitionTable, req: &ProduceRequest, version: i16) -> Option<Verification> {
    if !verifies(table, req, version) || !matches!(req.acks, -1..=1) {
        return None;
    }
    let txn_id = req.transactional_id.as_deref()?;
    let mut out: Option<Verification> = None;
    for topic in &req.topic_data {
        for pdata in &topic.partition_data {
            let Ok(part) = table.leader_for(&topic.name, pdata.index, -1) else { continue };
            let Some((pid, epoch)) = needs_verification(&part, pdata.records.as_ref()) else { continue };
            let v = out.get_or_insert_with(|| Verification {
                transactional_id: txn_id.to_owned(),
                producer_id: pid,
                producer_epoch: epoch,
                partitions: Vec::new(),
                verify_only: version < TRANSACTION_V2_VERSION,
                version,
            });
            // Batches of another producer in the same request are refused when it is served.
            if (v.producer_id, v.producer_epoch) == (pid, epoch) {
                v.partitions.push((topic.name.clone(), pdata.index));
            }
        }
    }
    out
}

fn partition_response(index: i32, error_code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse {
        index,
        error_code,
        base_offset: -1,
        log_append_time_ms: -1,
        log_start_offset: -1,
        error_message: message,
        ..Default::default()
    }
}

/// `verdicts`: None on the first pass; the coordinator's answers when a verification
/// (`Outcome::Verify`) sends the request through again. `throttle`: the client quotas'
/// throttle time (quota.rs) for the response, asked once the partitions are appended to (the
/// request quota measures the time that took); not asked for acks=0 or a verification.
#[allow(clippy::too_many_arguments)] // the request, where it came from, and the verification pass
pub fn handle(
    table: &PartitionTable,
    r: &mut Reader,
    version: i16,
    correlation_id: i32,
    caller: &Caller,
    now_ms: i64,
    logs: &mut Vec<LogLine>,
    verdicts: Option<&[Verdict]>,
    throttle: &mut dyn FnMut() -> i32,
) -> Result<Outcome, ProtocolError> {
    let mut req = ProduceRequest::decode(r, version)?;
    let peer = caller.peer;
    let unknown_ids = if version >= TOPIC_ID_VERSION { name_topics(table, &mut req) } else { Vec::new() };
    // the denials are logged once, on the first pass (not again when a verified request comes back)
    let mut refusals = refuse_unauthorized(table, &mut req, caller, verdicts.is_none().then_some(&mut *logs));
    refusals.extend(unknown_ids);
    if verdicts.is_none() {
        if let Some(v) = to_verify(table, &req, version) {
            return Ok(Outcome::Verify(v));
        }
    }
    let verifying = verifies(table, &req, version);
    let acks = req.acks;
    let mut response = ProduceResponse::default();
    let mut waits = Vec::new();
    let mut hinted = Vec::new();
    let mut held = Vec::new();
    for (ti, topic) in req.topic_data.into_iter().enumerate() {
        let mut out = TopicProduceResponse { name: topic.name.clone(), topic_id: topic.topic_id, ..Default::default() };
        for pdata in topic.partition_data {
            let idx = pdata.index;
            let name = &topic.name;
            let reject = |code: i16, msg: String| partition_response(idx, code, Some(msg));
            let resp = if matches!(acks, -1..=1) {
                match table.leader_for(name, idx, -1) {
                    Err(why) => {
                        let mut resp = reject(why.code(false), why.describe(name, idx, table.node_id()));
                        if let Some(l) = why.current_leader().filter(|_| version >= 10 && caller.takes_hints()) {
                            resp.current_leader = LeaderIdAndEpoch {
                                leader_id: l.leader,
                                leader_epoch: l.leader_epoch,
                                ..Default::default()
                            };
                            hinted.push(l.leader);
                        }
                        resp
                    }
                    Ok(part) => {
                        let refused =
                            if verifying { verdict_refusal(&part, pdata.records.as_ref(), verdicts) } else { None };
                        let (resp, wait_for) = match refused {
                            Some((c, msg)) => (reject(c, msg), None),
                            None => match append(&part, table, pdata.records, acks, now_ms, peer, logs, true) {
                                Appended::Answer(resp, wait_for) => (resp, wait_for),
                                Appended::Missing(missing, records) => {
                                    held.push(Held {
                                        topic: ti,
                                        index: out.partition_responses.len(),
                                        part: Arc::clone(&part),
                                        records,
                                        missing,
                                    });
                                    (reject(code::UNKNOWN_SERVER_ERROR, "held back".to_owned()), None)
                                }
                            },
                        };
                        if let Some((offset, leader_epoch)) = wait_for {
                            waits.push(Wait {
                                topic: ti,
                                index: out.partition_responses.len(),
                                part,
                                offset,
                                leader_epoch,
                                done: false,
                            });
                        }
                        resp
                    }
                }
            } else {
                reject(code::INVALID_REQUIRED_ACKS, format!("acks={acks} is not 0, 1 or -1"))
            };
            out.partition_responses.push(resp);
        }
        response.responses.push(out);
    }
    response.responses.extend(refusals);
    if acks == 0 && held.is_empty() {
        return Ok(Outcome::Done(None));
    }
    response.throttle_time_ms = throttle();
    if !hinted.is_empty() {
        response.node_endpoints = table
            .endpoints_of(hinted)
            .into_iter()
            .map(|(node_id, host, port, rack)| NodeEndpoint { node_id, host, port, rack, ..Default::default() })
            .collect();
    }
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms.max(0)).unwrap_or(0));
    let pending = PendingProduce {
        response,
        waits,
        version,
        correlation_id,
        timeout_ms: req.timeout_ms,
        deadline: Instant::now() + timeout,
    };
    if !held.is_empty() {
        return Ok(Outcome::CatchUpSchemas(Box::new(CaughtUpLater { pending, acks, peer: peer.to_owned(), held })));
    }
    complete(pending, acks)
}

/// The held-back partitions of a Produce (`Outcome::CatchUpSchemas`), appended once the
/// registry has read `_schemas` to its end (or gave up): an id still missing is INVALID_RECORD.
/// A partition whose leadership moved meanwhile answers as at the first pass.
pub fn finish_caught_up(
    table: &PartitionTable,
    later: CaughtUpLater,
    now_ms: i64,
    logs: &mut Vec<LogLine>,
) -> Result<Outcome, ProtocolError> {
    let CaughtUpLater { mut pending, acks, peer, held } = later;
    for h in held {
        let (topic, idx) = (&h.part.topic, h.part.index);
        let resp = match table.leader_for(topic, idx, -1) {
            Err(why) => partition_response(idx, why.code(false), Some(why.describe(topic, idx, table.node_id()))),
            Ok(part) => match append(&part, table, Some(h.records), acks, now_ms, &peer, logs, false) {
                Appended::Answer(resp, wait_for) => {
                    if let Some((offset, leader_epoch)) = wait_for {
                        // the partition as it is now (it may have been added again meanwhile)
                        let (topic, index) = (h.topic, h.index);
                        pending.waits.push(Wait { topic, index, part, offset, leader_epoch, done: false });
                    }
                    resp
                }
                Appended::Missing(..) => unreachable!("append holds nothing back when told not to"),
            },
        };
        pending.response.responses[h.topic].partition_responses[h.index] = resp;
    }
    complete(pending, acks)
}

fn complete(mut pending: PendingProduce, acks: i16) -> Result<Outcome, ProtocolError> {
    if acks == 0 {
        return Ok(Outcome::Done(None));
    }
    match pending.try_complete(false)? {
        Some(chunks) => Ok(Outcome::Done(Some(chunks))),
        None => Ok(Outcome::Wait(pending)),
    }
}

/// v13+: each topic's name from the image for its id; the topics whose id no topic has leave
/// the request, and their answers (UNKNOWN_TOPIC_ID per partition) are returned.
fn name_topics(table: &PartitionTable, req: &mut ProduceRequest) -> Vec<TopicProduceResponse> {
    let mut unknown = Vec::new();
    req.topic_data.retain_mut(|topic| {
        if let Some(name) = table.topic_name(&topic.topic_id) {
            topic.name = name;
            return true;
        }
        let hex = topic.topic_id.iter().fold(String::with_capacity(32), |mut h, b| {
            let _ = write!(h, "{b:02x}");
            h
        });
        let why = format!("no topic has id {hex}");
        unknown.push(TopicProduceResponse {
            topic_id: topic.topic_id,
            partition_responses: topic
                .partition_data
                .iter()
                .map(|p| partition_response(p.index, code::UNKNOWN_TOPIC_ID, Some(why.clone())))
                .collect(),
            ..Default::default()
        });
        false
    });
    unknown
}

/// ACLs: WRITE on the transactional id, then on each topic, checked before the topic's
/// existence as Kafka does (a denied caller learns nothing about it). The denied topics
/// leave the request; their answers (TRANSACTIONAL_ID_AUTHORIZATION_FAILED or
/// TOPIC_AUTHORIZATION_FAILED per partition) are returned. Each denial is a line in `logs`
/// when given (`Caller::denial`, which the audit log reads).
fn refuse_unauthorized(
    table: &PartitionTable,
    req: &mut ProduceRequest,
    caller: &Caller,
    mut logs: Option<&mut Vec<LogLine>>,
) -> Vec<TopicProduceResponse> {
    let authorizer = table.authorizer();
    if !authorizer.enabled() {
        return Vec::new();
    }
    let txn = req.transactional_id.as_deref().filter(|t| !t.is_empty());
    let txn_denied = txn.is_some_and(|t| !caller.may(authorizer, resource::TRANSACTIONAL_ID, t, op::WRITE));
    if let (true, Some(logs), Some(t)) = (txn_denied, logs.as_deref_mut(), txn) {
        logs.push(caller.denial(op::WRITE, resource::TRANSACTIONAL_ID, t, "Produce"));
    }
    let mut refusals = Vec::new();
    req.topic_data.retain(|topic| {
        let (c, why) = if txn_denied {
            (
                code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                format!("{} may not write transactional id {:?}", caller.principal, txn.unwrap_or("")),
            )
        } else if !caller.may(authorizer, resource::TOPIC, &topic.name, op::WRITE) {
            if let Some(logs) = logs.as_deref_mut() {
                logs.push(caller.denial(op::WRITE, resource::TOPIC, &topic.name, "Produce"));
            }
            (code::TOPIC_AUTHORIZATION_FAILED, format!("{} may not write topic {:?}", caller.principal, topic.name))
        } else {
            return true;
        };
        refusals.push(TopicProduceResponse {
            name: topic.name.clone(),
            topic_id: topic.topic_id,
            partition_responses: topic
                .partition_data
                .iter()
                .map(|p| partition_response(p.index, c, Some(why.clone())))
                .collect(),
            ..Default::default()
        });
        false
    });
    refusals
}

/// Second pass of a verified request: the coordinator's error for a partition
/// it refused, or INVALID_TXN_STATE for one that still needs it but was not verified (a batch
/// of a second producer id, or a transaction that ended meanwhile); None to append.
fn verdict_refusal(part: &Partition, records: Option<&Records>, verdicts: Option<&[Verdict]>) -> Option<(i16, String)> {
    let verdicts = verdicts?;
    let (name, idx) = (&part.topic, part.index);
    let found = verdicts.iter().find(|v| v.topic == **name && v.partition == idx);
    if let Some(v) = found.filter(|v| v.error_code != code::NONE) {
        return Some((v.error_code, v.message.clone()));
    }
    let (pid, epoch) = needs_verification(part, records)?;
    found.is_none().then(|| {
        (
            code::INVALID_TXN_STATE,
            format!(
                "{name}-{idx} was not added to the transaction of producer id {pid} epoch {epoch} by its coordinator"
            ),
        )
    })
}

/// Appends one partition's records as its leader: the response, and for acks=-1 after a
/// successful append the offset the HW must reach before answering.
/// What appending one partition's records came to.
enum Appended {
    /// Its answer, and with acks=-1 the offset the HW must reach under the leader epoch.
    Answer(PartitionProduceResponse, Option<(i64, i32)>),
    /// Nothing appended: a record names a schema id this broker does not hold (the first
    /// such, `"<subject> id <id> (a record for <topic>-<partition>)"`), and no record is
    /// refused for anything else; the records, to append after the registry caught up.
    Missing(String, Records),
}

/// `hold`: a partition whose records name schema ids this broker does not hold (and nothing
/// else wrong) is held back (`Appended::Missing`) rather than refused.
#[allow(clippy::too_many_arguments)] // the partition, the request's settings, and where it came from
fn append(
    part: &Partition,
    table: &PartitionTable,
    records: Option<Records>,
    acks: i16,
    now_ms: i64,
    peer: &str,
    logs: &mut Vec<LogLine>,
    hold: bool,
) -> Appended {
    let answer = |resp: PartitionProduceResponse| Appended::Answer(resp, None);
    let (name, idx) = (&part.topic, part.index);
    let reject = |code: i16, msg: String| partition_response(idx, code, Some(msg));
    let st = part.state();
    let leader_epoch = st.leader_epoch;
    let short_isr = (acks == -1 && i32::try_from(st.isr.len()).unwrap_or(i32::MAX) < st.min_insync_replicas)
        .then(|| format!("ISR of {name}-{idx} is {:?}, below min.insync.replicas={}", st.isr, st.min_insync_replicas));
    drop(st);
    if records.as_ref().is_none_or(Records::is_empty) {
        return answer(reject(code::INVALID_RECORD, format!("produce to {name}-{idx} carries no record batches")));
    }
    if let Some(msg) = short_isr {
        return answer(reject(code::NOT_ENOUGH_REPLICAS, msg));
    }
    let received = match records {
        Some(Records::Bytes(b)) => b,
        _ => bytes::Bytes::new(),
    };
    let records = received.to_vec();
    let size = records.len() as u64;
    let config = part.log.config();
    let missing = std::cell::RefCell::new(None::<String>);
    let refused_otherwise = std::cell::Cell::new(false);
    let appended = if config.key_schema_validation || config.value_schema_validation {
        // confluent.{key,value}.schema.validation: each record's key/value names a schema id
        // registered under <topic>-key / <topic>-value (server/schema_ids.rs)
        let ids = match table.schema_ids().read() {
            Ok(ids) => ids,
            Err(why) => {
                let msg = format!("produce to {name}-{idx} refused: the topic checks schema ids, but {why}");
                logs.push(LogLine::new(LogLine::INFO, format!("{msg} (from {peer})")));
                return answer(reject(code::POLICY_VIOLATION, msg));
            }
        };
        let key_subject = config.key_schema_validation.then(|| format!("{name}-key"));
        // the first framed id not held here, and whether a record fails for another reason
        let (missing, refused_otherwise) = (&missing, &refused_otherwise);
        let value_subject = config.value_schema_validation.then(|| format!("{name}-value"));
        let check = |k: Option<&[u8]>, v: Option<&[u8]>| -> Option<String> {
            for (what, subject, bytes) in [("key", &key_subject, k), ("value", &value_subject, v)] {
                let Some(subject) = subject else { continue };
                if let Some(why) = check_framed(bytes, subject, ids.subject(subject)) {
                    match bytes.and_then(framed_id) {
                        Some(id) => {
                            if missing.borrow().is_none() {
                                *missing.borrow_mut() = Some(format!("{subject} id {id}"));
                            }
                        }
                        None => refused_otherwise.set(true),
                    }
                    return Some(format!("{what} {why}"));
                }
            }
            None
        };
        part.log.append_as_leader_checked(records, leader_epoch, now_ms, &check)
    } else {
        part.log.append_as_leader(records, leader_epoch, now_ms)
    };
    if let (true, Err(LogError::InvalidRecord { .. }), false, Some(id)) =
        (hold, &appended, refused_otherwise.get(), missing.borrow().as_ref())
    {
        return Appended::Missing(format!("{id} (a record for {name}-{idx})"), Records::Bytes(received));
    }
    match appended {
        Ok(res) => {
            part.maybe_increment_hw();
            PartitionStats::add(&part.stats.bytes_in, size);
            PartitionStats::add(
                &part.stats.messages_in,
                u64::try_from(res.last_offset - res.base_offset + 1).unwrap_or(0),
            );
            let resp = PartitionProduceResponse {
                index: idx,
                error_code: code::NONE,
                base_offset: res.base_offset,
                log_append_time_ms: res.log_append_time,
                log_start_offset: res.log_start_offset,
                ..Default::default()
            };
            Appended::Answer(resp, (acks == -1).then_some((res.last_offset + 1, leader_epoch)))
        }
        // Deleted while we appended: the topic is gone, not the disk.
        Err(_) if part.is_removed() => {
            answer(reject(code::UNKNOWN_TOPIC_OR_PARTITION, format!("partition {name}-{idx} was deleted")))
        }
        Err(e) => {
            let c = error_code_for(&e);
            // A storage failure is the broker's fault; anything else is the client's input.
            let level = if c == code::KAFKA_STORAGE_ERROR { LogLine::ERROR } else { LogLine::INFO };
            logs.push(LogLine::new(
                level,
                format!("produce to {name}-{idx} from {peer} rejected ({}): {e}", code_name(c)),
            ));
            let mut resp = reject(c, e.to_string());
            if let LogError::InvalidRecord { records, .. } = &e {
                // KIP-467: the records at fault, so a client fails those and retries or fails
                // the rest of the batch on its own terms (librdkafka: _INVALID_DIFFERENT_RECORD).
                resp.record_errors = records
                    .iter()
                    .map(|(i, why)| BatchIndexAndErrorMessage {
                        batch_index: *i,
                        batch_index_error_message: Some(why.clone()),
                        ..Default::default()
                    })
                    .collect();
            }
            answer(resp)
        }
    }
}

pub fn code_name(c: i16) -> &'static str {
    match c {
        code::CORRUPT_MESSAGE => "CORRUPT_MESSAGE",
        code::MESSAGE_TOO_LARGE => "MESSAGE_TOO_LARGE",
        code::INVALID_RECORD => "INVALID_RECORD",
        code::OFFSET_OUT_OF_RANGE => "OFFSET_OUT_OF_RANGE",
        code::OUT_OF_ORDER_SEQUENCE_NUMBER => "OUT_OF_ORDER_SEQUENCE_NUMBER",
        code::INVALID_PRODUCER_EPOCH => "INVALID_PRODUCER_EPOCH",
        code::INVALID_TXN_STATE => "INVALID_TXN_STATE",
        code::TRANSACTION_COORDINATOR_FENCED => "TRANSACTION_COORDINATOR_FENCED",
        code::INVALID_CONFIG => "INVALID_CONFIG",
        code::KAFKA_STORAGE_ERROR => "KAFKA_STORAGE_ERROR",
        _ => "ERROR",
    }
}
