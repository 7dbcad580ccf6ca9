//! A property test over the gRPC surface, in process: random sequences of calls with arbitrary field
//! values (keys of any text and length, extreme and malformed durations, made-up tokens, random
//! raw bytes as the message) on every unary RPC, the `Work` stream and the `CacheService` reads. After every call:
//! - the answer's code is one the proto documents for that call (never INTERNAL, UNKNOWN or a
//!   cancelled handler);
//! - the server is alive (gRPC health answers SERVING);
//! - no key is lost: every key added and not yet ended by a successful Done or Finish(success)
//!   is queued, waiting or held, never ABSENT.
//!
//! 256 sequences of up to 12 calls by default; `PROPTEST_CASES=N` runs more (docs/testing.md).

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use raw_codec::RawCodec;
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb::cache_service_client::CacheServiceClient;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, finish_request, work_request, work_response};
use workqueue_sidecar::queue::{QueueSettings, RateLimiterSpec};
use workqueue_sidecar::queue_registry::QueueRegistry;
use workqueue_sidecar::server::{Listeners, serve};

#[path = "support/raw_codec.rs"]
mod raw_codec;

/// The queues: plain, nearly full, and with leases that expire while a sequence runs.
const QUEUES: [&str; 3] = ["plain", "tiny", "short"];

struct Server {
    runtime: Runtime,
    channel: Channel,
    _stop: watch::Sender<bool>,
}

/// One server for every case: cases use fresh key names, so they do not disturb each other.
fn server() -> &'static Server {
    static SERVER: OnceLock<Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let (channel, stop) = runtime.block_on(async {
            let fast = RateLimiterSpec::Exponential { base: Duration::from_millis(1), max: Duration::from_millis(50) };
            let settings = QueueSettings { rate_limiter: fast, ..QueueSettings::default() };
            let queues = Arc::new(
                QueueRegistry::new([
                    ("plain".to_string(), settings.clone()),
                    ("tiny".to_string(), QueueSettings { max_keys: 3, ..settings.clone() }),
                    ("short".to_string(), QueueSettings { lease_ttl: Duration::from_millis(30), ..settings }),
                ])
                .unwrap(),
            );
            let listeners = Listeners::bind(Some("127.0.0.1:0".parse().unwrap()), None, false).await.unwrap();
            let address = listeners.tcp_address().unwrap();
            let informers = Arc::new(workqueue_sidecar::informer::InformerRegistry::empty());
            let api = workqueue_sidecar::grpc::api(
                queues,
                informers,
                None,
                workqueue_sidecar::grpc::ShutDownRpc::Allowed { drain_grace: Duration::from_secs(1) },
            )
            .await
            .unwrap();
            let (stop, stop_rx) = watch::channel(false);
            tokio::spawn(serve(api.routes, listeners, stop_rx));
            let channel =
                tonic::transport::Endpoint::new(format!("http://{address}")).unwrap().connect().await.unwrap();
            (channel, stop)
        });
        Server { runtime, channel, _stop: stop }
    })
}

/// A duration field: absent, ordinary, the largest valid, or malformed in every way the wire allows.
fn duration() -> impl Strategy<Value = Option<prost_types::Duration>> {
    let d = |seconds: i64, nanos: i32| Some(prost_types::Duration { seconds, nanos });
    prop_oneof![
        4 => Just(None),
        4 => (0..2i64, 0..1_000_000_000i32).prop_map(move |(s, n)| d(s, n)),
        1 => Just(d(315_576_000_000, 999_999_999)),
        1 => Just(d(i64::MAX, 999_999_999)),
        1 => Just(d(i64::MIN, 0)),
        1 => Just(d(-1, 0)),
        1 => Just(d(0, -5)),
        1 => Just(d(0, i32::MAX)),
        1 => Just(d(1, -1)),
        1 => any::<(i64, i32)>().prop_map(move |(s, n)| d(s, n)),
    ]
}

/// A key: mostly from a small set (so calls meet), sometimes anything.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0..4u8).prop_map(|i| format!("k{i}")),
        1 => Just(String::new()),
        1 => Just("x".repeat(1025)),
        1 => "\\PC{0,20}",
        1 => any::<String>(),
    ]
}

#[derive(Debug, Clone)]
enum Call {
    Add {
        queue: usize,
        keys: Vec<String>,
        priority: Option<i32>,
    },
    AddAfter {
        queue: usize,
        keys: Vec<String>,
        delay: Option<prost_types::Duration>,
    },
    AddRateLimited {
        queue: usize,
        keys: Vec<String>,
    },
    Get {
        queue: usize,
        max_keys: u32,
        ttl: Option<prost_types::Duration>,
    },
    Done {
        queue: usize,
        key: String,
        real_token: bool,
    },
    Finish {
        queue: usize,
        key: String,
        real_token: bool,
        outcome: Option<Outcome>,
    },
    Extend {
        queue: usize,
        key: String,
        real_token: bool,
        ttl: Option<prost_types::Duration>,
    },
    Forget {
        queue: usize,
        key: String,
    },
    DrainWithBadTimeout {
        queue: usize,
        timeout: prost_types::Duration,
    },
    Raw {
        method: &'static str,
        body: Vec<u8>,
    },
    Stream {
        queue: usize,
        credits: u32,
        outcomes: Vec<Option<Outcome>>,
    },
    /// CacheService: the standalone sidecar has no informers, so every read is refused, with a documented code.
    CacheGet {
        informer: String,
        name: String,
        min_version: String,
        wait: Option<prost_types::Duration>,
    },
    CacheList {
        informer: String,
        selector: String,
        page_token: String,
        page_size: u32,
    },
}

#[derive(Debug, Clone)]
enum Outcome {
    Success,
    Retry(String),
    RequeueAfter(Option<prost_types::Duration>),
}

fn outcome() -> impl Strategy<Value = Option<Outcome>> {
    prop_oneof![
        3 => Just(Some(Outcome::Success)),
        1 => any::<String>().prop_map(|e| Some(Outcome::Retry(e))),
        2 => duration().prop_map(|d| Some(Outcome::RequeueAfter(d))),
        1 => Just(None),
    ]
}

/// Durations a drain must refuse: past 366 days, negative, or not a valid Duration.
fn bad_timeout() -> impl Strategy<Value = prost_types::Duration> {
    prop_oneof![
        Just(prost_types::Duration { seconds: 315_576_000_000, nanos: 0 }),
        Just(prost_types::Duration { seconds: i64::MAX, nanos: 0 }),
        Just(prost_types::Duration { seconds: -1, nanos: 0 }),
        Just(prost_types::Duration { seconds: 0, nanos: -1 }),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    let queue = 0..QUEUES.len();
    let keys = || prop::collection::vec(key(), 0..5);
    let methods = prop::sample::select(vec![
        "WorkQueueService/Add",
        "WorkQueueService/AddAfter",
        "WorkQueueService/Get",
        "WorkQueueService/Done",
        "WorkQueueService/Finish",
        "WorkQueueService/Extend",
        "WorkQueueService/KeyState",
        "WorkQueueService/Len",
        "CacheService/GetObject",
        "CacheService/ListObjects",
    ]);
    prop_oneof![
        4 => (queue.clone(), keys(), prop::option::of(any::<i32>())).prop_map(|(queue, keys, priority)| Call::Add { queue, keys, priority }),
        2 => (queue.clone(), keys(), duration()).prop_map(|(queue, keys, delay)| Call::AddAfter { queue, keys, delay }),
        1 => (queue.clone(), keys()).prop_map(|(queue, keys)| Call::AddRateLimited { queue, keys }),
        3 => (queue.clone(), any::<u32>(), duration()).prop_map(|(queue, max_keys, ttl)| Call::Get { queue, max_keys: max_keys % 5, ttl }),
        2 => (queue.clone(), key(), any::<bool>()).prop_map(|(queue, key, real_token)| Call::Done { queue, key, real_token }),
        3 => (queue.clone(), key(), any::<bool>(), outcome()).prop_map(|(queue, key, real_token, outcome)| Call::Finish { queue, key, real_token, outcome }),
        2 => (queue.clone(), key(), any::<bool>(), duration()).prop_map(|(queue, key, real_token, ttl)| Call::Extend { queue, key, real_token, ttl }),
        1 => (queue.clone(), key()).prop_map(|(queue, key)| Call::Forget { queue, key }),
        1 => (queue.clone(), bad_timeout()).prop_map(|(queue, timeout)| Call::DrainWithBadTimeout { queue, timeout }),
        2 => (methods, prop::collection::vec(any::<u8>(), 0..40)).prop_map(|(method, body)| Call::Raw { method, body }),
        1 => (queue, 0..4u32, prop::collection::vec(outcome(), 0..4)).prop_map(|(queue, credits, outcomes)| Call::Stream { queue, credits, outcomes }),
        1 => (key(), key(), prop_oneof![Just(String::new()), "[0-9]{1,20}", any::<String>()], duration())
            .prop_map(|(informer, name, min_version, wait)| Call::CacheGet { informer, name, min_version, wait }),
        1 => (key(), prop_oneof![Just(String::new()), Just("a in (b".to_string()), any::<String>()], any::<String>(), any::<u32>())
            .prop_map(|(informer, selector, page_token, page_size)| Call::CacheList { informer, selector, page_token, page_size }),
    ]
}

/// What the test believes: keys that must not be ABSENT, and the last lease seen per key.
#[derive(Default)]
struct Model {
    live: BTreeSet<(usize, String)>,
    tokens: std::collections::BTreeMap<(usize, String), u64>,
}

/// The codes the proto documents for the WorkQueueService calls.
const DOCUMENTED: [Code; 7] = [
    Code::Ok,
    Code::InvalidArgument,
    Code::NotFound,
    Code::FailedPrecondition,
    Code::Unavailable,
    Code::ResourceExhausted,
    Code::DeadlineExceeded,
];

fn code_of<T>(result: &Result<T, tonic::Status>) -> Code {
    result.as_ref().map_or_else(|status| status.code(), |_| Code::Ok)
}

fn documented<T: std::fmt::Debug>(what: &str, result: &Result<T, tonic::Status>) {
    let code = code_of(result);
    assert!(DOCUMENTED.contains(&code), "{what}: undocumented answer {result:?}");
}

async fn run(calls: Vec<Call>, case: u64) {
    let mut client = WorkQueueServiceClient::new(server().channel.clone());
    let mut cache = CacheServiceClient::new(server().channel.clone());
    // Fresh key names per case: a prefix only this case uses.
    let name =
        |key: &str| if key.starts_with('k') && key.len() == 2 { format!("c{case}-{key}") } else { key.to_string() };
    let mut model = Model::default();
    for call in calls {
        match call {
            Call::Add { queue, keys, priority } => {
                let keys: Vec<String> = keys.iter().map(|k| name(k)).collect();
                let request =
                    pb::AddRequest { queue: QUEUES[queue].into(), keys: keys.clone(), priority, reason: String::new() };
                let result = client.add(request).await;
                documented("Add", &result);
                if result.is_ok() {
                    model.live.extend(keys.into_iter().map(|k| (queue, k)));
                }
            }
            Call::AddAfter { queue, keys, delay } => {
                let keys: Vec<String> = keys.iter().map(|k| name(k)).collect();
                let request = pb::AddAfterRequest {
                    queue: QUEUES[queue].into(),
                    keys: keys.clone(),
                    delay,
                    priority: None,
                    reason: String::new(),
                };
                let result = client.add_after(request).await;
                documented("AddAfter", &result);
                if result.is_ok() {
                    model.live.extend(keys.into_iter().map(|k| (queue, k)));
                }
            }
            Call::AddRateLimited { queue, keys } => {
                let keys: Vec<String> = keys.iter().map(|k| name(k)).collect();
                let request = pb::AddRateLimitedRequest {
                    queue: QUEUES[queue].into(),
                    keys: keys.clone(),
                    priority: None,
                    reason: String::new(),
                };
                let result = client.add_rate_limited(request).await;
                documented("AddRateLimited", &result);
                if let Ok(answer) = &result {
                    for limited in &answer.get_ref().keys {
                        let delay = limited.delay.unwrap_or_default();
                        assert!(
                            delay.seconds >= 0 && delay.seconds <= 315_576_000_000,
                            "a delay outside Duration's range: {delay:?}"
                        );
                    }
                    model.live.extend(keys.into_iter().map(|k| (queue, k)));
                }
            }
            Call::Get { queue, max_keys, ttl } => {
                let wait = Some(prost_types::Duration { seconds: 0, nanos: 0 });
                let request = pb::GetRequest {
                    queue: QUEUES[queue].into(),
                    worker: "fuzz".into(),
                    max_keys,
                    wait,
                    lease_ttl: ttl,
                    include_object: false,
                };
                let result = client.get(request).await;
                documented("Get", &result);
                if let Ok(answer) = result {
                    for lease in answer.into_inner().leases {
                        model.tokens.insert((queue, lease.key), lease.token);
                    }
                }
            }
            Call::Done { queue, key, real_token } => {
                let key = name(&key);
                let token = if real_token { model.tokens.get(&(queue, key.clone())).copied().unwrap_or(1) } else { 1 };
                let result =
                    client.done(pb::DoneRequest { queue: QUEUES[queue].into(), key: key.clone(), token }).await;
                documented("Done", &result);
                if result.is_ok() {
                    model.live.remove(&(queue, key));
                }
            }
            Call::Finish { queue, key, real_token, outcome } => {
                let key = name(&key);
                let token = if real_token { model.tokens.get(&(queue, key.clone())).copied().unwrap_or(1) } else { 1 };
                let success = matches!(outcome, Some(Outcome::Success));
                let outcome = outcome.map(|o| match o {
                    Outcome::Success => finish_request::Outcome::Success(pb::Success {}),
                    Outcome::Retry(error) => finish_request::Outcome::Retry(pb::Retry { error }),
                    Outcome::RequeueAfter(delay) => finish_request::Outcome::RequeueAfter(pb::RequeueAfter { delay }),
                });
                let result = client
                    .finish(pb::FinishRequest { queue: QUEUES[queue].into(), key: key.clone(), token, outcome })
                    .await;
                documented("Finish", &result);
                if result.is_ok() && success {
                    model.live.remove(&(queue, key));
                }
            }
            Call::Extend { queue, key, real_token, ttl } => {
                let key = name(&key);
                let token = if real_token { model.tokens.get(&(queue, key.clone())).copied().unwrap_or(1) } else { 1 };
                let result = client.extend(pb::ExtendRequest { queue: QUEUES[queue].into(), key, token, ttl }).await;
                documented("Extend", &result);
            }
            Call::Forget { queue, key } => {
                let result = client.forget(pb::ForgetRequest { queue: QUEUES[queue].into(), key: name(&key) }).await;
                documented("Forget", &result);
            }
            Call::DrainWithBadTimeout { queue, timeout } => {
                let request =
                    pb::ShutDownRequest { queue: QUEUES[queue].into(), drain: true, drain_timeout: Some(timeout) };
                let result = client.shut_down(request).await;
                assert_eq!(code_of(&result), Code::InvalidArgument, "a drain with timeout {timeout:?}: {result:?}");
            }
            Call::Raw { method, body } => {
                let result = raw_call(method, body).await;
                documented(method, &result);
            }
            Call::Stream { queue, credits, outcomes } => {
                stream(&mut client, queue, credits, outcomes, &mut model).await
            }
            Call::CacheGet { informer, name, min_version, wait } => {
                let request = pb::GetObjectRequest {
                    informer,
                    namespace: String::new(),
                    name,
                    min_resource_version: min_version,
                    wait,
                    include_deleted: false,
                };
                let result = cache.get_object(request).await;
                documented("GetObject", &result);
            }
            Call::CacheList { informer, selector, page_token, page_size } => {
                let request = pb::ListObjectsRequest {
                    informer,
                    label_selector: selector,
                    page_token,
                    page_size,
                    ..Default::default()
                };
                let result = cache.list_objects(request).await;
                documented("ListObjects", &result);
            }
        }
        check(&mut client, &model).await;
    }
}

/// Opens a Work stream, finishes the leases it gets with the given outcomes, then drops it (what
/// it still holds goes back to the queue).
async fn stream(
    client: &mut WorkQueueServiceClient<Channel>,
    queue: usize,
    credits: u32,
    outcomes: Vec<Option<Outcome>>,
    model: &mut Model,
) {
    let (requests, rx) = tokio::sync::mpsc::channel(16);
    let open = work_request::Open {
        queue: QUEUES[queue].into(),
        worker: "fuzz-stream".into(),
        credits,
        lease_ttl: None,
        include_object: false,
        ack_failures_only: false,
    };
    requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let result = client.work(tokio_stream::wrappers::ReceiverStream::new(rx)).await;
    documented("Work", &result);
    let Ok(response) = result else { return };
    let mut responses = response.into_inner();
    let mut outcomes = outcomes.into_iter();
    // Leases finished with success on this stream, by token: live no more once acknowledged.
    let mut succeeding = std::collections::HashMap::new();
    loop {
        let next = tokio::time::timeout(Duration::from_millis(50), responses.next()).await;
        let Ok(Some(message)) = next else { break };
        let message = match message {
            Ok(message) => message,
            Err(status) => {
                assert!(DOCUMENTED.contains(&status.code()), "Work stream ended with {status:?}");
                break;
            }
        };
        match message.kind {
            Some(work_response::Kind::Lease(lease)) => {
                let Some(outcome) = outcomes.next() else { continue };
                let success = matches!(outcome, Some(Outcome::Success));
                let outcome = outcome.map(|o| match o {
                    Outcome::Success => work_request::finish::Outcome::Success(pb::Success {}),
                    Outcome::Retry(error) => work_request::finish::Outcome::Retry(pb::Retry { error }),
                    Outcome::RequeueAfter(delay) => {
                        work_request::finish::Outcome::RequeueAfter(pb::RequeueAfter { delay })
                    }
                });
                let finish = work_request::Finish { key: lease.key.clone(), token: lease.token, outcome };
                if requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Finish(finish)) }).await.is_err() {
                    break;
                }
                if success {
                    succeeding.insert(lease.token, lease.key);
                }
            }
            Some(work_response::Kind::FinishAck(ack)) => {
                let code = Code::from(ack.code);
                assert!(DOCUMENTED.contains(&code), "FinishAck: undocumented code {ack:?}");
                if let (Code::Ok, Some(key)) = (code, succeeding.remove(&ack.token)) {
                    model.live.remove(&(queue, key));
                }
            }
            _ => {}
        }
    }
}

/// The server is alive, and every live key is somewhere in its queue.
async fn check(client: &mut WorkQueueServiceClient<Channel>, model: &Model) {
    let mut health = tonic_health::pb::health_client::HealthClient::new(server().channel.clone());
    let answer = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await;
    assert_eq!(answer.map(|a| a.into_inner().status).ok(), Some(1), "the server answers health as SERVING");
    for (queue, key) in &model.live {
        let state = client
            .key_state(pb::KeyStateRequest { queue: QUEUES[*queue].into(), key: key.clone() })
            .await
            .unwrap_or_else(|status| panic!("KeyState of {key:?} on {}: {status:?}", QUEUES[*queue]))
            .into_inner()
            .state;
        assert_ne!(state, pb::KeyState::Absent as i32, "key {key:?} on {} was lost", QUEUES[*queue]);
    }
}

async fn raw_call(method: &str, body: Vec<u8>) -> Result<Vec<u8>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(server().channel.clone());
    grpc.ready().await.unwrap();
    let path = format!("/workqueue.v1.{method}").parse().unwrap();
    grpc.unary(tonic::Request::new(body), path, RawCodec).await.map(tonic::Response::into_inner)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_call_should_answer_a_documented_code_keep_the_server_alive_and_lose_no_key(
        calls in prop::collection::vec(call(), 1..12),
        case in any::<u64>(),
    ) {
        server().runtime.block_on(run(calls, case));
    }
}
