//! apiVersion and kind to the API resource that serves them and its scope, by the API server's discovery, remembered once found.

use std::collections::HashMap;

use kube::Client;
use kube::api::{ApiResource, GroupVersionKind};
use kube::discovery::Scope;
use parking_lot::RwLock;

use super::error::WriteError;
use crate::discovery::is_unknown_kind;

/// A kind as a request names it, parsed: apiVersion split into group and version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KindRef {
    pub api_version: String,
    pub group: String,
    pub version: String,
    pub kind: String,
}

impl KindRef {
    /// `api_version` is `v1` (the core group) or `group/version`.
    pub fn parse(api_version: &str, kind: &str) -> Result<KindRef, WriteError> {
        let bad = |field, problem: &str| Err(WriteError::BadRequest { field, problem: problem.to_owned() });
        let (group, version) = match api_version.split_once('/') {
            Some((group, version)) => (group, version),
            None => ("", api_version),
        };
        if version.is_empty() || version.contains('/') || (api_version.contains('/') && group.is_empty()) {
            return bad("type.api_version", "must be \"v1\" or \"group/version\", e.g. \"apps/v1\"");
        }
        if kind.is_empty() {
            return bad("type.kind", "must name a kind, e.g. \"ConfigMap\"");
        }
        Ok(KindRef {
            api_version: api_version.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
        })
    }
}

/// What discovery found for a kind.
#[derive(Debug, Clone)]
pub struct ResolvedKind {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// Kinds found so far. A kind not found is asked again next time: its CRD
/// may be installed meanwhile.
pub struct Kinds {
    client: Client,
    found: RwLock<HashMap<KindRef, ResolvedKind>>,
}

impl Kinds {
    pub fn new(client: Client) -> Self {
        Kinds { client, found: RwLock::new(HashMap::new()) }
    }

    pub async fn resolve(&self, kind: &KindRef) -> Result<ResolvedKind, WriteError> {
        if let Some(resolved) = self.found.read().get(kind) {
            return Ok(resolved.clone());
        }
        let gvk = GroupVersionKind::gvk(&kind.group, &kind.version, &kind.kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.client, &gvk).await.map_err(|err| {
            if is_unknown_kind(&err) {
                WriteError::UnknownKind { api_version: kind.api_version.clone(), kind: kind.kind.clone() }
            } else {
                WriteError::from_kube(err)
            }
        })?;
        let resolved = ResolvedKind { resource, namespaced: capabilities.scope == Scope::Namespaced };
        self.found.write().insert(kind.clone(), resolved.clone());
        Ok(resolved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_versions_should_parse_into_group_and_version_or_be_refused_by_field() {
        let core = KindRef::parse("v1", "ConfigMap").unwrap();
        assert_eq!((core.group.as_str(), core.version.as_str()), ("", "v1"));
        let apps = KindRef::parse("apps/v1", "Deployment").unwrap();
        assert_eq!((apps.group.as_str(), apps.version.as_str()), ("apps", "v1"));
        for bad in ["", "/v1", "apps/", "a/b/c"] {
            let err = KindRef::parse(bad, "X").unwrap_err();
            assert!(err.to_string().starts_with("type.api_version: "), "{bad:?}: {err}");
        }
        assert!(KindRef::parse("v1", "").unwrap_err().to_string().starts_with("type.kind: "));
    }
}
