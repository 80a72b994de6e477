//! When the server stops: on SIGTERM or SIGINT, or after `--idle-exit` seconds with no request
//! in progress (an attached client's lasts while it stays connected). A server whose store a
//! storage failure stopped says so on stderr at once; with an idle exit (the one a client starts)
//! it then exits as soon as no request is in progress: every call it would take is refused until
//! the store is reopened, and the next client's server reopens it, which recovers to the last
//! event that reached the log.
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
    /// Of those, attached clients' bodies ([`Activity::attach`]), which last as long as their
    /// client does.
    attached: AtomicU64,
    /// Milliseconds after `started` when a request last began or ended.
    last_ms: AtomicU64,
}

impl Activity {
    /// No request yet.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            started: Instant::now(),
            in_flight: AtomicU64::new(0),
            attached: AtomicU64::new(0),
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

    /// Marks an attached client's body as begun: a request in progress, for as long as its
    /// client stays, that a server whose store stopped does not wait for (see [`Attached`]).
    pub fn attach(self: &Arc<Activity>) -> Attached {
        self.attached.fetch_add(1, Ordering::SeqCst);
        Attached(self.begin())
    }

    /// Whether every request in progress is an attached client's (or none is).
    fn only_attached(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) <= self.attached.load(Ordering::SeqCst)
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

/// An attached client's body in progress; the client stops counting as attached when dropped.
#[derive(Debug)]
pub struct Attached(InFlight);

impl Drop for Attached {
    fn drop(&mut self) {
        (self.0).0.attached.fetch_sub(1, Ordering::SeqCst);
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

/// Why the store a server holds was stopped by a storage failure, once it was.
pub type Stopped = Arc<dyn Fn() -> Option<String> + Send + Sync>;

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
            Some(limit) => idle(&activity, limit).await,
            None => std::future::pending().await,
        }
    };
    let stopped = async {
        match exit.stopped {
            Some(stopped) => store_stopped(&activity, stopped, exit.after.is_some()).await,
            None => std::future::pending().await,
        }
    };
    let reason = tokio::select! {
        name = signals.next() => Reason::Signal(name),
        reason = idle => reason,
        reason = stopped => reason,
        () = stop.cancelled() => Reason::Cancelled,
    };
    stop.cancel();
    reason
}

async fn idle(activity: &Activity, limit: Duration) -> Reason {
    let tick = limit.clamp(Duration::from_millis(10), Duration::from_millis(250));
    loop {
        tokio::time::sleep(tick).await;
        if activity.idle_for() >= limit {
            return Reason::Idle(limit);
        }
    }
}

/// How often a server looks whether its store was stopped.
const STOPPED_TICK: Duration = Duration::from_millis(100);

/// Once `stopped` says the store was stopped: says why on stderr, then, when the server `exits`
/// on its own, returns as soon as no call is in progress (else never). Attached clients are not
/// waited for: one that stays for a whole session (an MCP host) would keep every call refused;
/// its attachment ends with the server, and its next call starts a server that reopens the
/// store.
async fn store_stopped(activity: &Activity, stopped: Stopped, exits: bool) -> Reason {
    let cause = loop {
        tokio::time::sleep(STOPPED_TICK).await;
        if let Some(cause) = stopped() {
            break cause;
        }
    };
    eprintln!(
        "mnemo serve: a storage failure stopped the store ({cause}); every call is refused until the store is reopened: {}",
        match exits {
            true =>
                "this server exits once no call is in progress, and the next client's server reopens it",
            false =>
                "restart this server, which reopens it and recovers to the last event that reached the log",
        }
    );
    if !exits {
        return std::future::pending().await;
    }
    loop {
        if activity.only_attached() {
            return Reason::StoreStopped;
        }
        tokio::time::sleep(STOPPED_TICK).await;
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

    #[test]
    fn an_attached_client_is_in_progress_but_not_a_call() {
        let activity = Activity::new();
        let attached = activity.attach();
        assert_eq!(activity.idle_for(), Duration::ZERO);
        assert!(activity.only_attached());
        let call = activity.begin();
        assert!(!activity.only_attached());
        drop(call);
        assert!(activity.only_attached());
        drop(attached);
        assert!(activity.only_attached());
        assert!(activity.idle_for() < Duration::from_secs(1));
    }
}
