//! Leader election through a `coordination.k8s.io` Lease: only the leader hands out keys.
//!
//! Every replica keeps its informers and queues warm; a follower's queues
//! carry the `NOT_LEADER` hold, so they hand out nothing. The elector tries
//! every `retry_period` to take or renew the Lease, with optimistic
//! concurrency on its resourceVersion. Like client-go, it judges another
//! holder's Lease expired by its own clock: `lease_duration` after it last saw
//! the Lease change, never by comparing timestamps written on another machine.
//!
//! Why no key is ever held by two workers across a handover: every renewal
//! starts a term that ends `renew_deadline` after the renewal request was
//! sent, and the queues grant nothing after the term's end and let no lease
//! (granted or extended) outlast it. A leader that froze, or lost its
//! connection, and told nobody, renewed last at some `r`: all its leases are
//! over by `r + renew_deadline`, and even on waking it grants nothing more,
//! while no other replica can take the Lease before `r + lease_duration`. The
//! difference is the margin for network latency and clock drift. A leader
//! that sees another holder steps down and revokes its leases at once.
//! Workers must stop working when their lease deadline passes unextended;
//! the clients in `clients/` do.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::{Instant, sleep};
use tracing::{info, warn};

/// The hold a follower's queues carry.
pub const NOT_LEADER: &str = "not the leader";

/// How the election runs; the defaults are client-go's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionSettings {
    pub namespace: String,
    pub lease_name: String,
    /// This replica's name in the Lease (the pod name in a cluster).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often every replica tries to take or renew the Lease.
    pub retry_period: Duration,
}

impl ElectionSettings {
    /// Errors name the flag, for the CLI.
    pub fn validate(&self) -> Result<(), ElectionSettingsError> {
        if self.retry_period.is_zero() {
            return Err(ElectionSettingsError::ZeroRetryPeriod);
        }
        if self.renew_deadline <= self.retry_period {
            return Err(ElectionSettingsError::RenewDeadlineNotAfterRetry {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        if !is_whole_seconds(self.lease_duration) {
            return Err(ElectionSettingsError::LeaseDurationNotWholeSeconds { lease_duration: self.lease_duration });
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ElectionSettingsError::LeaseNotLongerThanRenewDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// Whether a Lease's `leaseDurationSeconds` holds `duration` exactly. Other
/// replicas wait only what the Lease says: a duration cut to whole seconds
/// could end before this replica's term does (1.5 s would read as 1 s, 0.8 s
/// as 0 s: taken over at once), so only whole seconds are accepted.
pub fn is_whole_seconds(duration: Duration) -> bool {
    duration.subsec_nanos() == 0 && duration.as_secs() >= 1 && i32::try_from(duration.as_secs()).is_ok()
}

/// `managedFields` as a write sends it for the API server to drop them: a
/// list of one empty entry. Every replica reads the Leases this sidecar
/// writes every retry period, and the field-ownership record is a fifth to
/// a half of each (520 of 2,450 bytes for a shard Lease, 525 of 1,180 for a
/// small one); nobody applies to these Leases, so nothing needs it. A create
/// keeps it, the next replace drops it, and writes of others (`kubectl`)
/// do not bring it back.
pub fn without_managed_fields() -> Option<Vec<ManagedFieldsEntry>> {
    Some(vec![ManagedFieldsEntry::default()])
}

/// Election timings that cannot work together, named by their flags.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionSettingsError {
    #[error("--leader-election-retry-period must be greater than zero")]
    ZeroRetryPeriod,
    #[error(
        "--leader-election-renew-deadline ({renew_deadline:?}) must be longer than the retry period ({retry_period:?})"
    )]
    RenewDeadlineNotAfterRetry { renew_deadline: Duration, retry_period: Duration },
    #[error(
        "--leader-election-lease-duration ({lease_duration:?}) must be a whole number of seconds: the Lease records it in seconds, and other replicas wait no longer than that"
    )]
    LeaseDurationNotWholeSeconds { lease_duration: Duration },
    #[error(
        "--leader-election-lease-duration ({lease_duration:?}) must be longer than the renew deadline ({renew_deadline:?})"
    )]
    LeaseNotLongerThanRenewDeadline { lease_duration: Duration, renew_deadline: Duration },
}

/// What the elector tells the rest of the sidecar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leadership {
    /// This replica holds the Lease; told at every renewal, with the end of
    /// the term the renewal started (nothing is granted past it).
    Leader {
        term_ends: Instant,
    },
    Follower,
}

/// The Lease as last seen, and when this replica first saw it that way.
struct Observed {
    holder: Option<String>,
    renew_time: Option<Timestamp>,
    at: Instant,
}

pub struct Elector {
    api: Api<Lease>,
    settings: ElectionSettings,
    observed: Option<Observed>,
}

#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error("reading Lease {namespace}/{name}: {source}")]
    Read { namespace: String, name: String, source: kube::Error },
    #[error("writing Lease {namespace}/{name}: {source}")]
    Write { namespace: String, name: String, source: kube::Error },
    #[error("the API server did not answer within the renew deadline ({within:?})")]
    NoAnswer { within: Duration },
}

impl Elector {
    pub fn new(client: kube::Client, settings: ElectionSettings) -> Self {
        let api = Api::namespaced(client, &settings.namespace);
        Elector { api, settings, observed: None }
    }

    /// Runs until `stop` turns true, calling `on_change` with `Follower` first
    /// and whenever this replica stops leading, and with `Leader` at every
    /// successful renewal. On stop, a leader releases the Lease so another
    /// replica takes over at once: once the leases its queues handed back
    /// (`handed_back_until`) are past their deadlines, since a worker that
    /// does not listen may work on a key until then.
    pub async fn run(
        mut self,
        on_change: impl Fn(Leadership),
        handed_back_until: impl Fn() -> Option<Instant>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut leading = false;
        let mut last_renewal = Instant::now();
        on_change(Leadership::Follower);
        loop {
            let attempt_started = Instant::now();
            // Bounded as client-go bounds its renewals: an API server that
            // hangs (rather than refuses) kept this leader's gauge at 1 and
            // said nothing until it answered again, 40 s and more.
            let within = self.settings.renew_deadline;
            let attempt = tokio::time::timeout(within, self.try_acquire_or_renew()).await;
            match attempt.unwrap_or(Err(ElectionError::NoAnswer { within })) {
                Ok(true) => {
                    last_renewal = attempt_started;
                    if !leading {
                        leading = true;
                        info!(identity = %self.settings.identity, lease = %self.settings.lease_name, "became the leader");
                    }
                    on_change(Leadership::Leader { term_ends: attempt_started + self.settings.renew_deadline });
                }
                Ok(false) => {
                    if leading {
                        leading = false;
                        warn!(identity = %self.settings.identity, "another replica holds the Lease: stepping down");
                        on_change(Leadership::Follower);
                    }
                }
                Err(err) => {
                    warn!(error = %err, "leader election attempt failed");
                    if leading && last_renewal.elapsed() >= self.settings.renew_deadline {
                        leading = false;
                        warn!(identity = %self.settings.identity, "could not renew the Lease in time: stepping down");
                        on_change(Leadership::Follower);
                    }
                }
            }
            tokio::select! {
                _ = sleep(self.settings.retry_period) => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
        }
        if leading {
            on_change(Leadership::Follower);
            // Every lease granted in a term ends with it: never longer than one.
            let at_most = Instant::now() + self.settings.renew_deadline;
            if let Some(until) =
                handed_back_until().map(|until| until.min(at_most)).filter(|until| *until > Instant::now())
            {
                info!(
                    wait_seconds = until.saturating_duration_since(Instant::now()).as_secs_f64(),
                    "releasing the Lease once the leases handed back at shutdown are past their deadlines"
                );
                tokio::time::sleep_until(until).await;
            }
            if let Err(err) = self.release().await {
                warn!(error = %err, "releasing the Lease at shutdown failed; another replica takes over when it expires");
            }
        }
    }

    fn read_error(&self, source: kube::Error) -> ElectionError {
        ElectionError::Read {
            namespace: self.settings.namespace.clone(),
            name: self.settings.lease_name.clone(),
            source,
        }
    }

    fn write_error(&self, source: kube::Error) -> ElectionError {
        ElectionError::Write {
            namespace: self.settings.namespace.clone(),
            name: self.settings.lease_name.clone(),
            source,
        }
    }

    /// One attempt; `Ok(true)` when this replica holds the Lease afterwards.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, ElectionError> {
        let now = Timestamp::now();
        let Some(lease) = self.api.get_opt(&self.settings.lease_name).await.map_err(|e| self.read_error(e))? else {
            let created = self.api.create(&PostParams::default(), &self.claim(None, now, 0)).await;
            return match created {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
                Err(err) => Err(self.write_error(err)),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let renew_time = spec.renew_time.as_ref().map(|t| t.0);
        let changed = self.observed.as_ref().is_none_or(|o| o.holder != holder || o.renew_time != renew_time);
        if changed {
            self.observed = Some(Observed { holder: holder.clone(), renew_time, at: Instant::now() });
        }
        let mine = holder.as_deref() == Some(self.settings.identity.as_str());
        let duration = spec
            .lease_duration_seconds
            .map_or(self.settings.lease_duration, |s| Duration::from_secs(u64::try_from(s).unwrap_or(0)));
        let expired = self.observed.as_ref().is_some_and(|o| o.at.elapsed() >= duration);
        if !(mine || holder.is_none() || expired) {
            return Ok(false);
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!mine);
        let acquired = if mine { spec.acquire_time.map(|t| t.0) } else { None };
        let mut claim = self.claim(acquired, now, transitions);
        claim.metadata.resource_version = lease.metadata.resource_version.clone();
        match self.api.replace(&self.settings.lease_name, &PostParams::default(), &claim).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(err) => Err(self.write_error(err)),
        }
    }

    /// The Lease with this replica as holder.
    fn claim(&self, acquired: Option<Timestamp>, now: Timestamp, transitions: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.settings.lease_name.clone()),
                namespace: Some(self.settings.namespace.clone()),
                managed_fields: without_managed_fields(),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.settings.identity.clone()),
                lease_duration_seconds: Some(i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX)),
                acquire_time: Some(MicroTime(acquired.unwrap_or(now))),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Gives the Lease up: clears the holder, so the next attempt of any
    /// replica takes it.
    async fn release(&self) -> Result<(), ElectionError> {
        let Some(mut lease) = self.api.get_opt(&self.settings.lease_name).await.map_err(|e| self.read_error(e))? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.api
            .replace(&self.settings.lease_name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.write_error(e))?;
        info!(identity = %self.settings.identity, "released the Lease");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> ElectionSettings {
        ElectionSettings {
            namespace: "default".into(),
            lease_name: "workqueue-sidecar".into(),
            identity: "pod-a".into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    #[test]
    fn settings_should_need_lease_longer_than_deadline_longer_than_retry() {
        assert!(settings().validate().is_ok());
        let bad = ElectionSettings { renew_deadline: Duration::from_secs(20), ..settings() };
        assert!(matches!(bad.validate(), Err(ElectionSettingsError::LeaseNotLongerThanRenewDeadline { .. })));
        let bad = ElectionSettings { retry_period: Duration::from_secs(10), ..settings() };
        assert!(matches!(bad.validate(), Err(ElectionSettingsError::RenewDeadlineNotAfterRetry { .. })));
    }

    #[test]
    fn a_lease_duration_the_lease_cannot_record_exactly_should_be_refused() {
        // Written as 0 s, 1 s and 1 s: other replicas would take over before
        // this one's term (renew deadline) ends.
        for (lease_duration, renew_deadline, retry_period) in [(800, 600, 200), (1500, 1200, 500), (1999, 1500, 500)] {
            let bad = ElectionSettings {
                lease_duration: Duration::from_millis(lease_duration),
                renew_deadline: Duration::from_millis(renew_deadline),
                retry_period: Duration::from_millis(retry_period),
                ..settings()
            };
            assert!(
                matches!(bad.validate(), Err(ElectionSettingsError::LeaseDurationNotWholeSeconds { .. })),
                "{bad:?}"
            );
        }
        let whole = ElectionSettings {
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(500),
            ..settings()
        };
        assert_eq!(whole.validate(), Ok(()));
    }
}
