//! Module-level functions: checkpoint files, CRC-32C, batch validation.
use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::gil::EnterCore;
use super::log::{codec_named, extract_bytes};
use crate::batch::{self, Check, Control, SliceSource};
use crate::builder::{BatchBuilder, Rec};
use crate::error::LogError;
use crate::offset_checkpoint;

/// Writes Kafka's offset checkpoint file atomically: "0\n<count>\n<topic> <partition> <offset>\n"...
#[pyfunction]
pub fn write_offset_checkpoint(py: Python<'_>, path: PathBuf, entries: Vec<(String, i32, i64)>) -> PyResult<()> {
    py.enter_core(|| offset_checkpoint::write_offset_checkpoint(&path, &entries))
}

/// Reads Kafka's offset checkpoint file; a missing file is `[]`.
/// `syncfs(2)` of the file system holding `path` (see `Log::close_unsynced`).
#[pyfunction]
pub fn sync_filesystem(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    py.enter_core(|| offset_checkpoint::sync_filesystem(&path))
}

#[pyfunction]
pub fn read_offset_checkpoint(py: Python<'_>, path: PathBuf) -> PyResult<Vec<(String, i32, i64)>> {
    py.enter_core(|| offset_checkpoint::read_offset_checkpoint(&path))
}

/// CRC-32C (Castagnoli) of a bytes-like object.
#[pyfunction]
pub fn crc32c(data: &Bound<'_, PyAny>) -> PyResult<u32> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(::crc32c::crc32c(b.as_bytes()));
    }
    Ok(::crc32c::crc32c(&extract_bytes(data)?))
}

/// Decompresses `data` with the codec named `codec` ("none", "gzip", "snappy", "lz4",
/// "zstd": the stream formats of Kafka's batches, compression.rs), refusing output above
/// `limit` bytes (ValueError naming the codec and the cause). Client telemetry pushes
/// (PushTelemetry, KIP-714) are compressed this way.
#[pyfunction]
pub fn decompress<'py>(
    py: Python<'py>,
    codec: &str,
    data: &Bound<'py, PyAny>,
    limit: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let c = codec_named(codec)?;
    let input = extract_bytes(data)?;
    let out = py
        .detach(|| crate::compression::decompress(c, &input, limit))
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{codec}: {e}")))?;
    Ok(PyBytes::new(py, &out))
}

/// Whether `signature` is the JWS algorithm `alg`'s signature of `signing_input` by the key
/// (`a`, `b`): RSA `n`, `e`; EC `x`, `y`; Ed25519 `x`, `b""` (jws.rs). ValueError for an
/// algorithm not accepted. Releases the GIL.
#[pyfunction]
pub fn jws_verify(
    py: Python<'_>,
    alg: &str,
    a: &[u8],
    b: &[u8],
    signing_input: &[u8],
    signature: &[u8],
) -> PyResult<bool> {
    py.detach(|| crate::jws::verify(alg, a, b, signing_input, signature))
        .map_err(pyo3::exceptions::PyValueError::new_err)
}

/// `(base_offset, last_offset_delta, record_count, producer_id, base_sequence)`.
type BatchSummaryTuple = (i64, i32, i32, i64, i32);

/// Fully validates every batch (CRC, records walk, decompression) and returns, per batch,
/// `(base_offset, last_offset_delta, record_count, producer_id, base_sequence)`.
#[pyfunction]
pub fn validate_batches(py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<Vec<BatchSummaryTuple>> {
    let bytes = extract_bytes(records)?;
    py.enter_core(move || {
        let mut out = Vec::new();
        let end = batch::scan(&mut SliceSource(&bytes), 0, Check::Full, None, |v| {
            let h = v.header;
            out.push((h.base_offset, h.last_offset_delta, h.records_count, h.producer_id, h.base_sequence));
            Ok(Control::Continue)
        })?;
        match end.error {
            Some(e) => Err::<_, LogError>(e),
            None => Ok(out),
        }
    })
}

/// Encodes one v2 batch (for tests, benchmarks and clients): `records` are
/// `(key, value, timestamp_delta, headers)` with `headers` a list of `(key, value)`.
#[pyfunction]
#[pyo3(
    signature = (records, base_timestamp=0, compression="none", producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=false),
    text_signature = "(records, base_timestamp=0, compression='none', producer_id=-1, producer_epoch=-1, base_sequence=-1, transactional=False)"
)]
#[allow(clippy::too_many_arguments, clippy::type_complexity)] // the Python function's arguments and tuples (_core.pyi)
pub fn encode_batch<'py>(
    py: Python<'py>,
    records: Vec<(Option<Vec<u8>>, Option<Vec<u8>>, i64, Vec<(Vec<u8>, Option<Vec<u8>>)>)>,
    base_timestamp: i64,
    compression: &str,
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> PyResult<Bound<'py, PyBytes>> {
    let codec = codec_named(compression)?;
    let mut b = BatchBuilder::new()
        .codec(codec)
        .base_timestamp(base_timestamp)
        .producer(producer_id, producer_epoch, base_sequence)
        .transactional(transactional);
    for (key, value, ts_delta, headers) in records {
        let mut r = Rec::default().ts_delta(ts_delta);
        r.key = key;
        r.value = value;
        r.headers = headers;
        b = b.record(r);
    }
    let bytes = py.detach(|| b.build());
    Ok(PyBytes::new(py, &bytes))
}

/// The facts a share group needs of the records in `data` (complete batches, as
/// `Log.read_batches` returns them) with offsets in `[from_offset, to_offset)`: (offsets, key
/// hashes (None for a null key), not-before times in ms (-1: none) from the header named
/// `header`); control batches left out (rust/src/share_records.rs). ValueError naming the
/// position of a torn batch.
/// (offsets, key hashes, not-before times): `share_record_facts`' columns.
type ShareFacts = (Vec<i64>, Vec<Option<u64>>, Vec<i64>);

#[pyfunction]
#[pyo3(signature = (data, header, from_offset=0, to_offset=i64::MAX))]
pub fn share_record_facts(
    py: Python<'_>,
    data: &Bound<'_, PyAny>,
    header: &str,
    from_offset: i64,
    to_offset: i64,
) -> PyResult<ShareFacts> {
    let bytes = extract_bytes(data)?;
    let header = header.as_bytes().to_vec();
    let facts = py.enter_core(|| crate::share_records::share_record_facts(&bytes, &header, from_offset, to_offset))?;
    Ok((
        facts.iter().map(|f| f.offset).collect(),
        facts.iter().map(|f| f.key_hash).collect(),
        facts.iter().map(|f| f.not_before_ms).collect(),
    ))
}
