//! The data path (Produce, Fetch, the HW rule, parking) against real logs in a temp dir,
//! without sockets: requests are encoded with the codec, served by `produce::handle` /
//! `fetch::handle`, and the response frames decoded again.

use std::sync::Arc;

use super::authorizer::Caller;
use super::fetch;
use super::fetch_session::FetchSessionCache;
use super::partition::{BrokerEndpoint, ClusterView, CurrentLeader, LeaderState, PartitionTable, TopicView};
use super::produce;
use crate::builder::{BatchBuilder, Rec};
use crate::config::LogConfig;
use crate::log::Log;
use crate::protocol::error_codes as code;
use crate::protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use crate::protocol::messages::fetch_response::FetchResponse;
use crate::protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use crate::protocol::messages::produce_response::ProduceResponse;
use crate::protocol::{Bytes, Chunk, Message, Reader, Records, Writer};

/// The caller of the requests here (no ACLs are set: authorization is off).
const ANON: Caller<'static> = Caller { peer: "peer", principal: super::ANONYMOUS, listener: 0, client_id: "", conn: 1 };

fn table_with(dir: &std::path::Path, isr: Vec<i32>) -> (PartitionTable, Arc<super::partition::Partition>) {
    let table = PartitionTable::new();
    let log = Arc::new(Log::open(&dir.join("t-0"), "t", 0, LogConfig::default(), None, 0).unwrap());
    let min_isr = 1;
    let p = table.add("t", 0, 1, log, LeaderState { leader: 1, leader_epoch: 0, isr, min_insync_replicas: min_isr });
    table.set_metadata(1, view_with_t(1, 0));
    (table, p)
}

const T_ID: [u8; 16] = [7; 16];
const U_ID: [u8; 16] = [9; 16];

/// The image: topic "t" (id T_ID, one partition led by `t_leader` at epoch `t_epoch`), topic
/// "u" (id U_ID, partitions 0-1 led by broker 3 at epoch 4, which this broker does not
/// hold), brokers 1-3 on localhost ports 9001-9003, broker 3 in rack "r3".
fn view_with_t(t_leader: i32, t_epoch: i32) -> ClusterView {
    let leaders = |l: i32, e: i32, n: i32| (0..n).map(|p| (p, CurrentLeader { leader: l, leader_epoch: e })).collect();
    let topics = [
        ("t".to_owned(), TopicView { id: T_ID, leaders: leaders(t_leader, t_epoch, 1) }),
        ("u".to_owned(), TopicView { id: U_ID, leaders: leaders(3, 4, 2) }),
    ];
    let brokers = (1..=3).map(|i| {
        (i, BrokerEndpoint { host: "localhost".into(), port: 9000 + i, rack: (i == 3).then(|| "r3".to_owned()) })
    });
    ClusterView::new(topics.into_iter().collect(), brokers.collect())
}

fn body<M: Message>(m: &M, version: i16) -> Reader {
    let mut w = Writer::new();
    m.encode_versioned(&mut w, version).unwrap();
    Reader::new(Bytes::from(w.into_vec().unwrap()))
}

/// Decodes a response frame (size, header v0/v1) as `M`.
fn decode<M: Message>(chunks: Vec<Chunk>, version: i16, flexible: bool) -> M {
    let mut flat = Vec::new();
    for c in chunks {
        match c {
            Chunk::Bytes(b) => flat.extend_from_slice(&b),
            Chunk::File(r) => flat.extend_from_slice(&r.read_to_vec().unwrap()),
        }
    }
    let mut r = Reader::new(Bytes::from(flat));
    let size = r.i32("size").unwrap();
    assert_eq!(size as usize, r.remaining());
    r.i32("correlation id").unwrap();
    if flexible {
        r.uvarint("tags").unwrap();
    }
    let m = M::decode_versioned(&mut r, version).unwrap();
    assert_eq!(r.remaining(), 0);
    m
}

fn produce_req(acks: i16, partition: i32, values: &[&[u8]]) -> ProduceRequest {
    let batch = BatchBuilder::new().records(values.iter().map(|v| Rec::value(v))).build();
    ProduceRequest {
        acks,
        timeout_ms: 1000,
        topic_data: vec![TopicProduceData {
            name: "t".into(),
            partition_data: vec![PartitionProduceData {
                index: partition,
                records: Some(Records::Bytes(Bytes::from(batch))),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn fetch_req(offset: i64, min_bytes: i32, max_wait_ms: i32) -> FetchRequest {
    FetchRequest {
        replica_id: -1,
        max_wait_ms,
        min_bytes,
        max_bytes: 1 << 20,
        session_epoch: -1,
        topics: vec![FetchTopic {
            topic: "t".into(),
            partitions: vec![FetchPartition {
                partition: 0,
                fetch_offset: offset,
                partition_max_bytes: 1 << 20,
                current_leader_epoch: -1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn produce_then_fetch_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1]);
    let mut logs = Vec::new();
    let out = produce::handle(
        &table,
        &mut body(&produce_req(-1, 0, &[b"a", b"b"]), 9),
        9,
        7,
        &ANON,
        0,
        &mut logs,
        None,
        &mut || 0,
    )
    .unwrap();
    let produce::Outcome::Done(Some(chunks)) = out else { panic!("acks=all with the leader alone answers at once") };
    let resp: ProduceResponse = decode(chunks, 9, true);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!((pr.error_code, pr.base_offset), (code::NONE, 0));
    assert_eq!((p.log.log_end_offset(), p.log.high_watermark()), (2, 2));

    let out = fetch::handle(
        &table,
        &mut FetchSessionCache::new(10),
        &mut body(&fetch_req(0, 1, 500), 12),
        12,
        8,
        &ANON,
        &mut logs,
        None,
    )
    .unwrap();
    let fetch::Outcome::Done(chunks, _) = out else { panic!("data is there") };
    let resp: FetchResponse = decode(chunks, 12, true);
    let pd = &resp.responses[0].partitions[0];
    assert_eq!((pd.error_code, pd.high_watermark), (code::NONE, 2));
    assert!(!pd.records.as_ref().unwrap().is_empty());
}

#[test]
fn produce_errors_name_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    let mut logs = Vec::new();
    let produce::Outcome::Done(Some(chunks)) =
        produce::handle(&table, &mut body(&produce_req(-1, 5, &[b"a"]), 9), 9, 1, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap()
    else {
        panic!()
    };
    let resp: ProduceResponse = decode(chunks, 9, true);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(pr.error_message.as_deref(), Some("partition t-5 does not exist"));
    // A batch with a broken CRC is refused and nothing is written.
    let mut req = produce_req(1, 0, &[b"x"]);
    let Some(Records::Bytes(b)) = &req.topic_data[0].partition_data[0].records else { panic!() };
    let mut raw = b.to_vec();
    let last = raw.len() - 1;
    raw[last] ^= 0xff;
    req.topic_data[0].partition_data[0].records = Some(Records::Bytes(Bytes::from(raw)));
    let produce::Outcome::Done(Some(chunks)) =
        produce::handle(&table, &mut body(&req, 9), 9, 2, &ANON, 0, &mut logs, None, &mut || 0).unwrap()
    else {
        panic!()
    };
    let resp: ProduceResponse = decode(chunks, 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::CORRUPT_MESSAGE);
    assert!(logs.iter().any(|l| l.message.contains("produce to t-0 from peer rejected (CORRUPT_MESSAGE)")));
    assert_eq!(table.get("t", 0).unwrap().log.log_end_offset(), 0);
}

#[test]
fn acks_all_waits_for_the_isr_and_times_out_naming_the_hw() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    let mut logs = Vec::new();
    let out = produce::handle(
        &table,
        &mut body(&produce_req(-1, 0, &[b"a", b"b", b"c"]), 9),
        9,
        3,
        &ANON,
        0,
        &mut logs,
        None,
        &mut || 0,
    )
    .unwrap();
    let produce::Outcome::Wait(mut pending) = out else { panic!("follower 2 has not fetched: the HW is behind") };
    assert_eq!((p.log.log_end_offset(), p.log.high_watermark()), (3, 0));
    assert!(pending.try_complete(false).unwrap().is_none());
    // The follower catches up to 2: not yet; to 3: the HW covers the batch.
    p.record_follower_fetch(2, 2, 0);
    assert!(p.maybe_increment_hw());
    assert!(pending.try_complete(false).unwrap().is_none());
    p.record_follower_fetch(2, 3, 0);
    assert!(p.maybe_increment_hw());
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().unwrap(), 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NONE);

    // Another write the follower never fetches: at the deadline, REQUEST_TIMED_OUT.
    let out =
        produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"d"]), 9), 9, 4, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
    let produce::Outcome::Wait(mut pending) = out else { panic!() };
    let resp: ProduceResponse = decode(pending.try_complete(true).unwrap().unwrap(), 9, true);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, code::REQUEST_TIMED_OUT);
    assert_eq!(pr.error_message.as_deref(), Some("HW of t-0 did not reach 4 within 1000 ms"));
}

#[test]
fn fetch_long_poll_parks_until_data_and_below_the_hw() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1]);
    let mut logs = Vec::new();
    let out = fetch::handle(
        &table,
        &mut FetchSessionCache::new(10),
        &mut body(&fetch_req(0, 1, 500), 11),
        11,
        1,
        &ANON,
        &mut logs,
        None,
    )
    .unwrap();
    let fetch::Outcome::Wait(mut pending) = out else { panic!("an empty log parks the fetch") };
    assert_eq!(pending.waiting_on.len(), 1);
    assert!(pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().is_none());
    let _ =
        produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, 2, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
    assert_eq!(p.log.high_watermark(), 1);
    let resp: FetchResponse = decode(
        pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().unwrap(),
        11,
        false,
    );
    assert!(!resp.responses[0].partitions[0].records.as_ref().unwrap().is_empty());
    // Out of range: answered at once with the error, and logged.
    let out = fetch::handle(
        &table,
        &mut FetchSessionCache::new(10),
        &mut body(&fetch_req(9, 1, 500), 11),
        11,
        3,
        &ANON,
        &mut logs,
        None,
    )
    .unwrap();
    let fetch::Outcome::Done(chunks, _) = out else { panic!() };
    let resp: FetchResponse = decode(chunks, 11, false);
    assert_eq!(resp.responses[0].partitions[0].error_code, code::OFFSET_OUT_OF_RANGE);
    assert!(logs.iter().any(|l| l.message.contains("fetch offset 9 of t-0 is outside [log start 0, LEO 1]")));
    // A deleted partition (gone from the image, then removed) answers a parked fetch with
    // UNKNOWN_TOPIC_OR_PARTITION.
    let out = fetch::handle(
        &table,
        &mut FetchSessionCache::new(10),
        &mut body(&fetch_req(1, 1, 500), 11),
        11,
        4,
        &ANON,
        &mut logs,
        None,
    )
    .unwrap();
    let fetch::Outcome::Wait(mut pending) = out else { panic!() };
    table.set_metadata(1, ClusterView::default());
    table.remove("t", 0);
    let resp: FetchResponse = decode(
        pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().unwrap(),
        11,
        false,
    );
    assert_eq!(resp.responses[0].partitions[0].error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
}

/// Serves `req` (Fetch v12) that must be answered at once (not parked): its response.
fn fetch_now(
    table: &PartitionTable,
    sessions: &mut FetchSessionCache,
    req: &FetchRequest,
    correlation_id: i32,
) -> FetchResponse {
    let out =
        fetch::handle(table, sessions, &mut body(req, 12), 12, correlation_id, &ANON, &mut Vec::new(), None).unwrap();
    let fetch::Outcome::Done(chunks, _) = out else { panic!("request {correlation_id} was parked") };
    decode(chunks, 12, true)
}

/// `req` in session `id` at `epoch`.
fn in_session(mut req: FetchRequest, id: i32, epoch: i32) -> FetchRequest {
    req.session_id = id;
    req.session_epoch = epoch;
    req
}

#[test]
fn fetch_sessions_send_only_news() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    let mut sessions = FetchSessionCache::new(10);
    let mut logs = Vec::new();
    let _ =
        produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, 1, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
    // Open a session (epoch 0): a full response carrying the new session id.
    let req = in_session(fetch_req(0, 0, 0), 0, 0);
    let resp = fetch_now(&table, &mut sessions, &req, 1);
    let id = resp.session_id;
    assert_ne!(id, 0);
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 1);
    // Epoch 1, listing nothing: the session's cached fetch offset (0) is used.
    let mut inc = in_session(fetch_req(0, 0, 0), id, 1);
    inc.topics.clear();
    let resp = fetch_now(&table, &mut sessions, &inc, 2);
    assert_eq!(resp.session_id, id);
    // The records at offset 0 are news (records count as news every time).
    assert_eq!(resp.responses.len(), 1);
    // Move the offset to 1 (the end): no records, HW unchanged: an empty incremental response.
    let inc2 = in_session(fetch_req(1, 0, 0), id, 2);
    let resp = fetch_now(&table, &mut sessions, &inc2, 3);
    assert!(resp.responses.is_empty(), "{resp:?}");
    // A new record moves the HW: the partition is back in the response.
    let _ =
        produce::handle(&table, &mut body(&produce_req(1, 0, &[b"b"]), 9), 9, 4, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
    let mut inc3 = in_session(fetch_req(1, 0, 0), id, 3);
    inc3.topics.clear();
    let resp = fetch_now(&table, &mut sessions, &inc3, 5);
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 2);
    assert!(!resp.responses[0].partitions[0].records.as_ref().unwrap().is_empty());
    // A stale epoch and an unknown session are top-level errors.
    let answer = fetch_now(&table, &mut sessions, &inc3, 6);
    assert_eq!(answer.error_code, code::INVALID_FETCH_SESSION_EPOCH);
    let mut unknown = inc3.clone();
    unknown.session_id = id + 1000;
    let answer = fetch_now(&table, &mut sessions, &unknown, 7);
    assert_eq!(answer.error_code, code::FETCH_SESSION_ID_NOT_FOUND);
    // Epoch -1 closes the session.
    let close = in_session(fetch_req(2, 0, 0), id, -1);
    let answer = fetch_now(&table, &mut sessions, &close, 8);
    assert_eq!(answer.session_id, 0);
    assert!(sessions.is_empty());
}

#[test]
fn a_session_request_moves_the_epoch_when_taken_in_not_when_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    let mut sessions = FetchSessionCache::new(10);
    let mut logs = Vec::new();
    let open = in_session(fetch_req(0, 0, 0), 0, 0);
    let answer = fetch_now(&table, &mut sessions, &open, 1);
    let id = answer.session_id;
    // Epoch 1 parks (nothing to read, a long poll); its connection goes away unanswered.
    let mut inc = in_session(fetch_req(0, 1, 10_000), id, 1);
    inc.topics.clear();
    let fetch::Outcome::Wait(_dropped) =
        fetch::handle(&table, &mut sessions, &mut body(&inc, 12), 12, 2, &ANON, &mut logs, None).unwrap()
    else {
        panic!("an empty partition long-polls")
    };
    // Sent again at epoch 1, it is refused: the session may differ from what the client holds.
    let answer = fetch_now(&table, &mut sessions, &inc, 3);
    assert_eq!(answer.error_code, code::INVALID_FETCH_SESSION_EPOCH);
    // A full request naming the session (epoch 0) replaces it.
    let replace = in_session(fetch_req(0, 0, 0), id, 0);
    let answer = fetch_now(&table, &mut sessions, &replace, 4);
    let new_id = answer.session_id;
    assert!(new_id != 0 && new_id != id);
    assert_eq!(sessions.len(), 1, "the replaced session is closed");
}

#[test]
fn a_session_reads_the_replica_it_found_until_the_table_replaces_or_removes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    let mut sessions = FetchSessionCache::new(10);
    let mut logs = Vec::new();
    let _ =
        produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, 1, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
    let id = fetch_now(&table, &mut sessions, &in_session(fetch_req(1, 0, 0), 0, 0), 1).session_id;
    let mut epoch = 0;
    let mut next = |table: &PartitionTable, sessions: &mut FetchSessionCache| {
        epoch += 1;
        let mut inc = in_session(fetch_req(0, 0, 0), id, epoch);
        inc.topics.clear();
        fetch_now(table, sessions, &inc, 10 + epoch)
    };
    assert!(next(&table, &mut sessions).responses.is_empty(), "nothing new");
    // The topic recreated under the same name: a new, empty replica takes the old one's place.
    let log = Arc::new(Log::open(&dir.path().join("t-0-new"), "t", 0, LogConfig::default(), None, 0).unwrap());
    table.add("t", 0, 1, log, LeaderState { leader: 1, leader_epoch: 0, isr: vec![1], min_insync_replicas: 1 });
    let resp = next(&table, &mut sessions);
    let part = &resp.responses[0].partitions[0];
    assert_eq!(
        (part.error_code, part.high_watermark),
        (code::OFFSET_OUT_OF_RANGE, 0),
        "the new replica is read: {resp:?}"
    );
    let _ = produce::handle(
        &table,
        &mut body(&produce_req(1, 0, &[b"b", b"c"]), 9),
        9,
        2,
        &ANON,
        0,
        &mut logs,
        None,
        &mut || 0,
    )
    .unwrap();
    assert_eq!(next(&table, &mut sessions).responses[0].partitions[0].high_watermark, 2);
    // Removed: the session's partition is answered with an error, not from the old replica.
    table.remove("t", 0);
    let resp = next(&table, &mut sessions);
    assert_eq!(resp.responses[0].partitions[0].error_code, code::NOT_LEADER_OR_FOLLOWER, "{resp:?}");
}

fn produce_to(topic: &str, partition: i32, version: i16, table: &PartitionTable) -> ProduceResponse {
    let mut req = produce_req(1, partition, &[b"a"]);
    req.topic_data[0].name = topic.into();
    let out = produce::handle(table, &mut body(&req, version), version, 1, &ANON, 0, &mut Vec::new(), None, &mut || 0)
        .unwrap();
    let produce::Outcome::Done(Some(chunks)) = out else { panic!("acks=1 answers at once") };
    decode(chunks, version, version >= 9)
}

#[test]
fn produce_at_a_non_leader_names_the_leader_from_v10() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    // This broker (1) holds a follower replica of t-0; broker 2 leads it at epoch 6.
    p.update(LeaderState { leader: 2, leader_epoch: 6, isr: vec![1, 2], min_insync_replicas: 1 });
    table.set_metadata(1, view_with_t(2, 6));
    let resp = produce_to("t", 0, 10, &table);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, code::NOT_LEADER_OR_FOLLOWER);
    assert_eq!((pr.current_leader.leader_id, pr.current_leader.leader_epoch), (2, 6));
    assert_eq!(pr.error_message.as_deref(), Some("broker 1 is not the leader of t-0: broker 2 is (leader epoch 6)"));
    let eps: Vec<_> =
        resp.node_endpoints.iter().map(|e| (e.node_id, e.host.as_str(), e.port, e.rack.clone())).collect();
    assert_eq!(eps, [(2, "localhost", 9002, None)]);
    assert_eq!(p.log.log_end_offset(), 0, "nothing written at a follower");

    // A partition this broker holds no replica of: NOT_LEADER_OR_FOLLOWER too (it exists),
    // naming broker 3 with its rack; each endpoint once for two partitions.
    let mut req = produce_req(1, 0, &[b"a"]);
    req.topic_data[0].name = "u".into();
    let second = req.topic_data[0].partition_data[0].clone();
    req.topic_data[0].partition_data.push(PartitionProduceData { index: 1, ..second });
    let produce::Outcome::Done(Some(chunks)) =
        produce::handle(&table, &mut body(&req, 11), 11, 1, &ANON, 0, &mut Vec::new(), None, &mut || 0).unwrap()
    else {
        panic!()
    };
    let resp: ProduceResponse = decode(chunks, 11, true);
    for pr in &resp.responses[0].partition_responses {
        assert_eq!(
            (pr.error_code, pr.current_leader.leader_id, pr.current_leader.leader_epoch),
            (code::NOT_LEADER_OR_FOLLOWER, 3, 4)
        );
    }
    let eps: Vec<_> = resp.node_endpoints.iter().map(|e| (e.node_id, e.port, e.rack.clone())).collect();
    assert_eq!(eps, [(3, 9003, Some("r3".to_owned()))]);

    // Before v10 the same error, without the hint (the version has no field for it).
    let resp = produce_to("u", 0, 9, &table);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!((pr.error_code, pr.current_leader.leader_id), (code::NOT_LEADER_OR_FOLLOWER, -1));
    assert!(resp.node_endpoints.is_empty());
    // Only what does not exist is UNKNOWN_TOPIC_OR_PARTITION.
    let resp = produce_to("u", 2, 11, &table);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(resp.responses[0].partition_responses[0].error_message.as_deref(), Some("partition u-2 does not exist"));
    let resp = produce_to("nope", 0, 11, &table);
    assert_eq!(
        resp.responses[0].partition_responses[0].error_message.as_deref(),
        Some("topic \"nope\" does not exist")
    );
    assert!(resp.node_endpoints.is_empty());
}

fn fetch_of(
    version: i16,
    topic: &str,
    id: [u8; 16],
    partition: i32,
    epoch: i32,
    table: &PartitionTable,
) -> FetchResponse {
    let mut req = fetch_req(0, 0, 0);
    req.topics[0].topic = if version >= 13 { String::new() } else { topic.into() };
    req.topics[0].topic_id = if version >= 13 { id } else { [0; 16] };
    req.topics[0].partitions[0].partition = partition;
    req.topics[0].partitions[0].current_leader_epoch = epoch;
    let out = fetch::handle(
        table,
        &mut FetchSessionCache::new(10),
        &mut body(&req, version),
        version,
        1,
        &ANON,
        &mut Vec::new(),
        None,
    )
    .unwrap();
    let fetch::Outcome::Done(chunks, _) = out else { panic!("errors and max_wait 0 answer at once") };
    decode(chunks, version, version >= 12)
}

#[test]
fn fetch_by_topic_id_and_leader_hints() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    table.set_metadata(1, view_with_t(1, 0));
    let _ = produce_to("t", 0, 11, &table);
    // v13+: by topic id; the response names the id, not the name.
    for v in [13, 16, 18] {
        let resp = fetch_of(v, "", T_ID, 0, 0, &table);
        let (t, pd) = (&resp.responses[0], &resp.responses[0].partitions[0]);
        assert_eq!((t.topic_id, t.topic.as_str(), pd.error_code, pd.high_watermark), (T_ID, "", code::NONE, 1), "v{v}");
        assert!(!pd.records.as_ref().unwrap().is_empty());
    }
    // An id the image does not have: UNKNOWN_TOPIC_ID.
    let resp = fetch_of(16, "", [5; 16], 0, -1, &table);
    assert_eq!(
        (resp.responses[0].topic_id, resp.responses[0].partitions[0].error_code),
        ([5; 16], code::UNKNOWN_TOPIC_ID)
    );
    // Led elsewhere: NOT_LEADER_OR_FOLLOWER, CurrentLeader from v12, NodeEndpoints from v16.
    let resp = fetch_of(16, "", U_ID, 1, -1, &table);
    let pd = &resp.responses[0].partitions[0];
    assert_eq!(
        (pd.error_code, pd.current_leader.leader_id, pd.current_leader.leader_epoch),
        (code::NOT_LEADER_OR_FOLLOWER, 3, 4)
    );
    assert_eq!(resp.node_endpoints.iter().map(|e| (e.node_id, e.port)).collect::<Vec<_>>(), [(3, 9003)]);
    let resp = fetch_of(12, "u", [0; 16], 1, -1, &table);
    let pd = &resp.responses[0].partitions[0];
    assert_eq!((pd.error_code, pd.current_leader.leader_id), (code::NOT_LEADER_OR_FOLLOWER, 3));
    let resp = fetch_of(11, "u", [0; 16], 1, -1, &table);
    assert_eq!(
        (resp.responses[0].partitions[0].error_code, resp.responses[0].partitions[0].current_leader.leader_id),
        (code::NOT_LEADER_OR_FOLLOWER, -1)
    );
    // An old leader epoch is fenced, and told the current one; a newer one is unknown.
    table.get("t", 0).unwrap().update(LeaderState { leader: 1, leader_epoch: 3, isr: vec![1], min_insync_replicas: 1 });
    let resp = fetch_of(16, "", T_ID, 0, 2, &table);
    let pd = &resp.responses[0].partitions[0];
    assert_eq!(
        (pd.error_code, pd.current_leader.leader_id, pd.current_leader.leader_epoch),
        (code::FENCED_LEADER_EPOCH, 1, 3)
    );
    assert_eq!(fetch_of(16, "", T_ID, 0, 4, &table).responses[0].partitions[0].error_code, code::UNKNOWN_LEADER_EPOCH);
    // Nonexistent partition of a known topic.
    assert_eq!(
        fetch_of(16, "", T_ID, 7, -1, &table).responses[0].partitions[0].error_code,
        code::UNKNOWN_TOPIC_OR_PARTITION
    );
}

#[test]
fn a_v15_follower_names_itself_in_replica_state() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    let out = produce::handle(
        &table,
        &mut body(&produce_req(1, 0, &[b"a", b"b"]), 11),
        11,
        1,
        &ANON,
        0,
        &mut Vec::new(),
        None,
        &mut || 0,
    )
    .unwrap();
    assert!(matches!(out, produce::Outcome::Done(Some(_))));
    assert_eq!(p.log.high_watermark(), 0, "follower 2 has not fetched");
    let mut req = fetch_req(2, 0, 0);
    req.topics[0].topic = String::new();
    req.topics[0].topic_id = T_ID;
    req.replica_state.replica_id = 2;
    req.replica_state.replica_epoch = 1;
    let out = fetch::handle(
        &table,
        &mut FetchSessionCache::new(10),
        &mut body(&req, 15),
        15,
        1,
        &ANON,
        &mut Vec::new(),
        None,
    )
    .unwrap();
    assert!(matches!(out, fetch::Outcome::Done(..) | fetch::Outcome::Wait(_)));
    assert_eq!(p.log.high_watermark(), 2, "the follower's fetch offset moved the HW");
}

#[test]
fn a_parked_acks_all_produce_settles_on_leadership_and_isr_changes() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    let mut logs = Vec::new();
    // min.insync.replicas=2 and ISR [1, 2]: parked until follower 2 has the record.
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1, 2], min_insync_replicas: 2 });
    let produce::Outcome::Wait(mut pending) =
        produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"a"]), 9), 9, 1, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap()
    else {
        panic!("parked for follower 2")
    };
    // The ISR shrinks to the leader alone, below min.insync.replicas=2: the HW stays (the
    // strict min ISR rule), so the produce waits (Kafka's: until its timeout or the ISR is
    // back) ...
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1], min_insync_replicas: 2 });
    assert!(!p.maybe_increment_hw());
    assert_eq!(p.log.high_watermark(), 0);
    assert!(pending.try_complete(false).unwrap().is_none());
    // ... and a min.insync.replicas lowered to 1 lets the HW reach the record.
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1], min_insync_replicas: 1 });
    assert_eq!(p.log.high_watermark(), 1);
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().expect("settled"), 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NONE);
    // Parked with the ISR at min ISR; a follower that had the record leaves the ISR after
    // the HW reached it: written, not as durable as asked.
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1, 2], min_insync_replicas: 2 });
    let produce::Outcome::Wait(mut pending) = produce::handle(
        &table,
        &mut body(&produce_req(-1, 0, &[b"a2"]), 9),
        9,
        19,
        &ANON,
        0,
        &mut logs,
        None,
        &mut || 0,
    )
    .unwrap() else {
        panic!("parked for follower 2")
    };
    p.log.update_high_watermark(p.log.log_end_offset());
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1], min_insync_replicas: 2 });
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().expect("settled"), 9, true);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!(pr.error_code, code::NOT_ENOUGH_REPLICAS_AFTER_APPEND);
    assert_eq!(pr.error_message.as_deref(), Some("ISR of t-0 shrank to [1], below min.insync.replicas=2"));

    // Parked again; then another broker becomes leader: NOT_LEADER_OR_FOLLOWER at once,
    // although the local HW may never move again.
    p.update(LeaderState { leader: 1, leader_epoch: 1, isr: vec![1, 2], min_insync_replicas: 1 });
    let produce::Outcome::Wait(mut pending) =
        produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"b"]), 9), 9, 2, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap()
    else {
        panic!("parked for follower 2")
    };
    assert!(pending.try_complete(false).unwrap().is_none());
    p.update(LeaderState { leader: 2, leader_epoch: 2, isr: vec![1, 2], min_insync_replicas: 1 });
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().expect("settled"), 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NOT_LEADER_OR_FOLLOWER);
    // ... and leadership away and back (a new epoch) is no better: the tail may be rewritten.
    p.update(LeaderState { leader: 1, leader_epoch: 3, isr: vec![1, 2], min_insync_replicas: 1 });
    let produce::Outcome::Wait(mut pending) =
        produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"c"]), 9), 9, 3, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap()
    else {
        panic!()
    };
    p.update(LeaderState { leader: 1, leader_epoch: 4, isr: vec![1], min_insync_replicas: 1 });
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().expect("settled"), 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NOT_LEADER_OR_FOLLOWER);
}

#[test]
fn the_leader_answers_a_diverging_epoch_and_tracks_follower_catch_up() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    // Epoch 0: offsets 0-1; epoch 3: offsets 2-3.
    let _ = produce::handle(
        &table,
        &mut body(&produce_req(1, 0, &[b"a", b"b"]), 9),
        9,
        1,
        &ANON,
        0,
        &mut Vec::new(),
        None,
        &mut || 0,
    )
    .unwrap();
    p.update(LeaderState { leader: 1, leader_epoch: 3, isr: vec![1, 2], min_insync_replicas: 1 });
    let _ = produce::handle(
        &table,
        &mut body(&produce_req(1, 0, &[b"c", b"d"]), 9),
        9,
        2,
        &ANON,
        0,
        &mut Vec::new(),
        None,
        &mut || 0,
    )
    .unwrap();
    assert_eq!(p.log.epoch_entries(), [(0, 0), (3, 2)]);
    let follower_fetch = |offset: i64, last_epoch: i32| -> FetchResponse {
        let mut req = fetch_req(offset, 0, 0);
        req.replica_id = 2;
        req.topics[0].partitions[0].last_fetched_epoch = last_epoch;
        let out = fetch::handle(
            &table,
            &mut FetchSessionCache::new(1),
            &mut body(&req, 12),
            12,
            1,
            &ANON,
            &mut Vec::new(),
            None,
        )
        .unwrap();
        let fetch::Outcome::Done(chunks, _) = out else { panic!("answered at once") };
        decode(chunks, 12, true)
    };
    // A follower with epoch-0 records up to offset 3 (a tail the leader does not have):
    // epoch 0 ends at 2 here.
    let resp = follower_fetch(3, 0);
    let d = &resp.responses[0].partitions[0];
    assert_eq!((d.error_code, d.diverging_epoch.epoch, d.diverging_epoch.end_offset), (code::NONE, 0, 2));
    assert!(d.records.as_ref().is_none_or(Records::is_empty), "no records until it truncates");
    // An epoch the leader never had (1): the largest epoch below it (0) and where it ends.
    let d = follower_fetch(2, 1).responses[0].partitions[0].clone();
    assert_eq!((d.diverging_epoch.epoch, d.diverging_epoch.end_offset), (0, 2));
    // Consistent: records from offset 2, and the follower's state moves.
    let d = follower_fetch(2, 0).responses[0].partitions[0].clone();
    assert_eq!(d.diverging_epoch.epoch, -1);
    assert!(!d.records.as_ref().unwrap().is_empty());
    let states = p.follower_states();
    assert_eq!(states.len(), 1);
    let (replica, st) = states[0];
    assert_eq!((replica, st.leo), (2, 2));
    assert!(st.last_caught_up_ms > 0, "caught up at the leadership change (epoch 3), not at this fetch");
    let before = st.last_caught_up_ms;
    std::thread::sleep(std::time::Duration::from_millis(5));
    // At the LEO: caught up now.
    let _ = follower_fetch(4, 3);
    let (_, st) = p.follower_states()[0];
    assert_eq!(st.leo, 4);
    assert!(st.last_caught_up_ms > before);
    assert_eq!(p.log.high_watermark(), 4, "the HW is the ISR's minimum LEO");
}

#[test]
fn consumers_read_from_followers_and_leaders_name_a_replica_in_their_rack() {
    let dir = tempfile::tempdir().unwrap();
    // Broker 1 leads t-0 with ISR [1, 2, 3]; broker 3 is in rack "r3" (view_with_t).
    let (table, p) = table_with(dir.path(), vec![1, 2, 3]);
    let _ = produce::handle(
        &table,
        &mut body(&produce_req(1, 0, &[b"a", b"b"]), 9),
        9,
        1,
        &ANON,
        0,
        &mut Vec::new(),
        None,
        &mut || 0,
    )
    .unwrap();
    let consumer_fetch = |version: i16, rack: &str| -> FetchResponse {
        let mut req = fetch_req(0, 0, 0);
        req.rack_id = rack.to_owned();
        let out = fetch::handle(
            &table,
            &mut FetchSessionCache::new(1),
            &mut body(&req, version),
            version,
            1,
            &ANON,
            &mut Vec::new(),
            None,
        )
        .unwrap();
        let fetch::Outcome::Done(chunks, _) = out else { panic!("answered at once") };
        decode(chunks, version, version >= 12)
    };
    let follower_caught_up = |replica: i32, offset: i64| {
        let mut req = fetch_req(offset, 0, 0);
        req.replica_id = replica;
        let _ = fetch::handle(
            &table,
            &mut FetchSessionCache::new(1),
            &mut body(&req, 12),
            12,
            1,
            &ANON,
            &mut Vec::new(),
            None,
        )
        .unwrap();
    };
    follower_caught_up(2, 2);
    follower_caught_up(3, 2);
    assert_eq!(p.log.high_watermark(), 2);
    // The selector is off by default: the leader serves everyone.
    let d = consumer_fetch(11, "r3").responses[0].partitions[0].clone();
    assert_eq!(d.preferred_read_replica, -1);
    assert!(!d.records.as_ref().unwrap().is_empty());
    table.set_rack_aware_selector(true);
    let d = consumer_fetch(11, "r3").responses[0].partitions[0].clone();
    assert_eq!((d.error_code, d.preferred_read_replica), (code::NONE, 3), "broker 3 is in the consumer's rack");
    assert!(d.records.as_ref().is_none_or(Records::is_empty), "no records with a preferred replica");
    assert_eq!(d.high_watermark, 2);
    // No rack, or a rack nobody is in: the leader serves.
    for rack in ["", "r9"] {
        let d = consumer_fetch(11, rack).responses[0].partitions[0].clone();
        assert_eq!(d.preferred_read_replica, -1, "rack {rack:?}");
        assert!(!d.records.as_ref().unwrap().is_empty());
    }
    // A follower outside the ISR, or behind the fetch offset, is not chosen.
    p.update(LeaderState { leader: 1, leader_epoch: 0, isr: vec![1, 2], min_insync_replicas: 1 });
    assert_eq!(consumer_fetch(11, "r3").responses[0].partitions[0].preferred_read_replica, -1);

    // This broker as a follower (leader 2, epoch 1): a consumer's v11+ fetch is served up to
    // its HW; v10 and older get NOT_LEADER_OR_FOLLOWER.
    p.update(LeaderState { leader: 2, leader_epoch: 1, isr: vec![1, 2], min_insync_replicas: 1 });
    table.set_metadata(1, view_with_t(2, 1));
    p.follower_high_watermark(0);
    let d = consumer_fetch(11, "").responses[0].partitions[0].clone();
    assert_eq!((d.error_code, d.high_watermark), (code::NONE, 0));
    assert!(d.records.as_ref().is_none_or(Records::is_empty), "nothing below a follower HW of 0");
    p.follower_high_watermark(2);
    let d = consumer_fetch(11, "").responses[0].partitions[0].clone();
    assert_eq!((d.error_code, d.high_watermark), (code::NONE, 2));
    assert!(!d.records.as_ref().unwrap().is_empty(), "the follower serves what is below its HW");
    assert_eq!(consumer_fetch(10, "").responses[0].partitions[0].error_code, code::NOT_LEADER_OR_FOLLOWER);
}

#[test]
fn hw_moves_of_a_watched_partition_are_reported_for_the_control_plane() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1, 2]);
    let poll = mio::Poll::new().unwrap();
    assert!(table.wakeup().attach(mio::Waker::new(poll.registry(), mio::Token(0)).unwrap()));
    let mut logs = Vec::new();
    for (n, watched) in [(1, false), (2, true), (3, false)] {
        produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, n, &ANON, 0, &mut logs, None, &mut || 0)
            .unwrap();
        p.watch_high_watermark(watched);
        p.record_follower_fetch(2, i64::from(n), 0);
        assert!(p.maybe_increment_hw(), "the follower's fetch moves the HW to {n}");
        let reported: Vec<_> = table.wakeup().take_hw_moved().into_iter().map(|(t, i)| (t.to_string(), i)).collect();
        let expected = if watched { vec![("t".to_owned(), 0)] } else { vec![] };
        assert_eq!(reported, expected, "HW {n}, watched {watched}");
        assert!(table.wakeup().take_hw_moved().is_empty(), "reported once");
    }
}

fn txn_req(version_12_txn_id: Option<&str>, pid: i64, epoch: i16, seq: i32, values: &[&[u8]]) -> ProduceRequest {
    let batch = BatchBuilder::new()
        .producer(pid, epoch, seq)
        .transactional(true)
        .records(values.iter().map(|v| Rec::value(v)))
        .build();
    let mut req = produce_req(1, 0, &[]);
    req.transactional_id = version_12_txn_id.map(str::to_owned);
    req.topic_data[0].partition_data[0].records = Some(Records::Bytes(Bytes::from(batch)));
    req
}

fn verdict(code: i16) -> produce::Verdict {
    produce::Verdict { topic: "t".into(), partition: 0, error_code: code, message: format!("code {code}") }
}

#[test]
fn transactions_v2_produce_goes_to_the_coordinator_once_per_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1]);
    let mut logs = Vec::new();
    let req = txn_req(Some("tx"), 5, 0, 0, &[b"a"]);
    // v12, no transaction open here: nothing appended, the partitions to add
    let produce::Outcome::Verify(v) =
        produce::handle(&table, &mut body(&req, 12), 12, 1, &ANON, 0, &mut logs, None, &mut || 0).unwrap()
    else {
        panic!("expected a verification")
    };
    assert_eq!(
        v,
        produce::Verification {
            transactional_id: "tx".into(),
            producer_id: 5,
            producer_epoch: 0,
            partitions: vec![("t".into(), 0)],
            verify_only: false,
            version: 12
        }
    );
    assert_eq!(p.log.log_end_offset(), 0);
    // v11 (transactions v1) appends without asking
    let req11 = txn_req(Some("tx"), 6, 0, 0, &[b"v1"]);
    assert!(matches!(
        produce::handle(&table, &mut body(&req11, 11), 11, 2, &ANON, 0, &mut logs, None, &mut || 0).unwrap(),
        produce::Outcome::Done(_)
    ));
    assert_eq!(p.log.log_end_offset(), 1);
    // the coordinator refused: its error, nothing appended
    let produce::Outcome::Done(Some(chunks)) = produce::handle(
        &table,
        &mut body(&req, 12),
        12,
        3,
        &ANON,
        0,
        &mut logs,
        Some(&[verdict(code::NOT_ENOUGH_REPLICAS)]),
        &mut || 0,
    )
    .unwrap() else {
        panic!("expected a response")
    };
    let resp: ProduceResponse = decode(chunks, 12, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NOT_ENOUGH_REPLICAS);
    assert_eq!(p.log.log_end_offset(), 1);
    // not among the verdicts: not added, refused
    let produce::Outcome::Done(Some(chunks)) =
        produce::handle(&table, &mut body(&req, 12), 12, 4, &ANON, 0, &mut logs, Some(&[]), &mut || 0).unwrap()
    else {
        panic!("expected a response")
    };
    let resp: ProduceResponse = decode(chunks, 12, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::INVALID_TXN_STATE);
    // added: appended, and the transaction is open here
    let produce::Outcome::Done(Some(chunks)) = produce::handle(
        &table,
        &mut body(&req, 12),
        12,
        5,
        &ANON,
        0,
        &mut logs,
        Some(&[verdict(code::NONE)]),
        &mut || 0,
    )
    .unwrap() else {
        panic!("expected a response")
    };
    let resp: ProduceResponse = decode(chunks, 12, true);
    assert_eq!(
        (resp.responses[0].partition_responses[0].error_code, resp.responses[0].partition_responses[0].base_offset),
        (code::NONE, 1)
    );
    assert!(p.log.has_ongoing_transaction(5, 0));
    // the next batch of the open transaction appends at once
    let next = txn_req(Some("tx"), 5, 0, 1, &[b"b"]);
    assert!(matches!(
        produce::handle(&table, &mut body(&next, 12), 12, 6, &ANON, 0, &mut logs, None, &mut || 0).unwrap(),
        produce::Outcome::Done(_)
    ));
    assert_eq!(p.log.log_end_offset(), 3);
    // a non-transactional v12 produce never goes to the coordinator
    assert!(matches!(
        produce::handle(
            &table,
            &mut body(&produce_req(1, 0, &[b"x"]), 12),
            12,
            7,
            &ANON,
            0,
            &mut logs,
            None,
            &mut || 0
        )
        .unwrap(),
        produce::Outcome::Done(_)
    ));
}

#[test]
fn transactions_v1_first_batches_are_checked_when_verification_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let (table, p) = table_with(dir.path(), vec![1]);
    let mut logs = Vec::new();
    let req = txn_req(Some("tx"), 5, 0, 0, &[b"a"]);
    assert!(matches!(
        produce::handle(&table, &mut body(&req, 11), 11, 1, &ANON, 0, &mut logs, None, &mut || 0).unwrap(),
        produce::Outcome::Done(_)
    ));
    table.set_verify_transactions_v1(true);
    let req = txn_req(Some("tx"), 6, 0, 0, &[b"b"]);
    let produce::Outcome::Verify(v) =
        produce::handle(&table, &mut body(&req, 9), 9, 2, &ANON, 0, &mut logs, None, &mut || 0).unwrap()
    else {
        panic!("expected a verification")
    };
    assert!(v.verify_only && v.version == 9 && v.partitions == vec![("t".to_owned(), 0)]);
    // the producer of the open transaction goes on without asking
    let req = txn_req(Some("tx"), 5, 0, 1, &[b"c"]);
    assert!(matches!(
        produce::handle(&table, &mut body(&req, 9), 9, 3, &ANON, 0, &mut logs, None, &mut || 0).unwrap(),
        produce::Outcome::Done(_)
    ));
    assert_eq!(p.log.log_end_offset(), 2);
}

#[test]
fn a_new_leadership_is_announced_and_its_followers_are_answered_early_as_often_as_their_sessions_allow() {
    use super::expected_followers::{
        identity, ExpectedFollowers, NewLeadership, PATIENCE, SHORT_POLL, SPACING_PER_PARTITION,
    };
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let table = PartitionTable::new();
    let poll = mio::Poll::new().unwrap();
    assert!(table.wakeup().attach(mio::Waker::new(poll.registry(), mio::Token(0)).unwrap()));
    let open = |i: i32| {
        Arc::new(Log::open(&dir.path().join(format!("t-{i}")), "t", i, LogConfig::default(), None, 0).unwrap())
    };
    let state = |leader: i32, leader_epoch: i32, isr: Vec<i32>| LeaderState {
        leader,
        leader_epoch,
        isr,
        min_insync_replicas: 1,
    };
    let led = |t: &PartitionTable| -> Vec<(usize, Vec<i32>)> {
        t.wakeup().take_new_leaderships().into_iter().map(|l| (l.replica, l.followers)).collect()
    };
    let p0 = table.add("t", 0, 1, open(0), state(1, 0, vec![1, 2, 3]));
    assert_eq!(led(&table), vec![(identity(&p0), vec![2, 3])]);
    let p1 = table.add("t", 1, 1, open(1), state(1, 0, vec![1]));
    assert!(led(&table).is_empty(), "a leader alone in its ISR expects nobody");
    p0.update(state(1, 0, vec![1, 2]));
    assert!(led(&table).is_empty(), "an ISR change is not a new leadership");
    p0.update(state(2, 1, vec![1, 2]));
    assert!(led(&table).is_empty(), "broker 2 leads now, not this one");
    p0.update(state(1, 2, vec![1, 2]));
    assert_eq!(led(&table), vec![(identity(&p0), vec![2])]);

    let mut expected = ExpectedFollowers::default();
    let now = Instant::now();
    let long = now + Duration::from_millis(500);
    let leadership = || vec![NewLeadership { replica: identity(&p0), followers: vec![2, 3] }];
    assert_eq!(expected.note(leadership(), now), [2, 3].into_iter().collect());
    assert!(!expected.expects(4));
    assert_eq!(expected.park_until(4, [identity(&p1)].into_iter(), 1, long, now), long, "nothing expected of 4");
    // follower 2 (a session of 1,000 partitions) learned first: its parked fetch is answered now
    assert_eq!(expected.answer_early(2, 1000, long, now), now);
    let spaced = now + SPACING_PER_PARTITION * 1000;
    assert!(spaced > now + SHORT_POLL);
    // ... and its next fetch, still without t-0, parks until the spacing allows another
    assert_eq!(expected.park_until(2, [identity(&p1)].into_iter(), 1000, long, now), spaced);
    assert!(expected.expects(2));
    assert_eq!(
        expected.park_until(2, [identity(&p1), identity(&p0)].into_iter(), 1000, long, now),
        long,
        "2 reads t-0: a full long poll"
    );
    assert!(!expected.expects(2), "met expectations are dropped");
    // follower 3 has 20,000 partitions: one early answer, then none within the 500 ms
    assert_eq!(expected.park_until(3, std::iter::empty(), 20_000, long, now), now + SHORT_POLL);
    assert_eq!(expected.park_until(3, std::iter::empty(), 20_000, long, now + SHORT_POLL), long, "spaced by a second");
    assert!(expected.expects(3));
    assert_eq!(expected.note(leadership(), now + SHORT_POLL), [2, 3].into_iter().collect());
    assert_eq!(expected.answer_early(3, 20_000, long, now + SHORT_POLL), long, "not even for a new leadership");
    assert_eq!(
        expected.park_until(3, std::iter::empty(), 1, now + PATIENCE * 3, now + PATIENCE * 2),
        now + PATIENCE * 3,
        "after PATIENCE 3 is not waited for"
    );
    assert!(!expected.expects(3));
}

#[test]
fn a_follower_session_reads_only_what_changed_and_keeps_its_quiet_partitions_caught_up() {
    use super::partition::now_ms;
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let (table, p0) = table_with(dir.path(), vec![1, 2]);
    let log = Arc::new(Log::open(&dir.path().join("t-1"), "t", 1, LogConfig::default(), None, 0).unwrap());
    let p1 =
        table.add("t", 1, 1, log, LeaderState { leader: 1, leader_epoch: 0, isr: vec![1, 2], min_insync_replicas: 1 });
    let mut sessions = FetchSessionCache::new(10);
    let produce = |partition: i32, values: &[&[u8]]| {
        let _ = produce::handle(
            &table,
            &mut body(&produce_req(1, partition, values), 9),
            9,
            1,
            &ANON,
            0,
            &mut Vec::new(),
            None,
            &mut || 0,
        )
        .unwrap();
    };
    // Follower 2's request (v12) listing `(partition, fetch offset)` of topic t.
    let follower = |listed: &[(i32, i64)], id: i32, epoch: i32, min_bytes: i32| {
        let mut req = in_session(fetch_req(0, min_bytes, 10_000), id, epoch);
        req.replica_id = 2;
        req.topics[0].partitions = listed
            .iter()
            .map(|&(partition, fetch_offset)| FetchPartition {
                partition,
                fetch_offset,
                partition_max_bytes: 1 << 20,
                current_leader_epoch: -1,
                ..Default::default()
            })
            .collect();
        if listed.is_empty() {
            req.topics.clear();
        }
        req
    };
    let answered = |resp: &FetchResponse| -> Vec<(i32, i64, bool)> {
        resp.responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|d| (d.partition_index, d.high_watermark, d.records.as_ref().is_some_and(|r| !r.is_empty())))
            .collect()
    };
    let caught_up = |p: &super::partition::Partition| p.follower_states()[0].1;

    produce(0, &[b"a", b"b"]);
    // A full request opens the session: t-1 (empty, the follower at its LEO) goes quiet at once.
    let resp = fetch_now(&table, &mut sessions, &follower(&[(0, 0), (1, 0)], 0, 0, 0), 1);
    let id = resp.session_id;
    assert_eq!(answered(&resp), [(0, 0, true), (1, 0, false)]);
    assert_eq!(sessions.get_mut(id).unwrap().loud(), [0], "only t-0 (records sent) stays loud");
    // The follower appended up to 2: the HW moves, t-0 is answered with it.
    let resp = fetch_now(&table, &mut sessions, &follower(&[(0, 2)], id, 1, 0), 2);
    assert_eq!(answered(&resp), [(0, 2, false)]);
    // Nothing changed since: nothing is read or answered, every partition is quiet.
    let resp = fetch_now(&table, &mut sessions, &follower(&[], id, 2, 0), 3);
    assert!(answered(&resp).is_empty());
    assert!(sessions.get_mut(id).unwrap().loud().is_empty());
    // A quiet partition's follower counts as fetched and caught up at every fetch of the session.
    std::thread::sleep(Duration::from_millis(5));
    let before = now_ms();
    // (a long poll with every partition quiet parks: the session's changes will wake it)
    let out = fetch::handle(
        &table,
        &mut sessions,
        &mut body(&follower(&[], id, 3, 1), 12),
        12,
        4,
        &ANON,
        &mut Vec::new(),
        None,
    )
    .unwrap();
    let fetch::Outcome::Wait(idle) = out else { panic!("nothing to read: parked") };
    assert_eq!((idle.waiting_on.len(), idle.partitions()), (0, 2), "nothing read, of a session of 2");
    let (s0, s1) = (caught_up(&p0), caught_up(&p1));
    assert!(s0.last_caught_up_ms >= before && s0.last_fetch_ms >= before, "{s0:?}");
    assert!(s1.last_caught_up_ms >= before, "{s1:?}");
    // t-1 gets a record: the session reads it again, and its follower stays caught up as of
    // its last fetch only (the LEO moved past it).
    std::thread::sleep(Duration::from_millis(5));
    produce(1, &[b"c"]);
    assert_eq!(p1.log.log_end_offset(), 1);
    let s1 = caught_up(&p1);
    assert!(s1.last_caught_up_ms < now_ms() - 2, "not caught up after the append: {s1:?}");
    let resp = fetch_now(&table, &mut sessions, &follower(&[], id, 4, 0), 5);
    assert_eq!(answered(&resp), [(1, 0, true)]);
    assert_eq!(caught_up(&p1).last_caught_up_ms, s1.last_caught_up_ms, "a fetch behind the LEO is not a catch-up");
    // A long poll of the session parks on t-1 and is answered by a change of quiet t-0.
    let out = fetch::handle(
        &table,
        &mut sessions,
        &mut body(&follower(&[(1, 1)], id, 5, 1), 12),
        12,
        6,
        &ANON,
        &mut Vec::new(),
        None,
    )
    .unwrap();
    let fetch::Outcome::Wait(mut pending) = out else { panic!("nothing to send: parked") };
    assert_eq!(pending.waiting_on.len(), 1, "only the loud t-1 is read");
    assert!(pending.changes().is_some());
    produce(0, &[b"d"]);
    let resp: FetchResponse =
        decode(pending.try_complete(&table, &mut sessions, false, &mut Vec::new()).unwrap().unwrap(), 12, true);
    assert_eq!(answered(&resp), [(1, 1, false), (0, 2, true)], "t-1's new HW, t-0's record");
    // Removed from the table: a quiet partition is read again and answered with an error.
    let resp = fetch_now(&table, &mut sessions, &follower(&[(0, 3)], id, 6, 0), 7);
    assert_eq!(answered(&resp), [(0, 3, false)]);
    let _ = fetch_now(&table, &mut sessions, &follower(&[], id, 7, 0), 8);
    assert!(sessions.get_mut(id).unwrap().loud().is_empty());
    table.remove("t", 1);
    let resp = fetch_now(&table, &mut sessions, &follower(&[], id, 8, 0), 9);
    assert_eq!(answered(&resp).len(), 1);
    assert_ne!(resp.responses[0].partitions[0].error_code, code::NONE, "{resp:?}");
    // Forgotten by the session: t-0's follower no longer counts as fetching it.
    let mut forget = follower(&[], id, 9, 0);
    forget.forgotten_topics_data = vec![crate::protocol::messages::fetch_request::ForgottenTopic {
        topic: "t".into(),
        partitions: vec![0, 1],
        ..Default::default()
    }];
    let _ = fetch_now(&table, &mut sessions, &forget, 10);
    let left = caught_up(&p0);
    std::thread::sleep(Duration::from_millis(5));
    let _ = fetch_now(&table, &mut sessions, &follower(&[], id, 10, 0), 11);
    assert_eq!(caught_up(&p0), left);
}

/// A schema-id topic: a partition naming an id this broker's table does not hold is held back
/// (nothing of it appended; the request's other partitions are served at once) until the
/// registry has read `_schemas`; then it is appended, or refused when the id is still missing.
/// Without a registry here nothing is held back.
#[test]
fn produce_naming_an_unknown_schema_id_is_held_until_the_registry_caught_up() {
    let dir = tempfile::tempdir().unwrap();
    let (table, t0) = table_with(dir.path(), vec![1]);
    let log1 = Arc::new(Log::open(&dir.path().join("t-1"), "t", 1, LogConfig::default(), None, 0).unwrap());
    let t1 =
        table.add("t", 1, 1, log1, LeaderState { leader: 1, leader_epoch: 0, isr: vec![1], min_insync_replicas: 1 });
    let leaders = (0..2).map(|p| (p, CurrentLeader { leader: 1, leader_epoch: 0 })).collect();
    let brokers = [(1, BrokerEndpoint { host: "localhost".into(), port: 9001, rack: None })];
    let topics = [("t".to_owned(), TopicView { id: T_ID, leaders })];
    table.set_metadata(1, ClusterView::new(topics.into_iter().collect(), brokers.into_iter().collect()));
    t0.log
        .update_config(&std::collections::HashMap::from([("confluent.value.schema.validation".into(), "true".into())]))
        .unwrap();
    let framed = |id: i32| {
        let mut v = vec![0u8];
        v.extend_from_slice(&id.to_be_bytes());
        v.push(2);
        v
    };
    // t-0 (checked) carries `id`; t-1 (not checked) carries anything
    let serve = |id: i32| {
        let v = framed(id);
        let mut req = produce_req(-1, 0, &[&v]);
        let mut other = req.topic_data[0].partition_data[0].clone();
        other.index = 1;
        req.topic_data[0].partition_data.push(other);
        produce::handle(&table, &mut body(&req, 9), 9, 1, &ANON, 0, &mut Vec::new(), None, &mut || 0).unwrap()
    };
    let codes = |out: produce::Outcome| {
        let produce::Outcome::Done(Some(chunks)) = out else { panic!("answered at once") };
        let resp: ProduceResponse = decode(chunks, 9, true);
        resp.responses[0].partition_responses.iter().map(|p| (p.index, p.error_code)).collect::<Vec<_>>()
    };
    // no registry on this broker: refused at once (POLICY_VIOLATION), nothing held back
    assert_eq!(codes(serve(7)), vec![(0, code::POLICY_VIOLATION), (1, code::NONE)]);
    table.schema_ids().set_active(true);
    table.schema_ids().set_subject("t-value", vec![7]);
    let produce::Outcome::CatchUpSchemas(later) = serve(8) else { panic!("an unknown id is held back") };
    assert_eq!(later.missing(), "t-value id 8 (a record for t-0)");
    assert_eq!((t0.log.log_end_offset(), t1.log.log_end_offset()), (0, 2), "t-1 served, t-0 held");
    // the registry read `_schemas` and still has no id 8: refused
    let out = produce::finish_caught_up(&table, *later, 0, &mut Vec::new()).unwrap();
    assert_eq!(codes(out), vec![(0, code::INVALID_RECORD), (1, code::NONE)]);
    // ... or it read id 8 meanwhile: appended
    let produce::Outcome::CatchUpSchemas(later) = serve(8) else { panic!("held back") };
    table.schema_ids().set_subject("t-value", vec![7, 8]);
    let out = produce::finish_caught_up(&table, *later, 0, &mut Vec::new()).unwrap();
    assert_eq!(codes(out), vec![(0, code::NONE), (1, code::NONE)]);
    assert_eq!(codes(serve(7)), vec![(0, code::NONE), (1, code::NONE)]);
    assert_eq!((t0.log.log_end_offset(), t1.log.log_end_offset()), (2, 4));
}
