//! The local control plane (`hack/control-plane`) as seen from a test: a
//! `kube::Client` built from `$WQS_KUBECONFIG`, a fresh namespace per test,
//! and a way to install a CRD from its YAML manifest.
//!
//! Start it once, then run the Kubernetes tests:
//!
//! ```text
//! hack/control-plane up && eval "$(hack/control-plane env)"
//! cargo test --test 'k8s_*' -- --ignored
//! ```
//!
//! The tests are `#[ignore]`d, so a plain `cargo test` passes on a machine
//! without a control plane (as kube-rs does); `hack/test` runs them with
//! `--ignored`. Run that way, a missing `WQS_KUBECONFIG` fails the test (it
//! never skips silently), so a CI run without a control plane is red.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client, Config};

/// Env var naming the kubeconfig of the running control plane.
pub const KUBECONFIG_ENV: &str = "WQS_KUBECONFIG";

/// Set to `1` to keep test namespaces after the test, for debugging.
pub const KEEP_NAMESPACES_ENV: &str = "WQS_KEEP_NAMESPACES";

/// Field manager used for everything tests apply.
pub const FIELD_MANAGER: &str = "wqs-tests";

/// How long a CRD may take to become Established. It usually takes well
/// under a second; the margin is for a loaded CI machine.
pub const CRD_ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(30);

/// Path of the control plane's kubeconfig, from `$WQS_KUBECONFIG`.
///
/// Panics (fails the test) when it is unset: with a CI-specific message when
/// `CI=true`, otherwise with the commands that start the control plane.
pub fn kubeconfig_path() -> PathBuf {
    match std::env::var_os(KUBECONFIG_ENV) {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => panic!(
            "{KUBECONFIG_ENV} is not set in CI: the CI script must run \
             `hack/control-plane up` and `eval \"$(hack/control-plane env)\"` \
             before the Kubernetes tests"
        ),
        _ => panic!(
            "{KUBECONFIG_ENV} is not set: this test needs the local control plane. Run\n    \
             hack/control-plane up && eval \"$(hack/control-plane env)\"\n\
             then run the test again (first `up` builds kube-apiserver and etcd; that takes minutes)"
        ),
    }
}

/// A client for the running control plane. Fails the test with a hint when
/// the kubeconfig is missing or the API server does not answer.
pub async fn client() -> Client {
    let path = kubeconfig_path();
    let client = client_from(&path).await.unwrap_or_else(|e| panic!("{e}"));
    if let Err(e) = client.apiserver_version().await {
        panic!(
            "the control plane in {} does not answer ({e}); \
             check `hack/control-plane status`, or restart it with \
             `hack/control-plane down && hack/control-plane up`",
            path.display()
        );
    }
    client
}

/// A client for the running control plane acting as `user` (impersonated by
/// the admin credentials), for what a user without permissions is told.
pub async fn client_as(user: &str) -> Client {
    let path = kubeconfig_path();
    let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap_or_else(|e| panic!("invalid kubeconfig {}: {e}", path.display()));
    config.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(config).unwrap_or_else(|e| panic!("a client as {user}: {e}"))
}

/// A client from the kubeconfig at `path` (one written by a test, say).
pub async fn client_from(path: &std::path::Path) -> Result<Client, String> {
    let kubeconfig = Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read kubeconfig {} ({KUBECONFIG_ENV}): {e}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("invalid kubeconfig {}: {e}", path.display()))?;
    Client::try_from(config).map_err(|e| format!("cannot build a client from {}: {e}", path.display()))
}

/// A DNS-1123 label `<prefix>-<suffix>` unique across tests, test binaries
/// and runs: the suffix mixes the wall clock, the process id and a counter.
pub fn unique_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // splitmix64 finaliser: spreads nearby inputs over the whole range.
    let mut x = nanos ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    let prefix: String =
        prefix.to_ascii_lowercase().chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).take(40).collect();
    let prefix = prefix.trim_matches('-');
    let prefix = if prefix.is_empty() { "t" } else { prefix };
    format!("{prefix}-{:013x}", x >> 12)
}

/// A namespace that belongs to one test, created fresh and deleted when
/// dropped (best effort) or by [`TestNamespace::delete`].
///
/// The control plane runs no kube-controller-manager, so a deleted namespace
/// stays `Terminating` with its contents; names never repeat, so that does
/// not disturb later tests.
pub struct TestNamespace {
    client: Client,
    name: String,
    deleted: bool,
}

impl TestNamespace {
    /// Creates a namespace named `<prefix>-<random>` labelled
    /// `workqueue-sidecar/test=<prefix>`.
    pub async fn create(client: &Client, prefix: &str) -> TestNamespace {
        let name = unique_name(prefix);
        let label = name.rsplit_once('-').map_or(name.as_str(), |(p, _)| p);
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": { "workqueue-sidecar/test": label },
            },
        }))
        .expect("namespace manifest");
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating test namespace {name}: {e}"));
        TestNamespace { client: client.clone(), name, deleted: false }
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The client the namespace was created with.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// An `Api` for a namespaced resource in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    /// Deletes the namespace now and waits for the API server to accept it.
    pub async fn delete(mut self) {
        self.deleted = true;
        if keep_namespaces() {
            return;
        }
        match Api::<Namespace>::all(self.client.clone()).delete(&self.name, &DeleteParams::background()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => panic!("deleting test namespace {}: {e}", self.name),
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if self.deleted || keep_namespaces() {
            return;
        }
        // Drop cannot await, and the test's runtime may be the one running
        // this drop (a client bound to it would deadlock here). Delete from a
        // short-lived thread with its own runtime and client; give up after a
        // few seconds: the name is unique, a leftover namespace harms nothing.
        let name = std::mem::take(&mut self.name);
        let Some(path) = std::env::var_os(KUBECONFIG_ENV) else {
            return;
        };
        let worker = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let Ok(client) = client_from(std::path::Path::new(&path)).await else {
                    return;
                };
                let _ = tokio::time::timeout(
                    Duration::from_secs(5),
                    Api::<Namespace>::all(client).delete(&name, &DeleteParams::background()),
                )
                .await;
            });
        });
        let _ = worker.join();
    }
}

fn keep_namespaces() -> bool {
    std::env::var(KEEP_NAMESPACES_ENV).is_ok_and(|v| v == "1" || v == "true")
}

/// Installs (server-side applies) a CRD from its YAML manifest, exactly as
/// written, and waits until it is Established. Idempotent, and safe when
/// several tests apply the same CRD at once.
///
/// `name` must be the manifest's `metadata.name` (the API server rejects a
/// mismatch).
pub async fn apply_crd(client: &Client, name: &str, manifest_yaml: &str) -> CustomResourceDefinition {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    // Server-side apply takes YAML (`application/apply-patch+yaml`), so the
    // manifest goes to the API server untouched: no YAML parser needed here.
    let mut request = kube::core::Request::new("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")
        .patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(()))
        .expect("building the apply request");
    *request.body_mut() = manifest_yaml.as_bytes().to_vec();
    client.request::<CustomResourceDefinition>(request).await.unwrap_or_else(|e| panic!("applying CRD {name}: {e}"));
    match tokio::time::timeout(CRD_ESTABLISHED_TIMEOUT, await_condition(crds, name, conditions::is_crd_established()))
        .await
    {
        Ok(Ok(Some(crd))) => crd,
        Ok(Ok(None)) => panic!("CRD {name} disappeared while waiting for it to be Established"),
        Ok(Err(e)) => panic!("waiting for CRD {name} to be Established: {e}"),
        Err(_) => panic!("CRD {name} not Established after {CRD_ESTABLISHED_TIMEOUT:?}"),
    }
}
