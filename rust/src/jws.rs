//! JWS signature verification (RFC 7515, algorithms of RFC 7518 and RFC 8037) for the
//! broker's SASL/OAUTHBEARER validator (python/logbroker/common/oauthbearer.py), with ring.
//!
//! The caller parses the token and the JWKS; this module checks one signature:
//!
//! | alg             | key (`a`, `b`)                          | ring algorithm                   |
//! |-----------------|-----------------------------------------|----------------------------------|
//! | RS256/384/512   | RSA modulus `n`, exponent `e` (big-endian) | RSA PKCS#1 v1.5, 2048-8192 bits |
//! | PS256/384/512   | RSA `n`, `e`                            | RSA-PSS, 2048-8192 bits          |
//! | ES256, ES384    | EC point `x`, `y` (P-256, P-384)        | ECDSA, fixed-length r‖s          |
//! | EdDSA           | Ed25519 public key `x`; `b` empty        | Ed25519                          |
//!
//! `signing_input` is `BASE64URL(header) '.' BASE64URL(payload)` as sent; `signature` is the
//! decoded third part. A wrong signature, a key of the wrong size or a malformed point is
//! `Ok(false)`; an algorithm not in the table (including "none") is `Err`.

use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

/// The algorithms `verify` knows.
pub const ALGORITHMS: &[&str] = &["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];

/// Whether `signature` is `alg`'s signature of `signing_input` by the key (`a`, `b`).
pub fn verify(alg: &str, a: &[u8], b: &[u8], signing_input: &[u8], signature: &[u8]) -> Result<bool, String> {
    let rsa: Option<&'static signature::RsaParameters> = match alg {
        "RS256" => Some(&signature::RSA_PKCS1_2048_8192_SHA256),
        "RS384" => Some(&signature::RSA_PKCS1_2048_8192_SHA384),
        "RS512" => Some(&signature::RSA_PKCS1_2048_8192_SHA512),
        "PS256" => Some(&signature::RSA_PSS_2048_8192_SHA256),
        "PS384" => Some(&signature::RSA_PSS_2048_8192_SHA384),
        "PS512" => Some(&signature::RSA_PSS_2048_8192_SHA512),
        _ => None,
    };
    if let Some(params) = rsa {
        let key = RsaPublicKeyComponents { n: a, e: b };
        return Ok(key.verify(params, signing_input, signature).is_ok());
    }
    let (ec, len): (&'static signature::EcdsaVerificationAlgorithm, usize) = match alg {
        "ES256" => (&signature::ECDSA_P256_SHA256_FIXED, 32),
        "ES384" => (&signature::ECDSA_P384_SHA384_FIXED, 48),
        "EdDSA" => {
            return Ok(UnparsedPublicKey::new(&signature::ED25519, a).verify(signing_input, signature).is_ok());
        }
        _ => return Err(format!("JWS algorithm {alg:?} is not accepted (accepted: {})", ALGORITHMS.join(", "))),
    };
    if a.len() != len || b.len() != len {
        return Ok(false);
    }
    let mut point = Vec::with_capacity(1 + 2 * len);
    point.push(4); // uncompressed: 0x04 || x || y
    point.extend_from_slice(a);
    point.extend_from_slice(b);
    Ok(UnparsedPublicKey::new(ec, &point).verify(signing_input, signature).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair};

    #[test]
    fn es256_and_eddsa_round_trip_and_refuse_a_changed_input() {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let public = pair.public_key().as_ref();
        let (x, y) = (&public[1..33], &public[33..65]);
        let sig = pair.sign(&rng, b"head.body").unwrap();
        assert_eq!(verify("ES256", x, y, b"head.body", sig.as_ref()), Ok(true));
        assert_eq!(verify("ES256", x, y, b"head.bodY", sig.as_ref()), Ok(false));
        assert_eq!(verify("ES384", x, y, b"head.body", sig.as_ref()), Ok(false)); // wrong key size
        assert_eq!(verify("ES256", &x[1..], y, b"head.body", sig.as_ref()), Ok(false));

        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let ed = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let sig = ed.sign(b"a.b");
        assert_eq!(verify("EdDSA", ed.public_key().as_ref(), b"", b"a.b", sig.as_ref()), Ok(true));
        assert_eq!(verify("EdDSA", ed.public_key().as_ref(), b"", b"a.c", sig.as_ref()), Ok(false));
    }

    #[test]
    fn none_and_unknown_algorithms_are_errors() {
        assert!(verify("none", b"", b"", b"a.b", b"").unwrap_err().contains("\"none\" is not accepted"));
        assert!(verify("HS256", b"k", b"", b"a.b", b"x").is_err());
    }

    #[test]
    fn a_garbage_rsa_key_is_false_not_a_panic() {
        assert_eq!(verify("RS256", &[1, 2, 3], &[1, 0, 1], b"a.b", &[0; 256]), Ok(false));
        assert_eq!(verify("PS256", &[], &[], b"a.b", &[]), Ok(false));
    }
}
