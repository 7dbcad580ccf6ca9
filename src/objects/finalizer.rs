//! Declared finalizers on an object: added or removed with the object's resourceVersion as the guard, read again and retried on a conflict.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::json;

use super::{ObjectRef, ObjectWriter, WriteError};

/// Conflicts (someone else wrote the object between our read and our patch)
/// retried before the change fails; each retry reads the object again.
const CONFLICT_RETRIES: usize = 5;

/// What a finalizer change did.
#[derive(Debug)]
pub enum FinalizerChange {
    /// The object was patched; here as the API server returned it.
    Changed(Box<DynamicObject>),
    /// Nothing to do: the finalizer was already there (or already gone), or
    /// the object is being deleted and takes no new finalizer.
    Unchanged,
    /// The object no longer exists.
    Gone,
}

impl ObjectWriter {
    /// Adds `finalizer` to a live object that lacks it.
    pub async fn add_finalizer(&self, target: &ObjectRef, finalizer: &str) -> Result<FinalizerChange, WriteError> {
        self.change_finalizers(target, true, |finalizers| {
            let missing = !finalizers.iter().any(|f| f == finalizer);
            if missing {
                finalizers.push(finalizer.to_owned());
            }
            missing
        })
        .await
    }

    /// Removes `finalizer` from the object, if it has it.
    pub async fn remove_finalizer(&self, target: &ObjectRef, finalizer: &str) -> Result<FinalizerChange, WriteError> {
        self.change_finalizers(target, false, |finalizers| {
            let before = finalizers.len();
            finalizers.retain(|f| f != finalizer);
            finalizers.len() != before
        })
        .await
    }

    /// Reads the object, edits its finalizers, and writes them back with a
    /// merge patch that carries the resourceVersion read, so the API server
    /// refuses it (409) if the object changed meanwhile; then reads again.
    async fn change_finalizers(
        &self,
        target: &ObjectRef,
        adding: bool,
        edit: impl Fn(&mut Vec<String>) -> bool,
    ) -> Result<FinalizerChange, WriteError> {
        let api = self.api(&target.kind, target.namespace.as_deref()).await?;
        let params = PatchParams { field_manager: Some(self.field_manager.clone()), ..PatchParams::default() };
        let mut attempt = 0;
        loop {
            let Some(current) = api.get_opt(&target.name).await.map_err(WriteError::from_kube)? else {
                return Ok(FinalizerChange::Gone);
            };
            if adding && current.metadata.deletion_timestamp.is_some() {
                // The API server refuses new finalizers on a deleting object.
                return Ok(FinalizerChange::Unchanged);
            }
            let mut finalizers = current.metadata.finalizers.clone().unwrap_or_default();
            if !edit(&mut finalizers) {
                return Ok(FinalizerChange::Unchanged);
            }
            let patch = json!({"metadata": {
                "resourceVersion": current.metadata.resource_version,
                "finalizers": finalizers,
            }});
            match api.patch(&target.name, &params, &Patch::Merge(patch)).await {
                Ok(written) => return Ok(FinalizerChange::Changed(Box::new(written))),
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(FinalizerChange::Gone),
                Err(kube::Error::Api(status)) if status.code == 409 && attempt < CONFLICT_RETRIES => {
                    attempt += 1;
                }
                Err(err) => return Err(WriteError::from_kube(err)),
            }
        }
    }
}
