//! A background thread with a status others read and a stop it heeds: what the shipper and the
//! follower each run as.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{Error, Result};

struct Board<S> {
    status: S,
    stop: bool,
}

type Shared<S> = (Mutex<Board<S>>, Condvar);

/// The thread's side: its status to update, and whether it was asked to stop.
pub(crate) struct Control<S>(Arc<Shared<S>>);

impl<S> Control<S> {
    fn board(&self) -> MutexGuard<'_, Board<S>> {
        self.0.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the owner asked the thread to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.board().stop
    }

    /// Changes the status.
    pub(crate) fn update<T>(&self, change: impl FnOnce(&mut S) -> T) -> T {
        change(&mut self.board().status)
    }

    /// Waits `timeout`, or less if a stop is asked for; returns whether one was.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let board = self.board();
        if board.stop {
            return true;
        }
        let (board, _) = self
            .0
            .1
            .wait_timeout(board, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        board.stop
    }
}

/// The owner's side: the status, and a stop that waits for the thread to end.
pub(crate) struct Worker<S> {
    shared: Arc<Shared<S>>,
    thread: Option<JoinHandle<()>>,
}

impl<S: Clone + Send + 'static> Worker<S> {
    /// Starts `run` on a thread named `name` with the first `status`.
    pub(crate) fn spawn(
        name: &str,
        status: S,
        run: impl FnOnce(&Control<S>) + Send + 'static,
    ) -> Result<Worker<S>> {
        let shared = Arc::new((
            Mutex::new(Board {
                status,
                stop: false,
            }),
            Condvar::new(),
        ));
        let control = Control(shared.clone());
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&control))
            .map_err(|e| Error::io(format!("the {name} thread"), e))?;
        Ok(Worker {
            shared,
            thread: Some(thread),
        })
    }

    /// The status now.
    pub(crate) fn status(&self) -> S {
        Control(self.shared.clone()).board().status.clone()
    }

    /// A handle that reads the status after the worker is moved.
    pub(crate) fn watcher(&self) -> impl Fn() -> S + Send + Sync + 'static
    where
        S: Sync,
    {
        let control = Control(self.shared.clone());
        move || control.board().status.clone()
    }
}

impl<S> Worker<S> {
    /// Asks the thread to stop and waits for it to end.
    pub(crate) fn halt(&mut self) {
        Control(self.shared.clone()).board().stop = true;
        self.shared.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<S> Drop for Worker<S> {
    fn drop(&mut self) {
        self.halt();
    }
}
