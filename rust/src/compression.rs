//! Compression codecs of the batch `attributes` bits 0-2, in the stream formats Kafka uses.
//!
//! | id | codec  | stream format on the wire                                                  |
//! |---:|--------|----------------------------------------------------------------------------|
//! | 0  | none   | records as is                                                              |
//! | 1  | gzip   | RFC 1952 gzip (Java `GZIPOutputStream`); concatenated members accepted     |
//! | 2  | snappy | xerial framing (`\x82SNAPPY\x00`, version, compat, then `[len i32][raw block]`*) as the Java client writes it, or a single raw snappy block (librdkafka and others) |
//! | 3  | lz4    | LZ4 frame format (Kafka's `Lz4BlockOutputStream` since magic v1 is a standard frame) |
//! | 4  | zstd   | zstd frame(s)                                                              |
//! | 5-7| —      | invalid                                                                    |
//!
//! Only the records region (after the 61-byte header) is compressed. Decompression is bounded
//! by a caller-given limit so a small batch cannot expand into gigabytes (a "zip bomb").

use std::io::{Read, Write};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Codec {
    /// From the low three attribute bits; `None` for the reserved ids 5-7.
    pub fn from_attributes(attributes: i16) -> Option<Codec> {
        match attributes & 0x07 {
            0 => Some(Codec::None),
            1 => Some(Codec::Gzip),
            2 => Some(Codec::Snappy),
            3 => Some(Codec::Lz4),
            4 => Some(Codec::Zstd),
            _ => None,
        }
    }

    pub fn id(self) -> i16 {
        match self {
            Codec::None => 0,
            Codec::Gzip => 1,
            Codec::Snappy => 2,
            Codec::Lz4 => 3,
            Codec::Zstd => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Codec::None => "none",
            Codec::Gzip => "gzip",
            Codec::Snappy => "snappy",
            Codec::Lz4 => "lz4",
            Codec::Zstd => "zstd",
        }
    }

    pub const ALL: [Codec; 5] = [Codec::None, Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];
}

const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_LEN: usize = 16;
const XERIAL_BLOCK: usize = 32 * 1024;

/// Decompresses `input` with `codec`, failing if the output would exceed `limit` bytes.
/// The error string says what went wrong; callers wrap it into a `LogError` with a position.
pub fn decompress(codec: Codec, input: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
    match codec {
        Codec::None => {
            if input.len() > limit {
                return Err(format!("{} bytes exceed the limit of {limit}", input.len()));
            }
            out.extend_from_slice(input);
        }
        Codec::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(input), &mut out, limit)?,
        Codec::Snappy => snappy_decompress(input, &mut out, limit)?,
        Codec::Lz4 => {
            if !lz4_frame_blocks(input, &mut out, limit)? {
                out.clear();
                read_bounded(lz4_flex::frame::FrameDecoder::new(input), &mut out, limit)?;
            }
        }
        Codec::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(input).map_err(|e| format!("zstd: {e}"))?;
            read_bounded(dec, &mut out, limit)?;
        }
    }
    Ok(out)
}

fn read_bounded(reader: impl Read, out: &mut Vec<u8>, limit: usize) -> Result<(), String> {
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    reader.take(cap).read_to_end(out).map_err(|e| e.to_string())?;
    if out.len() > limit {
        return Err(format!("decompressed size exceeds the limit of {limit} bytes"));
    }
    Ok(())
}

const LZ4_MAGIC: u32 = 0x184D_2204;
const LZ4_WINDOW: usize = 64 << 10;

/// One LZ4 frame (what Kafka's clients write: one per batch) decoded block by block straight
/// into `out`, without the frame reader's window copies. Returns false, leaving `out` as it
/// may be, for what it leaves to `FrameDecoder`: a dictionary id, more than one frame, or a
/// header it does not know. The header and content checksums are not checked here: the
/// batch's CRC-32C, checked before, covers every byte.
fn lz4_frame_blocks(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<bool, String> {
    let le32 = |at: usize| input.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    if le32(0) != Some(LZ4_MAGIC) || input.len() < 7 {
        return Ok(false);
    }
    let (flg, bd) = (input[4], input[5]);
    if flg >> 6 != 1 || flg & 0x01 != 0 {
        return Ok(false); // another version, or a dictionary id
    }
    let independent = flg & 0x20 != 0;
    let block_checksum = flg & 0x10 != 0;
    let content_checksum = flg & 0x04 != 0;
    let max_block = match (bd >> 4) & 7 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        _ => return Ok(false),
    };
    let mut pos = 6 + if flg & 0x08 != 0 { 8 } else { 0 } + 1; // content size, header checksum
    loop {
        let size = le32(pos).ok_or("lz4: truncated block size")?;
        pos += 4;
        if size == 0 {
            break;
        }
        let len = (size & 0x7FFF_FFFF) as usize;
        if len > max_block || input.len() - pos < len {
            return Err(format!("lz4: a block of {len} bytes at {pos} (frame of {} bytes)", input.len()));
        }
        let block = &input[pos..pos + len];
        pos += len + if block_checksum { 4 } else { 0 };
        let start = out.len();
        if size & 0x8000_0000 != 0 {
            if start + len > limit {
                return Err(format!("decompressed size exceeds the limit of {limit} bytes"));
            }
            out.extend_from_slice(block);
            continue;
        }
        out.resize(start + max_block.min(limit.saturating_sub(start)), 0);
        let (before, room) = out.split_at_mut(start);
        let n = if independent || start == 0 {
            lz4_flex::block::decompress_into(block, room)
        } else {
            lz4_flex::block::decompress_into_with_dict(block, room, &before[start.saturating_sub(LZ4_WINDOW)..])
        };
        let n = n.map_err(|e| {
            if start + max_block > limit {
                format!("decompressed size exceeds the limit of {limit} bytes")
            } else {
                format!("lz4: {e}")
            }
        })?;
        out.truncate(start + n);
    }
    pos += if content_checksum { 4 } else { 0 };
    Ok(pos == input.len())
}

fn snappy_decompress(input: &[u8], out: &mut Vec<u8>, limit: usize) -> Result<(), String> {
    let mut dec = snap::raw::Decoder::new();
    let mut one_block = |block: &[u8], out: &mut Vec<u8>| -> Result<(), String> {
        let n = snap::raw::decompress_len(block).map_err(|e| format!("snappy: {e}"))?;
        if out.len() + n > limit {
            return Err(format!("decompressed size exceeds the limit of {limit} bytes"));
        }
        let start = out.len();
        out.resize(start + n, 0);
        let written = dec.decompress(block, &mut out[start..]).map_err(|e| format!("snappy: {e}"))?;
        out.truncate(start + written);
        Ok(())
    };
    if input.len() >= XERIAL_HEADER_LEN && &input[..8] == XERIAL_MAGIC {
        let mut rest = &input[XERIAL_HEADER_LEN..];
        while !rest.is_empty() {
            if rest.len() < 4 {
                return Err("snappy: truncated xerial block length".into());
            }
            let len = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
            let len = usize::try_from(len).map_err(|_| format!("snappy: negative xerial block length {len}"))?;
            rest = &rest[4..];
            if len > rest.len() {
                return Err(format!("snappy: xerial block of {len} bytes but only {} remain", rest.len()));
            }
            one_block(&rest[..len], out)?;
            rest = &rest[len..];
        }
        Ok(())
    } else {
        one_block(input, out)
    }
}

/// Compresses `input` in the stream format Kafka's Java client writes (xerial for snappy),
/// at the clients' levels (gzip fastest, zstd 3).
pub fn compress(codec: Codec, input: &[u8]) -> Vec<u8> {
    compress_level(codec, input, None)
}

/// Compresses at a topic's `compression.<codec>.level` (`Some`): gzip -1 is zlib's default (6),
/// 0-9 as given; zstd as given (clamped to zstd's range); lz4 and snappy have one level.
pub fn compress_level(codec: Codec, input: &[u8], level: Option<i32>) -> Vec<u8> {
    match codec {
        Codec::None => input.to_vec(),
        Codec::Gzip => {
            let level = match level {
                None => flate2::Compression::fast(),
                Some(l) => u32::try_from(l)
                    .map_or_else(|_| flate2::Compression::default(), |l| flate2::Compression::new(l.min(9))),
            };
            let mut enc = flate2::write::GzEncoder::new(Vec::new(), level);
            enc.write_all(input).expect("writing to a Vec cannot fail");
            enc.finish().expect("writing to a Vec cannot fail")
        }
        Codec::Snappy => {
            let mut out = Vec::with_capacity(input.len() / 2 + 32);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&1i32.to_be_bytes());
            out.extend_from_slice(&1i32.to_be_bytes());
            let mut enc = snap::raw::Encoder::new();
            for chunk in input.chunks(XERIAL_BLOCK) {
                let block = enc.compress_vec(chunk).expect("snappy block within size limits");
                let len = i32::try_from(block.len()).expect("a 32 KiB block compresses to < 2 GiB");
                out.extend_from_slice(&len.to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Codec::Lz4 => {
            let mut enc = lz4_flex::frame::FrameEncoder::new(Vec::new());
            enc.write_all(input).expect("writing to a Vec cannot fail");
            enc.finish().expect("writing to a Vec cannot fail")
        }
        Codec::Zstd => {
            let range = zstd::compression_level_range();
            let l = level.unwrap_or(3).clamp(*range.start(), *range.end());
            zstd::stream::encode_all(input, l).expect("zstd into a Vec cannot fail")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_codec_round_trips() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        for codec in Codec::ALL {
            let c = compress(codec, &data);
            assert_eq!(decompress(codec, &c, data.len()).unwrap(), data, "{}", codec.name());
            assert_eq!(Codec::from_attributes(codec.id()), Some(codec));
        }
    }

    #[test]
    fn raw_snappy_accepted() {
        let data = b"hello hello hello hello".repeat(50);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(decompress(Codec::Snappy, &raw, 1 << 20).unwrap(), data);
    }

    #[test]
    fn limit_stops_zip_bombs() {
        let data = vec![0u8; 1 << 20];
        for codec in Codec::ALL {
            let c = compress(codec, &data);
            assert!(decompress(codec, &c, 1000).is_err(), "{}", codec.name());
        }
    }

    #[test]
    fn reserved_codecs_invalid() {
        for id in 5..8 {
            assert_eq!(Codec::from_attributes(id), None);
        }
    }

    /// The block-by-block LZ4 path against lz4_flex's frame encoder in every block mode,
    /// block size and checksum setting, and the cases it leaves to the frame reader.
    #[test]
    fn lz4_frames_decode_block_by_block() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let data: Vec<u8> =
            (0..600_000u32).flat_map(|i| format!("{{\"n\":{},\"k\":\"{}\"}}", i % 977, i % 13).into_bytes()).collect();
        for mode in [BlockMode::Independent, BlockMode::Linked] {
            for size in [BlockSize::Max64KB, BlockSize::Max256KB, BlockSize::Max4MB] {
                for sums in [false, true] {
                    let info =
                        FrameInfo::new().block_mode(mode).block_size(size).block_checksums(sums).content_checksum(sums);
                    let mut enc = FrameEncoder::with_frame_info(info, Vec::new());
                    enc.write_all(&data).unwrap();
                    let frame = enc.finish().unwrap();
                    let mut out = Vec::new();
                    assert!(lz4_frame_blocks(&frame, &mut out, usize::MAX).unwrap(), "{mode:?} {size:?} {sums}");
                    assert!(out == data, "{mode:?} {size:?} {sums}: {} bytes back of {}", out.len(), data.len());
                    assert_eq!(decompress(Codec::Lz4, &frame, data.len()).unwrap(), data);
                    let e = decompress(Codec::Lz4, &frame, data.len() - 1).unwrap_err();
                    assert!(e.contains("exceeds the limit"), "{e}");
                }
            }
        }
        // Two frames back to back: left to the frame reader, which reads the first (as before).
        let one = compress(Codec::Lz4, b"first ");
        let mut two = one.clone();
        two.extend(compress(Codec::Lz4, b"second"));
        assert!(!lz4_frame_blocks(&two, &mut Vec::new(), 1 << 20).unwrap());
        assert_eq!(decompress(Codec::Lz4, &two, 1 << 20).unwrap(), b"first ");
        // A truncated frame is an error either way.
        assert!(decompress(Codec::Lz4, &one[..one.len() - 5], 1 << 20).is_err());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in [Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd] {
            assert!(
                decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\xff\xff\xff\xff", 1 << 20).is_err()
            );
            assert!(decompress(codec, &[1, 2, 3, 4, 5], 1 << 20).is_err(), "{}", codec.name());
        }
    }
}
