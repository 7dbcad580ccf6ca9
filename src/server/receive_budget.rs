//! A bound on the bytes of gRPC messages being received at once, over every call: a message's size is reserved from one budget when its length prefix arrives, before any of its bytes are read, and given back once the message is whole; a message the budget cannot hold then is refused.
//!
//! A gRPC message is decoded from one buffer that grows to its full size
//! (up to 16 MiB here) before the handler sees it. Without this, 4,096
//! calls in flight (`--max-calls`) could each be half-way through a 16 MiB
//! message: 64 GiB. The whole message is reserved up front, not byte by
//! byte, so senders that each hold part of the budget never wait on each
//! other for the rest. A message that does not fit is refused
//! (RESOURCE_EXHAUSTED), not kept waiting: a waiting stream's unread bytes
//! would fill its connection's HTTP/2 window and stall every other call on
//! that connection, the ones holding the budget included. A message whose
//! bytes stop coming is cut off after `MESSAGE_WITHIN`, so a stalled sender
//! holds its share for a bounded time.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use tower::{BoxError, Layer, Service};

use crate::metrics::ServerMetrics;

/// The bytes of messages being received at once, over every call: four of
/// the largest message a service takes (16 MiB).
pub const RECEIVE_BUDGET_BYTES: usize = 64 << 20;

/// How long a message may take to arrive once its share of the budget is
/// reserved; past it the call fails (DEADLINE_EXCEEDED).
pub const MESSAGE_WITHIN: Duration = Duration::from_secs(30);

/// A gRPC message's length prefix: a compression flag and a 32-bit length.
const PREFIX_BYTES: usize = 5;

/// Wraps a service so that every request body draws on one budget; clones
/// share it.
#[derive(Clone)]
pub struct ReceiveBudgetLayer {
    budget: Arc<Budget>,
}

impl ReceiveBudgetLayer {
    pub fn new(limit: usize, metrics: ServerMetrics) -> Self {
        let budget = Budget {
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            receiving: metrics.receiving_bytes,
            refused: metrics.receiving_refused,
        };
        ReceiveBudgetLayer { budget: Arc::new(budget) }
    }
}

/// The bytes every request body draws on, and the metrics that count them.
struct Budget {
    slots: Arc<Semaphore>,
    limit: usize,
    receiving: Gauge,
    refused: Counter,
}

impl Budget {
    /// The position after a prefix announcing `length` bytes: the message
    /// under its share of the budget (at most the whole budget: a longer
    /// message is refused by the decoder from its prefix anyway), `None`
    /// for an empty one, or RESOURCE_EXHAUSTED when the budget cannot hold
    /// it now.
    fn reserve(self: &Arc<Self>, length: usize) -> Result<Option<Position>, BoxError> {
        if length == 0 {
            return Ok(None);
        }
        let share = u32::try_from(length.min(self.limit)).unwrap_or(u32::MAX);
        let Ok(permit) = self.slots.clone().try_acquire_many_owned(share) else {
            self.refused.inc();
            return Err(Box::new(tonic::Status::resource_exhausted(format!(
                "the sidecar's receive budget ({} bytes over every call) cannot hold a message of {length} bytes now; retry",
                self.limit
            ))));
        };
        self.receiving.inc_by(i64::from(share));
        let reserved = Reserved { permit, budget: self.clone(), due: Instant::now() + MESSAGE_WITHIN, timer: None };
        Ok(Some(Position::Message { left: length, reserved }))
    }
}

impl<S> Layer<S> for ReceiveBudgetLayer {
    type Service = ReceiveBudget<S>;

    fn layer(&self, inner: S) -> ReceiveBudget<S> {
        ReceiveBudget { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct ReceiveBudget<S> {
    inner: S,
    layer: ReceiveBudgetLayer,
}

impl<S, B> Service<http::Request<B>> for ReceiveBudget<S>
where
    S: Service<http::Request<Budgeted<B>>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let budget = &self.layer.budget;
        self.inner.call(request.map(|body| Budgeted::new(body, budget.clone())))
    }
}

/// The message being received: its share of the budget, and its deadline.
struct Reserved {
    permit: OwnedSemaphorePermit,
    budget: Arc<Budget>,
    /// When all of it must have come.
    due: Instant,
    /// The timer towards `due`, made only once the message's bytes run
    /// short: most messages come in one read and never need it.
    timer: Option<Pin<Box<Sleep>>>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        self.budget.receiving.dec_by(i64::try_from(self.permit.num_permits()).unwrap_or(i64::MAX));
    }
}

/// Where a request body is in its stream of length-prefixed messages.
enum Position {
    /// Reading a prefix; this many of its bytes came so far.
    Prefix { seen: usize, bytes: [u8; PREFIX_BYTES] },
    /// Passing a message on under its reservation, `left` bytes to come.
    Message { left: usize, reserved: Reserved },
}

impl Position {
    /// The start of the next message's prefix.
    fn next_prefix() -> Self {
        Position::Prefix { seen: 0, bytes: [0; PREFIX_BYTES] }
    }
}

/// A request body that passes its messages on only under their share of
/// the budget.
pub struct Budgeted<B> {
    inner: B,
    budget: Arc<Budget>,
    position: Position,
    /// Bytes read from `inner` and not passed on yet.
    pending: Bytes,
}

impl<B> Budgeted<B> {
    fn new(inner: B, budget: Arc<Budget>) -> Self {
        Budgeted { inner, budget, position: Position::next_prefix(), pending: Bytes::new() }
    }

    /// Moves along `pending`: a piece of it to pass on, or `None` when all
    /// of it went.
    fn step(&mut self) -> Result<Option<Bytes>, BoxError> {
        if self.pending.is_empty() {
            return Ok(None);
        }
        match &mut self.position {
            Position::Prefix { seen, bytes } => {
                let take = (PREFIX_BYTES - *seen).min(self.pending.len());
                bytes[*seen..*seen + take].copy_from_slice(&self.pending[..take]);
                *seen += take;
                if *seen == PREFIX_BYTES {
                    let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
                    if let Some(position) = self.budget.reserve(length)? {
                        self.position = position;
                    } else {
                        *seen = 0;
                    }
                }
                Ok(Some(self.pending.split_to(take)))
            }
            Position::Message { left, .. } => {
                let take = (*left).min(self.pending.len());
                *left -= take;
                if *left == 0 {
                    // Whole: the decoder takes it now. The share goes back.
                    self.position = Position::next_prefix();
                }
                Ok(Some(self.pending.split_to(take)))
            }
        }
    }
}

impl<B> Body for Budgeted<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if let Some(piece) = this.step()? {
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            // Everything read so far went on: read more, within the
            // message's deadline when one is under way.
            let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(frame) => frame,
                Poll::Pending => {
                    if let Position::Message { reserved, .. } = &mut this.position
                        && reserved
                            .timer
                            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(reserved.due)))
                            .as_mut()
                            .poll(cx)
                            .is_ready()
                    {
                        return Poll::Ready(Some(Err(Box::new(tonic::Status::deadline_exceeded(format!(
                            "a message's bytes did not all arrive within {MESSAGE_WITHIN:?} of its length prefix"
                        ))))));
                    }
                    return Poll::Pending;
                }
            };
            match frame {
                None => return Poll::Ready(None),
                Some(Err(err)) => return Poll::Ready(Some(Err(err.into()))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.pending = data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pending.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};
    use tokio::sync::mpsc;
    use tokio_stream::wrappers::ReceiverStream;

    use super::*;

    type Sent = Result<Frame<Bytes>, std::convert::Infallible>;
    type TestBody = Budgeted<StreamBody<ReceiverStream<Sent>>>;

    /// A body whose chunks the test sends one by one.
    fn body(layer: &ReceiveBudgetLayer) -> (mpsc::Sender<Sent>, TestBody) {
        let (tx, rx) = mpsc::channel(64);
        (tx, Budgeted::new(StreamBody::new(ReceiverStream::new(rx)), layer.budget.clone()))
    }

    fn message(payload: &[u8]) -> Vec<u8> {
        let mut framed = vec![0];
        framed.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        framed.extend_from_slice(payload);
        framed
    }

    async fn send(tx: &mpsc::Sender<Sent>, bytes: &[u8]) {
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(bytes)))).await.unwrap();
    }

    /// What the body passes on within a moment, as bytes.
    async fn passed(body: &mut TestBody) -> Vec<u8> {
        let mut out = Vec::new();
        while let Ok(Some(frame)) = tokio::time::timeout(Duration::from_millis(10), body.frame()).await {
            out.extend_from_slice(&frame.unwrap().into_data().unwrap());
        }
        out
    }

    #[tokio::test]
    async fn messages_should_pass_unchanged_however_their_bytes_are_cut() {
        let layer = ReceiveBudgetLayer::new(64, ServerMetrics::default());
        let (tx, body) = body(&layer);
        let stream: Vec<u8> = [message(b"hello"), message(b""), message(&[7; 40]), message(b"end")].concat();
        for chunk in stream.chunks(3) {
            send(&tx, chunk).await;
        }
        drop(tx);
        let all = body.collect().await.unwrap().to_bytes();
        assert_eq!(all.as_ref(), stream.as_slice());
        assert_eq!(layer.budget.slots.available_permits(), 64, "every share came back");
        assert_eq!(layer.budget.receiving.get(), 0);
    }

    /// Two messages that do not both fit: the second is refused at its
    /// prefix, none of its bytes read, and fits once the first is whole.
    #[tokio::test]
    async fn a_message_past_the_budget_should_be_refused_at_its_prefix_until_one_is_whole() {
        let metrics = ServerMetrics::default();
        let layer = ReceiveBudgetLayer::new(10, metrics.clone());
        let (first_tx, mut first) = body(&layer);
        let (one, two) = (message(&[1; 8]), message(&[2; 8]));
        send(&first_tx, &one[..9]).await;
        assert_eq!(passed(&mut first).await, one[..9]);
        assert_eq!(metrics.receiving_bytes.get(), 8);
        let (second_tx, mut second) = body(&layer);
        send(&second_tx, &two).await;
        let refused = second.frame().await.unwrap().unwrap_err();
        let status = refused.downcast_ref::<tonic::Status>().expect("a status for tonic to send");
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert_eq!(metrics.receiving_refused.get(), 1);
        send(&first_tx, &one[9..]).await;
        assert_eq!(passed(&mut first).await, one[9..]);
        assert_eq!(metrics.receiving_bytes.get(), 0, "the first's share came back");
        let (third_tx, mut third) = body(&layer);
        send(&third_tx, &two).await;
        assert_eq!(passed(&mut third).await, two, "now it fits");
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_whose_bytes_stop_should_fail_after_its_deadline_and_give_its_share_back() {
        let layer = ReceiveBudgetLayer::new(64, ServerMetrics::default());
        let (tx, mut body) = body(&layer);
        send(&tx, &message(&[1; 32])[..10]).await;
        for _ in 0..2 {
            body.frame().await.unwrap().unwrap();
        }
        let stalled = tokio::time::timeout(MESSAGE_WITHIN * 2, body.frame()).await.expect("cut off before");
        let err = stalled.unwrap().unwrap_err();
        let status = err.downcast_ref::<tonic::Status>().expect("a status for tonic to send");
        assert_eq!(status.code(), tonic::Code::DeadlineExceeded);
        assert!(status.message().contains("did not all arrive"), "{status:?}");
        drop(body);
        assert_eq!(layer.budget.slots.available_permits(), 64);
    }
}
