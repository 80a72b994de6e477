//! Failpoints: the places on the write path where a test can make the next storage step fail,
//! to prove that a failed append, index write, flush, `fsync` or head record never acknowledges
//! a write, never forks the chain, and recovers on reopen.
//!
//! Two ways to arm them: by name ([`Failpoints::arm`]: the next pass through that place fails),
//! or by count ([`Failpoints::countdown`]: the Nth step from now fails, whichever it is). Every
//! I/O call of a commit passes one step: the format marker, each event record (so failing the
//! k-th of a batch leaves a torn append: its first k-1 events without the head), the head, the
//! index batch, the flush, each file and directory `fsync`, the head record. A test that counts
//! the steps of a session ([`Failpoints::steps`]) can then fail each one in turn.
//!
//! Each [`Store`](crate::Store) has its own set, so tests running side by side do not disturb each
//! other. Unarmed, a step costs two relaxed atomic operations.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::error::{Error, Result};

/// The places that can be made to fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Failpoint {
    /// Before a batch's events and head are written (nothing of it lands).
    Append,
    /// Writing the store's format marker, before the first event of a newer format.
    Format,
    /// Appending a batch's large payloads to the value file, before any of its records (nothing
    /// of the batch lands).
    Value,
    /// Writing one event record of a batch (the batch's earlier events land, the rest and the
    /// head do not).
    Event,
    /// Writing the head over a batch's events (the events land without it; recovery moves the
    /// head over them).
    Head,
    /// Before the index changes the writer holds are written (the events they derive from are
    /// in the log; the index catches up from them on reopen).
    Index,
    /// After the batch is written, before the flush and fsync (nothing is known to be durable).
    Sync,
    /// sled's flush of its buffers.
    Flush,
    /// One `fsync` of a file or directory of the store.
    Fsync,
    /// Writing the head record outside sled, after a durable commit.
    HeadRecord,
    /// While a call is answered, as a failed index read would (nothing of the call lands; the
    /// events answered before it are still appended).
    Answer,
    /// Writing or removing one object of a replica (a shipment, a compaction): the steps
    /// before it are done, it and those after are not, as if the shipper were killed there.
    #[cfg(feature = "replicate")]
    ReplicaObject,
}

/// The armed failpoints of one store.
#[derive(Debug, Default)]
pub struct Failpoints {
    any: AtomicBool,
    armed: Mutex<Vec<Failpoint>>,
    /// Steps passed since the store opened.
    steps: AtomicU64,
    /// The step that fails (counted as `steps` counts), 0 for none.
    fail_at: AtomicU64,
}

impl Failpoints {
    #[cfg(any(test, feature = "testing"))]
    /// Makes the next pass through `point` fail once.
    pub fn arm(&self, point: Failpoint) {
        if let Ok(mut armed) = self.armed.lock() {
            armed.push(point);
            self.any.store(true, Ordering::Release);
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// Makes the `n`-th step from now fail (`n` = 1: the next one), whatever place it is; 0
    /// disarms the countdown.
    pub fn countdown(&self, n: u64) {
        let at = match n {
            0 => 0,
            n => self.steps.load(Ordering::Acquire).saturating_add(n),
        };
        self.fail_at.store(at, Ordering::Release);
        if n > 0 {
            self.any.store(true, Ordering::Release);
        } else {
            self.settle();
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// How many steps have been passed since the store opened.
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Acquire)
    }

    /// Passes one step at `point`: fails if the countdown ends here or `point` is armed
    /// (disarming it).
    pub(crate) fn check(&self, point: Failpoint) -> Result<()> {
        let step = self.steps.fetch_add(1, Ordering::AcqRel) + 1;
        if !self.any.load(Ordering::Acquire) {
            return Ok(());
        }
        if self
            .fail_at
            .compare_exchange(step, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.settle();
            return Err(injected(point, Some(step)));
        }
        let Ok(mut armed) = self.armed.lock() else {
            return Ok(());
        };
        let Some(at) = armed.iter().position(|p| *p == point) else {
            return Ok(());
        };
        armed.remove(at);
        drop(armed);
        self.settle();
        Err(injected(point, None))
    }

    /// Clears `any` when nothing is armed any more.
    fn settle(&self) {
        let Ok(armed) = self.armed.lock() else {
            return;
        };
        let counting = self.fail_at.load(Ordering::Acquire) != 0;
        self.any
            .store(!armed.is_empty() || counting, Ordering::Release);
    }
}

fn injected(point: Failpoint, step: Option<u64>) -> Error {
    let what = match step {
        Some(step) => format!("failpoint {point:?} (step {step})"),
        None => format!("failpoint {point:?}"),
    };
    Error::io(what, std::io::Error::other("injected failure"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_countdown_fails_exactly_the_nth_step_once_and_a_named_point_its_next_pass() {
        let points = Failpoints::default();
        points.check(Failpoint::Event).expect("unarmed");
        assert_eq!(points.steps(), 1);
        points.countdown(3);
        points.check(Failpoint::Event).expect("step 2");
        points.check(Failpoint::Head).expect("step 3");
        let failed = points
            .check(Failpoint::Fsync)
            .expect_err("step 4 is the third from arming");
        assert!(failed.to_string().contains("Fsync (step 4)"), "{failed}");
        points.check(Failpoint::Fsync).expect("once only");
        points.arm(Failpoint::Head);
        points.check(Failpoint::Event).expect("another place");
        points.check(Failpoint::Head).expect_err("the armed place");
        points.check(Failpoint::Head).expect("once only");
        points.countdown(2);
        points.countdown(0);
        points.check(Failpoint::Event).expect("disarmed");
        points.check(Failpoint::Event).expect("disarmed");
        assert!(!points.any.load(Ordering::Acquire));
        assert_eq!(points.steps(), 10);
    }
}
