//! Sharded informers: list and watch only this replica's shard slots, through KEP-5866's `shardSelector` where the API server applies it and a local filter always.
//!
//! kube-runtime's watcher has no `shardSelector` option, so the client's
//! middleware adds it: list and watch requests to a sharded informer's
//! collection path get `shardSelector=<the informer's current selector>`.
//! When the owned slots change, the informer's watch starts over (a relist
//! under the new selector: objects of slots given up leave the cache as
//! deletions, those of slots gained arrive as additions).
//!
//! A member owns at most `TOKENS + 1` runs of slots (`shard::assignment`),
//! so the selector names each as one hash range; were there more, it would
//! join the closest into a superset of at most [`MAX_SELECTOR_RANGES`]. The
//! local filter keeps exactly the owned slots, and does all the work on an
//! API server without the `ShardedListAndWatch` gate, which ignores the
//! parameter and sends everything.

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Request;
use http::uri::{PathAndQuery, Uri};
use parking_lot::RwLock;
use tokio::sync::watch;
use tower::{Layer, Service};

use super::spec::ShardBy;
use crate::shard::{HashRange, SlotSet, TOKENS, shard_hash};

/// Most hash ranges one selector names (a member's most runs of slots);
/// more would be joined into a superset, which the local filter narrows.
pub const MAX_SELECTOR_RANGES: usize = TOKENS + 1;

/// The field KEP-5866 hashes for `by`.
pub fn selector_field(by: ShardBy) -> &'static str {
    match by {
        ShardBy::Uid => "object.metadata.uid",
        ShardBy::Namespace => "object.metadata.namespace",
    }
}

/// The `shardSelector` for `slots`: at most `MAX_SELECTOR_RANGES` ranges
/// covering every owned slot (and, when joined, some others); `None` when
/// no slot is owned.
pub fn shard_selector(by: ShardBy, slots: &SlotSet) -> Option<String> {
    let ranges = cap_ranges(slots.hash_ranges(), MAX_SELECTOR_RANGES);
    let field = selector_field(by);
    (!ranges.is_empty()).then(|| ranges.iter().map(|r| r.selector(field)).collect::<Vec<_>>().join(" || "))
}

/// Joins the two ranges with the smallest gap between them until at most
/// `max` are left; the result covers every input range.
fn cap_ranges(mut ranges: Vec<HashRange>, max: usize) -> Vec<HashRange> {
    while ranges.len() > max.max(1) {
        let closest = (1..ranges.len())
            .min_by_key(|&i| u128::from(ranges[i].start).saturating_sub(ranges[i - 1].end))
            .expect("more than one range");
        let joined = HashRange { start: ranges[closest - 1].start, end: ranges[closest].end };
        ranges.splice(closest - 1..=closest, [joined]);
    }
    ranges
}

/// What a sharded informer's writer keeps: objects of the owned slots only.
pub struct ShardFilter {
    by: ShardBy,
    owned: SlotSet,
    /// What the selector asked the server for (a superset of `owned`).
    selected: Vec<HashRange>,
    /// Whether the server was seen sending an object outside `selected`.
    server_ignores_selector: bool,
}

/// Whether a sharded informer keeps an object it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    Yes,
    /// Outside the owned slots, as the selector's superset allows.
    OutsideOwned,
    /// Outside even what the selector asked for: the server did not filter.
    /// Said once per filter.
    NotFilteredByServer,
}

impl ShardFilter {
    pub fn new(by: ShardBy, owned: SlotSet) -> ShardFilter {
        let selected = cap_ranges(owned.hash_ranges(), MAX_SELECTOR_RANGES);
        ShardFilter { by, owned, selected, server_ignores_selector: false }
    }

    /// Whether to keep an object with this uid and namespace.
    pub fn keeps(&mut self, uid: &str, namespace: &str) -> Kept {
        let hash = shard_hash(match self.by {
            ShardBy::Uid => uid,
            ShardBy::Namespace => namespace,
        });
        if self.owned.contains_hash(hash) {
            Kept::Yes
        } else if self.selected.iter().any(|range| range.contains(hash)) || self.server_ignores_selector {
            Kept::OutsideOwned
        } else {
            self.server_ignores_selector = true;
            Kept::NotFilteredByServer
        }
    }
}

/// What a sharded informer's watch follows: the slots this replica owns
/// (`None` until it first owns some), and where its selector goes.
#[derive(Clone)]
pub struct ShardWatch {
    pub owned: watch::Receiver<Option<SlotSet>>,
    pub selectors: ShardSelectors,
}

/// Each sharded informer's current selector, by the URL path of its list
/// and watch requests; shared by the informers' watches (which set them) and
/// the client's middleware (which adds them to the requests).
#[derive(Clone, Default)]
pub struct ShardSelectors {
    by_path: Arc<RwLock<HashMap<String, String>>>,
}

impl ShardSelectors {
    /// The middleware for the client the informers watch with.
    pub fn layer(&self) -> ShardSelectorLayer {
        ShardSelectorLayer { selectors: self.clone() }
    }

    /// Requests to `path` (no query) carry `selector` from now on.
    pub fn set(&self, path: String, selector: String) {
        self.by_path.write().insert(path, selector);
    }

    /// `uri` with the selector of its path added, if it has one.
    fn apply(&self, uri: &Uri) -> Option<Uri> {
        let by_path = self.by_path.read();
        let selector = by_path.get(uri.path())?;
        let encoded: String =
            form_urlencoded::Serializer::new(String::new()).append_pair("shardSelector", selector).finish();
        let path_and_query = match uri.query() {
            Some(query) => format!("{}?{query}&{encoded}", uri.path()),
            None => format!("{}?{encoded}", uri.path()),
        };
        let mut parts = uri.clone().into_parts();
        parts.path_and_query = Some(PathAndQuery::try_from(path_and_query).ok()?);
        Uri::from_parts(parts).ok()
    }
}

#[derive(Clone)]
pub struct ShardSelectorLayer {
    selectors: ShardSelectors,
}

impl<S> Layer<S> for ShardSelectorLayer {
    type Service = ShardSelectorService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ShardSelectorService { inner, selectors: self.selectors.clone() }
    }
}

/// Adds the `shardSelector` of a sharded informer's path to GET requests
/// (lists and watches) of that path; passes everything else unchanged.
#[derive(Clone)]
pub struct ShardSelectorService<S> {
    inner: S,
    selectors: ShardSelectors,
}

impl<S, B> Service<Request<B>> for ShardSelectorService<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        if request.method() == http::Method::GET
            && let Some(uri) = self.selectors.apply(request.uri())
        {
            *request.uri_mut() = uri;
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use tower::ServiceExt;

    use super::*;
    use crate::shard::Slot;

    fn slots(indexes: impl IntoIterator<Item = usize>) -> SlotSet {
        indexes.into_iter().filter_map(Slot::new).collect()
    }

    #[test]
    fn a_selector_should_name_at_most_the_cap_of_ranges_and_cover_every_owned_slot() {
        // Every third slot: 1366 runs of one slot each.
        let owned = slots((0..4096).step_by(3));
        let selector = shard_selector(ShardBy::Uid, &owned).unwrap();
        assert_eq!(selector.matches("shardRange(object.metadata.uid, ").count(), MAX_SELECTOR_RANGES);
        let ranges = cap_ranges(owned.hash_ranges(), MAX_SELECTOR_RANGES);
        for slot in owned.iter() {
            let start = (slot.index() as u64) << 52;
            assert!(ranges.iter().any(|r| r.contains(start)), "slot {} is covered", slot.index());
        }
        assert_eq!(shard_selector(ShardBy::Namespace, &SlotSet::EMPTY), None);
        let one_run = shard_selector(ShardBy::Namespace, &slots(0..2048)).unwrap();
        assert_eq!(one_run, "shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')");
    }

    #[tokio::test]
    async fn list_and_watch_requests_of_a_sharded_path_should_carry_its_selector() {
        let selectors = ShardSelectors::default();
        selectors.set("/api/v1/namespaces/a/configmaps".into(), "shardRange(x, '0x0', '0x1')".into());
        let seen = |method: http::Method, uri: &'static str| {
            let selectors = selectors.clone();
            async move {
                let echo = tower::service_fn(|request: Request<()>| async move {
                    Ok::<_, std::convert::Infallible>(request.uri().to_string())
                });
                let request = Request::builder().method(method).uri(uri).body(()).unwrap();
                selectors.layer().layer(echo).oneshot(request).await.unwrap()
            }
        };
        let selector = "shardSelector=shardRange%28x%2C+%270x0%27%2C+%270x1%27%29";
        assert_eq!(
            seen(http::Method::GET, "/api/v1/namespaces/a/configmaps?watch=true").await,
            format!("/api/v1/namespaces/a/configmaps?watch=true&{selector}")
        );
        assert_eq!(
            seen(http::Method::GET, "/api/v1/namespaces/a/configmaps").await,
            format!("/api/v1/namespaces/a/configmaps?{selector}")
        );
        assert_eq!(
            seen(http::Method::GET, "/api/v1/namespaces/a/configmaps/x").await,
            "/api/v1/namespaces/a/configmaps/x"
        );
        assert_eq!(seen(http::Method::GET, "/api/v1/namespaces/b/configmaps").await, "/api/v1/namespaces/b/configmaps");
        assert_eq!(
            seen(http::Method::POST, "/api/v1/namespaces/a/configmaps").await,
            "/api/v1/namespaces/a/configmaps"
        );
    }
}
