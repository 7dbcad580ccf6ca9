//! ObjectService against the real control plane: apply (with conflicts and force), merge and JSON patches
//! (object and status), create, delete (preconditions, finalizers), each error mapped to its code with the
//! API server's message and details, and a write read back from the cache.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

mod support;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use serde_json::{Value, json};
use support::control_plane::{self, TestNamespace, apply_crd, unique_name};
use support::informers::{Sidecar, configmaps_into_queue_q};
use tonic::{Code, Status};
use tonic_types::StatusExt;
use workqueue_sidecar::grpc::pb;
use workqueue_sidecar::objects::ObjectWriter;

use pb::cache_service_client::CacheServiceClient;
use pb::object_service_client::ObjectServiceClient;

fn config_maps() -> Option<pb::ResourceType> {
    Some(pb::ResourceType { api_version: "v1".into(), kind: "ConfigMap".into() })
}

fn json_of(object: &Option<pb::WrittenObject>) -> Value {
    serde_json::from_slice(&object.as_ref().expect("an object").json).unwrap()
}

/// The error's code, and that its message carries the API server's words.
fn refused(result: Result<impl std::fmt::Debug, Status>, code: Code, reason: &str) -> Status {
    let status = result.expect_err("a refusal");
    assert_eq!(status.code(), code, "{status:?}");
    let info = status.get_details_error_info().unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.reason, reason, "{status:?}");
    assert_eq!(info.domain, "k8s.io");
    status
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_object_service_should_create_apply_patch_and_delete_and_read_its_writes_back() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "objects").await;
    // ConfigMaps in `ns`, and (at the end) a Namespace's delete, declared.
    let yaml = configmaps_into_queue_q(ns.name()) + "  - { kind: Namespace, verbs: [delete], lease: optional }\n";
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(Some(ObjectWriter::new(client.clone(), "tests".into()))).await;
    let mut objects = ObjectServiceClient::new(channel.clone());
    let mut cache = CacheServiceClient::new(channel);

    // Create: the object comes back with its resourceVersion, readable from the cache at once.
    let created = objects
        .create_object(pb::CreateObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            json: serde_json::to_vec(&json!({"metadata": {"name": "a"}, "data": {"k": "1"}})).unwrap(),
            field_manager: String::new(),
            lease: None,
        })
        .await
        .unwrap()
        .into_inner()
        .object;
    let written = created.as_ref().unwrap();
    assert_eq!(json_of(&created)["data"]["k"], "1");
    assert!(!written.resource_version.is_empty() && !written.uid.is_empty());
    let read = cache
        .get_object(pb::GetObjectRequest {
            informer: "cms".into(),
            namespace: ns.name().into(),
            name: "a".into(),
            min_resource_version: written.resource_version.clone(),
            wait: Some(prost_types::Duration { seconds: 10, nanos: 0 }),
            include_deleted: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(read.object.unwrap().resource_version, written.resource_version, "the cache has the write");

    // Creating it again: ABORTED, AlreadyExists.
    let again = objects
        .create_object(pb::CreateObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            json: serde_json::to_vec(&json!({"metadata": {"name": "a"}})).unwrap(),
            field_manager: String::new(),
            lease: None,
        })
        .await;
    let status = refused(again, Code::Aborted, "AlreadyExists");
    assert!(status.message().contains("already exists"), "{}", status.message());

    // Apply: owned by its field manager; another manager's conflicting apply is ABORTED unless forced.
    let apply = |manager: &str, value: &str, force: bool| pb::ApplyObjectRequest {
        r#type: config_maps(),
        namespace: ns.name().into(),
        name: "b".into(),
        json: serde_json::to_vec(&json!({"data": {"owned": value}})).unwrap(),
        field_manager: manager.into(),
        force,
        lease: None,
    };
    let applied = objects.apply_object(apply("", "first", false)).await.unwrap().into_inner().object;
    let applied = json_of(&applied);
    assert_eq!(applied["data"]["owned"], "first");
    let managers: Vec<&str> =
        applied["metadata"]["managedFields"].as_array().unwrap().iter().filter_map(|m| m["manager"].as_str()).collect();
    assert_eq!(managers, ["tests"], "the sidecar's field manager when the request names none");
    let status = refused(objects.apply_object(apply("other", "second", false)).await, Code::Aborted, "Conflict");
    assert!(status.message().contains("conflict"), "{}", status.message());
    let forced = objects.apply_object(apply("other", "second", true)).await.unwrap().into_inner().object;
    assert_eq!(json_of(&forced)["data"]["owned"], "second");

    // Merge patch and JSON patch.
    let patch = |patch_type: pb::PatchType, patch: Value| pb::PatchObjectRequest {
        r#type: config_maps(),
        namespace: ns.name().into(),
        name: "b".into(),
        patch_type: patch_type as i32,
        patch: serde_json::to_vec(&patch).unwrap(),
        status: false,
        field_manager: String::new(),
        lease: None,
    };
    let merged = objects.patch_object(patch(pb::PatchType::Merge, json!({"data": {"m": "1"}}))).await.unwrap();
    assert_eq!(json_of(&merged.into_inner().object)["data"]["m"], "1");
    let ops = json!([{"op": "replace", "path": "/data/m", "value": "2"}]);
    let patched = objects.patch_object(patch(pb::PatchType::Json, ops)).await.unwrap();
    assert_eq!(json_of(&patched.into_inner().object)["data"]["m"], "2");
    let missing = pb::PatchObjectRequest { name: "nobody".into(), ..patch(pb::PatchType::Merge, json!({})) };
    refused(objects.patch_object(missing).await, Code::NotFound, "NotFound");

    // Delete: a wrong UID precondition is ABORTED; a finalizer keeps the object, marked, until removed.
    let held = json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
    let held = objects
        .create_object(pb::CreateObjectRequest {
            r#type: config_maps(),
            namespace: ns.name().into(),
            json: serde_json::to_vec(&held).unwrap(),
            field_manager: String::new(),
            lease: None,
        })
        .await
        .unwrap()
        .into_inner()
        .object
        .unwrap();
    let delete = |uid: &str| pb::DeleteObjectRequest {
        r#type: config_maps(),
        namespace: ns.name().into(),
        name: "held".into(),
        precondition_uid: uid.into(),
        precondition_resource_version: String::new(),
        propagation: pb::Propagation::Background as i32,
        lease: None,
    };
    refused(objects.delete_object(delete("not-its-uid")).await, Code::Aborted, "Conflict");
    let pending = objects.delete_object(delete(&held.uid)).await.unwrap().into_inner();
    assert!(!pending.gone, "a finalizer holds it");
    assert!(json_of(&pending.object)["metadata"]["deletionTimestamp"].is_string());
    let release = json!([{"op": "remove", "path": "/metadata/finalizers"}]);
    let release = pb::PatchObjectRequest { name: "held".into(), ..patch(pb::PatchType::Json, release) };
    objects.patch_object(release).await.unwrap();
    let cms: Api<ConfigMap> = ns.api();
    assert!(cms.get_opt("held").await.unwrap().is_none(), "gone once its finalizer is removed");
    let gone = objects.delete_object(pb::DeleteObjectRequest { name: "a".into(), ..delete("") }).await.unwrap();
    assert!(gone.into_inner().gone);

    // A Namespace is held by its spec.finalizers, not metadata.finalizers: it
    // is not gone either (it was answered gone, and the stale-read guard then
    // waited 10 s for a disappearance that does not come while it terminates).
    let child = TestNamespace::create(&client, "objects-child").await;
    let namespaces = Some(pb::ResourceType { api_version: "v1".into(), kind: "Namespace".into() });
    let request = pb::DeleteObjectRequest { r#type: namespaces, name: child.name().into(), ..Default::default() };
    let terminating = objects.delete_object(request).await.unwrap().into_inner();
    assert!(!terminating.gone, "a terminating Namespace still exists");
    assert!(json_of(&terminating.object)["metadata"]["deletionTimestamp"].is_string());
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_object_service_should_map_each_refusal_to_its_code_with_the_api_servers_words() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "objects-errors").await;
    let group = format!("{}.example.com", unique_name("g"));
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{ name: gadgets.{group} }}
spec:
  group: {group}
  scope: Namespaced
  names: {{ plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList }}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {{ status: {{}} }}
      schema: {{ openAPIV3Schema: {{ type: object, x-kubernetes-preserve-unknown-fields: true }} }}
"
    );
    apply_crd(&client, &format!("gadgets.{group}"), &crd).await;
    // Writes need a Kubernetes client, which only a config with informers has.
    let yaml = format!(
        "informers:\n  nss: {{ version: v1, kind: Namespace, metadata_only: true }}\nqueues:\n  q: {{}}\n\
         writes:\n  - {{ group: {group}, kind: Gadget, lease: optional }}\n  - {{ group: {group}, kind: Gizmo, lease: optional }}\n\
         \x20\x20- {{ kind: ConfigMap, lease: optional }}\n"
    );
    let mut sidecar = Sidecar::start(&client, &yaml).await;
    let (channel, _stop) = sidecar.serve_grpc(Some(ObjectWriter::new(client.clone(), "tests".into()))).await;
    let mut objects = ObjectServiceClient::new(channel);
    let gadgets = Some(pb::ResourceType { api_version: format!("{group}/v1"), kind: "Gadget".into() });
    let create = |resource_type: Option<pb::ResourceType>, namespace: &str, object: Value| pb::CreateObjectRequest {
        r#type: resource_type,
        namespace: namespace.into(),
        json: serde_json::to_vec(&object).unwrap(),
        field_manager: String::new(),
        lease: None,
    };

    // A status subresource: the status patch lands, an object patch of status does not.
    objects.create_object(create(gadgets.clone(), ns.name(), json!({"metadata": {"name": "g"}}))).await.unwrap();
    let status_patch = |status: bool| pb::PatchObjectRequest {
        r#type: gadgets.clone(),
        namespace: ns.name().into(),
        name: "g".into(),
        patch_type: pb::PatchType::Merge as i32,
        patch: serde_json::to_vec(&json!({"status": {"ready": status}})).unwrap(),
        status,
        field_manager: String::new(),
        lease: None,
    };
    let patched = objects.patch_object(status_patch(true)).await.unwrap().into_inner().object;
    assert_eq!(json_of(&patched)["status"]["ready"], true);
    let ignored = objects.patch_object(status_patch(false)).await.unwrap().into_inner().object;
    assert_eq!(json_of(&ignored)["status"]["ready"], true, "the main resource ignores status");

    // 422 Invalid: INVALID_ARGUMENT, each cause a field violation.
    let invalid =
        objects.create_object(create(config_maps(), ns.name(), json!({"metadata": {"name": "Not_Valid"}}))).await;
    let status = refused(invalid, Code::InvalidArgument, "Invalid");
    let violations = status.get_details_bad_request().expect("a BadRequest detail").field_violations;
    assert!(violations.iter().any(|v| v.field == "metadata.name"), "{violations:?}");
    assert!(status.message().contains("Not_Valid"), "{}", status.message());

    // An apply with a field the kind does not have: the API server answers 500 with no reason
    // (its field manager's plain error), which was UNAVAILABLE and retried for ever.
    let unknown_field = pb::ApplyObjectRequest {
        r#type: config_maps(),
        namespace: ns.name().into(),
        name: "unknown-field".into(),
        json: serde_json::to_vec(&json!({"data": {"k": "v"}, "foo": "bar"})).unwrap(),
        field_manager: String::new(),
        force: false,
        lease: None,
    };
    let status = refused(objects.apply_object(unknown_field).await, Code::InvalidArgument, "");
    assert!(status.message().contains("failed to create typed patch object"), "{}", status.message());
    assert!(status.message().ends_with(".foo: field not declared in schema"), "{}", status.message());
    let info = status.get_details_error_info().unwrap();
    assert_eq!(info.metadata.get("http_status").map(String::as_str), Some("500"), "the API server's own status");

    // 403: PERMISSION_DENIED, for a user the API server gives no rights.
    let nobody = control_plane::client_as("system:serviceaccount:default:nobody").await;
    let (channel, _stop_nobody) = sidecar.serve_grpc(Some(ObjectWriter::new(nobody, "tests".into()))).await;
    let forbidden = ObjectServiceClient::new(channel)
        .create_object(create(config_maps(), ns.name(), json!({"metadata": {"name": "x"}})))
        .await;
    let status = refused(forbidden, Code::PermissionDenied, "Forbidden");
    assert!(status.message().contains("cannot create resource"), "{}", status.message());

    // Refused before the API server: an unknown kind, a scope mismatch, bad JSON, no patch type.
    let unknown = Some(pb::ResourceType { api_version: format!("{group}/v1"), kind: "Gizmo".into() });
    let status = objects.create_object(create(unknown, ns.name(), json!({}))).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert!(status.message().contains("is its CustomResourceDefinition installed"), "{}", status.message());
    let status =
        objects.create_object(create(config_maps(), "", json!({"metadata": {"name": "x"}}))).await.unwrap_err();
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "namespace: ConfigMap is namespaced: name the namespace")
    );
    let not_json = pb::CreateObjectRequest { json: b"{".to_vec(), ..create(config_maps(), ns.name(), json!({})) };
    let status = objects.create_object(not_json).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("json: is not JSON"), "{}", status.message());
    let status = objects
        .patch_object(pb::PatchObjectRequest { patch_type: pb::PatchType::Unspecified as i32, ..status_patch(true) })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().starts_with("patch_type: "), "{}", status.message());

    // A name or namespace goes into the API server's URL path: what would end the path or escape
    // is refused, and the object it would have reached instead is untouched. Before, `victim#x`
    // deleted `victim`, `victim?dryRun=All` was answered OK and wrote nothing, and a namespace
    // `<ns>/configmaps/victim#` patched `victim` whatever the name.
    objects.create_object(create(config_maps(), ns.name(), json!({"metadata": {"name": "victim"}}))).await.unwrap();
    let cms: Api<ConfigMap> = ns.api();
    let aimed = |namespace: &str, name: &str| pb::PatchObjectRequest {
        r#type: config_maps(),
        namespace: namespace.into(),
        name: name.into(),
        patch_type: pb::PatchType::Merge as i32,
        patch: serde_json::to_vec(&json!({"data": {"hit": "yes"}})).unwrap(),
        status: false,
        field_manager: String::new(),
        lease: None,
    };
    let through_namespace = format!("{}/configmaps/victim#", ns.name());
    for (namespace, name, field) in [
        (ns.name(), "victim#x", "name"),
        (ns.name(), "victim?dryRun=All&x=", "name"),
        (ns.name(), "victi%6D", "name"),
        (through_namespace.as_str(), "anything", "namespace"),
    ] {
        let status = objects.patch_object(aimed(namespace, name)).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{name:?} in {namespace:?}: {status:?}");
        assert!(status.message().starts_with(&format!("{field}: ")), "{}", status.message());
    }
    let delete = pb::DeleteObjectRequest {
        r#type: config_maps(),
        namespace: ns.name().into(),
        name: "victim#not-this-one".into(),
        ..Default::default()
    };
    assert_eq!(objects.delete_object(delete).await.unwrap_err().code(), Code::InvalidArgument);
    let victim = cms.get("victim").await.expect("victim is not deleted");
    assert_eq!(victim.data, None, "victim is not patched");
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_write_the_config_does_not_declare_should_be_refused_and_not_made() {
    use k8s_openapi::api::core::v1::Secret;
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "objects-undeclared").await;
    let other = TestNamespace::create(&client, "objects-undeclared-other").await;
    // Declares ConfigMaps in `ns` only.
    let mut sidecar = Sidecar::start(&client, &configmaps_into_queue_q(ns.name())).await;
    sidecar.synced().await;
    let (channel, _stop) = sidecar.serve_grpc(Some(ObjectWriter::new(client.clone(), "tests".into()))).await;
    let mut objects = ObjectServiceClient::new(channel);
    let create = |kind: &str, namespace: &str| pb::CreateObjectRequest {
        r#type: Some(pb::ResourceType { api_version: "v1".into(), kind: kind.into() }),
        namespace: namespace.into(),
        json: serde_json::to_vec(&json!({"metadata": {"name": "x"}})).unwrap(),
        field_manager: String::new(),
        lease: None,
    };
    let not_declared = |result: Result<tonic::Response<pb::CreateObjectResponse>, Status>, what: &str| {
        let status = result.expect_err(what);
        assert_eq!(status.code(), Code::PermissionDenied, "{what}: {status:?}");
        let info = status.get_details_error_info().unwrap_or_else(|| panic!("{what}: no ErrorInfo in {status:?}"));
        assert_eq!((info.domain.as_str(), info.reason.as_str()), ("workqueue-sidecar", "WRITE_NOT_DECLARED"));
        assert!(status.message().contains("not among the config's declared writes"), "{what}: {status:?}");
    };

    // Another kind, though the service account may write it.
    not_declared(objects.create_object(create("Secret", ns.name())).await, "a Secret");
    let secret = Api::<Secret>::namespaced(client.clone(), ns.name()).get_opt("x").await.unwrap();
    assert!(secret.is_none(), "the refused Secret was not made");
    // The declared kind in another namespace.
    not_declared(objects.create_object(create("ConfigMap", other.name())).await, "a ConfigMap elsewhere");
    let elsewhere = Api::<ConfigMap>::namespaced(client.clone(), other.name()).get_opt("x").await.unwrap();
    assert!(elsewhere.is_none(), "the refused ConfigMap was not made");
    // The declared write itself goes through.
    objects.create_object(create("ConfigMap", ns.name())).await.expect("a declared write");
}
