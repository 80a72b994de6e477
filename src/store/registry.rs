//! The stores open in this process, by canonical path, so that opening a store that is already
//! open here returns a handle to it instead of failing on the store's lock.
//!
//! The registry holds weak references only: it never keeps a store open, and a store closes when
//! its last handle is dropped, as before. Each path has a slot whose mutex is held while that
//! store is being opened, so two threads opening the same store at once end with one store, and
//! opens of different stores do not wait for each other.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

/// One store's slot: the open store, while some handle holds it.
type Slot<T> = Arc<Mutex<Weak<T>>>;

/// Open values of type `T` (a store's shared state), by canonical store path.
pub(crate) struct Registry<T> {
    slots: Mutex<HashMap<PathBuf, Slot<T>>>,
}

/// What [`Registry::open`] returned.
pub(crate) enum Opened<T> {
    /// The store was open in this process already.
    Shared(Arc<T>),
    /// It was opened now.
    Fresh(Arc<T>),
}

fn lock<V>(mutex: &Mutex<V>) -> MutexGuard<'_, V> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> Registry<T> {
    /// An empty registry.
    pub(crate) fn new() -> Registry<T> {
        Registry {
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The store at `path` if it is open in this process, or else what `open` opens (which is
    /// then registered).
    pub(crate) fn open<E>(
        &self,
        path: &Path,
        open: impl FnOnce() -> Result<Arc<T>, E>,
    ) -> Result<Opened<T>, E> {
        let slot = {
            let mut slots = lock(&self.slots);
            // Forget slots of stores that closed and that no open is using.
            slots.retain(|_, slot| {
                Arc::strong_count(slot) > 1
                    || slot.try_lock().map_or(true, |held| held.strong_count() > 0)
            });
            Arc::clone(slots.entry(canonical(path)).or_default())
        };
        let mut held = lock(&slot);
        if let Some(open) = held.upgrade() {
            return Ok(Opened::Shared(open));
        }
        let fresh = open()?;
        *held = Arc::downgrade(&fresh);
        Ok(Opened::Fresh(fresh))
    }
}

/// The key of the store at `path`: its canonical path, or for a store not made yet the canonical
/// path of its parent joined with its name.
fn canonical(path: &Path) -> PathBuf {
    if let Ok(path) = std::fs::canonicalize(path) {
        return path;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(parent), Some(name)) => std::fs::canonicalize(parent)
            .map(|parent| parent.join(name))
            .unwrap_or(absolute),
        _ => absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_store_by_another_path_is_shared_until_it_closes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("s");
        std::fs::create_dir(&store).expect("mkdir");
        let registry = Registry::<u32>::new();
        let Ok(Opened::Fresh(first)) = registry.open(&store, || Ok::<_, ()>(Arc::new(1))) else {
            panic!("a first open opens");
        };
        let other_spelling = dir.path().join(".").join("s");
        let Ok(Opened::Shared(again)) = registry.open(&other_spelling, || Err(())) else {
            panic!("a second open shares the first");
        };
        assert!(Arc::ptr_eq(&first, &again));
        drop((first, again));
        let Ok(Opened::Fresh(reopened)) = registry.open(&store, || Ok::<_, ()>(Arc::new(2))) else {
            panic!("a store closed is opened anew");
        };
        assert_eq!(*reopened, 2);
        assert!(registry.open(&dir.path().join("t"), || Err("no")).is_err());
        assert_eq!(lock(&registry.slots).len(), 2, "one slot per store path");
    }
}
