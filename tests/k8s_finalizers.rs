//! Declared finalizers against the real control plane: added before a live object's lease goes out, kept
//! through a failed cleanup, removed after a deleting object's lease ends in success (unary and on the Work
//! stream), and an object deleted while the sidecar was down cleaned up when it starts again.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use support::control_plane::{self, TestNamespace};
use support::informers::{EVENT_TIMEOUT, Sidecar};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb::{self, work_request, work_response};
use workqueue_sidecar::objects::{MAX_WRITES_OUT, ObjectWriter};

use pb::work_queue_service_client::WorkQueueServiceClient;

const FINALIZER: &str = "example.com/cleanup";

fn config(namespace: &str) -> String {
    format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {namespace} }}\n\
         queues:\n  q: {{ primary: cms, finalizer: {FINALIZER} }}\n\
         writes:\n  - {{ kind: ConfigMap, namespaces: [{namespace}] }}\n"
    )
}

async fn start(client: &kube::Client, namespace: &str) -> (Sidecar, WorkQueueServiceClient<Channel>, impl Drop) {
    start_with(client, namespace, MAX_WRITES_OUT).await
}

/// As `start`, with at most `max_writes_out` writes out to the API server at once.
async fn start_with(
    client: &kube::Client,
    namespace: &str,
    max_writes_out: usize,
) -> (Sidecar, WorkQueueServiceClient<Channel>, impl Drop) {
    let mut sidecar = Sidecar::start(client, &config(namespace)).await;
    sidecar.synced().await;
    let writer = ObjectWriter::with_max_out(client.clone(), "tests".into(), max_writes_out);
    let (channel, stop) = sidecar.serve_grpc(Some(writer)).await;
    (sidecar, WorkQueueServiceClient::new(channel), StopOnDrop(Some(stop)))
}

struct StopOnDrop(Option<tokio::sync::watch::Sender<bool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(stop) = self.0.take() {
            let _ = stop.send(true);
        }
    }
}

async fn create(api: &Api<ConfigMap>, name: &str) {
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
}

async fn finalizers(api: &Api<ConfigMap>, name: &str) -> Option<Vec<String>> {
    api.get_opt(name).await.unwrap().map(|cm| cm.metadata.finalizers.unwrap_or_default())
}

/// The leases one Get waiting up to `wait_seconds` for a key answers.
async fn get(queue: &mut WorkQueueServiceClient<Channel>, wait_seconds: i64) -> Vec<pb::Lease> {
    let request = pb::GetRequest {
        queue: "q".into(),
        worker: "test".into(),
        max_keys: 1,
        wait: Some(prost_types::Duration { seconds: wait_seconds, nanos: 0 }),
        ..Default::default()
    };
    queue.get(request).await.unwrap().into_inner().leases
}

async fn lease(queue: &mut WorkQueueServiceClient<Channel>) -> pb::Lease {
    let mut leases = get(queue, 20).await;
    assert_eq!(leases.len(), 1, "a lease within 20 s");
    leases.remove(0)
}

async fn finish(queue: &mut WorkQueueServiceClient<Channel>, lease: &pb::Lease, outcome: pb::finish_request::Outcome) {
    let request =
        pb::FinishRequest { queue: "q".into(), key: lease.key.clone(), token: lease.token, outcome: Some(outcome) };
    queue.finish(request).await.unwrap();
}

fn success() -> pb::finish_request::Outcome {
    pb::finish_request::Outcome::Success(pb::Success {})
}

async fn wait_gone(api: &Api<ConfigMap>, name: &str) {
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    while api.get_opt(name).await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "{name} still exists");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_declared_finalizer_should_be_added_kept_through_a_retry_and_removed_after_success() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "finalizers").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    create(&api, "a").await;
    let (_sidecar, mut queue, _stop) = start(&client, ns.name()).await;

    // Added before the lease goes out.
    let first = lease(&mut queue).await;
    assert_eq!(first.key, format!("{}/a", ns.name()));
    assert!(!first.deleting);
    assert_eq!(finalizers(&api, "a").await.unwrap(), [FINALIZER], "added before the lease was handed out");

    // Deleted while that lease runs: its success (the worker saw a live
    // object, so cleaned nothing up) must not remove the finalizer.
    api.delete("a", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await; // the cache has the deletion by now
    finish(&mut queue, &first, success()).await;
    assert_eq!(finalizers(&api, "a").await.unwrap(), [FINALIZER], "kept: that lease was not marked deleting");

    // The object stays, the next lease says so; a failed cleanup keeps the finalizer.
    let deleting = lease(&mut queue).await;
    assert!(deleting.deleting, "{deleting:?}");
    assert!(deleting.deletion_timestamp.is_some());
    let retry = pb::finish_request::Outcome::Retry(pb::Retry { error: "cleanup failed".into() });
    finish(&mut queue, &deleting, retry).await;
    assert_eq!(finalizers(&api, "a").await.unwrap(), [FINALIZER], "kept after a retry");

    // Its retry succeeds: the sidecar removes the finalizer and the object goes.
    let again = lease(&mut queue).await;
    assert!(again.deleting);
    assert_eq!(again.last_error, "cleanup failed");
    finish(&mut queue, &again, success()).await;
    wait_gone(&api, "a").await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_an_object_deleted_while_the_sidecar_was_down_should_be_cleaned_up_when_it_is_back() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "finalizers-down").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    create(&api, "b").await;
    {
        let (_sidecar, mut queue, _stop) = start(&client, ns.name()).await;
        let first = lease(&mut queue).await;
        finish(&mut queue, &first, success()).await;
        assert_eq!(finalizers(&api, "b").await.unwrap(), [FINALIZER]);
    } // the sidecar stops
    api.delete("b", &DeleteParams::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(finalizers(&api, "b").await.is_some(), "held by the finalizer while no sidecar runs");

    let (_sidecar, mut queue, _stop) = start(&client, ns.name()).await;
    let lease = lease(&mut queue).await;
    assert!(lease.deleting, "the initial list shows it deleting: {lease:?}");
    finish(&mut queue, &lease, success()).await;
    wait_gone(&api, "b").await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_the_work_stream_should_add_and_remove_a_declared_finalizer_too() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "finalizers-stream").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    create(&api, "c").await;
    let (_sidecar, mut queue, _stop) = start(&client, ns.name()).await;

    let (requests, rx) = mpsc::channel(16);
    let open = work_request::Open { queue: "q".into(), worker: "streamer".into(), credits: 2, ..Default::default() };
    requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let mut responses = queue.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let mut next = async || {
        let message = tokio::time::timeout(EVENT_TIMEOUT, responses.next()).await.expect("a response in time");
        message.expect("the stream is open").expect("no error").kind.unwrap()
    };
    assert!(matches!(next().await, work_response::Kind::Opened(_)));
    let finish = async |lease: &pb::Lease| {
        let finish = work_request::Finish {
            key: lease.key.clone(),
            token: lease.token,
            outcome: Some(work_request::finish::Outcome::Success(pb::Success {})),
        };
        requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Finish(finish)) }).await.unwrap();
    };

    let work_response::Kind::Lease(first) = next().await else { panic!("a lease") };
    assert_eq!(finalizers(&api, "c").await.unwrap(), [FINALIZER], "added before the lease was sent");
    finish(&first).await;
    assert!(matches!(next().await, work_response::Kind::FinishAck(ack) if ack.code == 0));

    api.delete("c", &DeleteParams::default()).await.unwrap();
    let lease = loop {
        match next().await {
            work_response::Kind::Lease(lease) if lease.deleting => break lease,
            work_response::Kind::Lease(lease) => finish(&lease).await, // an update before the deletion mark
            _ => {}
        }
    };
    finish(&lease).await;
    loop {
        if let work_response::Kind::FinishAck(ack) = next().await
            && ack.token == lease.token
        {
            assert_eq!(ack.code, 0, "{ack:?}");
            break;
        }
    }
    wait_gone(&api, "c").await;
}

/// A declared finalizer is a write like any other: past the bound on writes
/// out it is not sent, and the lease goes back as a retry instead of to the
/// worker, so nothing is reconciled without its finalizer. (Bound at 0 here,
/// so every finalizer write is refused; with the bound skipped for
/// finalizers, the lease would go out with the finalizer added.)
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_declared_finalizer_past_the_bound_on_writes_out_should_send_the_lease_back_as_a_retry() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "finalizers-bound").await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns.name());
    create(&api, "d").await;
    let (_sidecar, mut queue, _stop) = start_with(&client, ns.name(), 0).await;

    let leases = get(&mut queue, 2).await;
    assert!(leases.is_empty(), "a lease went out: its finalizer write was not refused: {leases:?}");

    let key = format!("{}/d", ns.name());
    let state = queue.key_state(pb::KeyStateRequest { queue: "q".into(), key }).await.unwrap().into_inner();
    assert!(state.failures >= 1, "each refused finalizer write counts as a failure: {state:?}");
    assert!(state.last_error.starts_with(&format!("adding finalizer {FINALIZER}: ")), "{state:?}");
    assert!(state.last_error.contains("writes to the API server are still unanswered"), "{state:?}");
    assert_eq!(finalizers(&api, "d").await.unwrap(), Vec::<String>::new(), "nothing was written");
}
