//! Load benchmark of the real sidecar binary over loopback gRPC (issue 3's targets).
//!
//! `cargo bench --bench grpc_load` starts the release binary, then measures:
//! unary Get+Done pairs per second with 1, 4 and 16 workers (and with 16
//! workers over a unix socket, and against the sidecar on two runtime
//! threads); streaming items
//! per second with credit windows from 1 to 128; and lease latency (from just
//! before Add until the worker has the lease) at half the streaming maximum.
//! Client and server share this machine's cores, as they would in a pod.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, work_request, work_response};

#[path = "support/raw.rs"]
mod raw;
#[path = "support/release_sidecar.rs"]
mod release_sidecar;

use release_sidecar::{Client, ReleaseSidecar};

/// How long each throughput measurement runs.
const RUN: Duration = Duration::from_secs(3);

async fn connect(endpoint: &str) -> Client {
    WorkQueueServiceClient::connect(endpoint.to_string()).await.unwrap()
}

/// Keeps `ready` keys queued: adds batches whenever the queue runs low.
async fn keep_filled(mut client: Client, stop: tokio::sync::watch::Receiver<bool>) {
    let mut next = 0u64;
    while !*stop.borrow() {
        let len = client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner().ready;
        if len < 20_000 {
            let keys: Vec<String> = (next..next + 5_000).map(|i| format!("bench/key-{i}")).collect();
            next += 5_000;
            client
                .add(pb::AddRequest { queue: "default".into(), keys, priority: None, reason: String::new() })
                .await
                .unwrap();
        } else {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

async fn drain(client: &mut Client) {
    client.shut_down(pb::ShutDownRequest { queue: "default".into(), drain: false, drain_timeout: None }).await.ok();
}

/// How the unary workers reach the sidecar.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Transport {
    Tcp,
    /// As the shipped manifests connect a pod's workers to its sidecar.
    UnixSocket,
}

/// `sidecar_args`: added to the sidecar's command line (none: its defaults).
async fn unary_pairs_per_second(workers: usize, transport: Transport, sidecar_args: &[&str]) -> f64 {
    let sidecar = match transport {
        Transport::Tcp => ReleaseSidecar::start_with_args(sidecar_args),
        Transport::UnixSocket => ReleaseSidecar::start_with_unix_socket(sidecar_args),
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let filler = tokio::spawn(keep_filled(connect(&sidecar.endpoint).await, stop_rx));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deadline = Instant::now() + RUN;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let mut client = match transport {
            Transport::Tcp => connect(&sidecar.endpoint).await,
            Transport::UnixSocket => sidecar.connect_unix().await,
        };
        tasks.push(tokio::spawn(async move {
            let mut pairs = 0u64;
            while Instant::now() < deadline {
                let request = pb::GetRequest {
                    queue: "default".into(),
                    worker: format!("w{w}"),
                    max_keys: 1,
                    wait: Some(Duration::from_millis(100).try_into().unwrap()),
                    lease_ttl: None,
                    include_object: false,
                };
                for lease in client.get(request).await.unwrap().into_inner().leases {
                    let done = pb::DoneRequest { queue: "default".into(), key: lease.key, token: lease.token };
                    client.done(done).await.unwrap();
                    pairs += 1;
                }
            }
            pairs
        }));
    }
    let start = Instant::now();
    let mut total = 0;
    for task in tasks {
        total += task.await.unwrap();
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    filler.await.unwrap();
    rate
}

struct Stream {
    requests: mpsc::Sender<pb::WorkRequest>,
    responses: tonic::Streaming<pb::WorkResponse>,
}

async fn open_stream(endpoint: &str, credits: u32) -> Stream {
    let mut client = connect(endpoint).await;
    let (requests, rx) = mpsc::channel(4096);
    let open = work_request::Open {
        queue: "default".into(),
        worker: "bench".into(),
        credits,
        lease_ttl: None,
        include_object: false,
        ack_failures_only: false,
    };
    requests.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let mut responses = client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    let _opened = responses.next().await.unwrap().unwrap();
    Stream { requests, responses }
}

fn success(lease: &pb::Lease) -> pb::WorkRequest {
    let finish = work_request::Finish {
        key: lease.key.clone(),
        token: lease.token,
        outcome: Some(work_request::finish::Outcome::Success(pb::Success {})),
    };
    pb::WorkRequest { kind: Some(work_request::Kind::Finish(finish)) }
}

async fn streaming_items_per_second(credits: u32) -> f64 {
    let sidecar = ReleaseSidecar::start();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let filler = tokio::spawn(keep_filled(connect(&sidecar.endpoint).await, stop_rx));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut stream = open_stream(&sidecar.endpoint, credits).await;
    let start = Instant::now();
    let mut items = 0u64;
    while start.elapsed() < RUN {
        match stream.responses.next().await.unwrap().unwrap().kind {
            Some(work_response::Kind::Lease(lease)) => {
                stream.requests.send(success(&lease)).await.unwrap();
                items += 1;
            }
            Some(work_response::Kind::FinishAck(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let rate = items as f64 / start.elapsed().as_secs_f64();
    let _ = stop_tx.send(true);
    filler.await.unwrap();
    rate
}

/// Lease latency as issue 3 defines it: from the moment the key became
/// available in the queue (the lease's `enqueued_at`, stamped by the sidecar)
/// until the worker has the lease. Keys arrive in small batches at `rate`
/// per second, as an informer's events would; client and sidecar read the
/// same wall clock.
async fn lease_latency(rate: f64, samples: usize) -> (Vec<Duration>, f64) {
    const BATCH: usize = 20;
    let sidecar = ReleaseSidecar::start();
    let mut stream = open_stream(&sidecar.endpoint, 128).await;
    let started = Instant::now();
    let producer = {
        let mut client = connect(&sidecar.endpoint).await;
        tokio::spawn(async move {
            let interval = Duration::from_secs_f64(BATCH as f64 / rate);
            let mut next = Instant::now();
            for batch in 0..samples.div_ceil(BATCH) {
                next += interval;
                let now = Instant::now();
                if next > now {
                    tokio::time::sleep(next - now).await;
                }
                let keys = (0..BATCH).map(|i| format!("lat/{batch}/{i}")).collect();
                client
                    .add(pb::AddRequest { queue: "default".into(), keys, priority: None, reason: String::new() })
                    .await
                    .unwrap();
            }
            client
        })
    };
    let mut latencies = Vec::with_capacity(samples);
    while latencies.len() < samples {
        match stream.responses.next().await.unwrap().unwrap().kind {
            Some(work_response::Kind::Lease(lease)) => {
                let received = std::time::SystemTime::now();
                let enqueued = std::time::SystemTime::try_from(lease.enqueued_at.unwrap()).unwrap();
                latencies.push(received.duration_since(enqueued).unwrap_or_default());
                stream.requests.send(success(&lease)).await.unwrap();
            }
            Some(work_response::Kind::FinishAck(_)) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    let achieved = latencies.len() as f64 / started.elapsed().as_secs_f64();
    let mut client = producer.await.unwrap();
    drain(&mut client).await;
    (latencies, achieved)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs it once as a smoke test.
    let quick = std::env::args().all(|a| a != "--bench");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        if quick {
            let rate = streaming_items_per_second(8).await;
            println!("grpc_load smoke: streaming {rate:.0} items/s");
            return;
        }
        println!("| measurement | setting | result |\n|---|---|---|");
        for workers in [1, 4, 16] {
            let rate = unary_pairs_per_second(workers, Transport::Tcp, &[]).await;
            println!("| unary Get+Done | {workers} workers | {rate:.0} pairs/s |");
            raw::record("unary", &format!("{workers} workers"), rate);
        }
        // A pod's workers reach its sidecar over a unix socket, which spares
        // each call the loopback TCP stack.
        let rate = unary_pairs_per_second(16, Transport::UnixSocket, &[]).await;
        println!("| unary Get+Done | 16 workers, unix socket | {rate:.0} pairs/s |");
        raw::record("unary", "16 workers, unix socket", rate);
        // The default is one runtime thread (cheapest in CPU at a controller's
        // event rates); many unary workers are what a second thread is for.
        let rate = unary_pairs_per_second(16, Transport::Tcp, &["--worker-threads", "2"]).await;
        println!("| unary Get+Done | 16 workers, --worker-threads 2 | {rate:.0} pairs/s |");
        raw::record("unary", "16 workers, --worker-threads 2", rate);
        let mut best: f64 = 0.0;
        for credits in [1, 8, 32, 128] {
            let rate = streaming_items_per_second(credits).await;
            best = best.max(rate);
            println!("| streaming Work | {credits} credits | {rate:.0} items/s |");
            raw::record("streaming", &format!("{credits} credits"), rate);
        }
        let half = best / 2.0;
        let (mut latencies, achieved) = lease_latency(half, (half * 5.0) as usize).await;
        latencies.sort();
        println!(
            "| lease latency (key available to lease received) | {half:.0} keys/s asked, {achieved:.0} achieved (half of max) | p50 {:?}, p99 {:?}, max {:?} |",
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
            latencies[latencies.len() - 1]
        );
        raw::record("lease-latency", "p50", raw::ms(percentile(&latencies, 0.5)));
        raw::record("lease-latency", "p99", raw::ms(percentile(&latencies, 0.99)));
        raw::record("lease-latency-rate", "keys/s achieved", achieved);
    });
}
