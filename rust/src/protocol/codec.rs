//! The primitives the generated messages (`protocol/messages/`) are written in: a `Reader`
//! over one received frame, a `Writer` that produces the bytes to send, and the error type.
//!
//! # Wire rules (Kafka's, as the Python codec applies them)
//! - Integers are big-endian; `bool` is one byte (non-zero is true; written as 0 or 1).
//! - Non-compact lengths: `int16` for strings, `int32` for bytes, records and arrays; -1 is
//!   null and any other negative length is malformed.
//! - Compact lengths (flexible versions): an unsigned varint of length + 1; 0 is null. A
//!   compact string longer than 32767 bytes is malformed.
//! - A null where the version does not allow one is malformed on decode and refused on encode.
//! - An array count larger than the bytes left is malformed (before anything is allocated).
//! - Tagged fields: a varint count, then (tag, size, payload) entries; a known tag's payload
//!   must be consumed exactly. Unknown tags are kept (`TaggedFields`) and written back merged
//!   with the known ones in tag order.
//!
//! # Zero copy
//! A `Reader` holds the frame as `Bytes`: `bytes` and `records` fields are slices of it, not
//! copies. A `Writer` collects `Chunk`s: its own buffer, and large record sets either as
//! `Bytes` slices or as `FileRegion`s sent with sendfile(2), so a Fetch response's records
//! never pass through a buffer of ours.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

pub use bytes::Bytes;

use crate::file_region::FileRegion;

/// A Kafka UUID (topic ids): 16 bytes, all zero = none.
pub type Uuid = [u8; 16];

/// Tagged fields this codec does not know: tag -> raw payload.
pub type TaggedFields = BTreeMap<u32, Bytes>;

/// Record sets at least this large are handed to the writer as their own chunk (no copy).
const CHUNK_MIN: usize = 16 << 10;

/// A decode or encode failure, naming the message field, position and values involved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProtocolError(pub String);

impl ProtocolError {
    fn short(label: &str, pos: usize, need: usize, len: usize) -> Self {
        ProtocolError(format!("{label}: needs {need} byte(s) at position {pos}, but the frame ends at {len}"))
    }
    fn bad_length(label: &str, pos: usize, len: i64) -> Self {
        ProtocolError(format!("{label}: invalid length {len} at position {pos}"))
    }
    fn bad_null(label: &str, pos: usize) -> Self {
        ProtocolError(format!("{label}: null at position {pos}, but this version does not allow null"))
    }
    pub fn null_value(label: &str, version: i16) -> Self {
        ProtocolError(format!("{label}: null is not allowed at version {version}"))
    }
    pub fn absent_field(label: &str, version: i16) -> Self {
        ProtocolError(format!("{label}: set to a non-default value, but version {version} does not carry it"))
    }
    pub fn unknown_api(api_key: i16) -> Self {
        ProtocolError(format!("unknown API key {api_key}"))
    }
    pub fn unsupported_version(name: &str, version: i16, lo: i16, hi: i16) -> Self {
        ProtocolError(format!("{name}: version {version} is outside the supported {lo}-{hi}"))
    }
}

/// Reads one frame (or a tagged field's payload) from the front.
#[derive(Debug, Clone)]
pub struct Reader {
    buf: Bytes,
    pos: usize,
}

macro_rules! read_int {
    ($name:ident, $t:ty, $n:expr) => {
        pub fn $name(&mut self, label: &str) -> Result<$t, ProtocolError> {
            let b = self.take_slice(label, $n)?;
            let mut a = [0u8; $n];
            a.copy_from_slice(b);
            Ok(<$t>::from_be_bytes(a))
        }
    };
}

impl Reader {
    pub fn new(buf: Bytes) -> Self {
        Reader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take_slice(&mut self, label: &str, n: usize) -> Result<&[u8], ProtocolError> {
        if self.remaining() < n {
            return Err(ProtocolError::short(label, self.pos, n, self.buf.len()));
        }
        let start = self.pos;
        self.pos += n;
        Ok(&self.buf[start..self.pos])
    }

    fn take_bytes(&mut self, label: &str, n: usize) -> Result<Bytes, ProtocolError> {
        if self.remaining() < n {
            return Err(ProtocolError::short(label, self.pos, n, self.buf.len()));
        }
        let out = self.buf.slice(self.pos..self.pos + n);
        self.pos += n;
        Ok(out)
    }

    read_int!(i8, i8, 1);
    read_int!(i16, i16, 2);
    read_int!(u16, u16, 2);
    read_int!(i32, i32, 4);
    read_int!(i64, i64, 8);
    read_int!(f64, f64, 8);

    pub fn bool(&mut self, label: &str) -> Result<bool, ProtocolError> {
        Ok(self.take_slice(label, 1)?[0] != 0)
    }

    pub fn uuid(&mut self, label: &str) -> Result<Uuid, ProtocolError> {
        let mut u = [0u8; 16];
        u.copy_from_slice(self.take_slice(label, 16)?);
        Ok(u)
    }

    /// An unsigned varint of at most 5 bytes whose value fits 32 bits.
    pub fn uvarint(&mut self, label: &str) -> Result<u32, ProtocolError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for i in 0..5 {
            let b = self.take_slice(label, 1)?[0];
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return u32::try_from(value)
                    .map_err(|_| ProtocolError(format!("{label}: varint at position {start} exceeds 32 bits")));
            }
        }
        Err(ProtocolError(format!("{label}: varint at position {start} is longer than 5 bytes")))
    }

    /// A length prefix: -1 = null (checked against `nullable`), else >= 0.
    fn length(&mut self, label: &str, compact: bool, wide: bool, nullable: bool) -> Result<i64, ProtocolError> {
        let pos = self.pos;
        let n = if compact {
            i64::from(self.uvarint(label)?) - 1
        } else if wide {
            i64::from(self.i32(label)?)
        } else {
            i64::from(self.i16(label)?)
        };
        if n < -1 {
            return Err(ProtocolError::bad_length(label, pos, n));
        }
        if n == -1 && !nullable {
            return Err(ProtocolError::bad_null(label, pos));
        }
        Ok(n)
    }

    pub fn string_opt(&mut self, label: &str, compact: bool, nullable: bool) -> Result<Option<String>, ProtocolError> {
        let pos = self.pos;
        let n = self.length(label, compact, false, nullable)?;
        if n < 0 {
            return Ok(None);
        }
        if compact && n > 32767 {
            return Err(ProtocolError::bad_length(label, pos, n));
        }
        let raw = self.take_slice(label, n as usize)?;
        match std::str::from_utf8(raw) {
            Ok(s) => Ok(Some(s.to_owned())),
            Err(e) => Err(ProtocolError(format!("{label}: string at position {pos} is not UTF-8 ({e})"))),
        }
    }

    pub fn bytes_opt(&mut self, label: &str, compact: bool, nullable: bool) -> Result<Option<Bytes>, ProtocolError> {
        let n = self.length(label, compact, true, nullable)?;
        if n < 0 {
            return Ok(None);
        }
        self.take_bytes(label, n as usize).map(Some)
    }

    pub fn records_opt(
        &mut self,
        label: &str,
        compact: bool,
        nullable: bool,
    ) -> Result<Option<Records>, ProtocolError> {
        Ok(self.bytes_opt(label, compact, nullable)?.map(Records::Bytes))
    }

    /// An array's element count, -1 for null; a count beyond the bytes left is malformed.
    pub fn array_len(&mut self, label: &str, compact: bool, nullable: bool) -> Result<i32, ProtocolError> {
        let pos = self.pos;
        let n = self.length(label, compact, true, nullable)?;
        if n > self.remaining() as i64 {
            return Err(ProtocolError(format!(
                "{label}: array of {n} element(s) at position {pos}, but only {} byte(s) follow",
                self.remaining()
            )));
        }
        Ok(n as i32)
    }

    /// An array: its count (null is `None`, where allowed), then each element read by `item`.
    pub fn array<T>(
        &mut self,
        label: &str,
        compact: bool,
        nullable: bool,
        mut item: impl FnMut(&mut Reader) -> Result<T, ProtocolError>,
    ) -> Result<Option<Vec<T>>, ProtocolError> {
        let n = self.array_len(label, compact, nullable)?;
        let Ok(n) = usize::try_from(n) else { return Ok(None) };
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(item(self)?);
        }
        Ok(Some(items))
    }

    /// A tagged-field section: `known(tag, payload)` reads a tag it knows and returns true;
    /// every other tag is kept raw in the result.
    pub fn tagged_fields(
        &mut self,
        label: &str,
        mut known: impl FnMut(u32, &mut Reader) -> Result<bool, ProtocolError>,
    ) -> Result<TaggedFields, ProtocolError> {
        let count = self.uvarint(label)?;
        let mut unknown = TaggedFields::new();
        for _ in 0..count {
            let (tag, mut payload) = self.tagged_field(label)?;
            if !known(tag, &mut payload)? {
                unknown.insert(tag, payload.rest());
            }
        }
        Ok(unknown)
    }

    /// One tagged field: its tag and a reader over exactly its payload.
    pub fn tagged_field(&mut self, label: &str) -> Result<(u32, Reader), ProtocolError> {
        let tag = self.uvarint(label)?;
        let size = self.uvarint(label)? as usize;
        let payload = self.take_bytes(label, size)?;
        Ok((tag, Reader::new(payload)))
    }

    /// A known tagged field's payload must be used up exactly.
    pub fn finish_tag(&self, label: &str) -> Result<(), ProtocolError> {
        if self.remaining() != 0 {
            return Err(ProtocolError(format!(
                "{label}: tagged field of {} byte(s) holds {} byte(s) more than its value",
                self.buf.len(),
                self.remaining()
            )));
        }
        Ok(())
    }

    /// The unread rest.
    pub fn rest(&mut self) -> Bytes {
        let out = self.buf.slice(self.pos..);
        self.pos = self.buf.len();
        out
    }
}

/// A record set: received bytes, or a range of a segment file to send with sendfile(2).
#[derive(Debug, Clone)]
pub enum Records {
    Bytes(Bytes),
    File(FileRegion),
}

impl Records {
    pub fn len(&self) -> usize {
        match self {
            Records::Bytes(b) => b.len(),
            Records::File(r) => r.length as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Records {
    fn default() -> Self {
        Records::Bytes(Bytes::new())
    }
}

impl PartialEq for Records {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Records::Bytes(a), Records::Bytes(b)) => a == b,
            (Records::File(a), Records::File(b)) => {
                Arc::ptr_eq(&a.file, &b.file) && a.position == b.position && a.length == b.length
            }
            _ => false,
        }
    }
}

/// A piece of an encoded message: bytes, or a file range to sendfile.
#[derive(Debug, Clone)]
pub enum Chunk {
    Bytes(Bytes),
    File(FileRegion),
}

/// Builds an encoded message as chunks (see the module doc).
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
    chunks: Vec<Chunk>,
    len: usize,
}

impl fmt::Debug for Writer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Writer({} bytes in {} chunk(s) + {} buffered)", self.len, self.chunks.len(), self.buf.len())
    }
}

impl Writer {
    pub fn new() -> Self {
        Writer::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        Writer { buf: Vec::with_capacity(n), chunks: Vec::new(), len: 0 }
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len + self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn put(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    pub fn i8(&mut self, v: i8) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i16(&mut self, v: i16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_be_bytes());
    }
    pub fn bool(&mut self, v: bool) {
        self.buf.push(u8::from(v));
    }
    pub fn uuid(&mut self, v: Uuid) {
        self.buf.extend_from_slice(&v);
    }

    pub fn uvarint(&mut self, mut v: u32) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// A length prefix (`None` = null, refused unless `nullable`).
    fn length(
        &mut self,
        label: &str,
        n: Option<usize>,
        compact: bool,
        wide: bool,
        nullable: bool,
        version: i16,
    ) -> Result<(), ProtocolError> {
        let Some(n) = n else {
            if !nullable {
                return Err(ProtocolError::null_value(label, version));
            }
            if compact {
                self.uvarint(0);
            } else if wide {
                self.i32(-1);
            } else {
                self.i16(-1);
            }
            return Ok(());
        };
        let too_long = || ProtocolError(format!("{label}: length {n} does not fit the field at version {version}"));
        if compact {
            self.uvarint(u32::try_from(n + 1).map_err(|_| too_long())?);
        } else if wide {
            self.i32(i32::try_from(n).map_err(|_| too_long())?);
        } else {
            self.i16(i16::try_from(n).map_err(|_| too_long())?);
        }
        Ok(())
    }

    pub fn string_opt(
        &mut self,
        label: &str,
        v: Option<&String>,
        compact: bool,
        nullable: bool,
        version: i16,
    ) -> Result<(), ProtocolError> {
        self.length(label, v.map(String::len), compact, false, nullable, version)?;
        if let Some(s) = v {
            self.buf.extend_from_slice(s.as_bytes());
        }
        Ok(())
    }

    pub fn bytes_opt(
        &mut self,
        label: &str,
        v: Option<&Bytes>,
        compact: bool,
        nullable: bool,
        version: i16,
    ) -> Result<(), ProtocolError> {
        self.length(label, v.map(Bytes::len), compact, true, nullable, version)?;
        if let Some(b) = v {
            self.buf.extend_from_slice(b);
        }
        Ok(())
    }

    pub fn records_opt(
        &mut self,
        label: &str,
        v: Option<&Records>,
        compact: bool,
        nullable: bool,
        version: i16,
    ) -> Result<(), ProtocolError> {
        self.length(label, v.map(Records::len), compact, true, nullable, version)?;
        match v {
            Some(Records::Bytes(b)) if b.len() < CHUNK_MIN => self.buf.extend_from_slice(b),
            Some(Records::Bytes(b)) => self.push_chunk(Chunk::Bytes(b.clone())),
            Some(Records::File(r)) if r.length > 0 => self.push_chunk(Chunk::File(r.clone())),
            None | Some(Records::File(_)) => {}
        }
        Ok(())
    }

    pub fn array_len(
        &mut self,
        label: &str,
        n: Option<usize>,
        compact: bool,
        nullable: bool,
        version: i16,
    ) -> Result<(), ProtocolError> {
        self.length(label, n, compact, true, nullable, version)
    }

    /// An array: its count (`None` is null, where allowed), then each element written by `item`.
    pub fn array<T>(
        &mut self,
        label: &str,
        items: Option<&[T]>,
        compact: bool,
        nullable: bool,
        version: i16,
        mut item: impl FnMut(&mut Writer, &T) -> Result<(), ProtocolError>,
    ) -> Result<(), ProtocolError> {
        self.array_len(label, items.map(<[T]>::len), compact, nullable, version)?;
        for x in items.into_iter().flatten() {
            item(self, x)?;
        }
        Ok(())
    }

    /// The tagged-field section: `known` (tag, payload) merged over `unknown`, in tag order.
    pub fn tagged_fields(&mut self, known: &[(u32, Vec<u8>)], unknown: &TaggedFields) {
        if known.is_empty() && unknown.is_empty() {
            self.buf.push(0);
            return;
        }
        let mut all: BTreeMap<u32, &[u8]> = unknown.iter().map(|(t, b)| (*t, &b[..])).collect();
        for (t, b) in known {
            all.insert(*t, b);
        }
        self.uvarint(all.len() as u32);
        for (t, b) in all {
            self.uvarint(t);
            self.uvarint(b.len() as u32);
            self.buf.extend_from_slice(b);
        }
    }

    /// A tagged field's payload (it cannot hold file regions).
    pub fn into_tag_payload(self, label: &str) -> Result<Vec<u8>, ProtocolError> {
        if !self.chunks.is_empty() {
            return Err(ProtocolError(format!("{label}: a tagged field cannot carry a record set")));
        }
        Ok(self.buf)
    }

    fn push_chunk(&mut self, c: Chunk) {
        if !self.buf.is_empty() {
            let head = std::mem::take(&mut self.buf);
            self.len += head.len();
            self.chunks.push(Chunk::Bytes(Bytes::from(head)));
        }
        self.len += match &c {
            Chunk::Bytes(b) => b.len(),
            Chunk::File(r) => r.length as usize,
        };
        self.chunks.push(c);
    }

    /// The encoded message as chunks, in order.
    pub fn into_chunks(mut self) -> Vec<Chunk> {
        if !self.buf.is_empty() {
            let tail = std::mem::take(&mut self.buf);
            self.chunks.push(Chunk::Bytes(Bytes::from(tail)));
        }
        self.chunks
    }

    /// The encoded message as one buffer; file regions are read into it.
    pub fn into_vec(self) -> Result<Vec<u8>, ProtocolError> {
        if self.chunks.is_empty() {
            return Ok(self.buf);
        }
        let mut out = Vec::with_capacity(self.len());
        for c in self.into_chunks() {
            match c {
                Chunk::Bytes(b) => out.extend_from_slice(&b),
                Chunk::File(r) => {
                    let bytes = r.read_to_vec().map_err(|e| ProtocolError(format!("reading records: {e}")))?;
                    out.extend_from_slice(&bytes);
                }
            }
        }
        Ok(out)
    }
}

/// A top-level message (request or response body, or a header).
pub trait Message: Sized {
    const NAME: &'static str;
    /// -1 for headers.
    const API_KEY: i16;
    const VERSIONS: (i16, i16);
    /// First flexible version, -1 if none.
    const FLEXIBLE_MIN: i16;

    fn decode_body(r: &mut Reader, version: i16) -> Result<Self, ProtocolError>;
    fn encode_body(&self, w: &mut Writer, version: i16) -> Result<(), ProtocolError>;

    fn check_version(version: i16) -> Result<(), ProtocolError> {
        let (lo, hi) = Self::VERSIONS;
        if version < lo || version > hi {
            return Err(ProtocolError::unsupported_version(Self::NAME, version, lo, hi));
        }
        Ok(())
    }

    /// Decodes a whole body at `version` (checked first).
    fn decode_versioned(r: &mut Reader, version: i16) -> Result<Self, ProtocolError> {
        Self::check_version(version)?;
        Self::decode_body(r, version)
    }

    fn encode_versioned(&self, w: &mut Writer, version: i16) -> Result<(), ProtocolError> {
        Self::check_version(version)?;
        self.encode_body(w, version)
    }
}

/// Decode `body` as `M` at `version`, encode it again: (bytes, bytes consumed).
pub fn roundtrip<M: Message>(body: &Bytes, version: i16) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut r = Reader::new(body.clone());
    let m = M::decode_versioned(&mut r, version)?;
    let used = r.position();
    let mut w = Writer::new();
    m.encode_versioned(&mut w, version)?;
    Ok((w.into_vec()?, used))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::messages::{FetchResponse, ProduceRequest};

    #[test]
    fn uvarint_round_trip_and_limits() {
        for v in [0u32, 1, 127, 128, 300, 16_383, 16_384, u32::MAX] {
            let mut w = Writer::new();
            w.uvarint(v);
            let mut r = Reader::new(Bytes::from(w.into_vec().unwrap()));
            assert_eq!(r.uvarint("x").unwrap(), v);
            assert_eq!(r.remaining(), 0);
        }
        // Six continuation bytes, and a fifth byte carrying more than 32 bits.
        let mut r = Reader::new(Bytes::from_static(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]));
        assert!(r.uvarint("x").unwrap_err().0.contains("longer than 5 bytes"));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x7f]));
        assert!(r.uvarint("x").unwrap_err().0.contains("exceeds 32 bits"));
    }

    #[test]
    fn nulls_follow_the_version_rules() {
        // Non-compact: -1 is null, -2 is malformed, null where not allowed is refused.
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff]));
        assert_eq!(r.string_opt("s", false, true).unwrap(), None);
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xfe]));
        assert!(r.string_opt("s", false, true).unwrap_err().0.contains("invalid length -2"));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff]));
        assert!(r.string_opt("s", false, false).unwrap_err().0.contains("does not allow null"));
        let mut w = Writer::new();
        assert!(w.string_opt("s", None, true, false, 9).unwrap_err().0.contains("null is not allowed at version 9"));
        // Compact: 0 is null.
        let mut r = Reader::new(Bytes::from_static(&[0x00]));
        assert_eq!(r.bytes_opt("b", true, true).unwrap(), None);
    }

    #[test]
    fn array_count_beyond_the_frame_is_refused_before_allocating() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0x00]));
        let e = r.array_len("a", false, false).unwrap_err();
        assert!(e.0.contains("array of 2147483647 element(s)"), "{e}");
    }

    #[test]
    fn tagged_fields_merge_known_over_unknown_in_tag_order() {
        let mut unknown = TaggedFields::new();
        unknown.insert(7, Bytes::from_static(b"u7"));
        unknown.insert(1, Bytes::from_static(b"u1"));
        let mut w = Writer::new();
        w.tagged_fields(&[(3, b"k3".to_vec()), (1, b"k1".to_vec())], &unknown);
        let out = w.into_vec().unwrap();
        assert_eq!(out, [3, 1, 2, b'k', b'1', 3, 2, b'k', b'3', 7, 2, b'u', b'7']);
    }

    #[test]
    fn produce_request_records_are_slices_of_the_frame() {
        let records = Bytes::from(vec![0xab; 40_000]);
        let req = ProduceRequest {
            acks: -1,
            timeout_ms: 30_000,
            topic_data: vec![crate::protocol::messages::produce_request::TopicProduceData {
                name: "events".into(),
                partition_data: vec![crate::protocol::messages::produce_request::PartitionProduceData {
                    index: 3,
                    records: Some(Records::Bytes(records.clone())),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        for version in [3, 8, 9, 11] {
            let mut w = Writer::new();
            req.encode_versioned(&mut w, version).unwrap();
            // The large record set is its own chunk, not copied into the buffer.
            let chunks = w.into_chunks();
            assert!(chunks.iter().any(|c| matches!(c, Chunk::Bytes(b) if b.as_ptr() == records.as_ptr())));
            let mut flat = Vec::new();
            for c in chunks {
                if let Chunk::Bytes(b) = c {
                    flat.extend_from_slice(&b);
                }
            }
            let frame = Bytes::from(flat);
            let mut r = Reader::new(frame.clone());
            let back = ProduceRequest::decode_versioned(&mut r, version).unwrap();
            assert_eq!(r.remaining(), 0);
            assert_eq!(back, req);
            let Some(Records::Bytes(got)) = &back.topic_data[0].partition_data[0].records else { panic!() };
            assert!(got.as_ptr() >= frame.as_ptr() && got.as_ptr() < frame.as_ptr().wrapping_add(frame.len()));
        }
    }

    #[test]
    fn versions_outside_the_range_are_refused() {
        let mut w = Writer::new();
        let e = FetchResponse::default().encode_versioned(&mut w, 99).unwrap_err();
        assert_eq!(e.0, "FetchResponse: version 99 is outside the supported 4-18");
    }
}
