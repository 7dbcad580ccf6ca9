//! The informers' health as probes and metrics tell it, from the built binary against the real
//! control plane reached through a test proxy:
//! - a slow API server (every new connection delayed 2 s): `/readyz` answers 503 until every
//!   informer has synced, from the moment the admin port serves;
//! - a 30 s outage (the proxy cut): `workqueue_sidecar_informer_stale_seconds` shows it while it
//!   lasts; the informer's retries, seen at the proxy, are never more than 5 s apart (plus slack),
//!   so it is back within seconds of the server (kube-runtime's default backoff, 12.8 s then 25.6 s
//!   apart by then, fails this); a change made after the outage reaches the queue within 15 s, and
//!   the metric is 0 again.

#[path = "support/sidecar.rs"]
mod binary;
mod support;

use std::time::{Duration, Instant};

use binary::Sidecar;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::config::Kubeconfig;
use support::control_plane::{self, TestNamespace};
use support::proxy::{Proxy, apiserver_port, kubeconfig_via};
use workqueue_sidecar::grpc::pb;
use workqueue_sidecar::grpc::pb::cache_service_client::CacheServiceClient;

/// The slow network: every new connection to the API server waits this long.
const CONNECT_DELAY: Duration = Duration::from_secs(2);

/// A scratch directory `prefix-…` holding `config.yaml` with `yaml`: the directory and the file.
fn scratch_config(prefix: &str, yaml: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(control_plane::unique_name(prefix));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, yaml).unwrap();
    (dir, config)
}

/// A config whose one informer, `cms`, lists the ConfigMaps of `namespace` into the queue `cms`.
fn configmaps_of(namespace: &str) -> String {
    format!(
        "informers:\n  cms:\n    version: v1\n    kind: ConfigMap\n    namespace: {namespace}\nqueues:\n  cms:\n    primary: cms\n"
    )
}

// Multi-threaded: `Sidecar::start` blocks its thread while the proxy's tasks must keep running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_readyz_should_answer_503_until_every_informer_has_synced_behind_a_slow_api_server() {
    let client = control_plane::client().await;
    let namespace = TestNamespace::create(&client, "readyz").await;
    let proxy = Proxy::start_delayed(apiserver_port(), CONNECT_DELAY).await;
    let yaml = format!(
        "informers:\n  cms:\n    version: v1\n    kind: ConfigMap\n    namespace: {ns}\n  \
         secrets:\n    version: v1\n    kind: ServiceAccount\n    namespace: {ns}\n    metadata_only: true\n\
         queues:\n  cms:\n    primary: cms\n",
        ns = namespace.name()
    );
    let (dir, config) = scratch_config("wqs-readyz", &yaml);
    let kubeconfig = kubeconfig_via(proxy.port, &dir);
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

/// A cache read the sidecar refuses (here a malformed label selector) is refused at once, not
/// after waiting up to its `wait` for the informer's first list: the request is checked before
/// the wait. The refusal must come while `/readyz` still says the informer has not synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_cache_read_the_sidecar_refuses_should_be_refused_before_the_informer_syncs() {
    let client = control_plane::client().await;
    let namespace = TestNamespace::create(&client, "refuse-early").await;
    let proxy = Proxy::start_delayed(apiserver_port(), CONNECT_DELAY).await;
    let (dir, config) = scratch_config("wqs-refuse-early", &configmaps_of(namespace.name()));
    let kubeconfig = kubeconfig_via(proxy.port, &dir);
    let sidecar = Sidecar::start(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);
    let (status, _) = sidecar.admin_get("/readyz").await;
    assert_eq!(status, 503, "the informer has not synced yet (the proxy delays each connection 2 s)");

    let mut cache = CacheServiceClient::connect(sidecar.endpoint()).await.unwrap();
    let request = pb::ListObjectsRequest {
        informer: "cms".into(),
        label_selector: "a>b".into(),
        wait: Some(prost_types::Duration { seconds: 30, nanos: 0 }),
        ..Default::default()
    };
    let refused = cache.list_objects(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
    let (status, body) = sidecar.admin_get("/readyz").await;
    assert_eq!(status, 503, "refused before the informer synced, not after: {body}");
    drop(sidecar);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    namespace.delete().await;
}

/// The informer's staleness gauge, as scraped.
async fn stale_seconds(sidecar: &Sidecar) -> f64 {
    sidecar.metric(r#"workqueue_sidecar_informer_stale_seconds{informer="cms"}"#).await.expect("the gauge is exposed")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_after_a_30s_outage_the_informer_should_be_back_within_seconds_and_staleness_shown_meanwhile() {
    const OUTAGE: Duration = Duration::from_secs(30);
    /// The target is 10 s; the slack is for a loaded machine.
    const RECOVERY: Duration = Duration::from_secs(15);
    let client = control_plane::client().await;
    let namespace = TestNamespace::create(&client, "outage").await;
    let proxy = Proxy::start(apiserver_port()).await;
    let (dir, config) = scratch_config("wqs-outage", &configmaps_of(namespace.name()));
    let kubeconfig = kubeconfig_via(proxy.port, &dir);
    let sidecar = Sidecar::start(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while sidecar.admin_get("/readyz").await.0 != 200 {
        assert!(Instant::now() < deadline, "not ready within 60 s; logs:\n{}", sidecar.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stale_seconds(&sidecar).await, 0.0, "current after the sync");

    // The outage: every connection closed, new ones refused, for 20 s.
    proxy.cut().await;
    let cut_at = Instant::now();
    let mut stale_seen = 0.0_f64;
    while cut_at.elapsed() < OUTAGE {
        stale_seen = stale_seen.max(stale_seconds(&sidecar).await);
        assert_eq!(
            sidecar.admin_get("/readyz").await.0,
            200,
            "ready stays 200 once synced (docs/operations.md: readiness)"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(stale_seen >= 20.0, "the gauge showed the outage: at most {stale_seen} s in a 30 s outage");
    let retries = proxy.refused_at();
    let longest_gap = retries.windows(2).map(|pair| pair[1] - pair[0]).max().unwrap_or(OUTAGE);
    assert!(
        retries.len() >= 4 && longest_gap <= Duration::from_secs(7),
        "retries during the outage at most 5 s apart (+2 s slack): {} retries, longest gap {longest_gap:?}",
        retries.len()
    );

    // The server is back. First, with nothing changed: the re-established watch alone makes the
    // informer current again (the list and watch marks it so when its request is answered; without
    // that the gauge would grow until the next change). Then a change made now must reach the queue.
    proxy.restore();
    let restored_at = Instant::now();
    let current_after = loop {
        if stale_seconds(&sidecar).await == 0.0 {
            break restored_at.elapsed();
        }
        assert!(
            restored_at.elapsed() < RECOVERY,
            "still stale {RECOVERY:?} after the server's return, with no change made; logs:\n{}",
            sidecar.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The outage's warnings end with a line saying it is over (the log reader may lag a little).
    let said_over = |logs: &str| logs.matches("list and watch answered again").count();
    let deadline = Instant::now() + Duration::from_secs(5);
    while said_over(&sidecar.logs()) == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let logs = sidecar.logs();
    assert_eq!(said_over(&logs), 1, "the outage's end said once; logs:\n{logs}");
    let name = control_plane::unique_name("after");
    let object: ConfigMap = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
    namespace.api::<ConfigMap>().create(&PostParams::default(), &object).await.unwrap();
    let key = format!("{}/{name}", namespace.name());
    let mut grpc = sidecar.client().await;
    let queued_after = loop {
        let state = grpc
            .key_state(pb::KeyStateRequest { queue: "cms".into(), key: key.clone() })
            .await
            .unwrap()
            .into_inner()
            .state;
        if state != pb::KeyState::Absent as i32 {
            break restored_at.elapsed();
        }
        assert!(
            restored_at.elapsed() < RECOVERY,
            "a change made after the outage was not queued within {RECOVERY:?}; logs:\n{}",
            sidecar.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "outage {OUTAGE:?}: {} retries, longest gap {longest_gap:?}; stale gauge reached {stale_seen:.1} s; after \
         the server returned, the gauge was 0 in {current_after:?}, and a change made then was queued {queued_after:?} after the return",
        retries.len()
    );
    drop(sidecar);
    drop(proxy);
    let _ = std::fs::remove_dir_all(&dir);
    namespace.delete().await;
}

/// A sidecar started before its API server answers (a node booting, the API server restarting)
/// waits for it before binding a port, saying so, and then starts and syncs as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_sidecar_started_before_its_api_server_answers_should_wait_for_it_then_sync() {
    let client = control_plane::client().await;
    let namespace = TestNamespace::create(&client, "late-apiserver").await;
    let proxy = std::sync::Arc::new(Proxy::start(apiserver_port()).await);
    proxy.cut().await;
    let (dir, config) = scratch_config("wqs-late-apiserver", &configmaps_of(namespace.name()));
    let kubeconfig = kubeconfig_via(proxy.port, &dir);
    // The API server answers from 3 s after the start; `Sidecar::start` waits until it listens.
    let opener = proxy.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(3)).await;
        opener.restore();
    });
    let sidecar = Sidecar::start(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);
    let logs = sidecar.logs();
    assert!(!proxy.refused_at().is_empty(), "the sidecar tried while the API server did not answer");
    assert!(logs.contains("waiting for the API server"), "the wait was said; logs:\n{logs}");
    let deadline = Instant::now() + Duration::from_secs(60);
    while sidecar.admin_get("/readyz").await.0 != 200 {
        assert!(Instant::now() < deadline, "not ready within 60 s; logs:\n{}", sidecar.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(sidecar);
    let _ = std::fs::remove_dir_all(&dir);
    namespace.delete().await;
}

/// What the API server refuses for good (a field selector on a field it cannot select by) stops
/// the start with the config's status, naming the informer and saying what the server said,
/// instead of an informer that retries forever while `/readyz` stays 503.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_selector_the_api_server_refuses_should_stop_the_start_with_status_2() {
    let (dir, config) = scratch_config(
        "wqs-refused-list",
        "informers:\n  cms:\n    version: v1\n    kind: ConfigMap\n    field_selector: spec.replicas=1\n\
         queues:\n  cms:\n    primary: cms\n",
    );
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(["--config", config.to_str().unwrap()])
        .args(["--kubeconfig", control_plane::kubeconfig_path().to_str().unwrap()])
        .args(["--tcp", "127.0.0.1:0", "--admin", "off"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("informer \"cms\": the API server refuses its list") && stderr.contains("spec.replicas"),
        "names the informer and the field the server refused: {stderr}"
    );
    assert!(!stderr.contains("listening"), "no port was bound: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Credentials the API server refuses (a wrong token) or a server certificate that does not
/// verify (a CA of another cluster) are the kubeconfig's fault: the start stops with status 2,
/// saying so once, instead of waiting as for an API server that does not answer.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_credentials_or_a_ca_the_api_server_does_not_match_should_stop_the_start_with_status_2() {
    let (dir, config) = scratch_config("wqs-bad-credentials", &configmaps_of("default"));
    let real = Kubeconfig::read_from(control_plane::kubeconfig_path()).unwrap();
    let mut wrong_token = real.clone();
    for user in &mut wrong_token.auth_infos {
        let auth = user.auth_info.as_mut().unwrap();
        auth.token = Some("not-a-token".to_string().into());
        (auth.client_certificate_data, auth.client_key_data) = (None, None);
        (auth.client_certificate, auth.client_key) = (None, None);
    }
    let mut other_ca = real.clone();
    for cluster in &mut other_ca.clusters {
        let cluster = cluster.cluster.as_mut().unwrap();
        // The API server's certificate is not signed by itself: as a CA it verifies nothing.
        let served = cluster.certificate_authority_data.clone();
        cluster.certificate_authority_data = served.map(|_| other_ca_pem(&dir));
        cluster.certificate_authority = None;
    }
    for (case, kubeconfig, said) in
        [("wrong token", wrong_token, "Unauthorized (401)"), ("other CA", other_ca, "invalid peer certificate")]
    {
        let path = dir.join("kubeconfig");
        std::fs::write(&path, serde_yaml_ng::to_string(&kubeconfig).unwrap()).unwrap();
        // Under `timeout`: a sidecar that waits instead fails the test rather than hanging it.
        let output = std::process::Command::new("timeout")
            .args(["20", env!("CARGO_BIN_EXE_workqueue-sidecar")])
            .args(["--config", config.to_str().unwrap(), "--kubeconfig", path.to_str().unwrap()])
            .args(["--tcp", "127.0.0.1:0", "--admin", "off"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{case}: {stderr}");
        assert!(stderr.contains(said) && !stderr.contains("waiting for the API server"), "{case}: {stderr}");
        assert_eq!(stderr.matches(said).count(), 1, "{case}: said once: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CA certificate of no cluster, base64 as a kubeconfig holds it (made with openssl).
fn other_ca_pem(dir: &std::path::Path) -> String {
    use base64::Engine;
    let (key, cert) = (dir.join("other-ca.key"), dir.join("other-ca.pem"));
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=other", "-keyout", key.to_str().unwrap(), "-out", cert.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(made.status.success(), "openssl: {}", String::from_utf8_lossy(&made.stderr));
    base64::engine::general_purpose::STANDARD.encode(std::fs::read(&cert).unwrap())
}
