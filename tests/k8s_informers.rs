//! Informers against the real control plane: events become keys with the right reasons and priorities;
//! owner, label and index triggers; predicates; one watch however many queues; resync; sync gating.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, CustomResource, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;
use support::control_plane::{self, TestNamespace, apply_crd, unique_name};
use support::informers::{Sidecar, configmaps_into_queue_q, drain, keys, queued_with, stays_empty, wait_until};
use workqueue_sidecar::informer::ChangeKind;
use workqueue_sidecar::queue::{FinishOutcome, PRIORITY_FAST, PRIORITY_SLOW, ReasonKind};

const USER_CRD: &str = include_str!("../deploy/crds/user.yaml");

#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(group = "example.com", version = "v1", kind = "User", plural = "users", schema = "disabled")]
pub struct UserSpec {
    pub display_name: String,
}

fn config_map(name: &str, data: serde_json::Value, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name, "labels": labels }, "data": data })).unwrap()
}

fn reason_sources(status: &workqueue_sidecar::queue::KeyStatus) -> Vec<(ReasonKind, String)> {
    status.reasons.iter().map(|r| (r.kind, r.source.to_string())).collect()
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_create_update_delete_should_enqueue_keys_with_reasons_and_priorities() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-events").await;
    let cms: Api<ConfigMap> = ns.api();
    cms.create(&PostParams::default(), &config_map("before", json!({"k": "v"}), json!({}))).await.unwrap();

    let yaml = configmaps_into_queue_q(ns.name());
    let sidecar = Sidecar::start(&client, &yaml).await;
    let q = sidecar.queue("q");
    let before = format!("{}/before", ns.name());
    let status = queued_with(q, &before, ReasonKind::InitialList).await;
    assert_eq!(status.priority, PRIORITY_SLOW, "the initial list goes to the slow lane");
    assert_eq!(reason_sources(&status), vec![(ReasonKind::InitialList, "cms".to_string())]);
    sidecar.synced().await;
    assert_eq!(keys(&drain(q)), vec![before.clone()]);

    cms.create(&PostParams::default(), &config_map("after", json!({"k": "v"}), json!({}))).await.unwrap();
    let after = format!("{}/after", ns.name());
    let status = queued_with(q, &after, ReasonKind::Added).await;
    assert_eq!(status.priority, PRIORITY_FAST, "watch events go to the fast lane");

    let patch = json!({ "data": { "k": "changed" } });
    cms.patch("before", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
    let status = queued_with(q, &before, ReasonKind::Updated).await;
    assert_eq!(status.priority, PRIORITY_FAST);
    drain(q);

    cms.delete("after", &DeleteParams::default()).await.unwrap();
    let status = queued_with(q, &after, ReasonKind::Deleted).await;
    assert_eq!(reason_sources(&status), vec![(ReasonKind::Deleted, "cms".to_string())]);
    let informer = sidecar.informers.get("cms").unwrap();
    assert!(informer.get(&after).is_none(), "a deleted object leaves the cache");
    let last = informer.get_deleted(&after).expect("its last state stays as a tombstone");
    assert_eq!(last.name(), "after");

    // What workqueue_sidecar_informer_events_total and _lists_total report:
    // every change handed to the queue, by type, and one list (no relist).
    let counted: Vec<(ChangeKind, u64)> = ChangeKind::ALL.iter().map(|&kind| (kind, informer.changes(kind))).collect();
    assert_eq!(
        counted,
        vec![(ChangeKind::InitialList, 1), (ChangeKind::Added, 1), (ChangeKind::Updated, 1), (ChangeKind::Deleted, 1)]
    );
    assert_eq!(informer.lists_done(), 1);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_namespace_owned_by_a_user_should_enqueue_the_user() {
    let client = control_plane::client().await;
    apply_crd(&client, "users.example.com", USER_CRD).await;
    let run = unique_name("owner");
    let yaml = format!(
        "informers:
  users: {{ group: example.com, version: v1, kind: User, label_selector: run={run} }}
  namespaces: {{ version: v1, kind: Namespace, label_selector: run={run}, metadata_only: true }}
queues:
  users:
    primary: users
    triggers: [{{ informer: namespaces, by: owner }}]
"
    );
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let q = sidecar.queue("users");

    let users: Api<User> = Api::all(client.clone());
    let mut user = User::new(&format!("alice-{run}"), UserSpec { display_name: "Alice".into() });
    user.labels_mut().insert("run".into(), run.clone());
    let user = users.create(&PostParams::default(), &user).await.unwrap();
    queued_with(q, &user.name_any(), ReasonKind::Added).await;
    drain(q);

    let owner = user.controller_owner_ref(&()).unwrap();
    let mut namespace: Namespace = serde_json::from_value(json!({
        "metadata": { "name": format!("home-{run}"), "labels": { "run": run } }
    }))
    .unwrap();
    namespace.metadata.owner_references = Some(vec![owner]);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &namespace).await.unwrap();

    let status = queued_with(q, &user.name_any(), ReasonKind::Trigger).await;
    assert_eq!(reason_sources(&status), vec![(ReasonKind::Trigger, "namespaces".to_string())]);
    assert_eq!(status.priority, PRIORITY_FAST);
    let leases = drain(q);
    assert_eq!(keys(&leases), vec![user.name_any()], "only the owner is enqueued, not the namespace");

    // The metadata-only informer holds apiVersion, kind and metadata only.
    let cached = sidecar.informers.get("namespaces").unwrap().get(&format!("home-{run}")).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&cached.json).unwrap();
    assert_eq!(json["kind"], "Namespace");
    assert_eq!(json["apiVersion"], "v1");
    assert!(json.get("spec").is_none() && json.get("status").is_none(), "{json}");

    namespaces.delete(&format!("home-{run}"), &DeleteParams::default()).await.unwrap();
    users.delete(&user.name_any(), &DeleteParams::default()).await.unwrap();
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_label_and_index_triggers_should_enqueue_the_primary_they_name() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-triggers").await;
    let yaml = format!(
        "informers:
  apps:
    version: v1
    kind: ConfigMap
    namespace: {ns}
    label_selector: role=app
    indexes: {{ by-secret: {{ field: data.secret }} }}
  secrets: {{ version: v1, kind: Secret, namespace: {ns} }}
queues:
  apps:
    primary: apps
    triggers:
      - {{ informer: secrets, by: label, label: example.com/app }}
      - {{ informer: secrets, by: index, index: by-secret, value: name }}
",
        ns = ns.name()
    );
    let cms: Api<ConfigMap> = ns.api();
    for (name, secret) in [("app1", "s1"), ("app2", "s2")] {
        let cm = config_map(name, json!({ "secret": secret }), json!({ "role": "app" }));
        cms.create(&PostParams::default(), &cm).await.unwrap();
    }
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let q = sidecar.queue("apps");
    assert_eq!(keys(&drain(q)), vec![format!("{}/app1", ns.name()), format!("{}/app2", ns.name())]);

    let secrets: Api<Secret> = ns.api();
    // Index: app1's data.secret names s1.
    let s1: Secret = serde_json::from_value(json!({ "metadata": { "name": "s1" } })).unwrap();
    secrets.create(&PostParams::default(), &s1).await.unwrap();
    let status = queued_with(q, &format!("{}/app1", ns.name()), ReasonKind::Trigger).await;
    assert_eq!(reason_sources(&status), vec![(ReasonKind::Trigger, "secrets".to_string())]);
    assert_eq!(keys(&drain(q)), vec![format!("{}/app1", ns.name())]);

    // Label: the label's value is the primary's name.
    let labelled: Secret =
        serde_json::from_value(json!({ "metadata": { "name": "other", "labels": { "example.com/app": "app2" } } }))
            .unwrap();
    secrets.create(&PostParams::default(), &labelled).await.unwrap();
    queued_with(q, &format!("{}/app2", ns.name()), ReasonKind::Trigger).await;
    assert_eq!(keys(&drain(q)), vec![format!("{}/app2", ns.name())]);

    // A secret nobody names enqueues nothing.
    let unrelated: Secret = serde_json::from_value(json!({ "metadata": { "name": "unrelated" } })).unwrap();
    secrets.create(&PostParams::default(), &unrelated).await.unwrap();
    stays_empty(q, Duration::from_millis(500)).await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_predicates_should_drop_status_only_updates() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-predicates").await;
    let yaml = format!(
        "informers:\n  deploys: {{ group: apps, version: v1, kind: Deployment, namespace: {} }}\n\
         queues:\n  q: {{ primary: deploys, predicates: [generation_changed] }}\n  all: {{ primary: deploys }}\n",
        ns.name()
    );
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let (q, all) = (sidecar.queue("q"), sidecar.queue("all"));
    let deployments: Api<Deployment> = ns.api();
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "example.invalid/web:1" }] }
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    let key = format!("{}/web", ns.name());
    queued_with(q, &key, ReasonKind::Added).await;
    queued_with(all, &key, ReasonKind::Added).await;
    drain(q);
    drain(all);

    // Status only: generation stays; the queue without predicates still sees it.
    let status = json!({ "status": { "observedGeneration": 1, "replicas": 0 } });
    deployments.patch_status("web", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    queued_with(all, &key, ReasonKind::Updated).await;
    stays_empty(q, Duration::from_millis(500)).await;

    // A spec change bumps the generation and passes.
    let spec = json!({ "spec": { "replicas": 2 } });
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(&spec)).await.unwrap();
    queued_with(q, &key, ReasonKind::Updated).await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_three_queues_on_one_informer_should_open_one_watch() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-shared").await;
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {} }}\n\
         queues:\n  a: {{ primary: cms }}\n  b: {{ primary: cms }}\n  c: {{ primary: cms }}\n",
        ns.name()
    );
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    assert_eq!(sidecar.informers.watches_opened(), 1);
    let cms: Api<ConfigMap> = ns.api();
    cms.create(&PostParams::default(), &config_map("shared", json!({}), json!({}))).await.unwrap();
    for name in ["a", "b", "c"] {
        queued_with(sidecar.queue(name), &format!("{}/shared", ns.name()), ReasonKind::Added).await;
    }
    assert_eq!(sidecar.informers.watches_opened(), 1);
}

/// The API server's own count of open watches on a resource nobody else watches.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_the_api_server_should_count_one_watch_for_three_queues() {
    let client = control_plane::client().await;
    let group = format!("{}.example.com", unique_name("wqs-watch"));
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{ name: widgets.{group} }}
spec:
  group: {group}
  scope: Cluster
  names: {{ plural: widgets, singular: widget, kind: Widget, listKind: WidgetList }}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {{ openAPIV3Schema: {{ type: object, x-kubernetes-preserve-unknown-fields: true }} }}
"
    );
    apply_crd(&client, &format!("widgets.{group}"), &crd).await;
    let yaml = format!(
        "informers:\n  widgets: {{ group: {group}, version: v1, kind: Widget }}\n\
         queues:\n  a: {{ primary: widgets }}\n  b: {{ primary: widgets }}\n  c: {{ primary: widgets }}\n"
    );
    let watches = || {
        let client = client.clone();
        let group = group.clone();
        async move {
            let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
            let text = client.request_text(request).await.unwrap();
            text.lines()
                .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
                .filter(|l| l.contains(&format!("group=\"{group}\"")) && l.contains("verb=\"WATCH\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        }
    };
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    // The streaming-list probe's short watch may still be closing.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let mut seen = watches().await;
    while seen != 1.0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        seen = watches().await;
    }
    assert_eq!(seen, 1.0, "open WATCH requests on {group} at the API server");
    drop(sidecar);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_resync_should_enqueue_everything_at_low_priority_and_keep_backoff() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-resync").await;
    let cms: Api<ConfigMap> = ns.api();
    for name in ["r1", "r2", "r3"] {
        cms.create(&PostParams::default(), &config_map(name, json!({}), json!({}))).await.unwrap();
    }
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {}, resync: 3s }}\n\
         queues:\n  q: {{ primary: cms, predicates: [generation_changed] }}\n",
        ns.name()
    );
    let sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let q = sidecar.queue("q");
    wait_until("initial list queued", Duration::from_secs(5), || q.len() == 3).await;
    let holder = std::sync::Arc::from("test");
    let leases = q.try_get_many(&holder, 10, None).unwrap().unwrap();
    let r1 = format!("{}/r1", ns.name());
    for lease in leases {
        let outcome =
            if *lease.key == *r1 { FinishOutcome::Retry { error: "failing".into() } } else { FinishOutcome::Success };
        q.finish(&*lease.key, lease.token, outcome).unwrap();
    }
    assert_eq!(q.num_requeues(r1.as_str()), 1);
    drain(q);

    // Resync bypasses predicates (nothing changed) and takes the slow lane.
    for name in ["r2", "r3"] {
        let status = queued_with(q, &format!("{}/{name}", ns.name()), ReasonKind::Resync).await;
        assert_eq!(status.priority, PRIORITY_SLOW);
        assert_eq!(reason_sources(&status), vec![(ReasonKind::Resync, "cms".to_string())]);
    }
    let status = queued_with(q, &r1, ReasonKind::Resync).await;
    assert_eq!(status.failures, 1, "a resync does not reset a failing key's backoff");
    assert_eq!(q.num_requeues(r1.as_str()), 1);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_queue_should_hand_out_nothing_until_its_informers_synced() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-gate").await;
    let cms: Api<ConfigMap> = ns.api();
    // Enough objects that the first list takes a few pages.
    for i in 0..1200 {
        cms.create(&PostParams::default(), &config_map(&format!("g{i:04}"), json!({}), json!({}))).await.unwrap();
    }
    let sidecar = Sidecar::start(&client, &configmaps_into_queue_q(ns.name())).await;
    let q = sidecar.queue("q");
    let holder = std::sync::Arc::from("test");
    // Until the informer synced, keys may arrive but none is handed out.
    loop {
        let synced = sidecar.informers.all_synced();
        let granted = q.try_get_many(&holder, 1, None).unwrap();
        if synced {
            break;
        }
        assert!(granted.is_none(), "a key was handed out before the informer synced");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sidecar.synced().await;
    wait_until("all 1200 keys queued", Duration::from_secs(10), || q.counts().ready + q.counts().held == 1200).await;
}

/// The sidecar's listeners are bound by `bind`; an informer-fed queue must
/// be held from then on, not from when `run` starts the informers (after the
/// gRPC server already serves).
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_an_informer_fed_queue_should_be_held_from_the_moment_the_sidecar_is_bound() {
    use workqueue_sidecar::app::Sidecar as App;
    use workqueue_sidecar::config::Config;
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-bound").await;
    let config = Config::parse(&configmaps_into_queue_q(ns.name()), "test.yaml").unwrap_or_else(|e| panic!("{e}"));
    let options = support::app_options::loopback(config, Some(control_plane::kubeconfig_path()));
    let app = App::bind(options).await.unwrap_or_else(|e| panic!("{e:#}"));
    let q = app.queues().get("q").expect("queue q").clone();
    assert_eq!(q.term().holds(), ["caches syncing"], "held before anything serves");
    drop(app);
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_queue_at_max_keys_should_still_take_every_informer_event() {
    const OBJECTS: usize = 50;
    const MAX_KEYS: usize = 10;
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "inf-full").await;
    let api: Api<ConfigMap> = ns.api();
    for i in 0..OBJECTS {
        api.create(&PostParams::default(), &config_map(&format!("cm-{i}"), json!({"v": "1"}), json!({})))
            .await
            .unwrap();
    }
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {} }}\n\
         queues:\n  full:\n    primary: cms\n    max_keys: {MAX_KEYS}\n",
        ns.name()
    );
    let sidecar = Sidecar::start(&client, &yaml).await;
    let queue = sidecar.queue("full");
    // Manual adds fill the queue before the list arrives.
    for i in 0..MAX_KEYS {
        queue
            .add(Arc::from(format!("manual-{i}")), 0, workqueue_sidecar::queue::Reason::of(ReasonKind::Manual))
            .unwrap();
    }
    assert!(queue.add(Arc::from("one-more"), 0, workqueue_sidecar::queue::Reason::of(ReasonKind::Manual)).is_err());
    sidecar.synced().await;
    let informer = sidecar.informers.get("cms").unwrap().clone();
    let listed: Vec<String> = keys(&drain(queue)).into_iter().filter(|k| !k.starts_with("manual-")).collect();
    assert_eq!(listed.len(), OBJECTS, "every listed object was queued past max_keys: {listed:?}");

    // Every object changes: each change reaches the queue, and the counters agree.
    for i in 0..OBJECTS {
        let patch = Patch::Merge(json!({"data": {"v": "2"}}));
        api.patch(&format!("cm-{i}"), &PatchParams::default(), &patch).await.unwrap();
    }
    wait_until("every update counted", Duration::from_secs(30), || {
        informer.changes(ChangeKind::Updated) >= OBJECTS as u64
    })
    .await;
    let updated = keys(&drain(queue));
    assert_eq!(updated.len(), OBJECTS, "every update was queued: {updated:?}");
    assert_eq!(
        (informer.changes(ChangeKind::InitialList), informer.changes(ChangeKind::Updated), informer.keys_refused()),
        (OBJECTS as u64, OBJECTS as u64, 0)
    );
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_an_unknown_kind_should_be_refused_in_one_line_that_asks_for_its_crd() {
    use workqueue_sidecar::config::Config;
    use workqueue_sidecar::informer::InformerRegistry;
    use workqueue_sidecar::queue_registry::QueueRegistry;
    let client = control_plane::client().await;
    for (group, version) in [("", "v1"), ("nothing.example.com", "v1"), ("apps", "v9")] {
        let yaml = format!(
            "informers:\n  w: {{ group: '{group}', version: {version}, kind: Widget }}\nqueues:\n  q: {{ primary: w }}\n"
        );
        let config = Config::parse(&yaml, "t.yaml").unwrap();
        let queues = QueueRegistry::new(config.queues.iter().map(|q| (q.name.clone(), q.settings.clone()))).unwrap();
        let bindings = config.queues.iter().map(|q| (q.name.as_str(), &q.binding));
        let Err(err) = InformerRegistry::build(client.clone(), &config.informers, &queues, bindings).await else {
            panic!("{group}/{version} Widget was found");
        };
        let text = format!("{:#}", anyhow::Error::from(err));
        assert!(text.contains("has no kind Widget in"), "{group}/{version}: {text}");
        assert!(
            text.ends_with(
                "is its CustomResourceDefinition installed, and the group and version spelled as the CRD serves them?"
            ),
            "{text}"
        );
        assert!(!text.contains("404"), "one line of ours, not the API server's 404 repeated: {text}");
    }
}
