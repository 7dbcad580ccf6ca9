//! The admin HTTP port: `/metrics` for Prometheus, `/healthz` and `/readyz` for probes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::info;

use crate::metrics::Metrics;
use crate::queue_registry::QueueRegistry;

/// Named conditions that must all hold for the sidecar to be ready (each
/// informer's cache synced, say), and whether it is shutting down.
#[derive(Default)]
pub struct Readiness {
    conditions: Mutex<BTreeMap<String, bool>>,
    shutting_down: AtomicBool,
}

impl Readiness {
    pub fn new() -> Arc<Self> {
        Arc::new(Readiness::default())
    }

    /// Adds a condition, unmet until `set(name, true)`.
    pub fn require(&self, name: impl Into<String>) {
        self.conditions.lock().entry(name.into()).or_insert(false);
    }

    /// Makes `name` a condition that follows `signal`: unmet from this call
    /// on, met once `signal` turns true. Returns the future that waits for
    /// it (spawn it); the condition exists before the future first runs, so a
    /// probe that comes in between sees it unmet.
    pub fn follow(
        self: &Arc<Self>,
        name: String,
        mut signal: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + use<> {
        self.require(name.clone());
        let readiness = self.clone();
        async move {
            if signal.wait_for(|met| *met).await.is_ok() {
                readiness.set(&name, true);
            }
        }
    }

    pub fn set(&self, name: &str, met: bool) {
        self.conditions.lock().insert(name.to_string(), met);
    }

    pub fn shutting_down(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
    }

    /// `Ok` when ready; otherwise what is missing.
    pub fn check(&self) -> Result<(), String> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err("shutting down".into());
        }
        let unmet: Vec<String> =
            self.conditions.lock().iter().filter(|(_, met)| !**met).map(|(name, _)| name.clone()).collect();
        if unmet.is_empty() { Ok(()) } else { Err(format!("waiting for: {}", unmet.join(", "))) }
    }
}

#[derive(Clone)]
struct AdminState {
    metrics: Arc<Metrics>,
    queues: Arc<QueueRegistry>,
    readiness: Arc<Readiness>,
}

pub fn router(metrics: Arc<Metrics>, queues: Arc<QueueRegistry>, readiness: Arc<Readiness>) -> Router {
    Router::new()
        .route("/metrics", get(render_metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(AdminState { metrics, queues, readiness })
}

async fn render_metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let text = state.metrics.render(&state.queues);
    ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
}

async fn ready(State(state): State<AdminState>) -> (StatusCode, String) {
    match state.readiness.check() {
        Ok(()) => (StatusCode::OK, "ok\n".into()),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    }
}

/// Serves the admin routes on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, router: Router, mut stop: watch::Receiver<bool>) -> std::io::Result<()> {
    let address: Option<SocketAddr> = listener.local_addr().ok();
    info!(address = %address.map(|a| a.to_string()).unwrap_or_default(), "admin http listening");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_should_wait_for_every_condition_and_fail_when_shutting_down() {
        let readiness = Readiness::new();
        assert!(readiness.check().is_ok(), "no conditions: ready");
        readiness.require("informer users synced");
        readiness.require("informer namespaces synced");
        readiness.set("informer users synced", true);
        assert_eq!(readiness.check().unwrap_err(), "waiting for: informer namespaces synced");
        readiness.set("informer namespaces synced", true);
        assert!(readiness.check().is_ok());
        readiness.shutting_down();
        assert!(readiness.check().is_err());
    }

    #[tokio::test]
    async fn a_followed_condition_should_be_unmet_at_once_and_met_when_its_signal_turns_true() {
        let readiness = Readiness::new();
        let (synced, signal) = watch::channel(false);
        let waiting = tokio::spawn(readiness.follow("informer users synced".into(), signal));
        assert_eq!(readiness.check().unwrap_err(), "waiting for: informer users synced");
        synced.send_replace(true);
        waiting.await.unwrap();
        assert!(readiness.check().is_ok());
    }
}
