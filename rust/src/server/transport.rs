//! A connection's byte stream: plain TCP, or TLS (rustls) over TCP for an SSL listener.
//!
//! Both are non-blocking and used the same way by `Connection`: `read` gives request bytes,
//! `write` takes response bytes, `send_region` sends part of a segment file, and `flush`
//! pushes out what TLS still holds (handshake messages, encrypted records): the connection is
//! done writing only when `flush` says so. Plain TCP sends segment files with sendfile(2);
//! TLS must encrypt, so it reads them (pread, 64 KiB at a time) into rustls instead.
//!
//! TLS settings come as PEM, Kafka's `ssl.keystore.type=PEM` (`tls_config`): the broker's
//! certificate chain and private key, and for client authentication (`ssl.client.auth`
//! `requested` or `required`) the certificates of the authorities that sign client
//! certificates. A handshake failure or bytes that are not TLS (a plaintext client on an SSL
//! port) close the connection with the reason rustls gives.

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, ServerConnection};

use crate::file_region::FileRegion;

/// Plaintext bytes of a segment file read per step when it is sent over TLS.
const TLS_FILE_CHUNK: usize = 64 * 1024;

/// `ssl.client.auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    None,
    Requested,
    Required,
}

/// A keystore from PEM: the certificate chain (this node's first) and the private key
/// (PKCS#8, PKCS#1 or SEC1, not encrypted). Errors name what is wrong. Shared with the
/// client side (`tls_client.rs`).
pub fn keystore(chain: &[u8], key: &[u8]) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the keystore's certificate chain is not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("the keystore holds no certificate (-----BEGIN CERTIFICATE-----)".to_owned());
    }
    if key.windows(b"ENCRYPTED PRIVATE KEY".len()).any(|w| w == b"ENCRYPTED PRIVATE KEY") {
        return Err("the keystore's private key is encrypted; give it unencrypted (e.g. openssl pkey -in key.pem -out plain.pem)".to_owned());
    }
    let key =
        PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("the keystore holds no usable private key: {e}"))?;
    Ok((certs, key))
}

/// A truststore from PEM: the authorities' certificates (at least one).
pub fn truststore(trust: &[u8]) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(trust) {
        let cert = cert.map_err(|e| format!("the truststore is not PEM certificates: {e}"))?;
        roots.add(cert).map_err(|e| format!("a truststore certificate is not usable: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the truststore holds no certificate (-----BEGIN CERTIFICATE-----)".to_owned());
    }
    Ok(roots)
}

/// The TLS server configuration of a listener, from PEM: `chain` (the broker's certificate
/// first), `key` (PKCS#8, PKCS#1 or SEC1, not encrypted), `trust` (client CAs; needed unless
/// `auth` is None). Errors name what is wrong.
pub fn tls_config(
    chain: &[u8],
    key: &[u8],
    trust: Option<&[u8]>,
    auth: ClientAuth,
) -> Result<Arc<ServerConfig>, String> {
    let (certs, key) = keystore(chain, key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS protocol versions: {e}"))?;
    let builder = if auth == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let trust = trust.ok_or("ssl.client.auth needs a truststore (the CAs of client certificates)")?;
        let roots = truststore(trust)?;
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let verifier = if auth == ClientAuth::Requested { verifier.allow_unauthenticated() } else { verifier };
        builder.with_client_cert_verifier(verifier.build().map_err(|e| format!("client certificate verifier: {e}"))?)
    };
    let config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("the keystore's certificate and key do not go together: {e}"))?;
    Ok(Arc::new(config))
}

pub struct TlsStream {
    tls: ServerConnection,
    sock: TcpStream,
    file_buf: Vec<u8>,
}

pub enum Transport {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Transport {
    /// A new connection's transport: TLS when the listener has a TLS configuration.
    pub fn new(sock: TcpStream, tls: Option<&Arc<ServerConfig>>) -> io::Result<Transport> {
        Ok(match tls {
            None => Transport::Plain(sock),
            Some(config) => {
                let tls =
                    ServerConnection::new(Arc::clone(config)).map_err(|e| io::Error::other(format!("TLS: {e}")))?;
                Transport::Tls(Box::new(TlsStream { tls, sock, file_buf: Vec::new() }))
            }
        })
    }

    pub fn socket(&mut self) -> &mut TcpStream {
        match self {
            Transport::Plain(s) => s,
            Transport::Tls(t) => &mut t.sock,
        }
    }

    /// Request bytes into `buf`: the count, 0 at the end of the stream, or WouldBlock.
    pub fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.read(buf),
            Transport::Tls(t) => tls_read(&mut t.tls, &mut t.sock, buf),
        }
    }

    /// Takes response bytes: how many, or WouldBlock when none could be taken.
    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Plain(s) => s.write(buf),
            Transport::Tls(t) => tls_write(&mut t.tls, &mut t.sock, buf),
        }
    }

    /// Sends up to `count` bytes of `region` from `offset`: how many, or WouldBlock.
    pub fn send_region(&mut self, region: &FileRegion, offset: u64, count: u64) -> io::Result<u64> {
        match self {
            Transport::Plain(s) => region.send(s.as_raw_fd(), offset, count),
            Transport::Tls(t) => {
                let want = usize::try_from(count).unwrap_or(usize::MAX).min(TLS_FILE_CHUNK);
                if t.file_buf.len() < want {
                    t.file_buf.resize(TLS_FILE_CHUNK, 0); // once per connection: later sends reuse it
                }
                let got = region.read_at(offset, &mut t.file_buf[..want])?;
                if got == 0 && want > 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "segment file shorter than the region (truncated?)",
                    ));
                }
                tls_write(&mut t.tls, &mut t.sock, &t.file_buf[..got]).map(|n| n as u64)
            }
        }
    }

    /// The client's certificate (DER), when TLS and it presented one.
    pub fn peer_certificate(&self) -> Option<&[u8]> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(t) => t.tls.peer_certificates().and_then(|c| c.first()).map(AsRef::as_ref),
        }
    }

    /// Writes out what TLS holds; true when nothing is left (always, for plain TCP).
    pub fn flush(&mut self) -> io::Result<bool> {
        match self {
            Transport::Plain(_) => Ok(true),
            Transport::Tls(t) => tls_flush(&mut t.tls, &mut t.sock),
        }
    }
}

fn tls_read(tls: &mut ServerConnection, sock: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match tls.reader().read(buf) {
            Ok(n) => return Ok(n), // 0: the client sent close_notify
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
        if tls.read_tls(sock)? == 0 {
            return Ok(0);
        }
        if let Err(e) = tls.process_new_packets() {
            let _ = tls.write_tls(sock); // the alert, if it fits
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("TLS: {e}")));
        }
        tls_flush(tls, sock)?; // handshake messages
    }
}

fn tls_write(tls: &mut ServerConnection, sock: &mut TcpStream, buf: &[u8]) -> io::Result<usize> {
    if !tls_flush(tls, sock)? {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    let n = tls.writer().write(buf)?;
    tls_flush(tls, sock)?;
    if n == 0 && !buf.is_empty() {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    Ok(n)
}

/// Writes out the TLS records rustls holds; true when none are left.
fn tls_flush(tls: &mut ServerConnection, sock: &mut TcpStream) -> io::Result<bool> {
    while tls.wants_write() {
        match tls.write_tls(sock) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
