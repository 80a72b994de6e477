//! The fleet's bucket: the object store every node of a fleet shares, reached through the few
//! operations the fleet is built on. Its one coordination primitive is the create-only write
//! (`If-None-Match: *`): [`Bucket::create`] either makes an object that was absent or finds the
//! name taken, and of many nodes racing on one name exactly one makes it. Nothing in the fleet
//! replaces an object with `If-Match` (see `tests/replica/conditional.rs` for why), and a store
//! that cannot write create-only is refused rather than raced.

use std::path::PathBuf;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

use crate::error::{Error, Result};

/// An object store shared by a fleet, under the prefix its URL names.
pub struct Bucket {
    url: String,
    objects: Arc<dyn ObjectStore>,
    runtime: tokio::runtime::Runtime,
    /// The directory of a `file://` bucket, whose objects must be regular files.
    local: Option<PathBuf>,
}

/// How many objects [`Bucket::get_all`] fetches at once.
const FETCHING: usize = 32;

/// An object found by [`Bucket::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// Its name, from the bucket's prefix (`nodes/a/00000000000000000001`).
    pub name: String,
    /// When the object store wrote it, in milliseconds since 1970 by the object store's own
    /// clock (the only clock the fleet compares across nodes).
    pub stamp_ms: i64,
}

impl Bucket {
    /// The bucket at `url`: `s3://bucket/prefix` (endpoint and credentials from the `AWS_*`
    /// variables) or `file:///absolute/dir` (made if missing).
    pub fn open(url: &str) -> Result<Bucket> {
        let (objects, local) = crate::replica::objects_at(url, true)?;
        Self::over(url, objects, local)
    }

    /// The bucket at `url` for reading only: a `file://` directory that is missing is not made
    /// (a reader from outside the fleet, such as `mnemo verify --from`, writes nothing).
    pub fn open_existing(url: &str) -> Result<Bucket> {
        let (objects, local) = crate::replica::objects_at(url, false)?;
        Self::over(url, objects, local)
    }

    /// A bucket in this process's memory, with the same create-only contract: for tests.
    #[cfg(any(test, feature = "testing"))]
    pub fn in_memory() -> Result<Bucket> {
        Self::over(
            "memory://",
            Arc::new(object_store::memory::InMemory::new()),
            None,
        )
    }

    fn over(url: &str, objects: Arc<dyn ObjectStore>, local: Option<PathBuf>) -> Result<Bucket> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::io("the fleet bucket's runtime", e))?;
        Ok(Bucket {
            url: url.to_string(),
            objects,
            runtime,
            local,
        })
    }

    /// The bucket's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Makes the object `name` holding `bytes` if no object has that name: `true` if this call
    /// made it, `false` if the name was taken (by an earlier write or a racing one). An object
    /// store that cannot write create-only is an error, never a race.
    pub fn create(&self, name: &str, bytes: Vec<u8>) -> Result<bool> {
        let options = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = self.runtime.block_on(self.objects.put_opts(
            &ObjectPath::from(name),
            PutPayload::from(bytes),
            options,
        ));
        match put {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(object_store::Error::NotImplemented { .. }) => Err(self.failed(
                &"it cannot write an object only if the name is free (If-None-Match: *), which a fleet's leases and fencing need; use S3 (or a store that honours conditional writes) or file://",
            )),
            Err(e) => Err(self.failed(&e)),
        }
    }

    /// The bytes of the object `name`, if there is one; one larger than `cap` bytes is damage
    /// (a fleet object is never that large), and so is a `file://` object that is not a regular
    /// file (a pipe would block the read, a link could point anywhere).
    pub fn get(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        self.runtime.block_on(self.fetch(name, cap))
    }

    /// [`get`](Self::get) of each of `names`, [`FETCHING`] at once (a takeover reads a store's
    /// whole log: one round trip per object would be most of its time), in their order.
    pub fn get_all(&self, names: &[String], cap: u64) -> Result<Vec<Option<Vec<u8>>>> {
        use futures_util::{StreamExt, TryStreamExt};
        self.runtime.block_on(
            futures_util::stream::iter(names.iter().map(|name| self.fetch(name, cap)))
                .buffered(FETCHING)
                .try_collect(),
        )
    }

    async fn fetch(&self, name: &str, cap: u64) -> Result<Option<Vec<u8>>> {
        if let Some(dir) = &self.local {
            if std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| !m.is_file()) {
                return Err(Error::damaged(format!(
                    "fleet object {name} at {} is not a regular file",
                    self.url
                )));
            }
        }
        let path = ObjectPath::from(name);
        let got = match self.objects.get(&path).await {
            Ok(got) => got,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.failed(&e)),
        };
        if got.meta.size > cap {
            return Err(Error::damaged(format!(
                "fleet object {name} at {} is {} bytes, more than such an object can be ({cap})",
                self.url, got.meta.size
            )));
        }
        let bytes = got.bytes().await.map_err(|e| self.failed(&e))?;
        Ok(Some(bytes.to_vec()))
    }

    /// The objects directly under `dir` (`leases/NAME`), sorted by name; what is nested deeper
    /// is not listed.
    pub fn list(&self, dir: &str) -> Result<Vec<Listed>> {
        let listed = self.listing(dir)?;
        let mut out: Vec<Listed> = listed
            .objects
            .iter()
            .filter_map(|o| {
                Some(Listed {
                    name: format!("{dir}/{}", o.location.filename()?),
                    stamp_ms: o.last_modified.timestamp_millis(),
                })
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The names of the "directories" directly under `dir` (the stores under `leases`).
    pub fn dirs(&self, dir: &str) -> Result<Vec<String>> {
        let listed = self.listing(dir)?;
        let mut out: Vec<String> = listed
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        out.sort();
        Ok(out)
    }

    fn listing(&self, dir: &str) -> Result<object_store::ListResult> {
        self.runtime
            .block_on(
                self.objects
                    .list_with_delimiter(Some(&ObjectPath::from(dir))),
            )
            .map_err(|e| self.failed(&e))
    }

    /// Removes the object `name`, if there is one.
    pub fn remove(&self, name: &str) -> Result<()> {
        match self
            .runtime
            .block_on(self.objects.delete(&ObjectPath::from(name)))
        {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn failed(&self, e: &dyn std::fmt::Display) -> Error {
        Error::Replica {
            url: self.url.clone(),
            cause: e.to_string(),
        }
    }
}
