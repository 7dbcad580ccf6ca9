//! A bound on ObjectService calls in flight, taken before a body is read: a write's body (up to 3 MiB) is decoded only once the call has a slot, and the calls past the bound wait their turn holding no body.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Semaphore;
use tonic::server::NamedService;
use tower::Service;

use crate::metrics::ServerMetrics;

/// Write calls decoded or running at once, over every connection. Each may
/// hold a body of up to 3 MiB + 64 KiB (`grpc::MAX_WRITE_MESSAGE_BYTES`), so
/// write bodies take at most about 100 MiB of the pod's memory, where
/// `--max-calls` alone allowed 4,096 of them (12 GiB). A write's own time is
/// the API server's round trip (milliseconds), so 32 at once carry
/// thousands of writes a second.
pub const MAX_WRITE_CALLS: usize = 32;

/// Wraps a service (the ObjectService routes); clones share the slots.
#[derive(Clone)]
pub struct WriteCallLimit<S> {
    inner: S,
    slots: Arc<Semaphore>,
    metrics: ServerMetrics,
}

impl<S> WriteCallLimit<S> {
    pub fn new(inner: S, max_calls: usize, metrics: ServerMetrics) -> Self {
        WriteCallLimit { inner, slots: Arc::new(Semaphore::new(max_calls)), metrics }
    }
}

impl<S: NamedService> NamedService for WriteCallLimit<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for WriteCallLimit<S>
where
    S: Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The clone that was made ready is the one that serves this call
        // (tower's rule); a fresh clone stays for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let (slots, metrics) = (self.slots.clone(), self.metrics.clone());
        Box::pin(async move {
            let waiting = Counted::new(&metrics.write_calls_waiting);
            // Never an error: the semaphore is never closed.
            let _permit = slots.acquire_owned().await;
            drop(waiting);
            let _running = Counted::new(&metrics.write_calls);
            inner.call(request).await
        })
    }
}

/// Counts in a gauge while it lives: a call dropped while it waits (its
/// client went away) leaves the gauge as a finished one does.
struct Counted<'a>(&'a Gauge);

impl<'a> Counted<'a> {
    fn new(gauge: &'a Gauge) -> Self {
        gauge.inc();
        Counted(gauge)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::*;

    /// A stand-in for the ObjectService routes that takes a while per call
    /// and records how many calls it ran at once.
    #[derive(Clone, Default)]
    struct SlowService {
        running: Arc<AtomicUsize>,
        most: Arc<AtomicUsize>,
    }

    impl NamedService for SlowService {
        const NAME: &'static str = "test.Slow";
    }

    impl Service<http::Request<()>> for SlowService {
        type Response = ();
        type Error = std::convert::Infallible;
        type Future = Pin<Box<dyn Future<Output = Result<(), Self::Error>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            let (running, most) = (self.running.clone(), self.most.clone());
            Box::pin(async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn calls_past_the_slots_should_wait_their_turn_and_all_be_served() {
        let inner = SlowService::default();
        let metrics = ServerMetrics::default();
        let service = WriteCallLimit::new(inner.clone(), 4, metrics.clone());
        let calls: Vec<_> = (0..40)
            .map(|_| {
                let mut service = service.clone();
                tokio::spawn(async move { service.call(http::Request::new(())).await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!((metrics.write_calls.get(), metrics.write_calls_waiting.get()), (4, 36));
        for call in calls {
            call.await.unwrap().unwrap();
        }
        assert_eq!(inner.most.load(Ordering::SeqCst), 4, "never more than the slots at once");
        assert_eq!((metrics.write_calls.get(), metrics.write_calls_waiting.get()), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_while_it_waits_should_leave_the_gauges_as_they_were() {
        let metrics = ServerMetrics::default();
        let mut service = WriteCallLimit::new(SlowService::default(), 1, metrics.clone());
        let first = tokio::spawn(service.call(http::Request::new(())));
        let waiting = tokio::spawn(service.call(http::Request::new(())));
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(metrics.write_calls_waiting.get(), 1);
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(metrics.write_calls_waiting.get(), 0);
        first.await.unwrap().unwrap();
        assert_eq!(metrics.write_calls.get(), 0);
    }
}
