//! `NetworkServer`: the Rust network layer (`crate::server`) driven from Python. The broker's
//! request handlers (trio) wait on `notify_fd`, take events in bulk and answer each request
//! with `respond` (chunks: bytes-like objects and `FileRegion`s, or None for no response) or
//! `close`.
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::log::{extract_bytes, PyFileRegion, PyLog};
use crate::protocol::{Bytes, Chunk};
use crate::server::authorizer::{Acl, Authorizer};
use crate::server::metrics::LATENCY_BUCKETS_MS;
use crate::server::partition::{BrokerEndpoint, CurrentLeader, LeaderState, Partition, PartitionTable, TopicView};
use crate::server::principal_mapping::PrincipalMapper;
use crate::server::produce::Verdict;
use crate::server::quota::{ClientQuotas, Component, Entity, Limits};
use crate::server::transport::{tls_config, ClientAuth};
use crate::server::{Event, ListenerConfig, LogLine, NetworkServer, ServerConfig, DATA_PATH_APIS};
use crate::table::tier_reader::{TableFile, TableTierView};
use pyo3::exceptions::PyValueError;

/// ACL authorization (rust/src/server/authorizer.rs has the rules): one for the data path
/// and the Python handlers. Off until `configure`.
#[pyclass(name = "Authorizer", module = "logbroker._core", frozen)]
pub struct PyAuthorizer(Arc<Authorizer>);

/// `(resource type, resource name, pattern type, principal, host, operation, permission type)`
/// with Kafka's codes.
type PyAcl = (i8, String, i8, String, String, i8, i8);

#[pymethods]
impl PyAuthorizer {
    /// Turns authorization on: `super.users` principals and `allow.everyone.if.no.acl.found`.
    fn configure(&self, super_users: Vec<String>, allow_if_no_acl: bool) {
        self.0.configure(super_users, allow_if_no_acl);
    }

    #[getter]
    fn enabled(&self) -> bool {
        self.0.enabled()
    }

    /// Replaces every ACL.
    fn set_acls(&self, acls: Vec<PyAcl>) {
        self.0.set_acls(
            acls.into_iter()
                .map(|(resource_type, name, pattern_type, principal, host, operation, permission)| Acl {
                    resource_type,
                    name,
                    pattern_type,
                    principal,
                    host,
                    operation,
                    permission,
                })
                .collect(),
        );
    }

    /// Whether `principal` from `host` may perform `operation` on the resource.
    fn authorize(&self, principal: &str, host: &str, resource_type: i8, name: &str, operation: i8) -> bool {
        self.0.authorize(principal, host, resource_type, name, operation)
    }
}

/// Client quotas (rust/src/server/quota.rs has the rules): produce and fetch byte rates and
/// request time the network thread measures and throttles. Off until a quota is set.
#[pyclass(name = "ClientQuotas", module = "logbroker._core", frozen)]
pub struct PyClientQuotas(Arc<ClientQuotas>);

/// `([(entity type, entity name or None for the default)], producer_byte_rate,
/// consumer_byte_rate, request_percentage)`.
type PyQuota = (Vec<(String, Option<String>)>, Option<f64>, Option<f64>, Option<f64>);

#[pymethods]
impl PyClientQuotas {
    /// `quota.window.num` and `quota.window.size.seconds` (in milliseconds here).
    fn configure(&self, window_num: usize, window_size_ms: i64) -> PyResult<()> {
        if window_num < 1 || window_size_ms < 1 {
            return Err(PyValueError::new_err(format!(
                "quota windows: {window_num} windows of {window_size_ms} ms; at least 1 window of at least 1 ms"
            )));
        }
        self.0.configure(window_num, window_size_ms);
        Ok(())
    }

    /// Replaces every quota. Entity types are "user" and "client-id"; a repeated or
    /// unknown type is a ValueError naming it.
    fn set_quotas(&self, quotas: Vec<PyQuota>) -> PyResult<()> {
        let mut out = Vec::with_capacity(quotas.len());
        for (components, producer_byte_rate, consumer_byte_rate, request_percentage) in quotas {
            let mut entity = Entity::default();
            for (kind, name) in components {
                let slot = match kind.as_str() {
                    crate::server::quota::USER => &mut entity.user,
                    crate::server::quota::CLIENT_ID => &mut entity.client_id,
                    other => {
                        return Err(PyValueError::new_err(format!(
                            "quota entity type {other:?} is not user or client-id"
                        )))
                    }
                };
                if *slot != Component::Absent {
                    return Err(PyValueError::new_err(format!("quota entity names {kind:?} twice")));
                }
                *slot = name.map_or(Component::Default, Component::Named);
            }
            out.push((entity, Limits { producer_byte_rate, consumer_byte_rate, request_percentage }));
        }
        self.0.set_quotas(&out);
        Ok(())
    }

    /// The produce (`"produce"`), fetch (`"fetch"`) or request (`"request"`, percent) quota
    /// that applies to `user` with `client_id`, or None (Kafka's precedence).
    fn quota_for(&self, kind: &str, user: &str, client_id: &str) -> PyResult<Option<f64>> {
        Ok(self.0.quota_for(quota_kind(kind)?, user, client_id))
    }

    /// Records `size` bytes (`"produce"`, `"fetch"`) or nanoseconds of request time
    /// (`"request"`) at `now_ms` as the network thread does; the throttle time (ms).
    fn record(&self, kind: &str, user: &str, client_id: &str, size: u64, now_ms: i64) -> PyResult<i32> {
        Ok(match quota_kind(kind)? {
            crate::server::quota::REQUEST => self.0.record_request(user, client_id, size, now_ms),
            k => self.0.record(k, user, client_id, size, now_ms),
        })
    }

    /// Some `request_percentage` quota is set: the handlers time their requests (else not).
    #[getter]
    fn request_quota_enabled(&self) -> bool {
        self.0.enabled(crate::server::quota::REQUEST)
    }

    /// Records `nanos` of a Python handler's time for `user`/`client_id` now (Kafka's request
    /// quota); the throttle time (ms) for the response's `throttle_time_ms`, which `respond`
    /// is then given so the connection is muted for it.
    fn record_request(&self, user: &str, client_id: &str, nanos: u64) -> i32 {
        self.0.record_request(user, client_id, nanos, crate::server::partition::now_ms())
    }

    /// `{"produce_throttled": n, "produce_throttle_ms": ms, "fetch_throttled": .., "fetch_throttle_ms": ..,
    /// "request_throttled": .., "request_throttle_ms": ..}`: responses throttled and their total
    /// throttle time, since start.
    fn stats(&self) -> std::collections::HashMap<&'static str, u64> {
        let [(pn, pms), (fn_, fms), (rn, rms)] = self.0.stats();
        [
            ("produce_throttled", pn),
            ("produce_throttle_ms", pms),
            ("fetch_throttled", fn_),
            ("fetch_throttle_ms", fms),
            ("request_throttled", rn),
            ("request_throttle_ms", rms),
        ]
        .into_iter()
        .collect()
    }
}

fn quota_kind(kind: &str) -> PyResult<usize> {
    match kind {
        "produce" => Ok(crate::server::quota::PRODUCE),
        "fetch" => Ok(crate::server::quota::FETCH),
        "request" => Ok(crate::server::quota::REQUEST),
        other => Err(PyValueError::new_err(format!("quota type {other:?} is not produce, fetch or request"))),
    }
}

/// The partitions the data path serves. The control plane adds one per local replica and
/// keeps its leader state current; the network thread reads it.
#[pyclass(name = "PartitionTable", module = "logbroker._core", frozen)]
pub struct PyPartitionTable(pub(crate) Arc<PartitionTable>);

#[pymethods]
impl PyPartitionTable {
    #[new]
    fn new() -> Self {
        PyPartitionTable(Arc::new(PartitionTable::new()))
    }

    /// Adds (or replaces) a local replica; returns its handle.
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn add(
        &self,
        topic: &str,
        index: i32,
        node_id: i32,
        log: &PyLog,
        leader: i32,
        leader_epoch: i32,
        isr: Vec<i32>,
        min_insync_replicas: i32,
    ) -> PyReplicaPartition {
        let state = LeaderState { leader, leader_epoch, isr, min_insync_replicas };
        PyReplicaPartition(self.0.add(topic, index, node_id, log.shared(), state))
    }

    /// The ACL authorizer Produce and Fetch are checked with (and the Python handlers ask).
    #[getter]
    fn authorizer(&self) -> PyAuthorizer {
        PyAuthorizer(Arc::clone(self.0.authorizer()))
    }

    /// The client quotas Produce and Fetch are measured against.
    #[getter]
    fn client_quotas(&self) -> PyClientQuotas {
        PyClientQuotas(Arc::clone(self.0.client_quotas()))
    }

    /// The schema registry runs on this broker (`active`), so topics that check schema ids
    /// can be produced to (server/schema_ids.rs).
    fn set_schema_registry_active(&self, active: bool) {
        self.0.schema_ids().set_active(active);
    }

    /// The schema ids registered under `subject` now (empty: none).
    fn set_subject_schema_ids(&self, subject: &str, ids: Vec<i32>) {
        self.0.schema_ids().set_subject(subject, ids);
    }

    /// Removes a replica (topic deleted); requests waiting on it are answered.
    fn remove(&self, topic: &str, index: i32) {
        self.0.remove(topic, index);
    }

    /// The cluster as the metadata image has it, replacing the last call's: this broker's
    /// id; `topics` as `(name, topic id (16 bytes), [(partition, leader, leader epoch)])`;
    /// `brokers` as `(node id, host, port, rack)`. The data path uses it to tell a partition
    /// that does not exist from one led elsewhere, and to name the leader (KIP-951).
    /// KIP-392: whether leaders name a preferred read replica in a consumer's rack
    /// (`replica.selector.class` = Kafka's RackAwareReplicaSelector).
    fn set_rack_aware_selector(&self, on: bool) {
        self.0.set_rack_aware_selector(on);
    }

    /// Per hosted partition, for the metrics endpoint: `(topic, partition, is leader,
    /// bytes in, records in, bytes out, replication bytes out, log size bytes, segments, log
    /// start offset, LEO, HW)`. The counters are monotonic (see server/metrics.rs).
    #[allow(clippy::type_complexity)] // the Python tuples pyo3 converts, spelled out as _core.pyi has them
    fn partition_stats(
        &self,
        py: Python<'_>,
    ) -> Vec<(String, i32, bool, u64, u64, u64, u64, u64, usize, i64, i64, i64)> {
        py.detach(|| {
            self.0
                .all()
                .into_iter()
                .filter(|p| !p.is_removed())
                .map(|p| {
                    let (bi, mi, bo, rbo) = p.stats.snapshot();
                    let leader = p.state().leader == p.node_id;
                    let l = &p.log;
                    (
                        p.topic.to_string(),
                        p.index,
                        leader,
                        bi,
                        mi,
                        bo,
                        rbo,
                        l.size_bytes(),
                        l.segment_count(),
                        l.log_start_offset(),
                        l.log_end_offset(),
                        l.high_watermark(),
                    )
                })
                .collect()
        })
    }

    /// KIP-890 part 1 (`transaction.partition.verification.enable`): whether the first batch
    /// of a transactions-v1 transaction on a partition is checked with its coordinator.
    fn set_verify_transactions_v1(&self, on: bool) {
        self.0.set_verify_transactions_v1(on);
    }

    /// A metadata delta for the cluster view: topics created or changed (name, id, [(partition,
    /// leader, leader epoch)]), topics removed by name, and every broker when they changed.
    #[allow(clippy::type_complexity)] // the Python tuples pyo3 converts, spelled out as _core.pyi has them
    #[pyo3(signature = (node_id, topics, removed, brokers=None))]
    fn update_metadata(
        &self,
        py: Python<'_>,
        node_id: i32,
        topics: Vec<(String, Bound<'_, PyBytes>, Vec<(i32, i32, i32)>)>,
        removed: Vec<String>,
        brokers: Option<Vec<(i32, String, i32, Option<String>)>>,
    ) -> PyResult<()> {
        let mut named = Vec::with_capacity(topics.len());
        for (name, id, parts) in topics {
            let id: [u8; 16] = id.as_bytes().try_into().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!(
                    "topic id of {name:?} is {} bytes, not 16",
                    id.as_bytes().len()
                ))
            })?;
            named.push((name, id, parts));
        }
        py.detach(|| {
            let topics = named
                .into_iter()
                .map(|(name, id, parts)| {
                    let leaders = parts
                        .into_iter()
                        .map(|(p, leader, leader_epoch)| (p, CurrentLeader { leader, leader_epoch }))
                        .collect();
                    (name, TopicView { id, leaders })
                })
                .collect();
            let brokers = brokers.map(|b| {
                b.into_iter().map(|(id, host, port, rack)| (id, BrokerEndpoint { host, port, rack })).collect()
            });
            self.0.update_metadata(node_id, topics, &removed, brokers);
        });
        Ok(())
    }
}

/// One local replica as the data path sees it (see rust/src/server/partition.rs).
#[pyclass(name = "ReplicaPartition", module = "logbroker._core", frozen)]
pub struct PyReplicaPartition(pub(crate) Arc<Partition>);

#[pymethods]
impl PyReplicaPartition {
    /// New leader state from the metadata image.
    fn update(&self, py: Python<'_>, leader: i32, leader_epoch: i32, isr: Vec<i32>, min_insync_replicas: i32) {
        // the log's lock (the HW moves), which the cleaner and retention hold across disk I/O
        py.detach(|| self.0.update(LeaderState { leader, leader_epoch, isr, min_insync_replicas }));
    }

    /// HW = min LEO over the ISR; True if it moved (waiting requests are woken).
    fn maybe_increment_hw(&self, py: Python<'_>) -> bool {
        py.detach(|| self.0.maybe_increment_hw())
    }

    /// While on, each HW move is reported on the network server's notify fd (conn -3 in
    /// `NetworkServer.take_events`); turn it on before reading the HW to decide to wait.
    fn watch_high_watermark(&self, on: bool) {
        self.0.watch_high_watermark(on);
    }

    #[getter]
    fn removed(&self) -> bool {
        self.0.is_removed()
    }

    /// The first offset a consumer may fetch: the local log start, or the first copied
    /// offset when tiered storage holds segments below it, or the table's first offset when
    /// the table is the tier.
    #[getter]
    fn log_start_offset(&self) -> i64 {
        self.0.log_start_offset()
    }

    /// The table as the tier: the partition's data files, `[(first offset, last offset,
    /// local path)]`, that a consumer's fetch below the local log start reads; None: the
    /// table is not this partition's tier. `pending`: they are being listed (a fetch below
    /// the local log start gets no records meanwhile; `files` is ignored).
    #[pyo3(signature = (files, pending = false))]
    fn set_table_tier(&self, files: Option<Vec<(i64, i64, String)>>, pending: bool) {
        if pending {
            self.0.set_table_tier(Some(TableTierView::pending()));
            return;
        }
        let view = files.map(|files| {
            TableTierView::new(
                files
                    .into_iter()
                    .map(|(min_offset, max_offset, path)| TableFile { min_offset, max_offset, path })
                    .collect(),
            )
        });
        self.0.set_table_tier(view);
    }

    /// How many data files the table-tier view holds (None: not set).
    #[getter]
    fn table_tier_files(&self) -> Option<usize> {
        self.0.table_tier().map(|v| v.files().len())
    }

    /// ListOffsets by time below the local log start, the table as the tier: the first
    /// offset whose timestamp is at least `timestamp_ms` in the table's data files of this
    /// partition, with its timestamp; None when no row's is, or the table is not the tier.
    /// Reads files (the GIL released): call it from a worker thread. TableDataFileError names
    /// the partition, the timestamp and the file when one cannot be read.
    fn table_offset_for_timestamp(&self, py: Python<'_>, timestamp_ms: i64) -> PyResult<Option<(i64, i64)>> {
        let Some(view) = self.0.table_tier() else { return Ok(None) };
        py.detach(|| self.0.table_reader.offset_for_timestamp(&view, self.0.index, timestamp_ms)).map_err(|e| {
            crate::py::errors::TableDataFileError::new_err(format!(
                "ListOffsets of {} at timestamp {timestamp_ms} in its Iceberg table: {e}",
                self.0.name()
            ))
        })
    }

    /// The table-tier view is being listed (a new leader, or a replica that does not lead):
    /// what the table holds is not known here yet.
    #[getter]
    fn table_tier_pending(&self) -> bool {
        self.0.table_tier().is_some_and(|v| v.pending)
    }

    /// What the leader knows of each follower: `[(replica, leo, last_fetch_ms,
    /// last_caught_up_ms)]` (-1: not yet), reset when the leader epoch changes.
    fn follower_states(&self) -> Vec<(i32, i64, i64, i64)> {
        self.0.follower_states().into_iter().map(|(r, f)| (r, f.leo, f.last_fetch_ms, f.last_caught_up_ms)).collect()
    }
}

/// Kafka's principal for a TLS peer's certificate (DER): `User:` and its subject as RFC 2253
/// (`crate::server::x500`) mapped by `rules` (`ssl.principal.mapping.rules`). ValueError when
/// the subject cannot be read, the rules do not parse, or none applies.
#[pyfunction]
#[pyo3(signature = (der, rules="DEFAULT"))]
pub fn certificate_principal(der: &[u8], rules: &str) -> PyResult<String> {
    let mapper = PrincipalMapper::parse(rules)
        .map_err(|e| PyValueError::new_err(format!("ssl.principal.mapping.rules: {e}")))?;
    mapper.principal(der).map_err(PyValueError::new_err)
}

/// `[(api_key, min_version, max_version)]` of the APIs the network thread serves itself.
#[pyfunction]
pub fn data_path_apis() -> Vec<(i16, i16, i16)> {
    DATA_PATH_APIS.to_vec()
}

#[pyclass(name = "NetworkServer", module = "logbroker._core", frozen)]
pub struct PyNetworkServer {
    inner: NetworkServer,
}

/// `(conn, frame, peer, message, level)`: a request has a frame; anything else is a message
/// to log at `level` (Python's logging levels).
/// `(transactional id, producer id, producer epoch, [(topic, partition)], verify only, Produce
/// version)` of a Produce that needs its transaction coordinator first.
type PyVerification = (String, i64, i16, Vec<(String, i32)>, bool, i16);
/// `(certificate chain PEM, private key PEM, truststore PEM, ssl.client.auth)`.
type PyTls = (Vec<u8>, Vec<u8>, Option<Vec<u8>>, String);
/// `(conn, frame, peer, message, level, verification, listener)` (see `take_events`).
type PyEvent<'py> = (i64, Option<Bound<'py, PyBytes>>, String, Option<String>, i32, Option<Detour>, i32);

/// A Produce's detour through the Python side: a tuple for the transaction coordinator, a
/// str (`"<subject> id <id>"`) for the schema registry.
#[derive(IntoPyObject)]
enum Detour {
    Transaction(PyVerification),
    SchemaIds(String),
}
/// `(name, host, port, tls or None, sasl)`: one listener.
type PyListener = (String, String, u16, Option<PyTls>, bool);

#[pymethods]
impl PyNetworkServer {
    #[new]
    /// `listeners`: `(name, host, port, tls, sasl)` each, bound in order (port 0 picks one).
    /// `tls`: for an SSL or SASL_SSL listener, `(certificate chain PEM, private key PEM,
    /// truststore PEM or None, ssl.client.auth)` with ssl.client.auth one of none,
    /// requested, required (ValueError naming the listener and what is wrong otherwise).
    /// `sasl`: the listener is SASL_PLAINTEXT or SASL_SSL (connections start without a
    /// principal, see `authenticated`, and may send frames of at most `sasl_max_receive`
    /// bytes until they have one).
    /// `ssl_principal_mapping_rules`: Kafka's `ssl.principal.mapping.rules` (ValueError when
    /// they do not parse).
    #[pyo3(signature = (listeners, max_frame, queued_max_request_bytes, idle_ms, fetch_session_slots, partitions, sasl_max_receive=524_288,
                        ssl_principal_mapping_rules="DEFAULT"))]
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn new(
        py: Python<'_>,
        listeners: Vec<PyListener>,
        max_frame: usize,
        queued_max_request_bytes: i64,
        idle_ms: i64,
        fetch_session_slots: usize,
        partitions: &PyPartitionTable,
        sasl_max_receive: usize,
        ssl_principal_mapping_rules: &str,
    ) -> PyResult<Self> {
        let principal_mapping = PrincipalMapper::parse(ssl_principal_mapping_rules)
            .map_err(|e| PyValueError::new_err(format!("ssl.principal.mapping.rules: {e}")))?;
        let mut configs = Vec::with_capacity(listeners.len());
        for (name, host, port, tls, sasl) in listeners {
            let tls = match tls {
                None => None,
                Some((chain, key, trust, auth)) => {
                    let auth = match auth.as_str() {
                        "none" => ClientAuth::None,
                        "requested" => ClientAuth::Requested,
                        "required" => ClientAuth::Required,
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "listener {name}: ssl.client.auth must be none, requested or required, not {other:?}"
                            )))
                        }
                    };
                    Some(
                        tls_config(&chain, &key, trust.as_deref(), auth)
                            .map_err(|e| PyValueError::new_err(format!("listener {name}: {e}")))?,
                    )
                }
            };
            configs.push(ListenerConfig { name, host, port, tls, sasl });
        }
        let config = ServerConfig {
            max_frame,
            queued_max_request_bytes,
            idle: u64::try_from(idle_ms).ok().map(std::time::Duration::from_millis),
            fetch_session_slots,
            listeners: configs,
            sasl_max_receive,
            principal_mapping,
        };
        let table = Arc::clone(&partitions.0);
        let inner = py.detach(|| NetworkServer::start(config, table))?;
        Ok(PyNetworkServer { inner })
    }

    /// The first listener's bound (host, port).
    #[getter]
    fn address(&self) -> (String, u16) {
        let a = self.inner.addresses()[0];
        (a.ip().to_string(), a.port())
    }

    /// Every listener's bound (host, port), in the order given.
    #[getter]
    fn addresses(&self) -> Vec<(String, u16)> {
        self.inner.addresses().iter().map(|a| (a.ip().to_string(), a.port())).collect()
    }

    /// Readable while events wait; `take_events` empties it.
    #[getter]
    fn notify_fd(&self) -> i32 {
        self.inner.notify_fd()
    }

    /// Every waiting event as `(conn, frame, peer, message, level)`: a request carries its
    /// frame (bytes, without the size prefix); a connection the network thread closed carries
    /// the reason, at WARNING for a protocol violation and DEBUG for hang-ups and idling;
    /// conn -1 is an error of the network thread itself, conn -2 a data-path log line, conn -3
    /// "the HW of a watched partition moved" with the topic as peer and the partition as level.
    /// A request's message is the connection's principal (`User:ANONYMOUS` without SASL;
    /// None on a SASL listener before the connection authenticated).
    /// The sixth item is set on a Produce that goes through the Python side first: a tuple
    /// when it needs the transaction coordinator (answer it with `serve_verified`, never
    /// `respond`), a str naming a schema id this broker does not hold, without a frame (the
    /// registry reads `_schemas` to its end; then call `serve_caught_up`). The seventh is
    /// the index of the listener a request came in on (-1 for anything else).
    fn take_events<'py>(&self, py: Python<'py>) -> Vec<PyEvent<'py>> {
        let events = py.detach(|| self.inner.take_events());
        events
            .into_iter()
            .map(|ev| match ev {
                Event::Request { conn, frame, peer, principal, listener } => (
                    conn as i64,
                    Some(PyBytes::new(py, &frame)),
                    peer,
                    principal.map(|p| p.to_string()),
                    0,
                    None,
                    i32::try_from(listener).unwrap_or(-1),
                ),
                Event::Verify { conn, frame, peer, verification: v } => (
                    conn as i64,
                    Some(PyBytes::new(py, &frame)),
                    peer,
                    None,
                    0,
                    Some(Detour::Transaction((
                        v.transactional_id,
                        v.producer_id,
                        v.producer_epoch,
                        v.partitions,
                        v.verify_only,
                        v.version,
                    ))),
                    -1,
                ),
                Event::CatchUpSchemas { conn, peer, missing } => {
                    (conn as i64, None, peer, None, 0, Some(Detour::SchemaIds(missing)), -1)
                }
                Event::Closed { conn, peer, reason, fault } => (
                    conn as i64,
                    None,
                    peer,
                    Some(reason),
                    if fault { LogLine::WARNING } else { LogLine::DEBUG },
                    None,
                    -1,
                ),
                Event::Fatal(msg) => (-1, None, String::new(), Some(msg), LogLine::ERROR, None, -1),
                Event::Log(line) => (-2, None, String::new(), Some(line.message), line.level, None, -1),
                Event::HighWatermark { topic, partition } => (-3, None, topic.to_string(), None, partition, None, -1),
            })
            .collect()
    }

    /// Answers the request in flight on `conn`: `chunks` is a list of bytes-like objects and
    /// FileRegions written in order, or None when the request has no response.
    /// `throttle_ms` > 0: a client quota's throttle time (the one the response carries); the
    /// connection's next request is read once it has passed (KIP-219).
    #[pyo3(signature = (conn, chunks, throttle_ms=0))]
    fn respond(&self, conn: u64, chunks: Option<Vec<Bound<'_, PyAny>>>, throttle_ms: i32) -> PyResult<()> {
        let chunks = match chunks {
            None => None,
            Some(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in &items {
                    if let Ok(r) = item.cast::<PyFileRegion>() {
                        out.push(Chunk::File(r.get().region().clone()));
                    } else if let Ok(b) = item.cast::<PyBytes>() {
                        out.push(Chunk::Bytes(Bytes::copy_from_slice(b.as_bytes())));
                    } else {
                        out.push(Chunk::Bytes(Bytes::from(extract_bytes(item)?)));
                    }
                }
                Some(out)
            }
        };
        self.inner.respond(conn, chunks, throttle_ms);
        Ok(())
    }

    /// Serves again the transactions-v2 Produce `frame` of `conn` (from a verification event)
    /// with the coordinator's verdicts `[(topic, partition, error_code, message)]` (0: added).
    fn serve_verified(&self, conn: u64, frame: &[u8], verdicts: Vec<(String, i32, i16, String)>) {
        let verdicts = verdicts
            .into_iter()
            .map(|(topic, partition, error_code, message)| Verdict { topic, partition, error_code, message })
            .collect();
        self.inner.serve_verified(conn, Bytes::copy_from_slice(frame), verdicts);
    }

    /// Appends the held-back partitions of a Produce that came as a schema-id event (the
    /// sixth element a str), once the registry read `_schemas` to its end (or gave up): an id
    /// still missing is INVALID_RECORD.
    fn serve_caught_up(&self, conn: u64) {
        self.inner.serve_caught_up(conn);
    }

    /// `conn` authenticated as `principal` (e.g. `User:alice`); after `session_ms` (None:
    /// never) it may only re-authenticate (KIP-368). Call before answering the
    /// SaslAuthenticate that succeeded, so the next request already carries the principal.
    #[pyo3(signature = (conn, principal, session_ms=None))]
    fn authenticated(&self, conn: u64, principal: &str, session_ms: Option<u64>) {
        self.inner.authenticated(conn, Arc::from(principal), session_ms);
    }

    /// Answers the request in flight on `conn` with `chunks` (bytes-like) and closes the
    /// connection once they are written (`reason` comes back as a closed event).
    fn respond_and_close(&self, conn: u64, chunks: Vec<Vec<u8>>, reason: String) {
        let chunks = chunks.into_iter().map(|b| Chunk::Bytes(Bytes::from(b))).collect();
        self.inner.respond_and_close(conn, chunks, reason);
    }

    /// Closes `conn` (after a protocol violation); `reason` comes back as a closed event.
    #[pyo3(signature = (conn, reason=None))]
    fn close(&self, conn: u64, reason: Option<String>) {
        self.inner.close(conn, reason);
    }

    /// Closes the listener and every connection; waits for the network thread.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.inner.shutdown());
    }

    /// Requests answered per API since the start: `[(api_key, count, total ms, cumulative
    /// bucket counts)]`, the buckets bounded by `latency_buckets_ms` and then +Inf.
    fn request_stats(&self) -> Vec<(i16, u64, f64, Vec<u64>)> {
        self.inner.shared().stats.by_api.snapshot()
    }

    /// `(seconds since the network thread last came round its loop, API key of the request it
    /// started in this turn or -1)`: a blocked thread stops every connection. `(0.0, -1)`
    /// before the thread starts and after it stops.
    fn loop_stall(&self) -> (f64, i32) {
        use std::sync::atomic::Ordering;
        let s = &self.inner.shared().stats;
        let beat = s.loop_beat_ms.load(Ordering::Relaxed);
        if beat == 0 {
            return (0.0, -1); // not started, or stopped
        }
        let since = crate::server::mono_ms().saturating_sub(beat);
        let api = s.serving_api.load(Ordering::Relaxed);
        (since as f64 / 1000.0, i32::try_from(api).map_or(-1, |a| a - 1))
    }

    /// The upper bounds (ms) of `request_stats`' buckets.
    #[staticmethod]
    fn latency_buckets_ms() -> Vec<f64> {
        LATENCY_BUCKETS_MS.to_vec()
    }

    /// Counters: connections, requests, fetch_sessions, fetch_session_partitions (at most a
    /// network tick old), pool_used, pool_limit, pool_refusals.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering;
        let s = self.inner.shared();
        let d = PyDict::new(py);
        d.set_item("connections", s.stats.connections.load(Ordering::Relaxed))?;
        d.set_item("requests", s.stats.requests.load(Ordering::Relaxed))?;
        d.set_item("fetch_sessions", s.stats.fetch_sessions.load(Ordering::Relaxed))?;
        d.set_item("fetch_session_partitions", s.stats.fetch_session_partitions.load(Ordering::Relaxed))?;
        d.set_item("pool_used", s.pool.used())?;
        d.set_item("pool_limit", s.pool.limit())?;
        d.set_item("pool_refusals", s.pool.refusals())?;
        Ok(d)
    }
}
