//! The data files of one table commit: a partition's log read over an offset range, decoded
//! (read_committed), and written as Parquet, one file per partition of the table's spec
//! (`day(timestamp)` unless `with_spec` says otherwise; table/partition_spec.rs), rolled at
//! the table's target file size.
//!
//! Partitioning is one pass: each decoded stretch of log is cut into runs of rows of the
//! same partition (a topic's timestamps mostly rise, so day runs are long) and a partition
//! whose rows are one run goes to its open file as an Arrow slice, with no copy; one whose
//! rows are scattered (a bucket) is taken out in offset order. A file holds one Kafka partition: the files
//! of a partition are closed before the next partition's records are written, so each file's
//! offset bounds are that partition's alone (what a Fetch answered from the table searches,
//! table/tier_reader.rs) and a partition's rows in a file are in offset order.
//!
//! Files (Iceberg's layout, what pyiceberg names):
//!
//!     <data location>/<field>=<value>/.../<prefix>-<n:05>.parquet   (timestamp_day=<YYYY-MM-DD>)
//!
//! written under the data location directly when it is a local directory (each file is
//! fsynced when closed: the commit that follows makes the table refer to it), or kept in
//! memory for the caller to put to object storage. No file is referred to by the table
//! until the caller commits it; `abort` removes the local ones.
//!
//! Upsert tables (`write_log` with a partition's [`KeyIndex`]): of each key's records in a
//! decoded stretch only the last is written (none when it is a tombstone, a null value), and
//! the key's earlier live row, in the table or in this commit's files, gets a position
//! delete. `close` writes the position deletes as Iceberg position delete files, one per day
//! partition (a delete file applies to data files of its partition) and Kafka partition of
//! the rows they delete, sorted by (file_path, pos) as the spec asks:
//!
//!     <data location>/timestamp_day=<YYYY-MM-DD>/<prefix>-deletes-<n:05>.parquet
//!     columns file_path: string (field id 2147483546), pos: long (field id 2147483545)
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::{Array, BinaryArray, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use super::dead_letters;
use super::error::{Result, TableError};
use super::key_index::{KeyIndex, RowRef};
use super::partition_spec::{PartitionKey, PartitionSpec, PartitionValue};
use super::record_arrays::{record_batch, DecodedValues};
use crate::avro_columns::{self, Column, Program};
use crate::client::records::AbortedTxn;
use crate::columnar::{self, BinaryColumn, Columns};
use crate::log::Log;

/// Bytes of log decoded at a time (one Arrow batch). Small enough that the decoded columns
/// (a few times this) come from the allocator's heap rather than fresh `mmap`s: this
/// machine's VM pays ~4.5 s of CPU per GB of memory touched for the first time, and at 8 MiB
/// page faults were 8% of the writer's CPU (docs/decisions.md).
pub const READ_BYTES: u64 = 1 << 20;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// Files a commit keeps open at once. A spec with many partitions (a bucket of the key by
/// hour, say) would otherwise open one writer, with its column encoders, per partition it
/// meets; past this the fullest open file is closed (its partition gets another file if
/// more of its rows come), as Iceberg's fanout writers bound theirs.
pub const MAX_OPEN_FILES: usize = 128;

/// How data files are written: the table's `write.parquet.*` and `write.target-file-size-bytes`.
#[derive(Debug, Clone)]
pub struct FileSettings {
    pub compression: Compression,
    /// A row group is flushed once its encoded size reaches this.
    pub row_group_bytes: usize,
    /// A file is closed, and the next rows of its day go to a new one, once it reaches this.
    pub target_file_bytes: usize,
}

/// The Parquet codec of Iceberg's `write.parquet.compression-codec` and `-level`.
pub fn compression(codec: &str, level: Option<i32>) -> Result<Compression> {
    let bad = |e: parquet::errors::ParquetError| {
        TableError::Config(format!("write.parquet.compression-level {level:?} for {codec}: {e}"))
    };
    Ok(match codec.to_ascii_lowercase().as_str() {
        "zstd" => Compression::ZSTD(level.map_or(Ok(ZstdLevel::default()), ZstdLevel::try_new).map_err(bad)?),
        "gzip" => Compression::GZIP(
            level
                .map_or(Ok(GzipLevel::default()), |l| GzipLevel::try_new(u32::try_from(l).unwrap_or(u32::MAX)))
                .map_err(bad)?,
        ),
        "snappy" => Compression::SNAPPY,
        "lz4" => Compression::LZ4_RAW,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        other => {
            return Err(TableError::Config(format!(
                "write.parquet.compression-codec {other:?}: the broker writes zstd, gzip, snappy, lz4 or uncompressed"
            )))
        }
    })
}

/// Where the files go.
#[derive(Debug, Clone)]
pub enum Location {
    /// A local directory (`dir`), the table's data location `url` (a path or a `file:` URL):
    /// files are written in `dir` and named by `url` joined with their names.
    Local { dir: PathBuf, url: String },
    /// Object storage: files are kept in memory; paths are this URL joined with their names.
    Memory(String),
}

enum Sink {
    File(BufWriter<File>),
    Memory(Vec<u8>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Memory(v) => v.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Memory(_) => Ok(()),
        }
    }
}

/// A data file written and closed.
#[derive(Debug)]
pub struct WrittenFile {
    /// Its path (local) or URL (object storage).
    pub path: String,
    /// Days since 1970-01-01 of its rows' timestamps, under the default spec (`day(timestamp)`,
    /// which upsert tables need); 0 under another.
    pub day: i32,
    /// Its partition: one value per field of the table's spec.
    pub partition_values: PartitionKey,
    /// The Kafka partition of its rows, and their first and last offsets.
    pub partition: i32,
    pub min_offset: i64,
    pub max_offset: i64,
    pub rows: u64,
    pub bytes: u64,
    /// The file, when the location is object storage.
    pub contents: Option<Vec<u8>>,
    /// A position delete file (upsert tables): its rows name (data file, position).
    pub deletes: bool,
    /// A delete file's first and last data file path (its `file_path` bounds).
    pub path_bounds: Option<(String, String)>,
}

struct OpenFile {
    writer: ArrowWriter<Sink>,
    path: String,
    rows: u64,
    partition: i32,
    min_offset: i64,
    max_offset: i64,
}

/// What reading one partition's log wrote.
#[derive(Debug, Default)]
pub struct LogWrite {
    /// Where the next commit goes on (past the last whole batch read, or the end asked).
    pub next_offset: i64,
    pub rows: u64,
    /// Bytes of log read.
    pub read_bytes: u64,
    /// Values that did not decode into the value columns (kept in `value_raw`).
    pub failures: usize,
    /// The first such value's offset and why.
    pub first_failure: Option<(i64, String)>,
}

/// The value columns' reader tree and one program per writer schema id (avro_columns).
pub struct ValueDecoding {
    pub tree: Vec<Column>,
    pub programs: Vec<(i32, Program)>,
}

impl ValueDecoding {
    /// Decodes a stretch's value (or key) column of `count` rows into the tree's columns.
    fn decode(&self, c: &BinaryColumn, count: usize) -> Result<avro_columns::AvroColumns> {
        Ok(avro_columns::decode_avro_columns(count, &c.validity, &c.offsets, &c.data, &self.tree, &self.programs)?)
    }
}

/// The files of one commit, being written.
pub struct DataFiles {
    schema: SchemaRef,
    offset_column: usize,
    /// The Kafka partition the open files hold.
    partition: i32,
    settings: FileSettings,
    props: WriterProperties,
    location: Location,
    prefix: String,
    values: Option<ValueDecoding>,
    /// Keys decoded by `<topic>-key`'s schemas into `key_struct` (`with_keys`).
    keys: Option<ValueDecoding>,
    /// The table's partition spec (`with_spec`; `day(timestamp)` unless told).
    spec: PartitionSpec,
    /// At most this many files open at once (MAX_OPEN_FILES unless told).
    max_open: usize,
    open: HashMap<PartitionKey, OpenFile>,
    done: Vec<WrittenFile>,
    created: Vec<PathBuf>,
    next_file: u32,
    /// The key index of the partition being written (an upsert table).
    upsert: Option<Arc<Mutex<KeyIndex>>>,
    /// Rows to delete, by day partition and Kafka partition: (data file path, position).
    deletes: HashMap<(i32, i32), Vec<(String, u64)>>,
    /// The key indexes this commit has written with (each `begin`s once).
    begun: Vec<Arc<Mutex<KeyIndex>>>,
    /// The dead letters so far, when values that do not decode go to the dead-letter table
    /// (`with_dead_letters`) rather than `value_raw`.
    dead_letters: Option<Vec<RecordBatch>>,
}

impl DataFiles {
    pub fn new(
        schema: SchemaRef,
        settings: FileSettings,
        location: Location,
        prefix: String,
        values: Option<ValueDecoding>,
    ) -> Result<DataFiles> {
        let offset_column =
            schema.index_of("offset").map_err(|_| TableError::Config("the table has no offset column".into()))?;
        let mut props = WriterProperties::builder()
            .set_compression(settings.compression)
            .set_created_by(format!("logbroker {}", env!("CARGO_PKG_VERSION")));
        // Offsets and timestamps rise record by record: delta encoding stores them in a few
        // bits each before the codec sees them. A binary value is mostly unique: a dictionary
        // would be built for each column chunk's first megabyte and thrown away.
        for f in schema.fields() {
            let path = ColumnPath::from(f.name().as_str());
            match (f.name().as_str(), f.data_type()) {
                ("offset" | "timestamp", _) => {
                    props = props
                        .set_column_dictionary_enabled(path.clone(), false)
                        .set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
                }
                ("value" | "value_raw", DataType::Binary) => props = props.set_column_dictionary_enabled(path, false),
                _ => {}
            }
        }
        let props = props.build();
        Ok(DataFiles {
            schema,
            offset_column,
            partition: -1,
            settings,
            props,
            location,
            prefix,
            values,
            keys: None,
            spec: PartitionSpec::day_of_timestamp(),
            max_open: MAX_OPEN_FILES,
            open: HashMap::new(),
            done: Vec::new(),
            created: Vec::new(),
            next_file: 0,
            upsert: None,
            deletes: HashMap::new(),
            begun: Vec::new(),
            dead_letters: None,
        })
    }

    /// Keys decoded into the table's `key_struct` and `key_schema_id` columns (the raw key
    /// stays in `key`); a key that is not framed or does not decode leaves them null.
    #[must_use]
    pub fn with_keys(mut self, keys: Option<ValueDecoding>) -> DataFiles {
        self.keys = keys;
        self
    }

    /// Rows are partitioned by `spec` (the table's current one) instead of `day(timestamp)`.
    #[must_use]
    pub fn with_spec(mut self, spec: PartitionSpec) -> DataFiles {
        self.spec = spec;
        self
    }

    /// At most `n` files open at once (tests; MAX_OPEN_FILES otherwise).
    #[must_use]
    pub fn with_max_open_files(mut self, n: usize) -> DataFiles {
        self.max_open = n.max(1);
        self
    }

    /// Values that do not decode leave their row with a null `value_raw` and become dead
    /// letters (table/dead_letters.rs), taken by `take_dead_letters`.
    #[must_use]
    pub fn with_dead_letters(mut self, on: bool) -> DataFiles {
        self.dead_letters = on.then(Vec::new);
        self
    }

    /// The dead letters of the stretches written so far, as one Arrow IPC stream (None:
    /// none, or the table keeps such values in `value_raw`).
    pub fn take_dead_letters(&mut self) -> Result<Option<Vec<u8>>> {
        let batches = self.dead_letters.as_mut().map(std::mem::take).unwrap_or_default();
        dead_letters::ipc(&batches).map_err(|reason| TableError::Write { path: "(dead letters)".into(), reason })
    }

    /// Reads `log` over `[start, end)` as a read_committed consumer sees it (no control
    /// records, none of aborted transactions) and writes its records, stopping after
    /// `max_bytes` of log (at a batch boundary).
    /// With `upsert` (the partition's key index, in a commit: `KeyIndex::begin`), one row per
    /// key (see the module doc); `LogWrite::rows` counts the rows written.
    pub fn write_log(
        &mut self,
        log: &Log,
        start: i64,
        end: i64,
        max_bytes: u64,
        upsert: Option<Arc<Mutex<KeyIndex>>>,
    ) -> Result<LogWrite> {
        let (topic, partition) = (log.topic().to_owned(), log.partition());
        if upsert.is_some() && !self.spec.is_day_of_timestamp() {
            return Err(TableError::Config(format!(
                "{topic}-{partition}: an upsert table is partitioned by day(timestamp) only, not {:?}",
                self.spec.fields.iter().map(|f| f.name.as_str()).collect::<Vec<_>>()
            )));
        }
        self.start_partition(partition)?;
        if let Some(shared) = &upsert {
            if !self.begun.iter().any(|b| Arc::ptr_eq(b, shared)) {
                // this commit's first write with the index: its changes are journaled from here
                self.begun.push(Arc::clone(shared));
                let mut ix = shared.lock().unwrap_or_else(PoisonError::into_inner);
                ix.begin();
                for r in ix.take_superseded() {
                    let f = ix.file(r.file);
                    self.deletes.entry((f.day, partition)).or_default().push((f.path.clone(), r.pos));
                }
            }
        }
        self.upsert = upsert;
        let mut out = LogWrite { next_offset: start, ..LogWrite::default() };
        let mut bytes = Vec::new();
        while out.next_offset < end && out.read_bytes < max_bytes {
            let position = out.next_offset;
            let want = READ_BYTES.min(max_bytes - out.read_bytes);
            let Some(region) = log.read(position, want, Some(end), true)? else { break };
            region.read_into(&mut bytes)?;
            out.read_bytes += bytes.len() as u64;
            // the aborted transactions still open at this stretch's start, as a fetch from
            // there lists them: one whose ABORT marker an earlier stretch held must not make
            // its producer's later transactions look aborted
            let aborted: Vec<AbortedTxn> = log
                .aborted_transactions(position, end)
                .into_iter()
                .map(|a| AbortedTxn { producer_id: a.producer_id, first_offset: a.first_offset })
                .collect();
            let columns = columnar::decode_columns(&bytes, position, end, true, Some(&aborted))?;
            if columns.next_offset <= position {
                return Err(TableError::Columns {
                    topic,
                    partition,
                    first: position,
                    last: end - 1,
                    reason: format!("decoding made no progress at offset {position}"),
                });
            }
            out.next_offset = columns.next_offset;
            if columns.count == 0 {
                continue;
            }
            let bad = |reason: String| TableError::Columns {
                topic: topic.clone(),
                partition,
                first: position,
                last: out.next_offset - 1,
                reason,
            };
            let keep = self.upsert.clone().map(|ix| self.upsert_rows(&columns, &ix));
            let mut failed = Vec::new();
            let values = match &self.values {
                Some(v) => {
                    let mut decoded = v.decode(&columns.value, columns.count)?;
                    if self.dead_letters.is_some() {
                        failed = std::mem::take(&mut decoded.reasons);
                    }
                    if decoded.failures > 0 {
                        out.failures += decoded.failures;
                        if out.first_failure.is_none() {
                            if let Some((row, why)) = &decoded.first_failure {
                                let at = columns
                                    .offset
                                    .get(row * 8..row * 8 + 8)
                                    .map_or(position, |b| i64::from_le_bytes(b.try_into().expect("8 bytes")));
                                out.first_failure = Some((at, why.clone()));
                            }
                        }
                    }
                    Some(DecodedValues { tree: &v.tree, columns: decoded })
                }
                None => None,
            };
            let keys = match &self.keys {
                Some(k) => Some(DecodedValues { tree: &k.tree, columns: k.decode(&columns.key, columns.count)? }),
                None => None,
            };
            let mut batch = record_batch(&self.schema, columns, &topic, partition, values, keys).map_err(bad)?;
            if let (Some(dead), false) = (self.dead_letters.as_mut(), failed.is_empty()) {
                let (kept, letters) = dead_letters::split(&batch, &failed).map_err(bad)?;
                dead.push(letters);
                batch = kept;
            }
            let batch = match keep {
                Some(keep) if keep.false_count() > 0 => {
                    arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|e| bad(e.to_string()))?
                }
                _ => batch,
            };
            out.rows += batch.num_rows() as u64;
            self.write_batch(&batch)?;
        }
        Ok(out)
    }

    /// Upsert: which of a decoded stretch's rows are written (each key's last, unless a
    /// tombstone; every row without a key), and the position deletes of the rows they replace.
    fn upsert_rows(&mut self, columns: &Columns, ix: &Mutex<KeyIndex>) -> BooleanArray {
        let n = columns.count;
        let mut last: HashMap<&[u8], usize> = HashMap::with_capacity(n);
        for i in 0..n {
            if let Some(k) = columns.key.get(i) {
                last.insert(k, i);
            }
        }
        let mut ix = ix.lock().unwrap_or_else(PoisonError::into_inner);
        let mut keep = Vec::with_capacity(n);
        for i in 0..n {
            let Some(k) = columns.key.get(i) else {
                keep.push(true);
                continue;
            };
            if last.get(k) != Some(&i) {
                keep.push(false); // a later record of the key in this stretch replaces it
                continue;
            }
            let tombstone = columns.value.get(i).is_none();
            if let Some(old) = ix.get(k) {
                let f = ix.file(old.file);
                self.deletes.entry((f.day, self.partition)).or_default().push((f.path.clone(), old.pos));
                if tombstone {
                    ix.set(k, None);
                }
            }
            keep.push(!tombstone);
        }
        BooleanArray::from(keep)
    }

    /// The rows written next are of Kafka partition `partition`: the files of another one
    /// are closed first.
    pub fn start_partition(&mut self, partition: i32) -> Result<()> {
        if partition != self.partition {
            self.finish_open()?;
            self.partition = partition;
        }
        Ok(())
    }

    fn finish_open(&mut self) -> Result<()> {
        let mut open: Vec<(PartitionKey, OpenFile)> = self.open.drain().collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        for (key, f) in open {
            let day = self.day_of(&key);
            let written = finish(f, key, day)?;
            self.done.push(written);
        }
        Ok(())
    }

    /// Writes `batch` (the table's schema, rows of the partition of `start_partition`, in
    /// offset order) into the files of its rows' partitions: a partition whose rows are one
    /// run is a slice of the batch (no copy), one whose rows are scattered (a bucket) is
    /// taken out in offset order.
    pub fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let runs = self.spec.runs(batch).map_err(TableError::Config)?;
        let mut order: Vec<PartitionKey> = Vec::new();
        let mut by_key: HashMap<PartitionKey, Vec<(usize, usize)>> = HashMap::new();
        for (key, start, len) in runs {
            if let Some(r) = by_key.get_mut(&key) {
                r.push((start, len));
            } else {
                order.push(key.clone());
                by_key.insert(key, vec![(start, len)]);
            }
        }
        for key in order {
            let runs = by_key.remove(&key).expect("listed");
            let rows = if let [(start, len)] = runs[..] {
                batch.slice(start, len)
            } else {
                let idx = arrow_array::UInt32Array::from_iter_values(
                    runs.iter().flat_map(|&(s, l)| (s..s + l).map(|i| u32::try_from(i).unwrap_or(u32::MAX))),
                );
                arrow_select::take::take_record_batch(batch, &idx)
                    .map_err(|e| TableError::Config(format!("partitioning a batch: {e}")))?
            };
            self.write_run(key, &rows)?;
        }
        Ok(())
    }

    /// The day of a partition key under the default spec (0 under another).
    fn day_of(&self, key: &PartitionKey) -> i32 {
        match (self.spec.is_day_of_timestamp(), key.first()) {
            (true, Some(PartitionValue::Int(d))) => i32::try_from(*d).unwrap_or(i32::MIN),
            (true, _) => i32::MIN,
            _ => 0,
        }
    }

    fn write_run(&mut self, key: PartitionKey, rows: &RecordBatch) -> Result<()> {
        let day = self.day_of(&key);
        if !self.open.contains_key(&key) {
            if self.open.len() >= self.max_open {
                let fullest = self
                    .open
                    .iter()
                    .max_by_key(|(_, f)| f.writer.bytes_written() + f.writer.in_progress_size())
                    .map(|(k, _)| k.clone())
                    .expect("files are open");
                let f = self.open.remove(&fullest).expect("open");
                let day = self.day_of(&fullest);
                let written = finish(f, fullest, day)?;
                self.done.push(written);
            }
            let file = self.create(&key)?;
            self.open.insert(key.clone(), file);
        }
        let f = self.open.get_mut(&key).expect("just opened");
        let failed = |e: parquet::errors::ParquetError, path: &str| TableError::Write {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        f.writer.write(rows).map_err(|e| failed(e, &f.path))?;
        if let Some(ix) = &self.upsert {
            if let Some(keys) = rows.column_by_name("key").and_then(|c| c.as_any().downcast_ref::<BinaryArray>()) {
                let mut ix = ix.lock().unwrap_or_else(PoisonError::into_inner);
                let file = ix.file_number(&f.path, day);
                for (i, k) in keys.iter().enumerate() {
                    if let Some(k) = k {
                        ix.set(k, Some(RowRef { file, pos: f.rows + i as u64 }));
                    }
                }
            }
        }
        if let Some(offsets) = rows.column(self.offset_column).as_any().downcast_ref::<Int64Array>() {
            if !offsets.is_empty() {
                if f.rows == 0 {
                    f.min_offset = offsets.value(0);
                }
                f.max_offset = offsets.value(offsets.len() - 1);
            }
        }
        f.rows += rows.num_rows() as u64;
        if f.writer.in_progress_size() >= self.settings.row_group_bytes {
            f.writer.flush().map_err(|e| failed(e, &f.path))?;
        }
        if f.writer.bytes_written() + f.writer.in_progress_size() >= self.settings.target_file_bytes {
            let f = self.open.remove(&key).expect("open");
            let written = finish(f, key, day)?;
            self.done.push(written);
        }
        Ok(())
    }

    fn create(&mut self, key: &PartitionKey) -> Result<OpenFile> {
        let dir = self.spec.path(key);
        let dir = if dir.is_empty() { dir } else { dir + "/" };
        let name = format!("{dir}{}-{:05}.parquet", self.prefix, self.next_file);
        self.next_file += 1;
        let (sink, path) = self.sink(&name)?;
        let writer = ArrowWriter::try_new(sink, Arc::clone(&self.schema), Some(self.props.clone()))
            .map_err(|e| TableError::Write { path: path.clone(), reason: e.to_string() })?;
        Ok(OpenFile { writer, path, rows: 0, partition: self.partition, min_offset: -1, max_offset: -1 })
    }

    /// Where a new file `name` (below the data location) is written, and its path or URL.
    fn sink(&mut self, name: &str) -> Result<(Sink, String)> {
        Ok(match &self.location {
            Location::Local { dir, url } => {
                let path = dir.join(name);
                let made = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| File::create(&path));
                let file =
                    made.map_err(|e| TableError::Write { path: path.display().to_string(), reason: e.to_string() })?;
                self.created.push(path);
                (Sink::File(BufWriter::with_capacity(1 << 20, file)), format!("{}/{name}", url.trim_end_matches('/')))
            }
            Location::Memory(url) => (Sink::Memory(Vec::new()), format!("{}/{name}", url.trim_end_matches('/'))),
        })
    }

    /// Closes every open file: the commit's data files, in the order written, then its
    /// position delete files (upsert tables).
    pub fn close(mut self) -> Result<Vec<WrittenFile>> {
        self.finish_open()?;
        let mut deletes: Vec<_> = std::mem::take(&mut self.deletes).into_iter().collect();
        deletes.sort_by_key(|(at, _)| *at);
        for ((day, partition), mut rows) in deletes {
            rows.sort_unstable();
            rows.dedup();
            let written = self.write_deletes(day, partition, &rows)?;
            self.done.push(written);
        }
        Ok(std::mem::take(&mut self.done))
    }

    /// One position delete file of day partition `day` naming rows of Kafka partition
    /// `partition` (as a data file holds one, so does a delete file: a compaction of the
    /// partition's files removes it), rows sorted by (path, pos).
    fn write_deletes(&mut self, day: i32, partition: i32, rows: &[(String, u64)]) -> Result<WrittenFile> {
        let field = |name: &str, dt: DataType, id: &str| {
            Field::new(name, dt, false).with_metadata(HashMap::from([("PARQUET:field_id".to_owned(), id.to_owned())]))
        };
        let schema = Arc::new(Schema::new(vec![
            field("file_path", DataType::Utf8, "2147483546"),
            field("pos", DataType::Int64, "2147483545"),
        ]));
        let paths = StringArray::from_iter_values(rows.iter().map(|(p, _)| p.as_str()));
        let pos = Int64Array::from_iter_values(rows.iter().map(|(_, p)| i64::try_from(*p).unwrap_or(i64::MAX)));
        let name = format!("timestamp_day={}/{}-deletes-{:05}.parquet", day_string(day), self.prefix, self.next_file);
        self.next_file += 1;
        let (sink, path) = self.sink(&name)?;
        let failed = |e: parquet::errors::ParquetError, path: &str| TableError::Write {
            path: path.to_owned(),
            reason: e.to_string(),
        };
        let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(paths), Arc::new(pos)])
            .map_err(|e| TableError::Write { path: path.clone(), reason: e.to_string() })?;
        let props = WriterProperties::builder()
            .set_compression(self.settings.compression)
            .set_created_by(format!("logbroker {}", env!("CARGO_PKG_VERSION")))
            .build();
        let mut writer = ArrowWriter::try_new(sink, schema, Some(props)).map_err(|e| failed(e, &path))?;
        writer.write(&batch).map_err(|e| failed(e, &path))?;
        let f = OpenFile { writer, path, rows: rows.len() as u64, partition, min_offset: -1, max_offset: -1 };
        let mut written = finish(f, vec![PartitionValue::Int(i64::from(day))], day)?;
        written.deletes = true;
        written.path_bounds = Some((rows[0].0.clone(), rows[rows.len() - 1].0.clone()));
        Ok(written)
    }

    /// Drops the commit: removes the local files written (none is in the table).
    pub fn abort(self) {
        for path in &self.created {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn finish(f: OpenFile, partition_values: PartitionKey, day: i32) -> Result<WrittenFile> {
    let failed = |reason: String| TableError::Write { path: f.path.clone(), reason };
    let sink = f.writer.into_inner().map_err(|e| failed(e.to_string()))?;
    let (bytes, contents) = match sink {
        Sink::File(w) => {
            let file = w.into_inner().map_err(|e| failed(e.error().to_string()))?;
            file.sync_data().map_err(|e| failed(e.to_string()))?;
            (file.metadata().map_err(|e| failed(e.to_string()))?.len(), None)
        }
        Sink::Memory(v) => (v.len() as u64, Some(v)),
    };
    Ok(WrittenFile {
        path: f.path,
        day,
        partition_values,
        partition: f.partition,
        min_offset: f.min_offset,
        max_offset: f.max_offset,
        rows: f.rows,
        bytes,
        contents,
        deletes: false,
        path_bounds: None,
    })
}

/// Days since 1970-01-01 of a timestamp in microseconds (floor, for times before 1970 too).
pub fn day_of(us: i64) -> i32 {
    i32::try_from(us.div_euclid(MICROS_PER_DAY)).unwrap_or(if us < 0 { i32::MIN } else { i32::MAX })
}

/// `YYYY-MM-DD` of a day number (proleptic Gregorian; Iceberg's human form of `day`).
pub fn day_string(day: i32) -> String {
    crate::calendar::ymd(i64::from(day))
}

/// Where `location` (a table's data location) is written.
pub fn location(location: &str) -> Location {
    match local_dir(location) {
        Some(dir) => Location::Local { dir, url: location.to_owned() },
        None => Location::Memory(location.to_owned()),
    }
}

/// A local data location from a table location that is a path or a `file:` URL.
pub fn local_dir(location: &str) -> Option<PathBuf> {
    if let Some(rest) = location.strip_prefix("file://") {
        return Some(Path::new(rest).to_path_buf());
    }
    if let Some(rest) = location.strip_prefix("file:") {
        return Some(Path::new(rest).to_path_buf());
    }
    (!location.contains("://")).then(|| Path::new(location).to_path_buf())
}
