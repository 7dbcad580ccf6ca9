//! gRPC request metrics as a tower layer: calls by method and status code, and their latency.
//!
//! The code is read from the response headers: tonic sends every error a
//! handler returns as a trailers-only response, so the code is there; a
//! response without `grpc-status` in its headers counts as `Ok` (its status
//! comes later in the trailers: a stream that fails midway is counted as
//! opened fine). The latency is the time until the response headers, which
//! for a stream is the time to open it.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandledLabels {
    pub grpc_service: String,
    pub grpc_method: String,
    pub grpc_code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub grpc_service: String,
    pub grpc_method: String,
}

/// 50 µs to about 13 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(5e-5, 4.0, 10))
}

#[derive(Clone)]
pub struct GrpcMetricsLayer {
    handled: Family<HandledLabels, Counter>,
    seconds: Family<MethodLabels, Histogram, fn() -> Histogram>,
    /// The paths (`/service/Method`) the server routes; any other path is
    /// counted under one label value, so a client calling made-up methods
    /// cannot grow the families (gRFC A66's rule).
    served: Arc<HashSet<String>>,
}

impl GrpcMetricsLayer {
    pub fn register(registry: &mut Registry) -> Self {
        let layer = GrpcMetricsLayer {
            handled: Family::default(),
            seconds: Family::new_with_constructor(latency_histogram),
            served: Arc::default(),
        };
        registry.register(
            "grpc_server_handled",
            "gRPC calls answered, by service, method and status code",
            layer.handled.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Time until a gRPC call's response headers (for a stream: until it opened)",
            layer.seconds.clone(),
        );
        layer
    }

    /// This layer, labelling the calls of `methods` (paths `/service/Method`)
    /// by name and every other path as `unknown`.
    pub fn serving(&self, methods: impl IntoIterator<Item = String>) -> Self {
        GrpcMetricsLayer { served: Arc::new(methods.into_iter().collect()), ..self.clone() }
    }
}

impl<S> Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics { inner, layer: self.clone() }
    }
}

#[derive(Clone)]
pub struct GrpcMetrics<S> {
    inner: S,
    layer: GrpcMetricsLayer,
}

/// Service and method of a served gRPC path; every other path shares one
/// label value.
fn service_and_method(path: &str, served: &HashSet<String>) -> (String, String) {
    match path.trim_start_matches('/').split_once('/') {
        Some((service, method)) if served.contains(path) => (service.to_string(), method.to_string()),
        _ => ("unknown".to_string(), "unknown".to_string()),
    }
}

impl<S, B, ResBody> Service<http::Request<B>> for GrpcMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    ResBody: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (service, method) = service_and_method(request.uri().path(), &self.layer.served);
        let started = Instant::now();
        let response = self.inner.call(request);
        let layer = self.layer.clone();
        Box::pin(async move {
            let response = response.await;
            let code = match &response {
                Ok(response) => response
                    .headers()
                    .get("grpc-status")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.parse::<i32>().ok())
                    .map_or(tonic::Code::Ok, tonic::Code::from_i32),
                Err(_) => tonic::Code::Unknown,
            };
            let method_labels = MethodLabels { grpc_service: service, grpc_method: method };
            layer.seconds.get_or_create(&method_labels).observe(started.elapsed().as_secs_f64());
            let handled = HandledLabels {
                grpc_service: method_labels.grpc_service,
                grpc_method: method_labels.grpc_method,
                grpc_code: format!("{code:?}"),
            };
            layer.handled.get_or_create(&handled).inc();
            response
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn served_paths_should_split_into_service_and_method_and_others_should_collapse() {
        let served: HashSet<String> = ["/workqueue.v1.WorkQueueService/Add".to_string()].into();
        let unknown = ("unknown".to_string(), "unknown".to_string());
        assert_eq!(
            service_and_method("/workqueue.v1.WorkQueueService/Add", &served),
            ("workqueue.v1.WorkQueueService".into(), "Add".into())
        );
        assert_eq!(service_and_method("/workqueue.v1.WorkQueueService/Made-up-1", &served), unknown);
        assert_eq!(service_and_method("/evil.Service/x", &served), unknown);
        assert_eq!(service_and_method("/", &served), unknown);
    }
}
