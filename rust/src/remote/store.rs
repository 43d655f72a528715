//! `RemoteStore`: one object store, chosen by URL, and the runtime its calls run on.
//!
//! Credentials come the usual ways: the environment (`AWS_*`, `GOOGLE_*`, `AZURE_*`, read as
//! the stores' own `from_env` builders read them, which covers web identity and container
//! credentials) and then the broker's `rsm.config.*` options, which win. They are never
//! shown: `display_url` is the URL without user info or query.
//!
//! Blocking calls (`put_*`, `get_*`, `delete_*`, `list`) are for threads that may wait
//! (Python calls with the GIL released); the network thread only ever `spawn`s.

use std::fs::File;
use std::future::Future;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Once};

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::error::{RemoteError, Result};

/// Parts of a multipart upload (S3 wants at least 5 MiB but the last).
const PART_BYTES: usize = 8 << 20;

pub struct RemoteStore {
    store: Arc<dyn ObjectStore>,
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
        if parsed.scheme() == "file" {
            std::fs::create_dir_all(parsed.path()).map_err(|e| RemoteError::Config {
                url: shown.clone(),
                reason: format!("cannot create the directory: {e}"),
            })?;
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
        Ok(RemoteStore { store: Arc::from(store), prefix, rt, url: shown })
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
    /// a part; an upload that fails is aborted, so no partial object stays). Returns the
    /// bytes sent.
    pub fn put_file(&self, rel: &str, file: &File, len: u64) -> Result<u64> {
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

    /// Deletes `rel` (a missing object is not an error: deletes are retried).
    pub fn delete(&self, rel: &str) -> Result<()> {
        let path = self.path(rel);
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
