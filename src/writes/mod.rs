//! Writing under a lease: the one way a write reaches the API server, whether a worker asked for it or a declared finalizer needs it.
//!
//! A write goes through the same steps whoever makes it:
//!
//! 1. **Declared** (`objects::WritePolicy`): a worker's write of a kind,
//!    call and namespace the config does not declare is refused before its
//!    body is parsed. The sidecar's own finalizer writes need no declaration.
//! 2. **Fenced** ([`freshness::Freshness::begin`]): a write under a lease is
//!    refused unless the lease is current, and from then on the lease does
//!    not expire before the write is answered (`WorkQueue::writes().begin`).
//! 3. **Bounded** (`objects::ObjectWriter::reserve_body`): the bytes of
//!    write bodies out to the API server are reserved before the body is
//!    parsed, and held until its answer.
//! 4. **Carried** ([`carried`]): the call runs on a task of its own to the
//!    API server's answer, even when its caller stops waiting.
//! 5. **Noted** ([`freshness`]): the answer tells each informer cache what it
//!    must see; reads of the object and the key's next lease wait for it
//!    (the key settles in the queue when its lease ends).
//!
//! [`Writes::begin`] takes the first three steps and hands back a [`Write`];
//! its calls take the last two. [`finalizers`] makes its writes the same way.

mod carried;
mod error;
pub mod finalizers;
pub mod freshness;

use std::sync::Arc;

use kube::api::DynamicObject;
use serde_json::Value;

pub use carried::carried;
pub use error::WriteFailure;
pub use finalizers::DeclaredFinalizers;
pub use freshness::{Freshness, LeaseRef};

use crate::objects::{
    BodyBytes, DeleteOptions, Deleted, KindRef, ObjectRef, ObjectWriter, PatchBody, WritePolicy, WriteVerb,
};
use freshness::{WriteTicket, Written};

/// What writes need: `None` in the standalone mode, which has no Kubernetes.
pub struct Writes {
    pub writer: Arc<ObjectWriter>,
    pub freshness: Arc<Freshness>,
    /// Each queue's declared finalizer: (queue, finalizer).
    pub finalizers: Vec<(String, String)>,
    /// What workers may write; everything else is refused.
    pub policy: WritePolicy,
}

impl Writes {
    /// Begins a worker's write of a `verb` of `kind` in `namespace`, under
    /// `lease` when it names one, of a body of `body_bytes`: refused when the
    /// config does not declare it, the lease is not current, or the writes
    /// out hold too many bytes. Called before the body is parsed, so a
    /// refused write costs no parse.
    pub fn begin(
        &self,
        verb: WriteVerb,
        kind: &KindRef,
        namespace: Option<&str>,
        lease: Option<LeaseRef>,
        body_bytes: usize,
    ) -> Result<Write, WriteFailure> {
        self.policy.check(verb, kind, namespace, lease.is_some())?;
        let ticket = self.freshness.begin(lease)?;
        let body = self.writer.reserve_body(body_bytes)?;
        Ok(Write { writer: self.writer.clone(), _body: body, ticket })
    }
}

/// One write begun: its writer, its body's share of the bytes out, and its
/// ticket of the stale-read guard, all held until the API server answers.
pub struct Write {
    writer: Arc<ObjectWriter>,
    _body: BodyBytes,
    ticket: WriteTicket,
}

impl Write {
    pub async fn apply(
        self,
        target: ObjectRef,
        object: Value,
        manager: Option<String>,
        force: bool,
    ) -> Result<DynamicObject, WriteFailure> {
        carried(async move {
            let written = self.writer.apply(&target, object, manager.as_deref(), force).await?;
            self.ticket.written(Written::object(&target.kind, &written))?;
            Ok(written)
        })
        .await?
    }

    pub async fn patch(
        self,
        target: ObjectRef,
        patch: PatchBody,
        status: bool,
        manager: Option<String>,
    ) -> Result<DynamicObject, WriteFailure> {
        carried(async move {
            let written = self.writer.patch(&target, patch, status, manager.as_deref()).await?;
            self.ticket.written(Written::object(&target.kind, &written))?;
            Ok(written)
        })
        .await?
    }

    pub async fn create(
        self,
        kind: KindRef,
        namespace: Option<String>,
        object: Value,
        manager: Option<String>,
    ) -> Result<DynamicObject, WriteFailure> {
        carried(async move {
            let written = self.writer.create(&kind, namespace.as_deref(), object, manager.as_deref()).await?;
            self.ticket.written(Written::object(&kind, &written))?;
            Ok(written)
        })
        .await?
    }

    pub async fn delete(self, target: ObjectRef, options: DeleteOptions) -> Result<Deleted, WriteFailure> {
        carried(async move {
            let deleted = self.writer.delete(&target, options).await?;
            match &deleted {
                Deleted::Gone(version) => self.ticket.written(Written::gone(&target, *version))?,
                Deleted::Pending(object) => self.ticket.written(Written::object(&target.kind, object))?,
            }
            Ok(deleted)
        })
        .await?
    }
}
