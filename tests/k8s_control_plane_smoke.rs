//! Smoke test of the local control plane (`hack/control-plane`): the User CRD
//! of `deploy/crds/user.yaml` installs and is enforced by a real
//! kube-apiserver, and kube-rs can create, get, list, watch and delete Users.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

use std::pin::pin;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};
use support::control_plane::{self, TestNamespace, apply_crd, unique_name};
use tokio_stream::StreamExt;

/// The manifest the demo and the deploy base use, applied as written.
const USER_CRD: &str = include_str!("../deploy/crds/user.yaml");
const USER_CRD_NAME: &str = "users.example.com";

/// How long any single step may take before the test fails instead of hanging.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(group = "example.com", version = "v1", kind = "User", plural = "users", shortname = "usr", schema = "disabled")]
pub struct UserSpec {
    pub display_name: String,
}

fn user(name: &str, display_name: &str, run: &str) -> User {
    let mut u = User::new(name, UserSpec { display_name: display_name.to_string() });
    u.labels_mut().insert("workqueue-sidecar/test".into(), run.into());
    u
}

async fn step<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP_TIMEOUT, fut).await.unwrap_or_else(|_| panic!("{what}: no result after {STEP_TIMEOUT:?}"))
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_user_crd_installs_and_users_round_trip() {
    let client = control_plane::client().await;
    let crd = apply_crd(&client, USER_CRD_NAME, USER_CRD).await;
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["usr".to_string()][..]));

    let users: Api<User> = Api::all(client.clone());
    // Users are cluster-scoped and other tests may create some: this run
    // only looks at the ones labelled with its own id.
    let run = unique_name("smoke");
    let selector = format!("workqueue-sidecar/test={run}");
    let (alice, bob) = (format!("alice-{run}"), format!("bob-{run}"));

    // The structural schema is enforced: a User without display_name is
    // refused. (`spec: {}` does not fit UserSpec, so it goes untyped.)
    let untyped: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::erase::<User>(&()));
    let bad: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "example.com/v1", "kind": "User",
        "metadata": { "name": format!("invalid-{run}") }, "spec": {}
    }))
    .unwrap();
    match step("create invalid user", untyped.create(&PostParams::default(), &bad)).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 422, "unexpected refusal: {s:?}"),
        other => panic!("a User without spec.display_name must be refused with 422, got {other:?}"),
    }

    // Create and read back.
    let created = step("create alice", users.create(&PostParams::default(), &user(&alice, "Alice", &run)))
        .await
        .expect("create alice");
    assert_eq!(created.spec.display_name, "Alice");
    assert!(created.resource_version().is_some());
    let got = step("get alice", users.get(&alice)).await.expect("get alice");
    assert_eq!(got.spec, created.spec);
    assert_eq!(got.uid(), created.uid());

    // List by label.
    let listed = step("list users", users.list(&ListParams::default().labels(&selector))).await.expect("list users");
    assert_eq!(listed.items.iter().map(|u| u.name_any()).collect::<Vec<_>>(), vec![alice.clone()]);

    // Watch: the initial list has alice; then the create of bob and the
    // deletes arrive as events.
    let mut events = pin!(watcher::watcher(users.clone(), watcher::Config::default().labels(&selector)));
    let mut initial = Vec::new();
    loop {
        match step("watch initial list", events.next()).await {
            Some(Ok(Event::Init)) => {}
            Some(Ok(Event::InitApply(u))) => initial.push(u.name_any()),
            Some(Ok(Event::InitDone)) => break,
            other => panic!("unexpected event during the initial list: {other:?}"),
        }
    }
    assert_eq!(initial, vec![alice.clone()]);

    step("create bob", users.create(&PostParams::default(), &user(&bob, "Bob", &run))).await.expect("create bob");
    match step("watch bob's create", events.next()).await {
        Some(Ok(Event::Apply(u))) => {
            assert_eq!(u.name_any(), bob);
            assert_eq!(u.spec.display_name, "Bob");
        }
        other => panic!("expected bob's create, got {other:?}"),
    }

    // Delete both and see the deletes.
    for name in [&alice, &bob] {
        step("delete user", users.delete(name, &DeleteParams::default()))
            .await
            .unwrap_or_else(|e| panic!("delete {name}: {e}"));
    }
    let mut deleted = Vec::new();
    while deleted.len() < 2 {
        match step("watch deletes", events.next()).await {
            Some(Ok(Event::Delete(u))) => deleted.push(u.name_any()),
            Some(Ok(Event::Apply(_))) => {} // e.g. an update on the way out
            other => panic!("expected deletes, got {other:?}"),
        }
    }
    deleted.sort();
    assert_eq!(deleted, vec![alice, bob]);
    let left =
        step("list after delete", users.list(&ListParams::default().labels(&selector))).await.expect("list users");
    assert!(left.items.is_empty(), "users left: {:?}", left.items);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_each_test_gets_a_fresh_namespace() {
    let client = control_plane::client().await;
    let a = TestNamespace::create(&client, "smoke-ns").await;
    let b = TestNamespace::create(&client, "smoke-ns").await;
    assert_ne!(a.name(), b.name());

    let config_maps: Api<ConfigMap> = a.api();
    assert!(
        step("list empty namespace", config_maps.list(&ListParams::default()))
            .await
            .expect("list config maps")
            .items
            .is_empty()
    );
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "probe" }, "data": { "k": "v" }
    }))
    .unwrap();
    step("create config map", config_maps.create(&PostParams::default(), &cm)).await.expect("create config map");
    let in_b: Api<ConfigMap> = b.api();
    assert!(matches!(step("get from the other namespace", in_b.get_opt("probe")).await, Ok(None)));

    a.delete().await; // explicit
    drop(b); // best effort, on drop
}
