//! What a share group needs to know of each record it may hand out (issue 48), read from the
//! whole batches a share fetch reads (`Log.read_batches`), decompressed once:
//!
//! - its **key**, as a 64-bit FNV-1a hash (`None` for a null key), for key-ordered delivery
//!   (`share.delivery.order=key`): a record is handed out only when every earlier record with
//!   the same key in the partition is done. Two keys with one hash are ordered together:
//!   stricter than needed, never out of order;
//! - its **not-before time** (ms since the epoch, -1 when none), from the header named by
//!   the caller (`logbroker.deliver.at`), whose value is the time as ASCII decimal digits; a
//!   value that is not such a number (empty, signs, other bytes, too long) counts as none, so a
//!   malformed header never holds a record back.
//!
//! Records of control batches (transaction markers) are left out: the share group hands their
//! offsets out as gaps. A torn or corrupt batch ends the walk with an error naming its
//! position in `data`.

use crate::batch::{self, BatchHeader, Control, LOG_OVERHEAD};
use crate::client::records::parse_headers;
use crate::error::{LogError, Result};

/// One record's facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordFacts {
    pub offset: i64,
    pub key_hash: Option<u64>,
    pub not_before_ms: i64,
}

/// 64-bit FNV-1a.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A header value as a not-before time: ASCII decimal digits, at most 18 of them.
pub fn parse_not_before(value: Option<&[u8]>) -> i64 {
    match value {
        Some(v) if !v.is_empty() && v.len() <= 18 && v.iter().all(u8::is_ascii_digit) => {
            v.iter().fold(0i64, |n, &d| n * 10 + i64::from(d - b'0'))
        }
        _ => -1,
    }
}

/// The facts of the records in `data` (complete batches, as a log read returns them) whose
/// offsets are in `[from, to)`, in offset order; `header` names the not-before header. Batches
/// wholly outside the range are skipped unread (a fetch reads whole batches, often far more
/// records than it can hand out).
pub fn share_record_facts(data: &[u8], header: &[u8], from: i64, to: i64) -> Result<Vec<RecordFacts>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos + LOG_OVERHEAD <= data.len() {
        let h = BatchHeader::parse(&data[pos..]);
        let size = usize::try_from(h.size()).map_err(|_| LogError::invalid(pos as u64, "batch size"))?;
        if size < batch::HEADER_LEN || pos + size > data.len() {
            return Err(LogError::invalid(
                pos as u64,
                format!("batch of {size} bytes at {pos} runs past the {} bytes read", data.len()),
            ));
        }
        let bytes = &data[pos..pos + size];
        if h.base_offset >= to {
            break;
        }
        if !h.is_control() && h.last_offset() >= from {
            batch::for_each_record(bytes, pos as u64, |offset, _ts, r| {
                if offset < from {
                    return Control::Continue;
                }
                if offset >= to {
                    return Control::Stop;
                }
                let not_before = parse_headers(r.headers, r.headers_count)
                    .into_iter()
                    .find(|(k, _)| *k == header)
                    .map_or(-1, |(_, v)| parse_not_before(v));
                out.push(RecordFacts { offset, key_hash: r.key.map(key_hash), not_before_ms: not_before });
                Control::Continue
            })?;
        }
        pos += size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{BatchBuilder, Rec};
    use crate::compression::Codec;

    fn rec(key: Option<&[u8]>, headers: Vec<(&[u8], Option<&[u8]>)>) -> Rec {
        let mut r = Rec::value(b"v");
        r.key = key.map(<[u8]>::to_vec);
        r.headers = headers.into_iter().map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec))).collect();
        r
    }

    #[test]
    fn keys_and_not_before_times_of_every_record_in_order() {
        let h: &[u8] = b"logbroker.deliver.at";
        let mut data = BatchBuilder::new()
            .base_offset(10)
            .codec(Codec::Lz4)
            .records([
                rec(Some(b"a"), vec![]),
                rec(None, vec![(b"other", Some(b"5")), (h, Some(b"1764547200000"))]),
                rec(Some(b"a"), vec![(h, Some(b"-5"))]),
            ])
            .build();
        data.extend(BatchBuilder::new().base_offset(13).records([rec(Some(b"b"), vec![(h, None)])]).build());
        let facts = share_record_facts(&data, h, 0, i64::MAX).unwrap();
        let middle = share_record_facts(&data, h, 11, 13).unwrap();
        assert_eq!(middle.iter().map(|f| f.offset).collect::<Vec<_>>(), vec![11, 12]);
        assert_eq!(
            facts,
            vec![
                RecordFacts { offset: 10, key_hash: Some(key_hash(b"a")), not_before_ms: -1 },
                RecordFacts { offset: 11, key_hash: None, not_before_ms: 1_764_547_200_000 },
                RecordFacts { offset: 12, key_hash: Some(key_hash(b"a")), not_before_ms: -1 },
                RecordFacts { offset: 13, key_hash: Some(key_hash(b"b")), not_before_ms: -1 },
            ]
        );
    }

    #[test]
    fn malformed_not_before_values_count_as_none() {
        for v in [&b""[..], b"12a", b"+5", b" 5", b"1234567890123456789"] {
            assert_eq!(parse_not_before(Some(v)), -1, "{v:?}");
        }
        assert_eq!(parse_not_before(None), -1);
        assert_eq!(parse_not_before(Some(b"0")), 0);
        assert_eq!(parse_not_before(Some(b"999999999999999999")), 999_999_999_999_999_999);
    }

    #[test]
    fn a_batch_cut_short_is_an_error_naming_its_position() {
        let data = BatchBuilder::new().records([rec(Some(b"k"), vec![])]).build();
        let err = share_record_facts(&data[..data.len() - 3], b"h", 0, i64::MAX).unwrap_err();
        assert!(err.to_string().contains("runs past"), "{err}");
    }
}
