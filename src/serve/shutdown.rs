//! When the server stops: on SIGTERM or SIGINT, or after `--idle-exit` seconds with no request
//! in progress (an attached client's lasts while it stays connected). A server with an idle exit
//! (the one a client starts) whose store a storage failure stopped exits as soon as no request
//! is in progress: every call it would take is refused until the store is reopened, and the next
//! client's server reopens it, which recovers to the last event that reached the log.
//!
//! Stopping is graceful: the listener stops accepting, calls in flight run to their answer, MCP
//! streams are closed (through the cancellation token rmcp watches), and then the store closes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

/// Requests in progress and the time of the last one, for `--idle-exit`.
#[derive(Debug)]
pub struct Activity {
    started: Instant,
    in_flight: AtomicU64,
    /// Milliseconds after `started` when a request last began or ended.
    last_ms: AtomicU64,
}

impl Activity {
    /// No request yet.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            started: Instant::now(),
            in_flight: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Marks a request as begun; the guard marks it ended when dropped.
    pub fn begin(self: &Arc<Activity>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.last_ms.store(self.now_ms(), Ordering::SeqCst);
        InFlight(Arc::clone(self))
    }

    /// How long no request has been in progress (zero while one is).
    pub fn idle_for(&self) -> Duration {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return Duration::ZERO;
        }
        let since = self
            .now_ms()
            .saturating_sub(self.last_ms.load(Ordering::SeqCst));
        Duration::from_millis(since)
    }
}

/// A request in progress.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.last_ms.store(self.0.now_ms(), Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why the server stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// SIGTERM or SIGINT.
    Signal(&'static str),
    /// `--idle-exit`: no request for this long.
    Idle(Duration),
    /// `--idle-exit` was set and a storage failure stopped the store: no request was in
    /// progress any more.
    StoreStopped,
    /// The token was cancelled from inside the process.
    Cancelled,
}

/// The stop signals, caught from the moment this is made: make it before anyone can know the
/// server is there, or an early SIGTERM would kill the process without a clean stop.
#[derive(Debug)]
pub struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    /// Catches SIGTERM and SIGINT (Ctrl-C elsewhere). Needs the runtime.
    pub fn catch() -> std::io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    /// The next stop signal's name.
    async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.term.recv() => "SIGTERM",
                _ = self.int.recv() => "SIGINT",
            }
        }
        #[cfg(not(unix))]
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(_) => std::future::pending().await,
        }
    }
}

/// Whether the store a server holds was stopped by a storage failure.
pub type Stopped = Arc<dyn Fn() -> bool + Send + Sync>;

/// When a server exits on its own: after `after` with no request in progress, and, with `after`
/// set, as soon as none is once `stopped` says its store was stopped.
#[derive(Clone)]
pub struct IdleExit {
    /// `--idle-exit`.
    pub after: Option<Duration>,
    /// Whether the store was stopped (none for a server of many stores, each of which closes
    /// on its own).
    pub stopped: Option<Stopped>,
}

/// Waits until the server should stop, then cancels `stop` (which ends the MCP streams and the
/// listener) and says why.
pub async fn wait(
    mut signals: Signals,
    stop: CancellationToken,
    activity: Arc<Activity>,
    exit: IdleExit,
) -> Reason {
    let idle = async {
        match exit.after {
            Some(limit) => idle(&activity, limit, exit.stopped).await,
            None => std::future::pending().await,
        }
    };
    let reason = tokio::select! {
        name = signals.next() => Reason::Signal(name),
        reason = idle => reason,
        () = stop.cancelled() => Reason::Cancelled,
    };
    stop.cancel();
    reason
}

async fn idle(activity: &Activity, limit: Duration, stopped: Option<Stopped>) -> Reason {
    let tick = limit.clamp(Duration::from_millis(10), Duration::from_millis(250));
    loop {
        tokio::time::sleep(tick).await;
        let quiet = activity.idle_for();
        if quiet >= limit {
            return Reason::Idle(limit);
        }
        if quiet > Duration::ZERO && stopped.as_ref().is_some_and(|stopped| stopped()) {
            return Reason::StoreStopped;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_in_flight_is_never_idle() {
        let activity = Activity::new();
        let call = activity.begin();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(activity.idle_for(), Duration::ZERO);
        drop(call);
        std::thread::sleep(Duration::from_millis(20));
        assert!(activity.idle_for() >= Duration::from_millis(15));
    }
}
