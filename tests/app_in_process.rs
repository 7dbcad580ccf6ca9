//! The whole sidecar in process, through `app::Sidecar` as the binary runs it: bound on a port it
//! names without any log scraping, serving a key end to end, and stopping when its shutdown future
//! completes, with held work drained first.

#[path = "support/app_options.rs"]
mod app_options;
#[path = "support/sidecar.rs"]
mod binary;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use binary::{add_request, get_request};
use workqueue_sidecar::app::{Options, Sidecar};
use workqueue_sidecar::config::Config;
use workqueue_sidecar::grpc::pb::DoneRequest;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;

fn standalone() -> Options {
    app_options::loopback(Config::standalone(), None)
}

/// Runs `sidecar` until the returned sender is used: its gRPC address, the
/// sender, and the running sidecar.
fn run_until_told(sidecar: Sidecar) -> (SocketAddr, oneshot::Sender<()>, JoinHandle<anyhow::Result<()>>) {
    let address = sidecar.tcp_address().expect("a TCP address");
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let running = tokio::spawn(sidecar.run(async move {
        let _ = shutdown_rx.await;
        "test"
    }));
    (address, shutdown_tx, running)
}

#[tokio::test]
async fn sidecar_should_serve_then_drain_held_work_and_stop_when_shutdown_completes() {
    let sidecar = Sidecar::bind(standalone()).await.expect("a standalone sidecar binds");
    let (address, shutdown_tx, running) = run_until_told(sidecar);

    let mut client = WorkQueueServiceClient::connect(format!("http://{address}")).await.unwrap();
    client.add(add_request(&["a"])).await.unwrap();
    let leases = client.get(get_request(1, Duration::from_secs(1), None)).await.unwrap().into_inner().leases;
    let [lease] = leases.as_slice() else { panic!("one lease, got {leases:?}") };

    // A held lease keeps the drain waiting until it is done.
    shutdown_tx.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!running.is_finished(), "the sidecar stopped while a lease was held");
    client
        .done(DoneRequest { queue: "default".into(), key: lease.key.clone(), token: lease.token })
        .await
        .expect("Done still works during the drain");
    let stopped = tokio::time::timeout(Duration::from_secs(5), running).await.expect("stops after the drain");
    stopped.unwrap().expect("a clean stop");
    let refused = WorkQueueServiceClient::connect(format!("http://{address}")).await;
    assert!(refused.is_err(), "the port is closed after the stop");
}

/// A kubeconfig naming an API server nobody listens on: the elector's every
/// attempt fails, so this replica never leads.
fn unreachable_kubeconfig() -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("wqs-unreachable-{}.kubeconfig", std::process::id()));
    std::fs::write(
        &path,
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n\
         clusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n\
         users: [{name: u, user: {token: t}}]\n\
         contexts: [{name: x, context: {cluster: c, user: u}}]\n",
    )
    .unwrap();
    path
}

/// The listeners are bound by `bind`, so a worker may connect the moment
/// `run` starts serving: a replica that elects must hold its queues from
/// `bind` on, not from when its elector task starts (which came after the
/// informers' first requests to the API server).
#[tokio::test]
async fn a_replica_that_elects_should_hand_out_nothing_from_the_moment_it_is_bound() {
    let kubeconfig = unreachable_kubeconfig();
    let election = workqueue_sidecar::replicas::leader::ElectionSettings {
        namespace: "default".into(),
        lease_name: "workqueue-sidecar".into(),
        identity: "replica-a".into(),
        lease_duration: Duration::from_secs(15),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    let options = Options { kubeconfig: Some(kubeconfig.clone()), election: Some(election), ..standalone() };
    let sidecar = Sidecar::bind(options).await.expect("binds without reaching the API server");
    let queue = sidecar.queues().get("default").expect("the standalone queue").clone();
    assert_eq!(queue.term().holds(), ["not the leader"], "held before anything serves");

    let (address, shutdown_tx, running) = run_until_told(sidecar);
    let mut client = WorkQueueServiceClient::connect(format!("http://{address}")).await.unwrap();
    client.add(add_request(&["a"])).await.unwrap();
    let leases = client.get(get_request(1, Duration::from_millis(300), None)).await.unwrap().into_inner().leases;
    assert!(leases.is_empty(), "a replica that never led handed out {leases:?}");
    shutdown_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running).await.expect("stops").unwrap().expect("a clean stop");
    let _ = std::fs::remove_file(kubeconfig);
}
