//! An API server that cuts every streaming list short, played by the real one: a client whose
//! answer to each watch with `sendInitialEvents=true` ends after half of its first chunk, never
//! reaching the bookmark that ends the list's objects, as when the API server closes a watcher
//! that does not keep up ("Forcing watcher close due to unresponsiveness"). The sidecar's probe of
//! streaming lists (one object name that does not exist) passes untouched. Every request is
//! recorded.
//!
//! It sits where kube's HTTP service sits (`Client::new`), so TLS and authentication stay the real
//! client's; it asks for answers without gzip, so that the cut falls between bytes of the answer
//! itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http::header::ACCEPT_ENCODING;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The field selector of the sidecar's streaming-list probe, which is answered whole.
const PROBE: &str = "workqueue-sidecar-streaming-list-probe";

/// The requests sent so far, in order, by path and query.
#[derive(Clone, Default)]
pub struct Sent {
    requests: Arc<Mutex<Vec<String>>>,
}

impl Sent {
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Whether a request is a streaming list (other than the probe).
pub fn is_streaming_list(path_and_query: &str) -> bool {
    path_and_query.contains("sendInitialEvents=true") && !path_and_query.contains(PROBE)
}

/// Whether a request is a list in pages (a plain list with a page size).
pub fn is_list_in_pages(path_and_query: &str) -> bool {
    !path_and_query.contains("watch=") && path_and_query.contains("limit=")
}

/// A client through the API server that cuts streaming lists, and what it was sent.
pub fn client(real: &Client) -> (Client, Sent) {
    let sent = Sent::default();
    let service = Cutting { real: real.clone(), sent: sent.clone() };
    (Client::new(service, real.default_namespace()), sent)
}

#[derive(Clone)]
struct Cutting {
    real: Client,
    sent: Sent,
}

impl tower::Service<Request<Body>> for Cutting {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let (real, sent) = (self.real.clone(), self.sent.clone());
        Box::pin(async move {
            request.headers_mut().remove(ACCEPT_ENCODING);
            let path_and_query = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
            sent.requests.lock().unwrap().push(path_and_query.clone());
            let response = real.send(request).await?;
            if !is_streaming_list(&path_and_query) || !response.status().is_success() {
                return Ok(response);
            }
            // The list's objects end with its bookmark, so half of the first
            // chunk never holds it; the rest of the answer is dropped unread.
            let (parts, mut body) = response.into_parts();
            let mut first = match body.frame().await {
                Some(frame) => frame?.into_data().unwrap_or_default(),
                None => Default::default(),
            };
            first.truncate(first.len() / 2);
            Ok(Response::from_parts(parts, Body::from(first)))
        })
    }
}
