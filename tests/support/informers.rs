//! The sidecar's informers and queues run in-process against the local control plane: build them from
//! config YAML, start them, and look at what reached the queues.
#![allow(dead_code)] // each test binary uses its own subset

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use workqueue_sidecar::config::Config;
use workqueue_sidecar::grpc;
use workqueue_sidecar::informer::InformerRegistry;
use workqueue_sidecar::objects::{ObjectWriter, WritePolicy, WriteRule};
use workqueue_sidecar::queue::{FinishOutcome, KeyPhase, KeyStatus, Lease, ReasonKind};
use workqueue_sidecar::queue_registry::{Queue, QueueRegistry};
use workqueue_sidecar::server::{Listeners, serve};
use workqueue_sidecar::writes::{Freshness, Writes};

/// How long a key may take to show up on a queue after the API server accepted a change.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

pub struct Sidecar {
    pub queues: Arc<QueueRegistry>,
    pub informers: Arc<InformerRegistry>,
    /// The informers' watches, timers and gates; aborted when the test's sidecar is dropped.
    pub tasks: tokio::task::JoinSet<()>,
    /// Each queue's declared finalizer: (queue, finalizer).
    pub finalizers: Vec<(String, String)>,
    /// The config's declared writes.
    pub writes: Vec<WriteRule>,
}

impl Sidecar {
    /// Builds queues and informers from `yaml` (a sidecar config file) and
    /// starts the informers; does not wait for them to sync.
    pub async fn start(client: &Client, yaml: &str) -> Sidecar {
        let config = Config::parse(yaml, "test.yaml").unwrap_or_else(|e| panic!("{e}"));
        let queues =
            Arc::new(QueueRegistry::new(config.queues.iter().map(|q| (q.name.clone(), q.settings.clone()))).unwrap());
        let bindings = config.queues.iter().map(|q| (q.name.as_str(), &q.binding));
        let (informers, watches) = InformerRegistry::build(client.clone(), &config.informers, &queues, bindings)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let informers = Arc::new(informers);
        let mut tasks = tokio::task::JoinSet::new();
        for task in watches.start().await {
            tasks.spawn(task.future);
        }
        let finalizers =
            config.queues.iter().filter_map(|q| Some((q.name.clone(), q.binding.finalizer.clone()?))).collect();
        Sidecar { queues, informers, tasks, finalizers, writes: config.writes }
    }

    /// Writes through the sidecar as the app wires them: `writer` and the
    /// stale-read guard, which follows the caches while the sidecar lives.
    pub fn writes(&mut self, writer: ObjectWriter) -> Writes {
        let freshness = Arc::new(Freshness::new(&self.informers, self.queues.clone()));
        self.tasks.spawn(freshness.clone().follow_caches());
        let policy = WritePolicy::new(self.writes.clone(), None);
        Writes { writer: Arc::new(writer), freshness, finalizers: self.finalizers.clone(), policy }
    }

    /// Serves the sidecar's gRPC API on 127.0.0.1, writing with `writer` (no
    /// ObjectService without one); it stops when the sender is dropped or sent `true`.
    pub async fn serve_grpc(
        &mut self,
        writer: Option<ObjectWriter>,
    ) -> (tonic::transport::Channel, tokio::sync::watch::Sender<bool>) {
        let listeners = Listeners::bind(Some("127.0.0.1:0".parse().unwrap()), None, false).await.unwrap();
        let address = listeners.tcp_address().unwrap();
        let writes = writer.map(|writer| self.writes(writer));
        let api = grpc::api(
            self.queues.clone(),
            self.informers.clone(),
            writes,
            grpc::ShutDownRpc::Allowed { drain_grace: Duration::from_secs(5) },
        )
        .await
        .unwrap();
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(serve(api.routes, listeners, stop_rx));
        let channel = tonic::transport::Channel::from_shared(format!("http://{address}")).unwrap();
        (channel.connect().await.unwrap(), stop)
    }

    pub fn queue(&self, name: &str) -> &Queue {
        self.queues.get(name).unwrap_or_else(|| panic!("no queue {name}"))
    }

    /// Waits until every informer has finished its first list.
    pub async fn synced(&self) {
        wait_until("informers synced", EVENT_TIMEOUT, || self.informers.all_synced()).await;
    }
}

/// Polls `condition` every 20 ms until it holds, failing the test after `timeout`.
pub async fn wait_until(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + timeout;
    while !condition() {
        assert!(tokio::time::Instant::now() < deadline, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `key` is queued with a reason of `kind`; returns its status.
pub async fn queued_with(queue: &Queue, key: &str, kind: ReasonKind) -> KeyStatus {
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    loop {
        let status = queue.key_status(key);
        if matches!(status.phase, KeyPhase::Queued { .. }) && status.reasons.contains_kind(kind) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{key} not queued with {kind:?} on {} within {EVENT_TIMEOUT:?}: {status:?}",
            queue.name()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Takes every ready key and finishes it successfully; returns the leases.
pub fn drain(queue: &Queue) -> Vec<Lease<Arc<str>>> {
    let holder: Arc<str> = Arc::from("test");
    let leases = queue.try_get_many(&holder, 100_000, None).unwrap().unwrap_or_default();
    for lease in &leases {
        queue.finish(&*lease.key, lease.token, FinishOutcome::Success).unwrap();
    }
    leases
}

/// The keys of `leases`, sorted.
pub fn keys(leases: &[Lease<Arc<str>>]) -> Vec<String> {
    let mut keys: Vec<String> = leases.iter().map(|l| l.key.to_string()).collect();
    keys.sort();
    keys
}

/// Asserts that nothing becomes ready on `queue` for `quiet`.
pub async fn stays_empty(queue: &Queue, quiet: Duration) {
    tokio::time::sleep(quiet).await;
    let leases = drain(queue);
    assert!(leases.is_empty(), "expected no keys on {}, got {:?}", queue.name(), keys(&leases));
}

/// A config with one informer on `namespace`'s ConfigMaps, the primary of queue `q`.
pub fn configmaps_into_queue_q(namespace: &str) -> String {
    format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {namespace} }}\nqueues:\n  q: {{ primary: cms }}\n\
         writes:\n  - {{ kind: ConfigMap, namespaces: [{namespace}], lease: optional }}\n"
    )
}
