//! The data path (Produce, Fetch, the HW rule, parking) against real logs in a temp dir,
//! without sockets: requests are encoded with the codec, served by `produce::handle` /
//! `fetch::handle`, and the response frames decoded again.
#![allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]

use std::sync::Arc;

use super::fetch;
use super::fetch_session::FetchSessionCache;
use super::partition::{LeaderState, PartitionTable};
use super::produce;
use super::request::code;
use crate::builder::{BatchBuilder, Rec};
use crate::config::LogConfig;
use crate::log::Log;
use crate::protocol::messages::fetch_request::{FetchPartition, FetchRequest, FetchTopic};
use crate::protocol::messages::fetch_response::FetchResponse;
use crate::protocol::messages::produce_request::{PartitionProduceData, ProduceRequest, TopicProduceData};
use crate::protocol::messages::produce_response::ProduceResponse;
use crate::protocol::{Bytes, Chunk, Message, Reader, Records, Writer};

fn table_with(dir: &std::path::Path, isr: Vec<i32>) -> (PartitionTable, Arc<super::partition::Partition>) {
    let table = PartitionTable::new();
    let log = Arc::new(Log::open(&dir.join("t-0"), "t", 0, LogConfig::default(), None, 0).unwrap());
    let min_isr = 1;
    let p = table.add("t", 0, 1, log, LeaderState { leader: 1, leader_epoch: 0, isr, min_insync_replicas: min_isr });
    table.set_topics(["t".to_owned()].into_iter().collect());
    (table, p)
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
            partition_data: vec![PartitionProduceData { index: partition, records: Some(Records::Bytes(Bytes::from(batch))), ..Default::default() }],
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
            partitions: vec![FetchPartition { partition: 0, fetch_offset: offset, partition_max_bytes: 1 << 20, current_leader_epoch: -1, ..Default::default() }],
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
    let out = produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"a", b"b"]), 9), 9, 7, "peer", 0, &mut logs).unwrap();
    let produce::Outcome::Done(Some(chunks)) = out else { panic!("acks=all with the leader alone answers at once") };
    let resp: ProduceResponse = decode(chunks, 9, true);
    let pr = &resp.responses[0].partition_responses[0];
    assert_eq!((pr.error_code, pr.base_offset), (code::NONE, 0));
    assert_eq!((p.log.log_end_offset(), p.log.high_watermark()), (2, 2));

    let out = fetch::handle(&table, &mut FetchSessionCache::new(10), &mut body(&fetch_req(0, 1, 500), 12), 12, 8, "peer", &mut logs).unwrap();
    let fetch::Outcome::Done(chunks) = out else { panic!("data is there") };
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
        produce::handle(&table, &mut body(&produce_req(-1, 5, &[b"a"]), 9), 9, 1, "peer", 0, &mut logs).unwrap()
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
    let produce::Outcome::Done(Some(chunks)) = produce::handle(&table, &mut body(&req, 9), 9, 2, "peer", 0, &mut logs).unwrap() else {
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
    let out = produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"a", b"b", b"c"]), 9), 9, 3, "peer", 0, &mut logs).unwrap();
    let produce::Outcome::Wait(mut pending) = out else { panic!("follower 2 has not fetched: the HW is behind") };
    assert_eq!((p.log.log_end_offset(), p.log.high_watermark()), (3, 0));
    assert!(pending.try_complete(false).unwrap().is_none());
    // The follower catches up to 2: not yet; to 3: the HW covers the batch.
    p.record_follower_leo(2, 2);
    assert!(p.maybe_increment_hw());
    assert!(pending.try_complete(false).unwrap().is_none());
    p.record_follower_leo(2, 3);
    assert!(p.maybe_increment_hw());
    let resp: ProduceResponse = decode(pending.try_complete(false).unwrap().unwrap(), 9, true);
    assert_eq!(resp.responses[0].partition_responses[0].error_code, code::NONE);

    // Another write the follower never fetches: at the deadline, REQUEST_TIMED_OUT.
    let out = produce::handle(&table, &mut body(&produce_req(-1, 0, &[b"d"]), 9), 9, 4, "peer", 0, &mut logs).unwrap();
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
    let out = fetch::handle(&table, &mut FetchSessionCache::new(10), &mut body(&fetch_req(0, 1, 500), 11), 11, 1, "peer", &mut logs).unwrap();
    let fetch::Outcome::Wait(mut pending) = out else { panic!("an empty log parks the fetch") };
    assert_eq!(pending.waiting_on.len(), 1);
    assert!(pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().is_none());
    let _ = produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, 2, "peer", 0, &mut logs).unwrap();
    assert_eq!(p.log.high_watermark(), 1);
    let resp: FetchResponse = decode(pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().unwrap(), 11, false);
    assert!(!resp.responses[0].partitions[0].records.as_ref().unwrap().is_empty());
    // Out of range: answered at once with the error, and logged.
    let out = fetch::handle(&table, &mut FetchSessionCache::new(10), &mut body(&fetch_req(9, 1, 500), 11), 11, 3, "peer", &mut logs).unwrap();
    let fetch::Outcome::Done(chunks) = out else { panic!() };
    let resp: FetchResponse = decode(chunks, 11, false);
    assert_eq!(resp.responses[0].partitions[0].error_code, code::OFFSET_OUT_OF_RANGE);
    assert!(logs.iter().any(|l| l.message.contains("fetch offset 9 of t-0 is outside [log start 0, LEO 1]")));
    // A removed partition answers a parked fetch with UNKNOWN_TOPIC_OR_PARTITION.
    let out = fetch::handle(&table, &mut FetchSessionCache::new(10), &mut body(&fetch_req(1, 1, 500), 11), 11, 4, "peer", &mut logs).unwrap();
    let fetch::Outcome::Wait(mut pending) = out else { panic!() };
    table.remove("t", 0);
    let resp: FetchResponse = decode(pending.try_complete(&table, &mut FetchSessionCache::new(10), false, &mut logs).unwrap().unwrap(), 11, false);
    assert_eq!(resp.responses[0].partitions[0].error_code, code::UNKNOWN_TOPIC_OR_PARTITION);
}

#[test]
fn fetch_sessions_send_only_news() {
    let dir = tempfile::tempdir().unwrap();
    let (table, _p) = table_with(dir.path(), vec![1]);
    let mut sessions = FetchSessionCache::new(10);
    let mut logs = Vec::new();
    let _ = produce::handle(&table, &mut body(&produce_req(1, 0, &[b"a"]), 9), 9, 1, "peer", 0, &mut logs).unwrap();
    // Open a session (epoch 0): a full response carrying the new session id.
    let mut req = fetch_req(0, 0, 0);
    req.session_epoch = 0;
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&req, 12), 12, 1, "peer", &mut logs).unwrap() else {
        panic!()
    };
    let resp: FetchResponse = decode(chunks, 12, true);
    let id = resp.session_id;
    assert_ne!(id, 0);
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 1);
    // Epoch 1, listing nothing: the session's cached fetch offset (0) is used.
    let mut inc = fetch_req(0, 0, 0);
    inc.session_id = id;
    inc.session_epoch = 1;
    inc.topics.clear();
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&inc, 12), 12, 2, "peer", &mut logs).unwrap() else {
        panic!()
    };
    let resp: FetchResponse = decode(chunks, 12, true);
    assert_eq!(resp.session_id, id);
    // The records at offset 0 are news (records count as news every time).
    assert_eq!(resp.responses.len(), 1);
    // Move the offset to 1 (the end): no records, HW unchanged: an empty incremental response.
    let mut inc2 = fetch_req(1, 0, 0);
    inc2.session_id = id;
    inc2.session_epoch = 2;
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&inc2, 12), 12, 3, "peer", &mut logs).unwrap() else {
        panic!()
    };
    let resp: FetchResponse = decode(chunks, 12, true);
    assert!(resp.responses.is_empty(), "{resp:?}");
    // A new record moves the HW: the partition is back in the response.
    let _ = produce::handle(&table, &mut body(&produce_req(1, 0, &[b"b"]), 9), 9, 4, "peer", 0, &mut logs).unwrap();
    let mut inc3 = fetch_req(1, 0, 0);
    inc3.session_id = id;
    inc3.session_epoch = 3;
    inc3.topics.clear();
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&inc3, 12), 12, 5, "peer", &mut logs).unwrap() else {
        panic!()
    };
    let resp: FetchResponse = decode(chunks, 12, true);
    assert_eq!(resp.responses[0].partitions[0].high_watermark, 2);
    assert!(!resp.responses[0].partitions[0].records.as_ref().unwrap().is_empty());
    // A stale epoch and an unknown session are top-level errors.
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&inc3, 12), 12, 6, "peer", &mut logs).unwrap() else {
        panic!()
    };
    assert_eq!(decode::<FetchResponse>(chunks, 12, true).error_code, code::INVALID_FETCH_SESSION_EPOCH);
    let mut unknown = inc3.clone();
    unknown.session_id = id + 1000;
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&unknown, 12), 12, 7, "peer", &mut logs).unwrap() else {
        panic!()
    };
    assert_eq!(decode::<FetchResponse>(chunks, 12, true).error_code, code::FETCH_SESSION_ID_NOT_FOUND);
    // Epoch -1 closes the session.
    let mut close = fetch_req(2, 0, 0);
    close.session_id = id;
    close.session_epoch = -1;
    let fetch::Outcome::Done(chunks) = fetch::handle(&table, &mut sessions, &mut body(&close, 12), 12, 8, "peer", &mut logs).unwrap() else {
        panic!()
    };
    assert_eq!(decode::<FetchResponse>(chunks, 12, true).session_id, 0);
    assert!(sessions.is_empty());
}
