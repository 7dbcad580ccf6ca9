//! Two sidecars elect a leader through a real coordination.k8s.io Lease: only
//! the leader hands out keys; when it freezes or dies the other takes over
//! within the lease duration, and no key is held by two workers across the
//! handover.

#[path = "support/sidecar.rs"]
mod sidecar;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sidecar::Sidecar;
use support::control_plane::{self, TestNamespace};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, work_request, work_response};

const LEASE_DURATION: Duration = Duration::from_secs(3);
const KEYS: usize = 5;

fn start(namespace: &str, identity: &str) -> Sidecar {
    let kubeconfig = control_plane::kubeconfig_path();
    Sidecar::start(&[
        "--grace-period",
        "2s",
        "--leader-election",
        "--leader-election-namespace",
        namespace,
        "--leader-election-identity",
        identity,
        "--leader-election-lease-duration",
        "3s",
        "--leader-election-renew-deadline",
        "2s",
        "--leader-election-retry-period",
        "500ms",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ])
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

/// Who holds which key, by the workers' own account: a key counts as held
/// by a worker until its lease deadline passes unextended, it finishes it,
/// or the sidecar cancels it.
#[derive(Default)]
struct Tracker {
    held: Mutex<HashMap<String, (usize, SystemTime)>>,
    violations: Mutex<Vec<String>>,
}

impl Tracker {
    fn hold(&self, key: &str, worker: usize, deadline: SystemTime) {
        let mut held = self.held.lock().unwrap();
        if let Some((other, until)) = held.get(key)
            && *other != worker
            && *until > SystemTime::now()
        {
            self.violations
                .lock()
                .unwrap()
                .push(format!("{key} granted to worker {worker} while worker {other} holds it"));
        }
        held.insert(key.to_string(), (worker, deadline));
    }

    fn release(&self, key: &str, worker: usize) {
        let mut held = self.held.lock().unwrap();
        if held.get(key).is_some_and(|(w, _)| *w == worker) {
            held.remove(key);
        }
    }

    fn count(&self, worker: usize) -> usize {
        let now = SystemTime::now();
        self.held.lock().unwrap().values().filter(|(w, until)| *w == worker && *until > now).count()
    }
}

fn wall(timestamp: Option<prost_types::Timestamp>) -> SystemTime {
    SystemTime::try_from(timestamp.expect("a deadline")).unwrap()
}

/// A worker that behaves as the clients do: it never finishes (a slow
/// reconcile), extends each lease at a third of its time, and stops working
/// on a key when its deadline passes unextended or the sidecar cancels it.
fn spawn_worker(id: usize, endpoint: String, tracker: Arc<Tracker>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut client) = WorkQueueServiceClient::connect(endpoint).await else { return };
        let (tx, rx) = mpsc::channel(64);
        let open = work_request::Open {
            queue: "default".into(),
            worker: format!("w{id}"),
            credits: 16,
            lease_ttl: None,
            include_object: false,
            ack_failures_only: false,
        };
        tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
        let Ok(response) = client.work(ReceiverStream::new(rx)).await else { return };
        let mut responses = response.into_inner();
        let mut leases: HashMap<u64, (String, SystemTime, Instant)> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                message = responses.next() => {
                    let Some(Ok(message)) = message else { break };
                    match message.kind {
                        Some(work_response::Kind::Lease(lease)) => {
                            let deadline = wall(lease.deadline);
                            tracker.hold(&lease.key, id, deadline);
                            leases.insert(lease.token, (lease.key, deadline, Instant::now()));
                        }
                        Some(work_response::Kind::Extended(extended)) if extended.code == 0 => {
                            if let Some(entry) = leases.get_mut(&extended.token) {
                                entry.1 = wall(extended.deadline);
                                tracker.hold(&entry.0, id, entry.1);
                            }
                        }
                        Some(work_response::Kind::Extended(extended)) => {
                            if let Some((key, _, _)) = leases.remove(&extended.token) {
                                tracker.release(&key, id);
                            }
                        }
                        Some(work_response::Kind::Cancel(cancel)) => {
                            if let Some((key, _, _)) = leases.remove(&cancel.token) {
                                tracker.release(&key, id);
                            }
                        }
                        _ => {}
                    }
                }
                _ = tick.tick() => {
                    let now = SystemTime::now();
                    leases.retain(|_, (key, deadline, _)| {
                        let alive = *deadline > now;
                        if !alive {
                            tracker.release(key, id);
                        }
                        alive
                    });
                    for (token, (key, deadline, last_extend)) in leases.iter_mut() {
                        let ttl = deadline.duration_since(now).unwrap_or_default();
                        if last_extend.elapsed() >= Duration::from_millis(400) || ttl < Duration::from_millis(800) {
                            *last_extend = Instant::now();
                            let extend = work_request::Extend { key: key.clone(), token: *token, ttl: None };
                            let _ = tx.try_send(pb::WorkRequest { kind: Some(work_request::Kind::Extend(extend)) });
                        }
                    }
                }
            }
        }
        // The stream broke: this worker stops on everything it held.
        for (key, _, _) in leases.into_values() {
            tracker.release(&key, id);
        }
    })
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
    spawn_worker(0, a.endpoint(), tracker.clone());
    spawn_worker(1, b.endpoint(), tracker.clone());
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
