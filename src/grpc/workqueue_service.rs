//! The unary RPCs of `WorkQueueService`: validate, call the queue, convert.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use tracing::debug;

use super::convert::{self, lease_to_send};
use super::pb;
use super::pb::work_queue_service_server::WorkQueueService;
use super::status::ApiError;
use super::validate;
use super::work_stream::{self, WorkStream};
use crate::informer::InformerRegistry;
use crate::queue::{FinishOutcome, Holder, Reason, ReasonKind};
use crate::queue_registry::{Queue, QueueRegistry};
use crate::writes::DeclaredFinalizers;

/// The handlers; one instance serves every connection.
pub struct WorkQueueApi {
    queues: Arc<QueueRegistry>,
    /// Where leases find their object and whether it is being deleted (the queue's primary informer).
    informers: Option<Arc<InformerRegistry>>,
    /// The queues' declared finalizers, kept at the ends of their leases.
    finalizers: Option<Arc<DeclaredFinalizers>>,
    /// Whether clients may call `ShutDown`.
    shut_down: ShutDownRpc,
}

/// Whether clients may stop a queue with `ShutDown`. A queue is shared by
/// every worker, and the sidecar drains its queues itself on SIGTERM, so a
/// worker has no need to; off unless the operator turns it on
/// (`--allow-shutdown-rpc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutDownRpc {
    /// Every `ShutDown` is PERMISSION_DENIED (reason SHUTDOWN_NOT_ALLOWED).
    Refused,
    /// Served; a drain that names no timeout lasts `drain_grace` (the
    /// server's `--grace-period`).
    Allowed { drain_grace: Duration },
}

impl WorkQueueApi {
    pub fn new(queues: Arc<QueueRegistry>, shut_down: ShutDownRpc) -> Self {
        WorkQueueApi { queues, informers: None, finalizers: None, shut_down }
    }

    /// Lets leases carry their cached object when asked (`include_object`).
    pub fn with_informers(mut self, informers: Arc<InformerRegistry>) -> Self {
        self.informers = Some(informers);
        self
    }

    /// Keeps the queues' declared finalizers.
    pub fn with_finalizers(mut self, finalizers: Option<Arc<DeclaredFinalizers>>) -> Self {
        self.finalizers = finalizers;
        self
    }

    fn queue(&self, name: &str) -> Result<&Queue, ApiError> {
        if name.is_empty() {
            let names = self.queues.names().iter().map(|name| format!("{name:?}")).collect::<Vec<_>>().join(", ");
            return Err(ApiError::invalid("queue", format!("must name a queue (this sidecar has {names})")));
        }
        self.queues.get(name).ok_or_else(|| ApiError::UnknownQueue(name.to_string()))
    }
}

/// The priority of a manual add: the fast lane unless the caller says otherwise.
fn priority(asked: Option<i32>) -> i32 {
    asked.unwrap_or(crate::queue::PRIORITY_FAST)
}

type Reply<T> = Result<Response<T>, Status>;

/// How large a unary Get's answer (and a ListObjects page) may grow: gRPC
/// clients refuse larger messages by default (4 MiB in grpc-go, grpc-java,
/// grpcio and grpc-js).
pub(super) const MAX_GET_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Bytes `element` takes in an answer as one element of a repeated message
/// field (`GetResponse.leases`, `ListObjectsResponse.objects`): its tag (one
/// byte, the field's number being below 16), its length and itself.
pub(super) fn repeated_element_len(element: &impl prost::Message) -> usize {
    let len = element.encoded_len();
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

/// A unary Get's leases, within [`MAX_GET_ANSWER_BYTES`] once encoded; the
/// first lease always fits (it is all a client can get).
#[derive(Default)]
struct Answer {
    leases: Vec<pb::Lease>,
    bytes: usize,
}

impl Answer {
    fn has_room_for(&self, lease: &pb::Lease) -> bool {
        self.leases.is_empty() || self.bytes.saturating_add(repeated_element_len(lease)) <= MAX_GET_ANSWER_BYTES
    }

    fn push(&mut self, lease: pb::Lease) {
        self.bytes = self.bytes.saturating_add(repeated_element_len(&lease));
        self.leases.push(lease);
    }
}

#[tonic::async_trait]
impl WorkQueueService for WorkQueueApi {
    async fn add(&self, request: Request<pb::AddRequest>) -> Reply<pb::AddResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let keys = validate::keys(req.keys)?;
        // Each add call has the reason kind the proto documents (Add: MANUAL, AddAfter:
        // REQUEUE_AFTER, AddRateLimited: RETRY); the free-form text names where it came from.
        let reason = Reason::new(ReasonKind::Manual, validate::reason("reason", &req.reason)?);
        queue.add_all(keys, Duration::ZERO, priority(req.priority), reason).map_err(ApiError::from)?;
        Ok(Response::new(pb::AddResponse {}))
    }

    async fn add_after(&self, request: Request<pb::AddAfterRequest>) -> Reply<pb::AddAfterResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let keys = validate::keys(req.keys)?;
        let delay = validate::duration("delay", req.delay)?.unwrap_or_default();
        let reason = Reason::new(ReasonKind::RequeueAfter, validate::reason("reason", &req.reason)?);
        queue.add_all(keys, delay, priority(req.priority), reason).map_err(ApiError::from)?;
        Ok(Response::new(pb::AddAfterResponse {}))
    }

    async fn add_rate_limited(&self, request: Request<pb::AddRateLimitedRequest>) -> Reply<pb::AddRateLimitedResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let keys = validate::keys(req.keys)?;
        let reason = Reason::new(ReasonKind::Retry, validate::reason("reason", &req.reason)?);
        let limited = queue.add_rate_limited_all(keys, priority(req.priority), reason).map_err(ApiError::from)?;
        let keys = limited
            .into_iter()
            .map(|(key, delay, failures)| pb::RateLimitedKey {
                key: key.to_string(),
                failures,
                delay: Some(convert::duration(delay)),
            })
            .collect();
        Ok(Response::new(pb::AddRateLimitedResponse { keys }))
    }

    async fn get(&self, request: Request<pb::GetRequest>) -> Reply<pb::GetResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        validate::worker(&req.worker)?;
        let max = (req.max_keys as usize).clamp(1, validate::MAX_GET_KEYS);
        let wait = validate::duration("wait", req.wait)?.unwrap_or_default().min(validate::MAX_GET_WAIT);
        let ttl = validate::lease_ttl("lease_ttl", req.lease_ttl)?;
        let primary = self.informers.as_ref().and_then(|i| i.primary_of(&req.queue)).map(|i| &**i);
        convert::check_object_reads(primary, req.include_object)?;
        let holder: Holder = Arc::from(if req.worker.is_empty() { "unary" } else { req.worker.as_str() });
        // The wait is cancel-safe: if the client goes away while waiting, tonic
        // drops this future and no key has been taken.
        // Ready keys are taken at once; only an empty queue arms the long poll's timer.
        let leases = match queue.try_get_many(&holder, max, ttl).map_err(ApiError::from)? {
            Some(leases) => leases,
            None if wait.is_zero() => Vec::new(),
            None => match tokio::time::timeout(wait, queue.get_many(&holder, max, ttl)).await {
                Ok(leases) => leases.map_err(ApiError::from)?,
                Err(_elapsed) => Vec::new(),
            },
        };
        let mut answer = Answer::default();
        let mut leases = leases.into_iter();
        while let Some(lease) = leases.next() {
            if let Some(finalizers) = &self.finalizers
                && finalizers.must_add(queue, &lease.key)
                && !finalizers.add(queue, &lease).await
            {
                continue; // finished as a retry: the finalizer could not be added
            }
            let sent = lease_to_send(self.finalizers.as_deref(), queue, &lease, primary, req.include_object);
            if !answer.has_room_for(&sent) {
                // The client could not read a larger answer, and a lease it
                // never reads is lost to it: this one and the rest go back.
                let unsent = std::iter::once(lease).chain(leases).map(|lease| queue.holders().hand_back_unsent(lease));
                let handed_back = unsent.filter(Result::is_ok).count();
                debug!(queue = %req.queue, handed_back, "Get answer full: leases handed back unsent");
                break;
            }
            answer.push(sent);
        }
        Ok(Response::new(pb::GetResponse { leases: answer.leases }))
    }

    async fn done(&self, request: Request<pb::DoneRequest>) -> Reply<pb::DoneResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        let token = validate::token(req.token)?;
        queue.done(key, token).map_err(ApiError::from)?;
        Ok(Response::new(pb::DoneResponse {}))
    }

    async fn forget(&self, request: Request<pb::ForgetRequest>) -> Reply<pb::ForgetResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        queue.forget(key);
        Ok(Response::new(pb::ForgetResponse {}))
    }

    async fn num_requeues(&self, request: Request<pb::NumRequeuesRequest>) -> Reply<pb::NumRequeuesResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        Ok(Response::new(pb::NumRequeuesResponse { num_requeues: queue.num_requeues(key) }))
    }

    async fn len(&self, request: Request<pb::LenRequest>) -> Reply<pb::LenResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        Ok(Response::new(convert::len_response(queue.counts())))
    }

    async fn shut_down(&self, request: Request<pb::ShutDownRequest>) -> Reply<pb::ShutDownResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let ShutDownRpc::Allowed { drain_grace } = self.shut_down else {
            return Err(ApiError::ShutDownNotAllowed(req.queue).into());
        };
        if !req.drain {
            queue.shut_down();
            return Ok(Response::new(pb::ShutDownResponse { finished: 0, returned: 0 }));
        }
        // Zero, as absent, is the server's own grace period (the proto says so).
        let asked = validate::duration("drain_timeout", req.drain_timeout)?.filter(|timeout| !timeout.is_zero());
        let grace = asked.unwrap_or(drain_grace);
        let report = queue.shut_down_with_drain(grace).await;
        Ok(Response::new(pb::ShutDownResponse {
            finished: u32::try_from(report.finished).unwrap_or(u32::MAX),
            returned: u32::try_from(report.returned).unwrap_or(u32::MAX),
        }))
    }

    async fn extend(&self, request: Request<pb::ExtendRequest>) -> Reply<pb::ExtendResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        let token = validate::token(req.token)?;
        let ttl = validate::lease_ttl("ttl", req.ttl)?;
        let renewal = queue.extend(key, token, ttl).map_err(ApiError::from)?;
        Ok(Response::new(pb::ExtendResponse {
            deadline: Some(convert::timestamp(renewal.deadline)),
            ttl: Some(convert::remaining(renewal.deadline)),
            cancel: renewal.cancel,
        }))
    }

    async fn finish(&self, request: Request<pb::FinishRequest>) -> Reply<pb::FinishResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        let token = validate::token(req.token)?;
        let mut outcome = convert::finish_outcome(req.outcome.map(Into::into))?;
        if let Some(finalizers) = &self.finalizers
            && matches!(outcome, FinishOutcome::Success)
            && finalizers.must_remove(queue, key, token)
        {
            outcome = finalizers.remove(queue, &Arc::from(key), token).await.map_err(ApiError::from)?;
        }
        queue.finish(key, token, outcome).map_err(ApiError::from)?;
        Ok(Response::new(pb::FinishResponse {}))
    }

    async fn key_state(&self, request: Request<pb::KeyStateRequest>) -> Reply<pb::KeyStateResponse> {
        let req = request.into_inner();
        let queue = self.queue(&req.queue)?;
        let key = validate::key("key", &req.key)?;
        let mut state = convert::key_state(queue.key_status(key));
        state.shard = queue.shards().slot_of(&Arc::from(key)).map(|slot| pb::ShardPlace {
            slot: slot.and_then(|slot| u32::try_from(slot.index()).ok()),
            owner: slot
                .and_then(|slot| self.queues.shard_view()?.owner(slot))
                .map_or_else(String::new, |owner| owner.to_string()),
            granted_here: slot.is_some_and(|slot| queue.shards().owns(slot)),
        });
        Ok(Response::new(state))
    }

    type WorkStream = WorkStream;

    async fn work(&self, request: Request<tonic::Streaming<pb::WorkRequest>>) -> Reply<Self::WorkStream> {
        work_stream::open(self.queues.clone(), self.informers.clone(), self.finalizers.clone(), request).await
    }
}
