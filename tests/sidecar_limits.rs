//! What one client can make the built binary spend is bounded: metric
//! labels, connections, streams, bytes. Each test plays an abusive client
//! and checks the bound held (and prints the sidecar's RSS before and after,
//! for the record; `--nocapture` shows it).

#[path = "support/raw_codec.rs"]
mod raw_codec;
#[path = "support/sidecar.rs"]
mod sidecar;

use std::time::Duration;

use futures_util::stream::{self, StreamExt as _};
use raw_codec::RawCodec;
use sidecar::Sidecar;
use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb::{self, work_queue_service_client::WorkQueueServiceClient};
use workqueue_sidecar::server::ServerLimits;

/// A unary call to `path` with an empty body, whatever the path names.
async fn call_path(channel: Channel, path: String) -> tonic::Code {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("the connection is up");
    let path = http::uri::PathAndQuery::try_from(path).expect("a valid path");
    match grpc.unary(tonic::Request::new(Vec::new()), path, RawCodec).await {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test]
async fn made_up_methods_should_share_one_metric_label_and_leave_metrics_small() {
    let sidecar = Sidecar::start(&[]);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let rss_before = sidecar.rss_mib();
    const CALLS: usize = 20_000;
    let codes: Vec<tonic::Code> = stream::iter(0..CALLS)
        .map(|i| call_path(channel.clone(), format!("/workqueue.v1.WorkQueueService/MadeUp{i}")))
        .buffer_unordered(64)
        .collect()
        .await;
    // These calls are answered before their bodies are read. h2's guard
    // against floods of small DATA frames (its budget is half the
    // connection's window, `server::CONNECTION_WINDOW_BYTES`) ends the
    // connection with ENHANCE_YOUR_CALM now and then; the client sees those
    // calls as RESOURCE_EXHAUSTED or UNKNOWN, and they never reach the
    // routes. About 1 in 10 with a 256 KiB window, 1 in 40 with 1 MiB.
    let unimplemented = codes.iter().filter(|code| **code == tonic::Code::Unimplemented).count();
    assert!(unimplemented >= CALLS * 3 / 4, "most made-up methods are answered UNIMPLEMENTED: {unimplemented}");

    let (status, metrics) = sidecar.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let rss_after = sidecar.rss_mib();
    println!("{CALLS} made-up methods: /metrics {} bytes, RSS {rss_before:.1} -> {rss_after:.1} MiB", metrics.len());
    assert!(!metrics.contains("MadeUp"), "no made-up method became a label");
    let unknown =
        r#"grpc_server_handled_total{grpc_service="unknown",grpc_method="unknown",grpc_code="Unimplemented"}"#;
    let counted: f64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix(unknown)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{unknown} missing:\n{metrics}"));
    // Some answers are lost with the connection the guard ended: counted, never received.
    assert!(
        (unimplemented as f64..=CALLS as f64).contains(&counted),
        "every answered call counted under the one label: {counted}, {unimplemented} received"
    );
    assert!(metrics.len() < 64 * 1024, "/metrics stays small: {} bytes", metrics.len());
}

/// A unary Get that long-polls an empty queue: a call held in flight for `wait`.
fn held_call(channel: Channel, wait: Duration) -> tokio::task::JoinHandle<Result<(), tonic::Status>> {
    tokio::spawn(async move {
        let mut client = WorkQueueServiceClient::new(channel);
        client.get(sidecar::get_request(1, wait, None)).await.map(|_| ())
    })
}

#[tokio::test]
async fn thirty_thousand_calls_on_one_connection_should_hold_at_most_its_stream_cap_open() {
    let sidecar = Sidecar::start(&[]);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let rss_before = sidecar.rss_mib();
    let calls: Vec<_> = (0..30_000).map(|_| held_call(channel.clone(), Duration::from_secs(60))).collect();
    let cap = ServerLimits::DEFAULT_MAX_STREAMS_PER_CONNECTION as f64;
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_calls", cap).await;
    // The rest wait in the client for a stream; the server never sees them.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sidecar.metric("workqueue_sidecar_grpc_calls").await, Some(cap));
    let rss_held = sidecar.rss_mib();
    println!("30,000 calls on one connection: {cap} open at the sidecar, RSS {rss_before:.1} -> {rss_held:.1} MiB");
    assert!(rss_held < 64.0, "RSS with the connection's streams at their cap: {rss_held:.1} MiB");
    for call in calls {
        call.abort();
    }
}

#[tokio::test]
async fn a_call_past_max_calls_should_be_refused_and_one_ended_should_make_room() {
    let sidecar = Sidecar::start(&["--max-calls", "8"]);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let held: Vec<_> = (0..8).map(|_| held_call(channel.clone(), Duration::from_secs(60))).collect();
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_calls", 8.0).await;

    let mut client = WorkQueueServiceClient::new(channel.clone());
    let refused = client.len(pb::LenRequest { queue: "default".into() }).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("--max-calls"), "{refused:?}");
    assert_eq!(sidecar.metric("workqueue_sidecar_grpc_calls_refused_total").await, Some(1.0));

    // A held call that ends (its client went away) gives its slot back.
    held[0].abort();
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_calls", 7.0).await;
    client.len(pb::LenRequest { queue: "default".into() }).await.expect("room for one more call");
}

/// The send capacity a stream on `connection` is given towards `want`
/// bytes, once it has stopped growing for 500 ms (the server's SETTINGS and
/// window updates arrive after the handshake).
async fn capacity_granted(stream: &mut h2::SendStream<bytes::Bytes>, want: usize) -> usize {
    stream.reserve_capacity(want);
    loop {
        match tokio::time::timeout(Duration::from_millis(500), std::future::poll_fn(|cx| stream.poll_capacity(cx)))
            .await
        {
            Ok(Some(Ok(_))) => continue,
            Ok(other) => panic!("the stream ended while waiting for capacity: {other:?}"),
            Err(_) => return stream.capacity(),
        }
    }
}

/// A client may send the sidecar no more unread bytes than its HTTP/2
/// windows, per stream and per connection over every stream: that is what
/// one connection can make it buffer. Before the windows were set, hyper's
/// 1 MiB each let 1,024 connections park 1 GiB.
#[tokio::test]
async fn a_connection_should_be_granted_no_more_unread_bytes_than_its_http2_windows() {
    use workqueue_sidecar::server::{CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES};
    let sidecar = Sidecar::start(&[]);
    let tcp = tokio::net::TcpStream::connect(sidecar.address).await.unwrap();
    // A send buffer past every window, so the server's windows are the bound.
    let (send, connection) =
        h2::client::Builder::new().max_send_buffer_size(16 << 20).handshake(tcp).await.expect("an HTTP/2 connection");
    let connection = tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let mut granted = Vec::new();
    let mut streams = Vec::new();
    for _ in 0..8 {
        // A Work stream whose opening message never comes: nothing is read.
        let request = http::Request::post(format!("{}/workqueue.v1.WorkQueueService/Work", sidecar.endpoint()))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (response, mut stream) = send.send_request(request, false).expect("a stream");
        granted.push(capacity_granted(&mut stream, 4 << 20).await);
        streams.push((response, stream));
        send = send.ready().await.unwrap();
    }
    let total: usize = granted.iter().sum();
    println!("8 streams on one connection may send {granted:?} bytes unread, {total} in all");
    assert!(granted[0] > 0, "a stream may send something");
    assert!(granted.iter().all(|&bytes| bytes <= STREAM_WINDOW_BYTES as usize), "per stream: {granted:?}");
    assert!(total <= CONNECTION_WINDOW_BYTES as usize, "per connection, over its streams: {total}");
    drop(streams);
    connection.abort();
}

/// Whether the peer closed `stream` within 20 s (a read returns 0 bytes or an error).
async fn closed_by_peer(stream: &mut tokio::net::TcpStream) -> bool {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    matches!(tokio::time::timeout(Duration::from_secs(20), stream.read(&mut byte)).await, Ok(Ok(0) | Err(_)))
}

#[tokio::test]
async fn a_connection_past_max_connections_should_be_closed_at_once_and_a_closed_one_should_make_room() {
    let sidecar = Sidecar::start(&["--max-connections", "4"]);
    let mut channels = Vec::new();
    for _ in 0..4 {
        let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
        WorkQueueServiceClient::new(channel.clone()).len(pb::LenRequest { queue: "default".into() }).await.unwrap();
        channels.push(channel);
    }
    assert_eq!(sidecar.metric("workqueue_sidecar_grpc_connections").await, Some(4.0));

    let mut fifth = tokio::net::TcpStream::connect(sidecar.address).await.unwrap();
    assert!(closed_by_peer(&mut fifth).await, "the fifth connection is closed");
    let over = r#"workqueue_sidecar_grpc_connections_unserved_total{reason="over_limit"}"#;
    assert_eq!(sidecar.metric(over).await, Some(1.0));

    channels.pop();
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_connections", 3.0).await;
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    WorkQueueServiceClient::new(channel).len(pb::LenRequest { queue: "default".into() }).await.expect("room again");
}

#[tokio::test]
async fn connections_that_send_nothing_should_be_closed_after_their_first_bytes_deadline() {
    let sidecar = Sidecar::start(&[]);
    let mut silent = Vec::new();
    for _ in 0..100 {
        silent.push(tokio::net::TcpStream::connect(sidecar.address).await.unwrap());
    }
    for stream in &mut silent {
        assert!(closed_by_peer(stream).await, "a silent connection is closed within its deadline");
    }
    let closed = r#"workqueue_sidecar_grpc_connections_unserved_total{reason="silent"}"#;
    assert_eq!(sidecar.metric(closed).await, Some(100.0));
    assert_eq!(sidecar.metric("workqueue_sidecar_grpc_connections").await, Some(0.0));
}

/// The CPU seconds (user + system) the process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start at its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[tokio::test]
async fn accepts_out_of_file_descriptors_should_pause_not_spin_and_resume_when_some_close() {
    let sidecar = Sidecar::start(&[]);
    let pid = sidecar.pid().to_string();
    let lowered = std::process::Command::new("prlimit").args(["--nofile=64", "--pid", &pid]).status().unwrap();
    assert!(lowered.success(), "prlimit lowers the sidecar's open-file limit");
    // Far more connections than descriptors: accepts fail with EMFILE.
    let mut flood = Vec::new();
    for _ in 0..120 {
        flood.push(tokio::net::TcpStream::connect(sidecar.address).await.unwrap());
    }
    metric_reaches_at_least(&sidecar, "workqueue_sidecar_grpc_accept_errors_total", 1.0).await;
    let (cpu_before, wall) = (cpu_seconds(sidecar.pid()), std::time::Instant::now());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let share = (cpu_seconds(sidecar.pid()) - cpu_before) / wall.elapsed().as_secs_f64();
    println!("out of descriptors: the sidecar used {:.0} % of a core", share * 100.0);
    // A loop that spins on EMFILE takes a whole core (97 % measured).
    assert!(share < 0.25, "the accept loop spins: {:.0} % of a core", share * 100.0);

    drop(flood);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    WorkQueueServiceClient::new(channel).len(pb::LenRequest { queue: "default".into() }).await.expect("served again");
}

/// Waits (up to 20 s of polling) until the metric `name_and_labels` reads `want`.
async fn metric_reaches(sidecar: &Sidecar, name_and_labels: &str, want: f64) {
    metric_passes(sidecar, name_and_labels, &format!("read {want}"), |value| value == want).await;
}

/// Waits (up to 20 s of polling) until the metric `name_and_labels` reads at least `want`.
async fn metric_reaches_at_least(sidecar: &Sidecar, name_and_labels: &str, want: f64) {
    metric_passes(sidecar, name_and_labels, &format!("reached {want}"), |value| value >= want).await;
}

/// Polls the metric until `passes` holds, or panics saying it `never` did.
/// Each read may wait for the admin port, which shares the process's
/// descriptors: up to 30 s, past which the sidecar never freed one.
async fn metric_passes(sidecar: &Sidecar, name_and_labels: &str, never: &str, passes: impl Fn(f64) -> bool) {
    let read = || async {
        tokio::time::timeout(Duration::from_secs(30), sidecar.metric(name_and_labels))
            .await
            .unwrap_or_else(|_| panic!("the admin port took no connection in 30 s: no descriptor was ever freed"))
    };
    for _ in 0..200 {
        if read().await.is_some_and(&passes) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name_and_labels} never {never}: {:?}", read().await);
}

#[tokio::test]
async fn a_write_body_past_the_api_servers_limit_should_be_refused_before_it_is_parsed() {
    use workqueue_sidecar::grpc::pb::object_service_client::ObjectServiceClient;
    let sidecar = Sidecar::start(&[]);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let mut objects = ObjectServiceClient::new(channel).max_encoding_message_size(usize::MAX);
    let rss_before = sidecar.rss_mib();
    // 15 MiB of JSON: within the other services' 16 MiB, past the writes' 3 MiB.
    let mut json = b"{\"data\":{\"a\":\"".to_vec();
    json.resize(15 * 1024 * 1024, b'x');
    json.extend_from_slice(b"\"}}");
    let request = pb::ApplyObjectRequest {
        r#type: Some(pb::ResourceType { api_version: "v1".into(), kind: "ConfigMap".into() }),
        namespace: "default".into(),
        name: "big".into(),
        json,
        ..Default::default()
    };
    let refused = objects.apply_object(request).await.unwrap_err();
    let rss_after = sidecar.rss_mib();
    println!("a 15 MiB write: {:?}, RSS {rss_before:.1} -> {rss_after:.1} MiB", refused.code());
    // tonic's code for a message over the limit, read from its length prefix.
    assert_eq!(refused.code(), tonic::Code::OutOfRange, "{refused:?}");
    assert!(refused.message().contains("the limit is: 3211264 bytes"), "{refused:?}");
    assert!(rss_after - rss_before < 40.0, "the body was not read whole: RSS {rss_before:.1} -> {rss_after:.1} MiB");
}

/// Keys of the longest length a client may send fill the default queue by
/// their bytes (`max_memory`), long before `max_keys`: the add past it is
/// RESOURCE_EXHAUSTED naming the bound, every key taken before is still
/// queued, and the sidecar's memory stays near the bound. Before the bound
/// in bytes, 250,000 such keys took 327 MiB.
#[tokio::test]
async fn a_queue_at_its_memory_bound_should_refuse_new_keys_and_keep_every_key_it_took() {
    use workqueue_sidecar::grpc::MAX_KEY_BYTES;
    use workqueue_sidecar::queue::{DEFAULT_MAX_KEYS, DEFAULT_MAX_MEMORY, key_cost};
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    let rss_before = sidecar.rss_mib();
    let key = |i: usize| format!("{i:08}{}", "k".repeat(MAX_KEY_BYTES - 8));
    let add =
        |keys: Vec<String>| pb::AddRequest { queue: "default".into(), keys, priority: None, reason: String::new() };
    let (mut taken, mut batch) = (0, 500);
    let refused = loop {
        assert!(taken < DEFAULT_MAX_KEYS, "{taken} keys of {MAX_KEY_BYTES} bytes taken without a refusal");
        match client.add(add((taken..taken + batch).map(key).collect())).await {
            Ok(_) => taken += batch,
            // A refused batch adds nothing: go on one key at a time to the exact bound.
            Err(status) if batch > 1 => {
                assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
                batch = 1;
            }
            Err(status) => break status,
        }
    };
    let rss_after = sidecar.rss_mib();
    println!("{taken} keys of {MAX_KEY_BYTES} bytes until refused: RSS {rss_before:.1} -> {rss_after:.1} MiB");
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(refused.message().contains("max_memory"), "{refused:?}");
    assert_eq!(taken, DEFAULT_MAX_MEMORY / key_cost(MAX_KEY_BYTES), "the bound counts each key as documented");
    let len = client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!(len.ready as usize, taken, "every key taken is still queued");
    metric_reaches(&sidecar, r#"workqueue_sidecar_keys{name="default"}"#, taken as f64).await;
    metric_reaches(
        &sidecar,
        r#"workqueue_sidecar_key_bytes{name="default"}"#,
        (taken * key_cost(MAX_KEY_BYTES)) as f64,
    )
    .await;
    let bound_mib = DEFAULT_MAX_MEMORY as f64 / (1 << 20) as f64;
    assert!(
        rss_after - rss_before < bound_mib * 1.5,
        "the keys took about their bound ({bound_mib} MiB): RSS {rss_before:.1} -> {rss_after:.1} MiB"
    );
}

/// Messages received at once draw on one budget (64 MiB), reserved from
/// each message's length prefix: of 64 calls of 15 MiB each, sent at once
/// over eight connections, those the budget holds are received whole and the
/// others refused RESOURCE_EXHAUSTED before their bytes are read, so the
/// sidecar's peak memory stays near the budget instead of holding every
/// body at once.
#[tokio::test]
async fn large_messages_sent_at_once_should_be_received_within_the_budget() {
    use workqueue_sidecar::server::RECEIVE_BUDGET_BYTES;
    let sidecar = Sidecar::start(&[]);
    let rss_before = sidecar.rss_mib();
    // 10,000 keys of 1,500 bytes: decoded whole, then refused (keys are at most 1 KiB).
    let keys: Vec<String> = (0..10_000).map(|i| format!("{i:05}{}", "k".repeat(1_495))).collect();
    let request = pb::AddRequest { queue: "default".into(), keys, priority: None, reason: String::new() };
    let mut clients = Vec::new();
    for _ in 0..8 {
        let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
        clients.push(WorkQueueServiceClient::new(channel).max_encoding_message_size(usize::MAX));
    }
    let calls: Vec<_> = (0..64)
        .map(|i| {
            let (mut client, request) = (clients[i % clients.len()].clone(), request.clone());
            tokio::spawn(async move { client.add(request).await.map(|_| ()).unwrap_err() })
        })
        .collect();
    let (mut received, mut refused) = (0, 0);
    for call in calls {
        let status = call.await.unwrap();
        match status.code() {
            // Read whole, then refused for its keys.
            tonic::Code::InvalidArgument => received += 1,
            tonic::Code::ResourceExhausted if status.message().contains("receive budget") => refused += 1,
            _ => panic!("neither received nor refused by the budget: {status:?}"),
        }
    }
    let peak = sidecar.peak_rss_mib();
    let budget_mib = (RECEIVE_BUDGET_BYTES >> 20) as f64;
    println!(
        "64 messages of 15 MiB at once: {received} received, {refused} refused; RSS {rss_before:.1} MiB, peak {peak:.1} MiB (budget {budget_mib} MiB)"
    );
    assert!(received >= 4, "the budget holds four such messages at a time: {received} received");
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_receiving_refused_total", refused as f64).await;
    metric_reaches(&sidecar, "workqueue_sidecar_grpc_receiving_bytes", 0.0).await;
    // A message is held twice while it is decoded (its bytes, and the keys
    // made from them), and a handler may still hold one decoded message
    // per call it has not yet answered. Without the budget every body was
    // held at once: a peak of 873 MiB.
    assert_eq!(budget_mib, 64.0);
    assert!(peak - rss_before < 256.0, "peak {peak:.1} MiB from {rss_before:.1} MiB");
}
