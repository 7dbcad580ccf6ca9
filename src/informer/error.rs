//! Why an informer could not start, or a cache read could not be served: two error types, so that each caller handles only what it can meet.

use std::time::Duration;

/// Why the informers could not be built from the config, named after the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum InformerStartError {
    /// The API server serves no such group, version or kind.
    #[error(
        "informer {informer:?}: the API server has no kind {kind} in {api_version}: is its \
         CustomResourceDefinition installed, and the group and version spelled as the CRD serves them?"
    )]
    UnknownKind { informer: String, api_version: String, kind: String },
    /// Discovery of the informer's group/version/kind failed otherwise.
    #[error("informer {informer:?}: discovering {api_version} {kind}: {}", crate::discovery::said(.cause))]
    Discovery {
        informer: String,
        api_version: String,
        kind: String,
        /// Said in the text, each of its causes once (not a `source`, which
        /// would repeat kube's own text of it).
        cause: Box<kube::Error>,
    },
    /// The API server refuses the informer's list for good (a selector it
    /// cannot apply, a kind that cannot be listed).
    #[error(
        "informer {informer:?}: the API server refuses its list: {reason}; check its label_selector and field_selector"
    )]
    ListRefused { informer: String, reason: String },
    /// The informer names a namespace but the resource is cluster-scoped.
    #[error("informer {informer:?}: {kind} is cluster-scoped; remove `namespace`")]
    NamespaceOnClusterScoped { informer: String, kind: String },
    /// A queue binding names a queue the config does not define.
    #[error("unknown queue {0:?}")]
    UnknownQueue(String),
    /// A queue binding names an informer the config does not define.
    #[error("unknown informer {0:?}")]
    UnknownInformer(String),
}

/// Why a read of the caches could not be served.
#[derive(Debug, thiserror::Error)]
pub enum CacheReadError {
    /// A read named an informer the config does not define.
    #[error("unknown informer {0:?}")]
    UnknownInformer(String),
    /// A read named an index the informer does not define.
    #[error("informer {informer:?} has no index {index:?}")]
    UnknownIndex { informer: String, index: String },
    /// A read's label selector does not parse.
    #[error("label_selector: {0}")]
    BadSelector(String),
    /// A read's min_resource_version is not a number.
    #[error("min_resource_version: {0:?} is not a numeric resourceVersion")]
    BadResourceVersion(String),
    /// A read's page token is not one this server handed out.
    #[error("page_token: {0:?} is not a token from a previous response")]
    BadPageToken(String),
    /// A read's page token was issued for another listing: another informer,
    /// namespace, label selector or index.
    #[error(
        "page_token: {0:?} continues another listing: pass the informer, namespace, label_selector, index_name \
         and index_value of the request that returned it"
    )]
    PageTokenOfAnotherListing(String),
    /// The informer's initial list had not finished within the wait.
    #[error("informer {informer:?} has not finished its initial list (waited {waited:?})")]
    NotSynced { informer: String, waited: Duration },
    /// The cache had not seen the asked resourceVersion within the wait.
    #[error("informer {informer:?} has seen resourceVersion {seen}, not yet {wanted} (waited {waited:?})")]
    VersionNotReached { informer: String, wanted: u64, seen: u64, waited: Duration },
    /// A write through the sidecar of the object read had not reached the
    /// cache within the stale-read guard's bound.
    #[error(
        "informer {informer:?} has not yet seen the write of {key:?} through the sidecar ({expected}, waited {waited:?})"
    )]
    WriteNotSeen { informer: String, key: String, expected: String, waited: Duration },
}
