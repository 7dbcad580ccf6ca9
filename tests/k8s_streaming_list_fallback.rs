//! A streaming list cut short, against the real control plane: the API server closes a watcher
//! that does not keep up with a streaming list's objects and the changes arriving meanwhile, and a
//! slow replica under steady churn can be cut again every time it asks. Through a client that cuts
//! every streaming list (`support/cut_streaming_lists.rs`), the informer must list in pages after
//! the first cut, sync with every object, and watch on from that list's version.
//!
//! Needs `WQS_KUBECONFIG`: `hack/control-plane up && eval "$(hack/control-plane env)"`.

#[path = "support/cut_streaming_lists.rs"]
mod cut_streaming_lists;
mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use support::control_plane::{self, TestNamespace};
use support::informers::{EVENT_TIMEOUT, Sidecar, configmaps_into_queue_q, drain, keys, wait_until};
use workqueue_sidecar::informer::ListQuery;

/// More than one page of the informer's list (500), so the pages are followed too.
const OBJECTS: usize = 600;

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({ "metadata": { "name": name }, "data": { "k": "v" } })).unwrap()
}

#[tokio::test]
#[ignore = "needs a control plane: hack/test runs it with --ignored"]
async fn k8s_a_streaming_list_cut_short_should_be_followed_by_a_list_in_pages_and_the_informer_sync() {
    let client = control_plane::client().await;
    let ns = TestNamespace::create(&client, "list-cut").await;
    let cms: Api<ConfigMap> = ns.api();
    for i in 0..OBJECTS {
        cms.create(&PostParams::default(), &config_map(&format!("cm{i:04}"))).await.unwrap();
    }
    let (cutting, sent) = cut_streaming_lists::client(&client);
    let sidecar = Sidecar::start(&cutting, &configmaps_into_queue_q(ns.name())).await;

    // Asked again as a stream, every list would be cut: the informer would never sync.
    sidecar.synced().await;
    let requests = sent.requests();
    let cut = requests.iter().position(|r| cut_streaming_lists::is_streaming_list(r)).unwrap_or_else(|| {
        panic!("the informer first asked for a streaming list (does the API server serve them?): {requests:#?}")
    });
    assert!(
        requests[cut + 1..].iter().any(|r| cut_streaming_lists::is_list_in_pages(r)),
        "a list in pages followed the cut streaming list: {requests:#?}"
    );
    assert_eq!(
        requests.iter().filter(|r| cut_streaming_lists::is_streaming_list(r)).count(),
        1,
        "no second streaming list once the list in pages synced: {requests:#?}"
    );

    // Every object is cached, as the API server has it, objects the cut list
    // brought and those it did not alike.
    let server: BTreeSet<(String, String)> = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| (cm.name_any(), cm.resource_version().unwrap_or_default()))
        .collect();
    assert_eq!(server.len(), OBJECTS);
    let informer = sidecar.informers.get("cms").expect("informer cms");
    let page =
        informer.list(&ListQuery { namespace: Some(ns.name()), limit: 100_000, ..ListQuery::default() }).unwrap();
    let cached: BTreeSet<(String, String)> =
        page.objects.iter().map(|o| (o.name().to_string(), o.meta.resource_version.to_string())).collect();
    assert_eq!(cached, server, "the cache holds what the server holds");

    // The watch goes on from the list's version: a change made now reaches the queue.
    let q = sidecar.queue("q");
    let mut queued = BTreeSet::new();
    wait_until("every listed key queued", EVENT_TIMEOUT, || {
        queued.extend(keys(&drain(q)));
        queued.len() == OBJECTS
    })
    .await;
    cms.create(&PostParams::default(), &config_map("after-the-sync")).await.unwrap();
    let after = format!("{}/after-the-sync", ns.name());
    wait_until("the key of an object created after the sync queued", EVENT_TIMEOUT, || {
        keys(&drain(q)).contains(&after)
    })
    .await;
    drop(sidecar);
    ns.delete().await;
}
