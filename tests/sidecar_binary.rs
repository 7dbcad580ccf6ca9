//! Black-box tests of the built binary on a free loopback port: worker
//! crashes, expired tokens, abandoned long polls and SIGTERM lose nothing.

#[path = "support/sidecar.rs"]
mod sidecar;

use std::time::{Duration, Instant};

use sidecar::Sidecar;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, work_request, work_response};

fn add(keys: &[&str]) -> pb::AddRequest {
    sidecar::add_request(keys)
}

fn get(wait: Duration, ttl: Option<Duration>) -> pb::GetRequest {
    sidecar::get_request(1, wait, ttl)
}

/// A streaming worker on its own connection, so dropping it closes the socket like a crash.
async fn stream_worker(
    endpoint: String,
    credits: u32,
) -> (mpsc::Sender<pb::WorkRequest>, tonic::Streaming<pb::WorkResponse>) {
    let mut client = WorkQueueServiceClient::connect(endpoint).await.unwrap();
    let (tx, rx) = mpsc::channel(8);
    let open = work_request::Open {
        queue: "default".into(),
        worker: "crashy".into(),
        credits,
        lease_ttl: None,
        include_object: false,
        ack_failures_only: false,
    };
    tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
    let mut responses = client.work(ReceiverStream::new(rx)).await.unwrap().into_inner();
    assert!(matches!(responses.next().await.unwrap().unwrap().kind, Some(work_response::Kind::Opened(_))));
    (tx, responses)
}

async fn next_lease(responses: &mut tonic::Streaming<pb::WorkResponse>) -> pb::Lease {
    match tokio::time::timeout(Duration::from_secs(5), responses.next()).await.unwrap().unwrap().unwrap().kind {
        Some(work_response::Kind::Lease(lease)) => lease,
        other => panic!("expected a lease, got {other:?}"),
    }
}

#[tokio::test]
async fn killed_streaming_worker_should_hand_its_key_to_another_within_a_second() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    client.add(add(&["busy"])).await.unwrap();
    let (tx, mut responses) = stream_worker(sidecar.endpoint(), 1).await;
    let lease = next_lease(&mut responses).await;
    assert_eq!(lease.key, "busy");

    let (_tx2, mut survivor) = stream_worker(sidecar.endpoint(), 1).await;
    let killed_at = Instant::now();
    drop((tx, responses));
    let handed = next_lease(&mut survivor).await;
    let elapsed = killed_at.elapsed();
    assert_eq!(handed.key, "busy");
    assert!(elapsed < Duration::from_secs(1), "handed over after {elapsed:?}");
    assert!(handed.reasons.iter().any(|r| r.kind == pb::ReasonKind::LeaseReleased as i32));
}

/// The binary refuses ShutDown from a worker by default (the queue goes on),
/// and serves it once the operator passes `--allow-shutdown-rpc`.
#[tokio::test]
async fn shut_down_should_need_the_operators_flag() {
    let stop = pb::ShutDownRequest { queue: "default".into(), drain: false, drain_timeout: None };
    let closed = Sidecar::start(&[]);
    let mut client = closed.client().await;
    let refused = client.shut_down(stop.clone()).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    client.add(add(&["still"])).await.unwrap();
    let leases = client.get(get(Duration::from_secs(1), None)).await.unwrap().into_inner().leases;
    assert_eq!(leases.len(), 1, "the queue still hands out keys");

    let open = Sidecar::start(&["--allow-shutdown-rpc"]);
    let mut client = open.client().await;
    client.shut_down(stop).await.unwrap();
    assert_eq!(client.add(add(&["late"])).await.unwrap_err().code(), Code::Unavailable);
}

#[tokio::test]
async fn token_used_after_its_lease_expired_should_be_rejected() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    client.add(add(&["slow"])).await.unwrap();
    let lease = client
        .get(get(Duration::from_secs(1), Some(Duration::from_millis(200))))
        .await
        .unwrap()
        .into_inner()
        .leases
        .remove(0);
    tokio::time::sleep(Duration::from_millis(400)).await;
    let done = pb::DoneRequest { queue: "default".into(), key: lease.key.clone(), token: lease.token };
    assert_eq!(client.done(done).await.unwrap_err().code(), Code::FailedPrecondition);
    let state = client
        .key_state(pb::KeyStateRequest { queue: "default".into(), key: "slow".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(state.failures, 1, "the expiry counted as a failure");
    assert_ne!(state.state, pb::KeyState::Absent as i32, "the key went back to the queue");
}

#[tokio::test]
async fn long_poll_clients_that_give_up_should_lose_no_key() {
    let sidecar = Sidecar::start(&[]);
    let mut client = sidecar.client().await;
    const KEYS: usize = 200;
    // Clients that give up at staggered times while keys arrive.
    let mut quitters = Vec::new();
    for i in 0..20u64 {
        let mut quitter = sidecar.client().await;
        quitters.push(tokio::spawn(async move {
            let give_up = Duration::from_millis(5 + i * 7);
            let _ = tokio::time::timeout(give_up, quitter.get(get(Duration::from_secs(30), None))).await;
        }));
    }
    for i in 0..KEYS {
        client.add(add(&[&format!("k{i}")])).await.unwrap();
        if i % 20 == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    for quitter in quitters {
        quitter.await.unwrap();
    }
    // Every key is still there for a worker that stays: either queued, or
    // leased to a quitter whose answer arrived just as it gave up; those
    // come back when their lease expires, so count them from the state.
    let len = client.len(pb::LenRequest { queue: "default".into() }).await.unwrap().into_inner();
    assert_eq!(len.ready + len.held + len.waiting, KEYS as u32, "{len:?}");
}

#[tokio::test]
async fn sigterm_should_let_held_work_finish_and_exit_zero() {
    let mut sidecar = Sidecar::start(&["--grace-period", "3s"]);
    let mut client = sidecar.client().await;
    client.add(add(&["finishing", "abandoned"])).await.unwrap();
    let (tx, mut responses) = stream_worker(sidecar.endpoint(), 2).await;
    let first = next_lease(&mut responses).await;
    let _second = next_lease(&mut responses).await;

    sidecar.send_signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // New work is refused, held work may still finish.
    let refused = client.add(add(&["new"])).await;
    assert!(refused.is_err(), "adds are refused while shutting down");
    let finish = work_request::Finish {
        key: first.key.clone(),
        token: first.token,
        outcome: Some(work_request::finish::Outcome::Success(pb::Success {})),
    };
    tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Finish(finish)) }).await.unwrap();
    match tokio::time::timeout(Duration::from_secs(2), responses.next()).await.unwrap().unwrap().unwrap().kind {
        Some(work_response::Kind::FinishAck(ack)) => assert_eq!(ack.code, 0, "{}", ack.message),
        other => panic!("expected the finish to be acknowledged, got {other:?}"),
    }
    let status = sidecar.wait(Duration::from_secs(10));
    assert!(status.success(), "exit status {status:?}; logs:\n{}", sidecar.logs());
    let logs = sidecar.logs();
    assert!(logs.contains("finished=1 returned=1"), "one lease finished, one handed back; logs:\n{logs}");
}

#[test]
fn bad_config_should_exit_non_zero_before_listening() {
    let dir = std::env::temp_dir().join(format!("wqs-bad-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.yaml");
    std::fs::write(&path, "queues:\n  default:\n    lease_ttl: 30 parsecs\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--config", path.to_str().unwrap(), "--tcp", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("bad.yaml") && stderr.contains("lease_ttl"), "names the file and field: {stderr}");
    assert!(!stderr.contains("listening"), "no port was bound: {stderr}");
}

#[test]
fn check_config_should_refuse_what_the_api_server_or_the_queue_would_refuse_later() {
    let dir = std::env::temp_dir().join(format!("wqs-check-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let informer = "informers:\n  u:\n    version: v1\n    kind: ConfigMap\n";
    let cases = [
        ("label_selector", format!("{informer}    label_selector: a in (b\nqueues:\n  q:\n    primary: u\n")),
        ("field_selector", format!("{informer}    field_selector: metadata.name\nqueues:\n  q:\n    primary: u\n")),
        (
            "exponential.base",
            "queues:\n  q:\n    rate_limiter:\n      exponential: { base: 1000000000h, max: 1000000000h }\n".into(),
        ),
        // Each of these the API server would take and answer with nothing, or
        // refuse on every retry while /readyz stays 503.
        ("field_selector", format!("{informer}    field_selector: metadata.nam=x\nqueues:\n  q:\n    primary: u\n")),
        ("namespace", format!("{informer}    namespace: Foo_Bar\nqueues:\n  q:\n    primary: u\n")),
        ("resync", format!("{informer}    resync: 1ms\nqueues:\n  q:\n    primary: u\n")),
        (
            "triggers[0]",
            format!(
                "{informer}queues:\n  q:\n    primary: u\n    triggers: [{{ informer: u, by: label, label: \"bad label!\" }}]\n"
            ),
        ),
        ("priorities", format!("{informer}queues:\n  q:\n    priorities: {{ events: 5 }}\n")),
    ];
    for (field, yaml) in cases {
        let path = dir.join("check.yaml");
        std::fs::write(&path, yaml).unwrap();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
            .args(["--config", path.to_str().unwrap(), "--check-config"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{field}: exit status 2; stderr: {stderr}");
        assert!(stderr.contains("check.yaml") && stderr.contains(field), "{field}: names file and field: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unreachable_api_server_at_start_should_be_waited_for_with_progress_and_sigterm_should_end_the_wait() {
    use std::io::{BufRead, BufReader};
    let dir = std::env::temp_dir().join(format!("wqs-no-api-server-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{ name: c, cluster: {{ server: \"https://127.0.0.1:{port}\", \
             insecure-skip-tls-verify: true }} }}]\nusers: [{{ name: u, user: {{ token: t }} }}]\n\
             contexts: [{{ name: c, context: {{ cluster: c, user: u }} }}]\ncurrent-context: c\n"
        ),
    )
    .unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, "informers:\n  cms: { version: v1, kind: ConfigMap }\nqueues:\n  q: { primary: cms }\n")
        .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()])
        .args(["--tcp", "127.0.0.1:0", "--admin", "off"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok);
    // Two attempts in a row, each said once: the wait goes on instead of
    // exiting as a bad config would.
    let waits: Vec<String> =
        lines.by_ref().filter(|line| line.contains("waiting for the API server")).take(2).collect();
    assert_eq!(waits.len(), 2, "two attempts reported");
    assert!(
        waits.iter().all(|line| line.contains("informer=cms") && line.matches("Connection refused").count() == 1),
        "each names the informer and says the cause once: {waits:#?}"
    );
    assert!(child.try_wait().unwrap().is_none(), "still waiting after two attempts");
    let kill = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM while waiting is a clean stop: {rest:#?}");
    assert!(rest.iter().any(|line| line.contains("stopped before serving")), "{rest:#?}");
    assert!(!rest.iter().chain(&waits).any(|line| line.contains("listening")), "no port was bound: {rest:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_config_should_print_a_summary_of_the_wiring_and_exit_zero() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--config", "deploy/overlays/users/config.yaml", "--check-config"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    for line in ["deploy/overlays/users/config.yaml: valid", "informers (2):", "  users:\n    primary: users"] {
        assert!(stdout.contains(line), "{line:?} not in:\n{stdout}");
    }
}

#[test]
fn remote_address_should_need_allow_remote() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--tcp", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--allow-remote"));
}

#[tokio::test]
async fn health_should_keep_the_server_alive_but_the_queue_not_serving_during_a_drain() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let sidecar = Sidecar::start(&["--grace-period", "3s"]);
    let mut client = sidecar.client().await;
    client.add(add(&["held"])).await.unwrap();
    let _lease = client.get(get(Duration::from_secs(1), None)).await.unwrap();
    let channel = tonic::transport::Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel);
    let status = async |health: &mut HealthClient<tonic::transport::Channel>, service: &str| {
        let request = HealthCheckRequest { service: service.into() };
        ServingStatus::try_from(health.check(request).await.unwrap().into_inner().status).unwrap()
    };
    assert_eq!(status(&mut health, "workqueue.v1.WorkQueueService").await, ServingStatus::Serving);
    sidecar.send_signal("TERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(status(&mut health, "").await, ServingStatus::Serving, "liveness: alive while draining");
    assert_eq!(status(&mut health, "workqueue.v1.WorkQueueService").await, ServingStatus::NotServing);
}

#[test]
fn json_logs_should_carry_fixed_messages_with_fields() {
    use std::io::{BufRead, BufReader};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--log-format", "json", "--tcp", "127.0.0.1:0", "--admin", "off"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let listening = lines
        .map_while(Result::ok)
        .map(|line| {
            serde_json::from_str::<serde_json::Value>(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
        })
        .find(|entry| entry["fields"]["message"] == "listening")
        .expect("a listening entry");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(listening["level"], "INFO");
    assert_eq!(listening["fields"]["transport"], "tcp");
    let address: std::net::SocketAddr = listening["fields"]["address"].as_str().unwrap().parse().unwrap();
    assert!(address.ip().is_loopback());
}

#[test]
fn unix_socket_should_never_replace_what_is_not_a_stale_socket() {
    let dir = std::env::temp_dir().join(format!("wqs-unix-taken-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grpc.sock");
    std::fs::write(&file, "not a socket").unwrap();
    // The sidecar must exit at once; one that took the path serves on, and is
    // stopped after 10 s so that the test fails rather than waits.
    let run = |path: &std::path::Path| {
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
            .args(["--tcp", "off", "--admin", "off", "--unix", path.to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        child.wait_with_output().unwrap()
    };
    let output = run(&file);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a regular file at the path is refused: {stderr}");
    assert!(stderr.contains("not a socket"), "says why: {stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a socket", "the file is left as it was");

    // A socket another process serves is refused too, and keeps working.
    let served = dir.join("served.sock");
    let _listener = std::os::unix::net::UnixListener::bind(&served).unwrap();
    let output = run(&served);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && stderr.contains("another process is listening"), "{stderr}");
    std::os::unix::net::UnixStream::connect(&served).expect("the other process's socket is still there");
}

#[tokio::test]
async fn unix_socket_should_be_for_owner_and_group_only_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("wqs-unix-mode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("grpc.sock");
    // A stale socket (nobody listens) from an earlier run is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let sidecar = Sidecar::start_in_shell("umask 000", &["--unix", path.to_str().unwrap()]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o660, "socket mode {mode:o} under umask 000");
    drop(sidecar);
}
