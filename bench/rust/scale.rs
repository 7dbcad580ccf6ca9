//! Scale benchmark of the real sidecar binary over loopback gRPC (issue 8, part 4).
//!
//! `cargo bench --bench scale` starts the release binary and measures:
//! 1. one queue with 1,000,000 keys (unary Adds of 10,000 keys): the
//!    sidecar's RSS before and after, so memory per key; unary Get and
//!    Get+Done latency with the backlog queued; and the time from Add to
//!    lease of a fresh priority-10 key behind the backlog;
//! 2. 1,000 concurrent long-poll unary Gets (10 channels of 100 calls): the
//!    sidecar's RSS with them parked, then one Add of 1,000 keys and the time
//!    until every call has returned with a lease.
//!
//! Run without `--bench` (`cargo test --bench scale`), everything is scaled
//! down 100x and only checked to work.

use std::time::{Duration, Instant};

use workqueue_sidecar::grpc::pb;

#[path = "support/raw.rs"]
mod raw;
#[path = "support/release_sidecar.rs"]
mod release_sidecar;

use release_sidecar::{Client, ReleaseSidecar};

const QUEUE: &str = "default";
const BATCH: usize = 10_000;

fn get_request(worker: &str, wait: Duration) -> pb::GetRequest {
    pb::GetRequest {
        queue: QUEUE.into(),
        worker: worker.into(),
        max_keys: 1,
        wait: if wait.is_zero() { None } else { Some(wait.try_into().unwrap()) },
        lease_ttl: None,
        include_object: false,
    }
}

async fn add(client: &mut Client, keys: Vec<String>, priority: Option<i32>) {
    client.add(pb::AddRequest { queue: QUEUE.into(), keys, priority, reason: String::new() }).await.unwrap();
}

async fn done(client: &mut Client, lease: pb::Lease) {
    client.done(pb::DoneRequest { queue: QUEUE.into(), key: lease.key, token: lease.token }).await.unwrap();
}

async fn ready(client: &mut Client) -> u32 {
    client.len(pb::LenRequest { queue: QUEUE.into() }).await.unwrap().into_inner().ready
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn summary(mut samples: Vec<Duration>) -> String {
    samples.sort();
    format!(
        "p50 {:?}, p99 {:?}, max {:?} ({} samples)",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples[samples.len() - 1],
        samples.len()
    )
}

/// The summary of `samples`, with its p50 and p99 also recorded as `metric` for the scripts.
fn summary_recorded(metric: &str, samples: Vec<Duration>) -> String {
    let mut sorted = samples.clone();
    sorted.sort();
    raw::record(metric, "p50", raw::ms(percentile(&sorted, 0.5)));
    raw::record(metric, "p99", raw::ms(percentile(&sorted, 0.99)));
    summary(samples)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Sequential unary Get (no wait) + Done: the Get's time and the pair's.
async fn get_done(client: &mut Client, samples: usize) -> (Vec<Duration>, Vec<Duration>) {
    let mut gets = Vec::with_capacity(samples);
    let mut pairs = Vec::with_capacity(samples);
    for _ in 0..samples {
        let start = Instant::now();
        let mut leases = client.get(get_request("bench", Duration::ZERO)).await.unwrap().into_inner().leases;
        let got = start.elapsed();
        assert_eq!(leases.len(), 1);
        done(client, leases.pop().unwrap()).await;
        gets.push(got);
        pairs.push(start.elapsed());
    }
    (gets, pairs)
}

/// A fresh priority-10 key per sample: time from just before its unary Add
/// until the unary Get (no wait) that follows has returned it (then Done).
async fn fresh_key(client: &mut Client, samples: usize, prefix: &str) -> Vec<Duration> {
    let mut fresh = Vec::with_capacity(samples);
    for i in 0..samples {
        let key = format!("{prefix}/key-{i}");
        let start = Instant::now();
        add(client, vec![key.clone()], Some(10)).await;
        let mut leases = client.get(get_request("bench", Duration::ZERO)).await.unwrap().into_inner().leases;
        fresh.push(start.elapsed());
        assert_eq!(leases.len(), 1);
        let lease = leases.pop().unwrap();
        assert_eq!(lease.key, key, "the fresh key comes before the backlog");
        done(client, lease).await;
    }
    fresh
}

/// Part 1: a backlog of `keys` keys in one queue.
async fn backlog(keys: usize, samples: usize) {
    // Bounds past the million measured here: the defaults (250,000 keys,
    // 80 MiB of them) are below it.
    let sidecar = ReleaseSidecar::start_with_config("queues:\n  default: { max_keys: 2000000, max_memory: 1Gi }\n");
    let mut client = sidecar.connect().await;
    // For reference, the same round trips with a small queue (`samples` keys),
    // which also warms the connection and the queue before the baseline.
    let small: Vec<String> = (0..samples).map(|i| format!("small/object-{i}")).collect();
    add(&mut client, small, None).await;
    let (gets, pairs) = get_done(&mut client, samples).await;
    println!("| reference: unary Get with {samples} keys queued at the start | {} |", summary(gets));
    println!("| reference: unary Get + Done with {samples} keys queued at the start | {} |", summary(pairs));
    println!(
        "| reference: fresh priority-10 key, empty queue: Add, then Get returns it | {} |",
        summary(fresh_key(&mut client, samples, "ref").await)
    );
    assert_eq!(ready(&mut client).await, 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = sidecar.rss_kib();

    let started = Instant::now();
    for batch in 0..keys.div_ceil(BATCH) {
        let first = batch * BATCH;
        let batch_keys = (first..(first + BATCH).min(keys)).map(|i| format!("default/object-{i}")).collect();
        add(&mut client, batch_keys, None).await;
    }
    let add_time = started.elapsed();
    assert_eq!(ready(&mut client).await as usize, keys);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = sidecar.rss_kib();
    let per_key = (after.saturating_sub(before)) as f64 * 1024.0 / keys as f64;
    println!(
        "| {keys} keys: Add in batches of {BATCH} (unary) | {add_time:?} total, {:.0} keys/s |",
        keys as f64 / add_time.as_secs_f64()
    );
    println!(
        "| {keys} keys: sidecar RSS | before {:.1} MiB, after {:.1} MiB (peak {:.1} MiB): **{per_key:.0} bytes per key** |",
        mib(before),
        mib(after),
        mib(sidecar.peak_kib())
    );
    raw::record("bytes-per-key", &format!("{} keys", raw::thousands(keys)), per_key);
    raw::record("add-rate", &format!("{} keys", raw::thousands(keys)), keys as f64 / add_time.as_secs_f64());

    let (gets, pairs) = get_done(&mut client, samples).await;
    println!("| unary Get with {keys} keys queued | {} |", summary_recorded("get-latency", gets));
    println!("| unary Get + Done with {keys} keys queued | {} |", summary(pairs));
    let fresh = fresh_key(&mut client, samples, "fresh").await;
    println!(
        "| fresh priority-10 key behind {keys} keys: unary Add, then unary Get returns it | {} |",
        summary_recorded("fresh-key-latency", fresh)
    );
    assert_eq!(ready(&mut client).await as usize, keys - samples);
    assert_eq!(ready(&mut client).await as usize, keys - samples);
}

/// Part 2: `calls` concurrent long-poll Gets on `channels` channels, then one Add.
async fn long_polls(channels: usize, calls: usize, park: Duration) {
    let sidecar = ReleaseSidecar::start();
    let mut control = sidecar.connect().await;
    assert_eq!(ready(&mut control).await, 0);
    let mut clients = Vec::with_capacity(channels);
    for _ in 0..channels {
        let mut client = sidecar.connect().await;
        // Establish the connection before the calls are opened.
        ready(&mut client).await;
        clients.push(client);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = sidecar.rss_kib();

    let (returned_tx, mut returned_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = Vec::with_capacity(calls);
    for c in 0..calls {
        let mut client = clients[c % channels].clone();
        let returned = returned_tx.clone();
        tasks.push(tokio::spawn(async move {
            let response = client.get(get_request(&format!("w{c}"), Duration::from_secs(30))).await;
            let at = Instant::now();
            let _ = returned.send(());
            (response.unwrap().into_inner().leases, at)
        }));
    }
    drop(returned_tx);
    tokio::time::sleep(park).await;
    assert!(returned_rx.try_recv().is_err(), "no long poll returned before the Add");
    let parked = sidecar.rss_kib();
    println!(
        "| {calls} parked unary Gets ({channels} channels x {}) | sidecar RSS {:.1} MiB before, {:.1} MiB parked: {:.1} KiB per call |",
        calls / channels,
        mib(before),
        mib(parked),
        parked.saturating_sub(before) as f64 / calls as f64
    );
    raw::record("long-poll-rss", &format!("{} parked Gets", raw::thousands(calls)), mib(parked));

    let keys: Vec<String> = (0..calls).map(|i| format!("default/wake-{i}")).collect();
    let start = Instant::now();
    add(&mut control, keys, None).await;
    let add_returned = start.elapsed();
    let mut latencies = Vec::with_capacity(calls);
    let mut seen = std::collections::HashSet::new();
    for task in tasks {
        let (leases, at) = task.await.unwrap();
        assert_eq!(leases.len(), 1, "each long poll returns with a lease");
        assert!(seen.insert(leases[0].key.clone()), "each key is leased once");
        latencies.push(at.duration_since(start));
    }
    let all = latencies.iter().max().copied().unwrap();
    println!(
        "| one Add of {calls} keys to {calls} parked Gets | all returned with a lease {all:?} after the Add started (the Add RPC itself: {add_returned:?}); per call {} |",
        summary(latencies)
    );
    raw::record("long-poll-release", &format!("{} parked Gets", raw::thousands(calls)), raw::ms(all));
    assert_eq!(seen.len(), calls);
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --bench scale` runs it once, scaled down 100x.
    let quick = std::env::args().all(|a| a != "--bench");
    let (keys, samples, calls, park) = if quick {
        (10_000, 20, 10, Duration::from_millis(300))
    } else {
        (1_000_000, 2_000, 1_000, Duration::from_secs(2))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        println!("| measurement | result |\n|---|---|");
        backlog(keys, samples).await;
        long_polls(10, calls, park).await;
    });
}
