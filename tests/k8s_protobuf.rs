//! Built-in kinds read as protobuf against the real control plane: every object cached is the JSON the API
//! server itself sends of it (less managedFields), in the first list and in watch events after it, for kinds
//! that carry each of Kubernetes' hand-written types (times, micro-times, quantities, int-or-strings, bytes,
//! raw JSON); a custom resource is still read as JSON; and a field the sidecar's table does not know (a newer
//! API server) sends the informer back to JSON, losing nothing.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

#[path = "support/newer_api_server.rs"]
mod newer_api_server;
mod support;

use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use support::control_plane::{self, TestNamespace, apply_crd};
use support::informers::{EVENT_TIMEOUT, Sidecar, wait_until};

const USER_CRD: &str = include_str!("../deploy/crds/user.yaml");

/// One kind the test caches: its informer's name, group, version, kind and plural.
struct Kind {
    informer: &'static str,
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
}

const KINDS: &[Kind] = &[
    Kind { informer: "configmaps", group: "", version: "v1", kind: "ConfigMap", plural: "configmaps" },
    Kind { informer: "secrets", group: "", version: "v1", kind: "Secret", plural: "secrets" },
    Kind { informer: "services", group: "", version: "v1", kind: "Service", plural: "services" },
    Kind { informer: "pods", group: "", version: "v1", kind: "Pod", plural: "pods" },
    Kind {
        informer: "claims",
        group: "",
        version: "v1",
        kind: "PersistentVolumeClaim",
        plural: "persistentvolumeclaims",
    },
    Kind { informer: "limits", group: "", version: "v1", kind: "LimitRange", plural: "limitranges" },
    Kind { informer: "deployments", group: "apps", version: "v1", kind: "Deployment", plural: "deployments" },
    Kind {
        informer: "revisions",
        group: "apps",
        version: "v1",
        kind: "ControllerRevision",
        plural: "controllerrevisions",
    },
    Kind { informer: "cronjobs", group: "batch", version: "v1", kind: "CronJob", plural: "cronjobs" },
    Kind { informer: "leases", group: "coordination.k8s.io", version: "v1", kind: "Lease", plural: "leases" },
    Kind { informer: "events", group: "events.k8s.io", version: "v1", kind: "Event", plural: "events" },
    Kind { informer: "roles", group: "rbac.authorization.k8s.io", version: "v1", kind: "Role", plural: "roles" },
];

fn api(client: &Client, namespace: &str, kind: &Kind) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(kind.group, kind.version, kind.kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk_with_plural(&gvk, kind.plural))
}

/// One object of each kind, using the hand-written types where the kind has them.
fn manifests(namespace: &str) -> Vec<(&'static str, Value)> {
    let container = json!({
        "name": "app", "image": "example.invalid/app:1",
        "ports": [{ "name": "http", "containerPort": 8080 }],
        "env": [{ "name": "A", "value": "<&> é" }],
        "resources": { "requests": { "cpu": "100m", "memory": "64Mi" }, "limits": { "cpu": "1.5", "memory": "1Gi" } },
        "readinessProbe": { "httpGet": { "path": "/ready", "port": "http" }, "periodSeconds": 5 },
        "livenessProbe": { "tcpSocket": { "port": 8080 } }
    });
    let pod_spec = json!({ "automountServiceAccountToken": false, "containers": [container] });
    vec![
        (
            "configmaps",
            json!({
                "metadata": { "name": "settings", "labels": { "b": "2", "a": "1" }, "annotations": { "note": "x\ny" } },
                "data": { "plain": "text", "empty": "" },
                "binaryData": { "bytes": "AAEC/w==" }
            }),
        ),
        (
            "secrets",
            json!({ "metadata": { "name": "token" }, "type": "Opaque", "data": { "key": "c2VjcmV0", "none": "" } }),
        ),
        (
            "services",
            json!({
                "metadata": { "name": "web" },
                "spec": { "selector": { "app": "web" }, "ports": [
                    { "name": "http", "port": 80, "targetPort": "http" },
                    { "name": "admin", "port": 9000, "targetPort": 9001, "protocol": "TCP" }
                ] }
            }),
        ),
        ("pods", json!({ "metadata": { "name": "web-0", "labels": { "app": "web" } }, "spec": pod_spec })),
        (
            "claims",
            json!({
                "metadata": { "name": "data" },
                "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1500Mi" } } }
            }),
        ),
        (
            "limits",
            json!({
                "metadata": { "name": "limits" },
                "spec": { "limits": [{ "type": "Container", "max": { "cpu": "2" }, "defaultRequest": { "memory": "128974848" } }] }
            }),
        ),
        (
            "deployments",
            json!({
                "metadata": { "name": "web" },
                "spec": {
                    "replicas": 3,
                    "selector": { "matchLabels": { "app": "web" } },
                    "strategy": { "type": "RollingUpdate", "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": 1 } },
                    "template": { "metadata": { "labels": { "app": "web" } }, "spec": pod_spec }
                }
            }),
        ),
        (
            "revisions",
            json!({ "metadata": { "name": "web-1" }, "revision": 1, "data": { "spec": { "nested": [1, "two", null] } } }),
        ),
        (
            "cronjobs",
            json!({
                "metadata": { "name": "nightly" },
                "spec": { "schedule": "0 3 * * *", "jobTemplate": { "spec": { "template": {
                    "spec": { "restartPolicy": "Never", "automountServiceAccountToken": false, "containers": [container] }
                } } } }
            }),
        ),
        (
            "leases",
            json!({
                "metadata": { "name": "leader" },
                "spec": { "holderIdentity": "a", "leaseDurationSeconds": 15,
                          "acquireTime": "2026-11-26T10:00:00.123456Z", "renewTime": "2026-11-26T10:00:05.000001Z" }
            }),
        ),
        (
            "events",
            json!({
                "metadata": { "name": "started" },
                "eventTime": "2026-11-26T10:00:00.654321Z",
                "reportingController": "example.com/test", "reportingInstance": "test-0",
                "action": "Start", "reason": "Started", "type": "Normal", "note": "started",
                "regarding": { "kind": "Pod", "name": "web-0", "namespace": namespace, "apiVersion": "v1" }
            }),
        ),
        (
            "roles",
            json!({
                "metadata": { "name": "reader" },
                "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"] }]
            }),
        ),
    ]
}

fn config(namespace: &str) -> String {
    let mut yaml = String::from("informers:\n");
    for kind in KINDS {
        yaml.push_str(&format!(
            "  {}: {{ group: \"{}\", version: {}, kind: {}, namespace: {namespace} }}\n",
            kind.informer, kind.group, kind.version, kind.kind
        ));
    }
    // Users are cluster-scoped: this test's are labelled with its namespace.
    yaml.push_str(&format!(
        "  users: {{ group: example.com, version: v1, kind: User, label_selector: run={namespace} }}\n"
    ));
    yaml.push_str("queues:\n  q: { primary: configmaps }\n");
    yaml
}

/// The object as the API server sends it in JSON, less its managedFields.
async fn served_json(client: &Client, namespace: &str, kind: &Kind, name: &str) -> Value {
    let api = if kind.informer == "users" { users_api(client) } else { api(client, namespace, kind) };
    let mut object = serde_json::to_value(api.get(name).await.unwrap()).unwrap();
    object["metadata"].as_object_mut().unwrap().remove("managedFields");
    object
}

const USERS: Kind = Kind { informer: "users", group: "example.com", version: "v1", kind: "User", plural: "users" };

fn users_api(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(USERS.group, USERS.version, USERS.kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk_with_plural(&gvk, USERS.plural))
}

/// Waits until the informer's cached `name` is at the API server's version,
/// then checks the two are the same JSON.
async fn assert_cached_as_served(sidecar: &Sidecar, client: &Client, namespace: &str, kind: &Kind, name: &str) {
    let served = served_json(client, namespace, kind, name).await;
    let informer = sidecar.informers.get(kind.informer).unwrap();
    let key = if kind.informer == "users" { name.to_owned() } else { format!("{namespace}/{name}") };
    let version = served["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    wait_until(&format!("{} {key} cached at {version}", kind.kind), EVENT_TIMEOUT, || {
        informer.get(&key).is_some_and(|object| object.meta.resource_version.to_string() == version)
    })
    .await;
    let cached: Value = serde_json::from_slice(&informer.get(&key).unwrap().json).unwrap();
    assert_eq!(cached, served, "{} {key}: the cache (read as protobuf) against the API server's JSON", kind.kind);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_built_in_kinds_read_as_protobuf_should_be_cached_as_the_api_server_writes_them_in_json() {
    let client = control_plane::client().await;
    apply_crd(&client, "users.example.com", USER_CRD).await;
    let ns = TestNamespace::create(&client, "protobuf").await;
    let namespace = ns.name().to_owned();
    // The control plane runs no controllers: the ServiceAccount admission of pods needs this one.
    let accounts = api(
        &client,
        &namespace,
        &Kind { informer: "", group: "", version: "v1", kind: "ServiceAccount", plural: "serviceaccounts" },
    );
    accounts
        .create(&PostParams::default(), &serde_json::from_value(json!({ "metadata": { "name": "default" } })).unwrap())
        .await
        .unwrap();

    let manifests = manifests(&namespace);
    let kind_of = |informer: &str| KINDS.iter().find(|kind| kind.informer == informer).unwrap();
    for (informer, manifest) in &manifests {
        let object: DynamicObject = serde_json::from_value(manifest.clone()).unwrap();
        api(&client, &namespace, kind_of(informer)).create(&PostParams::default(), &object).await.unwrap();
    }
    let user_name = format!("{namespace}-ada");
    let user: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.com/v1", "kind": "User",
        "metadata": { "name": user_name, "labels": { "run": namespace } }, "spec": { "display_name": "Ada" }
    }))
    .unwrap();
    users_api(&client).create(&PostParams::default(), &user).await.unwrap();

    let sidecar = Sidecar::start(&client, &config(&namespace)).await;
    sidecar.synced().await;

    // The first list.
    for (informer, manifest) in &manifests {
        let name = manifest["metadata"]["name"].as_str().unwrap();
        assert_cached_as_served(&sidecar, &client, &namespace, kind_of(informer), name).await;
    }
    assert_cached_as_served(&sidecar, &client, &namespace, &USERS, &user_name).await;

    // Watch events: a change to every object, and a new one.
    let patch = json!({ "metadata": { "annotations": { "changed": "yes" } } });
    for (informer, manifest) in &manifests {
        let name = manifest["metadata"]["name"].as_str().unwrap();
        api(&client, &namespace, kind_of(informer))
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .unwrap();
        assert_cached_as_served(&sidecar, &client, &namespace, kind_of(informer), name).await;
    }
    let lease: DynamicObject = serde_json::from_value(json!({
        "metadata": { "name": "later" }, "spec": { "renewTime": "2026-11-26T11:00:00.000007Z" }
    }))
    .unwrap();
    api(&client, &namespace, kind_of("leases")).create(&PostParams::default(), &lease).await.unwrap();
    assert_cached_as_served(&sidecar, &client, &namespace, kind_of("leases"), "later").await;

    for kind in KINDS {
        let read = sidecar.informers.get(kind.informer).unwrap().objects_read_as_protobuf();
        assert!(read >= 2, "{}: {read} objects read as protobuf, the list's and an event's at least", kind.kind);
    }
    let users_read = sidecar.informers.get("users").unwrap().objects_read_as_protobuf();
    assert_eq!(users_read, 0, "a custom resource has no protobuf: read as JSON");
    users_api(&client).delete(&user_name, &Default::default()).await.unwrap();
    ns.delete().await;
}

/// A ConfigMap named `name` in the test's namespace, with one data entry.
async fn create_configmap(client: &Client, namespace: &str, name: &str) {
    let object: DynamicObject =
        serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "k": "v" } })).unwrap();
    api(client, namespace, &KINDS[0]).create(&PostParams::default(), &object).await.unwrap();
}

/// Every object of `names` is cached as the API server writes it in JSON,
/// and the keys of `new` (the objects not seen before) reached the queue:
/// nothing lost to the switch.
async fn assert_cached_and_queued(sidecar: &Sidecar, client: &Client, namespace: &str, names: &[&str], new: &[&str]) {
    for name in names {
        assert_cached_as_served(sidecar, client, namespace, &KINDS[0], name).await;
    }
    let mut queued = std::collections::BTreeSet::new();
    wait_until(&format!("the keys of {new:?} queued"), EVENT_TIMEOUT, || {
        queued.extend(support::informers::keys(&support::informers::drain(sidecar.queue("q"))));
        new.iter().all(|name| queued.contains(&format!("{namespace}/{name}")))
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_an_object_with_a_field_the_table_does_not_know_should_send_the_informer_back_to_json_losing_nothing() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "protobuf-newer").await;
    let namespace = ns.name().to_owned();
    let yaml = format!(
        "informers:\n  configmaps: {{ version: v1, kind: ConfigMap, namespace: {namespace} }}\nqueues:\n  q: {{ primary: configmaps }}\n"
    );
    create_configmap(&client, &namespace, "plain").await;

    // In a watch event: the informer synced as protobuf; the newer object's
    // event cannot be read, so it lists again as JSON and watches as JSON.
    let (newer_client, record) = newer_api_server::client(&client);
    let sidecar = Sidecar::start(&newer_client, &yaml).await;
    sidecar.synced().await;
    assert_cached_and_queued(&sidecar, &client, &namespace, &["plain"], &["plain"]).await;
    let informer = sidecar.informers.get("configmaps").unwrap();
    assert!(informer.objects_read_as_protobuf() >= 1, "the first sync was read as protobuf");

    create_configmap(&client, &namespace, "newer-in-a-watch").await;
    assert_cached_and_queued(&sidecar, &client, &namespace, &["plain", "newer-in-a-watch"], &["newer-in-a-watch"])
        .await;
    assert_eq!(record.rewritten(), ["newer-in-a-watch"], "the newer object was sent once, as protobuf, and refused");
    let read_before = informer.objects_read_as_protobuf();
    create_configmap(&client, &namespace, "after").await;
    assert_cached_and_queued(&sidecar, &client, &namespace, &["plain", "newer-in-a-watch", "after"], &["after"]).await;
    assert_eq!(informer.objects_read_as_protobuf(), read_before, "read as JSON since the refusal");
    let after = record.requests_after_first_rewrite();
    assert!(!after.is_empty(), "the informer asked again after the refusal: {:?}", record.seen());
    let lists = |s: &newer_api_server::Seen| {
        !s.path_and_query.contains("watch=true") || s.path_and_query.contains("sendInitialEvents=true")
    };
    assert!(lists(&after[0]), "the first request after the refusal lists again (plain or streaming): {after:?}");
    for seen in &after {
        assert!(!seen.accept.contains("protobuf") && !seen.answered_protobuf, "asked for JSON only: {seen:?}");
    }
    drop(sidecar);

    // In the first list: a new informer meets the newer object at once, and
    // syncs as JSON with every object.
    let (newer_client, record) = newer_api_server::client(&client);
    let sidecar = Sidecar::start(&newer_client, &yaml).await;
    sidecar.synced().await;
    let all = ["plain", "newer-in-a-watch", "after"];
    assert_cached_and_queued(&sidecar, &client, &namespace, &all, &all).await;
    assert_eq!(record.rewritten(), ["newer-in-a-watch"], "the newer object was sent once, as protobuf, and refused");
    let seen = record.seen();
    assert!(seen.iter().any(|s| s.answered_protobuf), "the informer first asked for protobuf: {seen:?}");
    assert!(seen.last().is_some_and(|s| !s.accept.contains("protobuf")), "and reads JSON since: {seen:?}");
    ns.delete().await;
}
