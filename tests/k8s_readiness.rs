//! `/readyz` of the built binary against the real control plane, reached through a proxy that delays
//! every new connection by 2 s: the API server is slow, so the informers take seconds to sync, and
//! `/readyz` must answer 503 all that time, from the moment the admin port serves.

#[path = "support/sidecar.rs"]
mod binary;
mod support;

use std::time::Duration;

use binary::Sidecar;
use kube::config::Kubeconfig;
use support::control_plane::{self, TestNamespace};
use support::proxy::Proxy;

/// The slow network: every new connection to the API server waits this long.
const CONNECT_DELAY: Duration = Duration::from_secs(2);

/// The control plane's kubeconfig with its server moved to `port` on loopback (the API server's
/// certificate names 127.0.0.1, so TLS passes through the proxy untouched).
fn kubeconfig_via(port: u16, dir: &std::path::Path) -> std::path::PathBuf {
    let mut kubeconfig = Kubeconfig::read_from(control_plane::kubeconfig_path()).unwrap();
    for cluster in &mut kubeconfig.clusters {
        if let Some(cluster) = cluster.cluster.as_mut() {
            cluster.server = Some(format!("https://127.0.0.1:{port}"));
        }
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).unwrap()).unwrap();
    path
}

fn apiserver_port() -> u16 {
    let kubeconfig = Kubeconfig::read_from(control_plane::kubeconfig_path()).unwrap();
    let server = kubeconfig.clusters[0].cluster.as_ref().unwrap().server.clone().unwrap();
    server.rsplit(':').next().unwrap().trim_end_matches('/').parse().unwrap()
}

// Multi-threaded: `Sidecar::start` blocks its thread while the proxy's tasks must keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k8s_readyz_should_answer_503_until_every_informer_has_synced_behind_a_slow_api_server() {
    let client = control_plane::client().await;
    let namespace = TestNamespace::create(&client, "readyz").await;
    let proxy = Proxy::start_delayed(apiserver_port(), CONNECT_DELAY).await;
    let dir = std::env::temp_dir().join(control_plane::unique_name("wqs-readyz"));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = kubeconfig_via(proxy.port, &dir);
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "informers:\n  cms:\n    version: v1\n    kind: ConfigMap\n    namespace: {ns}\n  \
             secrets:\n    version: v1\n    kind: ServiceAccount\n    namespace: {ns}\n    metadata_only: true\n\
             queues:\n  cms:\n    primary: cms\n",
            ns = namespace.name()
        ),
    )
    .unwrap();
    let sidecar = Sidecar::start(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);

    // Poll from the moment the admin port serves. Every 200 must come after both informers'
    // first list completed (their lists counter is raised before their synced flag).
    let (mut not_ready, mut ready) = (0, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        let (status, body) = sidecar.admin_get("/readyz").await;
        if status == 200 {
            for informer in ["cms", "secrets"] {
                let lists =
                    sidecar.metric(&format!("workqueue_sidecar_informer_lists_total{{informer=\"{informer}\"}}")).await;
                assert!(
                    lists.unwrap_or(0.0) >= 1.0,
                    "/readyz answered 200 before informer {informer} finished its first list ({lists:?}), \
                     after {not_ready} answers of 503; logs:\n{}",
                    sidecar.logs()
                );
            }
            ready = true;
            break;
        }
        assert_eq!(status, 503, "/readyz: {body}");
        assert!(body.contains("informer"), "503 names what it waits for: {body}");
        not_ready += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "/readyz never answered 200 within 60 s; logs:\n{}", sidecar.logs());
    assert!(not_ready > 0, "the test saw no 503 before the sync: the proxy's delay did not slow the informers");
    drop(sidecar);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    namespace.delete().await;
}
