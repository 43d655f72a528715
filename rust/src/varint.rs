//! Zigzag varints as used inside v2 records (Protocol Buffers' `sint32`/`sint64`).
//!
//! Zigzag maps signed to unsigned (0→0, -1→1, 1→2, -2→3), then base-128 with the
//! continuation bit (0x80) on every byte but the last, least-significant group first.
//! At most 5 bytes for a varint and 10 for a varlong; longer encodings are rejected.
//! This is *not* the protocol's unsigned varint used for compact lengths.
//!
//! Decoders take `&[u8]` and return `(value, bytes_consumed)` or `None` when the input is
//! truncated or over-long; they never allocate and never panic.

/// Decodes a zigzag varint (32-bit). `None` if truncated or longer than 5 bytes.
#[inline]
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let mut raw: u32 = 0;
    for (i, &b) in buf.iter().enumerate().take(5) {
        // The fifth byte carries the top 4 bits; higher bits in it are an overflow.
        if i == 4 && b & 0xF0 != 0 {
            return None;
        }
        raw |= u32::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            let v = ((raw >> 1) as i32) ^ -((raw & 1) as i32);
            return Some((v, i + 1));
        }
    }
    None
}

/// Decodes a zigzag varlong (64-bit). `None` if truncated or longer than 10 bytes.
#[inline]
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, &b) in buf.iter().enumerate().take(10) {
        if i == 9 && b & 0xFE != 0 {
            return None;
        }
        raw |= u64::from(b & 0x7F) << (7 * i);
        if b & 0x80 == 0 {
            let v = ((raw >> 1) as i64) ^ -((raw & 1) as i64);
            return Some((v, i + 1));
        }
    }
    None
}

/// Appends the zigzag varint encoding of `v` to `out`.
pub fn write_varint(out: &mut Vec<u8>, v: i32) {
    let mut raw = ((v << 1) ^ (v >> 31)) as u32;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Appends the zigzag varlong encoding of `v` to `out`.
pub fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.push((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.push(raw as u8);
}

/// Number of bytes `write_varint(v)` produces.
pub fn varint_size(v: i32) -> usize {
    let raw = ((v << 1) ^ (v >> 31)) as u32;
    let bits = 32 - raw.leading_zeros() as usize;
    bits.max(1).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn documented_examples() {
        let enc = |v| {
            let mut o = Vec::new();
            write_varint(&mut o, v);
            o
        };
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(-1), [0x01]);
        assert_eq!(enc(1), [0x02]);
        assert_eq!(enc(64), [0x80, 0x01]);
        assert_eq!(enc(i32::MIN).len(), 5);
    }

    #[test]
    fn truncated_and_overlong_rejected() {
        assert_eq!(read_varint(&[]), None);
        assert_eq!(read_varint(&[0x80]), None);
        assert_eq!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(read_varint(&[0xFF, 0xFF, 0xFF, 0xFF, 0x1F]), None, "bits beyond 32");
        assert_eq!(read_varlong(&[0xFF; 10]), None);
        assert_eq!(read_varlong(&[0x80; 11]), None);
    }

    #[test]
    fn extremes_round_trip() {
        for v in [i64::MIN, i64::MAX, 0, -1] {
            let mut o = Vec::new();
            write_varlong(&mut o, v);
            assert_eq!(read_varlong(&o), Some((v, o.len())));
        }
        for v in [i32::MIN, i32::MAX] {
            let mut o = Vec::new();
            write_varint(&mut o, v);
            assert_eq!(read_varint(&o), Some((v, o.len())));
        }
    }

    proptest! {
        #[test]
        fn varint_round_trip(v in any::<i32>(), tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut o = Vec::new();
            write_varint(&mut o, v);
            prop_assert_eq!(o.len(), varint_size(v));
            let n = o.len();
            o.extend_from_slice(&tail);
            prop_assert_eq!(read_varint(&o), Some((v, n)));
        }

        #[test]
        fn varlong_round_trip(v in any::<i64>()) {
            let mut o = Vec::new();
            write_varlong(&mut o, v);
            prop_assert_eq!(read_varlong(&o), Some((v, o.len())));
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..12)) {
            let _ = read_varint(&bytes);
            let _ = read_varlong(&bytes);
        }
    }
}
