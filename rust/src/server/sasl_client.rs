//! SASL from this broker to another (the follower fetch loops, `replica_fetcher.rs`), when the
//! inter-broker listener is SASL_PLAINTEXT or SASL_SSL. Kafka's exchange, right after
//! ApiVersions on a fresh connection (after the TLS handshake on SASL_SSL):
//!
//! ```text
//!     SaslHandshake v1 (mechanism)    -> error: the listener does not enable it (the answer
//!                                        lists what it enables)
//!     SaslAuthenticate v2 (token)     -> PLAIN: one round, `\0user\0password`
//!                                        SCRAM-SHA-256/512 (RFC 5802, RFC 7677): two rounds
//!         client-first   n,,n=<user, ',' '=' escaped>,r=<client nonce>
//!         server-first   r=<client nonce + server nonce>,s=<salt, base64>,i=<iterations>
//!         client-final   c=biws,r=<nonce>,p=<ClientProof, base64>
//!         server-final   v=<ServerSignature, base64> (checked: the broker knows the credential)
//!     session_lifetime_ms > 0          -> the loop reconnects (and authenticates again) at
//!                                        85-95% of it (KIP-368)
//! ```
//!
//! The mechanism, user and password are the broker's (Kafka's
//! `sasl.mechanism.inter.broker.protocol` and the username/password of
//! `listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config`, read by the control
//! plane). HMAC, SHA-2, PBKDF2 and the random nonce come from `ring` (rustls' provider).
//! The password never goes into an error message.

use std::fmt;
use std::num::NonZeroU32;

use ring::rand::{SecureRandom, SystemRandom};
use ring::{digest, hmac, pbkdf2};

/// Kafka's lower bound on SCRAM iterations (a server asking fewer is refused).
const MIN_ITERATIONS: u32 = 4096;

/// A mechanism this client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl Mechanism {
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "PLAIN" => Ok(Mechanism::Plain),
            "SCRAM-SHA-256" => Ok(Mechanism::ScramSha256),
            "SCRAM-SHA-512" => Ok(Mechanism::ScramSha512),
            other => Err(format!("SASL mechanism {other:?} is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::ScramSha256 => "SCRAM-SHA-256",
            Mechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    fn algorithms(self) -> (hmac::Algorithm, &'static digest::Algorithm, pbkdf2::Algorithm) {
        match self {
            Mechanism::ScramSha512 => (hmac::HMAC_SHA512, &digest::SHA512, pbkdf2::PBKDF2_HMAC_SHA512),
            _ => (hmac::HMAC_SHA256, &digest::SHA256, pbkdf2::PBKDF2_HMAC_SHA256),
        }
    }
}

/// Who this broker is to the others: the listener dialled (for messages), mechanism, user, password.
#[derive(Clone)]
pub struct SaslCredentials {
    pub listener: String,
    pub mechanism: Mechanism,
    pub username: String,
    pub password: String,
}

impl fmt::Debug for SaslCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SaslCredentials({} on {}, user {:?}, password [hidden])",
            self.mechanism.name(),
            self.listener,
            self.username
        )
    }
}

/// What a SaslAuthenticate answered: (error code, error message, auth bytes, session lifetime ms).
pub type AuthenticateAnswer = (i16, Option<String>, Vec<u8>, i64);

/// Runs the exchange over `handshake` (SaslHandshake: mechanism -> (error code, enabled
/// mechanisms)) and `authenticate` (SaslAuthenticate: token -> answer); returns the session
/// lifetime in ms (0: none). The error says what the other broker answered.
pub fn authenticate(
    creds: &SaslCredentials,
    mut handshake: impl FnMut(&str) -> Result<(i16, Vec<String>), String>,
    mut authenticate: impl FnMut(Vec<u8>) -> Result<AuthenticateAnswer, String>,
) -> Result<i64, String> {
    let mechanism = creds.mechanism.name();
    let (error, enabled) = handshake(mechanism)?;
    if error != 0 {
        return Err(format!("SaslHandshake answered error {error}: the listener enables {}", enabled.join(", ")));
    }
    let check = |(error, message, bytes, lifetime): AuthenticateAnswer| -> Result<(Vec<u8>, i64), String> {
        if error == 0 {
            Ok((bytes, lifetime))
        } else {
            Err(format!("SaslAuthenticate answered error {error}: {}", message.as_deref().unwrap_or("no message")))
        }
    };
    if creds.mechanism == Mechanism::Plain {
        let (_, lifetime) = check(authenticate(plain_token(&creds.username, &creds.password)?)?)?;
        return Ok(lifetime.max(0));
    }
    let mut scram = ScramClient::new(creds.mechanism, &creds.username, &creds.password)?;
    let (server_first, _) = check(authenticate(scram.client_first())?)?;
    let client_final = scram.client_final(&server_first)?;
    let (server_final, lifetime) = check(authenticate(client_final)?)?;
    scram.verify_server_final(&server_final)?;
    Ok(lifetime.max(0))
}

/// PLAIN (RFC 4616): `\0user\0password`.
pub fn plain_token(username: &str, password: &str) -> Result<Vec<u8>, String> {
    if username.contains('\0') || password.contains('\0') {
        return Err("a PLAIN user name or password cannot hold a NUL character".to_owned());
    }
    Ok([b"\0", username.as_bytes(), b"\0", password.as_bytes()].concat())
}

/// The client side of one SCRAM exchange: `client_first`, `client_final(server-first)`,
/// `verify_server_final(server-final)`.
pub struct ScramClient {
    mechanism: Mechanism,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// (SaltedPassword, AuthMessage), once the server-first message is answered.
    proof_inputs: Option<(Vec<u8>, Vec<u8>)>,
}

impl ScramClient {
    /// With a random nonce (32 bytes, base64, as Kafka's client).
    pub fn new(mechanism: Mechanism, username: &str, password: &str) -> Result<Self, String> {
        let mut raw = [0u8; 32];
        SystemRandom::new().fill(&mut raw).map_err(|_| "no randomness for the SCRAM nonce".to_owned())?;
        Ok(Self::with_nonce(mechanism, username, password, &base64_encode(&raw)))
    }

    pub fn with_nonce(mechanism: Mechanism, username: &str, password: &str, nonce: &str) -> Self {
        let escaped = username.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            password: password.to_owned(),
            nonce: nonce.to_owned(),
            client_first_bare: format!("n={escaped},r={nonce}"),
            proof_inputs: None,
        }
    }

    pub fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    pub fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, String> {
        let text =
            std::str::from_utf8(server_first).map_err(|_| "the SCRAM server-first message is not UTF-8".to_owned())?;
        let (mut nonce, mut salt, mut iterations) = (None, None, None);
        for attr in text.split(',') {
            match attr.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(v),
                Some(("i", v)) => iterations = Some(v),
                Some(("e", v)) => return Err(format!("the server refused: {v}")),
                Some(("m", _)) => {
                    return Err("the server asks for a SCRAM extension (m=) this client does not know".to_owned())
                }
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err("the SCRAM server-first message lacks r=, s= or i=".to_owned());
        };
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return Err("invalid server nonce: it does not extend the client nonce".to_owned());
        }
        let salt = base64_decode(salt).ok_or("the SCRAM server-first message has a salt that is not base64")?;
        let iterations: u32 =
            iterations.parse().map_err(|_| format!("the SCRAM iteration count {iterations:?} is not a number"))?;
        if iterations < MIN_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} SCRAM iterations, fewer than the minimum {MIN_ITERATIONS}"
            ));
        }
        let (mac, hash, kdf) = self.mechanism.algorithms();
        let mut salted = vec![0u8; hash.output_len()];
        pbkdf2::derive(
            kdf,
            NonZeroU32::new(iterations).unwrap_or(NonZeroU32::MIN),
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        self.password.clear();
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{text},{without_proof}", self.client_first_bare).into_bytes();
        let client_key = sign(mac, &salted, b"Client Key");
        let stored_key = digest::digest(hash, &client_key);
        let signature = sign(mac, stored_key.as_ref(), &auth_message);
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        self.proof_inputs = Some((salted, auth_message));
        Ok(format!("{without_proof},p={}", base64_encode(&proof)).into_bytes())
    }

    pub fn verify_server_final(&self, server_final: &[u8]) -> Result<(), String> {
        let (salted, auth_message) = self.proof_inputs.as_ref().ok_or("SCRAM server-final before server-first")?;
        let text =
            std::str::from_utf8(server_final).map_err(|_| "the SCRAM server-final message is not UTF-8".to_owned())?;
        if let Some(e) = text.strip_prefix("e=") {
            return Err(format!("the server refused: {e}"));
        }
        let v = text.split(',').find_map(|a| a.strip_prefix("v=")).ok_or("the SCRAM server-final message has no v=")?;
        let got = base64_decode(v).ok_or("the SCRAM server signature is not base64")?;
        let (mac, _, _) = self.mechanism.algorithms();
        let expected = sign(mac, &sign(mac, salted, b"Server Key"), auth_message);
        if !equal_in_constant_time(&got, &expected) {
            return Err(
                "the server's SCRAM signature does not match: it does not know this user's credential".to_owned()
            );
        }
        Ok(())
    }
}

fn sign(algorithm: hmac::Algorithm, key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(algorithm, key), data).as_ref().to_vec()
}

fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648).
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The inverse of `base64_encode`; None when `text` is not standard padded base64.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for (q, chunk) in bytes.chunks(4).enumerate() {
        let last = q + 1 == bytes.len() / 4;
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && !last) {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            let v = u32::try_from(ALPHABET.iter().position(|&a| a == c)?).ok()?;
            n = n << 6 | v;
        }
        n <<= 6 * u32::try_from(pad).ok()?;
        let decoded = n.to_be_bytes();
        out.extend_from_slice(&decoded[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7677_scram_sha_256_vector() {
        let mut c = ScramClient::with_nonce(Mechanism::ScramSha256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO");
        assert_eq!(c.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let client_final = c.client_final(server_first).unwrap();
        assert_eq!(
            String::from_utf8(client_final).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        c.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap();
        let wrong = c.verify_server_final(b"v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=").unwrap_err();
        assert!(wrong.contains("does not match"), "{wrong}");
    }

    #[test]
    fn scram_refuses_bad_server_messages() {
        let mut c = ScramClient::with_nonce(Mechanism::ScramSha512, "a,b=c", "pw", "abc");
        assert_eq!(c.client_first(), b"n,,n=a=2Cb=3Dc,r=abc");
        assert!(c.client_final(b"r=xyz,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(c.client_final(b"r=abc,s=AAAA,i=4096").unwrap_err().contains("nonce"));
        assert!(c.client_final(b"r=abcd,s=AAAA,i=10").unwrap_err().contains("fewer than"));
        assert!(c.client_final(b"r=abcd,s=!!,i=4096").unwrap_err().contains("base64"));
        assert!(c.client_final(b"e=unknown-user").unwrap_err().contains("refused"));
        assert!(c.client_final(b"r=abcd,s=AAAA,i=4096").is_ok());
        assert!(c.verify_server_final(b"e=invalid-proof").unwrap_err().contains("refused"));
    }

    #[test]
    fn plain_and_base64() {
        assert_eq!(plain_token("broker", "secret").unwrap(), b"\0broker\0secret");
        assert!(plain_token("a\0b", "x").is_err());
        for data in [&b""[..], b"f", b"fo", b"foo", b"foob", b"fooba", b"foobar", &[0xff, 0x00, 0xfe]] {
            let text = base64_encode(data);
            assert_eq!(base64_decode(&text).as_deref(), Some(data), "{text}");
        }
        assert_eq!(base64_encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_decode("Zm8"), None);
        assert_eq!(base64_decode("Z=8="), None);
        assert_eq!(base64_decode("Zm8=Zm8="), None);
    }

    #[test]
    fn exchange_reports_what_the_broker_answered() {
        let creds = SaslCredentials {
            listener: "INTERNAL".into(),
            mechanism: Mechanism::Plain,
            username: "broker".into(),
            password: "pw".into(),
        };
        assert!(!format!("{creds:?}").contains("pw\""));
        let lifetime = authenticate(
            &creds,
            |m| Ok((0, vec![m.to_owned()])),
            |t| {
                assert_eq!(t, b"\0broker\0pw");
                Ok((0, None, Vec::new(), 60_000))
            },
        );
        assert_eq!(lifetime, Ok(60_000));
        let refused = authenticate(&creds, |_| Ok((33, vec!["SCRAM-SHA-512".into()])), |_| unreachable!()).unwrap_err();
        assert!(refused.contains("enables SCRAM-SHA-512"), "{refused}");
        let wrong = authenticate(
            &creds,
            |_| Ok((0, vec![])),
            |_| Ok((58, Some("Authentication failed".into()), Vec::new(), 0)),
        )
        .unwrap_err();
        assert!(wrong.contains("error 58: Authentication failed"), "{wrong}");
    }
}
