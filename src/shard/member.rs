//! One replica's side of the sharding protocol: a synchronous state machine that takes Lease snapshots and write results, with time passed in, and decides which slots it may grant from, until when.
//!
//! Each slot is, for this member, free, claiming, held or draining:
//! - free -> claiming: the member's assignment gives it the slot and no
//!   other live Lease claims it. The slot goes into the next write.
//! - claiming -> held: a snapshot that contains a write of the current
//!   term chain with the claim shows no other claim of the slot that was
//!   live as of that write's sending. Otherwise the claim is withdrawn.
//! - held: granted from while the term lasts; a term rests on the last
//!   acknowledged renewal and ends `renew_deadline` after it was sent. A
//!   renewal acknowledged after the term ended starts a new chain, and every
//!   held slot is claimed again (the paused-member hazard).
//! - held -> draining: the assignment moved the slot away. Nothing more is
//!   granted; the leases in it are revoked; it stays claimed until they have
//!   ended (told by [`Member::leases_ended`]) or the term in force ended.
//! - draining -> free: gone from the next write, which the new owner waits for.
//!
//! Why no slot is held by two members at once is in docs/sharding.md.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::assignment::Assignment;
#[cfg(test)]
use super::fault::Fault;
use super::observation::{LeaseRecord, LeaseVersion, MemberId, ObservedLease, Snapshot, WriteId};
use super::settings::ShardSettings;
use super::slot::SlotSet;

/// How many acknowledged writes a member remembers, to recognise its own
/// Lease in a snapshot: a snapshot older than that is of no use for a check.
const WRITES_REMEMBERED: usize = 16;

/// What the member tells its I/O shell, drained with [`Member::take_effects`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// These slots may be granted from now (bounded by [`Member::grant`]):
    /// list their objects if not cached yet.
    Gained(SlotSet),
    /// Stop granting from these slots and revoke (or wait out) their leases;
    /// call [`Member::leases_ended`] when none is left.
    Revoke(SlotSet),
    /// A handover to this member is complete: every slot one change of the
    /// members moved here is held, this long after the change began (when
    /// the old owner's Lease was last renewed, for a crash; when this member
    /// saw the join or the leave, otherwise).
    HandedOver(Duration),
    /// A renewal was acknowledged this long after the term it would have
    /// extended had ended (a pause, a slow or unreachable API server): a
    /// new term chain starts, and every held slot is revoked and checked
    /// again.
    TermGap(Duration),
}

/// A write of the member's own Lease to send; answer with
/// [`Member::write_succeeded`] or [`Member::write_failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseWrite {
    pub seq: u64,
    pub record: LeaseRecord,
}

/// What the member may grant from now: leases in these slots must end by `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grant {
    pub slots: SlotSet,
    pub until: Instant,
}

/// Whether the member breaks one of the named rules on purpose (a
/// `Fault` of `shard/fault.rs`, set by tests only). Outside tests it is
/// `false` and the member has no fault to read, so no production path can
/// branch on one.
#[cfg(test)]
macro_rules! breaks {
    ($member:expr, $($fault:ident)|+) => {
        matches!($member.fault, $(Fault::$fault)|+)
    };
}
#[cfg(not(test))]
macro_rules! breaks {
    ($member:expr, $($fault:ident)|+) => {
        false
    };
}

/// A number no other `Member` (in this process, or likely in any other)
/// starts with: random per process, then counted.
fn fresh_incarnation() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(COUNT.fetch_add(1, Ordering::Relaxed))
}

#[derive(Debug, Clone, Copy)]
struct InFlight {
    seq: u64,
    sent_at: Instant,
    leaving: bool,
}

/// Another member's Lease as last read, and since when this member has seen
/// it unchanged.
#[derive(Debug, Clone)]
struct Seen {
    lease: Arc<ObservedLease>,
    since: Instant,
    /// The first read without it, once deleted: unless the version last read
    /// had expired by then, its member may have renewed unseen just before,
    /// so its term may run `term_bound` past this.
    gone_since: Option<Instant>,
    /// The first read of this write marked as judged expired by another
    /// member: its member's term had ended by then.
    judged_since: Option<Instant>,
}

impl Seen {
    /// From when it is expired, by this member's clock.
    fn expires(&self, settings: &ShardSettings) -> Instant {
        let by_version = self.expires_by_version();
        match self.gone_since {
            // Gone after the version last read had expired: only a version
            // without the finalizer goes, that is one its member left or one
            // judged expired, so no renewal came since (short of a finalizer
            // removed by hand). Deleted as a long expired Lease, say.
            Some(gone) if gone >= by_version => by_version,
            Some(gone) => by_version.max(gone.checked_add(settings.term_bound()).unwrap_or(gone)),
            None => by_version,
        }
    }

    /// From when the version last read is expired: a lease duration after
    /// it was first read, or once read as judged expired by another member.
    fn expires_by_version(&self) -> Instant {
        let unchanged_for_duration = self.since.checked_add(self.lease.record.lease_duration).unwrap_or(self.since);
        self.judged_since.map_or(unchanged_for_duration, |judged| judged.min(unchanged_for_duration))
    }
}

#[derive(Debug, Clone, Copy)]
struct Written {
    seq: u64,
    version: LeaseVersion,
    sent_at: Instant,
}

pub struct Member {
    id: MemberId,
    /// Sets this member's writes apart from any earlier incarnation's.
    incarnation: u64,
    settings: ShardSettings,
    next_seq: u64,
    in_flight: Option<InFlight>,
    /// Acknowledged writes, newest last, to find the one a snapshot contains.
    written: VecDeque<Written>,
    last_sent_at: Option<Instant>,
    /// The published claims changed since the last write was sent.
    dirty: bool,
    /// Nothing is granted from this instant on; `None` before the first renewal.
    term_end: Option<Instant>,
    /// Claimed slots by the first write sequence that carries the claim in
    /// the current term chain: a check needs a snapshot with that write or a later one.
    claiming: BTreeMap<u64, SlotSet>,
    held: SlotSet,
    /// Slots moved away, claimed until their leases end, by when they surely have.
    draining: Vec<(Instant, SlotSet)>,
    /// Slots lost to a concurrent claim, not claimed again before the instant.
    backoff: Vec<(Instant, SlotSet)>,
    last_revision: Option<u64>,

    /// Every other Lease's version and when this member first saw it: a
    /// Lease is expired once unchanged for its duration by this member's clock.
    ///
    /// A Lease gone from a read without having been read as being deleted
    /// (its finalizer removed by hand, say) stays here as last read until it
    /// would have expired, and at least until its member's term surely
    /// ended (it may have renewed unseen just before the deletion:
    /// `ShardSettings::term_bound` past the first read without it), and
    /// until no write this member may still check was sent before that: a
    /// deletion must not free its slots sooner than the member's crash
    /// would. Its member may still be running and granting.
    seen: HashMap<MemberId, Seen>,
    /// The live members as last read, sorted; the assignment is theirs.
    view: Vec<MemberId>,
    assignment: Assignment,
    /// The slots the assignment gives this member.
    mine: SlotSet,
    /// Slots other live Leases claim, as of the last snapshot.
    claimed_by_others: SlotSet,
    /// Slots a change of the members moved here, not yet held, by when the
    /// change began.
    handovers: Vec<(Instant, SlotSet)>,
    leaving: bool,
    left: bool,
    /// Its own Lease is being deleted: it leaves, and once it has left, its
    /// shell lets the Lease go and joins again as a new member.
    deleted: bool,
    effects: Vec<Effect>,
    #[cfg(test)]
    fault: Fault,
}

impl Member {
    pub fn new(id: MemberId, settings: ShardSettings) -> Member {
        Member {
            id,
            incarnation: fresh_incarnation(),
            settings,
            next_seq: 1,
            in_flight: None,
            written: VecDeque::new(),
            last_sent_at: None,
            dirty: true,
            term_end: None,
            claiming: BTreeMap::new(),
            held: SlotSet::EMPTY,
            draining: Vec::new(),
            backoff: Vec::new(),
            last_revision: None,

            seen: HashMap::new(),
            view: Vec::new(),
            assignment: Assignment::empty(),
            mine: SlotSet::EMPTY,
            claimed_by_others: SlotSet::EMPTY,
            handovers: Vec::new(),
            leaving: false,
            left: false,
            deleted: false,
            effects: Vec::new(),
            #[cfg(test)]
            fault: Fault::None,
        }
    }

    #[cfg(test)]
    pub(crate) fn with_fault(mut self, fault: Fault) -> Member {
        self.fault = fault;
        self
    }

    pub fn id(&self) -> &MemberId {
        &self.id
    }

    /// Whether the member has released everything and published that it left.
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// Whether it is leaving (asked to, or because its Lease is being deleted).
    pub fn is_leaving(&self) -> bool {
        self.leaving
    }

    /// Whether it left because someone deleted its Lease: the shell then lets
    /// the Lease go (drops its finalizer) and starts a new member in its place.
    pub fn was_deleted(&self) -> bool {
        self.deleted
    }

    /// A new member in its place, once it left because its Lease was being
    /// deleted: it takes no read older than its predecessor's last write,
    /// which deleted the Lease, so it never sees that Lease again.
    pub fn successor(&self) -> Member {
        let mut next = Member::new(self.id.clone(), self.settings);
        #[cfg(test)]
        {
            next.fault = self.fault;
        }
        let last_write = self.written.back().map(|w| w.version.0);
        next.last_revision = self.last_revision.max(last_write);
        next
    }

    /// The other Leases, as last read, that are expired as of `now` and not
    /// yet marked so, with the version judged: nothing can be granted under
    /// them any more, so they may be marked judged expired and their
    /// finalizers may go (only if the Lease is still at that version).
    pub fn expired_leases(&self, now: Instant) -> Vec<(MemberId, LeaseVersion)> {
        self.seen
            .iter()
            .filter(|(_, seen)| seen.gone_since.is_none() && !seen.lease.judged_expired && !seen.lease.record.leaving)
            .filter(|(_, seen)| now >= seen.expires(&self.settings))
            .map(|(holder, seen)| (holder.clone(), seen.lease.version))
            .collect()
    }

    /// The other Leases, as last read, that have been expired for a further
    /// lease duration as of `now`, with the version judged: their members
    /// crashed, or left, long enough ago that the Leases may go (each pod of
    /// a Deployment joins under a new name, so nothing else would ever
    /// delete them), while people still get a lease duration to read them.
    pub fn long_expired_leases(&self, now: Instant) -> Vec<(MemberId, LeaseVersion)> {
        if breaks!(self, NeverExpire) {
            return Vec::new();
        }
        self.seen
            .iter()
            .filter(|(_, seen)| seen.gone_since.is_none())
            .filter(|(_, seen)| {
                let expired = seen.expires(&self.settings);
                now >= expired.checked_add(seen.lease.record.lease_duration).unwrap_or(expired)
            })
            .map(|(holder, seen)| (holder.clone(), seen.lease.version))
            .collect()
    }

    /// The live members as last read (this member included unless leaving).
    pub fn view(&self) -> &[MemberId] {
        &self.view
    }

    /// The assignment of the live members as last read.
    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    /// The slots the assignment of the current view gives this member.
    pub fn assigned(&self) -> SlotSet {
        self.mine
    }

    /// The slots this member publishes as claimed.
    pub fn claims(&self) -> SlotSet {
        let mut claims = self.held;
        for set in self.claiming.values() {
            claims = claims.union(set);
        }
        for (_, set) in &self.draining {
            claims = claims.union(set);
        }
        claims
    }

    fn draining_slots(&self) -> SlotSet {
        self.draining.iter().fold(SlotSet::EMPTY, |all, (_, set)| all.union(set))
    }

    fn backoff_slots(&self) -> SlotSet {
        self.backoff.iter().fold(SlotSet::EMPTY, |all, (_, set)| all.union(set))
    }

    fn claiming_slots(&self) -> SlotSet {
        self.claiming.values().fold(SlotSet::EMPTY, |all, set| all.union(set))
    }

    /// What may be granted from now, and until when.
    pub fn grant(&self, now: Instant) -> Option<Grant> {
        let until = self.term_end?;
        (now < until && !self.held.is_empty()).then_some(Grant { slots: self.held, until })
    }

    /// Every slot in which a lease this member granted may still be live at
    /// `now`: the held slots within the term and the draining ones.
    pub fn holding(&self, now: Instant) -> SlotSet {
        let mut holding = self.grant(now).map_or(SlotSet::EMPTY, |g| g.slots);
        for (until, set) in &self.draining {
            if now < *until {
                holding = holding.union(set);
            }
        }
        holding
    }

    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    /// Whether the version of `lease` last read is expired as of `instant`,
    /// by this member's clock, whether or not the Lease is gone since.
    fn expired_by_version(&self, lease: &ObservedLease, instant: Instant) -> bool {
        self.expired_as(lease, instant, Seen::expires_by_version)
    }

    /// Whether `lease` is expired as of `instant`, by this member's clock.
    fn expired(&self, lease: &ObservedLease, instant: Instant) -> bool {
        self.expired_as(lease, instant, |seen| seen.expires(&self.settings))
    }

    /// Whether `instant` is at or past the expiry `expires` gives for what
    /// this member saw of `lease` (never, under the `NeverExpire` fault).
    fn expired_as(&self, lease: &ObservedLease, instant: Instant, expires: impl Fn(&Seen) -> Instant) -> bool {
        !breaks!(self, NeverExpire) && self.seen.get(&lease.record.holder).is_some_and(|seen| instant >= expires(seen))
    }

    /// Whether a Lease gone from the reads can no longer matter: expired as
    /// of now and as of every write whose check may still come.
    fn forgettable(&self, seen: &Seen, now: Instant) -> bool {
        let expiry = seen.expires(&self.settings);
        let oldest_write = self.written.iter().map(|w| w.sent_at).chain(self.in_flight.map(|w| w.sent_at)).min();
        now >= expiry && oldest_write.is_none_or(|sent| sent >= expiry)
    }

    /// Takes in a snapshot of every Lease; snapshots older than one already
    /// taken are ignored. One of the same revision is taken again: nothing
    /// changed, but time passed, and Leases may have expired.
    pub fn observe(&mut self, snapshot: &Snapshot, now: Instant) {
        if self.left || self.last_revision.is_some_and(|r| snapshot.revision < r) {
            return;
        }
        self.last_revision = Some(snapshot.revision);

        let mut own: Option<&ObservedLease> = None;
        let mut seen = HashMap::with_capacity(snapshot.leases.len());
        for lease in &snapshot.leases {
            if lease.record.holder == self.id {
                own = Some(lease);
                continue;
            }
            if lease.deleting && breaks!(self, IgnoreDeletingLeases) {
                continue;
            }
            // Unchanged, or changed by someone else's write (a deletion
            // asked for, a finalizer removed, marked judged expired): no
            // renewal since.
            let unrenewed = self.seen.get(&lease.record.holder).filter(|seen| {
                seen.lease.version == lease.version
                    || (seen.lease.record.write.is_some() && seen.lease.record.write == lease.record.write)
            });
            let since = unrenewed.map_or(now, |seen| seen.since);
            let judged_before =
                if breaks!(self, KeepJudgementAcrossRenewal) { self.seen.get(&lease.record.holder) } else { unrenewed };
            let judged_since = judged_before.and_then(|seen| seen.judged_since).or(lease.judged_expired.then_some(now));
            let last = Seen { lease: lease.clone(), since, gone_since: None, judged_since };
            seen.insert(lease.record.holder.clone(), last);
        }
        // A Lease last read while being deleted is gone for good once it is
        // gone: its finalizer held it until its member had left or another
        // member judged it expired. Any other Lease gone from the reads lost
        // its finalizer by hand, or never had one (left, or written by an
        // older release): it is kept as last read, as `seen` says.
        let forget_at_once = breaks!(self, ForgetDeletedLeases | IgnoreDeletingLeases);
        let gone: Vec<(MemberId, Seen)> = std::mem::take(&mut self.seen)
            .into_iter()
            .filter(|(holder, _)| !seen.contains_key(holder))
            .filter(|(_, last)| !last.lease.deleting && !forget_at_once && !self.forgettable(last, now))
            .map(|(holder, last)| (holder, Seen { gone_since: last.gone_since.or(Some(now)), ..last }))
            .collect();
        seen.extend(gone);
        self.seen = seen;
        // Every other Lease: as read, or as last read if gone since.
        let leases: Vec<Arc<ObservedLease>> = self.seen.values().map(|seen| seen.lease.clone()).collect();
        let others = || leases.iter();

        // Live members: those whose version last read has not expired. A
        // Lease gone from the reads keeps its claims a while longer (its
        // member may have renewed unseen), but its member is not counted
        // live for that: slots assigned to it would wait for nothing.
        let mut view: Vec<MemberId> = others()
            .filter(|l| !l.record.leaving && !self.expired_by_version(l, now))
            .map(|l| l.record.holder.clone())
            .collect();
        if !self.leaving {
            view.push(self.id.clone());
        }
        view.sort();
        if view != self.view {
            // The change began when the last of the members it lost by
            // expiry renewed, or now, for a join or a leave.
            let began = others()
                .filter(|l| {
                    !l.record.leaving && self.view.contains(&l.record.holder) && self.expired_by_version(l, now)
                })
                .filter_map(|l| self.seen.get(&l.record.holder).map(|seen| seen.since))
                .max()
                .unwrap_or(now);
            let claimed_elsewhere = others().fold(SlotSet::EMPTY, |all, l| all.union(&l.record.claims));
            // A member that leaves cleanly releases its slots before it says
            // it left, so they are claimed by nobody when the leave is seen;
            // what it was assigned is handed over all the same, from now.
            let left_by_leavers = others()
                .filter(|l| l.record.leaving && self.view.contains(&l.record.holder))
                .fold(SlotSet::EMPTY, |all, l| all.union(&self.assignment.slots_of(&l.record.holder)));
            self.assignment = self.assignment.update(&view);
            let before = self.mine;
            self.mine = if self.leaving { SlotSet::EMPTY } else { self.assignment.slots_of(&self.id) };
            self.view = view;
            let handed_over = claimed_elsewhere.union(&left_by_leavers);
            self.note_handover(self.mine.difference(&before).intersection(&handed_over), began);
        }
        self.claimed_by_others =
            others().filter(|l| !self.expired(l, now)).fold(SlotSet::EMPTY, |all, l| all.union(&l.record.claims));
        if breaks!(self, IgnoreOtherClaims) {
            self.claimed_by_others = SlotSet::EMPTY;
        }

        if let Some(own) = own {
            self.adopt_previous_incarnation(own, now);
            self.check_claims(own, &leases, now);
            if own.deleting && !self.deleted {
                // Somebody wants this Lease gone: hand everything over, as
                // on a stop, then let it go and join again under a new one.
                self.deleted = true;
                self.leave(now);
            }
        }
        self.release_moved(now);
        self.claim_assigned();
    }

    /// A replica restarted under the same name finds its old Lease: whatever
    /// that one claimed may still have live leases, so it drains for a whole
    /// lease duration before anyone else may take it.
    fn adopt_previous_incarnation(&mut self, own: &ObservedLease, now: Instant) {
        let known = self.written.iter().any(|w| w.version == own.version);
        if known || !self.written.is_empty() {
            return;
        }
        let inherited = own.record.claims.difference(&self.claims());
        if !inherited.is_empty() {
            let until = now.checked_add(own.record.lease_duration).unwrap_or(now);
            self.draining.push((until, inherited));
            self.dirty = true;
        }
    }

    /// Claims whose write this snapshot contains become held, unless another
    /// Lease claimed the slot and was live when that write was sent.
    fn check_claims(&mut self, own: &ObservedLease, others: &[Arc<ObservedLease>], now: Instant) {
        let Some(write) = self.written.iter().find(|w| w.version == own.version).copied() else {
            return;
        };
        if self.claiming.range(..=write.seq).next().is_none() {
            return;
        }
        // The snapshot was taken after the write committed, so after it was sent.
        let as_of = if breaks!(self, JudgeExpiryNow) { now } else { write.sent_at };
        let mut live_claims = SlotSet::EMPTY;
        if !breaks!(self, IgnoreOtherClaims) {
            for lease in others {
                if !self.expired(lease, as_of) {
                    live_claims = live_claims.union(&lease.record.claims);
                }
            }
        }
        let checked: Vec<u64> = self.claiming.range(..=write.seq).map(|(seq, _)| *seq).collect();
        let mut gained = SlotSet::EMPTY;
        for seq in checked {
            let Some(set) = self.claiming.remove(&seq) else { continue };
            let contested = set.intersection(&live_claims);
            if !contested.is_empty() {
                let until = now.checked_add(self.settings.retry_period).unwrap_or(now);
                self.backoff.push((until, contested));
                self.dirty = true;
            }
            gained = gained.union(&set.difference(&contested));
        }
        if !gained.is_empty() {
            self.held = self.held.union(&gained);
            self.effects.push(Effect::Gained(gained));
            self.complete_handovers(now);
        }
    }

    /// Starts timing the handover of `moved_here`: slots a change of the
    /// members moved here from another member's claims (at a group's start,
    /// nothing is handed over). Slots moved away again leave their handover.
    fn note_handover(&mut self, moved_here: SlotSet, began: Instant) {
        if !moved_here.is_empty() {
            match self.handovers.iter_mut().find(|(since, _)| *since == began) {
                Some((_, slots)) => *slots = slots.union(&moved_here),
                None => self.handovers.push((began, moved_here)),
            }
        }
        let mine = self.mine;
        for (_, slots) in &mut self.handovers {
            *slots = slots.intersection(&mine);
        }
        self.handovers.retain(|(_, slots)| !slots.is_empty());
    }

    /// Handovers whose slots are all held are complete.
    fn complete_handovers(&mut self, now: Instant) {
        let held = self.held;
        let effects = &mut self.effects;
        self.handovers.retain(|(began, slots)| {
            let complete = slots.difference(&held).is_empty();
            if complete {
                effects.push(Effect::HandedOver(now.saturating_duration_since(*began)));
            }
            !complete
        });
    }

    /// Held slots the assignment moved away start draining; claims not yet
    /// held are withdrawn.
    fn release_moved(&mut self, now: Instant) {
        let lost = self.held.difference(&self.mine);
        if !lost.is_empty() {
            self.held = self.held.difference(&lost);
            let until = self.term_end.filter(|_| !breaks!(self, FreeWithoutDraining)).unwrap_or(now).max(now);
            self.draining.push((until, lost));
            self.effects.push(Effect::Revoke(lost));
            self.dirty = true;
        }
        let mine = self.mine;
        for set in self.claiming.values_mut() {
            let withdrawn = set.difference(&mine);
            if !withdrawn.is_empty() {
                *set = set.intersection(&mine);
                self.dirty = true;
            }
        }
        self.claiming.retain(|_, set| !set.is_empty());
    }

    /// Assigned slots nobody else claims go into the next write.
    fn claim_assigned(&mut self) {
        let taken = self
            .held
            .union(&self.claiming_slots())
            .union(&self.draining_slots())
            .union(&self.backoff_slots())
            .union(&self.claimed_by_others);
        let new = self.mine.difference(&taken);
        if !new.is_empty() {
            let entry = self.claiming.entry(self.next_seq).or_default();
            *entry = entry.union(&new);
            self.dirty = true;
        }
    }

    /// Moves time on: drains and backoffs that are over end.
    pub fn poll(&mut self, now: Instant) {
        let before = self.draining.len();
        self.draining.retain(|(until, _)| now < *until);
        if self.draining.len() != before {
            self.dirty = true;
        }
        self.backoff.retain(|(until, _)| now < *until);
    }

    /// The next write of this member's Lease, if one is due: a renewal every
    /// retry period, or at once when the claims changed. One at a time.
    pub fn next_write(&mut self, now: Instant) -> Option<LeaseWrite> {
        self.poll(now);
        if self.left || self.in_flight.is_some() {
            return None;
        }
        let renewal_due =
            self.last_sent_at.is_none_or(|at| now.saturating_duration_since(at) >= self.settings.retry_period);
        let claims = self.claims();
        let leaving = self.leaving && claims.is_empty();
        if !(self.dirty || renewal_due || leaving) {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.saturating_add(1);
        self.in_flight = Some(InFlight { seq, sent_at: now, leaving });
        self.last_sent_at = Some(now);
        self.dirty = false;
        let record = LeaseRecord {
            holder: self.id.clone(),
            write: Some(WriteId { incarnation: self.incarnation, seq }),
            lease_duration: self.settings.lease_duration,
            claims,
            leaving,
        };
        Some(LeaseWrite { seq, record })
    }

    /// The write `seq` was stored as `version`. A renewal acknowledged before
    /// the current term ended extends it; a later one starts a new term
    /// chain, in which every held slot is checked again before it is granted.
    pub fn write_succeeded(&mut self, seq: u64, version: LeaseVersion, now: Instant) {
        let Some(write) = self.in_flight.filter(|w| w.seq == seq) else {
            return;
        };
        self.in_flight = None;
        self.written.push_back(Written { seq, version, sent_at: write.sent_at });
        if self.written.len() > WRITES_REMEMBERED {
            self.written.pop_front();
        }
        if write.leaving {
            self.left = true;
            self.term_end = None;
            return;
        }
        let new_end = write.sent_at.checked_add(self.settings.renew_deadline).unwrap_or(write.sent_at);
        let chained = self.term_end.is_some_and(|end| now < end) || breaks!(self, KeepSlotsAcrossGap);
        if chained {
            self.term_end = self.term_end.max(Some(new_end));
            return;
        }
        if let Some(ended) = self.term_end {
            self.effects.push(Effect::TermGap(now.saturating_duration_since(ended)));
        }
        self.term_end = Some(new_end);
        let mut recheck = std::mem::take(&mut self.held);
        if !recheck.is_empty() {
            self.effects.push(Effect::Revoke(recheck));
        }
        // Claims carried by writes of the broken chain prove nothing: each
        // needs a snapshot with this write or a later one. Only the claims
        // this write carried (keyed at or before it) move to it; claims made
        // after it was sent are in no stored write yet, and a snapshot with
        // this write must not confirm them (two members held one slot at
        // start-up that way, where the first acknowledged write always
        // starts a chain).
        let later = self.claiming.split_off(&seq.saturating_add(1));
        for set in std::mem::replace(&mut self.claiming, later).into_values() {
            recheck = recheck.union(&set);
        }
        if !recheck.is_empty() {
            self.claiming.insert(seq, recheck);
        }
    }

    /// The write `seq` failed (or its answer was lost): it is sent again.
    pub fn write_failed(&mut self, seq: u64) {
        if self.in_flight.is_some_and(|w| w.seq == seq) {
            self.in_flight = None;
            self.dirty = true;
        }
    }

    /// Every lease in `slots` has ended (finished, revoked or handed back):
    /// draining slots among them are released with the next write.
    pub fn leases_ended(&mut self, slots: &SlotSet) {
        for (_, set) in &mut self.draining {
            *set = set.difference(slots);
        }
        let before = self.draining.len();
        self.draining.retain(|(_, set)| !set.is_empty());
        if self.draining.len() != before {
            self.dirty = true;
        }
    }

    /// Starts leaving: every slot is released as if moved away; once none is
    /// claimed, the Lease is written with `leaving` and the member is gone.
    pub fn leave(&mut self, now: Instant) {
        self.leaving = true;
        self.mine = SlotSet::EMPTY;
        self.release_moved(now);
        self.dirty = true;
    }

    /// The duration settings, for the shell's timers.
    pub fn retry_period(&self) -> Duration {
        self.settings.retry_period
    }
}
