//! A sharded informer's list and watch: one list of the owned slots, a watch from its version, and on each change of the owned slots only the difference: objects of slots given up leave the cache, only the slots gained are listed (at the watch's version exactly), and the watch resumes from that version under the new selector.
//!
//! kube-runtime's watcher cannot resume from a version of one's choosing
//! under a new selector, so following the slots with it meant a relist of
//! the whole share on every change. This loop makes its own requests, with
//! the `shardSelector` in each: the whole share as a streaming list where
//! the API server serves them (objects one by one, as kube-runtime lists;
//! pages of 500 held whole cost a replica about 9 MiB more at 30,000
//! objects), else in pages; the gained slots in pages (a list at an exact
//! version cannot stream); watches with bookmarks; a relist after 410 Gone. Listing the gained slots at
//! exactly the version the watch stopped at is what makes the resumed watch
//! complete: every object of the new share is in the cache as of that
//! version, and the watch sends every change after it.

use std::future::pending;

use futures_util::StreamExt;
use kube::api::{DynamicObject, ListParams, ObjectList, PartialObjectMeta, VersionMatch, WatchEvent, WatchParams};
use kube::core::Request;
use kube::runtime::utils::Backoff;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::backoff::WatchBackoff;
use super::shard_watch::{ShardFilter, shard_selector};
use super::spec::ShardBy;
use super::watch::{resync_ticks, tick};
use super::writer::InformerWriter;
use crate::shard::SlotSet;

/// The annotation of the bookmark that ends a streaming list's objects.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";
/// Objects per list page, as kube-runtime's watcher and client-go ask for.
const PAGE: u32 = 500;
/// How long one watch request lasts before it is made again from the last
/// version (the API server's default is random in 30-60 min; kube-runtime
/// asks for 290 s).
const WATCH_SECONDS: u32 = 290;

/// Runs a sharded informer until the task is aborted: nothing is listed
/// until this replica owns some slots; then as the module says. An owned
/// set that becomes empty leaves the cache and watch as they are (nothing is
/// granted from them anyway).
pub async fn run(writer: InformerWriter, client: Client, streaming: bool, owned: watch::Receiver<Option<SlotSet>>) {
    if writer.informer().spec().metadata_only {
        ShardListWatch::<PartialObjectMeta<DynamicObject>>::new(writer, client, streaming, owned).run().await
    } else {
        ShardListWatch::<DynamicObject>::new(writer, client, streaming, owned).run().await
    }
}

/// How objects come over the wire: whole, or as metadata only.
trait Wire: Clone + DeserializeOwned + Send + 'static {
    fn list(request: &Request, params: &ListParams) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>;
    fn watch(
        request: &Request,
        params: &WatchParams,
        version: &str,
    ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error>;
    fn into_object(self) -> DynamicObject;
}

impl Wire for DynamicObject {
    fn list(request: &Request, params: &ListParams) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
        request.list(params)
    }

    fn watch(
        request: &Request,
        params: &WatchParams,
        version: &str,
    ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
        request.watch(params, version)
    }

    fn into_object(self) -> DynamicObject {
        self
    }
}

impl Wire for PartialObjectMeta<DynamicObject> {
    fn list(request: &Request, params: &ListParams) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
        request.list_metadata(params)
    }

    fn watch(
        request: &Request,
        params: &WatchParams,
        version: &str,
    ) -> Result<http::Request<Vec<u8>>, kube::core::request::Error> {
        request.watch_metadata(params, version)
    }

    /// The server sends kind PartialObjectMetadata; the object's own
    /// apiVersion and kind are filled in by the informer's shaping.
    fn into_object(self) -> DynamicObject {
        DynamicObject { types: None, metadata: self.metadata, data: serde_json::Value::Object(Default::default()) }
    }
}

/// Why a list or watch stopped.
enum Stop {
    /// The owned slots changed: follow them.
    OwnedChanged,
    /// The version is too old (410 Gone): list the whole share again.
    Expired,
    /// The watch request ended as asked: make it again from the last version.
    Closed,
    Failed(kube::Error),
}

struct ShardListWatch<K> {
    writer: InformerWriter,
    client: Client,
    owned: watch::Receiver<Option<SlotSet>>,
    /// Whether the API server serves streaming lists (`sendInitialEvents`).
    streaming: bool,
    by: ShardBy,
    request: Request,
    backoff: WatchBackoff,
    resync: Option<tokio::time::Interval>,
    _wire: std::marker::PhantomData<K>,
}

impl<K: Wire> ShardListWatch<K> {
    fn new(writer: InformerWriter, client: Client, streaming: bool, owned: watch::Receiver<Option<SlotSet>>) -> Self {
        let informer = writer.informer().clone();
        let by = informer.spec().shard_by.expect("a sharded list and watch is for a sharded informer");
        let namespace = informer.spec().namespace.as_deref().filter(|_| informer.is_namespaced());
        let request = Request::new(DynamicObject::url_path(informer.resource(), namespace));
        let resync = informer.spec().resync.map(resync_ticks);
        ShardListWatch {
            writer,
            client,
            owned,
            streaming,
            by,
            request,
            backoff: WatchBackoff::new(),
            resync,
            _wire: std::marker::PhantomData,
        }
    }

    async fn run(mut self) {
        // What the cache holds and the watch covers, and the version it is
        // current to (`None`: list everything owned).
        let mut listed = SlotSet::EMPTY;
        let mut version: Option<String> = None;
        loop {
            let Some(owned) = self.owned_now().await else {
                return pending().await; // the sidecar is stopping: it aborts this task
            };
            let step = match &version {
                None => self.list_all(owned).await.map(|listed_at| version = Some(listed_at)),
                Some(at) if owned != listed => self.follow(listed, owned, at).await,
                Some(_) => Ok(()),
            };
            match step {
                Ok(()) => listed = owned,
                Err(stop) => {
                    self.stopped(stop, &mut version).await;
                    continue;
                }
            }
            let at = version.as_mut().expect("listed");
            let stop = self.watch(&listed, at).await;
            self.stopped(stop, &mut version).await;
        }
    }

    /// The slots owned now, once some are; `None` when the sender is gone.
    async fn owned_now(&mut self) -> Option<SlotSet> {
        let owned = self.owned.wait_for(|owned| matches!(owned, Some(s) if !s.is_empty())).await.ok()?;
        *owned
    }

    /// After a list or watch stopped: what the next round starts from.
    async fn stopped(&mut self, stop: Stop, version: &mut Option<String>) {
        let informer = self.writer.informer().clone();
        match stop {
            Stop::OwnedChanged | Stop::Closed => {}
            Stop::Expired => {
                info!(informer = %informer.name(), "watch version too old (410 Gone): listing this replica's share again");
                *version = None;
            }
            Stop::Failed(err) => {
                informer.on_watch_error();
                let wait = self.backoff.next().expect("the backoff never ends");
                warn!(informer = %informer.name(), %err, retry_in = ?wait, "list or watch failed; retrying with backoff");
                tokio::time::sleep(wait).await;
            }
        }
    }

    /// Lists every object of `owned` into the cache as a (re)list: objects
    /// it does not list (of slots given up, or deleted meanwhile) leave the
    /// cache as deletions. Returns the list's version.
    async fn list_all(&mut self, owned: SlotSet) -> Result<String, Stop> {
        let informer = self.writer.informer().clone();
        self.writer.filter_shards(ShardFilter::new(self.by, owned));
        let selector = shard_selector(self.by, &owned).expect("some slot is owned");
        info!(informer = %informer.name(), slots = owned.len(), streaming = self.streaming, "listing this replica's shard slots");
        self.writer.on_init();
        let version =
            if self.streaming { self.stream_list(&selector).await? } else { self.list(&selector, None).await? };
        self.writer.on_list_done();
        info!(informer = %informer.name(), objects = informer.len(), "informer synced");
        Ok(version)
    }

    /// From the cache of `listed` as of `at` to that of `owned` as of `at`:
    /// drops the objects of slots given up, lists those of slots gained.
    async fn follow(&mut self, listed: SlotSet, owned: SlotSet, at: &str) -> Result<(), Stop> {
        let informer = self.writer.informer().clone();
        let gained = owned.difference(&listed);
        let lost = listed.difference(&owned);
        self.writer.filter_shards(ShardFilter::new(self.by, owned));
        let dropped = if lost.is_empty() { 0 } else { self.writer.drop_objects_not_kept() };
        if let Some(selector) = shard_selector(self.by, &gained) {
            let before = informer.len();
            self.list(&selector, Some(at)).await?;
            info!(
                informer = %informer.name(),
                slots_gained = gained.len(),
                slots_lost = lost.len(),
                objects_listed = informer.len() - before,
                objects_dropped = dropped,
                "listed only the shard slots gained"
            );
        } else {
            info!(informer = %informer.name(), slots_lost = lost.len(), objects_dropped = dropped, "shard slots given up");
        }
        Ok(())
    }

    /// Lists every page under `selector` into the cache, at version `at`
    /// exactly when given (else the newest); returns the list's version.
    async fn list(&mut self, selector: &str, at: Option<&str>) -> Result<String, Stop> {
        let informer = self.writer.informer().clone();
        let spec = informer.spec();
        let mut params = ListParams {
            label_selector: spec.label_selector.clone(),
            field_selector: spec.field_selector.clone(),
            limit: Some(PAGE),
            resource_version: at.map(str::to_owned),
            version_match: at.map(|_| VersionMatch::Exact),
            ..ListParams::default()
        };
        loop {
            let request =
                K::list(&self.request, &params).map_err(|err| Stop::Failed(kube::Error::BuildRequest(err)))?;
            let page: ObjectList<K> =
                self.client.request(with_shard_selector(request, selector)).await.map_err(stop_for)?;
            informer.on_watch_progress();
            self.backoff.reset();
            informer.count_listed(page.items.len());
            for object in page.items {
                self.writer.on_listed(object.into_object());
            }
            match page.metadata.continue_.filter(|token| !token.is_empty()) {
                Some(token) => {
                    // The token carries the version: a page after the first names none.
                    params.continue_token = Some(token);
                    params.resource_version = None;
                    params.version_match = None;
                }
                None => return Ok(page.metadata.resource_version.unwrap_or_default()),
            }
        }
    }

    /// A watch with the informer's own selectors and bookmarks; with
    /// `initial_events`, a streaming list.
    fn watch_params(&self, initial_events: bool) -> WatchParams {
        let spec = self.writer.informer().spec();
        WatchParams {
            label_selector: spec.label_selector.clone(),
            field_selector: spec.field_selector.clone(),
            timeout: Some(WATCH_SECONDS),
            bookmarks: true,
            send_initial_events: initial_events,
        }
    }

    /// Lists every object under `selector` into the cache as a streaming
    /// list: a watch that sends the current objects first, then a bookmark
    /// marking their end, whose version it returns.
    async fn stream_list(&mut self, selector: &str) -> Result<String, Stop> {
        let informer = self.writer.informer().clone();
        let params = self.watch_params(true);
        let request =
            K::watch(&self.request, &params, "").map_err(|err| Stop::Failed(kube::Error::BuildRequest(err)))?;
        let events = self.client.request_events::<K>(with_shard_selector(request, selector)).await.map_err(stop_for)?;
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            informer.on_watch_progress();
            self.backoff.reset();
            match event.map_err(Stop::Failed)? {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    informer.count_listed(1);
                    self.writer.on_listed(object.into_object());
                }
                // Gone before the list ended: the relist's end deletes it.
                WatchEvent::Deleted(_) => {}
                WatchEvent::Bookmark(bookmark) if bookmark.metadata.annotations.contains_key(INITIAL_EVENTS_END) => {
                    return Ok(bookmark.metadata.resource_version);
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(status) if status.code == 410 => return Err(Stop::Expired),
                WatchEvent::Error(status) => return Err(Stop::Failed(kube::Error::Api(status))),
            }
        }
        Err(Stop::Closed)
    }

    /// Watches `listed` from version `at`, moving `at` along with every
    /// event and bookmark, until something stops it; runs the resync timer
    /// meanwhile.
    async fn watch(&mut self, listed: &SlotSet, at: &mut String) -> Stop {
        let informer = self.writer.informer().clone();
        let params = self.watch_params(false);
        let selector = shard_selector(self.by, listed).expect("some slot is listed");
        let request = match K::watch(&self.request, &params, at) {
            Ok(request) => with_shard_selector(request, &selector),
            Err(err) => return Stop::Failed(kube::Error::BuildRequest(err)),
        };
        debug!(informer = %informer.name(), version = %at, "watching this replica's shard slots");
        let events = match self.client.request_events::<K>(request).await {
            Ok(events) => events,
            Err(err) => return stop_for(err),
        };
        let mut events = std::pin::pin!(events);
        loop {
            let listed = *listed;
            let event = tokio::select! {
                event = events.next() => event,
                changed = owned_changed(&mut self.owned, listed) => {
                    if changed {
                        return Stop::OwnedChanged;
                    }
                    return pending().await; // the sidecar is stopping: it aborts this task
                }
                () = tick(&mut self.resync) => {
                    self.writer.resync();
                    continue;
                }
            };
            let event = match event {
                None => return Stop::Closed,
                Some(Err(err)) => return Stop::Failed(err),
                Some(Ok(event)) => event,
            };
            informer.on_watch_progress();
            self.backoff.reset();
            match event {
                WatchEvent::Added(object) | WatchEvent::Modified(object) => {
                    let object = object.into_object();
                    advance(at, &object);
                    self.writer.on_applied(object);
                }
                WatchEvent::Deleted(object) => {
                    let object = object.into_object();
                    advance(at, &object);
                    self.writer.on_deleted(object);
                }
                WatchEvent::Bookmark(bookmark) => *at = bookmark.metadata.resource_version,
                WatchEvent::Error(status) if status.code == 410 => return Stop::Expired,
                WatchEvent::Error(status) => return Stop::Failed(kube::Error::Api(status)),
            }
        }
    }
}

/// Whether the owned slots became some other than `listed`; false when the
/// sender is gone.
async fn owned_changed(owned: &mut watch::Receiver<Option<SlotSet>>, listed: SlotSet) -> bool {
    owned.wait_for(|owned| matches!(owned, Some(s) if !s.is_empty() && *s != listed)).await.is_ok()
}

/// The watch has seen `object`'s version.
fn advance(at: &mut String, object: &DynamicObject) {
    if let Some(version) = &object.metadata.resource_version {
        at.clone_from(version);
    }
}

/// 410 Gone means the version asked for is compacted away; anything else is
/// a failure to retry.
fn stop_for(err: kube::Error) -> Stop {
    match &err {
        kube::Error::Api(status) if status.code == 410 => Stop::Expired,
        _ => Stop::Failed(err),
    }
}

/// `request` with `shardSelector=<selector>` added to its query.
fn with_shard_selector(mut request: http::Request<Vec<u8>>, selector: &str) -> http::Request<Vec<u8>> {
    let encoded: String =
        form_urlencoded::Serializer::new(String::new()).append_pair("shardSelector", selector).finish();
    let uri = request.uri();
    let path_and_query = match uri.query() {
        Some(query) if !query.is_empty() => format!("{}?{query}&{encoded}", uri.path()),
        _ => format!("{}?{encoded}", uri.path()),
    };
    *request.uri_mut() = path_and_query.parse().expect("a path and an encoded query make a URI");
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_should_carry_the_selector_after_its_own_query() {
        let selector = "shardRange(object.metadata.uid, '0x0', '0x1')";
        let encoded = "shardSelector=shardRange%28object.metadata.uid%2C+%270x0%27%2C+%270x1%27%29";
        let request = Request::new("/api/v1/namespaces/a/configmaps");
        let params = ListParams { limit: Some(PAGE), ..ListParams::default() };
        let list = with_shard_selector(DynamicObject::list(&request, &params).unwrap(), selector);
        assert_eq!(list.uri().to_string(), format!("/api/v1/namespaces/a/configmaps?&limit=500&{encoded}"));
        let watch = with_shard_selector(
            PartialObjectMeta::<DynamicObject>::watch(&request, &WatchParams::default(), "42").unwrap(),
            selector,
        );
        assert!(watch.uri().query().unwrap().starts_with("&watch=true&timeoutSeconds=290"), "{}", watch.uri());
        assert!(watch.uri().query().unwrap().contains("&resourceVersion=42"), "{}", watch.uri());
        assert!(watch.uri().query().unwrap().ends_with(&format!("&{encoded}")), "{}", watch.uri());
        assert!(watch.headers()[http::header::ACCEPT].to_str().unwrap().contains("PartialObjectMetadata"));
        let bare = with_shard_selector(http::Request::get("/api/v1/pods").body(Vec::new()).unwrap(), selector);
        assert_eq!(bare.uri().to_string(), format!("/api/v1/pods?{encoded}"));
    }
}
