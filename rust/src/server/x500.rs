//! The subject of an X.509 certificate as Kafka names an SSL principal: `User:` followed by
//! the distinguished name as Java's `X500Principal.getName()` writes it (RFC 2253), which is
//! what Kafka's `DefaultKafkaPrincipalBuilder` gives with `ssl.principal.mapping.rules=DEFAULT`.
//!
//! # The DER read here (RFC 5280)
//! ```text
//! Certificate  ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signature }
//! TBSCertificate ::= SEQUENCE { [0] version OPTIONAL, serialNumber INTEGER, signature SEQUENCE,
//!                               issuer Name, validity SEQUENCE, subject Name, ... }
//! Name ::= SEQUENCE OF RelativeDistinguishedName         (most general first: C, O, OU, CN)
//! RelativeDistinguishedName ::= SET OF SEQUENCE { type OBJECT IDENTIFIER, value ANY }
//! ```
//! # The string written
//! RDNs in reverse order (most specific first), separated by `,`; the attributes of one
//! multi-valued RDN joined by `+`. Keywords as Java's RFC 2253 form: CN, C, L, ST, O, OU,
//! STREET, DC, UID; any other type as its dotted OID with the value as `#` and the hex of
//! its DER. String values (UTF8String, PrintableString, IA5String, TeletexString,
//! BMPString, UniversalString) are escaped as RFC 2253 says: `,+"\<>;` with a backslash, a
//! leading `#` or space and a trailing space too.

/// A DER element: (tag, contents, the whole element, the rest after it).
use std::fmt::Write as _;

type Element<'a> = (u8, &'a [u8], &'a [u8], &'a [u8]);

fn element(input: &[u8]) -> Result<Element<'_>, String> {
    let (&tag, rest) = input.split_first().ok_or("truncated DER: no tag")?;
    let (&first, mut rest) = rest.split_first().ok_or("truncated DER: no length")?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err(format!("DER length of {n} bytes is not supported"));
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes.iter().fold(0usize, |acc, &b| (acc << 8) | usize::from(b))
    };
    if rest.len() < len {
        return Err(format!("truncated DER: element of {len} bytes, {} left", rest.len()));
    }
    let header = input.len() - rest.len();
    let (contents, after) = rest.split_at(len);
    Ok((tag, contents, &input[..header + len], after))
}

fn expect<'a>(input: &'a [u8], tag: u8, what: &str) -> Result<(&'a [u8], &'a [u8]), String> {
    let (got, contents, _, rest) = element(input)?;
    if got != tag {
        return Err(format!("{what}: DER tag 0x{got:02x}, expected 0x{tag:02x}"));
    }
    Ok((contents, rest))
}

/// The certificate's subject distinguished name in RFC 2253 form.
pub fn subject_name(der: &[u8]) -> Result<String, String> {
    const SEQUENCE: u8 = 0x30;
    let (cert, _) = expect(der, SEQUENCE, "certificate")?;
    let (mut tbs, _) = expect(cert, SEQUENCE, "tbsCertificate")?;
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs)?.3; // [0] version
    }
    for what in ["serialNumber", "signature", "issuer", "validity"] {
        tbs = element(tbs).map_err(|e| format!("{what}: {e}"))?.3;
    }
    let (mut name, _) = expect(tbs, SEQUENCE, "subject")?;
    let mut rdns = Vec::new();
    while !name.is_empty() {
        let (set, rest) = expect(name, 0x31, "subject RDN")?;
        name = rest;
        let mut attrs = Vec::new();
        let mut set = set;
        while !set.is_empty() {
            let (atv, rest) = expect(set, SEQUENCE, "subject attribute")?;
            set = rest;
            let (oid, value) = expect(atv, 0x06, "attribute type")?;
            let (tag, contents, whole, _) = element(value)?;
            attrs.push(attribute(oid, tag, contents, whole));
        }
        rdns.push(attrs.join("+"));
    }
    rdns.reverse();
    Ok(rdns.join(","))
}

fn attribute(oid: &[u8], tag: u8, contents: &[u8], whole: &[u8]) -> String {
    let keyword = match oid {
        [0x55, 0x04, 0x03] => Some("CN"),
        [0x55, 0x04, 0x06] => Some("C"),
        [0x55, 0x04, 0x07] => Some("L"),
        [0x55, 0x04, 0x08] => Some("ST"),
        [0x55, 0x04, 0x09] => Some("STREET"),
        [0x55, 0x04, 0x0a] => Some("O"),
        [0x55, 0x04, 0x0b] => Some("OU"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x19] => Some("DC"),
        [0x09, 0x92, 0x26, 0x89, 0x93, 0xf2, 0x2c, 0x64, 0x01, 0x01] => Some("UID"),
        _ => None,
    };
    let text = match tag {
        0x0c | 0x13 | 0x16 | 0x14 => Some(String::from_utf8_lossy(contents).into_owned()),
        0x1e => Some(String::from_utf16_lossy(
            &contents.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])).collect::<Vec<_>>(),
        )),
        0x1c => Some(
            contents
                .chunks(4)
                .filter_map(|c| c.try_into().ok().map(u32::from_be_bytes))
                .filter_map(char::from_u32)
                .collect(),
        ),
        _ => None,
    };
    match (keyword, text) {
        (Some(k), Some(v)) => format!("{k}={}", escape(&v)),
        (k, _) => {
            let hex = whole.iter().fold(String::with_capacity(whole.len() * 2), |mut out, b| {
                let _ = write!(out, "{b:02x}");
                out
            });
            format!("{}=#{hex}", k.map_or_else(|| dotted(oid), str::to_owned))
        }
    }
}

fn dotted(oid: &[u8]) -> String {
    let mut parts: Vec<u64> = Vec::new();
    let mut acc = 0u64;
    for &b in oid {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if parts.is_empty() {
                let first = acc.min(80) / 40;
                parts.extend([first, acc - first * 40]);
            } else {
                parts.push(acc);
            }
            acc = 0;
        }
    }
    parts.iter().map(u64::to_string).collect::<Vec<_>>().join(".")
}

fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    let last = v.chars().count().saturating_sub(1);
    for (i, c) in v.chars().enumerate() {
        if matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && matches!(c, '#' | ' '))
            || (i == last && c == ' ')
        {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        if contents.len() < 0x80 {
            out.push(u8::try_from(contents.len()).unwrap());
        } else {
            out.push(0x82);
            out.extend_from_slice(&u16::try_from(contents.len()).unwrap().to_be_bytes());
        }
        out.extend_from_slice(contents);
        out
    }

    fn rdn(attrs: &[(&[u8], u8, &str)]) -> Vec<u8> {
        let mut set = Vec::new();
        for (oid, tag, value) in attrs {
            let mut atv = tlv(0x06, oid);
            atv.extend(tlv(*tag, value.as_bytes()));
            set.extend(tlv(0x30, &atv));
        }
        tlv(0x31, &set)
    }

    fn cert(subject: &[u8]) -> Vec<u8> {
        let mut tbs = tlv(0xa0, &tlv(0x02, &[2]));
        tbs.extend(tlv(0x02, &[1, 2, 3]));
        tbs.extend(tlv(0x30, &[]));
        tbs.extend(tlv(0x30, &rdn(&[(&[0x55, 4, 3], 0x0c, "Issuing CA")])));
        tbs.extend(tlv(0x30, &[]));
        tbs.extend(tlv(0x30, subject));
        tbs.extend(tlv(0x30, &[0u8; 200])); // a long key: exercises the 2-byte length
        let mut body = tlv(0x30, &tbs);
        body.extend(tlv(0x30, &[]));
        body.extend(tlv(0x03, &[0]));
        tlv(0x30, &body)
    }

    #[test]
    fn reverses_rdns_and_names_keywords() {
        let mut subject = rdn(&[(&[0x55, 4, 6], 0x13, "US")]);
        subject.extend(rdn(&[(&[0x55, 4, 10], 0x0c, "Acme, Inc.")]));
        subject.extend(rdn(&[(&[0x55, 4, 11], 0x0c, "eng"), (&[0x55, 4, 3], 0x0c, "broker-1")]));
        assert_eq!(subject_name(&cert(&subject)).unwrap(), "OU=eng+CN=broker-1,O=Acme\\, Inc.,C=US");
    }

    #[test]
    fn unknown_types_are_dotted_oid_and_hex() {
        // emailAddress 1.2.840.113549.1.9.1 as IA5String: Java writes it as OID=#hex
        let email: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x09, 0x01];
        let mut atv = tlv(0x06, email);
        atv.extend(tlv(0x04, b"ab")); // an OCTET STRING value
        let subject = tlv(0x31, &tlv(0x30, &atv));
        assert_eq!(subject_name(&cert(&subject)).unwrap(), "1.2.840.113549.1.9.1=#04026162");
    }

    #[test]
    fn escapes_as_rfc_2253() {
        let subject = rdn(&[(&[0x55, 4, 3], 0x0c, "#a;b ")]);
        assert_eq!(subject_name(&cert(&subject)).unwrap(), "CN=\\#a\\;b\\ ");
    }

    #[test]
    fn truncated_input_is_an_error() {
        let c = cert(&rdn(&[(&[0x55, 4, 3], 0x0c, "x")]));
        for cut in [0, 1, 5, c.len() / 2] {
            assert!(subject_name(&c[..cut]).is_err(), "cut at {cut}");
        }
    }
}
