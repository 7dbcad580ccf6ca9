//! An informer's list and watch: one list (streaming where the API server serves it, else in pages; in pages once after a streaming list failed), a watch from its version with bookmarks, a relist after 410 Gone; for a sharded informer, on each change of the owned slots only the difference: objects of slots given up leave the cache, only the slots gained are listed (at the watch's version exactly), and the watch resumes from that version under the new selector.
//!
//! The requests are this loop's own, and what they answer is read as text:
//! a list page's items and a watch event's object stay JSON until
//! `Shaping` parses their metadata, so no object is ever built as a tree.
//! (kube-runtime's watcher decodes every object it hands over, and cannot
//! resume from a version of one's choosing under a new selector.) A
//! built-in kind is asked for as protobuf, as client-go asks: the API
//! server writes it faster and smaller, and each object is written here as
//! the JSON client-go would write of it. Protobuf this sidecar cannot read
//! in full (a field newer than its table) sends the informer back to JSON
//! for good, listing again: nothing is dropped in silence.
//!
//! A sharded informer puts the `shardSelector` of its owned slots in each
//! request. Its whole share is listed as a streaming list where the API
//! server serves them (objects one by one; pages of 500 held whole cost a
//! replica about 9 MiB more at 30,000 objects), else in pages; the gained
//! slots in pages (a list at an exact version cannot stream). Listing the
//! gained slots at exactly the version the watch stopped at is what makes
//! the resumed watch complete: every object of the new share is in the
//! cache as of that version, and the watch sends every change after it.
//!
//! A streaming list that fails (most often cut short: the API server closes
//! a watcher that does not keep up with its objects and the changes arriving
//! meanwhile) is followed by a list in pages, a snapshot the server does not
//! cut for slowness, as client-go's reflector falls back: asked again as a
//! stream, a slow replica under steady churn could be cut every time.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::pending;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::api::{DynamicObject, ListParams, VersionMatch, WatchParams};
use kube::core::{Request, Status};
use kube::runtime::utils::Backoff;
use kube::{Client, Resource};
use serde_json::value::RawValue;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::api_answer::{self, Answer, Frames, Lines};
use super::backoff::WatchBackoff;
use super::object::CachedObject;
use super::protobuf::{self, ProtobufError, ProtobufKind};
use super::shard_watch::{ShardFilter, shard_selector};
use super::spec::ShardBy;
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

/// Runs an informer's list and watch until the task is aborted. For a
/// sharded informer (`owned`: the slots this replica owns), nothing is
/// listed until some slots are owned; then as the module says. An owned set
/// that becomes empty leaves the cache and watch as they are (nothing is
/// granted from them anyway).
pub async fn run(
    writer: InformerWriter,
    client: Client,
    streaming: bool,
    owned: Option<watch::Receiver<Option<SlotSet>>>,
) {
    ListWatch::new(writer, client, streaming, owned).run().await
}

/// What an informer lists and watches.
enum Share {
    /// Every object its selectors match.
    Whole,
    /// The objects of the slots this replica owns.
    Slots { by: ShardBy, owned: watch::Receiver<Option<SlotSet>> },
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
    /// An answer in protobuf could not be read in full: read JSON from now
    /// on, and list again.
    Protobuf(ProtobufError),
}

/// One page of a list, its items left as JSON text.
#[derive(serde::Deserialize)]
struct ListPage<'a> {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(borrow, default)]
    items: Option<Vec<&'a RawValue>>,
}

struct ListWatch {
    writer: InformerWriter,
    client: Client,
    share: Share,
    /// Whether the API server serves streaming lists (`sendInitialEvents`).
    streaming: bool,
    /// The last streaming list failed: the next list is in pages.
    pages_next: bool,
    request: Request,
    /// The informer's kind, while its answers are asked for as protobuf (a
    /// built-in kind, not metadata-only); `None`: JSON.
    protobuf: Option<ProtobufKind>,
    backoff: WatchBackoff,
    resync: Option<tokio::time::Interval>,
}

impl ListWatch {
    fn new(
        writer: InformerWriter,
        client: Client,
        streaming: bool,
        owned: Option<watch::Receiver<Option<SlotSet>>>,
    ) -> Self {
        let informer = writer.informer().clone();
        let spec = informer.spec();
        let share = match owned {
            None => Share::Whole,
            Some(owned) => {
                let by = spec.shard_by.expect("only a sharded informer follows owned slots");
                Share::Slots { by, owned }
            }
        };
        let namespace = spec.namespace.as_deref().filter(|_| informer.is_namespaced());
        let request = Request::new(DynamicObject::url_path(informer.resource(), namespace));
        let resync = spec.resync.map(resync_ticks);
        let resource = informer.resource();
        let protobuf = ProtobufKind::of(&resource.api_version, &resource.kind).filter(|_| !spec.metadata_only);
        ListWatch {
            writer,
            client,
            share,
            streaming,
            pages_next: false,
            request,
            protobuf,
            backoff: WatchBackoff::new(),
            resync,
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

    /// The slots owned now, once some are (all of them for a whole share);
    /// `None` when the sender is gone.
    async fn owned_now(&mut self) -> Option<SlotSet> {
        match &mut self.share {
            Share::Whole => Some(SlotSet::FULL),
            Share::Slots { owned, .. } => {
                let owned = owned.wait_for(|owned| matches!(owned, Some(s) if !s.is_empty())).await.ok()?;
                *owned
            }
        }
    }

    /// The `shardSelector` for `slots`; none for a whole share.
    fn selector(&self, slots: &SlotSet) -> Option<String> {
        match &self.share {
            Share::Whole => None,
            Share::Slots { by, .. } => Some(shard_selector(*by, slots).expect("some slot is owned")),
        }
    }

    /// After a list or watch stopped: what the next round starts from.
    async fn stopped(&mut self, stop: Stop, version: &mut Option<String>) {
        let informer = self.writer.informer().clone();
        match stop {
            Stop::OwnedChanged | Stop::Closed => {}
            Stop::Expired => {
                info!(informer = %informer.name(), "watch version too old (410 Gone): listing again");
                *version = None;
            }
            Stop::Protobuf(err) => {
                warn!(informer = %informer.name(), %err, "cannot read this kind's protobuf: reading JSON from now on, listing again");
                self.protobuf = None;
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
        let streaming = self.streaming && !self.pages_next;
        if let Share::Slots { by, .. } = &self.share {
            self.writer.filter_shards(ShardFilter::new(*by, owned));
            info!(informer = %informer.name(), slots = owned.len(), streaming, "listing this replica's shard slots");
        } else {
            debug!(informer = %informer.name(), streaming, "list started");
        }
        let selector = self.selector(&owned);
        self.writer.on_init();
        let version = if streaming {
            let listed = self.stream_list(selector.as_deref()).await;
            if matches!(listed, Err(Stop::Failed(_))) {
                info!(informer = %informer.name(), "the streaming list failed: the next list is in pages");
                self.pages_next = true;
            }
            listed?
        } else {
            let listed = self.list(selector.as_deref(), None).await?;
            self.pages_next = false;
            listed
        };
        self.writer.on_list_done();
        self.writer.on_current_at(&version);
        info!(informer = %informer.name(), objects = informer.len(), "informer synced");
        Ok(version)
    }

    /// From the cache of `listed` as of `at` to that of `owned` as of `at`:
    /// drops the objects of slots given up, lists those of slots gained.
    async fn follow(&mut self, listed: SlotSet, owned: SlotSet, at: &str) -> Result<(), Stop> {
        let Share::Slots { by, .. } = &self.share else { return Ok(()) };
        let informer = self.writer.informer().clone();
        let gained = owned.difference(&listed);
        let lost = listed.difference(&owned);
        self.writer.filter_shards(ShardFilter::new(*by, owned));
        let dropped = if lost.is_empty() { 0 } else { self.writer.drop_objects_not_kept() };
        if gained.is_empty() {
            info!(informer = %informer.name(), slots_lost = lost.len(), objects_dropped = dropped, "shard slots given up");
            return Ok(());
        }
        let before = informer.len();
        self.list(self.selector(&gained).as_deref(), Some(at)).await?;
        self.writer.on_current_at(at);
        info!(
            informer = %informer.name(),
            slots_gained = gained.len(),
            slots_lost = lost.len(),
            objects_listed = informer.len() - before,
            objects_dropped = dropped,
            "listed only the shard slots gained"
        );
        Ok(())
    }

    /// Lists every page (under `selector`, when given) into the cache, at
    /// version `at` exactly when given (else the newest); returns the
    /// list's version.
    async fn list(&mut self, selector: Option<&str>, at: Option<&str>) -> Result<String, Stop> {
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
                if spec.metadata_only { self.request.list_metadata(&params) } else { self.request.list(&params) }
                    .map_err(|err| Stop::Failed(kube::Error::BuildRequest(err)))?;
            let answer =
                api_answer::send(&self.client, with_shard_selector(request, selector), self.protobuf.is_some())
                    .await
                    .map_err(stop_for)?;
            let protobuf = self.protobuf.filter(|_| answer.is_protobuf());
            let text = answer.bytes().await.map_err(Stop::Failed)?;
            let page = match protobuf {
                Some(kind) => {
                    let page = protobuf::ListPage::read(&text).map_err(Stop::Protobuf)?;
                    kind.check_envelope(page.kind, true).map_err(Stop::Protobuf)?;
                    self.take_listed(page.items.iter().map(|item| Sent::Protobuf(item, kind)).collect())?;
                    (page.continue_token, page.resource_version)
                }
                None => {
                    let page: ListPage =
                        serde_json::from_slice(&text).map_err(|err| Stop::Failed(kube::Error::SerdeError(err)))?;
                    let items = page.items.unwrap_or_default();
                    self.take_listed(items.iter().map(|item| Sent::Json(item.get().as_bytes())).collect())?;
                    let meta = page.metadata;
                    (meta.continue_.unwrap_or_default(), meta.resource_version.unwrap_or_default())
                }
            };
            match page {
                (token, _) if !token.is_empty() => {
                    // The token carries the version: a page after the first names none.
                    params.continue_token = Some(token);
                    params.resource_version = None;
                    params.version_match = None;
                }
                (_, version) => return Ok(version),
            }
        }
    }

    /// Puts one page's objects into the cache.
    fn take_listed(&mut self, items: Vec<Sent<'_>>) -> Result<(), Stop> {
        let informer = self.writer.informer();
        informer.on_watch_progress();
        self.backoff.reset();
        informer.count_listed(items.len());
        for item in items {
            if let Some(object) = self.shape(item)? {
                self.writer.on_listed(object);
            }
        }
        Ok(())
    }

    /// An object as the informer stores it; `None` when it cannot be (counted as dropped).
    fn shape(&self, sent: Sent<'_>) -> Result<Option<CachedObject>, Stop> {
        match sent {
            Sent::Json(text) => Ok(self.writer.shape(text)),
            Sent::Protobuf(message, kind) => {
                self.writer.informer().count_protobuf(1);
                self.writer.shape_protobuf(kind, message).map_err(Stop::Protobuf)
            }
        }
    }

    /// A watch request with the informer's own selectors and bookmarks,
    /// from `version`; with `initial_events`, a streaming list.
    fn watch_request(
        &self,
        selector: Option<&str>,
        version: &str,
        initial_events: bool,
    ) -> Result<http::Request<Vec<u8>>, Stop> {
        let spec = self.writer.informer().spec();
        let params = WatchParams {
            label_selector: spec.label_selector.clone(),
            field_selector: spec.field_selector.clone(),
            timeout: Some(WATCH_SECONDS),
            bookmarks: true,
            send_initial_events: initial_events,
        };
        let request = if spec.metadata_only {
            self.request.watch_metadata(&params, version)
        } else {
            self.request.watch(&params, version)
        };
        request
            .map(|request| with_shard_selector(request, selector))
            .map_err(|err| Stop::Failed(kube::Error::BuildRequest(err)))
    }

    /// Lists every object (under `selector`, when given) into the cache as
    /// a streaming list: a watch that sends the current objects first, then
    /// a bookmark marking their end, whose version it returns.
    async fn stream_list(&mut self, selector: Option<&str>) -> Result<String, Stop> {
        let informer = self.writer.informer().clone();
        let request = self.watch_request(selector, "", true)?;
        let answer = api_answer::send(&self.client, request, self.protobuf.is_some()).await.map_err(stop_for)?;
        let mut events = Events::new(answer, self.protobuf);
        informer.on_watch_progress();
        while let Some(event) = events.next().await {
            informer.on_watch_progress();
            self.backoff.reset();
            let Some(event) = event? else { continue };
            match event {
                Event::Applied(object) => {
                    informer.count_listed(1);
                    if let Some(object) = self.shape(object)? {
                        self.writer.on_listed(object);
                    }
                }
                // Gone before the list ended: the relist's end deletes it.
                Event::Deleted(_) => {}
                Event::Bookmark { resource_version, initial_events_end: true } => return Ok(resource_version),
                Event::Bookmark { .. } => {}
                Event::Error(status) if status.code == 410 => return Err(Stop::Expired),
                Event::Error(status) => return Err(Stop::Failed(kube::Error::Api(status))),
            }
        }
        // Ended before its bookmark: a failure (listed again in pages after
        // the backoff), not a watch ending on time, lest a server that keeps
        // cutting the list short be asked again at once, forever.
        let cut =
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the streaming list ended before its end bookmark");
        Err(Stop::Failed(kube::Error::ReadEvents(cut)))
    }

    /// Watches `listed` from version `at`, moving `at` along with every
    /// event and bookmark, until something stops it; runs the resync timer
    /// meanwhile.
    async fn watch(&mut self, listed: &SlotSet, at: &mut String) -> Stop {
        let informer = self.writer.informer().clone();
        let selector = self.selector(listed);
        let request = match self.watch_request(selector.as_deref(), at, false) {
            Ok(request) => request,
            Err(stop) => return stop,
        };
        debug!(informer = %informer.name(), version = %at, "watching");
        let mut events = match api_answer::send(&self.client, request, self.protobuf.is_some()).await {
            Ok(answer) => Events::new(answer, self.protobuf),
            Err(err) => return stop_for(err),
        };
        // Answered: the watch is back, and the cache current, even if
        // nothing changes for a while and no event comes.
        informer.on_watch_progress();
        loop {
            let listed = *listed;
            let event = tokio::select! {
                event = events.next() => event,
                changed = owned_changed(&mut self.share, listed) => {
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
                Some(Err(stop)) => return stop,
                Some(Ok(None)) => continue,
                Some(Ok(Some(event))) => event,
            };
            informer.on_watch_progress();
            self.backoff.reset();
            let (object, deleted) = match event {
                Event::Applied(object) => (object, false),
                Event::Deleted(object) => (object, true),
                Event::Bookmark { resource_version, .. } => {
                    self.writer.on_current_at(&resource_version);
                    *at = resource_version;
                    continue;
                }
                Event::Error(status) if status.code == 410 => return Stop::Expired,
                Event::Error(status) => return Stop::Failed(kube::Error::Api(status)),
            };
            let object = match self.shape(object) {
                Ok(Some(object)) => object,
                Ok(None) => continue,
                Err(stop) => return stop,
            };
            at.clear();
            // Writing to a String cannot fail.
            let _ = write!(at, "{}", object.meta.resource_version);
            if deleted { self.writer.on_deleted(object) } else { self.writer.on_applied(object) }
        }
    }
}

/// Whether the owned slots became some other than `listed`; false when the
/// sender is gone; never, for a whole share.
async fn owned_changed(share: &mut Share, listed: SlotSet) -> bool {
    match share {
        Share::Whole => pending().await,
        Share::Slots { owned, .. } => {
            owned.wait_for(|owned| matches!(owned, Some(s) if !s.is_empty() && *s != listed)).await.is_ok()
        }
    }
}

/// Ticks every `period`, the first a period from now; a late tick delays
/// the next rather than bunching.
fn resync_ticks(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// The next resync tick; never, without a resync period.
async fn tick(resync: &mut Option<tokio::time::Interval>) {
    match resync {
        Some(ticks) => {
            ticks.tick().await;
        }
        None => pending().await,
    }
}

/// An object as the API server sent it.
#[derive(Clone, Copy)]
enum Sent<'a> {
    Json(&'a [u8]),
    /// A built-in kind's message.
    Protobuf(&'a [u8], ProtobufKind),
}

impl Sent<'_> {
    /// The object as JSON (written from protobuf, for a bookmark or an error).
    fn json(&self) -> Result<Cow<'_, [u8]>, Stop> {
        match self {
            Sent::Json(text) => Ok(Cow::Borrowed(text)),
            Sent::Protobuf(message, kind) => kind.to_json(message).map(Cow::Owned).map_err(Stop::Protobuf),
        }
    }
}

/// One watch event.
enum Event<'a> {
    /// Added or modified.
    Applied(Sent<'a>),
    Deleted(Sent<'a>),
    Bookmark {
        resource_version: String,
        /// The bookmark that ends a streaming list's objects.
        initial_events_end: bool,
    },
    Error(Box<Status>),
}

/// A watch answer's events, read as the server wrote them.
enum Events {
    Json(Lines),
    /// The frames and the informer's kind.
    Protobuf(Frames, ProtobufKind),
}

impl Events {
    /// Protobuf frames when protobuf was asked for (`kind`) and answered.
    fn new(answer: Answer, kind: Option<ProtobufKind>) -> Self {
        match kind {
            Some(kind) if answer.is_protobuf() => Events::Protobuf(answer.frames(), kind),
            _ => Events::Json(answer.lines()),
        }
    }

    /// The next event (`None` inside for a blank line); `None` once the
    /// answer has ended.
    async fn next(&mut self) -> Option<Result<Option<Event<'_>>, Stop>> {
        match self {
            Events::Json(lines) => match lines.next().await? {
                Ok(line) => Some(json_event(line)),
                Err(err) => Some(Err(Stop::Failed(err))),
            },
            Events::Protobuf(frames, kind) => {
                let kind = *kind;
                let frame = match frames.next().await? {
                    Ok(frame) => frame,
                    Err(err) => return Some(Err(Stop::Failed(err))),
                };
                Some(protobuf_event(frame, kind).map(Some))
            }
        }
    }
}

/// One line of a JSON watch: its event; `None` for a blank line. A line
/// that is not an event but a `Status` is the error it carries.
fn json_event(line: &[u8]) -> Result<Option<Event<'_>>, Stop> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let not_an_event = |err: serde_json::Error| match serde_json::from_slice::<Status>(line) {
        Ok(status) => Stop::Failed(kube::Error::Api(status.boxed())),
        Err(_) => Stop::Failed(kube::Error::SerdeError(err)),
    };
    let event = serde_json::from_slice::<JsonEvent>(line).map_err(not_an_event)?;
    event_of(&event.kind, Sent::Json(event.object.get().as_bytes())).map(Some)
}

/// One frame of a protobuf watch: its event.
fn protobuf_event(frame: &[u8], kind: ProtobufKind) -> Result<Event<'_>, Stop> {
    let event = protobuf::WatchEvent::read(frame).map_err(Stop::Protobuf)?;
    let type_ = String::from_utf8_lossy(event.kind);
    let kind = if type_ == "ERROR" { ProtobufKind::status() } else { kind };
    kind.check_envelope(event.object.kind, false).map_err(Stop::Protobuf)?;
    event_of(&type_, Sent::Protobuf(event.object.raw, kind))
}

/// A watch event as JSON sends it, its object left as text.
#[derive(serde::Deserialize)]
struct JsonEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    object: &'a RawValue,
}

/// What a bookmark's object says.
#[derive(serde::Deserialize)]
struct BookmarkObject {
    metadata: BookmarkMeta,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

/// The event of type `type_` whose object is `object`.
fn event_of<'a>(type_: &str, object: Sent<'a>) -> Result<Event<'a>, Stop> {
    let unreadable = |err: serde_json::Error| Stop::Failed(kube::Error::SerdeError(err));
    Ok(match type_ {
        "ADDED" | "MODIFIED" => Event::Applied(object),
        "DELETED" => Event::Deleted(object),
        "BOOKMARK" => {
            let json = object.json()?;
            let BookmarkMeta { resource_version, annotations } =
                serde_json::from_slice::<BookmarkObject>(&json).map_err(unreadable)?.metadata;
            let initial_events_end =
                annotations.is_some_and(|annotations| annotations.contains_key(INITIAL_EVENTS_END));
            Event::Bookmark { resource_version, initial_events_end }
        }
        "ERROR" => Event::Error(Box::new(serde_json::from_slice(&object.json()?).map_err(unreadable)?)),
        other => {
            let unknown = format!("a watch event of unknown type {other:?}");
            return Err(unreadable(serde::de::Error::custom(unknown)));
        }
    })
}

/// 410 Gone means the version asked for is compacted away; anything else is
/// a failure to retry.
fn stop_for(err: kube::Error) -> Stop {
    match &err {
        kube::Error::Api(status) if status.code == 410 => Stop::Expired,
        _ => Stop::Failed(err),
    }
}

/// `request` with `shardSelector=<selector>` added to its query, when there is one.
fn with_shard_selector(mut request: http::Request<Vec<u8>>, selector: Option<&str>) -> http::Request<Vec<u8>> {
    let Some(selector) = selector else { return request };
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
        let list = with_shard_selector(request.list(&params).unwrap(), Some(selector));
        assert_eq!(list.uri().to_string(), format!("/api/v1/namespaces/a/configmaps?&limit=500&{encoded}"));
        let watch = with_shard_selector(request.watch_metadata(&WatchParams::default(), "42").unwrap(), Some(selector));
        assert!(watch.uri().query().unwrap().starts_with("&watch=true&timeoutSeconds=290"), "{}", watch.uri());
        assert!(watch.uri().query().unwrap().contains("&resourceVersion=42"), "{}", watch.uri());
        assert!(watch.uri().query().unwrap().ends_with(&format!("&{encoded}")), "{}", watch.uri());
        assert!(watch.headers()[http::header::ACCEPT].to_str().unwrap().contains("PartialObjectMetadata"));
        let bare = with_shard_selector(http::Request::get("/api/v1/pods").body(Vec::new()).unwrap(), Some(selector));
        assert_eq!(bare.uri().to_string(), format!("/api/v1/pods?{encoded}"));
        let whole = with_shard_selector(request.list(&params).unwrap(), None);
        assert_eq!(whole.uri().to_string(), "/api/v1/namespaces/a/configmaps?&limit=500");
    }
}
