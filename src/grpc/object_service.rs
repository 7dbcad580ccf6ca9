//! `ObjectService`: writes through the sidecar (ApplyObject, PatchObject, CreateObject, DeleteObject), requests decoded into `objects` types and answers encoded; the write itself is `writes`'.

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;
use tonic::{Request, Response, Status};

use super::pb::{self, object_service_server::ObjectService};
use super::status::ApiError;
use super::validate;
use crate::objects::{DeleteOptions, Deleted, KindRef, ObjectRef, PatchBody, Propagation, WriteVerb};
use crate::writes::{LeaseRef, Write, Writes};

/// The handlers.
pub struct ObjectApi {
    writes: Option<Writes>,
}

impl ObjectApi {
    pub fn new(writes: Option<Writes>) -> Self {
        ObjectApi { writes }
    }

    /// [`Writes::begin`], with the request's lease parsed; before the body
    /// is parsed, so a refused write costs no parse.
    fn begin(
        &self,
        verb: WriteVerb,
        kind: &KindRef,
        namespace: Option<&str>,
        lease: Option<&pb::LeaseRef>,
        body_bytes: usize,
    ) -> Result<Write, ApiError> {
        let writes = self.writes.as_ref().ok_or(ApiError::NoKubernetes)?;
        let lease = lease.map(lease_ref).transpose()?;
        Ok(writes.begin(verb, kind, namespace, lease, body_bytes)?)
    }
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl ObjectService for ObjectApi {
    async fn apply_object(&self, request: Request<pb::ApplyObjectRequest>) -> Reply<pb::ApplyObjectResponse> {
        let req = request.into_inner();
        let target = object_ref(req.r#type.as_ref(), &req.namespace, &req.name)?;
        let manager = field_manager(&req.field_manager)?;
        let write = self.begin(
            WriteVerb::Apply,
            &target.kind,
            target.namespace.as_deref(),
            req.lease.as_ref(),
            req.json.len(),
        )?;
        let object = json_value("json", &req.json)?;
        let written = write.apply(target, object, manager, req.force).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::ApplyObjectResponse { object: Some(written_object(&written)?) }))
    }

    async fn patch_object(&self, request: Request<pb::PatchObjectRequest>) -> Reply<pb::PatchObjectResponse> {
        let req = request.into_inner();
        let target = object_ref(req.r#type.as_ref(), &req.namespace, &req.name)?;
        let manager = field_manager(&req.field_manager)?;
        let write = self.begin(
            WriteVerb::Patch,
            &target.kind,
            target.namespace.as_deref(),
            req.lease.as_ref(),
            req.patch.len(),
        )?;
        let patch = match pb::PatchType::try_from(req.patch_type) {
            Ok(pb::PatchType::Merge) => PatchBody::Merge(json_value("patch", &req.patch)?),
            Ok(pb::PatchType::Json) => PatchBody::Json(serde_json::from_slice(&req.patch).map_err(|err| {
                ApiError::invalid("patch", format!("is not a JSON patch (an array of operations): {err}"))
            })?),
            Ok(pb::PatchType::Unspecified) | Err(_) => {
                return Err(ApiError::invalid("patch_type", "must be PATCH_TYPE_MERGE or PATCH_TYPE_JSON").into());
            }
        };
        let written = write.patch(target, patch, req.status, manager).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::PatchObjectResponse { object: Some(written_object(&written)?) }))
    }

    async fn create_object(&self, request: Request<pb::CreateObjectRequest>) -> Reply<pb::CreateObjectResponse> {
        let req = request.into_inner();
        let kind = kind_ref(req.r#type.as_ref())?;
        let namespace = validate::namespace("namespace", &req.namespace)?.map(str::to_owned);
        let manager = field_manager(&req.field_manager)?;
        let write = self.begin(WriteVerb::Create, &kind, namespace.as_deref(), req.lease.as_ref(), req.json.len())?;
        let object = json_value("json", &req.json)?;
        let written = write.create(kind, namespace, object, manager).await.map_err(ApiError::from)?;
        Ok(Response::new(pb::CreateObjectResponse { object: Some(written_object(&written)?) }))
    }

    async fn delete_object(&self, request: Request<pb::DeleteObjectRequest>) -> Reply<pb::DeleteObjectResponse> {
        let req = request.into_inner();
        let target = object_ref(req.r#type.as_ref(), &req.namespace, &req.name)?;
        let propagation = match pb::Propagation::try_from(req.propagation) {
            Ok(pb::Propagation::Unspecified) => Propagation::Default,
            Ok(pb::Propagation::Background) => Propagation::Background,
            Ok(pb::Propagation::Foreground) => Propagation::Foreground,
            Ok(pb::Propagation::Orphan) => Propagation::Orphan,
            Err(_) => {
                return Err(ApiError::invalid("propagation", format!("{} is no Propagation", req.propagation)).into());
            }
        };
        let options = DeleteOptions {
            uid: non_empty(req.precondition_uid),
            resource_version: non_empty(req.precondition_resource_version),
            propagation,
        };
        let write = self.begin(WriteVerb::Delete, &target.kind, target.namespace.as_deref(), req.lease.as_ref(), 0)?;
        let deleted = write.delete(target, options).await.map_err(ApiError::from)?;
        let reply = match deleted {
            Deleted::Gone(_) => pb::DeleteObjectResponse { gone: true, object: None },
            Deleted::Pending(object) => {
                pb::DeleteObjectResponse { gone: false, object: Some(written_object(&object)?) }
            }
        };
        Ok(Response::new(reply))
    }
}

/// The lease a write names, parsed.
fn lease_ref(lease: &pb::LeaseRef) -> Result<LeaseRef, ApiError> {
    if lease.queue.is_empty() {
        return Err(ApiError::invalid("lease.queue", "must name the queue of the lease"));
    }
    Ok(LeaseRef {
        queue: Arc::from(lease.queue.as_str()),
        key: Arc::from(validate::key("lease.key", &lease.key)?),
        token: validate::token(lease.token)
            .map_err(|_| ApiError::invalid("lease.token", "must be the token of a lease (non-zero)"))?,
    })
}

fn kind_ref(resource_type: Option<&pb::ResourceType>) -> Result<KindRef, ApiError> {
    let Some(resource_type) = resource_type else {
        return Err(ApiError::invalid("type", "must name the apiVersion and kind"));
    };
    Ok(KindRef::parse(&resource_type.api_version, &resource_type.kind)?)
}

fn object_ref(resource_type: Option<&pb::ResourceType>, namespace: &str, name: &str) -> Result<ObjectRef, ApiError> {
    let name = validate::object_name("name", name)?;
    let namespace = validate::namespace("namespace", namespace)?;
    Ok(ObjectRef { kind: kind_ref(resource_type)?, namespace: namespace.map(str::to_owned), name: name.to_owned() })
}

fn json_value(field: &'static str, bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|err| ApiError::invalid(field, format!("is not JSON: {err}")))
}

/// The request's field manager, `None` for the sidecar's; the API server
/// refuses names over 128 bytes.
fn field_manager(name: &str) -> Result<Option<String>, ApiError> {
    match name.len() {
        0 => Ok(None),
        1..=128 => Ok(Some(name.to_owned())),
        n => Err(ApiError::invalid("field_manager", format!("is {n} bytes, more than the limit of 128"))),
    }
}

fn non_empty(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
}

fn written_object(object: &DynamicObject) -> Result<pb::WrittenObject, ApiError> {
    let json = serde_json::to_vec(object)
        .map_err(|err| ApiError::Internal(format!("serializing the written object: {err}")))?;
    Ok(pb::WrittenObject {
        json,
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        uid: object.metadata.uid.clone().unwrap_or_default(),
    })
}
