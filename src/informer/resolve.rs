//! An informer resolved at start: its kind found by discovery and one small list tried, waiting while the API server cannot answer.
//!
//! Both happen before any port is bound, so that what the API server will
//! always refuse (a kind it does not serve, a field selector on a field it
//! cannot select by) stops the start with the config's exit status, while an
//! API server that is down, restarting or not yet reachable is waited for,
//! as client-go's informers wait, instead of looking like a bad config.

use std::future::Future;
use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::discovery::{ApiCapabilities, Scope};
use tracing::warn;

use super::backoff::WatchBackoff;
use super::error::InformerStartError;
use super::spec::InformerSpec;
use crate::discovery::{is_refused_access, is_transient, is_unknown_kind, said};

/// The longest one attempt at start waits for its answer: an API server that
/// accepts the connection and then says nothing is tried again, and said so.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// The informer's resource and whether it is namespaced, found by discovery.
pub(super) async fn discover(client: &Client, spec: &InformerSpec) -> Result<(ApiResource, bool), InformerStartError> {
    let gvk = GroupVersionKind::gvk(&spec.group, &spec.version, &spec.kind);
    let found =
        until_answered(spec, "discovering its kind", is_transient, || kube::discovery::pinned_kind(client, &gvk)).await;
    let (resource, capabilities): (ApiResource, ApiCapabilities) = found.map_err(|source| {
        if is_unknown_kind(&source) {
            InformerStartError::UnknownKind {
                informer: spec.name.clone(),
                api_version: spec.api_version(),
                kind: spec.kind.clone(),
            }
        } else {
            InformerStartError::Discovery {
                informer: spec.name.clone(),
                api_version: spec.api_version(),
                kind: spec.kind.clone(),
                cause: Box::new(source),
            }
        }
    })?;
    Ok((resource, capabilities.scope == Scope::Namespaced))
}

/// Lists one object's metadata as the informer will list, with its
/// selectors, to learn whether the API server accepts them. A list it is
/// forbidden is let through with a warning: its permission may be granted
/// after the pod starts, and the informer retries until it is.
pub(super) async fn try_list(
    client: &Client,
    spec: &InformerSpec,
    resource: &ApiResource,
    namespaced: bool,
) -> Result<(), InformerStartError> {
    let api: Api<DynamicObject> = match spec.namespace.as_deref().filter(|_| namespaced) {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let params = ListParams {
        label_selector: spec.label_selector.clone(),
        field_selector: spec.field_selector.clone(),
        limit: Some(1),
        ..ListParams::default()
    };
    match until_answered(spec, "trying its list", is_transient, || api.list_metadata(&params)).await {
        Ok(_) => Ok(()),
        Err(err) if is_refused_access(&err) => {
            warn!(informer = %spec.name, error = %said(&err), "the API server refuses this informer's list for now; its cache waits until it is allowed");
            Ok(())
        }
        Err(err) => Err(InformerStartError::ListRefused { informer: spec.name.clone(), reason: said(&err) }),
    }
}

/// Why an attempt at start is tried again.
enum Unanswered {
    /// The API server's error (or the connection's), one to wait out.
    Failed(kube::Error),
    /// No answer within [`ATTEMPT_TIMEOUT`].
    Silent,
}

impl std::fmt::Display for Unanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unanswered::Failed(err) => f.write_str(&said(err)),
            // Worded as when a silence was carried as kube's
            // `Error::Service`, so that the line reads as it always did.
            Unanswered::Silent => write!(f, "ServiceError: no answer within {ATTEMPT_TIMEOUT:?}"),
        }
    }
}

/// `attempt`'s answer, tried again with backoff (a line each time) while
/// its error is one to wait out (`retried`) or it does not answer at all.
async fn until_answered<T, F>(
    spec: &InformerSpec,
    step: &'static str,
    retried: impl Fn(&kube::Error) -> bool,
    mut attempt: impl FnMut() -> F,
) -> Result<T, kube::Error>
where
    F: Future<Output = Result<T, kube::Error>>,
{
    let mut backoff = WatchBackoff::new();
    loop {
        let unanswered = match tokio::time::timeout(ATTEMPT_TIMEOUT, attempt()).await {
            Ok(Err(err)) if retried(&err) => Unanswered::Failed(err),
            Ok(answer) => return answer,
            Err(_) => Unanswered::Silent,
        };
        let wait = backoff.next().expect("the backoff never ends");
        warn!(informer = %spec.name, step, error = %unanswered, retry_in = ?wait, "waiting for the API server");
        tokio::time::sleep(wait).await;
    }
}
