//! The stale-read guard against the real control plane: a reconcile never reads a cache older than its own
//! last write through the sidecar, a read right after a write sees it, a write under a lost lease is
//! refused and not made, and a lease does not end while a write under it waits for the API server,
//! even one whose caller gave up on it; writes so carried on are bounded.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::control_plane::{self, TestNamespace};
use support::informers::Sidecar;
use support::proxy::{Proxy, apiserver_port, kubeconfig_via};
use tonic::Code;
use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb;
use workqueue_sidecar::objects::{MAX_WRITES_OUT, ObjectWriter};

use pb::cache_service_client::CacheServiceClient;
use pb::object_service_client::ObjectServiceClient;
use pb::work_queue_service_client::WorkQueueServiceClient;

/// Reconciles of one key in the lease test: each reads, writes, and asks to
/// run again at once. Without settling about one in 40 to 200 of them was
/// granted before the watch delivered the previous write (measured here).
const ROUNDS: u64 = 200;
/// Writes each read back at once, in the read test.
const READS: u64 = 200;

fn config_maps() -> Option<pb::ResourceType> {
    Some(pb::ResourceType { api_version: "v1".into(), kind: "ConfigMap".into() })
}

fn secs(n: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds: n, nanos: 0 })
}

#[derive(Clone)]
struct Clients {
    queue: WorkQueueServiceClient<Channel>,
    cache: CacheServiceClient<Channel>,
    objects: ObjectServiceClient<Channel>,
}

impl Clients {
    fn new(channel: Channel) -> Self {
        Clients {
            queue: WorkQueueServiceClient::new(channel.clone()),
            cache: CacheServiceClient::new(channel.clone()),
            objects: ObjectServiceClient::new(channel),
        }
    }

    /// The counter in the cached ConfigMap, as a reconcile reads it.
    async fn read_counter(&mut self, namespace: &str, name: &str) -> u64 {
        let request = pb::GetObjectRequest {
            informer: "cms".into(),
            namespace: namespace.into(),
            name: name.into(),
            wait: secs(5),
            ..Default::default()
        };
        let object = self.cache.get_object(request).await.unwrap().into_inner().object.expect("cached");
        counter_of(&object.json)
    }

    async fn write_counter(
        &mut self,
        namespace: &str,
        name: &str,
        value: u64,
        lease: Option<pb::LeaseRef>,
    ) -> Result<String, tonic::Status> {
        let request = counter_patch(namespace, name, value, lease);
        let written = self.objects.patch_object(request).await?.into_inner().object.unwrap();
        Ok(written.resource_version)
    }

    async fn lease(&mut self) -> pb::Lease {
        self.lease_with(None).await
    }

    /// A lease of `ttl`.
    async fn lease_for(&mut self, ttl: Duration) -> pb::Lease {
        self.lease_with(Some(prost_types::Duration::try_from(ttl).unwrap())).await
    }

    async fn lease_with(&mut self, ttl: Option<prost_types::Duration>) -> pb::Lease {
        let request = pb::GetRequest {
            queue: "q".into(),
            worker: "test".into(),
            max_keys: 1,
            include_object: true,
            wait: secs(20),
            lease_ttl: ttl,
        };
        let mut leases = self.queue.get(request).await.unwrap().into_inner().leases;
        assert_eq!(leases.len(), 1, "a lease within 20 s");
        leases.remove(0)
    }
}

/// A patch setting the counter of ConfigMap `name` to `value`.
fn counter_patch(namespace: &str, name: &str, value: u64, lease: Option<pb::LeaseRef>) -> pb::PatchObjectRequest {
    let patch = json!({"data": {"counter": value.to_string()}});
    pb::PatchObjectRequest {
        r#type: config_maps(),
        namespace: namespace.into(),
        name: name.into(),
        patch_type: pb::PatchType::Merge as i32,
        patch: serde_json::to_vec(&patch).unwrap(),
        lease,
        ..Default::default()
    }
}

fn counter_of(json: &[u8]) -> u64 {
    let object: Value = serde_json::from_slice(json).unwrap();
    object["data"]["counter"].as_str().unwrap().parse().unwrap()
}

/// A sidecar on ConfigMaps of a new namespace, queue `q` with `queue_fields`
/// added to its settings, serving gRPC with writes; the sidecar and its
/// server run while the returned pair lives.
async fn start(
    prefix: &str,
    queue_fields: &str,
) -> (TestNamespace, Clients, (Sidecar, tokio::sync::watch::Sender<bool>)) {
    start_with(control_plane::client().await, prefix, queue_fields, MAX_WRITES_OUT).await
}

/// As `start`, the sidecar reaching the API server through `client`, with at most
/// `max_writes_out` writes out at once.
async fn start_with(
    client: kube::Client,
    prefix: &str,
    queue_fields: &str,
    max_writes_out: usize,
) -> (TestNamespace, Clients, (Sidecar, tokio::sync::watch::Sender<bool>)) {
    let ns = TestNamespace::create(&client, prefix).await;
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {ns} }}\nqueues:\n  q: {{ primary: cms{queue_fields} }}\n\
         writes:\n  - {{ kind: ConfigMap, namespaces: [{ns}], lease: optional }}\n",
        ns = ns.name()
    );
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let writer = ObjectWriter::with_max_out(client.clone(), "tests".into(), max_writes_out);
    let (channel, stop) = sidecar.serve_grpc(Some(writer)).await;
    (ns, Clients::new(channel), (sidecar, stop))
}

/// As `start`, the sidecar reaching the API server through a proxy the test can stall.
async fn start_behind_proxy(
    prefix: &str,
    queue_fields: &str,
) -> (Proxy, TestNamespace, Clients, (Sidecar, tokio::sync::watch::Sender<bool>)) {
    start_behind_proxy_with(prefix, queue_fields, MAX_WRITES_OUT).await
}

/// As `start_behind_proxy`, with at most `max_writes_out` writes out at once.
async fn start_behind_proxy_with(
    prefix: &str,
    queue_fields: &str,
    max_writes_out: usize,
) -> (Proxy, TestNamespace, Clients, (Sidecar, tokio::sync::watch::Sender<bool>)) {
    let proxy = Proxy::start(apiserver_port()).await;
    let dir = std::env::temp_dir().join(control_plane::unique_name(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    let client = control_plane::client_from(&kubeconfig_via(proxy.port, &dir)).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let (ns, clients, running) = start_with(client, prefix, queue_fields, max_writes_out).await;
    (proxy, ns, clients, running)
}

async fn create_counter(clients: &mut Clients, namespace: &str, name: &str) {
    let object = json!({"metadata": {"name": name}, "data": {"counter": "0"}});
    let request = pb::CreateObjectRequest {
        r#type: config_maps(),
        namespace: namespace.into(),
        json: serde_json::to_vec(&object).unwrap(),
        ..Default::default()
    };
    clients.objects.create_object(request).await.unwrap();
}

/// Ends `lease` with Done while a write under it is out, and adds its key again: no other worker
/// gets the key for 1.5 s, and it stays SETTLING with no bound. Answers the other worker's Get.
async fn end_and_add_while_the_write_is_out(clients: &mut Clients, lease: &pb::Lease, write: &str) -> pb::GetRequest {
    let key = &lease.key;
    let done = pb::DoneRequest { queue: "q".into(), key: key.clone(), token: lease.token };
    clients.queue.done(done).await.unwrap();
    let add = pb::AddRequest { queue: "q".into(), keys: vec![key.clone()], ..Default::default() };
    clients.queue.add(add).await.unwrap();
    let other = pb::GetRequest {
        queue: "q".into(),
        worker: "other".into(),
        max_keys: 1,
        wait: Some(prost_types::Duration { seconds: 1, nanos: 500_000_000 }),
        include_object: true,
        ..Default::default()
    };
    let meanwhile = clients.queue.get(other.clone()).await.unwrap().into_inner().leases;
    assert!(meanwhile.is_empty(), "{key} was leased again while a write {write} was unanswered");
    let state = clients.queue.key_state(pb::KeyStateRequest { queue: "q".into(), key: key.clone() }).await.unwrap();
    let state = state.into_inner();
    assert_eq!(state.state, pb::KeyState::Settling as i32, "{state:?}");
    assert_eq!(state.settling_until, None, "no bound while the write is unanswered: {state:?}");
    other
}

/// Once the write is answered, `other` gets the key, and its lease's object has the write (counter 1).
async fn next_lease_sees_the_write(clients: &mut Clients, other: pb::GetRequest) {
    let next = clients.queue.get(pb::GetRequest { wait: secs(10), ..other }).await.unwrap().into_inner().leases;
    assert_eq!(next.len(), 1, "the key goes on once the write is answered");
    assert_eq!(counter_of(&next[0].object.as_ref().expect("the lease's object").json), 1, "it sees the write");
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_reconcile_should_never_read_a_cache_older_than_its_own_last_write() {
    let (ns, mut clients, _running) = start("stale", "").await;
    create_counter(&mut clients, ns.name(), "counter").await;

    // Each round is one reconcile: read the counter from the cache, write
    // it plus one under the lease, finish asking to run again at once. The
    // next lease comes before the watch has (often) delivered the write:
    // without the guard its read sees the value before the last write.
    // The lease's own object is the cache's state when the lease was granted
    // (only settling keeps it fresh); a read is served later (the read guard
    // keeps it fresh on its own).
    let (mut stale_leases, mut stale_reads) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let lease = clients.lease().await;
        assert_eq!(lease.key, format!("{}/counter", ns.name()));
        let on_lease = counter_of(&lease.object.as_ref().expect("the lease's object").json);
        if on_lease != round {
            stale_leases.push((round, on_lease));
        }
        let read = clients.read_counter(ns.name(), "counter").await;
        if read != round {
            stale_reads.push((round, read));
        }
        let under = pb::LeaseRef { queue: "q".into(), key: lease.key.clone(), token: lease.token };
        clients.write_counter(ns.name(), "counter", read + 1, Some(under)).await.unwrap();
        let finish = pb::FinishRequest {
            queue: "q".into(),
            key: lease.key,
            token: lease.token,
            outcome: Some(pb::finish_request::Outcome::RequeueAfter(pb::RequeueAfter { delay: secs(0) })),
        };
        clients.queue.finish(finish).await.unwrap();
    }
    assert_eq!(stale_leases, [], "(round, counter): leases granted from a cache older than their key's last write");
    assert_eq!(stale_reads, [], "(round, counter read): reconciles that read a cache older than their last write");

    // A read right after a write without a lease sees the write too. The
    // time each read takes is printed (run with --nocapture), beside reads
    // with no write pending: the guard's cost. Not asserted: shared machines.
    let (mut after_write, mut quiet) = (Vec::new(), Vec::new());
    for value in 1000..1000 + READS {
        clients.write_counter(ns.name(), "counter", value, None).await.unwrap();
        let started = std::time::Instant::now();
        assert_eq!(clients.read_counter(ns.name(), "counter").await, value, "read right after writing {value}");
        after_write.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
        let started = std::time::Instant::now();
        clients.read_counter(ns.name(), "counter").await;
        quiet.push(started.elapsed());
    }
    eprintln!("read latency right after a write: {}; with no write pending: {}", summary(after_write), summary(quiet));
}

/// p50 and p99 of some durations, in microseconds.
fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize].as_micros();
    format!("p50 {} µs, p99 {} µs ({} reads)", at(0.5), at(0.99), samples.len())
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_write_under_a_lost_lease_should_be_refused_and_not_made() {
    let (ns, mut clients, _running) = start("fenced", ", settle_timeout: 30s").await;
    create_counter(&mut clients, ns.name(), "fenced").await;

    let lease = clients.lease().await;
    let under = pb::LeaseRef { queue: "q".into(), key: lease.key.clone(), token: lease.token };
    let done = pb::DoneRequest { queue: "q".into(), key: lease.key.clone(), token: lease.token };
    clients.queue.done(done).await.unwrap();
    let refused = clients.write_counter(ns.name(), "fenced", 7, Some(under.clone())).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(clients.read_counter(ns.name(), "fenced").await, 0, "the refused write was not made");

    // Bad lease references are refused before anything is written.
    let unknown = pb::LeaseRef { queue: "nope".into(), ..under.clone() };
    let err = clients.write_counter(ns.name(), "fenced", 8, Some(unknown)).await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let zero = pb::LeaseRef { token: 0, ..under };
    let err = clients.write_counter(ns.name(), "fenced", 8, Some(zero)).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");

    // A write under a current lease settles the key: KeyState says so until
    // the cache has the write (or, here, the 30 s bound).
    let add = pb::AddRequest { queue: "q".into(), keys: vec![format!("{}/fenced", ns.name())], ..Default::default() };
    clients.queue.add(add).await.unwrap();
    let lease = clients.lease().await;
    let under = pb::LeaseRef { queue: "q".into(), key: lease.key.clone(), token: lease.token };
    let key = lease.key.clone();
    clients.write_counter(ns.name(), "fenced", 9, Some(under)).await.unwrap();
    let done = pb::DoneRequest { queue: "q".into(), key: key.clone(), token: lease.token };
    clients.queue.done(done).await.unwrap();
    let request = pb::KeyStateRequest { queue: "q".into(), key };
    let first = clients.queue.key_state(request.clone()).await.unwrap().into_inner();
    // The watch may already have delivered it: then the key went on at once
    // (queued again, as the write's own event marked it dirty).
    let states = [pb::KeyState::Settling as i32, pb::KeyState::Queued as i32];
    assert!(states.contains(&first.state), "settling or queued after the write: {first:?}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let now = clients.queue.key_state(request.clone()).await.unwrap().into_inner();
        if now.state == pb::KeyState::Queued as i32 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "still not queued after the cache saw the write: {now:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A write under a lease that the API server answers only after the lease's deadline: the lease is
/// kept until the answer, so no other worker gets the key while the write may still land, and once
/// answered past its deadline the lease ends (as expired). Until 2026-11-28 the lease expired on time,
/// the key settled for `settle_timeout` and went to the next worker while the first one's write was
/// still on its way, and that write was answered OK.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_lease_should_not_end_while_a_write_under_it_waits_for_the_api_server() {
    let (proxy, ns, mut clients, _running) = start_behind_proxy("slow-write", ", settle_timeout: 200ms").await;
    create_counter(&mut clients, ns.name(), "slow").await;
    let lease = clients.lease_for(Duration::from_millis(500)).await;
    let key = lease.key.clone();
    let under = pb::LeaseRef { queue: "q".into(), key: key.clone(), token: lease.token };

    // The API server takes 2 s to answer: four times the lease, ten times the settle bound.
    proxy.stall();
    let mut writer = clients.clone();
    let namespace = ns.name().to_owned();
    let write = tokio::spawn(async move { writer.write_counter(&namespace, "slow", 1, Some(under)).await });
    let add = pb::AddRequest { queue: "q".into(), keys: vec![key.clone()], ..Default::default() };
    tokio::time::sleep(Duration::from_millis(100)).await;
    clients.queue.add(add).await.unwrap();
    let other = pb::GetRequest {
        queue: "q".into(),
        worker: "other".into(),
        max_keys: 1,
        wait: Some(prost_types::Duration { seconds: 1, nanos: 900_000_000 }),
        ..Default::default()
    };
    let meanwhile = clients.queue.get(other.clone()).await.unwrap().into_inner().leases;
    let state = clients.queue.key_state(pb::KeyStateRequest { queue: "q".into(), key: key.clone() }).await.unwrap();
    assert!(
        meanwhile.is_empty(),
        "{key} was leased to another worker while the first one's write was unanswered: {meanwhile:?}"
    );
    assert_eq!(state.into_inner().state, pb::KeyState::Held as i32, "still held by the writer");
    assert!(!write.is_finished(), "the write was answered while the proxy held it");

    proxy.restore();
    let written = write.await.unwrap();
    assert!(written.is_ok(), "the write under the kept lease is answered OK: {written:?}");
    // Answered past its deadline: the lease ended with the answer, and the
    // next lease (the add above) sees the write.
    let done = pb::DoneRequest { queue: "q".into(), key: key.clone(), token: lease.token };
    let err = clients.queue.done(done).await.unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    let next = clients.queue.get(pb::GetRequest { wait: secs(10), include_object: true, ..other }).await.unwrap();
    let next = next.into_inner().leases;
    assert_eq!(next.len(), 1, "the key goes on once the write is answered");
    assert_eq!(counter_of(&next[0].object.as_ref().expect("the lease's object").json), 1, "it sees the write");
}

/// A worker that ends its lease while its own write under it is still unanswered: the key waits for
/// the answer (then for the caches, or `settle_timeout` from the answer), and the write, made after
/// its lease ended, is answered ABORTED saying so, not OK.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_write_answered_after_its_lease_ended_should_be_aborted_and_hold_the_key_until_then() {
    let (proxy, ns, mut clients, _running) = start_behind_proxy("ended-write", ", settle_timeout: 200ms").await;
    create_counter(&mut clients, ns.name(), "ended").await;
    let lease = clients.lease().await;
    let key = lease.key.clone();
    let under = pb::LeaseRef { queue: "q".into(), key: key.clone(), token: lease.token };

    proxy.stall();
    let mut writer = clients.clone();
    let namespace = ns.name().to_owned();
    let write = tokio::spawn(async move { writer.write_counter(&namespace, "ended", 1, Some(under)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other = end_and_add_while_the_write_is_out(&mut clients, &lease, "under its last lease").await;

    proxy.restore();
    let refused = write.await.unwrap().unwrap_err();
    assert_eq!(refused.code(), Code::Aborted, "{refused:?}");
    assert!(refused.message().contains("the write was made"), "{refused:?}");
    let info = tonic_types::StatusExt::get_details_error_info(&refused).expect("an ErrorInfo");
    assert_eq!((info.domain.as_str(), info.reason.as_str()), ("workqueue-sidecar", "LEASE_ENDED_DURING_WRITE"));
    next_lease_sees_the_write(&mut clients, other).await;
}

/// A worker that gives up on its write while the API server is slow (its deadline passes), then ends
/// its lease: the sidecar carries the write on to the API server's answer, and the key waits for that
/// answer (then for the caches), as it waits for a write its caller still awaits. Cut off with the
/// cancelled call, the write left the key free at once, though the API server may still apply it.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_write_whose_caller_gave_up_should_still_hold_the_key_until_the_api_server_answers() {
    let (proxy, ns, mut clients, _running) = start_behind_proxy("given-up-write", ", settle_timeout: 200ms").await;
    create_counter(&mut clients, ns.name(), "given-up").await;
    let lease = clients.lease().await;
    let key = lease.key.clone();
    let under = pb::LeaseRef { queue: "q".into(), key: key.clone(), token: lease.token };

    proxy.stall();
    let mut write = tonic::Request::new(counter_patch(ns.name(), "given-up", 1, Some(under)));
    write.set_timeout(Duration::from_millis(300));
    let given_up = clients.objects.patch_object(write).await.unwrap_err();
    assert!(matches!(given_up.code(), Code::DeadlineExceeded | Code::Cancelled), "{given_up:?}");
    let other = end_and_add_while_the_write_is_out(&mut clients, &lease, "its worker gave up on").await;

    proxy.restore();
    next_lease_sees_the_write(&mut clients, other).await;
}

/// Writes whose callers gave up run on until the API server answers, so they are bounded: with
/// every slot taken by such writes to a stalled API server, the next write is refused at once
/// (UNAVAILABLE, TOO_MANY_WRITES_OUT), not left to pile up; once the API server answers, writes
/// go through again. Unbounded, a caller retrying against an API server that did not answer added
/// a write (and a connection) per try, each kept for up to the client's 295 s read timeout.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_writes_carried_on_after_their_callers_gave_up_should_be_bounded() {
    const MAX_OUT: usize = 2;
    let (proxy, ns, mut clients, _running) = start_behind_proxy_with("writes-out", "", MAX_OUT).await;
    create_counter(&mut clients, ns.name(), "bounded").await;

    proxy.stall();
    for value in 1..=MAX_OUT as u64 {
        let mut write = tonic::Request::new(counter_patch(ns.name(), "bounded", value, None));
        write.set_timeout(Duration::from_millis(300));
        let given_up = clients.objects.patch_object(write).await.unwrap_err();
        assert!(matches!(given_up.code(), Code::DeadlineExceeded | Code::Cancelled), "{given_up:?}");
    }
    // Sent to the stalled API server, this write would outlive its deadline; refused, it returns first.
    let mut write = tonic::Request::new(counter_patch(ns.name(), "bounded", 100, None));
    write.set_timeout(Duration::from_secs(5));
    let refused = clients.objects.patch_object(write).await.unwrap_err();
    assert_too_many_writes_out(&refused);

    proxy.restore();
    let mut refusals = 0;
    let written = loop {
        match clients.write_counter(ns.name(), "bounded", 7, None).await {
            Ok(version) => break version,
            Err(refused) if refusals < 100 => {
                // The writes out may not have their answers yet.
                assert_too_many_writes_out(&refused);
                refusals += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(status) => panic!("still refused 10 s after the API server answered again: {status:?}"),
        }
    };
    assert!(!written.is_empty(), "the API server's answer has the object's resourceVersion");
}

fn assert_too_many_writes_out(refused: &tonic::Status) {
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("writes to the API server are still unanswered"), "{refused:?}");
    let info = tonic_types::StatusExt::get_details_error_info(refused).expect("an ErrorInfo");
    assert_eq!((info.domain.as_str(), info.reason.as_str()), ("workqueue-sidecar", "TOO_MANY_WRITES_OUT"));
}

/// An object deleted and created again under its name, both through the sidecar: a read after
/// both sees the new object. The guard waited for the name to be empty in the cache, which never
/// came once the new object was there, and failed the read after 10 s; here that needs the watch
/// to bring both events in one read (an outside review saw it 3 times in 3 behind a lagging
/// watch; this loopback run rarely does), so the unit test
/// `writes::freshness::a_deletion_should_be_seen_when_the_name_is_empty_or_holds_a_newer_object` shows
/// it every time, and this one checks the whole path against the API server's delete answer.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_read_after_a_delete_and_a_create_of_the_same_name_should_see_the_new_object() {
    let (ns, mut clients, _running) = start("recreate", "").await;
    for round in 0..5u64 {
        create_counter(&mut clients, ns.name(), "again").await;
        let delete = pb::DeleteObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            name: "again".into(),
            ..Default::default()
        };
        assert!(clients.objects.delete_object(delete).await.unwrap().into_inner().gone);
        clients.write_counter(ns.name(), "again", round, None).await.unwrap_err(); // not there now
        let object = json!({"metadata": {"name": "again"}, "data": {"counter": (round + 100).to_string()}});
        let request = pb::CreateObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            json: serde_json::to_vec(&object).unwrap(),
            ..Default::default()
        };
        clients.objects.create_object(request).await.unwrap();
        let read = pb::GetObjectRequest {
            informer: "cms".into(),
            namespace: ns.name().into(),
            name: "again".into(),
            wait: secs(5),
            ..Default::default()
        };
        let answer = clients.cache.get_object(read).await;
        let object = answer.unwrap_or_else(|status| panic!("round {round}: {status:?}")).into_inner().object;
        assert_eq!(counter_of(&object.expect("cached").json), round + 100, "round {round}: the new object");
        let delete = pb::DeleteObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            name: "again".into(),
            ..Default::default()
        };
        clients.objects.delete_object(delete).await.unwrap();
    }
    ns.delete().await;
}
