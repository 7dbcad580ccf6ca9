//! A client that records the method and path of every request it sends to
//! the real API server: to count the writes a component makes, which the
//! objects alone cannot show (an update that changes nothing leaves no trace).
//!
//! It sits where kube's HTTP service sits (`Client::new`), so TLS and
//! authentication stay the real client's.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::{Method, Request, Response};
use kube::Client;
use kube::client::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The requests sent so far, in order: method and path (no query).
#[derive(Clone, Default)]
pub struct RequestLog {
    sent: Arc<Mutex<Vec<(Method, String)>>>,
}

impl RequestLog {
    /// How many requests with `method` went to `path` so far.
    pub fn count(&self, method: &Method, path: &str) -> usize {
        self.sent.lock().unwrap().iter().filter(|(m, p)| m == method && p == path).count()
    }
}

/// A client through `real` that logs each request it sends.
pub fn client(real: &Client) -> (Client, RequestLog) {
    let log = RequestLog::default();
    let service = Logging { real: real.clone(), log: log.clone() };
    (Client::new(service, real.default_namespace()), log)
}

#[derive(Clone)]
struct Logging {
    real: Client,
    log: RequestLog,
}

impl tower::Service<Request<Body>> for Logging {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        self.log.sent.lock().unwrap().push((request.method().clone(), request.uri().path().to_owned()));
        let real = self.real.clone();
        Box::pin(async move { Ok(real.send(request).await?) })
    }
}
