//! Tells each informer when its watch request was answered: kube-runtime's watcher reports a re-established watch and bookmarks to nobody, so a quiet, healthy informer would look stale after a failure.

use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{Request, Response};
use parking_lot::RwLock;
use tower::{Layer, Service};

use super::shared::SharedInformer;

/// A watch request's URL path (no query), and the informer it belongs to.
type WatchPath = (String, Weak<SharedInformer>);

/// The informers by the URL path of their watch requests; shared by the
/// Kubernetes client's middleware (which hears the answers) and the
/// informer registry (which knows the paths).
#[derive(Clone, Default)]
pub struct WatchProgress {
    informers: Arc<RwLock<Vec<WatchPath>>>,
}

impl WatchProgress {
    /// The middleware for the client the informers watch with.
    pub fn layer(&self) -> WatchProgressLayer {
        WatchProgressLayer { progress: self.clone() }
    }

    /// Watch requests to `path` (no query) are `informer`'s.
    pub fn register(&self, path: String, informer: &Arc<SharedInformer>) {
        self.informers.write().push((path, Arc::downgrade(informer)));
    }

    /// A watch request to `path` was answered with success: the watch is
    /// (re)established and the informer current.
    fn answered(&self, path: &str) {
        for (registered, informer) in self.informers.read().iter() {
            if registered == path
                && let Some(informer) = informer.upgrade()
            {
                informer.on_watch_progress();
            }
        }
    }
}

/// Wraps the client's service with [`WatchProgressService`].
#[derive(Clone)]
pub struct WatchProgressLayer {
    progress: WatchProgress,
}

impl<S> Layer<S> for WatchProgressLayer {
    type Service = WatchProgressService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WatchProgressService { inner, progress: self.progress.clone() }
    }
}

/// Passes every request on; when a watch request's response head arrives
/// with a 2xx status, tells the informer of that path.
#[derive(Clone)]
pub struct WatchProgressService<S> {
    inner: S,
    progress: WatchProgress,
}

impl<S, B, R> Service<Request<B>> for WatchProgressService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let is_watch = request.uri().query().is_some_and(|query| query.split('&').any(|p| p == "watch=true"));
        let watched = is_watch.then(|| (request.uri().path().to_owned(), self.progress.clone()));
        let response = self.inner.call(request);
        async move {
            let response = response.await;
            if let (Some((path, progress)), Ok(answer)) = (&watched, &response)
                && answer.status().is_success()
            {
                progress.answered(path);
            }
            response
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use kube::api::{ApiResource, GroupVersionKind};
    use tower::ServiceExt;

    use super::*;
    use crate::informer::{InformerSpec, InformerWriter};

    fn informer() -> Arc<SharedInformer> {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        InformerWriter::new(InformerSpec::new("cms", "", "v1", "ConfigMap"), resource, true).informer().clone()
    }

    async fn call(progress: &WatchProgress, uri: &str, status: u16) {
        let answer = tower::service_fn(move |_: Request<()>| async move {
            Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
        });
        let service = progress.layer().layer(answer);
        service.oneshot(Request::get(uri).body(()).unwrap()).await.unwrap();
    }

    #[tokio::test]
    async fn an_answered_watch_request_should_make_its_informer_current_and_nothing_else_should() {
        let (progress, informer) = (WatchProgress::default(), informer());
        progress.register("/api/v1/namespaces/a/configmaps".into(), &informer);
        let stale = |informer: &SharedInformer| !informer.stale_for().is_zero();
        informer.on_watch_error();
        call(&progress, "/api/v1/namespaces/a/configmaps?labelSelector=x", 200).await;
        assert!(stale(&informer), "a list is not a watch");
        call(&progress, "/api/v1/namespaces/b/configmaps?watch=true", 200).await;
        assert!(stale(&informer), "another path's watch");
        call(&progress, "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5", 500).await;
        assert!(stale(&informer), "a failed watch");
        call(&progress, "/api/v1/namespaces/a/configmaps?watch=true&resourceVersion=5", 200).await;
        assert!(!stale(&informer), "its watch answered");
    }
}
