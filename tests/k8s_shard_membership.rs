//! Replicas share the hash slots through one real coordination.k8s.io Lease
//! each: together they cover every slot, no slot is ever granted by two at
//! once, a crashed replica's slots are taken over once its Lease expires,
//! a replica that leaves hands its slots over at once, a deleted Lease
//! is handed over before it goes, long expired Leases are deleted, and an
//! expired Lease whose write id does not parse loses its finalizer once.
//!
//! The test plays each replica's queues: it records what each may grant
//! from, and answers a revoke at once (no lease is ever held), so the
//! figures are the protocol's own. A checker looks every 10 ms.

#[path = "support/request_log.rs"]
mod request_log;
mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Method;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{DeleteParams, Patch, PatchParams};
use support::control_plane::{self, TestNamespace};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use workqueue_sidecar::replicas::shard_membership::{
    CLAIMS_ANNOTATION, EXPIRED_ANNOTATION, FINALIZER, Membership, MembershipSettings, ShardEvent, WRITE_ANNOTATION,
};
use workqueue_sidecar::shard::{Effect, Grant, ShardSettings, SlotSet};

const TIMINGS: ShardSettings = ShardSettings {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
    max_drift_ppm: 10_000,
};

/// One replica: its membership task, what it may grant from, and its stop.
struct Replica {
    name: String,
    group: String,
    grant: Arc<Mutex<Option<Grant>>>,
    stop: watch::Sender<bool>,
    membership: JoinHandle<()>,
    queues: JoinHandle<()>,
}

impl Replica {
    fn start(client: &kube::Client, namespace: &str, group: &str, name: &str) -> Replica {
        let settings = MembershipSettings {
            namespace: namespace.to_owned(),
            group: group.to_owned(),
            identity: name.to_owned(),
            timings: TIMINGS,
        };
        let membership = Membership::new(client.clone(), settings).expect("valid settings");
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let (ended_tx, ended) = mpsc::unbounded_channel();
        let (stop, stop_rx) = watch::channel(false);
        let grant = Arc::new(Mutex::new(None));
        let shown = grant.clone();
        let queues = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                match event {
                    ShardEvent::Grant(grant) => *shown.lock().unwrap() = grant,
                    // No lease is held in this test: every revoke ends at once.
                    ShardEvent::Effect(Effect::Revoke(slots)) => {
                        let _ = ended_tx.send(slots);
                    }
                    ShardEvent::Effect(Effect::Gained(_) | Effect::HandedOver(_) | Effect::TermGap(_)) => {}
                }
            }
        });
        let membership = tokio::spawn(membership.run(events_tx, ended, stop_rx));
        Replica { name: name.to_owned(), group: group.to_owned(), grant, stop, membership, queues }
    }

    /// What it may grant from at `now`.
    fn granting(&self, now: Instant) -> SlotSet {
        self.grant.lock().unwrap().filter(|g| now < g.until).map_or(SlotSet::EMPTY, |g| g.slots)
    }

    /// Stops as `kill -9` would: no leave, the Lease stays until it expires.
    fn crash(&self) {
        self.membership.abort();
        self.queues.abort();
        // What it granted ends with its term at the latest; the checker
        // keeps counting it until then, as the workers' leases would last.
    }
}

/// Watches every replica's grants: counts the instants two replicas of one
/// group could grant from one slot, and tells when a set of replicas covers every slot.
struct Checker {
    replicas: Arc<Mutex<Vec<Arc<Replica>>>>,
    overlaps: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Checker {
    fn start() -> Checker {
        let replicas: Arc<Mutex<Vec<Arc<Replica>>>> = Arc::default();
        let overlaps: Arc<Mutex<Vec<String>>> = Arc::default();
        let (watched, found) = (replicas.clone(), overlaps.clone());
        let task = tokio::spawn(async move {
            loop {
                let now = Instant::now();
                let replicas = watched.lock().unwrap().clone();
                for (i, a) in replicas.iter().enumerate() {
                    for b in &replicas[i + 1..] {
                        let both = a.granting(now).intersection(&b.granting(now));
                        if a.group == b.group && !both.is_empty() {
                            found.lock().unwrap().push(format!("{} and {} both grant {both:?}", a.name, b.name));
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        Checker { replicas, overlaps, task }
    }

    fn watch(&self, replica: &Arc<Replica>) {
        self.replicas.lock().unwrap().push(replica.clone());
    }

    /// Starts a replica of group `users` through `client`, watched.
    fn start_replica(&self, client: &kube::Client, namespace: &str, name: &str) -> Arc<Replica> {
        let replica = Arc::new(Replica::start(client, namespace, "users", name));
        self.watch(&replica);
        replica
    }

    fn overlaps(&self) -> Vec<String> {
        self.overlaps.lock().unwrap().clone()
    }
}

impl Drop for Checker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until `replicas` together grant from every slot; how long it took.
async fn covered(replicas: &[&Arc<Replica>], timeout: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let now = Instant::now();
        let all = replicas.iter().fold(SlotSet::EMPTY, |all, r| all.union(&r.granting(now)));
        if all == SlotSet::FULL {
            return started.elapsed();
        }
        let shares: Vec<usize> = replicas.iter().map(|r| r.granting(now).len()).collect();
        assert!(started.elapsed() < timeout, "not every slot granted after {timeout:?}: shares {shares:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
#[ignore = "needs the local control plane: hack/control-plane up"]
async fn k8s_replicas_should_share_every_slot_once_and_take_over_a_crashed_one() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "shard-membership").await;
    let checker = Checker::start();
    let replicas: Vec<Arc<Replica>> =
        ["a", "b", "c"].iter().map(|name| checker.start_replica(&client, ns.name(), name)).collect();
    let (a, b, c) = (&replicas[0], &replicas[1], &replicas[2]);

    let start_up = covered(&[a, b, c], Duration::from_secs(30)).await;
    let now = Instant::now();
    let shares: Vec<usize> = replicas.iter().map(|r| r.granting(now).len()).collect();
    println!("3 replicas: every slot granted after {start_up:?}; shares {shares:?}");
    for share in &shares {
        assert!(*share > SlotSet::FULL.len() / 4, "each replica has about a third: {shares:?}");
    }
    // Every replica reads every Lease each retry period: each carries its
    // claims in the compact form, and no field-ownership record once renewed.
    for replica in &replicas {
        let lease = ns.api::<Lease>().get(&format!("users-{}", replica.name)).await.unwrap();
        let text = lease.metadata.annotations.unwrap_or_default().remove(CLAIMS_ANNOTATION).unwrap_or_default();
        let claims = SlotSet::parse_claims_text(&text).unwrap();
        let granting = replica.granting(Instant::now());
        assert!(
            !granting.is_empty() && granting.difference(&claims).is_empty(),
            "{}: grants from its claims only",
            replica.name
        );
        assert_eq!(lease.metadata.managed_fields, None, "{}: no managedFields on a renewed Lease", replica.name);
    }

    c.crash();
    let takeover = covered(&[a, b], Duration::from_secs(30)).await;
    println!("c crashed: its slots granted again after {takeover:?} (lease duration {:?})", TIMINGS.lease_duration);
    // Expired, c's Lease must not hold up a deletion: a or b removes its
    // finalizer, and in the same write marks the write it judged expired.
    let leases = ns.api::<Lease>();
    let crashed = Instant::now();
    let marked = loop {
        let lease = leases.get("users-c").await.unwrap();
        if !has_finalizer(&lease) {
            break lease;
        }
        assert!(crashed.elapsed() < Duration::from_secs(30), "nobody removed the finalizer of c's expired Lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let annotations = marked.metadata.annotations.unwrap_or_default();
    assert!(annotations.contains_key(WRITE_ANNOTATION), "c's Lease carries its last write id");
    assert_eq!(
        annotations.get(EXPIRED_ANNOTATION),
        annotations.get(WRITE_ANNOTATION),
        "c's Lease is marked judged expired at its last write"
    );

    b.stop.send_replace(true);
    let handover = covered(&[a], Duration::from_secs(30)).await;
    // Not asserted (no timings in tests): printed, it shows that a took
    // over without waiting for b's Lease to expire.
    println!(
        "b left: every slot granted by a after {handover:?} (its Lease would expire after {:?})",
        TIMINGS.lease_duration
    );
    let b_lease = ns.api::<Lease>().get("users-b").await.unwrap();
    let holder = b_lease.spec.and_then(|s| s.holder_identity);
    assert_eq!(holder, None, "b cleared its Lease's holder when it left");
    // Expired for a further lease duration, the Leases of the crashed c and
    // of b, which left, are deleted by a: nothing else would delete them.
    let gone_by = Instant::now() + Duration::from_secs(30);
    for name in ["users-b", "users-c"] {
        while leases.get_opt(name).await.unwrap().is_some() {
            assert!(Instant::now() < gone_by, "{name}, long expired, is still there");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    assert_eq!(checker.overlaps(), Vec::<String>::new(), "no slot granted by two replicas at once");
    a.stop.send_replace(true);
    ns.delete().await;
}

fn has_finalizer(lease: &Lease) -> bool {
    lease.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// Someone deletes a running replica's Lease. Its finalizer keeps it,
/// claims and all, so nobody takes the replica's slots while it may grant
/// from them; the replica hands them over as on a stop, lets the Lease go
/// and joins again with a new one, and gets its share back.
#[tokio::test]
#[ignore = "needs the local control plane: hack/control-plane up"]
async fn k8s_a_deleted_lease_should_not_free_the_slots_of_its_running_replica() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "shard-deleted").await;
    let checker = Checker::start();
    let a = checker.start_replica(&client, ns.name(), "a");
    let b = checker.start_replica(&client, ns.name(), "b");
    covered(&[&a, &b], Duration::from_secs(30)).await;
    let a_share = a.granting(Instant::now());

    let leases = ns.api::<Lease>();
    let before = leases.get("users-a").await.unwrap();
    assert!(has_finalizer(&before), "a running replica's Lease carries the finalizer");
    leases.delete("users-a", &DeleteParams::default()).await.unwrap();
    let deleted = Instant::now();
    let marked = leases.get("users-a").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some(), "the finalizer keeps the Lease, marked, claims and all");
    // a hands everything over, then its Lease goes and a new one comes.
    loop {
        let now = leases.get_opt("users-a").await.unwrap();
        if now.is_some_and(|l| l.metadata.uid != before.metadata.uid && l.metadata.deletion_timestamp.is_none()) {
            break;
        }
        assert!(deleted.elapsed() < Duration::from_secs(30), "a did not join again with a new Lease");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("a joined again with a new Lease {:?} after its Lease was deleted", deleted.elapsed());
    while a.granting(Instant::now()) != a_share {
        assert!(deleted.elapsed() < Duration::from_secs(60), "a did not get its share back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    covered(&[&a, &b], Duration::from_secs(30)).await;
    println!("a granted its share again {:?} after its Lease was deleted", deleted.elapsed());
    assert_eq!(checker.overlaps(), Vec::<String>::new(), "no slot granted by two replicas at once");
    a.stop.send_replace(true);
    b.stop.send_replace(true);
    ns.delete().await;
}

/// A crashed replica's Lease whose write id does not parse (written by
/// hand, or by a release that wrote another form) cannot be marked with the
/// write judged: the survivors remove its finalizer and leave no mark, and
/// each asks for that once, not again every round while the Lease waits to
/// be deleted (an update that changes nothing leaves no trace on the Lease,
/// so the survivors' requests are counted).
#[tokio::test]
#[ignore = "needs the local control plane: hack/control-plane up"]
async fn k8s_an_expired_lease_with_a_write_id_that_does_not_parse_should_be_written_once() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "shard-bad-write").await;
    let checker = Checker::start();
    let (a_client, a_log) = request_log::client(&client);
    let (b_client, b_log) = request_log::client(&client);
    let a = checker.start_replica(&a_client, ns.name(), "a");
    let b = checker.start_replica(&b_client, ns.name(), "b");
    let c = checker.start_replica(&client, ns.name(), "c");
    covered(&[&a, &b, &c], Duration::from_secs(30)).await;

    c.crash();
    let leases = ns.api::<Lease>();
    let garbled = serde_json::json!({ "metadata": { "annotations": { WRITE_ANNOTATION: "not a write id" } } });
    leases.patch("users-c", &PatchParams::default(), &Patch::Merge(&garbled)).await.unwrap();
    covered(&[&a, &b], Duration::from_secs(30)).await;

    let crashed = Instant::now();
    let mut unfinalized = false;
    while let Some(lease) = leases.get_opt("users-c").await.unwrap() {
        if !has_finalizer(&lease) && !unfinalized {
            let annotations = lease.metadata.annotations.unwrap_or_default();
            assert_eq!(annotations.get(EXPIRED_ANNOTATION), None, "no mark names a write id that does not parse");
            unfinalized = true;
        }
        assert!(crashed.elapsed() < Duration::from_secs(60), "c's Lease was neither unfinalized nor deleted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(unfinalized, "c's Lease lost its finalizer before it was deleted");
    // Deleted a lease duration after it expired, that is after about two
    // rounds of each survivor: one update each at most (the finalizer's
    // removal, or a try that lost to the other's), and no more.
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{}/leases/users-c", ns.name());
    let updates = [a_log.count(&Method::PUT, &path), b_log.count(&Method::PUT, &path)];
    println!("updates of c's Lease by a and b: {updates:?}");
    assert!(updates.iter().all(|&n| n <= 1), "each survivor updated c's Lease once at most: {updates:?}");
    assert!(updates.iter().sum::<usize>() >= 1, "a survivor removed the finalizer: {updates:?}");
    assert_eq!(checker.overlaps(), Vec::<String>::new(), "no slot granted by two replicas at once");
    a.stop.send_replace(true);
    b.stop.send_replace(true);
    ns.delete().await;
}

/// The checker above can fail: replicas of two groups each cover every
/// slot, which it reports as overlaps once both are put in one group's view.
#[tokio::test]
#[ignore = "needs the local control plane: hack/control-plane up"]
async fn k8s_the_overlap_check_should_see_two_replicas_granting_one_slot() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "shard-overlap").await;
    let checker = Checker::start();
    let x = Arc::new(Replica::start(&client, ns.name(), "x", "one"));
    let y = Arc::new(Replica::start(&client, ns.name(), "y", "two"));
    covered(&[&x], Duration::from_secs(30)).await;
    covered(&[&y], Duration::from_secs(30)).await;
    // The same replicas, seen as one group: each grants every slot.
    let pretend = |r: &Replica| Replica {
        name: r.name.clone(),
        group: "one view".into(),
        grant: r.grant.clone(),
        stop: r.stop.clone(),
        membership: tokio::spawn(async {}),
        queues: tokio::spawn(async {}),
    };
    checker.watch(&Arc::new(pretend(&x)));
    checker.watch(&Arc::new(pretend(&y)));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!checker.overlaps().is_empty(), "two replicas granting every slot are reported");
    x.stop.send_replace(true);
    y.stop.send_replace(true);
    ns.delete().await;
}
