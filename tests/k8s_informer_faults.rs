//! Informers through faults, on control planes of their own: after an API server restart and after an
//! etcd compaction (a resumed watch gets 410 Gone), the cache equals the server's state and every
//! object changed while the informer was cut off is enqueued after its last change.
//!
//! Each test starts its own control plane with `hack/control-plane up` in a state dir of its own
//! (`$WQS_CACHE_DIR/control-plane-faults-*`) and stops it with `down` when it ends, even on failure.
//! It never touches the shared control plane of `$WQS_KUBECONFIG`: restarting that one would break
//! the tests running against it.
//!
//! The informer reaches the API server through a TCP proxy in the test. Cutting the proxy is the
//! informer's outage: the changes made meanwhile (through a direct client) can only reach it
//! through the recovery under test, never through a watch that happened to be reconnected already.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use support::informers::{Sidecar, wait_until};
use support::proxy::Proxy;
use tokio::time::Instant;
use workqueue_sidecar::informer::{ListQuery, SharedInformer};
use workqueue_sidecar::queue::{FinishOutcome, KeyPhase, ReasonKind};
use workqueue_sidecar::queue_registry::Queue;

/// How long the informer may take to catch up once it can reach the server again. Its watcher
/// backs off up to 30 s between attempts; the outage lasts a few seconds.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(90);

// ---- a control plane of the test's own ---------------------------------------------------------

/// `hack/control-plane` on a state dir of its own; `down` on drop.
struct Plane {
    state_dir: PathBuf,
    apiserver_args: &'static str,
}

/// One `up` at a time in this process: two `up`s at once could pick the same free port.
static UP_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Plane {
    /// Starts a fresh control plane in `$WQS_CACHE_DIR/control-plane-faults-<name>` (any leftover
    /// of an earlier run there is stopped first), with `apiserver_args` as extra flags.
    fn up(name: &str, apiserver_args: &'static str) -> Plane {
        let cache = std::env::var_os("WQS_CACHE_DIR")
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/workqueue-sidecar"));
        let state_dir = cache.join(format!("control-plane-faults-{name}"));
        std::fs::create_dir_all(&state_dir).unwrap();
        let plane = Plane { state_dir, apiserver_args };
        let _one_at_a_time = UP_LOCK.lock().unwrap_or_else(|e| e.into_inner());
        plane.run("down");
        // A port the script found free can be taken before etcd binds it (another control
        // plane starting on this machine): `up` fails and stops what it started; try again.
        for attempt in 1.. {
            match plane.try_run("up") {
                Ok(_) => break,
                Err(e) if attempt < 3 => eprintln!("{e}\nretrying `up`"),
                Err(e) => panic!("{e}"),
            }
        }
        plane
    }

    /// Runs `hack/control-plane <command>` on this plane; panics with its output on failure.
    fn run(&self, command: &str) -> String {
        self.try_run(command).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `hack/control-plane <command>` on this plane: its stdout, or its output on failure.
    fn try_run(&self, command: &str) -> Result<String, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/control-plane");
        let output = Command::new(script)
            .arg(command)
            .env("WQS_STATE_DIR", &self.state_dir)
            .env("WQS_APISERVER_ARGS", self.apiserver_args)
            .output()
            .map_err(|e| format!("running hack/control-plane {command}: {e}"))?;
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        if !output.status.success() {
            return Err(format!("hack/control-plane {command} failed ({}):\n{text}", output.status));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs a command from async code without blocking the runtime; returns stdout and how long it took.
    async fn run_async(self: &Arc<Self>, command: &'static str) -> (String, Duration) {
        let plane = self.clone();
        let started = Instant::now();
        let out = tokio::task::spawn_blocking(move || plane.run(command)).await.unwrap();
        (out, started.elapsed())
    }

    async fn config(&self) -> kube::Config {
        let path = self.state_dir.join("kubeconfig");
        let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap()
    }

    /// A client straight to the API server.
    async fn client(&self) -> Client {
        Client::try_from(self.config().await).unwrap()
    }

    /// The API server's port.
    async fn apiserver_port(&self) -> u16 {
        self.config().await.cluster_url.port_u16().expect("the kubeconfig names a port")
    }

    /// A client that goes through `proxy` (TLS passes through it untouched).
    async fn client_via(&self, proxy: &Proxy) -> Client {
        let mut config = self.config().await;
        config.cluster_url = format!("https://127.0.0.1:{}", proxy.port).parse().unwrap();
        Client::try_from(config).unwrap()
    }
}

impl Drop for Plane {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("hack/control-plane");
        let _ = Command::new(script)
            .arg("down")
            .env("WQS_STATE_DIR", &self.state_dir)
            .stdout(std::process::Stdio::null())
            .status();
    }
}

// ---- the scenario --------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// `restart-apiserver` while the informer is cut off; the API server keeps its watch cache
    /// (the default), which it rebuilds from a fresh list, so a resumed watch gets 410 Gone.
    ApiServerRestart,
    /// Changes, then `compact-etcd`, while the informer is cut off; the API server runs with
    /// `--watch-cache=false`, so the resumed watch reaches etcd and gets 410 Gone.
    EtcdCompaction,
}

/// What the test expects of a key once the informer has recovered.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Not changed: must not be handed out again.
    Unchanged,
    /// Changed: must be handed out with one of these reasons.
    Changed(&'static [ReasonKind]),
    /// Deleted: handed out with `Deleted`, gone from the cache, kept as a tombstone.
    Deleted,
    /// Created and deleted while the informer was cut off: never seen, so it need not be
    /// handed out, but it must not be in the cache.
    NeverSeen,
}

const ADDED: &[ReasonKind] = &[ReasonKind::Added];
const UPDATED: &[ReasonKind] = &[ReasonKind::Updated];
/// Deleted and created again under the same name: a relist sees a new resourceVersion (Updated),
/// a watch sees Deleted then Added.
const RECREATED: &[ReasonKind] = &[ReasonKind::Updated, ReasonKind::Added];

fn config_map(name: &str, value: &str) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "k": value } })).unwrap()
}

struct Changes {
    api: Api<ConfigMap>,
    expect: BTreeMap<String, Expect>,
    /// When the API server accepted each key's last change.
    last_change: BTreeMap<String, Instant>,
    /// Keys changed only while the informer was cut off.
    while_cut: BTreeSet<String>,
    /// Keys changed while the informer was connected, after its first list.
    while_connected: BTreeSet<String>,
    /// The informer has listed; changes from now on are tracked.
    listed: bool,
    cut: bool,
}

impl Changes {
    fn note(&mut self, name: &str, expect: Expect) {
        self.expect.insert(name.to_owned(), expect);
        self.last_change.insert(name.to_owned(), Instant::now());
        if !self.listed {
            return;
        }
        if self.cut {
            if !self.while_connected.contains(name) {
                self.while_cut.insert(name.to_owned());
            }
        } else {
            self.while_cut.remove(name);
            self.while_connected.insert(name.to_owned());
        }
    }

    async fn create(&mut self, name: &str, expect: Expect) {
        self.api.create(&PostParams::default(), &config_map(name, "v1")).await.unwrap();
        self.note(name, expect);
    }

    async fn update(&mut self, name: &str, value: &str) {
        let patch = json!({ "data": { "k": value } });
        self.api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.note(name, Expect::Changed(UPDATED));
    }

    async fn delete(&mut self, name: &str, expect: Expect) {
        self.api.delete(name, &DeleteParams::default()).await.unwrap();
        self.note(name, expect);
    }
}

/// The namespace's ConfigMaps by name with their resourceVersions, as the server has them.
async fn server_state(api: &Api<ConfigMap>) -> BTreeMap<String, String> {
    let list = api.list(&ListParams::default()).await.unwrap();
    list.items.iter().map(|cm| (cm.name_any(), cm.resource_version().unwrap_or_default())).collect()
}

/// The same, as the informer's cache has them.
fn cache_state(informer: &SharedInformer, namespace: &str) -> BTreeMap<String, String> {
    let page =
        informer.list(&ListQuery { namespace: Some(namespace), limit: 100_000, ..ListQuery::default() }).unwrap();
    page.objects.iter().map(|o| (o.name().to_string(), o.meta.resource_version.to_string())).collect()
}

/// Polls until the cache equals the server's state; returns how long that took.
async fn wait_cache_equals_server(informer: &SharedInformer, api: &Api<ConfigMap>, namespace: &str) -> Duration {
    let started = Instant::now();
    loop {
        let server = server_state(api).await;
        let cache = cache_state(informer, namespace);
        if cache == server {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < RECOVERY_TIMEOUT,
            "the cache did not come to equal the server within {RECOVERY_TIMEOUT:?}\n server: {server:?}\n  cache: {cache:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn run(fault: Fault) {
    let t0 = Instant::now();
    let (name, apiserver_args) = match fault {
        Fault::ApiServerRestart => ("restart", ""),
        Fault::EtcdCompaction => ("compaction", "--watch-cache=false"),
    };
    let plane = Arc::new(tokio::task::spawn_blocking(move || Plane::up(name, apiserver_args)).await.unwrap());
    let up = t0.elapsed();
    let proxy = Proxy::start(plane.apiserver_port().await).await;
    let direct = plane.client().await;
    let via_proxy = plane.client_via(&proxy).await;

    let ns = format!("faults-{name}");
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": ns } })).unwrap();
    Api::<Namespace>::all(direct.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(direct.clone(), &ns);
    let mut changes = Changes {
        api: api.clone(),
        expect: BTreeMap::new(),
        last_change: BTreeMap::new(),
        while_cut: BTreeSet::new(),
        while_connected: BTreeSet::new(),
        listed: false,
        cut: false,
    };
    for name in ["keep", "a-upd", "a-del", "ab-upd", "b-upd", "b-upd2", "b-del", "b-recreated"] {
        changes.create(name, Expect::Unchanged).await;
    }
    let initial = server_state(&api).await;

    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {ns} }}\nqueues:\n  q: {{ primary: cms }}\n"
    );
    let sidecar = Sidecar::start(&via_proxy, &yaml).await;
    sidecar.synced().await;
    let informer = sidecar.informers.get("cms").unwrap().clone();
    let q = sidecar.queue("q");
    wait_until("initial list queued, queue open", RECOVERY_TIMEOUT, || {
        q.len() == initial.len() && q.term().holds().is_empty()
    })
    .await;
    let initial_leases = take_all(q);
    assert_eq!(initial_leases.len(), initial.len());
    assert_eq!(informer.lists_done(), 1);
    changes.listed = true;

    // Right before the fault, with the informer still connected: these may or may not reach it
    // before the cut.
    changes.create("a-new", Expect::Changed(ADDED)).await;
    changes.update("a-upd", "a").await;
    changes.update("ab-upd", "a").await;
    changes.delete("a-del", Expect::Deleted).await;

    proxy.cut().await;
    changes.cut = true;
    let t_cut = Instant::now();
    let mut fault_took = Duration::ZERO;
    if fault == Fault::ApiServerRestart {
        (_, fault_took) = plane.run_async("restart-apiserver").await;
    }
    // The informer is cut off: it learns of these only through its recovery.
    changes.create("b-new", Expect::Changed(ADDED)).await;
    changes.update("ab-upd", "b").await;
    changes.update("b-upd", "b").await;
    changes.update("b-upd2", "b1").await;
    changes.update("b-upd2", "b2").await;
    changes.delete("b-del", Expect::Deleted).await;
    changes.delete("b-recreated", Expect::Deleted).await;
    changes.create("b-recreated", Expect::Changed(RECREATED)).await;
    changes.create("b-ephemeral", Expect::NeverSeen).await;
    changes.delete("b-ephemeral", Expect::NeverSeen).await;
    let mut compacted_at = String::new();
    if fault == Fault::EtcdCompaction {
        let (out, took) = plane.run_async("compact-etcd").await;
        (compacted_at, fault_took) = (out.trim().to_owned(), took);
    }
    let last_change = Instant::now();
    proxy.restore();
    let t_restore = Instant::now();
    let outage = t_restore - t_cut;

    // The cache comes to equal the server's state.
    let caught_up = wait_cache_equals_server(&informer, &api, &ns).await;

    // Every changed key gets queued; then every lease is granted after the key's last change.
    let must_queue: Vec<&String> = changes
        .expect
        .iter()
        .filter(|(_, e)| matches!(e, Expect::Changed(_) | Expect::Deleted))
        .map(|(k, _)| k)
        .collect();
    let started = Instant::now();
    loop {
        let missing: Vec<&&String> = must_queue
            .iter()
            .filter(|name| !matches!(q.key_status(&*format!("{ns}/{name}")).phase, KeyPhase::Queued { .. }))
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < RECOVERY_TIMEOUT,
            "changed but not queued within {RECOVERY_TIMEOUT:?}: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let leases = take_all(q);
    let mut handed_out = BTreeMap::new();
    for lease in &leases {
        let name = lease.key.split_once('/').unwrap().1.to_owned();
        let last = changes.last_change.get(&name).copied();
        assert!(last.is_some_and(|t| lease.granted_at > t), "{name}: granted before its last change");
        if changes.while_cut.contains(&name) {
            assert!(
                lease.enqueued_at >= t_restore,
                "{name} was changed while cut off but queued before the informer was back"
            );
        }
        let kinds: Vec<ReasonKind> = lease.reasons.iter().map(|r| r.kind).collect();
        handed_out.insert(name, kinds);
    }
    for (name, expect) in &changes.expect {
        let key = format!("{ns}/{name}");
        let got = handed_out.get(name);
        match expect {
            Expect::Unchanged => assert!(got.is_none(), "{name} did not change but was queued with {got:?}"),
            Expect::Changed(kinds) => {
                let got = got.unwrap_or_else(|| panic!("{name} changed but was not queued"));
                assert!(
                    got.iter().any(|k| kinds.contains(k)),
                    "{name}: queued with {got:?}, expected one of {kinds:?}"
                );
                assert!(informer.get(&key).is_some(), "{name} is in the cache");
            }
            Expect::Deleted => {
                let got = got.unwrap_or_else(|| panic!("{name} was deleted but not queued"));
                assert!(got.contains(&ReasonKind::Deleted), "{name}: queued with {got:?}, expected Deleted");
                assert!(informer.get(&key).is_none(), "{name} was deleted but is still in the cache");
                let last = informer.get_deleted(&key).unwrap_or_else(|| panic!("{name}: no tombstone"));
                assert_eq!(last.name(), name.as_str());
            }
            Expect::NeverSeen => assert!(informer.get(&key).is_none(), "{name} was deleted but is in the cache"),
        }
    }
    // The recreated object is the new one, not the old one.
    let recreated = informer.get(&format!("{ns}/b-recreated")).unwrap();
    assert_eq!(&*recreated.meta.uid.as_str(), api.get("b-recreated").await.unwrap().uid().unwrap().as_str());

    let lists = informer.lists_done();
    let b_del = informer.get_deleted(&format!("{ns}/b-del")).unwrap();
    // A relist removes what it no longer finds and keeps the state it had as the tombstone;
    // a watch's delete event would carry the deletion's own resourceVersion.
    let swept = b_del.meta.resource_version.to_string() == initial["b-del"];
    if fault == Fault::EtcdCompaction {
        assert!(lists >= 2, "the compaction must force a relist; lists done: {lists}");
        assert!(
            swept,
            "b-del must have been removed by the relist's sweep: tombstone {:?}",
            b_del.meta.resource_version
        );
    }

    // The watch works again: a new change arrives as a plain event.
    take_all(q);
    changes.cut = false;
    changes.update("keep", "after").await;
    wait_until("keep queued after recovery", RECOVERY_TIMEOUT, || {
        q.key_status(&*format!("{ns}/keep")).reasons.contains_kind(ReasonKind::Updated)
    })
    .await;
    wait_cache_equals_server(&informer, &api, &ns).await;
    assert_eq!(informer.dropped(), 0);

    eprintln!(
        "{fault:?}: control plane up in {up:.1?}; fault took {fault_took:.1?}{}; informer cut off for {outage:.1?}; \
         cache equal to the server {caught_up:.1?} after the proxy was restored ({:.1?} after the last change); \
         lists done {lists}; b-del removed by {}; {} keys handed out after recovery; test took {:.1?}",
        if compacted_at.is_empty() { String::new() } else { format!(" (compacted at revision {compacted_at})") },
        t_restore + caught_up - last_change,
        if swept { "a relist" } else { "a watch event" },
        leases.len(),
        t0.elapsed(),
    );
    drop(sidecar);
    drop(proxy);
}

/// Takes every ready key and finishes it successfully.
fn take_all(queue: &Queue) -> Vec<workqueue_sidecar::queue::Lease<Arc<str>>> {
    let holder: Arc<str> = Arc::from("faults-test");
    let leases = queue.try_get_many(&holder, 100_000, None).unwrap().unwrap_or_default();
    for lease in &leases {
        queue.finish(&*lease.key, lease.token, FinishOutcome::Success).unwrap();
    }
    leases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_after_an_apiserver_restart_the_cache_should_equal_the_server_and_changes_be_enqueued() {
    run(Fault::ApiServerRestart).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_after_an_etcd_compaction_the_informer_should_relist_and_enqueue_what_changed() {
    run(Fault::EtcdCompaction).await;
}
