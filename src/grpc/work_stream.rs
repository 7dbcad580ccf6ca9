//! The `Work` stream: one per worker process, leases pushed within a credit window.
//!
//! A session task per stream reads the worker's messages (credits, finishes,
//! extends) and, while the window has room, waits for keys on the queue and
//! pushes them as leases. Each lease takes a credit until the worker's Finish
//! for it arrives, even one that expired or was revoked meanwhile, so a worker
//! that stopped reading gets no more than its window. Every lease the stream
//! holds goes back to the queue the moment the session ends, whatever ended it
//! (half-close, broken connection, error, shutdown): a guard releases the
//! holder on drop.
//!
//! Two steps may wait on the API server, for queues that declare a
//! finalizer: adding it before a lease goes out, removing it before a
//! successful Finish of a deleting object applies. They run beside the
//! session's loop (`deferred`), so the stream keeps serving meanwhile.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::{debug, info};

use super::convert::{self, lease_to_send};
use super::pb::{self, work_request, work_response};
use super::status::{ApiError, code_of};
use super::validate;
use crate::informer::{InformerRegistry, SharedInformer};
use crate::queue::{FinishOutcome, Holder, Lease, LeaseLoss, LeaseToken, LostLease, QueueError};
use crate::queue_registry::{Queue, QueueRegistry};
use crate::writes::DeclaredFinalizers;

/// Most leases one stream may hold at once.
pub const MAX_CREDITS: u32 = 1024;
/// Responses buffered per stream: a full window of leases plus the acks of a
/// full window of finishes, so the session never waits on a worker that reads.
const OUTBOUND_CAPACITY: usize = 2 * MAX_CREDITS as usize + 16;

pub type WorkStream = ReceiverStream<Result<pb::WorkResponse, Status>>;

/// Gives each stream a distinct holder name, so releasing one stream's
/// leases never touches another's, even with equal worker names.
static STREAM_IDS: AtomicU64 = AtomicU64::new(1);

pub async fn open(
    queues: Arc<QueueRegistry>,
    informers: Option<Arc<InformerRegistry>>,
    finalizers: Option<Arc<DeclaredFinalizers>>,
    request: Request<Streaming<pb::WorkRequest>>,
) -> Result<Response<WorkStream>, Status> {
    let peer = request.remote_addr().map(|a| a.to_string()).unwrap_or_else(|| "unix".into());
    let inbound = request.into_inner();
    let (tx, rx) = mpsc::channel(OUTBOUND_CAPACITY);
    // Answer at once and read Open in the session: a client may wait for the
    // response headers before it sends anything. Self-ending: the session
    // ends with its stream, and at the server's stop with the queue's drain.
    tokio::spawn(async move {
        if let Err(status) = run(queues, informers, finalizers, inbound, tx.clone(), peer).await {
            let _ = tx.send(Err(status)).await;
        }
    });
    Ok(Response::new(ReceiverStream::new(rx)))
}

/// Returns the holder's leases to the queue when the session ends, however it ends.
struct ReleaseOnDrop {
    queue: Queue,
    holder: Holder,
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let released = self.queue.holders().release(&self.holder);
        if released > 0 {
            info!(queue = %self.queue.name(), holder = %self.holder, released, "stream ended: leases returned to the queue");
        }
    }
}

struct Session {
    queue: Queue,
    holder: Holder,
    window: u32,
    ttl: Option<Duration>,
    /// Leases this stream was sent and has not finished, by token: each
    /// takes one credit of the window until the worker's Finish for it
    /// arrives, even after it ended on the sidecar's side (expired or
    /// revoked: `ended`), so a worker that stopped reading gets no more.
    held: HashMap<LeaseToken, StreamLease>,
    /// The queue's primary informer: where leases find their object and whether it is being deleted.
    primary: Option<Arc<SharedInformer>>,
    /// The worker asked for the cached object on its leases.
    include_object: bool,
    /// The worker asked that only failed Finishes be answered
    /// (`Open.ack_failures_only`): one message less per lease for a worker
    /// that only logs a refusal.
    ack_failures_only: bool,
    finalizers: Option<Arc<DeclaredFinalizers>>,
    tx: mpsc::Sender<Result<pb::WorkResponse, Status>>,
}

/// A step that waited on the API server, done.
enum Deferred {
    /// A lease whose finalizer was added (`Some`) or could not be (`None`:
    /// it was finished as a retry and is not sent).
    Lease { token: LeaseToken, lease: Option<Box<pb::Lease>> },
    /// A Finish whose finalizer removal ran, and its result.
    Finished { key: String, token: LeaseToken, result: Result<(), ApiError> },
}

type DeferredSteps = FuturesUnordered<BoxFuture<'static, Deferred>>;

type Outbound = mpsc::Sender<Result<pb::WorkResponse, Status>>;

/// A lease as its stream knows it.
struct StreamLease {
    key: Arc<str>,
    /// It ended without a Finish (expired, revoked) and the worker was sent a
    /// Cancel; its credit comes back with the worker's Finish.
    ended: bool,
    /// Sent to the worker (false while its finalizer is being added).
    sent: bool,
}

async fn run(
    queues: Arc<QueueRegistry>,
    informers: Option<Arc<InformerRegistry>>,
    finalizers: Option<Arc<DeclaredFinalizers>>,
    mut inbound: Streaming<pb::WorkRequest>,
    tx: Outbound,
    peer: String,
) -> Result<(), Status> {
    let open = match inbound.message().await? {
        Some(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }) => open,
        Some(_) => return Err(Status::invalid_argument("the first message of a Work stream must be Open")),
        None => return Ok(()),
    };
    let queue = queues.get(&open.queue).ok_or_else(|| ApiError::UnknownQueue(open.queue.clone()))?.clone();
    if queue.is_shutting_down() {
        debug!(queue = %queue.name(), "work stream refused: the queue is shutting down");
        return Err(ApiError::from(QueueError::ShuttingDown).into());
    }
    validate::worker(&open.worker)?;
    let ttl = validate::lease_ttl("open.lease_ttl", open.lease_ttl)?;
    let primary = informers.and_then(|i| i.primary_of(&open.queue).cloned());
    convert::check_object_reads(primary.as_deref(), open.include_object)?;
    let id = STREAM_IDS.fetch_add(1, Ordering::Relaxed);
    let worker = if open.worker.is_empty() { peer } else { open.worker };
    let holder: Holder = Arc::from(format!("{worker}#{id}"));
    let _release = ReleaseOnDrop { queue: queue.clone(), holder: holder.clone() };
    let window = open.credits.min(MAX_CREDITS);
    let effective_ttl = ttl.unwrap_or(queue.settings().lease_ttl).min(queue.settings().max_lease_ttl);
    send(
        &tx,
        work_response::Kind::Opened(work_response::Opened {
            lease_ttl: Some(convert::duration(effective_ttl)),
            max_credits: MAX_CREDITS,
            credits: window,
            ack_failures_only: open.ack_failures_only,
        }),
    )
    .await?;
    debug!(queue = %queue.name(), %holder, window, "work stream opened");
    let (include_object, ack_failures_only) = (open.include_object, open.ack_failures_only);
    let mut session = Session {
        queue,
        holder,
        window,
        ttl,
        held: HashMap::new(),
        primary,
        include_object,
        ack_failures_only,
        finalizers,
        tx,
    };
    session.serve(&mut inbound).await
}

/// Whether a Finish with this result gives the lease's credit back: it was
/// applied, or the lease was no longer current.
fn frees_credit(result: &Result<(), QueueError>) -> bool {
    matches!(result, Ok(()) | Err(QueueError::StaleToken { .. }))
}

/// What a refused Finish of a lease this stream holds does instead: a retry
/// whose error says why, kept as the key's last error.
fn refused_outcome(err: &ApiError) -> FinishOutcome {
    FinishOutcome::Retry { error: validate::error_text(format!("the worker's Finish was refused: {err}")) }
}

/// The answer to a Finish: its result as a code and message.
fn finish_ack(key: String, token: u64, result: Result<(), ApiError>) -> work_response::Kind {
    let (code, message) = match result {
        Ok(()) => (Code::Ok, String::new()),
        Err(err) => (code_of(&err), err.to_string()),
    };
    work_response::Kind::FinishAck(work_response::FinishAck { key, token, code: code as i32, message })
}

async fn send(tx: &Outbound, kind: work_response::Kind) -> Result<(), Status> {
    tx.send(Ok(pb::WorkResponse { kind: Some(kind) })).await.map_err(|_| Status::cancelled("the worker went away"))
}

impl Session {
    async fn serve(&mut self, inbound: &mut Streaming<pb::WorkRequest>) -> Result<(), Status> {
        let mut shutting_down = false;
        // Owned handles, so the futures below do not borrow the session that
        // the branch handlers change.
        let (tx, queue, holder, ttl) = (self.tx.clone(), self.queue.clone(), self.holder.clone(), self.ttl);
        let mut deferred = DeferredSteps::new();
        // Watched before the first lease is taken, so no loss goes unheard.
        let mut lost = queue.holders().watch_lost(&holder);
        loop {
            if shutting_down && self.held.values().all(|lease| lease.ended) {
                return Err(Status::unavailable("the queue is shutting down"));
            }
            let free = (self.window as usize).saturating_sub(self.held.len());
            tokio::select! {
                message = inbound.message() => match message {
                    Ok(Some(request)) => self.handle(request, &mut deferred).await?,
                    // Half-close: the worker stopped cleanly. What it still
                    // holds it never started (leases its Finishes made room
                    // for while it stopped) or gave up at its stop timeout:
                    // back to the queue at once, and not a failure of the key.
                    Ok(None) => {
                        let returned = self.queue.holders().return_stopped(&self.holder);
                        if returned > 0 {
                            info!(queue = %self.queue.name(), holder = %self.holder, returned, "worker stopped: the leases it still held returned to the queue, no failure counted");
                        }
                        return Ok(());
                    }
                    Err(status) => {
                        debug!(holder = %self.holder, %status, "work stream broke");
                        return Ok(());
                    }
                },
                leases = queue.get_many(&holder, free, ttl), if free > 0 && !shutting_down => match leases {
                    Ok(leases) => {
                        for lease in leases {
                            self.push_lease(lease, &mut deferred).await?;
                        }
                    }
                    Err(QueueError::ShuttingDown) => {}
                    Err(other) => return Err(ApiError::from(other).into()),
                },
                // Heard even while the window is full and no Get is pending.
                _ = queue.closing(), if !shutting_down => {
                    shutting_down = true;
                    if self.queue.holders().cancel_requested() {
                        self.cancel_all("the queue is shutting down").await?;
                    }
                },
                Some(step) = deferred.next(), if !deferred.is_empty() => self.deferred_done(step).await?,
                lease = lost.recv() => self.lease_lost(lease).await?,
                _ = tx.closed() => return Ok(()),
            }
        }
    }

    /// Sends a lease, or first adds its queue's finalizer beside the loop.
    async fn push_lease(&mut self, lease: Lease<Arc<str>>, deferred: &mut DeferredSteps) -> Result<(), Status> {
        let token = lease.token;
        let must_add = self.finalizers.as_ref().is_some_and(|f| f.must_add(&self.queue, &lease.key));
        let held = StreamLease { key: lease.key.clone(), ended: false, sent: !must_add };
        self.held.insert(token, held);
        match (&self.finalizers, must_add) {
            (Some(finalizers), true) => {
                let (finalizers, queue, primary) = (finalizers.clone(), self.queue.clone(), self.primary.clone());
                let include_object = self.include_object;
                deferred.push(Box::pin(async move {
                    let added = finalizers.add(&queue, &lease).await;
                    let lease = added.then(|| {
                        Box::new(lease_to_send(Some(&finalizers), &queue, &lease, primary.as_deref(), include_object))
                    });
                    Deferred::Lease { token, lease }
                }));
                Ok(())
            }
            _ => {
                let (finalizers, primary) = (self.finalizers.as_deref(), self.primary.as_deref());
                let lease = lease_to_send(finalizers, &self.queue, &lease, primary, self.include_object);
                send(&self.tx, work_response::Kind::Lease(lease)).await
            }
        }
    }

    /// A step beside the loop is done: send its lease or its FinishAck.
    async fn deferred_done(&mut self, step: Deferred) -> Result<(), Status> {
        match step {
            Deferred::Lease { token, lease: Some(lease) } if self.queue.is_current(lease.key.as_str(), token) => {
                if let Some(held) = self.held.get_mut(&token) {
                    held.sent = true;
                }
                send(&self.tx, work_response::Kind::Lease(*lease)).await
            }
            // Finished as a retry, or ended while its finalizer was added: the
            // worker never saw it, so its credit comes back now.
            Deferred::Lease { token, .. } => {
                self.held.remove(&token);
                Ok(())
            }
            Deferred::Finished { key, token, result } => {
                let freed = matches!(result, Ok(()) | Err(ApiError::Queue(QueueError::StaleToken { .. })));
                if freed && self.holds(&key, token) {
                    self.held.remove(&token);
                }
                self.answer_finish(key, token.get(), result).await
            }
        }
    }

    /// A successful Finish of a deleting object on a queue with a finalizer:
    /// the finalizer is removed first, beside the loop. `None` otherwise.
    fn finish_with_removal(&self, finish: &work_request::Finish) -> Option<BoxFuture<'static, Deferred>> {
        let finalizers = self.finalizers.clone()?;
        let success = matches!(finish.outcome, Some(work_request::finish::Outcome::Success(_)));
        let token = LeaseToken::new(finish.token)?;
        if !success || !finalizers.must_remove(&self.queue, &finish.key, token) {
            return None;
        }
        let (queue, key) = (self.queue.clone(), finish.key.clone());
        Some(Box::pin(async move {
            let shared: Arc<str> = Arc::from(key.as_str());
            let result = match finalizers.remove(&queue, &shared, token).await {
                Ok(outcome) => queue.finish(&*shared, token, outcome).map_err(ApiError::from),
                Err(err) => Err(err.into()),
            };
            Deferred::Finished { key, token, result }
        }))
    }

    async fn handle(&mut self, request: pb::WorkRequest, deferred: &mut DeferredSteps) -> Result<(), Status> {
        match request.kind {
            Some(work_request::Kind::Credit(credit)) => {
                self.window = self.window.saturating_add(credit.credits).min(MAX_CREDITS);
                Ok(())
            }
            Some(work_request::Kind::Finish(finish)) => {
                if let Some(step) = self.finish_with_removal(&finish) {
                    deferred.push(step);
                    return Ok(());
                }
                let (result, leases) = self.finish(&finish);
                self.answer_finish(finish.key, finish.token, result).await?;
                for lease in leases {
                    self.push_lease(lease, deferred).await?;
                }
                Ok(())
            }
            Some(work_request::Kind::Extend(extend)) => {
                let extended = match self.extend(&extend) {
                    Ok(renewal) => work_response::Extended {
                        deadline: Some(convert::timestamp(renewal.deadline)),
                        ttl: Some(convert::remaining(renewal.deadline)),
                        cancel: renewal.cancel,
                        ..Default::default()
                    },
                    Err(err) => work_response::Extended {
                        code: code_of(&err) as i32,
                        message: err.to_string(),
                        ..Default::default()
                    },
                };
                let extended = work_response::Extended { key: extend.key, token: extend.token, ..extended };
                send(&self.tx, work_response::Kind::Extended(extended)).await
            }
            Some(work_request::Kind::Open(_)) => {
                Err(Status::invalid_argument("Open may only be the first message of a Work stream"))
            }
            None => Err(Status::invalid_argument("a WorkRequest must set one of open, credit, finish or extend")),
        }
    }

    /// Sends a Finish's FinishAck, unless it was applied and the worker asked
    /// to hear only of failures.
    async fn answer_finish(&self, key: String, token: u64, result: Result<(), ApiError>) -> Result<(), Status> {
        if self.ack_failures_only && result.is_ok() {
            return Ok(());
        }
        send(&self.tx, finish_ack(key, token, result)).await
    }

    /// Applies a Finish and, under the same lock, takes the keys the window
    /// has room for once it is applied: with keys waiting, a worker's Finish
    /// brings its next lease without a second round on the queue's lock.
    fn finish(&mut self, finish: &work_request::Finish) -> (Result<(), ApiError>, Vec<Lease<Arc<str>>>) {
        let token = match validate::token(finish.token) {
            Ok(token) => token,
            Err(err) => return (Err(err), Vec::new()),
        };
        let parsed = validate::key("finish.key", &finish.key)
            .and_then(|key| Ok((key, convert::finish_outcome(finish.outcome.clone().map(Into::into))?)));
        let held_key = self.held.get(&token).map(|held| held.key.clone());
        let (key, outcome, refused) = match (parsed, held_key) {
            (Ok((key, outcome)), Some(held)) if *held == *key => (held, outcome, None),
            (Ok((key, outcome)), None) => (Arc::from(key), outcome, None),
            // The worker's one answer for a lease of this stream, refused:
            // the lease ends as a retry, so its credit comes back now. Kept
            // held, it would wait for a second Finish that a worker that
            // took the first as its answer never sends, and the stream
            // would lose a credit for good.
            (Ok((key, _)), Some(held)) => {
                let err = ApiError::invalid("finish.key", format!("is {key:?}, but lease {token} is of {held:?}"));
                (held, refused_outcome(&err), Some(err))
            }
            (Err(err), Some(held)) => (held, refused_outcome(&err), Some(err)),
            (Err(err), None) => return (Err(err), Vec::new()),
        };
        let (window, held) = (self.window as usize, self.held.len());
        let finishing = self.held.contains_key(&token);
        let (result, leases) = self.queue.finish_then_take(&*key, token, outcome, &self.holder, self.ttl, |result| {
            let held = if finishing && frees_credit(result) { held - 1 } else { held };
            window.saturating_sub(held)
        });
        if finishing && frees_credit(&result) {
            // Either way the lease is no longer this stream's: its credit
            // comes back (for an ended lease, only now: the worker heard).
            self.held.remove(&token);
        }
        let result = match refused {
            Some(err) if result.is_ok() => {
                Err(ApiError::invalid("finish", format!("{err}; the lease ended as a retry")))
            }
            Some(err) => Err(err),
            None => result.map_err(ApiError::from),
        };
        (result, leases)
    }

    /// Whether this stream holds `token` as the lease of `key`.
    fn holds(&self, key: &str, token: LeaseToken) -> bool {
        self.held.get(&token).is_some_and(|held| &*held.key == key)
    }

    fn extend(&mut self, extend: &work_request::Extend) -> Result<crate::queue::LeaseRenewal, ApiError> {
        let key = validate::key("extend.key", &extend.key)?;
        let token = validate::token(extend.token)?;
        let ttl = validate::lease_ttl("extend.ttl", extend.ttl)?;
        self.queue.extend(key, token, ttl).map_err(ApiError::from)
    }

    /// A lease of this stream ended without a Finish (expired, or revoked:
    /// handed back at a drain's end or when leadership was lost), or was asked
    /// back (its key's shard slot moved away): the worker is told to stop.
    /// Its credit comes back only with the worker's Finish, so a worker that
    /// stopped reading gets no more. A lease not sent yet (its finalizer being
    /// added) is dropped when that step ends.
    async fn lease_lost(&mut self, lost: LostLease<Arc<str>>) -> Result<(), Status> {
        let Some(held) = self.held.get_mut(&lost.token).filter(|held| held.sent && !held.ended) else {
            return Ok(());
        };
        let (revoked, message) = match lost.how {
            LeaseLoss::Ended(_) => {
                held.ended = true;
                (true, "the lease ended without a Finish (expired, or revoked by the sidecar)")
            }
            LeaseLoss::AskedBack => {
                (false, "the key's shard slot moved to another replica: finish the lease; it can no longer be extended")
            }
        };
        let cancel = work_response::Cancel {
            key: lost.key.to_string(),
            token: lost.token.get(),
            revoked,
            message: message.into(),
        };
        send(&self.tx, work_response::Kind::Cancel(cancel)).await
    }

    async fn cancel_all(&self, why: &str) -> Result<(), Status> {
        for (token, lease) in self.held.iter().filter(|(_, lease)| lease.sent && !lease.ended) {
            let cancel = work_response::Cancel {
                key: lease.key.to_string(),
                token: token.get(),
                revoked: false,
                message: why.to_string(),
            };
            send(&self.tx, work_response::Kind::Cancel(cancel)).await?;
        }
        Ok(())
    }
}
