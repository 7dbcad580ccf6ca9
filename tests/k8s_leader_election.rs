//! Two sidecars elect a leader through a real coordination.k8s.io Lease: only
//! the leader hands out keys; when it freezes or dies the other takes over
//! within the lease duration, and no key is held by two workers across the
//! handover.

#[path = "support/holding_worker.rs"]
mod holding_worker;
#[path = "support/sidecar.rs"]
mod sidecar;
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use holding_worker::{Tracker, spawn_deaf_unary_worker, spawn_holding_worker};
use k8s_openapi::api::coordination::v1::Lease;
use sidecar::{FAST_LEASES, Sidecar};
use support::control_plane::{self, TestNamespace};
use workqueue_sidecar::grpc::pb;

const LEASE_DURATION: Duration = Duration::from_secs(3);
const KEYS: usize = 5;

fn start(namespace: &str, identity: &str) -> Sidecar {
    start_with_grace(namespace, identity, "2s")
}

fn start_with_grace(namespace: &str, identity: &str, grace: &str) -> Sidecar {
    let kubeconfig = control_plane::kubeconfig_path();
    let args = [
        "--grace-period",
        grace,
        "--leader-election",
        "--leader-election-namespace",
        namespace,
        "--leader-election-identity",
        identity,
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ];
    Sidecar::start(&[&args[..], &FAST_LEASES[..]].concat())
}

async fn is_leader(sidecar: &Sidecar) -> bool {
    sidecar.metric("workqueue_sidecar_leader").await == Some(1.0)
}

async fn wait_for(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) -> Duration {
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < within, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

async fn add_keys(sidecar: &Sidecar) {
    let keys = (0..KEYS).map(|i| format!("key-{i}")).collect();
    let mut client = sidecar.client().await;
    client.add(pb::AddRequest { queue: "default".into(), keys, priority: None, reason: String::new() }).await.unwrap();
}

/// Starts A (which becomes the leader) and B, gives both the same keys and a
/// worker each, and waits until A's worker holds every key.
async fn leader_and_follower(ns: &TestNamespace, tracker: &Arc<Tracker>) -> (Sidecar, Sidecar) {
    let a = start(ns.name(), "replica-a");
    wait_for("A becomes the leader", Duration::from_secs(10), async || is_leader(&a).await).await;
    let b = start(ns.name(), "replica-b");
    wait_for("B reports itself a follower", Duration::from_secs(10), async || {
        b.metric("workqueue_sidecar_leader").await == Some(0.0)
    })
    .await;
    add_keys(&a).await;
    add_keys(&b).await;
    spawn_holding_worker(0, a.endpoint(), "default", tracker.clone());
    spawn_holding_worker(1, b.endpoint(), "default", tracker.clone());
    wait_for("A's worker holds every key", Duration::from_secs(5), async || tracker.count(0) == KEYS).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(tracker.count(1), 0, "a follower hands out no keys");
    let len = b.client().await.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!((len.ready, len.held), (KEYS as u32, 0), "the follower keeps its keys queued");
    (a, b)
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_frozen_leader_should_be_replaced_without_any_key_held_twice() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "leader-freeze").await;
    let tracker = Arc::new(Tracker::default());
    let (a, b) = leader_and_follower(&ns, &tracker).await;

    // A freezes: it renews nothing and tells its worker nothing.
    a.send_signal("STOP");
    let takeover =
        wait_for("B's worker holds every key", Duration::from_secs(10), async || tracker.count(1) == KEYS).await;
    assert!(
        takeover <= LEASE_DURATION + Duration::from_secs(2),
        "takeover took {takeover:?}, more than the lease duration plus two retries and slack"
    );
    assert!(is_leader(&b).await);

    // A wakes up, finds B holding the Lease, steps down and revokes its leases.
    a.send_signal("CONT");
    wait_for("A steps down", Duration::from_secs(5), async || !is_leader(&a).await).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(tracker.count(0), 0);
    assert_eq!(tracker.count(1), KEYS);
    let violations = tracker.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "keys held twice: {violations:?}");
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_killed_leader_should_be_replaced_within_the_lease_duration() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "leader-kill").await;
    let tracker = Arc::new(Tracker::default());
    let (a, b) = leader_and_follower(&ns, &tracker).await;
    // The follower reads the Lease every retry period: once renewed, it
    // carries no field-ownership record.
    let lease = ns.api::<Lease>().get("workqueue-sidecar").await.unwrap();
    assert_eq!(lease.metadata.managed_fields, None, "no managedFields on the renewed Lease");

    a.send_signal("KILL");
    let takeover = wait_for("B becomes the leader", Duration::from_secs(10), async || is_leader(&b).await).await;
    assert!(takeover <= LEASE_DURATION + Duration::from_secs(1), "takeover took {takeover:?}");
    wait_for("B's worker holds every key", Duration::from_secs(3), async || tracker.count(1) == KEYS).await;
    let violations = tracker.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "keys held twice: {violations:?}");
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_leader_stopping_cleanly_should_hand_over_at_once() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "leader-term").await;
    let tracker = Arc::new(Tracker::default());
    let (mut a, b) = leader_and_follower(&ns, &tracker).await;

    a.send_signal("TERM");
    // A drains for its 2 s grace period (its worker never finishes), hands
    // the rest back, releases the Lease, and exits.
    let status = a.wait(Duration::from_secs(15));
    assert!(status.success(), "{status:?}");
    let takeover = wait_for("B becomes the leader", Duration::from_secs(5), async || is_leader(&b).await).await;
    assert!(takeover < LEASE_DURATION, "a released Lease is taken at the next retry, took {takeover:?}");
    let violations = tracker.violations.lock().unwrap().clone();
    assert!(violations.is_empty(), "keys held twice: {violations:?}");
    ns.delete().await;
}

/// A leader stopping while a worker that never looks up holds keys past the
/// grace period: the drain hands those leases back, but the worker goes on
/// until their deadlines, so the Lease is released only then. Before, it was
/// released at once and the new leader granted the keys while the first
/// worker still held them.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_leader_stopping_should_release_its_lease_only_once_the_leases_it_handed_back_are_past_their_deadlines() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "leader-deaf").await;
    let tracker = Arc::new(Tracker::default());
    // Shorter than the leases (bound by the 2 s term), so some outlive the drain.
    let mut a = start_with_grace(ns.name(), "replica-a", "300ms");
    wait_for("A becomes the leader", Duration::from_secs(10), async || is_leader(&a).await).await;
    let b = start(ns.name(), "replica-b");
    add_keys(&a).await;
    add_keys(&b).await;
    spawn_deaf_unary_worker(0, a.endpoint(), "default", tracker.clone());
    spawn_holding_worker(1, b.endpoint(), "default", tracker.clone());
    wait_for("A's worker holds every key", Duration::from_secs(5), async || tracker.count(0) == KEYS).await;

    a.send_signal("TERM");
    let took = wait_for("B's worker holds every key", Duration::from_secs(20), async || tracker.count(1) == KEYS).await;
    println!("B's worker held every key {:.1} s after A's SIGTERM", took.as_secs_f64());
    assert!(a.wait(Duration::from_secs(10)).success());
    assert_eq!(tracker.violations(), Vec::<String>::new(), "no key held by two workers at once");
    assert!(a.logs().contains("past their deadlines"), "A said why it waited; logs:\n{}", a.logs());
    ns.delete().await;
}
