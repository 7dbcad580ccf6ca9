//! `CacheService`: reads of the informer caches (GetObject, ListObjects), with waits for sync and read-your-writes.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tonic::{Request, Response, Status};

use super::convert::cached_object;
use super::page_token::Listing;
use super::pb::{self, cache_service_server::CacheService};
use super::status::ApiError;
use super::validate;
use super::workqueue_service::{MAX_GET_ANSWER_BYTES, repeated_element_len};
use crate::informer::{CacheReadError, InformerRegistry, LabelSelector, ListQuery, SharedInformer};
use crate::writes::Freshness;

/// Longest wait a read may ask for (initial list plus min_resource_version).
pub const MAX_CACHE_WAIT: Duration = Duration::from_secs(60);
/// Objects in a list page when the caller does not say.
pub const DEFAULT_PAGE_SIZE: usize = 500;
/// Most objects in one list page: bounds one response (objects are JSON of a few KiB).
pub const MAX_PAGE_SIZE: usize = 5_000;

/// The handlers; one instance serves every connection.
pub struct CacheApi {
    informers: Arc<InformerRegistry>,
    /// Reads of objects written through the sidecar wait for the cache to see the write.
    freshness: Option<Arc<Freshness>>,
}

impl CacheApi {
    pub fn new(informers: Arc<InformerRegistry>, freshness: Option<Arc<Freshness>>) -> Self {
        CacheApi { informers, freshness }
    }

    /// Waits until the cache has seen the sidecar's writes of `key` (of any
    /// object, for `None`).
    async fn await_writes(&self, informer: &SharedInformer, key: Option<&str>) -> Result<(), ApiError> {
        match &self.freshness {
            Some(freshness) => Ok(freshness.await_seen(informer, key).await?),
            None => Ok(()),
        }
    }

    /// The informer a request names.
    fn named_informer(&self, name: &str) -> Result<&Arc<SharedInformer>, ApiError> {
        if name.is_empty() {
            return Err(ApiError::invalid("informer", "must name an informer of the sidecar config"));
        }
        let informer = self.informers.informer(name)?;
        if !informer.spec().serves_cache_reads() {
            return Err(ApiError::ReadNotDeclared(name.to_owned()));
        }
        Ok(informer)
    }

    /// Waits (within `wait`) for the informer's first list and for
    /// `min_resource_version`. Called once the rest of the request was
    /// checked: a request the sidecar refuses is refused at once, not after
    /// the wait.
    async fn wait_ready(
        &self,
        informer: &SharedInformer,
        wait: Option<prost_types::Duration>,
        min_resource_version: &str,
    ) -> Result<(), ApiError> {
        let min_version = match min_resource_version {
            "" => None,
            text => Some(text.parse::<u64>().map_err(|_| CacheReadError::BadResourceVersion(text.to_owned()))?),
        };
        let wait = validate::duration("wait", wait)?.unwrap_or_default().min(MAX_CACHE_WAIT);
        let deadline = Instant::now() + wait;
        informer.wait_synced(wait).await?;
        if let Some(min) = min_version {
            informer.wait_version(min, deadline.saturating_duration_since(Instant::now())).await?;
        }
        Ok(())
    }
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl CacheService for CacheApi {
    async fn get_object(&self, request: Request<pb::GetObjectRequest>) -> Reply<pb::GetObjectResponse> {
        let req = request.into_inner();
        if req.name.is_empty() {
            return Err(ApiError::invalid("name", "must not be empty").into());
        }
        let informer = self.named_informer(&req.informer)?;
        no_namespace_if_cluster_scoped(informer, &req.informer, &req.namespace)?;
        let key = match (informer.is_namespaced(), req.namespace.is_empty()) {
            (true, true) => {
                return Err(ApiError::invalid(
                    "namespace",
                    format!("informer {:?} is namespaced: name the namespace", req.informer),
                )
                .into());
            }
            (true, false) => format!("{}/{}", req.namespace, req.name),
            (false, _) => req.name,
        };
        self.wait_ready(informer, req.wait, &req.min_resource_version).await?;
        self.await_writes(informer, Some(&key)).await?;
        let object = match informer.get(&key) {
            Some(object) => Some(cached_object(&object, false)),
            None if req.include_deleted => informer.get_deleted(&key).map(|o| cached_object(&o, true)),
            None => None,
        };
        Ok(Response::new(pb::GetObjectResponse { object, resource_version: informer.seen_version().to_string() }))
    }

    async fn list_objects(&self, request: Request<pb::ListObjectsRequest>) -> Reply<pb::ListObjectsResponse> {
        let req = request.into_inner();
        let informer = self.named_informer(&req.informer)?;
        // Refused rather than answered with an empty list, which would read
        // as "no such objects" to a caller who mistook the kind's scope.
        no_namespace_if_cluster_scoped(informer, &req.informer, &req.namespace)?;
        let selector = match req.label_selector.as_str() {
            "" => None,
            text => Some(LabelSelector::parse(text).map_err(|e| ApiError::from(CacheReadError::BadSelector(e)))?),
        };
        let listing = Listing {
            informer: &req.informer,
            namespace: &req.namespace,
            label_selector: &req.label_selector,
            index_name: &req.index_name,
            // Ignored without an index, so not part of what the token continues.
            index_value: if req.index_name.is_empty() { "" } else { &req.index_value },
        };
        let after = match req.page_token.as_str() {
            "" => None,
            token => Some(listing.continue_after(token).map_err(ApiError::from)?),
        };
        let limit = match req.page_size {
            0 => DEFAULT_PAGE_SIZE,
            n => (n as usize).min(MAX_PAGE_SIZE),
        };
        let query = ListQuery {
            namespace: Some(req.namespace.as_str()).filter(|ns| !ns.is_empty()),
            selector: selector.as_ref(),
            index: Some((req.index_name.as_str(), req.index_value.as_str())).filter(|(name, _)| !name.is_empty()),
            after,
            limit,
        };
        self.wait_ready(informer, req.wait, &req.min_resource_version).await?;
        self.await_writes(informer, None).await?;
        let page = informer.list(&query).map_err(ApiError::from)?;
        // A page ends early where the next object would take the answer past
        // what clients take (20 objects of 900 KB made 18 MB); the next one
        // starts after the last object sent.
        let (mut objects, mut bytes) = (Vec::new(), 0usize);
        let mut next_after = page.next_after;
        for object in &page.objects {
            let sent = cached_object(object, false);
            let len = repeated_element_len(&sent);
            if !objects.is_empty() && bytes.saturating_add(len) > MAX_GET_ANSWER_BYTES {
                next_after = Some(page.objects[objects.len() - 1].key.clone());
                break;
            }
            bytes = bytes.saturating_add(len);
            objects.push(sent);
        }
        Ok(Response::new(pb::ListObjectsResponse {
            objects,
            resource_version: informer.seen_version().to_string(),
            next_page_token: next_after.map(|key| listing.token_after(&key)).unwrap_or_default(),
        }))
    }
}

/// Refuses a namespace on a read of a cluster-scoped informer: its objects
/// have none, so it would select nothing.
fn no_namespace_if_cluster_scoped(informer: &SharedInformer, name: &str, namespace: &str) -> Result<(), ApiError> {
    if informer.is_namespaced() || namespace.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid("namespace", format!("informer {name:?} is cluster-scoped: leave namespace empty")))
}
