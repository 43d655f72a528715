//! TLS from this broker to another (the follower fetch loops, `replica_fetcher.rs`), when the
//! inter-broker listener's security protocol is SSL.
//!
//! The settings are the broker's own, as Kafka uses them for inter-broker connections: the
//! truststore (`ssl.truststore.*`, PEM) holds the authorities the other brokers' certificates
//! must chain to; the keystore (`ssl.keystore.*`) is presented as this broker's client
//! certificate, so a listener with `ssl.client.auth=required` admits it and names it
//! `User:<its subject>`; `ssl.endpoint.identification.algorithm=https` (Kafka's default)
//! also checks that the certificate names the host dialled, '' checks the chain only.
//!
//! `PeerStream` is a blocking stream, plain or TLS, with the timeouts and shutdown of the
//! socket under it.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::transport::{keystore, truststore};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme, StreamOwned};

/// The client TLS settings for connections to other brokers. `trust`: PEM certificates of
/// the authorities; `identity`: this broker's (chain, key) PEM; `verify_hostname`: Kafka's
/// `ssl.endpoint.identification.algorithm=https`.
pub fn client_config(
    trust: &[u8],
    identity: Option<(&[u8], &[u8])>,
    verify_hostname: bool,
) -> Result<Arc<ClientConfig>, String> {
    let roots = truststore(trust)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
        .build()
        .map_err(|e| format!("server certificate verifier: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let builder = if verify_hostname {
        builder.with_webpki_verifier(webpki)
    } else {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(ChainOnly(webpki)))
    };
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => {
            let (certs, key) = keystore(chain, key)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("the keystore's certificate and key do not go together: {e}"))?
        }
    };
    Ok(Arc::new(config))
}

/// `ssl.endpoint.identification.algorithm=` (empty): the chain must verify, the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// A blocking connection to another broker.
pub enum PeerStream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl PeerStream {
    /// Wraps a connected socket; with `tls`, the handshake happens on the first read or write
    /// (its failure is that call's error). `host` is the name the certificate must carry.
    pub fn new(sock: TcpStream, tls: Option<&Arc<ClientConfig>>, host: &str) -> Result<PeerStream, String> {
        let Some(config) = tls else { return Ok(PeerStream::Plain(sock)) };
        let name =
            ServerName::try_from(host.to_owned()).map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
        let conn = ClientConnection::new(Arc::clone(config), name).map_err(|e| format!("TLS: {e}"))?;
        Ok(PeerStream::Tls(Box::new(StreamOwned::new(conn, sock))))
    }

    pub fn socket(&self) -> &TcpStream {
        match self {
            PeerStream::Plain(s) => s,
            PeerStream::Tls(t) => &t.sock,
        }
    }

    pub fn set_read_timeout(&self, d: Option<Duration>) -> io::Result<()> {
        self.socket().set_read_timeout(d)
    }

    pub fn shutdown(&self) {
        let _ = self.socket().shutdown(Shutdown::Both);
    }
}

impl Read for PeerStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            PeerStream::Plain(s) => s.read(buf),
            PeerStream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for PeerStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            PeerStream::Plain(s) => s.write(buf),
            PeerStream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            PeerStream::Plain(s) => s.flush(),
            PeerStream::Tls(t) => t.flush(),
        }
    }
}
