//! The accept loop: every connection is served by hyper with a deadline for its request headers,
//! at most [`Connections::max`] connections are open at once, and each request is answered under
//! the sharing rules of [`tenancy`](super::tenancy).
//!
//! Without a deadline and a cap, connections that never finished their headers (sent a byte at a
//! time, or not at all) held a descriptor each for ever: enough of them and every legitimate
//! client timed out. Now a connection whose request headers are not complete within
//! [`Connections::header_timeout`] is closed (also an idle kept-alive one: a client's pool opens
//! another; a new connection's first head has ten seconds at most). Past the cap a new
//! connection takes the place of the one that has waited longest for a request head; when every
//! connection has a request in flight, the server accepts nothing until one closes, so the
//! kernel's backlog holds the next clients instead of the process running out of descriptors.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::tenancy::{self, IsOperator, Tenancy};

/// The default deadline for a request's headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// The most a connection buffers of what it was sent, and so the largest request head.
const MAX_BUF_SIZE: usize = 64 * 1024;

/// The default cap on open connections.
pub const MAX_CONNECTIONS: usize = 512;

/// The default grace before a request body must keep [`MIN_BODY_RATE`].
pub const BODY_GRACE: Duration = Duration::from_secs(10);

/// The default minimum average rate of a request body after its grace, in bytes a second.
pub const MIN_BODY_RATE: u64 = 64 * 1024;

/// The default budget of memory for the request bodies being read, in bytes.
pub const MAX_BODY_MEMORY: u64 = 256 * 1024 * 1024;

/// How connections, the requests on them and their bodies are bounded.
#[derive(Clone, Copy, Debug)]
pub struct Connections {
    /// A connection that has not sent a whole request head within this is closed.
    pub header_timeout: Duration,
    /// At most this many connections are open at once.
    pub max: usize,
    /// At most this many requests of one principal are in flight at once (the operator, an
    /// agent token's agent in its store, and requests without a proven token together; a
    /// principal's attached clients have as many again): 128 by default, a quarter of
    /// [`MAX_CONNECTIONS`] (lower it with [`Connections::max`]).
    pub per_principal: usize,
    /// How long a request body may take before it must keep [`Connections::min_body_rate`].
    pub body_grace: Duration,
    /// After the grace, a body must come at this many bytes a second on average (0: no
    /// minimum), or it is cut off with 408.
    pub min_body_rate: u64,
    /// At most this many bytes of request bodies are held at once, and half of it by one
    /// principal; a body over it waits briefly, then gets 503.
    pub max_body_memory: u64,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout: HEADER_TIMEOUT,
            max: MAX_CONNECTIONS,
            per_principal: MAX_CONNECTIONS / 4,
            body_grace: BODY_GRACE,
            min_body_rate: MIN_BODY_RATE,
            max_body_memory: MAX_BODY_MEMORY,
        }
    }
}

/// Serves `app` on `listener` until `stop`, then waits for the open connections to finish
/// (the caller bounds that wait). `operator` tells the operator's requests from the rest.
pub(crate) async fn accept(
    listener: TcpListener,
    app: Router,
    limits: Connections,
    operator: IsOperator,
    stop: CancellationToken,
) {
    let tenancy = Tenancy::new(limits);
    let graceful = GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // A connection buffers at most this much of what it was sent (hyper's default, ~400
        // KiB, let 500 unfinished heads hold 209 MiB; a head is far smaller): a head past it
        // is refused with 431.
        .max_buf_size(MAX_BUF_SIZE);
    loop {
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
        let place = tokio::select! {
            place = tenancy.admit() => place,
            () = stop.cancelled() => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = place.id();
        let service = {
            let (app, tenancy, operator) =
                (app.clone(), Arc::clone(&tenancy), Arc::clone(&operator));
            hyper::service::service_fn(move |request: axum::http::Request<Incoming>| {
                let answered = tenancy::serve(
                    app.clone(),
                    Arc::clone(&tenancy),
                    conn,
                    Arc::clone(&operator),
                    request,
                );
                async move { Ok::<_, std::convert::Infallible>(answered.await) }
            })
        };
        let connection = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            place.serve(connection).await;
            drop(place);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
