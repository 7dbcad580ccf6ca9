//! The admin port of the built binary: after a known workload, /metrics shows
//! client-go's workqueue metrics and the lease and gRPC counters with exact
//! values; /healthz and /readyz answer.

#[path = "support/sidecar.rs"]
mod sidecar;

use std::time::Duration;

use sidecar::Sidecar;
use workqueue_sidecar::grpc::pb::{self, finish_request};

/// The value of one sample line, `name{labels} value`, or None.
fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics.lines().find_map(|line| line.strip_prefix(name_and_labels)?.trim().parse().ok())
}

fn add(keys: &[&str]) -> pb::AddRequest {
    sidecar::add_request(keys)
}

fn get(max_keys: u32, ttl: Option<Duration>) -> pb::GetRequest {
    sidecar::get_request(max_keys, Duration::from_secs(1), ttl)
}

fn finish(lease: &pb::Lease, outcome: finish_request::Outcome) -> pb::FinishRequest {
    pb::FinishRequest { queue: "default".into(), key: lease.key.clone(), token: lease.token, outcome: Some(outcome) }
}

#[tokio::test]
async fn metrics_should_count_a_known_workload_exactly() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    assert_eq!(sidecar.admin_get("/healthz").await.0, 200);
    assert_eq!(sidecar.admin_get("/readyz").await.0, 200, "no informers: ready at once");

    // 3 adds; a re-add of a queued key merges and is not counted (client-go's rule).
    client.add(add(&["a", "b", "c"])).await.unwrap();
    client.add(add(&["a"])).await.unwrap();
    let leases = client.get(get(2, None)).await.unwrap().into_inner().leases;
    let expiring = client.get(get(1, Some(Duration::from_millis(200)))).await.unwrap().into_inner().leases;
    // a: success. b: retry (a failure, and an add when it is queued again).
    client.finish(finish(&leases[0], finish_request::Outcome::Success(pb::Success {}))).await.unwrap();
    client
        .finish(finish(&leases[1], finish_request::Outcome::Retry(pb::Retry { error: "boom".into() })))
        .await
        .unwrap();
    // A stale token: refused and counted.
    let stale = pb::DoneRequest { queue: "default".into(), key: leases[0].key.clone(), token: leases[0].token };
    assert!(client.done(stale).await.is_err());
    // c: its 200 ms lease expires (a failure, and an add when it is queued again).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let expired_key = &expiring[0].key;
    let state =
        client.key_state(pb::KeyStateRequest { queue: "default".into(), key: expired_key.clone() }).await.unwrap();
    assert_eq!(state.into_inner().failures, 1);

    let (status, metrics) = sidecar.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let q = r#"{name="default"}"#;
    let value =
        |name: &str| sample(&metrics, &format!("{name}{q}")).unwrap_or_else(|| panic!("{name} missing:\n{metrics}"));
    assert_eq!(value("workqueue_adds_total"), 5.0, "3 adds + the retry's requeue + the expiry's requeue");
    assert_eq!(value("workqueue_retries_total"), 2.0, "the retry and the expiry");
    assert_eq!(value("workqueue_depth"), 2.0, "b and c are ready again after their 5 ms backoff");
    assert_eq!(value("workqueue_sidecar_leases_held"), 0.0);
    assert_eq!(value("workqueue_sidecar_leases_expired_total"), 1.0);
    assert_eq!(value("workqueue_sidecar_stale_tokens_total"), 1.0);
    assert_eq!(value("workqueue_queue_duration_seconds_count"), 3.0, "three grants");
    assert_eq!(value("workqueue_work_duration_seconds_count"), 3.0, "three leases ended");
    assert_eq!(value("workqueue_unfinished_work_seconds"), 0.0);
    assert_eq!(value("workqueue_longest_running_processor_seconds"), 0.0);
    let done_refused = r#"grpc_server_handled_total{grpc_service="workqueue.v1.WorkQueueService",grpc_method="Done",grpc_code="FailedPrecondition"}"#;
    assert_eq!(sample(&metrics, done_refused), Some(1.0), "{metrics}");
    let adds_ok =
        r#"grpc_server_handled_total{grpc_service="workqueue.v1.WorkQueueService",grpc_method="Add",grpc_code="Ok"}"#;
    assert_eq!(sample(&metrics, adds_ok), Some(2.0));
}

/// client-go counts an add made while the key is processed once (it marks the key dirty, and Done
/// queues it again without counting), and an AddAfter when its delay ends. Until 2026-11-28 the sidecar
/// counted the first twice (when made and when queued after the lease) and the second when made.
#[tokio::test]
async fn adds_should_count_once_each_and_a_delayed_one_when_its_delay_ends() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    client.add(add(&["a"])).await.unwrap();
    let lease = client.get(get(1, None)).await.unwrap().into_inner().leases.remove(0);
    client.add(add(&["a"])).await.unwrap();
    client.add(add(&["a"])).await.unwrap();
    let done = pb::DoneRequest { queue: "default".into(), key: lease.key.clone(), token: lease.token };
    client.done(done).await.unwrap();
    let after = pb::AddAfterRequest {
        queue: "default".into(),
        keys: vec!["later".into()],
        delay: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
        priority: None,
        reason: String::new(),
    };
    client.add_after(after).await.unwrap();
    let (_, metrics) = sidecar.admin_get("/metrics").await;
    let adds = sample(&metrics, r#"workqueue_adds_total{name="default"}"#);
    assert_eq!(adds, Some(2.0), "`a`, and `a` again while held; `later` only in 60 s:\n{metrics}");
    assert_eq!(sample(&metrics, r#"workqueue_depth{name="default"}"#), Some(1.0), "`a` queued again");
}

#[tokio::test]
async fn requeues_after_a_delay_should_count_as_retries_and_their_delay_not_as_queue_time() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    // An AddAfter and a Finish asking for a requeue: each a retry, as
    // client-go's AddAfter counts one.
    let after = pb::AddAfterRequest {
        queue: "default".into(),
        keys: vec!["later".into()],
        delay: Some(prost_types::Duration { seconds: 0, nanos: 300_000_000 }),
        priority: None,
        reason: String::new(),
    };
    client.add_after(after).await.unwrap();
    client.add(add(&["now"])).await.unwrap();
    let lease = client.get(get(1, None)).await.unwrap().into_inner().leases.remove(0);
    let requeue = pb::RequeueAfter { delay: Some(prost_types::Duration { seconds: 60, nanos: 0 }) };
    client.finish(finish(&lease, finish_request::Outcome::RequeueAfter(requeue))).await.unwrap();
    // The delayed key is handed out once due: its 300 ms delay is not queue time.
    let later = client.get(get(1, None)).await.unwrap().into_inner().leases.remove(0);
    assert_eq!(later.key, "later");
    let (_, metrics) = sidecar.admin_get("/metrics").await;
    let q = r#"{name="default"}"#;
    let value =
        |name: &str| sample(&metrics, &format!("{name}{q}")).unwrap_or_else(|| panic!("{name} missing:\n{metrics}"));
    assert_eq!(value("workqueue_retries_total"), 2.0, "the AddAfter and the requeue_after");
    assert_eq!(value("workqueue_adds_total"), 2.0, "`now`, and `later` once its delay ended; not the 60 s requeue yet");
    assert_eq!(value("workqueue_queue_duration_seconds_count"), 2.0);
    assert!(value("workqueue_queue_duration_seconds_sum") < 0.25, "{metrics}");
}

#[tokio::test]
async fn held_work_should_show_in_the_processing_gauges() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    client.add(add(&["slow"])).await.unwrap();
    let _lease = client.get(get(1, None)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, metrics) = sidecar.admin_get("/metrics").await;
    let longest = sample(&metrics, r#"workqueue_longest_running_processor_seconds{name="default"}"#).unwrap();
    assert!(longest >= 0.3, "longest running {longest}");
    assert_eq!(sample(&metrics, r#"workqueue_sidecar_leases_held{name="default"}"#), Some(1.0));
}

#[tokio::test]
async fn readyz_should_fail_once_shutting_down() {
    let sidecar = Sidecar::start(&["--grace-period", "2s"]);
    let mut client = sidecar.client().await;
    client.add(add(&["held"])).await.unwrap();
    let _lease = client.get(get(1, None)).await.unwrap();
    sidecar.send_signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, body) = sidecar.admin_get("/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("shutting down"));
}
