//! Shard membership on the API server: each replica's own `coordination.k8s.io` Lease, read and written for a [`shard::Member`].
//!
//! The I/O shell of the sharding protocol. Every `retry_period` a replica
//! lists the Leases of its group (one list: a snapshot at one
//! resourceVersion), hands the snapshot to its `Member`, and writes its own
//! Lease when the member asks. What the member may grant from, and the slots
//! it gains or must revoke, go out on a channel; the owner of the queues
//! answers a revoke with the slots whose leases have ended.
//!
//! The Lease of a member: name `<group>-<identity>`, label
//! [`GROUP_LABEL`] = group, annotation [`MEMBER_ANNOTATION`] = identity,
//! `holderIdentity` the identity (cleared once it left),
//! `leaseDurationSeconds`, and annotation [`CLAIMS_ANNOTATION`] with the
//! claimed slots. Times written on it are for people; no member reads
//! another's clock.
//!
//! Until it has left, the Lease carries [`FINALIZER`], so a deletion cannot
//! hide its claims from anyone while its member may grant from them: the
//! Lease stays, marked, until its member has handed everything over and
//! left (then it lets the Lease go and joins again under a new one), or
//! until another member judged it expired and removed the finalizer. That
//! member also writes the write it judged in annotation
//! [`EXPIRED_ANNOTATION`], so members that read the Lease later (one that
//! just joined, say) need not wait a lease duration of their own. A Lease
//! expired for a further lease duration, its member crashed or gone, is
//! deleted by the other members (which needs `delete` on leases).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep_until};
use tracing::{debug, info, warn};

use crate::shard::{
    Effect, Grant, LeaseRecord, LeaseVersion, Member, MemberId, ObservedLease, ShardSettings, ShardSettingsError,
    ShardView, SlotSet, Snapshot, WriteId,
};

/// Selects the Leases of one group.
pub const GROUP_LABEL: &str = "workqueue-sidecar.io/shard-group";
/// The member's identity, kept when `holderIdentity` is cleared.
pub const MEMBER_ANNOTATION: &str = "workqueue-sidecar.io/shard-member";
/// The slots the member claims ([`SlotSet::to_claims_text`]).
pub const CLAIMS_ANNOTATION: &str = "workqueue-sidecar.io/shard-claims";
/// A new value on each of the member's own writes ([`WriteId`]).
pub const WRITE_ANNOTATION: &str = "workqueue-sidecar.io/shard-write";
/// The write ([`WriteId`]) another member judged expired; it names a write
/// the member's next renewal replaces, so a mark is never taken for a
/// renewed Lease.
pub const EXPIRED_ANNOTATION: &str = "workqueue-sidecar.io/shard-expired";
/// Holds a member's Lease, claims and all, through a deletion until the
/// member has left or its Lease expired.
pub const FINALIZER: &str = "workqueue-sidecar.io/shard-member";

/// Where a replica's Lease lives, who it is, and the protocol's timings.
#[derive(Debug, Clone)]
pub struct MembershipSettings {
    pub namespace: String,
    /// The replicas sharing one set of queues; their Leases carry it as a label.
    pub group: String,
    /// This replica (the pod name in a cluster).
    pub identity: String,
    pub timings: ShardSettings,
}

/// Settings the protocol cannot run with.
#[derive(Debug, thiserror::Error)]
pub enum MembershipSettingsError {
    #[error(transparent)]
    Timings(#[from] ShardSettingsError),
    #[error("the lease duration must be a whole number of seconds (a Lease stores seconds), not {0:?}")]
    FractionalLeaseDuration(Duration),
    #[error("the shard group and the identity must not be empty")]
    EmptyName,
    #[error(
        "this replica's shard Lease would be named {0:?} (`--shard-group`-identity), which the API server refuses: \
         a DNS subdomain is lowercase letters, digits, '-' and '.'; give --leader-election-identity (POD_NAME) \
         or a --shard-group that make one (the default identity is the host name)"
    )]
    BadLeaseName(String),
}

/// What the replica is told as its share changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardEvent {
    /// May grant from these slots until then (`None`: from none).
    Grant(Option<Grant>),
    /// Slots gained, or to revoke: answer a revoke through the sender given
    /// to [`Membership::run`] once their leases have ended.
    Effect(Effect),
}

/// What woke the membership loop.
enum Wake {
    Round,
    LeasesEnded(Box<SlotSet>),
    Stop,
}

/// Resolves once `stop` turns true (the guard `wait_for` returns is not `Send`).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// Why one round could not read or write.
#[derive(Debug, thiserror::Error)]
enum RoundError {
    #[error("listing the shard Leases: {0}")]
    List(#[source] kube::Error),
    #[error("writing Lease {name}: {source}")]
    Write { name: String, source: kube::Error },
    #[error("marking the Lease {name} expired: {source}")]
    MarkExpired { name: String, source: kube::Error },
    #[error("deleting the long expired Lease {name}: {source}")]
    Delete { name: String, source: kube::Error },
    #[error("the API server answered resourceVersion {0:?}, which is not a number")]
    Version(String),
    #[error("no answer from the API server within the renew deadline ({0:?})")]
    NoAnswer(Duration),
}

pub struct Membership {
    api: Api<Lease>,
    settings: MembershipSettings,
    lease_name: String,
    member: Member,
    /// Our Lease's resourceVersion as last written, for the next replace.
    own_version: Option<String>,
    last_grant: Option<Grant>,
    /// Who owns which slot, for `KeyState`; republished when the members change.
    view: ShardView,
    /// False once the API server refused a deletion (a Role without
    /// `delete`): said once, not tried again.
    may_delete: bool,
    /// The write of ours under way, if any: failed if its step is cut short.
    writing: Option<u64>,
}

impl Membership {
    pub fn new(client: kube::Client, settings: MembershipSettings) -> Result<Membership, MembershipSettingsError> {
        settings.timings.validate()?;
        if !crate::replicas::leader::is_whole_seconds(settings.timings.lease_duration) {
            return Err(MembershipSettingsError::FractionalLeaseDuration(settings.timings.lease_duration));
        }
        if settings.group.is_empty() || settings.identity.is_empty() {
            return Err(MembershipSettingsError::EmptyName);
        }
        let lease_name = format!("{}-{}", settings.group, settings.identity);
        // Checked here: the API server refuses every write of such a Lease,
        // and the replica ran on owning nothing, ready, two warnings a second.
        if !crate::k8s_names::is_dns_subdomain(&lease_name) {
            return Err(MembershipSettingsError::BadLeaseName(lease_name));
        }
        let api = Api::namespaced(client, &settings.namespace);
        let member = Member::new(Arc::from(settings.identity.as_str()), settings.timings);
        Ok(Membership {
            api,
            settings,
            lease_name,
            member,
            own_version: None,
            last_grant: None,
            view: ShardView::default(),
            may_delete: true,
            writing: None,
        })
    }

    /// Takes part until `stop` turns true, then leaves: revokes everything,
    /// waits (at most a renew deadline) for the leases to end, and clears its
    /// Lease so the others take over at once. Dropped without that (a crash),
    /// the others take over when its Lease expires.
    pub async fn run(
        mut self,
        events: mpsc::UnboundedSender<ShardEvent>,
        mut leases_ended: mpsc::UnboundedReceiver<SlotSet>,
        mut stop: watch::Receiver<bool>,
    ) {
        let retry = self.settings.timings.retry_period;
        // Each step is bounded as a leader election attempt is: an API server
        // that hangs, rather than refusing, must not hold this loop, which
        // alone ends terms, answers revokes and hears the stop.
        let within = self.settings.timings.renew_deadline;
        let mut next_round = Instant::now();
        let mut leave_by: Option<Instant> = None;
        loop {
            let wake = tokio::select! {
                _ = sleep_until(next_round) => Wake::Round,
                Some(slots) = leases_ended.recv() => Wake::LeasesEnded(Box::new(slots)),
                _ = stopped(&mut stop), if leave_by.is_none() => Wake::Stop,
            };
            match wake {
                Wake::Round => {
                    next_round = Instant::now() + retry;
                    let round = tokio::time::timeout(within, self.round()).await;
                    if let Err(err) = round.unwrap_or_else(|_| Err(self.cut_short(within))) {
                        warn!(error = %err, group = %self.settings.group, "shard membership round failed");
                    }
                }
                Wake::LeasesEnded(slots) => {
                    self.member.leases_ended(&slots);
                    // Released slots go out with the next write, at once.
                    let write = tokio::time::timeout(within, self.write_if_due()).await;
                    if let Err(err) = write.unwrap_or_else(|_| Err(self.cut_short(within))) {
                        warn!(error = %err, group = %self.settings.group, "shard membership write failed");
                    }
                }
                Wake::Stop => {
                    info!(identity = %self.settings.identity, group = %self.settings.group, "leaving the shard group");
                    self.member.leave(Instant::now());
                    leave_by = Some(Instant::now() + self.settings.timings.renew_deadline);
                    next_round = Instant::now();
                }
            }
            self.tell(&events);
            if self.member.has_left() && self.member.was_deleted() && leave_by.is_none() {
                // Its last write dropped the finalizer: the Lease is gone.
                info!(identity = %self.settings.identity, group = %self.settings.group, "handed everything over after the shard Lease was deleted; joining again with a new one");
                self.member = self.member.successor();
                self.own_version = None;
                next_round = Instant::now();
                continue;
            }
            if self.member.has_left() {
                info!(identity = %self.settings.identity, "left the shard group");
                return;
            }
            if leave_by.is_some_and(|by| Instant::now() >= by) {
                warn!(identity = %self.settings.identity, "could not leave within the renew deadline; the others take over when the Lease expires");
                return;
            }
        }
    }

    /// A step got no answer within `within` and was dropped: a write of
    /// ours under way counts as failed (its answer lost), so it is sent again.
    fn cut_short(&mut self, within: Duration) -> RoundError {
        if let Some(seq) = self.writing.take() {
            self.member.write_failed(seq);
        }
        RoundError::NoAnswer(within)
    }

    /// How long a term lasts after the renewal that starts it.
    pub fn renew_deadline(&self) -> Duration {
        self.settings.timings.renew_deadline
    }

    /// Who owns which slot as this replica reads the group's Leases.
    pub fn view(&self) -> ShardView {
        self.view.clone()
    }

    /// Reads every Lease of the group, then writes ours if due, then lets
    /// go of the Leases it judges expired.
    async fn round(&mut self) -> Result<(), RoundError> {
        let (snapshot, stored) = self.read().await?;
        let members = self.member.view().to_vec();
        self.member.observe(&snapshot, Instant::now());
        if self.member.view() != members.as_slice() {
            self.view.publish(self.member.assignment().clone());
        }
        self.write_if_due().await?;
        self.mark_expired(&stored).await?;
        self.delete_long_expired(&stored).await
    }

    /// The group's Leases as one snapshot, and each member's as stored.
    async fn read(&self) -> Result<(Snapshot, BTreeMap<MemberId, Lease>), RoundError> {
        let selector = format!("{GROUP_LABEL}={}", self.settings.group);
        let list = self.api.list(&ListParams::default().labels(&selector)).await.map_err(RoundError::List)?;
        let revision = list.metadata.resource_version.unwrap_or_default();
        let revision = revision.parse::<u64>().map_err(|_| RoundError::Version(revision))?;
        let mut stored = BTreeMap::new();
        let mut leases = Vec::with_capacity(list.items.len());
        for lease in list.items {
            let Some(seen) = observed(&lease) else { continue };
            stored.insert(seen.record.holder.clone(), lease);
            leases.push(Arc::new(seen));
        }
        Ok((Snapshot { revision, leases }, stored))
    }

    /// Marks the Leases the member judges expired so ([`EXPIRED_ANNOTATION`])
    /// and removes their [`FINALIZER`], on condition they are still at the
    /// version judged: nothing can be granted under them any more, members
    /// that read the mark need not wait to see it, and a crashed member's
    /// Lease must not hold up a deletion (of its namespace, say) for ever.
    /// The member's next write, should it come back, puts the finalizer back
    /// and carries a write the mark does not name.
    async fn mark_expired(&self, stored: &BTreeMap<MemberId, Lease>) -> Result<(), RoundError> {
        for (holder, version) in self.member.expired_leases(Instant::now()) {
            let Some(lease) = stored.get(&holder) else { continue };
            // A write id `observed` reads as none (an older release's, or
            // unparsable) cannot be marked, so only the finalizer goes, and
            // is not written again every round.
            let write = lease.metadata.annotations.as_ref().and_then(annotated_write);
            if write.is_none() && !has_finalizer(lease) {
                continue;
            }
            let Some(name) = name_at(lease, version) else { continue };
            let mut marked = lease.clone();
            marked.metadata.finalizers = None;
            if let Some(write) = write {
                marked
                    .metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(EXPIRED_ANNOTATION.to_owned(), write.to_annotation());
            }
            // The resourceVersion read makes the write conditional on it.
            match self.api.replace(name, &PostParams::default(), &marked).await {
                Ok(_) => info!(lease = %name, "marked a shard Lease expired (its finalizer removed)"),
                // Written since: its member is back, or another member was first.
                Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
                Err(source) => return Err(RoundError::MarkExpired { name: name.to_owned(), source }),
            }
        }
        Ok(())
    }

    /// Deletes the Leases the member judges expired for a further lease
    /// duration, once their finalizer is gone, on condition they are still
    /// at the version judged. Each pod of a Deployment joins under a new
    /// name, so without this every pod that ever ran would leave a Lease
    /// that every member lists each retry period. A member that reads such
    /// a Lease gone keeps its claims as last read until they surely ended
    /// (`shard::member`), as for any Lease gone without its finalizer.
    async fn delete_long_expired(&mut self, stored: &BTreeMap<MemberId, Lease>) -> Result<(), RoundError> {
        if !self.may_delete {
            return Ok(());
        }
        for (holder, version) in self.member.long_expired_leases(Instant::now()) {
            let Some(lease) = stored.get(&holder).filter(|l| !has_finalizer(l)) else { continue };
            let Some(name) = name_at(lease, version) else { continue };
            let preconditions = Preconditions { resource_version: lease.metadata.resource_version.clone(), uid: None };
            let params = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
            match self.api.delete(name, &params).await {
                Ok(_) => info!(lease = %name, "deleted a long expired shard Lease"),
                // Written since (its member is back), or already gone.
                Err(kube::Error::Api(status)) if status.code == 409 || status.code == 404 => {}
                Err(kube::Error::Api(status)) if status.code == 403 => {
                    warn!(lease = %name, error = %status.message, "may not delete long expired shard Leases (the Role lacks `delete` on leases); they stay");
                    self.may_delete = false;
                    return Ok(());
                }
                Err(source) => return Err(RoundError::Delete { name: name.to_owned(), source }),
            }
        }
        Ok(())
    }

    async fn write_if_due(&mut self) -> Result<(), RoundError> {
        let Some(write) = self.member.next_write(Instant::now()) else { return Ok(()) };
        let lease = self.lease(&write.record);
        self.writing = Some(write.seq);
        let written = match &self.own_version {
            None => self.api.create(&PostParams::default(), &lease).await,
            Some(_) => self.api.replace(&self.lease_name, &PostParams::default(), &lease).await,
        };
        self.writing = None;
        let stored = match written {
            Ok(stored) => stored,
            Err(err) => {
                self.member.write_failed(write.seq);
                // Created before (a restart with the same identity) or
                // changed under us: the next write replaces what is there.
                // Deleted under us: the next write creates it again (the
                // others keep its last claims until it would have expired).
                match &err {
                    kube::Error::Api(status) if status.code == 409 => {
                        self.own_version = self
                            .api
                            .get_opt(&self.lease_name)
                            .await
                            .ok()
                            .flatten()
                            .map(|l| l.metadata.resource_version.unwrap_or_default());
                    }
                    kube::Error::Api(status) if status.code == 404 => self.own_version = None,
                    _ => {}
                }
                return Err(RoundError::Write { name: self.lease_name.clone(), source: err });
            }
        };
        let version = stored.metadata.resource_version.unwrap_or_default();
        let Ok(number) = version.parse::<u64>() else {
            self.member.write_failed(write.seq);
            return Err(RoundError::Version(version));
        };
        debug!(lease = %self.lease_name, version = number, claims = write.record.claims.len(), "wrote the shard Lease");
        self.own_version = Some(version);
        self.member.write_succeeded(write.seq, LeaseVersion(number), Instant::now());
        Ok(())
    }

    /// Our Lease carrying `record`.
    fn lease(&self, record: &LeaseRecord) -> Lease {
        let labels = BTreeMap::from([(GROUP_LABEL.to_owned(), self.settings.group.clone())]);
        let mut annotations = BTreeMap::from([
            (MEMBER_ANNOTATION.to_owned(), self.settings.identity.clone()),
            (CLAIMS_ANNOTATION.to_owned(), record.claims.to_claims_text()),
        ]);
        if let Some(write) = record.write {
            annotations.insert(WRITE_ANNOTATION.to_owned(), write.to_annotation());
        }
        // Once it has left nothing is claimed: the finalizer goes, and a
        // Lease being deleted goes with it.
        let finalizers = (!record.leaving).then(|| vec![FINALIZER.to_owned()]);
        Lease {
            metadata: ObjectMeta {
                name: Some(self.lease_name.clone()),
                namespace: Some(self.settings.namespace.clone()),
                labels: Some(labels),
                annotations: Some(annotations),
                finalizers,
                managed_fields: crate::replicas::leader::without_managed_fields(),
                resource_version: self.own_version.clone(),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: (!record.leaving).then(|| self.settings.identity.clone()),
                lease_duration_seconds: Some(i32::try_from(record.lease_duration.as_secs()).unwrap_or(i32::MAX)),
                renew_time: Some(MicroTime(Timestamp::now())),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Sends what changed since the last call: effects, then the grant.
    fn tell(&mut self, events: &mpsc::UnboundedSender<ShardEvent>) {
        for effect in self.member.take_effects() {
            let _ = events.send(ShardEvent::Effect(effect));
        }
        let grant = self.member.grant(Instant::now());
        if grant != self.last_grant {
            self.last_grant = grant;
            let _ = events.send(ShardEvent::Grant(grant));
        }
    }
}

fn has_finalizer(lease: &Lease) -> bool {
    lease.metadata.finalizers.iter().flatten().any(|f| f == FINALIZER)
}

/// The Lease's name, if it is stored at `version`.
fn name_at(lease: &Lease, version: LeaseVersion) -> Option<&str> {
    let stored = lease.metadata.resource_version.as_deref().and_then(|v| v.parse::<u64>().ok());
    lease.metadata.name.as_deref().filter(|_| stored == Some(version.0))
}

/// The write id a Lease's annotations carry; `None` when absent or unparsable.
fn annotated_write(annotations: &BTreeMap<String, String>) -> Option<WriteId> {
    annotations.get(WRITE_ANNOTATION).and_then(|text| WriteId::parse_annotation(text))
}

/// A Lease of the group as the protocol sees it; `None` for one that is not
/// a member's (no member annotation, a version that is not a number). Claims
/// that do not parse are read as every slot, and logged.
fn observed(lease: &Lease) -> Option<ObservedLease> {
    let annotations = lease.metadata.annotations.as_ref()?;
    let member: MemberId = Arc::from(annotations.get(MEMBER_ANNOTATION)?.as_str());
    let version = lease.metadata.resource_version.as_deref()?.parse::<u64>().ok()?;
    let claims = match SlotSet::parse_claims_text(annotations.get(CLAIMS_ANNOTATION).map_or("", String::as_str)) {
        Ok(claims) => claims,
        // Written by a build that knows another form (a rolling upgrade):
        // what it claims is unknown, so it is taken to claim every slot
        // while it is live. That holds up handovers, never grants a slot
        // twice, as taking it to claim none could.
        Err(err) => {
            warn!(lease = ?lease.metadata.name, error = %err, "a shard Lease's claims do not parse; taken to claim every slot while it is live");
            SlotSet::FULL
        }
    };
    let spec = lease.spec.as_ref()?;
    let leaving = spec.holder_identity.as_deref().is_none_or(str::is_empty);
    let seconds = spec.lease_duration_seconds.and_then(|s| u64::try_from(s).ok()).unwrap_or(0);
    let write = annotated_write(annotations);
    // A mark counts only for the write it names: one left from before a
    // renewal (or written by hand) says nothing of the current write.
    let judged = annotations.get(EXPIRED_ANNOTATION).and_then(|text| WriteId::parse_annotation(text));
    let judged_expired = write.is_some() && judged == write;
    let record = LeaseRecord { holder: member, write, lease_duration: Duration::from_secs(seconds), claims, leaving };
    let deleting = lease.metadata.deletion_timestamp.is_some();
    Some(ObservedLease { version: LeaseVersion(version), record, deleting, judged_expired })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::Slot;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn lease_with(annotations: &[(&str, &str)], holder: Option<&str>, version: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(version.to_owned()),
                annotations: Some(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(15),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_members_lease_should_read_back_as_its_record() {
        let claims: SlotSet = (0..10).chain([40]).filter_map(Slot::new).collect();
        let text = claims.to_claims_text();
        let lease = lease_with(&[(MEMBER_ANNOTATION, "pod-a"), (CLAIMS_ANNOTATION, &text)], Some("pod-a"), "123");
        let observed = observed(&lease).unwrap();
        assert_eq!(observed.version, LeaseVersion(123));
        assert_eq!(&*observed.record.holder, "pod-a");
        assert_eq!(observed.record.claims, claims);
        assert_eq!((observed.record.lease_duration, observed.record.leaving), (Duration::from_secs(15), false));
    }

    #[test]
    fn a_write_id_should_read_back_and_a_deletion_asked_for_should_read_as_deleting() {
        let write = WriteId { incarnation: 0xab, seq: 7 };
        let annotations = [(MEMBER_ANNOTATION, "pod-a"), (WRITE_ANNOTATION, "00000000000000ab-7")];
        let mut lease = lease_with(&annotations, Some("pod-a"), "5");
        assert_eq!(write.to_annotation(), annotations[1].1);
        let read = observed(&lease).unwrap();
        assert_eq!((read.record.write, read.deleting), (Some(write), false));
        lease.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        assert!(observed(&lease).unwrap().deleting);
        for bad in ["ab-7", "00000000000000ab", "00000000000000ab-x", ""] {
            let lease = lease_with(&[(MEMBER_ANNOTATION, "pod-a"), (WRITE_ANNOTATION, bad)], Some("pod-a"), "5");
            assert_eq!(observed(&lease).unwrap().record.write, None, "{bad:?} is no write id");
        }
    }

    #[test]
    fn an_expiry_mark_should_count_only_for_the_write_it_names() {
        let judged = |mark: Option<&str>| {
            let mut annotations = vec![(MEMBER_ANNOTATION, "pod-a"), (WRITE_ANNOTATION, "00000000000000ab-7")];
            annotations.extend(mark.map(|mark| (EXPIRED_ANNOTATION, mark)));
            observed(&lease_with(&annotations, Some("pod-a"), "5")).unwrap().judged_expired
        };
        assert!(judged(Some("00000000000000ab-7")), "the current write judged expired");
        assert!(!judged(None), "no mark");
        assert!(!judged(Some("00000000000000ab-6")), "a mark left from before a renewal");
        assert!(!judged(Some("00000000000000cd-7")), "a mark of another incarnation");
        assert!(!judged(Some("x")), "a mark that does not parse");
        let without_write = [(MEMBER_ANNOTATION, "pod-a"), (EXPIRED_ANNOTATION, "00000000000000ab-7")];
        assert!(!observed(&lease_with(&without_write, Some("pod-a"), "5")).unwrap().judged_expired, "no write id");
    }

    #[test]
    fn a_lease_with_its_holder_cleared_should_read_as_leaving() {
        let lease = lease_with(&[(MEMBER_ANNOTATION, "pod-a"), (CLAIMS_ANNOTATION, "")], None, "7");
        assert!(observed(&lease).unwrap().record.leaving);
    }

    #[test]
    fn claims_in_a_form_not_known_should_read_as_every_slot() {
        for text in ["0-9,40", "v3:AAAA", "v2:AggE"] {
            let lease = lease_with(&[(MEMBER_ANNOTATION, "pod-a"), (CLAIMS_ANNOTATION, text)], Some("pod-a"), "1");
            assert_eq!(observed(&lease).unwrap().record.claims, SlotSet::FULL, "{text:?}");
        }
    }

    #[test]
    fn a_lease_that_is_not_a_members_should_be_ignored() {
        assert_eq!(observed(&lease_with(&[], Some("x"), "1")), None, "no member annotation");
        let member = [(MEMBER_ANNOTATION, "pod-a")];
        assert_eq!(observed(&lease_with(&member, Some("pod-a"), "abc")), None, "a version that is not a number");
    }

    #[test]
    fn settings_should_need_whole_seconds_and_names() {
        let settings = |timings: ShardSettings, identity: &str| MembershipSettings {
            namespace: "default".into(),
            group: "g".into(),
            identity: identity.into(),
            timings,
        };
        let client = || {
            let config = kube::Config::new("http://127.0.0.1:1".parse().unwrap());
            kube::Client::try_from(config).unwrap()
        };
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let fractional =
                ShardSettings { lease_duration: Duration::from_millis(15_500), ..ShardSettings::default() };
            assert!(matches!(
                Membership::new(client(), settings(fractional, "a")),
                Err(MembershipSettingsError::FractionalLeaseDuration(_))
            ));
            assert!(matches!(
                Membership::new(client(), settings(ShardSettings::default(), "")),
                Err(MembershipSettingsError::EmptyName)
            ));
            for identity in ["S1", "pod_1", "pod-1-"] {
                assert!(matches!(
                    Membership::new(client(), settings(ShardSettings::default(), identity)),
                    Err(MembershipSettingsError::BadLeaseName(_))
                ));
            }
            assert!(Membership::new(client(), settings(ShardSettings::default(), "pod-1.zone-a")).is_ok());
            let unsafe_timings = ShardSettings { renew_deadline: Duration::from_secs(15), ..ShardSettings::default() };
            assert!(matches!(
                Membership::new(client(), settings(unsafe_timings, "a")),
                Err(MembershipSettingsError::Timings(_))
            ));
        });
    }
}
