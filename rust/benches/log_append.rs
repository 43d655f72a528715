//! Throughput of the engine's hot paths, without Python: batch validation, leader append
//! (validate + assign offsets + one pwrite per request) and reads (region computation, then a
//! copy to measure the bytes). Run: `cargo bench --bench log_append`.

use std::time::Instant;

use _core::batch::{self, Check, Control, SliceSource};
use _core::builder::{BatchBuilder, Rec};
use _core::compression::Codec;
use _core::config::LogConfig;
use _core::log::Log;

fn request(records: usize, value_size: usize, batches: usize, codec: Codec) -> Vec<u8> {
    let mut out = Vec::new();
    let value: Vec<u8> = (0..value_size).map(|i| b'a' + (i % 23) as u8).collect();
    for _ in 0..batches {
        let b = BatchBuilder::new()
            .codec(codec)
            .base_timestamp(1_700_000_000_000)
            .records((0..records).map(|i| Rec::kv(format!("key-{i}").as_bytes(), &value).ts_delta(i as i64)));
        out.extend_from_slice(&b.build());
    }
    out
}

fn report(name: &str, bytes: u64, secs: f64, ops: u64) {
    println!("{name:<44} {:>9.1} MB/s {:>10.0} ops/s", bytes as f64 / secs / 1e6, ops as f64 / secs);
}

fn main() {
    let total: u64 = std::env::var("BENCH_MB").ok().and_then(|v| v.parse().ok()).unwrap_or(256) << 20;
    for (records, value_size, batches, codec) in
        [(16, 1000, 1, Codec::None), (100, 100, 1, Codec::None), (16, 1000, 64, Codec::None), (16, 1000, 1, Codec::Lz4)]
    {
        let req = request(records, value_size, batches, codec);
        let n = (total / req.len() as u64).max(1);
        let label = format!("{batches}x{records}x{value_size}B {}", codec.name());

        let t = Instant::now();
        for _ in 0..n {
            let r = batch::scan(&mut SliceSource(&req), 0, Check::Full, None, |_| Ok(Control::Continue)).unwrap();
            assert!(r.error.is_none());
        }
        report(&format!("validate {label}"), n * req.len() as u64, t.elapsed().as_secs_f64(), n);

        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(dir.path(), "bench", 0, LogConfig::default(), None, 0).unwrap();
        let t = Instant::now();
        for _ in 0..n {
            log.append_as_leader(req.clone(), 0, 0).unwrap();
        }
        report(&format!("append_as_leader {label}"), n * req.len() as u64, t.elapsed().as_secs_f64(), n);

        let t = Instant::now();
        let (mut offset, mut bytes, mut reads) = (0i64, 0u64, 0u64);
        let mut buf = Vec::new();
        while let Some(region) = log.read(offset, 1 << 20, None, true).unwrap() {
            buf.clear();
            buf.extend_from_slice(&region.read_to_vec().unwrap());
            bytes += region.length;
            reads += 1;
            let mut pos = 0usize;
            let mut last = offset;
            while pos < buf.len() {
                let h = batch::BatchHeader::parse(&buf[pos..]);
                last = h.next_offset();
                pos += h.size() as usize;
            }
            offset = last;
        }
        report(&format!("read 1 MiB regions + copy {label}"), bytes, t.elapsed().as_secs_f64(), reads);
        log.close().unwrap();
    }
}
