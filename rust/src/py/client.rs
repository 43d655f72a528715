//! The client engine as Python classes: `RecordAccumulator`, `ProducerBatch`, `RecordFuture`,
//! `RecordMetadata`, `Waker` for the producer; `decode_records`, `RecordSet`,
//! `ConsumerRecord` for the consumer; `murmur2`/`partition_for_key`.
//!
//! Threading: the accumulator is shared by the threads that `send()` and the I/O loop that
//! drains it; its state sits behind one mutex that is never held while the GIL is being
//! acquired (Python objects are built after unlocking). `RecordFuture.result()` and
//! `RecordAccumulator.wait_idle()` wait with the GIL released. Completion callbacks run in the
//! thread that calls `complete()` (the I/O loop), as Kafka's do.
//!
//! Errors: the accumulator's refusals raise `AccumulatorError(kind, message)` with `kind` the
//! `ClientError` variant name; the Python client maps them to its public exceptions in one
//! place (`logbroker/client/errors.py`). Corrupt fetched data raises the storage engine's
//! `CorruptRecordError`.
use std::borrow::Cow;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

use super::gil::EnterCore;
use super::log::{codec_named, extract_bytes};
use crate::batch::{self, BatchHeader};
use crate::client::accumulator::{Accumulator, AccumulatorConfig, NewRecord, ProducerBatch as EngineBatch};
use crate::client::buffer_pool;
use crate::client::error::ClientError;
use crate::client::murmur2 as hash;
use crate::client::records::{self, AbortedTxn, Fetched};
use crate::client::waker::Waker as EngineWaker;
use crate::compression::{self, Codec};

create_exception!(
    logbroker._core,
    AccumulatorError,
    PyException,
    "The producer's accumulator refused a record: args are (kind, message)."
);

impl From<ClientError> for PyErr {
    fn from(e: ClientError) -> PyErr {
        let kind = match &e {
            ClientError::UnknownTopic(_) => "UnknownTopic",
            ClientError::UnknownPartition { .. } => "UnknownPartition",
            ClientError::BufferFull { .. } => "BufferFull",
            ClientError::RecordTooLarge { .. } => "RecordTooLarge",
            ClientError::Closed => "Closed",
        };
        AccumulatorError::new_err((kind, e.to_string()))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Borrows the bytes of a bytes/str object, copying only other buffer types.
fn bytes_of<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(b.as_bytes()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Cow::Borrowed(s.to_str()?.as_bytes()));
    }
    if obj.is_instance_of::<pyo3::types::PyInt>() {
        return Err(PyTypeError::new_err("expected bytes, str or a bytes-like object, got int"));
    }
    extract_bytes(obj).map(Cow::Owned).map_err(|_| {
        PyTypeError::new_err(format!(
            "expected bytes, str or a bytes-like object, got {}",
            obj.get_type().name().map_or_else(|_| "?".into(), |n| n.to_string())
        ))
    })
}

fn opt_bytes<'a>(obj: Option<&'a Bound<'_, PyAny>>) -> PyResult<Option<Cow<'a, [u8]>>> {
    match obj {
        Some(o) if !o.is_none() => bytes_of(o).map(Some),
        _ => Ok(None),
    }
}

/// The self-pipe the I/O loop sleeps on (see `client/waker.rs`).
#[pyclass(name = "Waker", module = "logbroker._core", frozen)]
pub struct PyWaker(Arc<EngineWaker>);

#[pymethods]
impl PyWaker {
    #[new]
    fn new() -> PyResult<PyWaker> {
        Ok(PyWaker(Arc::new(EngineWaker::new()?)))
    }
    fn fileno(&self) -> i32 {
        self.0.read_fd()
    }
    fn wake(&self) {
        self.0.wake();
    }
    fn clear(&self) {
        self.0.clear();
    }
}

/// What a batch's futures share: the outcome and the callbacks waiting for it.
struct Shared {
    topic: Arc<str>,
    partition: i32,
    state: Mutex<Outcome>,
    done: Condvar,
}

#[derive(Default)]
struct Outcome {
    finished: bool,
    base_offset: i64,
    log_append_time: i64,
    error: Option<Py<PyAny>>,
    callbacks: Vec<(Py<PyAny>, Py<RecordFuture>)>,
}

/// Where a record was written: `offset` is -1 with acks=0; `timestamp` is the record's
/// CreateTime, or the broker's LogAppendTime when the topic uses it.
#[pyclass(module = "logbroker._core", frozen, eq, get_all)]
#[derive(PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic the record was written to.
    topic: String,
    /// The partition the record was written to.
    partition: i32,
    /// The record's offset in its partition (-1 with acks=0).
    offset: i64,
    /// The record's timestamp (ms): CreateTime, or the broker's LogAppendTime.
    timestamp: i64,
}

#[pymethods]
impl RecordMetadata {
    fn __repr__(&self) -> String {
        format!(
            "RecordMetadata(topic={:?}, partition={}, offset={}, timestamp={})",
            self.topic, self.partition, self.offset, self.timestamp
        )
    }
}

/// The delivery of one record: `result(timeout)` blocks (GIL released) until the broker
/// acknowledged it or it failed; `add_done_callback(fn)` calls `fn(future)` on completion.
#[pyclass(module = "logbroker._core", frozen)]
pub struct RecordFuture {
    shared: Arc<Shared>,
    offset_delta: i32,
    timestamp: i64,
}

impl RecordFuture {
    fn metadata(&self, o: &Outcome) -> RecordMetadata {
        RecordMetadata {
            topic: self.shared.topic.to_string(),
            partition: self.shared.partition,
            offset: if o.base_offset < 0 { -1 } else { o.base_offset + i64::from(self.offset_delta) },
            timestamp: if o.log_append_time >= 0 { o.log_append_time } else { self.timestamp },
        }
    }

    /// Waits up to `timeout` seconds (forever with None); true when finished.
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> bool {
        if lock(&self.shared.state).finished {
            return true;
        }
        let shared = Arc::clone(&self.shared);
        py.detach(move || {
            let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
            let mut g = lock(&shared.state);
            while !g.finished {
                match deadline {
                    None => g = shared.done.wait(g).unwrap_or_else(PoisonError::into_inner),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        g = shared.done.wait_timeout(g, d - now).unwrap_or_else(PoisonError::into_inner).0;
                    }
                }
            }
            true
        })
    }

    fn timeout_error(&self, py: Python<'_>, timeout: Option<f64>) -> PyErr {
        let msg = format!(
            "delivery of a record to {}-{} did not complete within {:.3}s",
            self.shared.topic,
            self.shared.partition,
            timeout.unwrap_or(0.0)
        );
        match py.import("logbroker.client.errors").and_then(|m| m.getattr("KafkaTimeoutError")) {
            Ok(cls) => match cls.call1((msg,)) {
                Ok(e) => PyErr::from_value(e),
                Err(e) => e,
            },
            Err(e) => e,
        }
    }
}

#[pymethods]
impl RecordFuture {
    /// The topic the record is sent to.
    #[getter]
    fn topic(&self) -> &str {
        &self.shared.topic
    }
    /// The partition the record is sent to.
    #[getter]
    fn partition(&self) -> i32 {
        self.shared.partition
    }
    /// Whether the record was acknowledged or failed.
    fn done(&self) -> bool {
        lock(&self.shared.state).finished
    }
    /// Waits (GIL released, up to `timeout` seconds; None: no limit) until the record is
    /// acknowledged and returns its RecordMetadata, or raises its error.
    #[pyo3(signature = (timeout=None))]
    fn result(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<RecordMetadata> {
        if !self.wait(py, timeout) {
            return Err(self.timeout_error(py, timeout));
        }
        let g = lock(&self.shared.state);
        if let Some(e) = &g.error {
            return Err(PyErr::from_value(e.bind(py).clone()));
        }
        Ok(self.metadata(&g))
    }
    /// Waits like result() and returns the record's error, or None once acknowledged.
    #[pyo3(signature = (timeout=None))]
    fn exception(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        if !self.wait(py, timeout) {
            return Err(self.timeout_error(py, timeout));
        }
        Ok(lock(&self.shared.state).error.as_ref().map(|e| e.clone_ref(py)))
    }
    /// Calls `fn_(future)` once the record is acknowledged or failed (at once when done
    /// already), in the client's I/O thread or task.
    fn add_done_callback(slf: &Bound<'_, Self>, fn_: Py<PyAny>) {
        let py = slf.py();
        {
            let mut g = lock(&slf.get().shared.state);
            if !g.finished {
                g.callbacks.push((fn_, slf.clone().unbind()));
                return;
            }
        }
        if let Err(e) = fn_.call1(py, (slf,)) {
            e.write_unraisable(py, Some(fn_.bind(py)));
        }
    }
    fn __repr__(&self) -> String {
        let g = lock(&self.shared.state);
        let state = if !g.finished {
            "pending"
        } else if g.error.is_some() {
            "failed"
        } else {
            "done"
        };
        format!("<RecordFuture {}-{} {state}>", self.shared.topic, self.shared.partition)
    }
}

type Token = Arc<Shared>;

struct AccState {
    acc: Accumulator<Token>,
    /// Records appended and not yet completed.
    incomplete: usize,
    /// Batches completed so far (each releases its bytes); `wait_for_space` watches it.
    completed_batches: u64,
}

/// The producer's accumulator (see `client/accumulator.rs`). Thread-safe.
#[pyclass(module = "logbroker._core", frozen)]
pub struct RecordAccumulator {
    state: Mutex<AccState>,
    /// Notified whenever a batch completes (memory released; maybe idle).
    completed: Condvar,
    waker: Arc<EngineWaker>,
    codec: Codec,
}

/// `(producer_id, producer_epoch, base_sequence, transactional)` a batch was sealed with.
type SealKey = (i64, i16, i32, bool);

/// Owned or borrowed header (key, value) bytes.
type HeaderBytes<'a> = (Cow<'a, [u8]>, Option<Cow<'a, [u8]>>);

/// A closed batch on its way to the broker. `attempts`, `base_sequence`, `retry_at` and
/// `in_flight` are the sender's bookkeeping; `seal()` encodes the wire form.
#[pyclass(module = "logbroker._core")]
pub struct ProducerBatch {
    batch: Option<EngineBatch<Token>>,
    codec: Codec,
    sealed: Option<(SealKey, Py<PyBytes>)>,
    #[pyo3(get, set)]
    attempts: u32,
    #[pyo3(get, set)]
    base_sequence: i32,
    #[pyo3(get, set)]
    retry_at: f64,
    #[pyo3(get, set)]
    in_flight: bool,
    #[pyo3(get)]
    topic: String,
    #[pyo3(get)]
    partition: i32,
    #[pyo3(get)]
    record_count: i32,
    #[pyo3(get)]
    size: usize,
    #[pyo3(get)]
    created_ms: i64,
}

#[pymethods]
impl ProducerBatch {
    /// The v2 batch bytes with these producer fields (cached; compression runs with the GIL
    /// released).
    #[pyo3(
        signature = (producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=false),
        text_signature = "($self, producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False)"
    )]
    fn seal(
        &mut self,
        py: Python<'_>,
        producer_id: i64,
        producer_epoch: i16,
        base_sequence: i32,
        transactional: bool,
    ) -> PyResult<Py<PyBytes>> {
        let key = (producer_id, producer_epoch, base_sequence, transactional);
        if let Some((k, b)) = &self.sealed {
            if *k == key {
                return Ok(b.clone_ref(py));
            }
        }
        let Some(b) = &self.batch else {
            return Err(PyValueError::new_err("the batch is already complete"));
        };
        let codec = self.codec;
        let bytes = py.detach(|| {
            let region = if codec == Codec::None {
                Cow::Borrowed(&b.records[..])
            } else {
                Cow::Owned(compression::compress(codec, &b.records))
            };
            let mut attributes = codec.id();
            if transactional {
                attributes |= batch::TRANSACTIONAL_BIT;
            }
            BatchHeader {
                base_offset: 0,
                batch_length: 0,
                partition_leader_epoch: -1,
                magic: batch::MAGIC_V2,
                crc: 0,
                attributes,
                last_offset_delta: b.count - 1,
                base_timestamp: b.base_timestamp,
                max_timestamp: b.max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                records_count: b.count,
            }
            .assemble(&region)
        });
        let out = PyBytes::new(py, &bytes).unbind();
        self.sealed = Some((key, out.clone_ref(py)));
        Ok(out)
    }
    #[getter]
    fn done(&self) -> bool {
        self.batch.is_none()
    }
    fn __repr__(&self) -> String {
        format!(
            "<ProducerBatch {}-{} records={} size={} attempts={}>",
            self.topic, self.partition, self.record_count, self.size, self.attempts
        )
    }
}

#[pymethods]
impl RecordAccumulator {
    #[new]
    #[pyo3(signature = (waker, batch_size=16384, linger_ms=5, buffer_memory=33_554_432, max_request_size=1_048_576, compression="none"))]
    fn new(
        waker: &PyWaker,
        batch_size: usize,
        linger_ms: i64,
        buffer_memory: usize,
        max_request_size: usize,
        compression: &str,
    ) -> PyResult<Self> {
        let codec = codec_named(compression)?;
        let config =
            AccumulatorConfig { batch_size: batch_size.max(1), linger_ms, buffer_memory, max_request_size, codec };
        let seed = wall_ms() as u64 ^ u64::from(std::process::id()).rotate_left(32);
        Ok(RecordAccumulator {
            state: Mutex::new(AccState { acc: Accumulator::new(config, seed), incomplete: 0, completed_batches: 0 }),
            completed: Condvar::new(),
            waker: Arc::clone(&waker.0),
            codec,
        })
    }

    /// Appends one record; returns its future. `timestamp` None means now.
    #[pyo3(signature = (topic, value=None, key=None, partition=None, timestamp=None, headers=None))]
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn append(
        &self,
        topic: &str,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        timestamp: Option<i64>,
        headers: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<RecordFuture> {
        let key = opt_bytes(key)?;
        let value = opt_bytes(value)?;
        let mut hdr_items: Vec<Bound<'_, PyAny>> = Vec::new();
        if let Some(h) = headers {
            if !h.is_none() {
                let items = if let Ok(d) = h.cast::<pyo3::types::PyDict>() { d.items().into_any() } else { h.clone() };
                for item in items.try_iter()? {
                    hdr_items.push(item?);
                }
            }
        }
        let mut hdr_parts: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = Vec::with_capacity(hdr_items.len());
        for item in &hdr_items {
            let t = item.cast::<PyTuple>().map_err(|_| PyTypeError::new_err("headers are (key, value) pairs"))?;
            if t.len() != 2 {
                return Err(PyTypeError::new_err("headers are (key, value) pairs"));
            }
            hdr_parts.push((t.get_item(0)?, t.get_item(1)?));
        }
        let mut hdr_owned: Vec<HeaderBytes<'_>> = Vec::with_capacity(hdr_parts.len());
        for (k, v) in &hdr_parts {
            hdr_owned.push((bytes_of(k)?, opt_bytes(Some(v))?));
        }
        let hdrs: Vec<(&[u8], Option<&[u8]>)> = hdr_owned.iter().map(|(k, v)| (&k[..], v.as_deref())).collect();
        let now = wall_ms();
        let ts = timestamp.unwrap_or(now);
        let rec = NewRecord { key: key.as_deref(), value: value.as_deref(), timestamp_ms: ts, headers: &hdrs };
        let appended = {
            let mut g = lock(&self.state);
            let r = g.acc.append(topic, partition, &rec, now, |p| {
                Arc::new(Shared {
                    topic: Arc::from(topic),
                    partition: p,
                    state: Mutex::new(Outcome::default()),
                    done: Condvar::new(),
                })
            });
            if r.is_ok() {
                g.incomplete += 1;
            }
            r?
        };
        if appended.wake {
            self.waker.wake();
        }
        Ok(RecordFuture { shared: appended.token, offset_delta: appended.offset_delta, timestamp: ts })
    }

    /// Closed and lingered batches (all open ones while flushing or closed).
    #[pyo3(signature = (now_ms=None))]
    fn drain(&self, now_ms: Option<i64>) -> Vec<ProducerBatch> {
        let batches = lock(&self.state).acc.drain(now_ms.unwrap_or_else(wall_ms));
        batches
            .into_iter()
            .map(|b| ProducerBatch {
                topic: b.topic.to_string(),
                partition: b.partition,
                record_count: b.count,
                size: b.records.len(),
                created_ms: b.created_ms,
                batch: Some(b),
                codec: self.codec,
                sealed: None,
                attempts: 0,
                base_sequence: -1,
                retry_at: 0.0,
                in_flight: false,
            })
            .collect()
    }

    /// When the next open batch becomes ready (wall-clock ms; 0 = now), None if none is open.
    fn next_ready_ms(&self) -> Option<i64> {
        lock(&self.state).acc.next_ready_ms().map(|t| t.max(0))
    }

    fn set_partitions(&self, topic: &str, partitions: u32) {
        lock(&self.state).acc.set_partitions(topic, partitions);
    }

    fn partitions(&self, topic: &str) -> Option<u32> {
        lock(&self.state).acc.partitions(topic)
    }

    fn begin_flush(&self) {
        lock(&self.state).acc.begin_flush();
        self.waker.wake();
    }

    fn close(&self) {
        lock(&self.state).acc.close();
        self.waker.wake();
    }

    #[getter]
    fn buffered(&self) -> usize {
        lock(&self.state).acc.buffered()
    }

    /// Records appended and not yet completed.
    #[getter]
    fn incomplete(&self) -> usize {
        lock(&self.state).incomplete
    }

    fn has_undrained(&self) -> bool {
        lock(&self.state).acc.has_undrained()
    }

    /// Completes a batch: every future gets `(base_offset, log_append_time)` or `error`
    /// (an exception instance), its callbacks run here, and its memory is released.
    #[pyo3(
        signature = (batch, base_offset=-1, log_append_time=-1, error=None),
        text_signature = "($self, batch, base_offset=-1, log_append_time=-1, error=None)"
    )]
    fn complete(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, ProducerBatch>,
        base_offset: i64,
        log_append_time: i64,
        error: Option<Py<PyAny>>,
    ) {
        let Some(b) = batch.borrow_mut().batch.take() else {
            return;
        };
        batch.borrow_mut().sealed = None;
        {
            let mut g = lock(&self.state);
            g.acc.release(b.records.len());
            g.incomplete = g.incomplete.saturating_sub(usize::try_from(b.count).unwrap_or(0));
            g.completed_batches += 1;
            self.completed.notify_all();
        }
        let callbacks = {
            let mut o = lock(&b.token.state);
            o.finished = true;
            o.base_offset = base_offset;
            o.log_append_time = log_append_time;
            o.error = error;
            std::mem::take(&mut o.callbacks)
        };
        b.token.done.notify_all();
        for (cb, fut) in callbacks {
            if let Err(e) = cb.call1(py, (fut,)) {
                e.write_unraisable(py, Some(cb.bind(py)));
            }
        }
    }

    /// Waits (GIL released) until every appended record has completed; false on timeout.
    #[pyo3(signature = (timeout=None))]
    fn wait_idle(&self, py: Python<'_>, timeout: Option<f64>) -> bool {
        py.detach(|| {
            let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
            let mut g = lock(&self.state);
            while g.incomplete > 0 {
                match deadline {
                    None => g = self.completed.wait(g).unwrap_or_else(PoisonError::into_inner),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            return false;
                        }
                        g = self.completed.wait_timeout(g, d - now).unwrap_or_else(PoisonError::into_inner).0;
                    }
                }
            }
            true
        })
    }

    /// Waits (GIL released) until a batch completes and releases its `buffer.memory`, or
    /// `timeout` seconds pass; returns at once when nothing is buffered. True if a batch
    /// completed. The producer calls it when an append found the buffer full.
    fn wait_for_space(&self, py: Python<'_>, timeout: f64) -> bool {
        py.detach(|| {
            let deadline = Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
            let mut g = lock(&self.state);
            let seen = g.completed_batches;
            while g.completed_batches == seen {
                if g.acc.buffered() == 0 {
                    return true;
                }
                let now = Instant::now();
                if now >= deadline {
                    return false;
                }
                g = self.completed.wait_timeout(g, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
            }
            true
        })
    }
}

/// A decoded fetch of one partition (see `client/records.rs`): `take(n)` hands out the next
/// records as `ConsumerRecord`s.
#[pyclass(module = "logbroker._core")]
pub struct RecordSet {
    fetched: Fetched,
    /// A copy of the fetched bytes in a pooled buffer (`client/buffer_pool.rs`), given back
    /// when the set is dropped; uncompressed records are read from here.
    input: Vec<u8>,
    topic: Py<PyString>,
    #[pyo3(get)]
    partition: i32,
    cursor: usize,
    /// Fetch offset the set was decoded from, and the fetch epoch the caller stamped on it.
    #[pyo3(get)]
    fetch_offset: i64,
    #[pyo3(get, set)]
    epoch: i64,
}

#[pymethods]
impl RecordSet {
    #[getter]
    fn topic(&self, py: Python<'_>) -> Py<PyString> {
        self.topic.clone_ref(py)
    }
    /// The offset after the last complete batch of the fetch.
    #[getter]
    fn next_offset(&self) -> i64 {
        self.fetched.next_offset
    }
    /// The consumer position after the records taken so far.
    #[getter]
    fn position(&self) -> i64 {
        self.fetched.records.get(self.cursor).map_or(self.fetched.next_offset, |r| r.offset)
    }
    /// Bytes of complete batches in the fetch.
    #[getter]
    fn size(&self) -> usize {
        self.fetched.bytes
    }
    #[getter]
    fn truncated(&self) -> bool {
        self.fetched.truncated
    }
    fn __len__(&self) -> usize {
        self.fetched.records.len() - self.cursor
    }
    /// Up to `max_records` (all with None) of the remaining records.
    #[pyo3(signature = (max_records=None))]
    fn take<'py>(&mut self, py: Python<'py>, max_records: Option<usize>) -> PyResult<Bound<'py, PyList>> {
        let end = max_records.map_or(self.fetched.records.len(), |n| (self.cursor + n).min(self.fetched.records.len()));
        let out = PyList::empty(py);
        for i in self.cursor..end {
            out.append(Bound::new(py, self.record(py, i, None)?)?)?;
        }
        self.cursor = end;
        Ok(out)
    }
    /// All remaining records whose offsets lie in one of the `acquired` ranges
    /// `[(first_offset, last_offset, delivery_count)]` (a ShareFetch's AcquiredRecords,
    /// ascending), each carrying its range's delivery count; the others (the rest of a batch
    /// that holds acquired records) are skipped. Leaves the set empty.
    fn take_acquired<'py>(&mut self, py: Python<'py>, acquired: Vec<(i64, i64, i16)>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        let mut ranges = acquired.iter().peekable();
        for i in self.cursor..self.fetched.records.len() {
            let offset = self.fetched.records[i].offset;
            while ranges.peek().is_some_and(|r| r.1 < offset) {
                ranges.next();
            }
            match ranges.peek() {
                None => break,
                Some(&&(first, _, count)) if first <= offset => {
                    out.append(Bound::new(py, self.record(py, i, Some(count))?)?)?;
                }
                Some(_) => {}
            }
        }
        self.cursor = self.fetched.records.len();
        Ok(out)
    }
    /// Drops every remaining record.
    fn clear(&mut self) {
        self.cursor = self.fetched.records.len();
    }
}

impl RecordSet {
    /// The `i`th decoded record as a `ConsumerRecord`.
    fn record(&self, py: Python<'_>, i: usize, delivery_count: Option<i16>) -> PyResult<ConsumerRecord> {
        let raw = self.input.as_slice();
        let f = &self.fetched;
        let r = &f.records[i];
        let headers = if r.headers_count > 0 {
            let items: Vec<(String, Option<Bound<'_, PyBytes>>)> =
                records::parse_headers(f.slice(raw, r.headers.clone()), r.headers_count)
                    .into_iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k).into_owned(), v.map(|v| PyBytes::new(py, v))))
                    .collect();
            Some(PyList::new(py, items)?.unbind())
        } else {
            None
        };
        Ok(ConsumerRecord {
            topic: self.topic.clone_ref(py),
            partition: self.partition,
            offset: r.offset,
            timestamp: r.timestamp,
            timestamp_type: r.timestamp_type,
            leader_epoch: r.leader_epoch,
            key: r.key.clone().map(|k| PyBytes::new(py, f.slice(raw, k)).unbind()),
            value: r.value.clone().map(|v| PyBytes::new(py, f.slice(raw, v)).unbind()),
            headers,
            delivery_count,
        })
    }
}

impl Drop for RecordSet {
    fn drop(&mut self) {
        buffer_pool::give(std::mem::take(&mut self.input));
        buffer_pool::give(std::mem::take(&mut self.fetched.data));
    }
}

/// One consumed record. `timestamp_type` is 0 (CreateTime) or 1 (LogAppendTime);
/// `headers` is a list of `(key, value)`; `delivery_count` is how many times a share group
/// has delivered the record (KIP-932; None outside share groups).
#[pyclass(module = "logbroker._core", frozen)]
pub struct ConsumerRecord {
    /// The topic the record was read from.
    #[pyo3(get)]
    topic: Py<PyString>,
    /// The partition the record was read from.
    #[pyo3(get)]
    partition: i32,
    /// The record's offset in its partition.
    #[pyo3(get)]
    offset: i64,
    /// The record's timestamp (ms since the epoch).
    #[pyo3(get)]
    timestamp: i64,
    /// 0: `timestamp` is the producer's CreateTime; 1: the broker's LogAppendTime.
    #[pyo3(get)]
    timestamp_type: u8,
    /// The partition leader epoch of the record's batch (-1 when unknown).
    #[pyo3(get)]
    leader_epoch: i32,
    /// The record's key (None when it has none).
    #[pyo3(get)]
    key: Option<Py<PyBytes>>,
    /// The record's value (None for a tombstone).
    #[pyo3(get)]
    value: Option<Py<PyBytes>>,
    headers: Option<Py<PyList>>,
    /// How many times a share group has delivered this record (KIP-932); None outside
    /// share groups.
    #[pyo3(get)]
    delivery_count: Option<i16>,
}

#[pymethods]
impl ConsumerRecord {
    /// The record's headers, a list of `(key, value)` (bytes values; empty when none).
    #[getter]
    fn headers<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        match &self.headers {
            Some(h) => Ok(PyList::new(py, h.bind(py).iter())?),
            None => Ok(PyList::empty(py)),
        }
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let show = |b: &Option<Py<PyBytes>>| -> PyResult<String> {
            match b {
                None => Ok("None".into()),
                Some(b) => Ok(b.bind(py).repr()?.to_string()),
            }
        };
        let delivery = self.delivery_count.map_or(String::new(), |n| format!(", delivery_count={n}"));
        Ok(format!(
            "ConsumerRecord(topic={:?}, partition={}, offset={}, timestamp={}, key={}, value={}{delivery})",
            self.topic.bind(py).to_str()?,
            self.partition,
            self.offset,
            self.timestamp,
            show(&self.key)?,
            show(&self.value)?
        ))
    }
}

/// Decodes one partition's fetched `records` from `fetch_offset` (CRC-checked unless told
/// otherwise; `aborted` = [(producer_id, first_offset)] for read_committed).
#[pyfunction]
#[pyo3(signature = (topic, partition, records, fetch_offset, check_crcs=true, aborted=None))]
pub fn decode_records(
    py: Python<'_>,
    topic: &Bound<'_, PyString>,
    partition: i32,
    records: Option<&Bound<'_, PyAny>>,
    fetch_offset: i64,
    check_crcs: bool,
    aborted: Option<Vec<(i64, i64)>>,
) -> PyResult<RecordSet> {
    // One copy, into a warm pooled buffer: the response frame the records view into is reused
    // by the connection for the next fetch, and fresh multi-MiB allocations cost page faults.
    let input = match records.filter(|r| !r.is_none()) {
        None => Vec::new(),
        Some(r) => {
            // bytes, bytearray or a memoryview: any buffer.
            let buf = PyBuffer::<u8>::get(r)?;
            let mut input = buffer_pool::take_sized(buf.item_count());
            let copied = buf.copy_to_slice(py, &mut input);
            buf.release(py);
            if let Err(e) = copied {
                buffer_pool::give(input);
                return Err(e);
            }
            input
        }
    };
    let name = format!("{}-{partition}", topic.to_str()?);
    let aborted: Option<Vec<AbortedTxn>> = aborted
        .map(|a| a.into_iter().map(|(producer_id, first_offset)| AbortedTxn { producer_id, first_offset }).collect());
    let fetched =
        py.enter_core(|| records::decode_fetched(&name, &input, fetch_offset, check_crcs, aborted.as_deref()));
    let fetched = match fetched {
        Ok(f) => f,
        Err(e) => {
            buffer_pool::give(input);
            return Err(e);
        }
    };
    Ok(RecordSet { fetched, input, topic: topic.clone().unbind(), partition, cursor: 0, fetch_offset, epoch: 0 })
}

/// Kafka's murmur2 of `data`, as the Java client's signed int.
#[pyfunction]
pub fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(hash::murmur2(&bytes_of(data)?) as i32)
}

/// The partition Kafka's default partitioner gives `key` among `partitions`.
#[pyfunction]
pub fn partition_for_key(key: &Bound<'_, PyAny>, partitions: u32) -> PyResult<u32> {
    if partitions == 0 {
        return Err(PyValueError::new_err("partitions must be positive"));
    }
    Ok(hash::partition_for_key(&bytes_of(key)?, partitions))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("AccumulatorError", m.py().get_type::<AccumulatorError>())?;
    m.add_class::<PyWaker>()?;
    m.add_class::<RecordAccumulator>()?;
    m.add_class::<ProducerBatch>()?;
    m.add_class::<RecordFuture>()?;
    m.add_class::<RecordMetadata>()?;
    m.add_class::<RecordSet>()?;
    m.add_class::<ConsumerRecord>()?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(murmur2, m)?)?;
    m.add_function(wrap_pyfunction!(partition_for_key, m)?)?;
    Ok(())
}
