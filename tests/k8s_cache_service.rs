//! CacheService against the real control plane: GetObject and ListObjects (namespace, label selector,
//! index, pages), errors, read-your-writes; and the built binary serving informer keys with their objects.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

#[path = "support/sidecar.rs"]
mod binary;

use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::control_plane::{self, TestNamespace};
use support::informers::{Sidecar, configmaps_into_queue_q};
use tonic::Code;
use tonic::transport::Channel;
use tonic_types::StatusExt;
use workqueue_sidecar::grpc::pb;

use pb::cache_service_client::CacheServiceClient;
use pb::work_queue_service_client::WorkQueueServiceClient;

fn config_map(name: &str, labels: serde_json::Value, owner: Option<&ConfigMap>) -> ConfigMap {
    let mut cm: ConfigMap = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels }, "data": { "k": "v" }
    }))
    .unwrap();
    if let Some(owner) = owner {
        cm.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: owner.name_any(),
            uid: owner.uid().unwrap(),
            ..Default::default()
        }]);
    }
    cm
}

fn names(objects: &[pb::CachedObject]) -> Vec<&str> {
    objects.iter().map(|o| o.name.as_str()).collect()
}

fn secs(n: i64) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds: n, nanos: 0 })
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_cache_service_should_get_list_filter_page_and_read_your_writes() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache").await;
    let cms: Api<ConfigMap> = ns.api();
    let parent = cms.create(&PostParams::default(), &config_map("parent", json!({"tier": "top"}), None)).await.unwrap();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        cms.create(&PostParams::default(), &config_map(name, json!({ "tier": tier }), Some(&parent))).await.unwrap();
    }
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {}, indexes: {{ by-owner: owner, by-tier: {{ field: metadata.labels.tier }} }} }}\n\
         queues:\n  q: {{ primary: cms }}\n",
        ns.name()
    );
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let mut cache = CacheServiceClient::new(channel.clone());
    let ns_name = ns.name().to_string();
    let get = |name: &str| pb::GetObjectRequest {
        informer: "cms".into(),
        namespace: ns_name.clone(),
        name: name.into(),
        wait: secs(20),
        ..Default::default()
    };

    // Get waits for the initial list, then serves the object as JSON.
    let got = cache.get_object(get("a")).await.unwrap().into_inner();
    let object = got.object.expect("a is cached");
    let json: serde_json::Value = serde_json::from_slice(&object.json).unwrap();
    assert_eq!(json["data"]["k"], "v");
    assert_eq!(json["kind"], "ConfigMap");
    assert!(json["metadata"].get("managedFields").is_none(), "managedFields are stripped by default");
    assert_eq!((object.namespace.as_str(), object.name.as_str(), object.deleted), (ns.name(), "a", false));
    assert!(got.resource_version.parse::<u64>().unwrap() >= object.resource_version.parse::<u64>().unwrap());

    // Absent is not an error.
    assert!(cache.get_object(get("nope")).await.unwrap().into_inner().object.is_none());

    // Lists: everything in order, by namespace, by label selector, by index, in pages.
    let list = |f: &dyn Fn(&mut pb::ListObjectsRequest)| {
        let mut req = pb::ListObjectsRequest { informer: "cms".into(), ..Default::default() };
        f(&mut req);
        req
    };
    let all = cache.list_objects(list(&|_| {})).await.unwrap().into_inner();
    assert_eq!(names(&all.objects), ["a", "b", "c", "parent"]);
    let in_ns = cache.list_objects(list(&|r| r.namespace = ns_name.clone())).await.unwrap().into_inner();
    assert_eq!(names(&in_ns.objects), ["a", "b", "c", "parent"]);
    let elsewhere = cache.list_objects(list(&|r| r.namespace = "elsewhere".into())).await.unwrap().into_inner();
    assert!(elsewhere.objects.is_empty());
    let web = cache.list_objects(list(&|r| r.label_selector = "tier in (web),tier!=db".into())).await.unwrap();
    assert_eq!(names(&web.into_inner().objects), ["a", "b"]);
    let uid = parent.uid().unwrap();
    let owned = cache
        .list_objects(list(&|r| {
            r.index_name = "by-owner".into();
            r.index_value = uid.clone();
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&owned.objects), ["a", "b", "c"]);
    let db = cache
        .list_objects(list(&|r| {
            r.index_name = "by-tier".into();
            r.index_value = "db".into();
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&db.objects), ["c"]);
    let first = cache.list_objects(list(&|r| r.page_size = 3)).await.unwrap().into_inner();
    assert_eq!(names(&first.objects), ["a", "b", "c"]);
    assert!(!first.next_page_token.is_empty());
    let token = first.next_page_token.clone();
    let second = cache
        .list_objects(list(&|r| {
            r.page_size = 3;
            r.page_token = token.clone();
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(names(&second.objects), ["parent"]);
    assert!(second.next_page_token.is_empty());

    // Bad input gets a clear error with the documented code.
    let unknown = cache.get_object(pb::GetObjectRequest { informer: "nope".into(), ..get("a") }).await.unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound, "{unknown:?}");
    assert!(unknown.message().contains("unknown informer \"nope\""), "{unknown:?}");
    let bad = cache.list_objects(list(&|r| r.label_selector = "tier in (web".into())).await.unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument, "{bad:?}");
    assert!(bad.message().starts_with("label_selector:"), "{bad:?}");
    let no_index = cache.list_objects(list(&|r| r.index_name = "by-nothing".into())).await.unwrap_err();
    assert_eq!(no_index.code(), Code::NotFound, "{no_index:?}");
    assert!(no_index.message().contains("no index \"by-nothing\""), "{no_index:?}");
    let bad_rv =
        cache.get_object(pb::GetObjectRequest { min_resource_version: "abc".into(), ..get("a") }).await.unwrap_err();
    assert_eq!(bad_rv.code(), Code::InvalidArgument, "{bad_rv:?}");
    let no_name = cache.get_object(pb::GetObjectRequest { name: String::new(), ..get("a") }).await.unwrap_err();
    assert_eq!(no_name.code(), Code::InvalidArgument);
    let no_ns = cache.get_object(pb::GetObjectRequest { namespace: String::new(), ..get("a") }).await.unwrap_err();
    assert_eq!(no_ns.code(), Code::InvalidArgument);
    let far_future = pb::GetObjectRequest {
        min_resource_version: u64::MAX.to_string(),
        wait: Some(prost_types::Duration { seconds: 0, nanos: 200_000_000 }),
        ..get("a")
    };
    assert_eq!(cache.get_object(far_future).await.unwrap_err().code(), Code::DeadlineExceeded);

    // Read-your-writes: right after a write, a read at its resourceVersion sees it.
    for round in 0..20 {
        let patch = json!({ "data": { "k": format!("v{round}") } });
        let written = cms.patch("a", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let version = written.resource_version().unwrap();
        let read = cache
            .get_object(pb::GetObjectRequest { min_resource_version: version.clone(), ..get("a") })
            .await
            .unwrap()
            .into_inner();
        let object = read.object.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&object.json).unwrap();
        assert_eq!(json["data"]["k"], format!("v{round}"), "round {round}: read-your-writes at {version}");
        assert_eq!(object.resource_version, version);
    }

    // A deleted object: absent, but its last state on request.
    cms.delete("b", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while cache.get_object(get("b")).await.unwrap().into_inner().object.is_some() {
        assert!(tokio::time::Instant::now() < deadline, "b still cached after its delete");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last = cache
        .get_object(pb::GetObjectRequest { include_deleted: true, ..get("b") })
        .await
        .unwrap()
        .into_inner()
        .object
        .expect("the tombstone");
    assert!(last.deleted);
    assert_eq!(last.name, "b");
    let listed = cache.list_objects(list(&|_| {})).await.unwrap().into_inner();
    assert_eq!(names(&listed.objects), ["a", "c", "parent"], "deleted objects are not listed");

    // Leases carry their object when asked.
    let mut queue = WorkQueueServiceClient::new(channel);
    let leases = queue
        .get(pb::GetRequest {
            queue: "q".into(),
            max_keys: 10,
            wait: secs(5),
            include_object: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .leases;
    let deleted = leases.iter().find(|l| l.key == format!("{}/b", ns.name())).expect("b's delete is queued");
    assert!(deleted.object.as_ref().is_some_and(|o| o.deleted && o.name == "b"));
    let live = leases.iter().find(|l| l.key == format!("{}/a", ns.name())).expect("a is queued");
    assert!(live.object.as_ref().is_some_and(|o| !o.deleted && o.name == "a"));
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_standalone_sidecar_should_answer_not_found_for_every_informer() {
    let queues = std::sync::Arc::new(
        workqueue_sidecar::queue_registry::QueueRegistry::new([("default".to_string(), Default::default())]).unwrap(),
    );
    let informers = std::sync::Arc::new(workqueue_sidecar::informer::InformerRegistry::empty());
    let mut sidecar =
        Sidecar { queues, informers, tasks: Default::default(), finalizers: Vec::new(), writes: Vec::new() };
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let err = CacheServiceClient::new(channel)
        .get_object(pb::GetObjectRequest { informer: "users".into(), name: "x".into(), ..Default::default() })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_the_binary_should_queue_informer_keys_with_their_objects_and_serve_the_cache() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache-bin").await;
    let cms: Api<ConfigMap> = ns.api();
    cms.create(&PostParams::default(), &config_map("listed", json!({}), None)).await.unwrap();
    let dir = std::env::temp_dir().join(support::control_plane::unique_name("wqs-config"));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("config.yaml");
    std::fs::write(&config, configmaps_into_queue_q(ns.name())).unwrap();
    let kubeconfig = control_plane::kubeconfig_path();
    let sidecar =
        binary::Sidecar::start(&["--config", config.to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()]);
    let channel = Channel::from_shared(sidecar.endpoint()).unwrap().connect().await.unwrap();
    let mut queue = WorkQueueServiceClient::new(channel.clone());
    let get = || pb::GetRequest {
        queue: "q".into(),
        worker: "test".into(),
        max_keys: 10,
        wait: secs(20),
        include_object: true,
        ..Default::default()
    };
    let leases = queue.get(get()).await.unwrap().into_inner().leases;
    assert_eq!(leases.len(), 1, "{leases:?}\n{}", sidecar.logs());
    let lease = &leases[0];
    assert_eq!(lease.key, format!("{}/listed", ns.name()));
    assert_eq!(lease.priority, -100);
    assert_eq!(lease.reasons[0].kind, pb::ReasonKind::InitialList as i32);
    assert_eq!(lease.reasons[0].source, "cms");
    assert_eq!(lease.object.as_ref().map(|o| o.name.as_str()), Some("listed"));

    cms.create(&PostParams::default(), &config_map("created", json!({}), None)).await.unwrap();
    let leases = queue.get(get()).await.unwrap().into_inner().leases;
    assert_eq!(leases.iter().map(|l| l.key.as_str()).collect::<Vec<_>>(), [format!("{}/created", ns.name())]);
    assert_eq!(leases[0].priority, 0);
    assert_eq!(leases[0].reasons[0].kind, pb::ReasonKind::Added as i32);

    let got = CacheServiceClient::new(channel)
        .get_object(pb::GetObjectRequest {
            informer: "cms".into(),
            namespace: ns.name().into(),
            name: "created".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.object.map(|o| o.name), Some("created".to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// ListObjects pages end where the next object would take the answer past what gRPC clients take
/// by default (4 MiB): 12 ConfigMaps of 900 KB came in one 10.8 MB answer at the default page
/// size, which every client refused. Each page is at most 4 MiB, and the pages hold every object
/// once, in order.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_list_pages_should_fit_what_clients_take() {
    const MAX_MESSAGE: usize = 4 * 1024 * 1024;
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache-big").await;
    let cms: Api<ConfigMap> = ns.api();
    let big = "x".repeat(900 * 1024);
    let wanted: Vec<String> = (0..12).map(|i| format!("big-{i:02}")).collect();
    for name in &wanted {
        let object: ConfigMap =
            serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "k": big } })).unwrap();
        cms.create(&PostParams::default(), &object).await.unwrap();
    }
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {}, cache_reads: true }}\nqueues:\n  q: {{}}\n",
        ns.name()
    );
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    // A client with the default 4 MiB limit, as grpc-go, grpc-java, grpcio and grpc-js have.
    let mut cache = CacheServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE);
    let (mut listed, mut pages, mut token) = (Vec::new(), 0, String::new());
    loop {
        let request = pb::ListObjectsRequest { informer: "cms".into(), page_token: token, ..Default::default() };
        let page = cache.list_objects(request).await.unwrap_or_else(|status| panic!("page {pages}: {status:?}"));
        let page = page.into_inner();
        assert!(!page.objects.is_empty(), "no empty page");
        listed.extend(page.objects.iter().map(|o| o.name.clone()));
        pages += 1;
        token = page.next_page_token;
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(listed, wanted, "every object once, in order, over {pages} pages");
    assert!(pages >= 3, "{pages} pages for 10.8 MB");
    drop(sidecar);
    ns.delete().await;
}

/// A namespace on a read of a cluster-scoped informer is refused by ListObjects as by GetObject:
/// answered with an empty list, it read as "no such objects" to a caller who mistook the scope.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_list_objects_should_refuse_a_namespace_on_a_cluster_scoped_informer() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache-scope").await;
    let mut sidecar = Sidecar::start(
        &client,
        "informers:\n  nss: { version: v1, kind: Namespace, cache_reads: true }\nqueues:\n  q: {}\n",
    )
    .await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let mut cache = CacheServiceClient::new(channel);

    let list = |namespace: &str| pb::ListObjectsRequest {
        informer: "nss".into(),
        namespace: namespace.into(),
        ..Default::default()
    };
    let all = cache.list_objects(list("")).await.unwrap().into_inner();
    assert!(names(&all.objects).contains(&ns.name()), "the informer holds the test's namespace");
    let listed = cache.list_objects(list(ns.name())).await.unwrap_err();
    assert_eq!(listed.code(), Code::InvalidArgument, "{listed:?}");
    assert_eq!(listed.message(), "namespace: informer \"nss\" is cluster-scoped: leave namespace empty");
    let got = cache
        .get_object(pb::GetObjectRequest {
            informer: "nss".into(),
            namespace: ns.name().into(),
            name: ns.name().into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!((got.code(), got.message()), (listed.code(), listed.message()), "as GetObject refuses it");
    drop(sidecar);
    ns.delete().await;
}

/// A page token continues only the listing that issued it: on another informer or with other
/// filters the key it holds is no place in that listing (it gave a page that skipped objects, or an
/// empty one), so it is refused naming page_token. The page size may change between pages.
#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_page_token_should_be_refused_for_another_informer_or_other_filters() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache-token").await;
    let cms: Api<ConfigMap> = ns.api();
    for name in ["a", "b", "c"] {
        cms.create(&PostParams::default(), &config_map(name, json!({ "tier": "web" }), None)).await.unwrap();
    }
    let yaml = format!(
        "informers:\n  cms: {{ version: v1, kind: ConfigMap, namespace: {0}, cache_reads: true }}\n  \
         more-cms: {{ version: v1, kind: ConfigMap, namespace: {0}, cache_reads: true }}\nqueues:\n  q: {{}}\n",
        ns.name()
    );
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let mut cache = CacheServiceClient::new(channel);
    let first_page = pb::ListObjectsRequest { informer: "cms".into(), page_size: 1, ..Default::default() };
    let first = cache.list_objects(first_page.clone()).await.unwrap().into_inner();
    assert_eq!(names(&first.objects), ["a"]);
    let next = |change: &dyn Fn(&mut pb::ListObjectsRequest)| {
        let mut request = pb::ListObjectsRequest { page_token: first.next_page_token.clone(), ..first_page.clone() };
        change(&mut request);
        request
    };

    let rest = cache.list_objects(next(&|r| r.page_size = 2)).await.unwrap().into_inner();
    assert_eq!(names(&rest.objects), ["b", "c"], "the same listing continues, whatever the page size");
    let refusals = [
        ("another informer", next(&|r| r.informer = "more-cms".into())),
        ("another namespace", next(&|r| r.namespace = ns.name().into())),
        ("another label selector", next(&|r| r.label_selector = "tier=web".into())),
    ];
    for (what, request) in refusals {
        let refused = cache.list_objects(request).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{what}: {refused:?}");
        assert!(refused.message().starts_with("page_token: "), "{what}: {refused:?}");
        assert!(refused.message().contains("continues another listing"), "{what}: {refused:?}");
    }
    drop(sidecar);
    ns.delete().await;
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_cache_reads_should_serve_only_the_informers_the_config_lets_clients_read() {
    use k8s_openapi::api::core::v1::Secret;
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "cache-declared").await;
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}})).unwrap();
    ns.api::<Secret>().create(&PostParams::default(), &secret).await.unwrap();
    // `secrets` is q's primary, but holds credentials; `spare` no queue uses;
    // `declared` no queue uses either, and says cache_reads: true.
    let yaml = |secret_reads: &str| {
        format!(
            "informers:\n  secrets: {{ version: v1, kind: Secret, namespace: {0}{secret_reads} }}\n\
             \x20 spare: {{ version: v1, kind: ConfigMap, namespace: {0} }}\n\
             \x20 declared: {{ version: v1, kind: ConfigMap, namespace: {0}, cache_reads: true }}\n\
             queues:\n  q: {{ primary: secrets }}\n",
            ns.name()
        )
    };
    let mut sidecar = Sidecar::start(&client, &yaml("")).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let mut cache = CacheServiceClient::new(channel.clone());
    let list = |informer: &str| pb::ListObjectsRequest { informer: informer.into(), ..Default::default() };
    for informer in ["secrets", "spare"] {
        let status = cache.list_objects(list(informer)).await.expect_err(informer);
        assert_eq!(status.code(), Code::PermissionDenied, "{informer}: {status:?}");
        let info = status.get_details_error_info().expect("an ErrorInfo");
        assert_eq!((info.domain.as_str(), info.reason.as_str()), ("workqueue-sidecar", "READ_NOT_DECLARED"));
        assert!(status.message().contains(&format!("informers.{informer}.cache_reads: true")), "{status:?}");
    }
    cache.list_objects(list("declared")).await.expect("a declared informer is served");
    // Leases cannot carry what the cache would not serve.
    let get = pb::GetRequest { queue: "q".into(), max_keys: 1, include_object: true, ..Default::default() };
    let status = WorkQueueServiceClient::new(channel).get(get.clone()).await.expect_err("include_object");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    drop(sidecar);

    // Declared by name, the Secrets are served.
    let mut sidecar = Sidecar::start(&client, &yaml(", cache_reads: true")).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(None).await;
    let listed = CacheServiceClient::new(channel.clone()).list_objects(list("secrets")).await.unwrap().into_inner();
    assert_eq!(listed.objects.len(), 1);
    let leases = WorkQueueServiceClient::new(channel).get(get).await.unwrap().into_inner().leases;
    assert!(leases.iter().all(|lease| lease.object.is_some()), "{leases:?}");
}
