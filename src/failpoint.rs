//! Failpoints: named places on the write path where a test can make the next storage step fail,
//! to prove that a failed append, index write or fsync never acknowledges a write, never forks the
//! chain, and recovers on reopen.
//!
//! Each [`Store`](crate::Store) has its own set, so tests running side by side do not disturb each
//! other. Unarmed, a failpoint costs one relaxed atomic load.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{Error, Result};

/// The places that can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Failpoint {
    /// Before a batch's events and head are written (nothing of it lands).
    Append,
    /// Before the index changes the writer holds are written (the events they derive from are
    /// in the log; the index catches up from them on reopen).
    Index,
    /// After the batch is written, before the flush and fsync (nothing is known to be durable).
    Sync,
    /// While a call is answered, as a failed index read would (nothing of the call lands; the
    /// events answered before it are still appended).
    Answer,
}

/// The armed failpoints of one store.
#[derive(Debug, Default)]
pub struct Failpoints {
    any: AtomicBool,
    armed: Mutex<Vec<Failpoint>>,
}

impl Failpoints {
    /// Makes the next pass through `point` fail once.
    pub fn arm(&self, point: Failpoint) {
        if let Ok(mut armed) = self.armed.lock() {
            armed.push(point);
            self.any.store(true, Ordering::Release);
        }
    }

    /// Fails if `point` is armed (disarming it).
    pub(crate) fn check(&self, point: Failpoint) -> Result<()> {
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        let Ok(mut armed) = self.armed.lock() else {
            return Ok(());
        };
        let Some(at) = armed.iter().position(|p| *p == point) else {
            return Ok(());
        };
        armed.remove(at);
        self.any.store(!armed.is_empty(), Ordering::Release);
        Err(Error::io(
            format!("failpoint {point:?}"),
            std::io::Error::other("injected failure"),
        ))
    }
}
