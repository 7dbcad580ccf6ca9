//! Remote workers that hold every lease they get (a reconcile that never ends, one of them deaf to cancellation), and a tracker of who holds which key by the workers' own account.
#![allow(dead_code)] // Each test binary uses the part of this helper it needs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;
use workqueue_sidecar::grpc::pb::{self, work_request, work_response};

/// Who holds which key, by the workers' own account: a key counts as held
/// by a worker until its lease deadline passes unextended, it finishes it,
/// or the sidecar cancels it (a worker deaf to cancellation holds it until
/// its deadline).
#[derive(Default)]
pub struct Tracker {
    pub held: Mutex<HashMap<String, (usize, SystemTime)>>,
    pub violations: Mutex<Vec<String>>,
}

impl Tracker {
    pub fn hold(&self, key: &str, worker: usize, deadline: SystemTime) {
        let now = SystemTime::now();
        // A grant or extension read after its deadline (this process was
        // slow to read it: the sidecars and the test share two loaded
        // cores) held nothing by the time anyone saw it; taking it as a hold
        // would report a key held twice that never was.
        if deadline <= now {
            return;
        }
        let mut held = self.held.lock().unwrap();
        if let Some((other, until)) = held.get(key)
            && *other != worker
            && *until > now
        {
            let overlap = until.duration_since(now).unwrap_or_default();
            self.violations
                .lock()
                .unwrap()
                .push(format!("{key} granted to worker {worker} while worker {other} holds it for {overlap:?} more"));
        }
        held.insert(key.to_string(), (worker, deadline));
    }

    pub fn release(&self, key: &str, worker: usize) {
        let mut held = self.held.lock().unwrap();
        if held.get(key).is_some_and(|(w, _)| *w == worker) {
            held.remove(key);
        }
    }

    pub fn count(&self, worker: usize) -> usize {
        let now = SystemTime::now();
        self.held.lock().unwrap().values().filter(|(w, until)| *w == worker && *until > now).count()
    }
}

pub fn wall(timestamp: Option<prost_types::Timestamp>) -> SystemTime {
    SystemTime::try_from(timestamp.expect("a deadline")).unwrap()
}

/// A worker that behaves as the clients do: it never finishes (a slow
/// reconcile), extends each lease at a third of its time, and stops working
/// on a key when its deadline passes unextended or the sidecar cancels it
/// (answering a cancel of a lease still valid with its Finish, a retry).
pub fn spawn_holding_worker(
    id: usize,
    endpoint: String,
    queue: &str,
    tracker: Arc<Tracker>,
) -> tokio::task::JoinHandle<()> {
    let queue = queue.to_owned();
    tokio::spawn(async move {
        let Ok(mut client) = WorkQueueServiceClient::connect(endpoint).await else { return };
        let (tx, rx) = mpsc::channel(64);
        let open = work_request::Open {
            queue,
            worker: format!("w{id}"),
            credits: 1024,
            lease_ttl: None,
            include_object: false,
            ack_failures_only: false,
        };
        tx.send(pb::WorkRequest { kind: Some(work_request::Kind::Open(open)) }).await.unwrap();
        let Ok(response) = client.work(ReceiverStream::new(rx)).await else { return };
        let mut responses = response.into_inner();
        let mut leases: HashMap<u64, (String, SystemTime, Instant)> = HashMap::new();
        let mut tick = tokio::time::interval(Duration::from_millis(50));
        loop {
            tokio::select! {
                message = responses.next() => {
                    let Some(Ok(message)) = message else { break };
                    match message.kind {
                        Some(work_response::Kind::Lease(lease)) => {
                            let deadline = wall(lease.deadline);
                            tracker.hold(&lease.key, id, deadline);
                            leases.insert(lease.token, (lease.key, deadline, Instant::now()));
                        }
                        Some(work_response::Kind::Extended(extended)) if extended.code == 0 => {
                            if let Some(entry) = leases.get_mut(&extended.token) {
                                entry.1 = wall(extended.deadline);
                                tracker.hold(&entry.0, id, entry.1);
                            }
                        }
                        Some(work_response::Kind::Extended(extended)) => {
                            if let Some((key, _, _)) = leases.remove(&extended.token) {
                                tracker.release(&key, id);
                            }
                        }
                        Some(work_response::Kind::Cancel(cancel)) => {
                            if let Some((key, _, _)) = leases.remove(&cancel.token) {
                                tracker.release(&key, id);
                                if !cancel.revoked {
                                    let retry = pb::Retry { error: "cancelled".into() };
                                    let outcome = Some(work_request::finish::Outcome::Retry(retry));
                                    let finish = work_request::Finish { key, token: cancel.token, outcome };
                                    let _ = tx.try_send(pb::WorkRequest { kind: Some(work_request::Kind::Finish(finish)) });
                                }
                            }
                        }
                        _ => {}
                    }
                }
                _ = tick.tick() => {
                    let now = SystemTime::now();
                    leases.retain(|_, (key, deadline, _)| {
                        let alive = *deadline > now;
                        if !alive {
                            tracker.release(key, id);
                        }
                        alive
                    });
                    for (token, (key, deadline, last_extend)) in leases.iter_mut() {
                        let ttl = deadline.duration_since(now).unwrap_or_default();
                        if last_extend.elapsed() >= Duration::from_millis(400) || ttl < Duration::from_millis(800) {
                            *last_extend = Instant::now();
                            let extend = work_request::Extend { key: key.clone(), token: *token, ttl: None };
                            let _ = tx.try_send(pb::WorkRequest { kind: Some(work_request::Kind::Extend(extend)) });
                        }
                    }
                }
            }
        }
        // The stream broke: this worker stops on everything it held.
        for (key, _, _) in leases.into_values() {
            tracker.release(&key, id);
        }
    })
}

/// A unary worker whose reconcile never ends and never looks up: it takes
/// every key it can with `Get` and holds each until the deadline `Get` gave
/// it, with no Extend, Done or Finish, so it hears of nothing the sidecar
/// does meanwhile. That the sidecar may do nothing to the lease before its
/// deadline is the whole promise of a lease.
pub fn spawn_deaf_unary_worker(
    id: usize,
    endpoint: String,
    queue: &str,
    tracker: Arc<Tracker>,
) -> tokio::task::JoinHandle<()> {
    let queue = queue.to_owned();
    tokio::spawn(async move {
        let Ok(mut client) = WorkQueueServiceClient::connect(endpoint).await else { return };
        loop {
            let request = pb::GetRequest {
                queue: queue.clone(),
                worker: format!("w{id}"),
                max_keys: 64,
                wait: Some(prost_types::Duration { seconds: 1, nanos: 0 }),
                lease_ttl: None,
                include_object: false,
            };
            let Ok(response) = client.get(request).await else { return };
            for lease in response.into_inner().leases {
                tracker.hold(&lease.key, id, wall(lease.deadline));
            }
        }
    })
}

impl Tracker {
    /// Keys held now, by worker.
    pub fn holders(&self) -> HashMap<String, usize> {
        let now = SystemTime::now();
        self.held
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, (_, until))| *until > now)
            .map(|(k, (w, _))| (k.clone(), *w))
            .collect()
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}
