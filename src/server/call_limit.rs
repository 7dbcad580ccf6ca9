//! A bound on gRPC calls in flight over every connection: a call past it is answered RESOURCE_EXHAUSTED before any handler runs, and a call's slot is held until its response body (a stream's last message) is done.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::{Layer, Service};

use crate::metrics::ServerMetrics;

/// Wraps a service in the bound; clones share the slots.
#[derive(Clone)]
pub struct CallLimitLayer {
    slots: Arc<Semaphore>,
    metrics: ServerMetrics,
}

impl CallLimitLayer {
    pub fn new(max_calls: usize, metrics: ServerMetrics) -> Self {
        CallLimitLayer { slots: Arc::new(Semaphore::new(max_calls)), metrics }
    }
}

impl<S> Layer<S> for CallLimitLayer {
    type Service = CallLimit<S>;

    fn layer(&self, inner: S) -> CallLimit<S> {
        CallLimit { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct CallLimit<S> {
    inner: S,
    layer: CallLimitLayer,
}

impl<S, B, ResBody> Service<http::Request<B>> for CallLimit<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ResBody: Body + Send + 'static,
{
    type Response = http::Response<Slotted<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Ok(permit) = self.layer.slots.clone().try_acquire_owned() else {
            self.layer.metrics.calls_refused.inc();
            let status = tonic::Status::resource_exhausted(
                "too many gRPC calls in flight on this sidecar (--max-calls); retry later",
            );
            let (parts, ()) = status.into_http::<()>().into_parts();
            return Box::pin(std::future::ready(Ok(http::Response::from_parts(parts, Slotted::Refused))));
        };
        let slot = CallSlot::new(permit, self.layer.metrics.clone());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| Slotted::Served { body, _slot: slot }))
        })
    }
}

/// A call's slot: the gauge counts it until it drops.
pub struct CallSlot {
    _permit: OwnedSemaphorePermit,
    metrics: ServerMetrics,
}

impl CallSlot {
    fn new(permit: OwnedSemaphorePermit, metrics: ServerMetrics) -> Self {
        metrics.calls.inc();
        CallSlot { _permit: permit, metrics }
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        self.metrics.calls.dec();
    }
}

/// A response body that holds its call's slot until hyper drops it (the
/// stream ended or was reset), or the empty body of a refused call.
pub enum Slotted<B> {
    Served { body: B, _slot: CallSlot },
    Refused,
}

impl<B: Body + Unpin> Body for Slotted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        match self.get_mut() {
            Slotted::Served { body, .. } => Pin::new(body).poll_frame(cx),
            Slotted::Refused => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Slotted::Served { body, .. } => body.is_end_stream(),
            Slotted::Refused => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Slotted::Served { body, .. } => body.size_hint(),
            Slotted::Refused => SizeHint::with_exact(0),
        }
    }
}
