//! `ReplicaFetcherManager`: the follower fetch loops (`crate::server::replica_fetcher`) driven
//! from Python. The control plane says which local replicas follow which leader; the loops
//! run on their own threads without the GIL and report log lines through `take_events`.
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::server::PyReplicaPartition;
use crate::server::replica_fetcher::{FetcherConfig, ReplicaFetcherManager};
use crate::server::sasl_client::{Mechanism, SaslCredentials};
use crate::server::tls_client::client_config;
use pyo3::exceptions::PyValueError;

/// (truststore PEM, keystore chain PEM, key PEM, verify the host name).
type InterBrokerTls = (Vec<u8>, Option<Vec<u8>>, Option<Vec<u8>>, bool);
/// (listener, mechanism, user, password).
type InterBrokerSasl = (String, String, String, String);

#[pyclass(name = "ReplicaFetcherManager", module = "logbroker._core", frozen)]
pub struct PyReplicaFetcherManager(ReplicaFetcherManager);

#[pymethods]
impl PyReplicaFetcherManager {
    /// Kafka's settings: `replica.fetch.wait.max.ms`, `replica.fetch.min.bytes`,
    /// `replica.fetch.response.max.bytes`, `replica.fetch.max.bytes`, `replica.fetch.backoff.ms`,
    /// `replica.socket.timeout.ms`. `tls`: (truststore PEM, keystore chain PEM or None, key
    /// PEM or None, verify the host name) when the inter-broker listener is SSL or SASL_SSL;
    /// `sasl`: (listener, mechanism, user, password) when it is SASL_PLAINTEXT or SASL_SSL.
    #[new]
    #[pyo3(signature = (node_id, max_wait_ms=500, min_bytes=1, response_max_bytes=10_485_760, partition_max_bytes=1_048_576,
                        backoff_ms=1000, socket_timeout_ms=30_000, tls=None, sasl=None))]
    #[allow(clippy::too_many_arguments)] // the Python method's keyword arguments, one by one (_core.pyi)
    fn new(
        node_id: i32,
        max_wait_ms: i32,
        min_bytes: i32,
        response_max_bytes: i32,
        partition_max_bytes: i32,
        backoff_ms: u64,
        socket_timeout_ms: u64,
        tls: Option<InterBrokerTls>,
        sasl: Option<InterBrokerSasl>,
    ) -> PyResult<Self> {
        let tls = match tls {
            None => None,
            Some((trust, chain, key, verify_hostname)) => {
                let identity = chain.as_deref().zip(key.as_deref());
                Some(
                    client_config(&trust, identity, verify_hostname)
                        .map_err(|e| PyValueError::new_err(format!("inter-broker TLS: {e}")))?,
                )
            }
        };
        let sasl = match sasl {
            None => None,
            Some((listener, mechanism, username, password)) => {
                let mechanism = Mechanism::parse(&mechanism)
                    .map_err(|e| PyValueError::new_err(format!("inter-broker SASL on listener {listener}: {e}")))?;
                Some(SaslCredentials { listener, mechanism, username, password })
            }
        };
        Ok(PyReplicaFetcherManager(ReplicaFetcherManager::new(FetcherConfig {
            node_id,
            max_wait_ms,
            min_bytes,
            response_max_bytes,
            partition_max_bytes,
            backoff_ms,
            socket_timeout_ms,
            tls,
            sasl,
        })))
    }

    /// This broker's epoch (from its registration), sent in Fetch's `ReplicaState`.
    fn set_broker_epoch(&self, epoch: i64) {
        self.0.set_broker_epoch(epoch);
    }

    /// Follow `partitions` (`[(replica, topic id (16 bytes), leader epoch)]`) from broker
    /// `source` at `host:port`.
    fn follow(
        &self,
        py: Python<'_>,
        source: i32,
        host: &str,
        port: i32,
        partitions: Vec<(Bound<'_, PyReplicaPartition>, Bound<'_, PyBytes>, i32)>,
    ) -> PyResult<()> {
        let mut reqs = Vec::with_capacity(partitions.len());
        for (part, id, epoch) in partitions {
            let inner = std::sync::Arc::clone(&part.get().0);
            let id: [u8; 16] = id.as_bytes().try_into().map_err(|_| {
                pyo3::exceptions::PyValueError::new_err(format!("topic id of {} is not 16 bytes", inner.name()))
            })?;
            reqs.push((inner, id, epoch));
        }
        py.detach(|| self.0.follow(source, host, port, reqs));
        Ok(())
    }

    /// Stop following `[(topic, partition)]`; on return no fetcher writes to them.
    fn unfollow(&self, py: Python<'_>, keys: Vec<(String, i32)>) {
        py.detach(|| self.0.unfollow(&keys));
    }

    /// `[(level, message)]` reported by the loops since the last call (Python logging levels).
    fn take_events(&self) -> Vec<(i32, String)> {
        self.0.take_events().into_iter().map(|l| (l.level, l.message)).collect()
    }

    /// Stops every loop and waits for its thread.
    fn shutdown(&self, py: Python<'_>) {
        py.detach(|| self.0.shutdown());
    }
}
