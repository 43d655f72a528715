//! `RemoteStore`: one object store, chosen by URL, and the runtime its calls run on.
//!
//! Credentials come the usual ways: the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, read as
//! the stores' own `from_env` builders read them, which covers web identity and container
//! credentials) and then the broker's `rsm.config.*` options, which win. They are never
//! shown: `display_url` is the URL without user info or query.
//!
//! Blocking calls (`put_*`, `get_*`, `delete_*`, `list`) are for threads that may wait
//! (Python calls with the GIL released); the network thread only ever `spawn`s.
//!
//! A `file://` store writes as object stores do: an object is durable when its put returns
//! (the file and its directory fsynced: object_store's own option for the small objects,
//! `put_local_file` for the `.log`), since the control plane then marks the copy finished and
//! local retention may delete the only other copy. A copied `.log` is then dropped from the
//! page cache: it is cold data, and the page cache is the local log's (on a VM that backs
//! guest memory lazily, every new page cached cost about 4.5 s of CPU a GB here;
//! docs/decisions.md, "A file:// tier writes durably, by the kernel, and uncached").

use std::fs::File;
use std::future::Future;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Once};

use bytes::Bytes;
use futures::StreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::error::{RemoteError, Result};
use crate::offset_checkpoint;

/// Parts of a multipart upload (S3 wants at least 5 MiB but the last).
const PART_BYTES: usize = 8 << 20;

pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
    /// The `file://` store's file system (its objects' paths), if it is one.
    local: Option<LocalFileSystem>,
    prefix: Path,
    rt: tokio::runtime::Runtime,
    url: String,
}

static CRYPTO: Once = Once::new();

impl RemoteStore {
    /// Opens the store at `url` with `options` (object_store's keys, e.g. `aws_endpoint`),
    /// on a runtime of `threads` workers. Nothing is contacted yet.
    pub fn open(url: &str, options: &[(String, String)], threads: usize) -> Result<RemoteStore> {
        CRYPTO.call_once(|| {
            // reqwest's TLS is rustls without a provider of its own (Cargo.toml): ring's
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let shown = display_url(url);
        let parsed =
            url::Url::parse(url).map_err(|e| RemoteError::Config { url: shown.clone(), reason: e.to_string() })?;
        let mut opts: Vec<(String, String)> = std::env::vars()
            .filter(|(k, _)| k.starts_with("AWS_") || k.starts_with("GOOGLE_") || k.starts_with("AZURE_"))
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        opts.extend(options.iter().cloned());
        let (store, prefix) = object_store::parse_url_opts(&parsed, opts).map_err(|e| RemoteError::Config {
            url: shown.clone(),
            reason: format!(
                "{e} (this build supports file://{})",
                if cfg!(feature = "cloud") { ", s3://, gs://, az://" } else { "" }
            ),
        })?;
        let mut store: Arc<dyn ObjectStore> = Arc::from(store);
        let mut local = None;
        if parsed.scheme() == "file" {
            std::fs::create_dir_all(parsed.path()).map_err(|e| RemoteError::Config {
                url: shown.clone(),
                reason: format!("cannot create the directory: {e}"),
            })?;
            // what parse_url_opts built, with fsync on (the prefix is the URL's path)
            let fs = LocalFileSystem::new().with_fsync(true);
            store = Arc::new(fs.clone());
            local = Some(fs);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("logbroker-remote")
            .enable_time()
            .enable_io()
            .build()
            .map_err(|e| RemoteError::Config {
                url: shown.clone(),
                reason: format!("cannot start its threads: {e}"),
            })?;
        Ok(RemoteStore { store, local, prefix, rt, url: shown })
    }

    /// The URL, without credentials.
    pub fn display_url(&self) -> &str {
        &self.url
    }

    /// The full key of `rel` (a path below the store's prefix), as logs show it.
    pub fn key(&self, rel: &str) -> String {
        self.path(rel).to_string()
    }

    fn path(&self, rel: &str) -> Path {
        rel.split('/').filter(|p| !p.is_empty()).fold(self.prefix.clone(), |p, part| p.clone().join(part))
    }

    /// Runs `f` on the store's runtime and waits for it (never from the runtime itself).
    pub fn block_on<F: Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// Starts `f` on the store's runtime.
    pub fn spawn<F>(&self, f: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.rt.spawn(f);
    }

    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        Arc::clone(&self.store)
    }

    pub fn put_bytes(&self, rel: &str, bytes: Vec<u8>) -> Result<()> {
        let path = self.path(rel);
        self.block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map(|_| ())
            .map_err(|e| RemoteError::store("put", path.as_ref(), &e))
    }

    /// Uploads `len` bytes of `file` from position 0 (a multipart upload when larger than
    /// a part; an upload that fails is aborted, so no partial object stays; a `file://`
    /// store's object is copied by the kernel, `put_local_file`). Returns the bytes sent.
    pub fn put_file(&self, rel: &str, file: &File, len: u64) -> Result<u64> {
        match &self.local {
            Some(fs) => put_local_file(fs, &self.path(rel), file, len),
            None => self.upload_file(rel, file, len),
        }
    }

    fn upload_file(&self, rel: &str, file: &File, len: u64) -> Result<u64> {
        let path = self.path(rel);
        let key = path.to_string();
        let read = |pos: u64, n: usize| -> Result<Vec<u8>> {
            let mut buf = vec![0u8; n];
            file.read_exact_at(&mut buf, pos).map_err(|e| RemoteError::Store {
                op: "read local segment for",
                key: key.clone(),
                reason: e.to_string(),
            })?;
            Ok(buf)
        };
        if len <= PART_BYTES as u64 {
            let bytes = read(0, len as usize)?;
            self.block_on(self.store.put(&path, PutPayload::from(bytes)))
                .map_err(|e| RemoteError::store("put", &key, &e))?;
            return Ok(len);
        }
        self.block_on(async {
            let mut upload = self.store.put_multipart(&path).await.map_err(|e| RemoteError::store("put", &key, &e))?;
            let mut pos = 0u64;
            while pos < len {
                let n = usize::try_from((len - pos).min(PART_BYTES as u64)).unwrap_or(PART_BYTES);
                let part = match read(pos, n) {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = upload.abort().await;
                        return Err(e);
                    }
                };
                if let Err(e) = upload.put_part(PutPayload::from(part)).await {
                    let _ = upload.abort().await;
                    return Err(RemoteError::store("put", &key, &e));
                }
                pos += n as u64;
            }
            upload.complete().await.map_err(|e| RemoteError::store("put", &key, &e))?;
            Ok(len)
        })
    }

    pub fn get(&self, rel: &str) -> Result<Bytes> {
        let path = self.path(rel);
        self.block_on(get_all(&*self.store, &path))
    }

    pub fn get_range(&self, rel: &str, range: Range<u64>) -> Result<Bytes> {
        let path = self.path(rel);
        self.block_on(get_range(&*self.store, &path, range))
    }

    /// Deletes `rel` (a missing object is not an error: deletes are retried), and a
    /// `file://` store's temporary file of it that a crash left (`put_local_file`).
    pub fn delete(&self, rel: &str) -> Result<()> {
        let path = self.path(rel);
        if let Some(dest) = self.local.as_ref().and_then(|fs| fs.path_to_filesystem(&path).ok()) {
            match std::fs::remove_file(offset_checkpoint::tmp_path_of(&dest)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(RemoteError::Store { op: "delete", key: path.to_string(), reason: e.to_string() })
                }
            }
        }
        match self.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(RemoteError::store("delete", path.as_ref(), &e)),
        }
    }

    /// Every object below `rel` (a directory): its path relative to the store's prefix,
    /// and its size.
    pub fn list(&self, rel: &str) -> Result<Vec<(String, u64)>> {
        let path = self.path(rel);
        let prefix = self.prefix.to_string();
        self.block_on(async {
            let mut out = Vec::new();
            let mut stream = self.store.list(Some(&path));
            while let Some(item) = stream.next().await {
                let meta = item.map_err(|e| RemoteError::store("list", path.as_ref(), &e))?;
                let full = meta.location.to_string();
                let rel = full.strip_prefix(&prefix).unwrap_or(&full).trim_start_matches('/').to_owned();
                out.push((rel, meta.size));
            }
            Ok(out)
        })
    }

    /// Deletes every object below `rel`; returns how many.
    pub fn delete_dir(&self, rel: &str) -> Result<usize> {
        let objects = self.list(rel)?;
        for (o, _) in &objects {
            self.delete(o)?;
        }
        Ok(objects.len())
    }

    /// The path of `rel`, for async callers (`reader.rs`).
    pub fn path_of(&self, rel: &str) -> Path {
        self.path(rel)
    }
}

/// A `file://` store's `put_file`: the kernel copies the segment (`copy_file_range(2)`: no
/// buffer in user space, and a reflink clone on file systems that have them) into the
/// object's temporary file, which replaces the object durably (`offset_checkpoint::
/// replace_with`); the object is then dropped from the page cache (module doc).
fn put_local_file(fs: &LocalFileSystem, path: &Path, file: &File, len: u64) -> Result<u64> {
    let key = path.to_string();
    let dest = fs.path_to_filesystem(path).map_err(|e| RemoteError::store("put", &key, &e))?;
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(|e| RemoteError::Store {
            op: "put",
            key: key.clone(),
            reason: format!("cannot create {}: {e}", dir.display()),
        })?;
    }
    offset_checkpoint::replace_with(&dest, true, |out| {
        let mut pos = 0u64;
        while pos < len {
            let n = usize::try_from((len - pos).min(1 << 30)).unwrap_or(1 << 30);
            match crate::sys::copy_file_range(file, pos, out, n)? {
                0 => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::UnexpectedEof,
                        format!("the local segment ended at byte {pos} of {len} while copying it to {key}"),
                    ))
                }
                k => pos += k as u64,
            }
        }
        Ok(())
    })?;
    // clean now (synced), so they go; failing to drop them costs memory, not data
    if let Ok(copy) = File::open(&dest) {
        let _ = crate::sys::drop_cached_pages(&copy);
    }
    Ok(len)
}

pub async fn get_all(store: &dyn ObjectStore, path: &Path) -> Result<Bytes> {
    let got = store.get(path).await.map_err(|e| RemoteError::store("get", path.as_ref(), &e))?;
    got.bytes().await.map_err(|e| RemoteError::store("get", path.as_ref(), &e))
}

pub async fn get_range(store: &dyn ObjectStore, path: &Path, range: Range<u64>) -> Result<Bytes> {
    let want = range.end - range.start;
    let b = store.get_range(path, range.clone()).await.map_err(|e| RemoteError::store("get", path.as_ref(), &e))?;
    if b.len() as u64 != want {
        return Err(RemoteError::Corrupt {
            key: path.to_string(),
            reason: format!(
                "bytes {}..{} asked, {} returned (the object is shorter than its metadata says)",
                range.start,
                range.end,
                b.len()
            ),
        });
    }
    Ok(b)
}

/// `url` without user info and query (where credentials could be).
pub fn display_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.to_string()
        }
        Err(_) => "<an unparsable URL>".to_owned(),
    }
}
