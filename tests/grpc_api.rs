//! In-process gRPC tests: a real server on 127.0.0.1:0 and a tonic client,
//! covering every RPC of WorkQueueService and every error code.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, finish_request, work_request, work_response};
use workqueue_sidecar::grpc::{self, MAX_BATCH_KEYS, MAX_KEY_BYTES, ShutDownRpc};
use workqueue_sidecar::queue::{QueueSettings, RateLimiterSpec};
use workqueue_sidecar::queue_registry::QueueRegistry;
use workqueue_sidecar::server::{Listeners, serve};

#[path = "support/raw_codec.rs"]
mod raw_codec;
use raw_codec::RawCodec;

type Client = WorkQueueServiceClient<Channel>;

struct TestServer {
    client: Client,
    channel: Channel,
    _stop: watch::Sender<bool>,
}

/// The server's grace period: what a ShutDown drain naming no timeout takes.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

fn settings() -> QueueSettings {
    QueueSettings {
        rate_limiter: RateLimiterSpec::Exponential { base: Duration::from_millis(5), max: Duration::from_secs(10) },
        ..QueueSettings::default()
    }
}

async fn start() -> TestServer {
    start_with(ShutDownRpc::Allowed { drain_grace: DRAIN_GRACE }).await
}

async fn start_with(shut_down: ShutDownRpc) -> TestServer {
    let queues = Arc::new(
        QueueRegistry::new([
            ("default".to_string(), settings()),
            ("tiny".to_string(), QueueSettings { max_keys: 1, ..settings() }),
            ("short".to_string(), QueueSettings { lease_ttl: Duration::from_millis(300), ..settings() }),
            // client-go's default limiter (with the 10 qps bucket), short leases.
            ("hung".to_string(), QueueSettings { lease_ttl: Duration::from_millis(300), ..QueueSettings::default() }),
        ])
        .unwrap(),
    );
    let listeners = Listeners::bind(Some("127.0.0.1:0".parse().unwrap()), None, false).await.unwrap();
    let address = listeners.tcp_address().unwrap();
    let informers = Arc::new(workqueue_sidecar::informer::InformerRegistry::empty());
    let api = grpc::api(queues, informers, None, shut_down).await.unwrap();
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(serve(api.routes, listeners, stop_rx));
    let channel = tonic::transport::Endpoint::new(format!("http://{address}")).unwrap().connect().await.unwrap();
    let client = WorkQueueServiceClient::new(channel.clone());
    TestServer { client, channel, _stop: stop }
}

fn add(queue: &str, keys: &[&str], priority: Option<i32>) -> pb::AddRequest {
    pb::AddRequest {
        queue: queue.into(),
        keys: keys.iter().map(|k| k.to_string()).collect(),
        priority,
        reason: "test".into(),
    }
}

fn get(queue: &str, max_keys: u32, wait_ms: u64) -> pb::GetRequest {
    pb::GetRequest {
        queue: queue.into(),
        worker: "tester".into(),
        max_keys,
        wait: Some(prost_types::Duration { seconds: 0, nanos: (wait_ms * 1_000_000) as i32 }),
        lease_ttl: None,
        include_object: false,
    }
}

async fn take(client: &mut Client, queue: &str) -> pb::Lease {
    let mut leases = client.get(get(queue, 1, 500)).await.unwrap().into_inner().leases;
    assert_eq!(leases.len(), 1, "expected one lease");
    leases.remove(0)
}

fn done(queue: &str, lease: &pb::Lease) -> pb::DoneRequest {
    pb::DoneRequest { queue: queue.into(), key: lease.key.clone(), token: lease.token }
}

fn finish(queue: &str, lease: &pb::Lease, outcome: finish_request::Outcome) -> pb::FinishRequest {
    pb::FinishRequest { queue: queue.into(), key: lease.key.clone(), token: lease.token, outcome: Some(outcome) }
}

#[tokio::test]
async fn add_get_done_should_round_trip_with_priorities_and_reasons() {
    let mut s = start().await;
    s.client.add(add("default", &["slow"], Some(-100))).await.unwrap();
    s.client.add(add("default", &["fast-1", "fast-2"], None)).await.unwrap();
    let len = s.client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!(len.ready, 3);
    assert_eq!(
        len.ready_by_priority.iter().map(|p| (p.priority, p.count)).collect::<Vec<_>>(),
        vec![(0, 2), (-100, 1)]
    );
    let leases = s.client.get(get("default", 10, 0)).await.unwrap().into_inner().leases;
    let keys: Vec<_> = leases.iter().map(|l| l.key.as_str()).collect();
    assert_eq!(keys, ["fast-1", "fast-2", "slow"]);
    let first = &leases[0];
    assert_ne!(first.token, 0);
    assert!(first.deadline.is_some() && first.ttl.is_some() && first.enqueued_at.is_some());
    assert_eq!(first.reasons[0].kind, pb::ReasonKind::Manual as i32);
    assert_eq!(first.reasons[0].source, "test");
    for lease in &leases {
        s.client.done(done("default", lease)).await.unwrap();
    }
    let len = s.client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!((len.ready, len.held), (0, 0));
}

#[tokio::test]
async fn get_should_long_poll_and_return_empty_when_nothing_comes() {
    let mut s = start().await;
    let started = std::time::Instant::now();
    let leases = s.client.get(get("default", 1, 200)).await.unwrap().into_inner().leases;
    assert!(leases.is_empty());
    assert!(started.elapsed() >= Duration::from_millis(200));

    let mut waiter = s.client.clone();
    let pending = tokio::spawn(async move { waiter.get(get("default", 1, 5_000)).await.unwrap().into_inner().leases });
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.client.add(add("default", &["late"], None)).await.unwrap();
    let leases = pending.await.unwrap();
    assert_eq!(leases[0].key, "late");
}

#[tokio::test]
async fn add_after_and_add_rate_limited_should_delay_and_count() {
    let mut s = start().await;
    s.client
        .add_after(pb::AddAfterRequest {
            queue: "default".into(),
            keys: vec!["later".into()],
            delay: Some(prost_types::Duration { seconds: 60, nanos: 0 }),
            priority: None,
            reason: String::new(),
        })
        .await
        .unwrap();
    let state = s
        .client
        .key_state(pb::KeyStateRequest { queue: "default".into(), key: "later".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.state, pb::KeyState::Waiting as i32);
    assert!(state.waiting_until.is_some());
    assert_eq!(state.reasons[0].kind, pb::ReasonKind::RequeueAfter as i32, "AddAfter's documented reason");

    let req = pb::AddRateLimitedRequest {
        queue: "default".into(),
        keys: vec!["flaky".into()],
        priority: None,
        reason: String::new(),
    };
    let twice = pb::AddRateLimitedRequest {
        queue: "default".into(),
        keys: vec!["dup".into(), "dup".into()],
        priority: None,
        reason: String::new(),
    };
    let answer = s.client.add_rate_limited(twice).await.unwrap().into_inner();
    assert_eq!(answer.keys.len(), 1, "duplicates in a batch count once");
    assert_eq!(answer.keys[0].failures, 1);
    let first = s.client.add_rate_limited(req.clone()).await.unwrap().into_inner();
    let second = s.client.add_rate_limited(req).await.unwrap().into_inner();
    assert_eq!(first.keys[0].failures, 1);
    let flaky = pb::KeyStateRequest { queue: "default".into(), key: "flaky".into() };
    let state = s.client.key_state(flaky).await.unwrap().into_inner();
    assert_eq!(state.reasons[0].kind, pb::ReasonKind::Retry as i32, "AddRateLimited's documented reason");
    assert_eq!(second.keys[0].failures, 2);
    assert_eq!(second.keys[0].delay, Some(prost_types::Duration { seconds: 0, nanos: 10_000_000 }));
    let requeues = |key: &str| pb::NumRequeuesRequest { queue: "default".into(), key: key.into() };
    assert_eq!(s.client.num_requeues(requeues("flaky")).await.unwrap().into_inner().num_requeues, 2);
    s.client.forget(pb::ForgetRequest { queue: "default".into(), key: "flaky".into() }).await.unwrap();
    assert_eq!(s.client.num_requeues(requeues("flaky")).await.unwrap().into_inner().num_requeues, 0);
}

#[tokio::test]
async fn finish_extend_and_key_state_should_follow_the_lease() {
    let mut s = start().await;
    s.client.add(add("default", &["k"], Some(3))).await.unwrap();
    let lease = take(&mut s.client, "default").await;
    s.client.add(add("default", &["k"], None)).await.unwrap();
    let state = s
        .client
        .key_state(pb::KeyStateRequest { queue: "default".into(), key: "k".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.state, pb::KeyState::Held as i32);
    assert!(state.dirty);
    assert_eq!(state.holder, "tester");
    let extended = s
        .client
        .extend(pb::ExtendRequest {
            queue: "default".into(),
            key: "k".into(),
            token: lease.token,
            ttl: Some(prost_types::Duration { seconds: 120, nanos: 0 }),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(extended.ttl.unwrap().seconds >= 119);
    assert!(!extended.cancel);
    s.client
        .finish(finish("default", &lease, finish_request::Outcome::Retry(pb::Retry { error: "conflict".into() })))
        .await
        .unwrap();
    let again = take(&mut s.client, "default").await;
    assert_eq!((again.failures, again.last_error.as_str()), (1, "conflict"));
    s.client.finish(finish("default", &again, finish_request::Outcome::Success(pb::Success {}))).await.unwrap();
    let state = s
        .client
        .key_state(pb::KeyStateRequest { queue: "default".into(), key: "k".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((state.state, state.failures), (pb::KeyState::Absent as i32, 0));
}

#[tokio::test]
async fn errors_should_carry_their_documented_codes() {
    let mut s = start().await;
    let code = |r: Result<tonic::Response<_>, tonic::Status>| -> Code {
        match r {
            Ok(_) => Code::Ok,
            Err(status) => status.code(),
        }
    };
    // NOT_FOUND: unknown queue.
    assert_eq!(
        code(
            s.client
                .add(add("nope", &["k"], None))
                .await
                .map(|_: tonic::Response<pb::AddResponse>| tonic::Response::new(()))
        ),
        Code::NotFound
    );
    // INVALID_ARGUMENT: empty key, oversized key, no keys, missing queue, negative delay, missing outcome, zero token.
    let oversized = "x".repeat(MAX_KEY_BYTES + 1);
    for request in [
        add("default", &[""], None),
        add("default", &[&oversized], None),
        add("default", &[], None),
        add("", &["k"], None),
    ] {
        assert_eq!(s.client.add(request).await.unwrap_err().code(), Code::InvalidArgument);
    }
    let negative = pb::AddAfterRequest {
        queue: "default".into(),
        keys: vec!["k".into()],
        delay: Some(prost_types::Duration { seconds: -1, nanos: 0 }),
        priority: None,
        reason: String::new(),
    };
    assert_eq!(s.client.add_after(negative).await.unwrap_err().code(), Code::InvalidArgument);
    s.client.add(add("default", &["k"], None)).await.unwrap();
    let lease = take(&mut s.client, "default").await;
    let no_outcome = pb::FinishRequest { queue: "default".into(), key: "k".into(), token: lease.token, outcome: None };
    assert_eq!(s.client.finish(no_outcome).await.unwrap_err().code(), Code::InvalidArgument);
    let zero = pb::DoneRequest { queue: "default".into(), key: "k".into(), token: 0 };
    assert_eq!(s.client.done(zero).await.unwrap_err().code(), Code::InvalidArgument);
    // FAILED_PRECONDITION: stale token, and it changes nothing.
    let stale = pb::DoneRequest { queue: "default".into(), key: "k".into(), token: lease.token + 1 };
    let refused = s.client.done(stale).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition);
    assert_eq!(reason(&refused), ("workqueue-sidecar".into(), "STALE_LEASE".into()), "told apart from NO_KUBERNETES");
    s.client.done(done("default", &lease)).await.unwrap();
    assert_eq!(
        s.client.done(done("default", &lease)).await.unwrap_err().code(),
        Code::FailedPrecondition,
        "a duplicate Done is refused"
    );
    // RESOURCE_EXHAUSTED: a full queue, and a batch over the limit.
    s.client.add(add("tiny", &["one"], None)).await.unwrap();
    assert_eq!(s.client.add(add("tiny", &["two"], None)).await.unwrap_err().code(), Code::ResourceExhausted);
    let many: Vec<String> = (0..=MAX_BATCH_KEYS).map(|i| format!("k{i}")).collect();
    let big = pb::AddRequest { queue: "default".into(), keys: many, priority: None, reason: String::new() };
    assert_eq!(s.client.add(big).await.unwrap_err().code(), Code::ResourceExhausted);
    // UNAVAILABLE: after ShutDown.
    s.client.shut_down(pb::ShutDownRequest { queue: "tiny".into(), drain: false, drain_timeout: None }).await.unwrap();
    assert_eq!(s.client.add(add("tiny", &["one"], None)).await.unwrap_err().code(), Code::Unavailable);
    assert_eq!(s.client.get(get("tiny", 1, 100)).await.unwrap_err().code(), Code::Unavailable);
}

/// ShutDown stops a queue for every worker, so a sidecar started without
/// `--allow-shutdown-rpc` refuses it, drained or not, and the queue goes on
/// serving: no client can stop the others' work.
#[tokio::test]
async fn shut_down_should_be_refused_unless_allowed_and_change_nothing() {
    let mut s = start_with(ShutDownRpc::Refused).await;
    s.client.add(add("default", &["a"], None)).await.unwrap();
    for drain in [false, true] {
        let request = pb::ShutDownRequest { queue: "default".into(), drain, drain_timeout: None };
        let refused = s.client.shut_down(request).await.unwrap_err();
        assert_eq!(refused.code(), Code::PermissionDenied, "drain: {drain}");
        assert_eq!(reason(&refused), ("workqueue-sidecar".into(), "SHUTDOWN_NOT_ALLOWED".into()));
        assert!(refused.message().contains("--allow-shutdown-rpc"), "says how to allow it: {}", refused.message());
    }
    // An unknown queue is still NOT_FOUND first: the refusal names no queue it does not have.
    let unknown = pb::ShutDownRequest { queue: "nope".into(), drain: false, drain_timeout: None };
    assert_eq!(s.client.shut_down(unknown).await.unwrap_err().code(), Code::NotFound);
    let lease = take(&mut s.client, "default").await;
    assert_eq!(lease.key, "a", "the queue still hands out keys");
    s.client.done(done("default", &lease)).await.unwrap();
    s.client.add(add("default", &["b"], None)).await.unwrap();
}

#[tokio::test]
async fn shut_down_with_drain_should_report_finished_and_returned() {
    let mut s = start().await;
    s.client.add(add("default", &["a", "b"], None)).await.unwrap();
    let a = take(&mut s.client, "default").await;
    let _b = take(&mut s.client, "default").await;
    let mut other = s.client.clone();
    let drain = tokio::spawn(async move {
        other
            .shut_down(pb::ShutDownRequest {
                queue: "default".into(),
                drain: true,
                drain_timeout: Some(prost_types::Duration { seconds: 0, nanos: 500_000_000 }),
            })
            .await
            .unwrap()
            .into_inner()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    s.client.done(done("default", &a)).await.unwrap();
    let report = drain.await.unwrap();
    assert_eq!((report.finished, report.returned), (1, 1));
}

fn seconds(seconds: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos: 0 })
}

#[tokio::test]
async fn an_extend_naming_no_ttl_should_renew_a_lease_by_its_own() {
    let mut s = start().await;
    s.client.add(add("default", &["stream", "unary"], None)).await.unwrap();
    // The queue's lease_ttl is the default 30 s; this stream asks for 120 s.
    let open = work_request::Open {
        queue: "default".into(),
        worker: "long".into(),
        credits: 1,
        lease_ttl: seconds(120),
        include_object: false,
        ack_failures_only: false,
    };
    let mut worker = open_stream_as(&mut s.client, open).await;
    let lease = worker.next_lease().await;
    let extend = work_request::Extend { key: lease.key.clone(), token: lease.token, ttl: None };
    worker.send(work_request::Kind::Extend(extend)).await;
    match worker.next().await {
        work_response::Kind::Extended(extended) => {
            assert_eq!(extended.code, 0, "{extended:?}");
            assert!(extended.ttl.unwrap().seconds > 60, "renewed by the stream's 120 s: {extended:?}");
        }
        other => panic!("expected Extended, got {other:?}"),
    }
    // Unary: a lease taken for 120 s and extended with no ttl keeps 120 s.
    let get = pb::GetRequest { lease_ttl: seconds(120), ..get("default", 1, 500) };
    let lease = s.client.get(get).await.unwrap().into_inner().leases.remove(0);
    let extend = pb::ExtendRequest { queue: "default".into(), key: lease.key.clone(), token: lease.token, ttl: None };
    let extended = s.client.extend(extend).await.unwrap().into_inner();
    assert!(extended.ttl.unwrap().seconds > 60, "renewed by its own 120 s");
}

#[tokio::test]
async fn a_zero_lease_ttl_should_be_refused_naming_the_field() {
    let mut s = start().await;
    let zero = seconds(0);
    let status = s.client.get(pb::GetRequest { lease_ttl: zero, ..get("default", 1, 0) }).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message().starts_with("lease_ttl:")),
        (Code::InvalidArgument, true),
        "{status:?}"
    );
    let extend = pb::ExtendRequest { queue: "default".into(), key: "k".into(), token: 1, ttl: zero };
    let status = s.client.extend(extend).await.unwrap_err();
    assert_eq!((status.code(), status.message().starts_with("ttl:")), (Code::InvalidArgument, true), "{status:?}");
    let (requests, rx) = mpsc::channel(1);
    let open = work_request::Open { queue: "default".into(), lease_ttl: zero, credits: 1, ..Default::default() };
    requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let mut responses = s.client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let status = responses.next().await.unwrap().unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("open.lease_ttl:"), "{status:?}");
}

#[tokio::test]
async fn a_drain_naming_no_timeout_or_zero_should_take_the_servers_grace_period() {
    for drain_timeout in [None, Some(prost_types::Duration { seconds: 0, nanos: 0 })] {
        let mut s = start().await;
        s.client.add(add("default", &["a"], None)).await.unwrap();
        let a = take(&mut s.client, "default").await;
        let mut other = s.client.clone();
        let drain = tokio::spawn(async move {
            let request = pb::ShutDownRequest { queue: "default".into(), drain: true, drain_timeout };
            other.shut_down(request).await.unwrap().into_inner()
        });
        // Well within DRAIN_GRACE: the lease ends during the drain, not after it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        s.client.done(done("default", &a)).await.unwrap();
        let report = drain.await.unwrap();
        assert_eq!((report.finished, report.returned), (1, 0), "drain_timeout {drain_timeout:?}");
    }
    // A lease never finished is handed back once the grace period is over,
    // not after some other default (it was 30 s whatever the server's).
    let mut s = start().await;
    s.client.add(add("default", &["kept"], None)).await.unwrap();
    let _kept = take(&mut s.client, "default").await;
    let request = pb::ShutDownRequest { queue: "default".into(), drain: true, drain_timeout: None };
    let drained = tokio::time::timeout(DRAIN_GRACE * 10, s.client.shut_down(request)).await;
    let report = drained.expect("the drain ended with the server's grace period").unwrap().into_inner();
    assert_eq!((report.finished, report.returned), (0, 1));
}

/// A worker on the Work stream: the request sender and the response stream.
struct StreamWorker {
    requests: mpsc::Sender<pb::WorkRequest>,
    responses: tonic::Streaming<pb::WorkResponse>,
}

async fn open_stream(client: &mut Client, queue: &str, credits: u32) -> StreamWorker {
    open_stream_with(client, queue, credits, false).await
}

/// Opens a stream; `ack_failures_only` asks that only failed Finishes be answered.
async fn open_stream_with(client: &mut Client, queue: &str, credits: u32, ack_failures_only: bool) -> StreamWorker {
    let open = work_request::Open {
        queue: queue.into(),
        worker: "streamer".into(),
        credits,
        lease_ttl: None,
        include_object: false,
        ack_failures_only,
    };
    open_stream_as(client, open).await
}

async fn open_stream_as(client: &mut Client, open: work_request::Open) -> StreamWorker {
    let (credits, ack_failures_only) = (open.credits, open.ack_failures_only);
    let (requests, rx) = mpsc::channel(16);
    requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let responses = client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let mut worker = StreamWorker { requests, responses };
    match worker.next().await {
        work_response::Kind::Opened(opened) => {
            assert_eq!((opened.credits, opened.ack_failures_only), (credits, ack_failures_only))
        }
        other => panic!("expected Opened, got {other:?}"),
    }
    worker
}

impl StreamWorker {
    async fn next(&mut self) -> work_response::Kind {
        let message = tokio::time::timeout(Duration::from_secs(5), self.responses.next())
            .await
            .expect("a response within 5 s")
            .expect("the stream is open")
            .expect("no error");
        message.kind.unwrap()
    }

    async fn next_lease(&mut self) -> pb::Lease {
        match self.next().await {
            work_response::Kind::Lease(lease) => lease,
            other => panic!("expected a lease, got {other:?}"),
        }
    }

    async fn send(&self, kind: work_request::Kind) {
        self.requests.send(pb::WorkRequest { kind: Some(kind) }).await.unwrap();
    }

    async fn finish(&self, lease: &pb::Lease) {
        self.send(work_request::Kind::Finish(success(lease))).await;
    }
}

/// A Finish of `lease` with success.
fn success(lease: &pb::Lease) -> work_request::Finish {
    work_request::Finish {
        key: lease.key.clone(),
        token: lease.token,
        outcome: Some(work_request::finish::Outcome::Success(pb::Success {})),
    }
}

#[tokio::test]
async fn work_stream_should_push_leases_within_the_credit_window() {
    let mut s = start().await;
    s.client.add(add("default", &["a", "b", "c"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "default", 2).await;
    let a = worker.next_lease().await;
    let b = worker.next_lease().await;
    assert_eq!((a.key.as_str(), b.key.as_str()), ("a", "b"));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), worker.responses.next()).await.is_err(),
        "the window is full"
    );
    worker.finish(&a).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => assert_eq!((ack.key.as_str(), ack.code), ("a", 0)),
        other => panic!("expected an ack, got {other:?}"),
    }
    assert_eq!(worker.next_lease().await.key, "c", "the finished lease's credit came back");
    // A stale finish is answered, and the stream lives on.
    worker.finish(&a).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => assert_eq!(ack.code, Code::FailedPrecondition as i32),
        other => panic!("expected an ack, got {other:?}"),
    }
    worker
        .send(work_request::Kind::Extend(work_request::Extend { key: b.key.clone(), token: b.token, ttl: None }))
        .await;
    match worker.next().await {
        work_response::Kind::Extended(extended) => assert_eq!((extended.code, extended.cancel), (0, false)),
        other => panic!("expected Extended, got {other:?}"),
    }
}

#[tokio::test]
async fn a_stream_acking_failures_only_should_answer_no_applied_finish_and_keep_leasing() {
    let mut s = start().await;
    s.client.add(add("default", &["a", "b", "c"], None)).await.unwrap();
    let mut worker = open_stream_with(&mut s.client, "default", 1, true).await;
    let a = worker.next_lease().await;
    worker.finish(&a).await;
    // No FinishAck: the next message is the lease the returned credit pays for.
    let b = worker.next_lease().await;
    assert_eq!(b.key, "b");
    // Requeued far enough ahead that b is not leased again during the test.
    let later = pb::RequeueAfter { delay: Some(prost_types::Duration { seconds: 60, nanos: 0 }) };
    let requeue = work_request::finish::Outcome::RequeueAfter(later);
    worker.send(work_request::Kind::Finish(work_request::Finish { outcome: Some(requeue), ..success(&b) })).await;
    let c = worker.next_lease().await;
    assert_eq!(c.key, "c", "a requeue is applied too: no ack, and its credit came back");
    worker.finish(&c).await;
    // Messages are handled in order, so an ack of c's Finish would come before this Extend's answer.
    worker.send(work_request::Kind::Extend(work_request::Extend { key: c.key, token: c.token, ttl: None })).await;
    match worker.next().await {
        work_response::Kind::Extended(extended) => assert_eq!(extended.code, Code::FailedPrecondition as i32),
        other => panic!("expected Extended (c is finished), got {other:?}"),
    }
    let state = s.client.key_state(key_state("default", "a")).await.unwrap().into_inner();
    assert_eq!(state.state, pb::KeyState::Absent as i32, "a's unacknowledged Finish was applied");
}

#[tokio::test]
async fn a_stream_acking_failures_only_should_still_answer_a_failed_finish() {
    let mut s = start().await;
    s.client.add(add("default", &["a", "b"], None)).await.unwrap();
    let mut worker = open_stream_with(&mut s.client, "default", 1, true).await;
    let a = worker.next_lease().await;
    // A stale token: refused, answered with the error, and the credit stays taken.
    worker.send(work_request::Kind::Finish(work_request::Finish { token: a.token + 1000, ..success(&a) })).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => {
            assert_eq!((ack.key.as_str(), ack.token, ack.code), ("a", a.token + 1000, Code::FailedPrecondition as i32));
            assert!(!ack.message.is_empty());
        }
        other => panic!("expected the FinishAck of the stale Finish, got {other:?}"),
    }
    // No outcome: refused with INVALID_ARGUMENT, answered too.
    worker.send(work_request::Kind::Finish(work_request::Finish { outcome: None, ..success(&a) })).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => assert_eq!(ack.code, Code::InvalidArgument as i32),
        other => panic!("expected the FinishAck of the Finish without outcome, got {other:?}"),
    }
    // The real Finish is applied, unanswered, and the next lease flows.
    worker.finish(&a).await;
    let b = worker.next_lease().await;
    assert_eq!(b.key, "b");
    // Finishing a again (now stale) is answered, as on any stream.
    worker.finish(&a).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => {
            assert_eq!((ack.token, ack.code), (a.token, Code::FailedPrecondition as i32))
        }
        other => panic!("expected the FinishAck of the repeated Finish, got {other:?}"),
    }
}

#[tokio::test]
async fn broken_stream_should_return_its_leases_at_once() {
    let mut s = start().await;
    s.client.add(add("default", &["a"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "default", 1).await;
    let lease = worker.next_lease().await;
    // The stream breaks (here: the worker breaks the protocol with a second
    // Open, which ends the stream with an error; a crash or a cancelled
    // call ends it the same way, only less predictably in a test).
    worker.send(work_request::Kind::Open(work_request::Open { queue: "default".into(), ..Default::default() })).await;
    let ended = tokio::time::timeout(Duration::from_secs(5), worker.responses.next()).await.expect("the stream ends");
    assert_eq!(ended.unwrap().unwrap_err().code(), Code::InvalidArgument);
    // The key comes back counted as a failure, after the 5 ms first backoff.
    let again = tokio::time::timeout(Duration::from_secs(1), take(&mut s.client, "default")).await.expect("within 1 s");
    assert_eq!(again.key, "a");
    assert_ne!(again.token, lease.token);
    assert_eq!(again.failures, 1);
    assert!(again.reasons.iter().any(|r| r.kind == pb::ReasonKind::LeaseReleased as i32));
}

#[tokio::test]
async fn a_worker_that_half_closes_should_hand_back_what_it_holds_without_a_failure() {
    let mut s = start().await;
    s.client.add(add("default", &["a"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "default", 1).await;
    let lease = worker.next_lease().await;
    // A clean stop: the worker half-closes, still holding a lease it never
    // started (one its last Finish made room for, say).
    let StreamWorker { requests, mut responses } = worker;
    drop(requests);
    let end = tokio::time::timeout(Duration::from_secs(5), responses.next()).await.expect("the stream ends");
    assert!(end.is_none(), "ended with OK: {end:?}");
    let again = take(&mut s.client, "default").await;
    assert_eq!((again.key.as_str(), again.failures, again.last_error.as_str()), ("a", 0, ""));
    assert_ne!(again.token, lease.token);
    assert!(again.reasons.iter().any(|r| r.kind == pb::ReasonKind::LeaseReleased as i32));
}

#[tokio::test]
async fn an_expired_stream_lease_should_give_its_credit_back_only_with_the_workers_finish() {
    let mut s = start().await;
    s.client.add(add("short", &["a", "b"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "short", 1).await;
    let first = worker.next_lease().await;
    // No finish: the 300 ms lease expires and the worker is told to stop...
    match worker.next().await {
        work_response::Kind::Cancel(cancel) => assert_eq!((cancel.token, cancel.revoked), (first.token, true)),
        other => panic!("expected Cancel for the expired lease, got {other:?}"),
    }
    // ...but its credit stays taken: a worker that does not answer gets nothing more.
    let quiet = tokio::time::timeout(Duration::from_millis(700), worker.responses.next()).await;
    assert!(quiet.is_err(), "nothing pushed before the worker answered the Cancel: {quiet:?}");
    // Its Finish (refused: the lease is gone) gives the credit back.
    worker.finish(&first).await;
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => assert_eq!(ack.code, Code::FailedPrecondition as i32),
        other => panic!("expected the FinishAck, got {other:?}"),
    }
    let second = worker.next_lease().await;
    assert_ne!(first.token, second.token);
}

#[tokio::test]
async fn a_refused_finish_should_end_its_lease_as_a_retry_and_give_the_credit_back() {
    let mut s = start().await;
    s.client.add(add("default", &["a", "b", "c"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "default", 1).await;
    // A Finish naming another key than its lease's, and one whose outcome
    // is refused: each is the worker's one answer for its lease.
    let a = worker.next_lease().await;
    worker.send(work_request::Kind::Finish(work_request::Finish { key: "not-a".into(), ..success(&a) })).await;
    let b = expect_refused_then_next(&mut worker, "not-a").await;
    let requeue = work_request::finish::Outcome::RequeueAfter(pb::RequeueAfter { delay: huge() });
    worker.send(work_request::Kind::Finish(work_request::Finish { outcome: Some(requeue), ..success(&b) })).await;
    let c = expect_refused_then_next(&mut worker, "b").await;
    assert_eq!(c.key, "c");
    for key in ["a", "b"] {
        let state = s.client.key_state(key_state("default", key)).await.unwrap().into_inner();
        assert_ne!(state.state, pb::KeyState::Held as i32, "{key}'s lease ended");
        assert_eq!(state.failures, 1, "{key} counts a failure, as a retry does");
        assert!(state.last_error.starts_with("the worker's Finish was refused: "), "{key}: {}", state.last_error);
    }
}

/// The refusal of a Finish of `key`, then the lease its returned credit pays for.
async fn expect_refused_then_next(worker: &mut StreamWorker, key: &str) -> pb::Lease {
    match worker.next().await {
        work_response::Kind::FinishAck(ack) => {
            assert_eq!((ack.key.as_str(), ack.code), (key, Code::InvalidArgument as i32));
            assert!(ack.message.ends_with("the lease ended as a retry"), "{ack:?}");
        }
        other => panic!("expected the refusal, got {other:?}"),
    }
    worker.next_lease().await
}

#[tokio::test]
async fn work_stream_should_refuse_a_bad_first_message_and_unknown_queue() {
    let mut s = start().await;
    let (tx, rx) = mpsc::channel(1);
    tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Credit(work_request::Credit { credits: 1 })) })
        .await
        .unwrap();
    let mut responses = s.client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert_eq!(responses.next().await.unwrap().unwrap_err().code(), Code::InvalidArgument);

    let (tx, rx) = mpsc::channel(1);
    let open = work_request::Open {
        queue: "nope".into(),
        worker: String::new(),
        credits: 1,
        lease_ttl: None,
        include_object: false,
        ack_failures_only: false,
    };
    tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let mut responses = s.client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert_eq!(responses.next().await.unwrap().unwrap_err().code(), Code::NotFound);
}

#[tokio::test]
async fn shut_down_should_cancel_stream_leases_and_end_the_stream() {
    let mut s = start().await;
    s.client.add(add("default", &["a"], None)).await.unwrap();
    let mut worker = open_stream(&mut s.client, "default", 1).await;
    let lease = worker.next_lease().await;
    s.client
        .shut_down(pb::ShutDownRequest { queue: "default".into(), drain: false, drain_timeout: None })
        .await
        .unwrap();
    match worker.next().await {
        work_response::Kind::Cancel(cancel) => assert_eq!(cancel.token, lease.token),
        other => panic!("expected Cancel, got {other:?}"),
    }
    worker.finish(&lease).await;
    assert!(matches!(worker.next().await, work_response::Kind::FinishAck(_)));
    let end = tokio::time::timeout(Duration::from_secs(2), worker.responses.next()).await.unwrap().unwrap();
    assert_eq!(end.unwrap_err().code(), Code::Unavailable);
}

/// A valid `google.protobuf.Duration` (its largest, 10,000 years) past
/// anything the queue works with: once it panicked a handler halfway through
/// its change.
fn huge() -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds: 315_576_000_000, nanos: 999_999_999 })
}

fn key_state(queue: &str, key: &str) -> pb::KeyStateRequest {
    pb::KeyStateRequest { queue: queue.into(), key: key.into() }
}

#[tokio::test]
async fn refused_calls_should_answer_invalid_argument_and_change_nothing() {
    let mut s = start().await;
    let absent = pb::KeyState::Absent as i32;
    let held = pb::KeyState::Held as i32;

    // AddAfter: refused before any key is touched.
    let after = pb::AddAfterRequest {
        queue: "default".into(),
        keys: vec!["late".into()],
        delay: huge(),
        priority: None,
        reason: String::new(),
    };
    let status = s.client.add_after(after).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().starts_with("delay:"), "the message names the field: {}", status.message());
    assert_eq!(s.client.key_state(key_state("default", "late")).await.unwrap().into_inner().state, absent);
    let beyond_protobuf = pb::AddAfterRequest {
        queue: "default".into(),
        keys: vec!["late".into()],
        delay: Some(prost_types::Duration { seconds: i64::MAX, nanos: 0 }),
        priority: None,
        reason: String::new(),
    };
    assert_eq!(s.client.add_after(beyond_protobuf).await.unwrap_err().code(), Code::InvalidArgument);

    // Unary Finish: the lease stays as it was, and its token still works.
    s.client.add(add("default", &["k"], None)).await.unwrap();
    let lease = take(&mut s.client, "default").await;
    let requeue = finish_request::Outcome::RequeueAfter(pb::RequeueAfter { delay: huge() });
    let status = s.client.finish(finish("default", &lease, requeue)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    let state = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner();
    assert_eq!(state.state, held, "the refused Finish left the lease held");
    s.client.done(done("default", &lease)).await.unwrap();

    // On the Work stream a refused Finish ends its lease as a retry instead
    // (a_refused_finish_should_end_its_lease_as_a_retry_and_give_the_credit_back).

    // ShutDown with a huge drain timeout: refused, and the queue still takes keys.
    let shut = pb::ShutDownRequest { queue: "default".into(), drain: true, drain_timeout: huge() };
    assert_eq!(s.client.shut_down(shut).await.unwrap_err().code(), Code::InvalidArgument);
    s.client.add(add("default", &["after"], None)).await.unwrap();

    // A batch that does not fit in max_keys: none of it is added.
    let status = s.client.add(add("tiny", &["one", "two"], None)).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    for key in ["one", "two"] {
        assert_eq!(s.client.key_state(key_state("tiny", key)).await.unwrap().into_inner().state, absent, "{key}");
    }
}

#[tokio::test]
async fn free_text_should_be_bounded_a_long_reason_refused_and_a_long_error_cut() {
    let mut s = start().await;
    let long_reason = pb::AddRequest { reason: "r".repeat(513), ..add("default", &["k"], None) };
    let status = s.client.add(long_reason).await.unwrap_err();
    assert_eq!((status.code(), status.message().starts_with("reason:")), (Code::InvalidArgument, true), "{status:?}");
    let state = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner();
    assert_eq!(state.state, pb::KeyState::Absent as i32, "the refused add changed nothing");

    s.client.add(add("default", &["k"], None)).await.unwrap();
    let lease = take(&mut s.client, "default").await;
    let error = format!("boom\n{}", "at frame\n".repeat(200_000));
    let retry = finish_request::Outcome::Retry(pb::Retry { error });
    s.client.finish(finish("default", &lease, retry)).await.unwrap();
    let kept = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner().last_error;
    assert!(kept.len() <= 4096, "kept {} bytes", kept.len());
    assert!(kept.starts_with("boom\nat frame\n") && kept.ends_with("bytes in all)"), "{kept:?}");
}

#[tokio::test]
async fn a_get_should_lease_no_more_than_its_answer_can_carry_and_leave_the_rest_queued() {
    let mut s = start().await;
    // 1,000 keys of 1,000 bytes with 16 reasons of 512 bytes each: about 9 MB
    // of leases, more than a client reads in one message (4 MiB by default).
    let keys: Vec<String> = (0..1000).map(|i| format!("{i:0>1000}")).collect();
    for r in 0..16 {
        let reason = format!("{r:0>512}");
        s.client
            .add(pb::AddRequest { queue: "default".into(), keys: keys.clone(), priority: None, reason })
            .await
            .unwrap();
    }
    let answer = s.client.get(get("default", 1000, 0)).await.expect("an answer the client can read").into_inner();
    let granted = answer.leases.len() as u32;
    assert!((1..1000).contains(&granted), "{granted} leases");
    assert!(answer.leases.iter().all(|lease| lease.reasons.len() == 16), "each lease carries its reasons");
    let len = s.client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!((len.held, len.ready), (granted, 1000 - granted), "the leases not sent are queued, not held");
    // Handed back as they were: no failure counted, reasons kept.
    let rest = s.client.get(get("default", 1, 0)).await.unwrap().into_inner().leases.remove(0);
    assert_eq!((rest.failures, rest.reasons.len(), rest.last_error.as_str()), (0, 16, ""));
}

#[tokio::test]
async fn key_state_of_a_held_key_added_again_should_say_what_comes_next() {
    let mut s = start().await;
    s.client.add(add("default", &["k"], Some(7))).await.unwrap();
    let lease = take(&mut s.client, "default").await;
    let held = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner();
    assert_eq!((held.state, held.dirty, held.priority), (pb::KeyState::Held as i32, false, 7));
    let again = pb::AddRequest { reason: "again".into(), ..add("default", &["k"], Some(3)) };
    s.client.add(again).await.unwrap();
    let dirty = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner();
    assert_eq!((dirty.state, dirty.dirty, dirty.priority), (pb::KeyState::Held as i32, true, 3));
    assert_eq!(dirty.reasons.iter().map(|r| r.source.as_str()).collect::<Vec<_>>(), ["again"]);
    s.client.done(done("default", &lease)).await.unwrap();
    let queued = s.client.key_state(key_state("default", "k")).await.unwrap().into_inner();
    assert_eq!((queued.state, queued.priority), (pb::KeyState::Queued as i32, 3), "as KeyState said it would be");
}

/// Sends `body` to the unary `method` of WorkQueueService as it is.
async fn raw_call(s: &TestServer, method: &str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(s.channel.clone());
    grpc.ready().await.unwrap();
    let path = format!("/workqueue.v1.WorkQueueService/{method}").parse().unwrap();
    grpc.unary(tonic::Request::new(body), path, RawCodec).await.map(tonic::Response::into_inner)
}

#[tokio::test]
async fn a_message_that_does_not_decode_should_answer_invalid_argument_and_change_nothing() {
    let s = start().await;
    // AddRequest { queue: "default" (field 1), keys: [b"\xff\xfe"] (field 2) }: a key that is not UTF-8.
    let mut not_utf8 = vec![0x0a, 7];
    not_utf8.extend_from_slice(b"default");
    not_utf8.extend_from_slice(&[0x12, 2, 0xff, 0xfe]);
    // A field header promising 100 bytes that never come; and bytes that are no message at all.
    let truncated = vec![0x0a, 100, b'd'];
    let garbage = vec![0xff; 16];
    for (what, body) in [("a non-UTF-8 key", not_utf8), ("a truncated field", truncated), ("garbage", garbage)] {
        for method in ["Add", "Finish", "Get", "KeyState"] {
            let status = raw_call(&s, method, body.clone()).await.unwrap_err();
            assert_eq!(status.code(), Code::InvalidArgument, "{method} with {what}: {status:?}");
            assert!(status.message().contains("does not decode"), "{method} with {what}: {}", status.message());
        }
    }
    let len = s.client.clone().len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!((len.ready, len.waiting, len.held), (0, 0, 0), "nothing was added");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_stream_should_get_no_more_than_its_window_and_delay_no_other_key() {
    const KEYS: usize = 2048;
    const WINDOW: u32 = 1024;
    let mut s = start().await;
    let keys: Vec<String> = (0..KEYS).map(|i| format!("h{i}")).collect();
    let request = pb::AddRequest { queue: "hung".into(), keys: keys.clone(), priority: None, reason: String::new() };
    s.client.add(request).await.unwrap();
    // A worker that opens a stream with the largest window and then never reads it.
    let hung = open_stream(&mut s.client, "hung", WINDOW).await;
    // A healthy worker takes whatever is ready, until every key was done once.
    let mut finished = std::collections::HashSet::new();
    let started = tokio::time::Instant::now();
    while finished.len() < KEYS {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the healthy worker got {} of {KEYS} keys in 30 s: the hung worker's expiries delayed them",
            finished.len()
        );
        let request = get("hung", 500, 900);
        for lease in s.client.get(request).await.unwrap().into_inner().leases {
            if s.client.done(done("hung", &lease)).await.is_ok() {
                finished.insert(lease.key);
            }
        }
    }
    let took = started.elapsed();
    // What the hung stream was sent: its window, and nothing after its leases expired.
    let mut hung = hung;
    let mut pushed = 0;
    while let Ok(Some(Ok(message))) = tokio::time::timeout(Duration::from_millis(500), hung.responses.next()).await {
        if matches!(message.kind, Some(work_response::Kind::Lease(_))) {
            pushed += 1;
        }
    }
    eprintln!("healthy worker done with {KEYS} keys in {took:?}; the hung stream was sent {pushed} leases");
    assert!(pushed <= WINDOW as usize, "the hung stream was sent {pushed} leases, more than its window of {WINDOW}");
}

#[tokio::test]
async fn writes_to_a_sidecar_without_kubernetes_should_fail_their_precondition_saying_why() {
    use workqueue_sidecar::grpc::pb::object_service_client::ObjectServiceClient;
    let s = start().await;
    let request = pb::DeleteObjectRequest {
        r#type: Some(pb::ResourceType { api_version: "v1".into(), kind: "ConfigMap".into() }),
        namespace: "default".into(),
        name: "a".into(),
        ..Default::default()
    };
    let status = ObjectServiceClient::new(s.channel.clone()).delete_object(request).await.unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("runs without Kubernetes"), "{}", status.message());
    assert_eq!(reason(&status), ("workqueue-sidecar".into(), "NO_KUBERNETES".into()), "told apart from STALE_LEASE");
}

/// The ErrorInfo detail's domain and reason.
fn reason(status: &tonic::Status) -> (String, String) {
    use tonic_types::StatusExt;
    let info = status.get_details_error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    (info.domain, info.reason)
}
