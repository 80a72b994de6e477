//! Catching a panic in a dependency without printing it.
//!
//! sled 0.34 panics on some damaged files (an assertion while it reads its log on open, a failed
//! `fsync` when its last handle drops). Mnemo catches those panics and returns a clear error, so
//! the default panic hook's message (and backtrace) on stderr would only repeat it as noise. The
//! first catch installs a hook that stays silent for a panic on a thread inside
//! [`catch_quietly`] and hands every other panic to the hook that was installed before.

use std::any::Any;
use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// Whether this thread is inside [`catch_quietly`].
    static QUIET: Cell<bool> = const { Cell::new(false) };
}

static HOOK: Once = Once::new();

/// Runs `f`, returning the payload of a panic in it instead of unwinding further, with nothing
/// printed for that panic.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> Result<T, Box<dyn Any + Send>> {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if !QUIET.with(Cell::get) {
                previous(info);
            }
        }));
    });
    let outer = QUIET.with(|q| q.replace(true));
    let out = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(outer));
    out
}

/// The text of a panic's payload (`"no message"` for one that is neither `&str` nor `String`).
pub fn message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caught_panic_gives_its_message_and_the_flag_is_restored() {
        let caught = catch_quietly(|| panic!("sled said {}", 7)).expect_err("it panicked");
        assert_eq!(message(&*caught), "sled said 7");
        assert!(!QUIET.with(Cell::get), "the thread is loud again");
        assert_eq!(catch_quietly(|| 5).expect("no panic"), 5);
    }
}
