//! An API server that hangs (answers nothing, closes nothing) behind a test proxy, while a
//! sidecar elects a leader or shares a sharded queue through it: each election attempt and
//! each shard round is bounded by the renew deadline, so the sidecar stops granting, says so
//! in its metrics and logs, and still stops on SIGTERM, instead of waiting on the frozen
//! connection for the client's read timeout (295 s) while its gauges say all is well.

#[path = "support/sidecar.rs"]
mod sidecar;
mod support;

use std::time::{Duration, Instant};

use sidecar::{FAST_LEASES, Sidecar};
use support::control_plane::{self, TestNamespace};
use support::proxy::{Proxy, apiserver_port, kubeconfig_via};

/// Far past the renew deadline of `FAST_LEASES` (2 s) and far short of the read timeout.
const WITHIN: Duration = Duration::from_secs(15);

/// A test namespace, and a proxy to the API server with a kubeconfig that goes through it.
struct Behind {
    ns: TestNamespace,
    proxy: Proxy,
    dir: std::path::PathBuf,
    kubeconfig: std::path::PathBuf,
}

impl Behind {
    async fn proxy(prefix: &str) -> Behind {
        let client = control_plane::client().await;
        let ns = TestNamespace::create(&client, prefix).await;
        let proxy = Proxy::start(apiserver_port()).await;
        let dir = std::env::temp_dir().join(control_plane::unique_name(prefix));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = kubeconfig_via(proxy.port, &dir);
        Behind { ns, proxy, dir, kubeconfig }
    }

    async fn clean_up(self) {
        drop(self.proxy);
        let _ = std::fs::remove_dir_all(&self.dir);
        self.ns.delete().await;
    }
}

async fn wait_for_metric(sidecar: &Sidecar, metric: &str, value: f64, what: &str) -> Duration {
    let started = Instant::now();
    while sidecar.metric(metric).await != Some(value) {
        assert!(
            started.elapsed() < WITHIN,
            "{what}: {metric} is not {value} within {WITHIN:?}; logs:\n{}",
            sidecar.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

/// SIGTERM, then the exit status, within the grace period plus a renew deadline and slack.
fn stop(sidecar: &mut Sidecar) {
    sidecar.send_signal("TERM");
    let status = sidecar.wait(WITHIN);
    assert!(status.success(), "{status:?}; logs:\n{}", sidecar.logs());
}

// Multi-threaded: `Sidecar::start` blocks its thread while the proxy's tasks must keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_leader_whose_api_server_hangs_should_step_down_within_its_renew_deadline() {
    let behind = Behind::proxy("hung-leader").await;
    let args = [
        "--grace-period",
        "1s",
        "--leader-election",
        "--leader-election-namespace",
        behind.ns.name(),
        "--leader-election-identity",
        "hung",
        "--kubeconfig",
        behind.kubeconfig.to_str().unwrap(),
    ];
    let mut sidecar = Sidecar::start(&[&args[..], &FAST_LEASES[..]].concat());
    wait_for_metric(&sidecar, "workqueue_sidecar_leader", 1.0, "leading").await;

    behind.proxy.hang();
    let stepped_down = wait_for_metric(&sidecar, "workqueue_sidecar_leader", 0.0, "the API server hung").await;
    println!(
        "the leader stepped down {:.1} s after its API server hung (renew deadline 2 s)",
        stepped_down.as_secs_f64()
    );
    stop(&mut sidecar);
    behind.clean_up().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_shard_member_whose_api_server_hangs_should_stop_granting_and_say_why_within_its_renew_deadline() {
    let behind = Behind::proxy("hung-shard").await;
    let config = behind.dir.join("config.yaml");
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {} }}\nqueues:\n  q: {{ primary: cms, shard_by: uid }}\n",
        behind.ns.name()
    );
    std::fs::write(&config, yaml).unwrap();
    let args = [
        "--config",
        config.to_str().unwrap(),
        "--grace-period",
        "1s",
        "--shard-group",
        "hung",
        "--leader-election-namespace",
        behind.ns.name(),
        "--leader-election-identity",
        "r0",
        "--kubeconfig",
        behind.kubeconfig.to_str().unwrap(),
    ];
    let mut sidecar = Sidecar::start(&[&args[..], &FAST_LEASES[..]].concat());
    wait_for_metric(&sidecar, "workqueue_sidecar_shard_slots_owned", 4096.0, "the only member").await;

    behind.proxy.hang();
    let gave_up = wait_for_metric(&sidecar, "workqueue_sidecar_shard_slots_owned", 0.0, "the API server hung").await;
    println!("the member owned no slot {:.1} s after its API server hung (renew deadline 2 s)", gave_up.as_secs_f64());
    let logs = sidecar.logs();
    assert!(
        logs.lines().any(|line| line.contains("shard membership round failed") && line.contains("no answer")),
        "the member said why; logs:\n{logs}"
    );
    stop(&mut sidecar);
    behind.clean_up().await;
}
