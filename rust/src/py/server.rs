//! `NetworkServer`: the Rust network layer (`crate::server`) driven from Python. The broker's
//! request handlers (trio) wait on `notify_fd`, take events in bulk and answer each request
//! with `respond` (chunks: bytes-like objects and `FileRegion`s, or None for no response) or
//! `close`.
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use super::log::{extract_bytes, PyFileRegion};
use crate::protocol::{Bytes, Chunk};
use crate::server::{Event, NetworkServer, ServerConfig};

#[pyclass(name = "NetworkServer", module = "logbroker._core", frozen)]
pub struct PyNetworkServer {
    inner: NetworkServer,
}

/// `(conn, frame, peer, reason, fault)`: a request has a frame; a closed connection a reason.
type PyEvent<'py> = (i64, Option<Bound<'py, PyBytes>>, String, Option<String>, bool);

#[pymethods]
impl PyNetworkServer {
    #[new]
    #[pyo3(signature = (host, port, max_frame, queued_max_request_bytes=-1, idle_ms=-1))]
    fn new(py: Python<'_>, host: &str, port: u16, max_frame: usize, queued_max_request_bytes: i64, idle_ms: i64) -> PyResult<Self> {
        let config = ServerConfig {
            max_frame,
            queued_max_request_bytes,
            idle: u64::try_from(idle_ms).ok().map(std::time::Duration::from_millis),
        };
        let inner = py.detach(|| NetworkServer::start(host, port, config))?;
        Ok(PyNetworkServer { inner })
    }

    /// The bound (host, port).
    #[getter]
    fn address(&self) -> (String, u16) {
        let a = self.inner.address();
        (a.ip().to_string(), a.port())
    }

    /// Readable while events wait; `take_events` empties it.
    #[getter]
    fn notify_fd(&self) -> i32 {
        self.inner.notify_fd()
    }

    /// Every waiting event as `(conn, frame, peer, reason, fault)`: a request carries its frame
    /// (bytes, without the size prefix); a connection the network thread closed carries the
    /// reason and whether it is a fault (False for hang-ups and idling); conn -1 is an error
    /// of the network thread itself.
    fn take_events<'py>(&self, py: Python<'py>) -> Vec<PyEvent<'py>> {
        let events = py.detach(|| self.inner.take_events());
        events
            .into_iter()
            .map(|ev| match ev {
                #[allow(clippy::cast_possible_wrap)]
                Event::Request { conn, frame, peer } => (conn as i64, Some(PyBytes::new(py, &frame)), peer, None, false),
                #[allow(clippy::cast_possible_wrap)]
                Event::Closed { conn, peer, reason, fault } => (conn as i64, None, peer, Some(reason), fault),
                Event::Fatal(msg) => (-1, None, String::new(), Some(msg), true),
            })
            .collect()
    }

    /// Answers the request in flight on `conn`: `chunks` is a list of bytes-like objects and
    /// FileRegions written in order, or None when the request has no response.
    #[pyo3(signature = (conn, chunks))]
    fn respond(&self, conn: u64, chunks: Option<Vec<Bound<'_, PyAny>>>) -> PyResult<()> {
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
        self.inner.respond(conn, chunks);
        Ok(())
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

    /// Counters: connections, requests, pool_used, pool_limit, pool_refusals.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        use std::sync::atomic::Ordering;
        let s = self.inner.shared();
        let d = PyDict::new(py);
        d.set_item("connections", s.stats.connections.load(Ordering::Relaxed))?;
        d.set_item("requests", s.stats.requests.load(Ordering::Relaxed))?;
        d.set_item("pool_used", s.pool.used())?;
        d.set_item("pool_limit", s.pool.limit())?;
        d.set_item("pool_refusals", s.pool.refusals())?;
        Ok(d)
    }
}
