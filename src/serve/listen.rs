//! The accept loop: every connection is served by hyper with a deadline for its request headers,
//! and at most [`Connections::max`] connections are open at once.
//!
//! Without either, connections that never finish their headers (sent a byte at a time, or not at
//! all) held a descriptor each for ever: enough of them and every legitimate client timed out.
//! Now a connection whose request headers are not complete within
//! [`Connections::header_timeout`] is closed (also an idle kept-alive one: a client's pool opens
//! another), and past the cap the server accepts nothing until a connection closes, so the
//! kernel's backlog holds the next clients instead of the process running out of descriptors.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// The default deadline for a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// The default cap on open connections.
pub const MAX_CONNECTIONS: usize = 512;

/// How connections are bounded.
#[derive(Clone, Copy, Debug)]
pub struct Connections {
    /// A connection that has not sent a whole request head within this is closed.
    pub header_timeout: Duration,
    /// At most this many connections are open at once.
    pub max: usize,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout: HEADER_TIMEOUT,
            max: MAX_CONNECTIONS,
        }
    }
}

/// Serves `app` on `listener` until `stop`, then waits for the open connections to finish
/// (the caller bounds that wait).
pub(crate) async fn accept(
    listener: TcpListener,
    app: Router,
    limits: Connections,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max.max(1)));
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = stop.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => {
                    // Out of descriptors, or a connection reset before it was taken: wait a
                    // moment rather than spin.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|request: axum::http::Request<Incoming>| request.map(Body::new)),
        );
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
