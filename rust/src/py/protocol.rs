//! The Kafka codec seen from Python: the one codec (rust/src/protocol) decodes into and
//! encodes from the message classes of `logbroker.protocol.messages`.
//!
//! Those Python classes are plain data (slots, defaults, spec metadata); every struct class
//! carries `_rs`, its index in `logbroker.protocol.messages.CLASSES`, which is the same
//! order as the generated match arms in `messages.rs` (both generators number the structs
//! with `gen_protocol.struct_ids`). Decoding builds the Rust value, then the Python object
//! (`ToPy`); encoding reads the Python object into the Rust value (`FromPy`), then encodes.
//!
//! Value mapping (the same as the documented Python API):
//!
//! ```text
//! int8..int64, uint16  int          bool     bool (encoding takes any truthy value)
//! float64              float        string   str
//! bytes                bytes        uuid     uuid.UUID
//! records              memoryview slice of the decoded buffer (no copy); encoding takes
//!                      any bytes-like object or a list of them
//! arrays               list         nullable None
//! unknown tagged fields {tag: bytes}
//! ```
//!
//! Errors: a frame that does not decode, or a value that cannot be encoded (wrong type,
//! out of range, absent from the version) is `KafkaProtocolError` whose message starts with
//! the spec field (`TopicProduceData.Name: ...`); `logbroker.protocol` turns it into its
//! `ProtocolError` in one place.
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyList, PyMemoryView, PySlice, PyString, PyTuple, PyType};
use pyo3::{intern, IntoPyObjectExt};

use super::errors::KafkaProtocolError;
use super::log::extract_bytes;
use super::messages;
use crate::protocol::{messages as rs, Bytes, Reader, Records, TaggedFields, Uuid, Writer};

/// The message classes, by `_rs` index (imported once, on first use).
static CLASSES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();
static UUID: PyOnceLock<(Py<PyAny>, Py<PyAny>)> = PyOnceLock::new();
static OBJECT_NEW: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// What conversions need: the classes, `object.__new__`, `uuid.UUID`, and the decoded
/// buffer (records become slices of it).
pub struct Cx<'py> {
    pub py: Python<'py>,
    classes: &'py [Py<PyType>],
    new: &'py Py<PyAny>,
    uuid: &'py (Py<PyAny>, Py<PyAny>),
    input: Option<Input<'py>>,
}

/// The decoded buffer; its byte view is made on the first records field (most messages
/// carry none).
struct Input<'py> {
    buf: Bound<'py, PyAny>,
    view: std::cell::OnceCell<Bound<'py, PyAny>>,
    base: usize,
    len: usize,
}

impl<'py> Cx<'py> {
    fn new(py: Python<'py>) -> PyResult<Self> {
        let classes = CLASSES.get_or_try_init(py, || -> PyResult<Vec<Py<PyType>>> {
            let all = py.import("logbroker.protocol.messages")?.getattr("CLASSES")?;
            let mut out = Vec::new();
            for c in all.try_iter()? {
                out.push(c?.cast_into::<PyType>()?.unbind());
            }
            if out.len() != messages::CLASS_COUNT {
                return Err(PyTypeError::new_err(format!(
                    "logbroker.protocol.messages.CLASSES has {} classes, the Rust codec {}: rebuild the extension",
                    out.len(),
                    messages::CLASS_COUNT
                )));
            }
            Ok(out)
        })?;
        let uuid = UUID.get_or_try_init(py, || -> PyResult<(Py<PyAny>, Py<PyAny>)> {
            let cls = py.import("uuid")?.getattr("UUID")?;
            let zero = cls.call1((py.None(), py.None(), py.None(), py.None(), 0))?;
            Ok((cls.unbind(), zero.unbind()))
        })?;
        let new = OBJECT_NEW
            .get_or_try_init(py, || py.get_type::<pyo3::types::PyAny>().getattr("__new__").map(Bound::unbind))?;
        Ok(Cx { py, classes, new, uuid, input: None })
    }

    /// A bare instance of class `id` (no `__init__`; every slot is set by the caller).
    pub fn instance(&self, id: usize) -> PyResult<Bound<'py, PyAny>> {
        self.new.bind(self.py).call1((self.classes[id].bind(self.py),))
    }

    fn records(&self, b: &Bytes) -> PyResult<Bound<'py, PyAny>> {
        if let Some(inp) = &self.input {
            let start = (b.as_ptr() as usize).wrapping_sub(inp.base);
            if start <= inp.len && b.len() <= inp.len - start {
                let s = PySlice::new(self.py, isize::try_from(start)?, isize::try_from(start + b.len())?, 1);
                let view = if let Some(v) = inp.view.get() {
                    v
                } else {
                    let v = PyMemoryView::from(&inp.buf)?.call_method1(intern!(self.py, "cast"), ("B",))?;
                    inp.view.get_or_init(|| v)
                };
                return view.get_item(s);
            }
        }
        Ok(PyBytes::new(self.py, b).into_any())
    }
}

/// Rust value -> Python value.
pub trait ToPy {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>>;
}

/// Python value -> Rust value.
pub trait FromPy: Sized {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self>;
}

/// Reads attribute `attr` of a struct object as field `label`: a missing attribute or a
/// value of the wrong type or range is a `KafkaProtocolError` naming the field.
pub fn field<T: FromPy>(o: &Bound<'_, PyAny>, attr: &Bound<'_, PyString>, label: &str) -> PyResult<T> {
    let py = o.py();
    let v = o.getattr(attr).map_err(|e| KafkaProtocolError::new_err(format!("{label}: {e}")))?;
    T::from_py(&v).map_err(|e| {
        if e.is_instance_of::<KafkaProtocolError>(py) {
            e
        } else {
            KafkaProtocolError::new_err(format!("{label}: cannot encode {}: {e}", short_repr(&v)))
        }
    })
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map_or_else(|_| String::from("?"), |n| n.to_string())
}

fn short_repr(v: &Bound<'_, PyAny>) -> String {
    let r = v.repr().map_or_else(|_| String::from("?"), |r| r.to_string());
    if r.chars().count() > 60 {
        let cut: String = r.chars().take(57).collect();
        format!("{cut}...")
    } else {
        r
    }
}

macro_rules! int_conv {
    ($($t:ty),*) => {$(
        impl ToPy for $t {
            fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.into_bound_py_any(cx.py)
            }
        }
        impl FromPy for $t {
            fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
                o.extract::<$t>()
            }
        }
    )*};
}
int_conv!(i8, i16, u16, i32, i64);

impl ToPy for f64 {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyFloat::new(cx.py, *self).into_any())
    }
}

impl FromPy for f64 {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        o.extract::<f64>()
    }
}

impl ToPy for bool {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyBool::new(cx.py, *self).to_owned().into_any())
    }
}

impl FromPy for bool {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        o.is_truthy()
    }
}

impl ToPy for String {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyString::new(cx.py, self).into_any())
    }
}

impl FromPy for String {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(o.cast::<PyString>()?.to_str()?.to_owned())
    }
}

impl ToPy for Bytes {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyBytes::new(cx.py, self).into_any())
    }
}

impl FromPy for Bytes {
    /// Any object with the buffer protocol (bytes, bytearray, memoryview, ...).
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(b) = o.cast::<PyBytes>() {
            return Ok(Bytes::copy_from_slice(b.as_bytes()));
        }
        let buf = PyBuffer::<u8>::get(o)
            .map_err(|_| PyTypeError::new_err(format!("a {} is not bytes-like", type_name(o))))?;
        Ok(Bytes::from(buf.to_vec(o.py())?))
    }
}

impl ToPy for Records {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Records::Bytes(b) => cx.records(b),
            Records::File(_) => Err(PyTypeError::new_err("a file region has no Python value")),
        }
    }
}

impl FromPy for Records {
    /// A bytes-like object, or a list/tuple of them (concatenated).
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        if o.is_instance_of::<PyList>() || o.is_instance_of::<PyTuple>() {
            let mut all = Vec::new();
            for part in o.try_iter()? {
                all.extend_from_slice(&Bytes::from_py(&part?)?);
            }
            return Ok(Records::Bytes(Bytes::from(all)));
        }
        if o.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err("a str is not bytes-like"));
        }
        // no copy: the record set is written straight from the caller's buffer
        Ok(Records::Bytes(exported(o)?))
    }
}

impl ToPy for Uuid {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        if *self == [0u8; 16] {
            return Ok(cx.uuid.1.bind(cx.py).clone());
        }
        let py = cx.py;
        cx.uuid.0.bind(py).call1((py.None(), py.None(), py.None(), py.None(), u128::from_be_bytes(*self)))
    }
}

impl FromPy for Uuid {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        let v: u128 = o.getattr(intern!(o.py(), "int"))?.extract()?;
        Ok(v.to_be_bytes())
    }
}

impl<T: ToPy> ToPy for Option<T> {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self {
            Some(v) => v.to_py(cx),
            None => Ok(cx.py.None().into_bound(cx.py)),
        }
    }
}

impl<T: FromPy> FromPy for Option<T> {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        if o.is_none() {
            Ok(None)
        } else {
            T::from_py(o).map(Some)
        }
    }
}

impl<T: ToPy> ToPy for Vec<T> {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        let list = PyList::empty(cx.py);
        for item in self {
            list.append(item.to_py(cx)?)?;
        }
        Ok(list.into_any())
    }
}

impl<T: FromPy> FromPy for Vec<T> {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        if o.is_instance_of::<PyString>() || o.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err("an array must be a list"));
        }
        let mut out = Vec::new();
        for item in o.try_iter()? {
            out.push(T::from_py(&item?)?);
        }
        Ok(out)
    }
}

impl ToPy for TaggedFields {
    fn to_py<'py>(&self, cx: &Cx<'py>) -> PyResult<Bound<'py, PyAny>> {
        let d = PyDict::new(cx.py);
        for (tag, raw) in self {
            d.set_item(tag, PyBytes::new(cx.py, raw))?;
        }
        Ok(d.into_any())
    }
}

impl FromPy for TaggedFields {
    fn from_py(o: &Bound<'_, PyAny>) -> PyResult<Self> {
        let d = o.cast::<PyDict>()?;
        let mut out = TaggedFields::new();
        for (k, v) in d.iter() {
            out.insert(k.extract::<u32>()?, Bytes::from_py(&v)?);
        }
        Ok(out)
    }
}

/// The caller's buffer as `Bytes` without a copy: the buffer export stays held (so a
/// `bytearray` cannot be resized) until the last slice of it is dropped.
struct Exported(PyBuffer<u8>);

#[allow(unsafe_code)] // reads a Python buffer export in place; SAFETY below
impl AsRef<[u8]> for Exported {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the buffer is C-contiguous (checked in `exported`), its memory stays valid
        // and unresized while the export is held, which is as long as `self` lives.
        unsafe { std::slice::from_raw_parts(self.0.buf_ptr().cast::<u8>().cast_const(), self.0.len_bytes()) }
    }
}

fn exported(buf: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    let b = PyBuffer::<u8>::get(buf)
        .map_err(|_| PyTypeError::new_err(format!("a {} is not bytes-like", type_name(buf))))?;
    if !b.is_c_contiguous() {
        return Ok(Bytes::from(extract_bytes(buf)?));
    }
    Ok(Bytes::from_owner(Exported(b)))
}

/// Decodes one instance of class `cls_id` at `buf[pos:]` (version checked by the caller):
/// `(object, end position)`. Records fields are memoryview slices of `buf`.
#[pyfunction]
pub fn protocol_decode<'py>(
    py: Python<'py>,
    cls_id: usize,
    buf: &Bound<'py, PyAny>,
    pos: usize,
    version: i16,
) -> PyResult<(Bound<'py, PyAny>, usize)> {
    let all = exported(buf)?;
    if pos > all.len() {
        return Err(KafkaProtocolError::new_err(format!(
            "position {pos} is past the end of a {}-byte buffer",
            all.len()
        )));
    }
    let mut cx = Cx::new(py)?;
    cx.input =
        Some(Input { buf: buf.clone(), view: std::cell::OnceCell::new(), base: all.as_ptr() as usize, len: all.len() });
    let mut r = Reader::new(all.slice(pos..));
    let obj = messages::decode(&cx, cls_id, &mut r, version)?;
    Ok((obj, pos + r.position()))
}

/// Encodes `obj` (an instance of class `cls_id`) at `version`: the bytes.
#[pyfunction]
pub fn protocol_encode<'py>(
    py: Python<'py>,
    cls_id: usize,
    obj: &Bound<'py, PyAny>,
    version: i16,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut w = Writer::new();
    messages::encode(cls_id, obj, &mut w, version)?;
    into_pybytes(py, &[], w)
}

/// A whole frame: the 4-byte size, then `header` (class `header_id`, at `header_version`),
/// then `body` (class `body_id`, at `version`), as one bytes object.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // the Python function's keyword arguments, one by one (_core.pyi)
pub fn protocol_encode_frame<'py>(
    py: Python<'py>,
    header_id: usize,
    header: &Bound<'py, PyAny>,
    header_version: i16,
    body_id: usize,
    body: &Bound<'py, PyAny>,
    version: i16,
) -> PyResult<Bound<'py, PyBytes>> {
    let mut w = Writer::new();
    messages::encode(header_id, header, &mut w, header_version)?;
    messages::encode(body_id, body, &mut w, version)?;
    let size = i32::try_from(w.len())
        .map_err(|_| KafkaProtocolError::new_err(format!("a frame of {} bytes is too large", w.len())))?;
    into_pybytes(py, &size.to_be_bytes(), w)
}

fn into_pybytes<'py>(py: Python<'py>, prefix: &[u8], w: Writer) -> PyResult<Bound<'py, PyBytes>> {
    let total = prefix.len() + w.len();
    let chunks = w.into_chunks();
    PyBytes::new_with(py, total, |out| {
        out[..prefix.len()].copy_from_slice(prefix);
        let mut at = prefix.len();
        for c in &chunks {
            match c {
                crate::protocol::Chunk::Bytes(b) => {
                    out[at..at + b.len()].copy_from_slice(b);
                    at += b.len();
                }
                crate::protocol::Chunk::File(_) => {
                    return Err(PyTypeError::new_err("a file region cannot be encoded here"))
                }
            }
        }
        Ok(())
    })
}

/// Decodes a message body with the Rust codec and encodes it again at the same version:
/// `(bytes, consumed)`. `api_key` -1 means the request header (`request` true) or the
/// response header. Malformed input raises `KafkaProtocolError` naming field and position.
#[pyfunction]
pub fn protocol_reencode(
    py: Python<'_>,
    api_key: i16,
    version: i16,
    request: bool,
    body: &Bound<'_, PyAny>,
) -> PyResult<(Py<PyBytes>, usize)> {
    let body = Bytes::from(extract_bytes(body)?);
    let (out, used) = py.detach(|| {
        if api_key == -1 {
            rs::reencode_header(version, request, &body)
        } else {
            rs::reencode(api_key, version, request, &body)
        }
    })?;
    Ok((PyBytes::new(py, &out).unbind(), used))
}
