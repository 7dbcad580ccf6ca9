//! Writes to the API server for remote workers: server-side apply, patches, creates and deletes of any kind, found through discovery.
//!
//! - [`kinds`]: apiVersion and kind to the API resource and its scope, by discovery, remembered.
//! - [`error`]: why a write failed, sorted from what the Kubernetes client said.
//! - [`finalizer`]: a declared finalizer added to or removed from an object, guarded by its resourceVersion.
//! - [`write_slots`]: the bound on writes out to the API server at once.
//! - [`write_policy`]: what workers may write: the config's declared writes.
//!
//! Requests arrive parsed (see `grpc/object_service.rs`), and every write is
//! made through `writes`, which declares, fences, bounds and notes it: the
//! JSON is a `serde_json` value, the patch a JSON merge or JSON patch value.

mod error;
mod finalizer;
mod kinds;
mod write_policy;
mod write_slots;

use std::ops::Deref;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy};
use serde_json::Value;
use tokio::sync::SemaphorePermit;

pub use error::{Cause, Refusal, WriteError};
pub use finalizer::FinalizerChange;
pub use kinds::KindRef;
use kinds::Kinds;
pub use write_policy::{WriteDenied, WritePolicy, WriteRule, WriteVerb};
use write_slots::WriteSlots;
pub use write_slots::{BodyBytes, MAX_WRITE_BYTES_OUT, MAX_WRITES_OUT};

/// One object of one kind: where a write goes.
#[derive(Debug, Clone)]
pub struct ObjectRef {
    pub kind: KindRef,
    /// `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    pub name: String,
}

/// A patch, parsed.
#[derive(Debug, Clone)]
pub enum PatchBody {
    /// JSON merge patch (RFC 7386).
    Merge(Value),
    /// JSON patch (RFC 6902).
    Json(json_patch::Patch),
}

/// What becomes of the objects a deleted object owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// The resource's own default.
    #[default]
    Default,
    Background,
    Foreground,
    Orphan,
}

/// Conditions and consequences of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Delete only if the object still has this UID.
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
    pub propagation: Propagation,
}

/// What a delete did.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone; the resourceVersion of its final state, when the
    /// API server answered with it.
    Gone(Option<u64>),
    /// The object stays, marked for deletion, until whatever holds it lets go (finalizers, a grace period).
    Pending(Box<DynamicObject>),
}

/// Writes objects with the sidecar's client; one instance serves every request.
pub struct ObjectWriter {
    client: Client,
    kinds: Kinds,
    /// Used when a request names no field manager.
    field_manager: String,
    /// Every write, from its first request to its answer, holds one.
    slots: WriteSlots,
}

impl ObjectWriter {
    /// A writer with at most [`MAX_WRITES_OUT`] writes out at once.
    pub fn new(client: Client, field_manager: String) -> Self {
        Self::with_max_out(client, field_manager, MAX_WRITES_OUT)
    }

    /// A writer with at most `max_out` writes out at once; the next is refused
    /// ([`WriteError::TooManyOut`]) until one has its answer.
    pub fn with_max_out(client: Client, field_manager: String, max_out: usize) -> Self {
        ObjectWriter { kinds: Kinds::new(client.clone()), client, field_manager, slots: WriteSlots::new(max_out) }
    }

    /// Server-side apply of `object`, which names the fields to own. Missing
    /// apiVersion, kind, name and namespace are filled in from `target`;
    /// different ones are refused.
    pub async fn apply(
        &self,
        target: &ObjectRef,
        mut object: Value,
        field_manager: Option<&str>,
        force: bool,
    ) -> Result<DynamicObject, WriteError> {
        let api = self.api(&target.kind, target.namespace.as_deref()).await?;
        fill_identity(&mut object, &target.kind, target.namespace.as_deref(), Some(&target.name))?;
        let mut params = PatchParams::apply(field_manager.unwrap_or(&self.field_manager));
        params.force = force;
        api.patch(&target.name, &params, &Patch::Apply(object)).await.map_err(WriteError::from_kube)
    }

    /// Patches the object, or its status subresource.
    pub async fn patch(
        &self,
        target: &ObjectRef,
        patch: PatchBody,
        status: bool,
        field_manager: Option<&str>,
    ) -> Result<DynamicObject, WriteError> {
        let api = self.api(&target.kind, target.namespace.as_deref()).await?;
        let params = PatchParams { field_manager: Some(self.manager(field_manager)), ..PatchParams::default() };
        let patch: Patch<Value> = match patch {
            PatchBody::Merge(value) => Patch::Merge(value),
            PatchBody::Json(operations) => Patch::Json(operations),
        };
        let written = match status {
            false => api.patch(&target.name, &params, &patch).await,
            true => api.patch_status(&target.name, &params, &patch).await,
        };
        written.map_err(WriteError::from_kube)
    }

    /// Creates `object` (a name or a generateName in its metadata).
    pub async fn create(
        &self,
        kind: &KindRef,
        namespace: Option<&str>,
        mut object: Value,
        field_manager: Option<&str>,
    ) -> Result<DynamicObject, WriteError> {
        let api = self.api(kind, namespace).await?;
        fill_identity(&mut object, kind, namespace, None)?;
        let object: DynamicObject = serde_json::from_value(object)
            .map_err(|err| WriteError::BadRequest { field: "json", problem: format!("is not an object: {err}") })?;
        let params = PostParams { field_manager: Some(self.manager(field_manager)), ..PostParams::default() };
        api.create(&params, &object).await.map_err(WriteError::from_kube)
    }

    /// Deletes the object; it may stay, marked, while finalizers hold it.
    pub async fn delete(&self, target: &ObjectRef, options: DeleteOptions) -> Result<Deleted, WriteError> {
        let api = self.api(&target.kind, target.namespace.as_deref()).await?;
        let preconditions = (options.uid.is_some() || options.resource_version.is_some())
            .then_some(Preconditions { uid: options.uid, resource_version: options.resource_version });
        let propagation_policy = match options.propagation {
            Propagation::Default => None,
            Propagation::Background => Some(PropagationPolicy::Background),
            Propagation::Foreground => Some(PropagationPolicy::Foreground),
            Propagation::Orphan => Some(PropagationPolicy::Orphan),
        };
        let params = DeleteParams { preconditions, propagation_policy, ..DeleteParams::default() };
        // The API server answers the object itself when it stays behind
        // finalizers (or for foreground deletion), a Status or the final
        // state when it is gone at once.
        match api.delete(&target.name, &params).await.map_err(WriteError::from_kube)?.left() {
            Some(object) if is_pending(&object) => Ok(Deleted::Pending(Box::new(object))),
            Some(object) => Ok(Deleted::Gone(object.metadata.resource_version.and_then(|v| v.parse().ok()))),
            None => Ok(Deleted::Gone(None)),
        }
    }

    /// A share of the bytes out for a write body of `bytes`, held until the
    /// write has its answer: taken before the body is parsed.
    pub fn reserve_body(&self, bytes: usize) -> Result<BodyBytes, WriteError> {
        self.slots.reserve_body(bytes)
    }

    fn manager(&self, asked: Option<&str>) -> String {
        asked.unwrap_or(&self.field_manager).to_owned()
    }

    /// The API of `kind` in `namespace`, checked against the kind's scope,
    /// with a write slot held until the returned value is dropped. Every write
    /// reaches the API server through here, so none can skip the bound.
    async fn api(&self, kind: &KindRef, namespace: Option<&str>) -> Result<SlottedApi<'_>, WriteError> {
        let slot = self.slots.take()?;
        let resolved = self.kinds.resolve(kind).await?;
        let api = match (resolved.namespaced, namespace) {
            (true, Some(namespace)) => Api::namespaced_with(self.client.clone(), namespace, &resolved.resource),
            (false, None) => Api::all_with(self.client.clone(), &resolved.resource),
            (true, None) => {
                return Err(WriteError::BadRequest {
                    field: "namespace",
                    problem: format!("{} is namespaced: name the namespace", kind.kind),
                });
            }
            (false, Some(_)) => {
                return Err(WriteError::BadRequest {
                    field: "namespace",
                    problem: format!("{} is cluster-scoped: leave the namespace empty", kind.kind),
                });
            }
        };
        Ok(SlottedApi { api, _slot: slot })
    }
}

/// A kind's API, borrowed with one of the writer's slots: the write that
/// uses it holds the slot until its answer, when this is dropped.
struct SlottedApi<'a> {
    api: Api<DynamicObject>,
    _slot: SemaphorePermit<'a>,
}

impl Deref for SlottedApi<'_> {
    type Target = Api<DynamicObject>;

    fn deref(&self) -> &Api<DynamicObject> {
        &self.api
    }
}

/// Whether a deleted object is still there: marked for deletion. Whatever
/// holds it (`metadata.finalizers`, a Namespace's `spec.finalizers`, a Pod's
/// grace period), an object answered with a deletionTimestamp still exists.
fn is_pending(object: &DynamicObject) -> bool {
    object.metadata.deletion_timestamp.is_some()
}

/// Sets apiVersion, kind, metadata.namespace and (when given) metadata.name
/// where the object leaves them out; refuses values that differ.
fn fill_identity(
    object: &mut Value,
    kind: &KindRef,
    namespace: Option<&str>,
    name: Option<&str>,
) -> Result<(), WriteError> {
    let Some(fields) = object.as_object_mut() else {
        return Err(WriteError::BadRequest { field: "json", problem: "must be a JSON object".into() });
    };
    fill(fields, "apiVersion", "json.apiVersion", &kind.api_version)?;
    fill(fields, "kind", "json.kind", &kind.kind)?;
    let metadata = fields.entry("metadata").or_insert_with(|| Value::Object(Default::default()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(WriteError::BadRequest { field: "json", problem: "metadata must be a JSON object".into() });
    };
    if let Some(namespace) = namespace {
        fill(metadata, "namespace", "json.metadata.namespace", namespace)?;
    }
    if let Some(name) = name {
        fill(metadata, "name", "json.metadata.name", name)?;
    }
    Ok(())
}

fn fill(
    fields: &mut serde_json::Map<String, Value>,
    key: &str,
    field: &'static str,
    wanted: &str,
) -> Result<(), WriteError> {
    match fields.get(key) {
        None | Some(Value::Null) => {
            fields.insert(key.to_owned(), Value::String(wanted.to_owned()));
            Ok(())
        }
        Some(Value::String(given)) if given == wanted => Ok(()),
        Some(given) => {
            Err(WriteError::BadRequest { field, problem: format!("is {given}, but the request names {wanted:?}") })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn users() -> KindRef {
        KindRef::parse("example.com/v1", "User").unwrap()
    }

    #[test]
    fn identity_should_be_filled_in_where_missing_and_checked_where_given() {
        let mut object = json!({"spec": {"a": 1}});
        fill_identity(&mut object, &users(), Some("ns"), Some("ada")).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "example.com/v1", "kind": "User", "metadata": {"namespace": "ns", "name": "ada"}, "spec": {"a": 1}})
        );
        let mut other = json!({"metadata": {"name": "bob"}});
        let err = fill_identity(&mut other, &users(), None, Some("ada")).unwrap_err();
        assert_eq!(err.to_string(), r#"json.metadata.name: is "bob", but the request names "ada""#);
        let err = fill_identity(&mut json!([1]), &users(), None, None).unwrap_err();
        assert_eq!(err.to_string(), "json: must be a JSON object");
    }
}
