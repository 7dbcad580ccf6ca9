//! Conversions between queue types and wire messages.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::pb;
use super::status::ApiError;
use super::validate;
use crate::informer::{CachedObject, SharedInformer};
use crate::queue::{
    DirtyStatus, FinishOutcome, KeyPhase, KeyStatus, Lease, QueueCounts, Reason, ReasonKind, ReasonSet,
};
use crate::queue_registry::Queue;
use crate::writes::DeclaredFinalizers;

/// The wall-clock time of a monotonic instant, for clients on other clocks.
pub fn timestamp(at: Instant) -> prost_types::Timestamp {
    let (now, wall_now) = (Instant::now(), SystemTime::now());
    // Checked both ways: an instant the wall clock cannot express reads as now.
    let wall = if at >= now {
        wall_now.checked_add(at.saturating_duration_since(now))
    } else {
        wall_now.checked_sub(now.saturating_duration_since(at))
    };
    prost_types::Timestamp::from(wall.unwrap_or(wall_now))
}

pub fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration { seconds: i64::MAX, nanos: 0 })
}

/// Time left until `at`, zero when past.
pub fn remaining(at: Instant) -> prost_types::Duration {
    duration(at.saturating_duration_since(Instant::now()))
}

pub fn reason_kind(kind: ReasonKind) -> pb::ReasonKind {
    match kind {
        ReasonKind::Manual => pb::ReasonKind::Manual,
        ReasonKind::InitialList => pb::ReasonKind::InitialList,
        ReasonKind::Resync => pb::ReasonKind::Resync,
        ReasonKind::Added => pb::ReasonKind::Added,
        ReasonKind::Updated => pb::ReasonKind::Updated,
        ReasonKind::Deleted => pb::ReasonKind::Deleted,
        ReasonKind::Trigger => pb::ReasonKind::Trigger,
        ReasonKind::Retry => pb::ReasonKind::Retry,
        ReasonKind::RequeueAfter => pb::ReasonKind::RequeueAfter,
        ReasonKind::LeaseExpired => pb::ReasonKind::LeaseExpired,
        ReasonKind::LeaseReleased => pb::ReasonKind::LeaseReleased,
        ReasonKind::ShutdownReturned => pb::ReasonKind::ShutdownReturned,
    }
}

pub fn reasons(set: &ReasonSet) -> Vec<pb::Reason> {
    set.iter()
        .map(|r: &Reason| pb::Reason {
            kind: reason_kind(r.kind) as i32,
            source: r.source.to_string(),
            detail: String::new(),
        })
        .collect()
}

fn lease(lease: &Lease<Arc<str>>) -> pb::Lease {
    pb::Lease {
        token: lease.token.get(),
        deadline: Some(timestamp(lease.deadline)),
        ttl: Some(remaining(lease.deadline)),
        priority: lease.priority,
        failures: lease.failures,
        reasons: reasons(&lease.reasons),
        enqueued_at: Some(timestamp(lease.enqueued_at)),
        last_error: lease.last_error.as_deref().unwrap_or_default().to_string(),
        object: None,
        deleting: false,
        deletion_timestamp: None,
        key: lease.key.to_string(),
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

pub fn len_response(counts: QueueCounts) -> pb::LenResponse {
    pb::LenResponse {
        ready: count(counts.ready),
        waiting: count(counts.waiting),
        held: count(counts.held),
        dirty: count(counts.dirty),
        settling: count(counts.settling),
        ready_by_priority: counts
            .ready_by_priority
            .into_iter()
            .map(|(priority, n)| pb::PriorityCount { priority, count: count(n) })
            .collect(),
    }
}

pub fn key_state(status: KeyStatus) -> pb::KeyStateResponse {
    let mut response = pb::KeyStateResponse {
        priority: status.priority,
        failures: status.failures,
        last_error: status.last_error.as_deref().unwrap_or_default().to_string(),
        reasons: reasons(&status.reasons),
        ..Default::default()
    };
    response.state = match status.phase {
        KeyPhase::Absent => pb::KeyState::Absent,
        KeyPhase::Queued { since } => {
            response.queued_since = Some(timestamp(since));
            pb::KeyState::Queued
        }
        KeyPhase::Waiting { until } => {
            response.waiting_until = Some(timestamp(until));
            pb::KeyState::Waiting
        }
        KeyPhase::Held { holder, deadline, dirty, .. } => {
            response.held_until = Some(timestamp(deadline));
            response.holder = holder.to_string();
            show_dirty(&mut response, dirty.as_ref());
            pb::KeyState::Held
        }
        KeyPhase::Settling { until, dirty } => {
            response.settling_until = until.map(timestamp);
            show_dirty(&mut response, dirty.as_ref());
            pb::KeyState::Settling
        }
    } as i32;
    response
}

/// A held or settling key added again: what happens next, as the proto
/// says (the priority it will be queued at, why it was added).
fn show_dirty(response: &mut pb::KeyStateResponse, dirty: Option<&DirtyStatus>) {
    if let Some(dirty) = dirty {
        response.dirty = true;
        response.priority = dirty.priority;
        response.reasons = reasons(&dirty.reasons);
    }
}

/// A Finish's outcome as sent, whichever message carried it: unary
/// `FinishRequest` and the stream's `WorkRequest.Finish` have the same three.
pub enum WireOutcome {
    Success,
    Retry(pb::Retry),
    RequeueAfter(pb::RequeueAfter),
}

impl From<pb::finish_request::Outcome> for WireOutcome {
    fn from(outcome: pb::finish_request::Outcome) -> Self {
        use pb::finish_request::Outcome;
        match outcome {
            Outcome::Success(_) => WireOutcome::Success,
            Outcome::Retry(retry) => WireOutcome::Retry(retry),
            Outcome::RequeueAfter(requeue) => WireOutcome::RequeueAfter(requeue),
        }
    }
}

impl From<pb::work_request::finish::Outcome> for WireOutcome {
    fn from(outcome: pb::work_request::finish::Outcome) -> Self {
        use pb::work_request::finish::Outcome;
        match outcome {
            Outcome::Success(_) => WireOutcome::Success,
            Outcome::Retry(retry) => WireOutcome::Retry(retry),
            Outcome::RequeueAfter(requeue) => WireOutcome::RequeueAfter(requeue),
        }
    }
}

/// The queue's outcome of a Finish; the outcome is required.
pub fn finish_outcome(outcome: Option<WireOutcome>) -> Result<FinishOutcome, ApiError> {
    match outcome {
        Some(WireOutcome::Success) => Ok(FinishOutcome::Success),
        Some(WireOutcome::Retry(retry)) => Ok(FinishOutcome::Retry { error: validate::error_text(retry.error) }),
        Some(WireOutcome::RequeueAfter(requeue)) => {
            let delay = validate::duration("outcome.requeue_after.delay", requeue.delay)?.unwrap_or_default();
            Ok(FinishOutcome::RequeueAfter(delay))
        }
        None => Err(ApiError::invalid("outcome", "is required: success, retry or requeue_after")),
    }
}

/// The wire form of a cached object.
pub fn cached_object(object: &CachedObject, deleted: bool) -> pb::CachedObject {
    pb::CachedObject {
        json: object.json.to_vec(),
        resource_version: object.meta.resource_version.to_string(),
        deleted,
        namespace: object.namespace().to_string(),
        name: object.name().to_string(),
    }
}

/// A lease as it is sent ([`lease_for`]). One marked deleting, on a queue
/// that declares a finalizer, is remembered: only its successful Finish
/// removes the finalizer.
pub fn lease_to_send(
    finalizers: Option<&DeclaredFinalizers>,
    queue: &Queue,
    lease: &Lease<Arc<str>>,
    primary: Option<&SharedInformer>,
    include_object: bool,
) -> pb::Lease {
    let sent = lease_for(lease, primary, include_object);
    if let Some(finalizers) = finalizers.filter(|_| sent.deleting) {
        finalizers.sent_deleting(queue, &lease.key, lease.token);
    }
    sent
}

/// A lease as sent: with its primary's deletion marked (when the queue has a
/// primary informer) and its cached object when the worker asked for it.
pub fn lease_for(granted: &Lease<Arc<str>>, primary: Option<&SharedInformer>, include_object: bool) -> pb::Lease {
    let Some(primary) = primary else { return lease(granted) };
    let object = include_object.then(|| lease_object(primary, &granted.key)).flatten();
    let deletion = primary.get(&granted.key).and_then(|o| o.meta.deletion_timestamp());
    pb::Lease {
        object,
        deleting: deletion.is_some(),
        deletion_timestamp: deletion.map(prost_types::Timestamp::from),
        ..lease(granted)
    }
}

/// Refuses `include_object` when the queue's primary informer serves no
/// cache reads: a lease would hand out what `CacheService` would not.
pub fn check_object_reads(primary: Option<&SharedInformer>, include_object: bool) -> Result<(), ApiError> {
    match primary {
        Some(informer) if include_object && !informer.spec().serves_cache_reads() => {
            Err(ApiError::ReadNotDeclared(informer.spec().name.clone()))
        }
        _ => Ok(()),
    }
}

/// The object of `key` for a lease: the cached state, or the last known state
/// of a deleted object (with `deleted`); `None` when neither is known.
fn lease_object(informer: &SharedInformer, key: &str) -> Option<pb::CachedObject> {
    match informer.get(key) {
        Some(object) => Some(cached_object(&object, false)),
        None => informer.get_deleted(key).map(|object| cached_object(&object, true)),
    }
}
