//! A request's body read under the sharing rules ([`Guarded`]: its memory reserved first, its pace
//! checked, its place given up when a newer request without a token needs it), and an answer's
//! body that keeps its request in flight until the last of it is sent ([`Held`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

use super::super::listen::Connections;
use super::{Cut, Ticket};

/// The error a body that was cut off reads as.
#[derive(Debug)]
struct BodyCut(String);

impl std::fmt::Display for BodyCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BodyCut {}

/// Whether reading a body failed because the sharing rules cut it off (the answer then says
/// so in place of the route's, which need not log its own).
pub(crate) fn cut_off(e: &axum::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(error) = source {
        if error.is::<BodyCut>() {
            return true;
        }
        source = error.source();
    }
    false
}

type Waiting = Pin<Box<dyn Future<Output = Result<(), Cut>> + Send>>;

enum Phase {
    /// Not polled yet.
    Start,
    /// Waiting for the declared length's memory.
    Reserving(Waiting),
    Reading,
    /// A chunk read, waiting for its memory.
    Holding(Waiting, Option<Frame<Bytes>>),
    Done,
}

/// A request body read under the sharing rules: its memory reserved first, its pace checked.
pub(super) struct Guarded {
    inner: Incoming,
    ticket: Arc<Ticket>,
    /// Its `Content-Length`, if it has one.
    declared: Option<u64>,
    phase: Phase,
    received: u64,
    started: Instant,
    timer: Pin<Box<Sleep>>,
    /// Ready when a newer request without a token took this body's place.
    made_room: Option<Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>>,
}

impl Guarded {
    pub(super) fn new(inner: Incoming, ticket: Arc<Ticket>, declared: Option<u64>) -> Guarded {
        Guarded {
            inner,
            ticket,
            declared,
            phase: Phase::Start,
            received: 0,
            started: Instant::now(),
            timer: Box::pin(tokio::time::sleep(Duration::ZERO)),
            made_room: None,
        }
    }

    /// Whether a newer request without a token took this body's place (its cut is recorded).
    fn made_room(&mut self, cx: &mut Context<'_>) -> bool {
        self.made_room
            .as_mut()
            .is_some_and(|cut| cut.as_mut().poll(cx).is_ready())
    }

    fn limits(&self) -> &Connections {
        &self.ticket.tenancy.limits
    }

    /// When the body falls below the minimum rate, given what came so far.
    fn deadline(&self) -> Option<Instant> {
        let rate = self.limits().min_body_rate;
        if rate == 0 {
            return None;
        }
        #[expect(clippy::cast_precision_loss, reason = "a pace, not a count")]
        let owed = Duration::from_secs_f64(self.received as f64 / rate as f64);
        Some(self.started + self.limits().body_grace + owed)
    }

    fn rearm(&mut self) {
        if let Some(deadline) = self.deadline() {
            self.timer.as_mut().reset(deadline);
        }
    }

    fn fail(&mut self, cut: Cut) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let why = cut.reason().to_string();
        self.ticket.cut(cut);
        self.ticket.end_body();
        self.phase = Phase::Done;
        Poll::Ready(Some(Err(Box::new(BodyCut(why)))))
    }

    /// The cut of a body whose place a newer request without a token took (recorded when it
    /// was taken; this is what the body's reader is told).
    fn room_made(&self) -> Cut {
        Cut::Busy(
            "a newer request without a proven token took this body's place while it was still coming"
                .into(),
        )
    }

    fn slow(&self) -> Cut {
        let limits = self.limits();
        Cut::Slow(format!(
            "the request body came too slowly ({} bytes in {:.1} s): after the first {} s this server reads a body at {} bytes a second or faster (--body-grace, --min-body-rate); send the body as the request goes out",
            self.received,
            self.started.elapsed().as_secs_f64(),
            limits.body_grace.as_secs_f64(),
            limits.min_body_rate
        ))
    }
}

impl HttpBody for Guarded {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        loop {
            match &mut this.phase {
                Phase::Start => {
                    match this.ticket.begin_body() {
                        Ok(made_room) => {
                            this.made_room = made_room.map(|cut| Box::pin(cut.cancelled_owned()));
                        }
                        Err(cut) => return this.fail(cut),
                    }
                    let need = this.declared.unwrap_or(0);
                    let ticket = Arc::clone(&this.ticket);
                    this.phase = Phase::Reserving(Box::pin(async move {
                        if need == 0 {
                            Ok(())
                        } else {
                            ticket.reserve(need).await
                        }
                    }));
                }
                Phase::Reserving(waiting) => match waiting.as_mut().poll(cx) {
                    Poll::Pending if this.made_room(cx) => return this.fail(this.room_made()),
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(cut)) => return this.fail(cut),
                    Poll::Ready(Ok(())) => {
                        this.started = Instant::now();
                        this.rearm();
                        this.phase = Phase::Reading;
                    }
                },
                Phase::Holding(waiting, frame) => match waiting.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(cut)) => return this.fail(cut),
                    Poll::Ready(Ok(())) => {
                        let frame = frame.take();
                        this.rearm();
                        this.phase = Phase::Reading;
                        if let Some(frame) = frame {
                            return Poll::Ready(Some(Ok(frame)));
                        }
                    }
                },
                Phase::Reading => match Pin::new(&mut this.inner).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => {
                        let len = frame.data_ref().map_or(0, |data| data.len() as u64);
                        this.received += len;
                        this.rearm();
                        if this.declared == Some(this.received) {
                            // Whole by its length: whether its reader asks again or not.
                            this.ticket.end_body();
                        }
                        if this.declared.is_none() && len > 0 {
                            match this.ticket.try_reserve(len) {
                                Ok(true) => {}
                                Ok(false) => {
                                    let ticket = Arc::clone(&this.ticket);
                                    this.phase = Phase::Holding(
                                        Box::pin(async move { ticket.reserve(len).await }),
                                        Some(frame),
                                    );
                                    continue;
                                }
                                Err(cut) => return this.fail(cut),
                            }
                        }
                        return Poll::Ready(Some(Ok(frame)));
                    }
                    Poll::Ready(Some(Err(e))) => {
                        this.ticket.end_body();
                        this.phase = Phase::Done;
                        return Poll::Ready(Some(Err(Box::new(e))));
                    }
                    Poll::Ready(None) => {
                        this.ticket.end_body();
                        this.phase = Phase::Done;
                        return Poll::Ready(None);
                    }
                    Poll::Pending => {
                        if this.made_room(cx) {
                            return this.fail(this.room_made());
                        }
                        if this.deadline().is_some() && this.timer.as_mut().poll(cx).is_ready() {
                            let cut = this.slow();
                            return this.fail(cut);
                        }
                        return Poll::Pending;
                    }
                },
                Phase::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Done) || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// An answer's body, which keeps its request in flight until the last of it is sent.
pub(super) struct Held {
    pub(super) inner: Body,
    pub(super) _ticket: Arc<Ticket>,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
