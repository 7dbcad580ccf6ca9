//! Unit tests of `Member`, one rule each, with explicit instants and a Lease store kept by hand.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::fault::Fault;
use super::member::{Effect, Member};
use super::observation::{LeaseVersion, MemberId, ObservedLease, Snapshot};
use super::settings::ShardSettings;
use super::slot::SlotSet;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The Leases, with a revision per write.
#[derive(Default)]
struct Store {
    revision: u64,
    leases: BTreeMap<MemberId, Arc<ObservedLease>>,
}

impl Store {
    fn snapshot(&self) -> Snapshot {
        Snapshot { revision: self.revision, leases: self.leases.values().cloned().collect() }
    }

    /// Sends the member's due write, stores it and acknowledges it at `now`.
    fn write(&mut self, member: &mut Member, now: Instant) -> bool {
        let Some(write) = member.next_write(now) else { return false };
        self.revision += 1;
        let version = LeaseVersion(self.revision);
        self.leases.insert(
            write.record.holder.clone(),
            Arc::new(ObservedLease { version, record: write.record, deleting: false, judged_expired: false }),
        );
        member.write_succeeded(write.seq, version, now);
        true
    }

    /// Someone asks for `holder`'s Lease to be deleted: its finalizer keeps
    /// it, marked, at a new version.
    fn mark_deleting(&mut self, holder: &str) {
        self.revision += 1;
        let version = LeaseVersion(self.revision);
        let lease = self.leases.get_mut(holder).expect("a Lease to delete");
        *lease = Arc::new(ObservedLease { version, deleting: true, ..(**lease).clone() });
    }

    /// Another member judged `holder`'s Lease expired: it marks it so (and
    /// drops its finalizer) at a new version, the member's write unchanged.
    fn mark_expired(&mut self, holder: &str) {
        self.revision += 1;
        let version = LeaseVersion(self.revision);
        let lease = self.leases.get_mut(holder).expect("a Lease to mark");
        *lease = Arc::new(ObservedLease { version, judged_expired: true, ..(**lease).clone() });
    }

    /// `holder`'s Lease goes (deleted, its finalizer gone).
    fn remove(&mut self, holder: &str) {
        self.revision += 1;
        self.leases.remove(holder).expect("a Lease to remove");
    }

    /// A write, then a read, as the I/O loop would do.
    fn round(&mut self, member: &mut Member, now: Instant) {
        self.write(member, now);
        member.observe(&self.snapshot(), now);
        self.write(member, now);
    }
}

fn member(name: &str) -> Member {
    Member::new(Arc::from(name), ShardSettings::default())
}

/// A lone member that holds every slot, at `t0 + 1 s`.
fn lone_holder(store: &mut Store, t0: Instant) -> Member {
    let mut a = member("a");
    store.round(&mut a, t0);
    store.round(&mut a, t0 + secs(1));
    assert_eq!(a.grant(t0 + secs(1)).map(|g| g.slots), Some(SlotSet::FULL));
    a
}

#[test]
fn a_lone_member_should_grant_every_slot_once_a_read_shows_its_claim() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = member("a");
    assert!(store.write(&mut a, t0));
    assert!(a.grant(t0).is_none(), "no claim yet");
    a.observe(&store.snapshot(), t0);
    assert!(store.write(&mut a, t0), "the claim is written at once");
    assert!(a.grant(t0).is_none(), "the claim is not seen back yet");
    a.observe(&store.snapshot(), t0 + secs(1));
    assert_eq!(a.take_effects(), vec![Effect::Gained(SlotSet::FULL)]);
    assert_eq!(a.grant(t0 + secs(1)).map(|g| g.slots), Some(SlotSet::FULL));
}

#[test]
fn a_grant_should_end_at_the_renew_deadline_after_the_renewal_was_sent() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let a = lone_holder(&mut store, t0);
    // The last write was sent at t0 (no renewal was due at t0 + 1 s).
    assert_eq!(a.grant(t0 + secs(1)).unwrap().until, t0 + secs(10));
    assert!(a.grant(t0 + secs(10)).is_none());
    assert!(a.holding(t0 + secs(10)).is_empty());
}

#[test]
fn a_joining_member_should_take_its_slots_only_after_the_old_owner_released_them() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    a.take_effects();
    let mut b = member("b");
    store.round(&mut b, t0 + secs(2));
    assert!(b.claims().is_empty(), "everything is still claimed by a");

    // a sees b, stops granting b's slots and revokes their leases.
    a.observe(&store.snapshot(), t0 + secs(3));
    let moved = b.assigned();
    assert!(!moved.is_empty());
    assert_eq!(a.take_effects(), vec![Effect::Revoke(moved)]);
    assert_eq!(a.grant(t0 + secs(3)).unwrap().slots, SlotSet::FULL.difference(&moved));
    assert!(a.holding(t0 + secs(3)).intersects(&moved), "leases may still be live");
    store.write(&mut a, t0 + secs(3));
    store.round(&mut b, t0 + secs(3));
    assert!(b.claims().is_empty(), "a still claims them while they drain");

    // The workers hand the leases back: a releases, then b claims and holds.
    a.leases_ended(&moved);
    store.write(&mut a, t0 + secs(4));
    assert!(!a.claims().intersects(&moved));
    store.round(&mut b, t0 + secs(5));
    assert_eq!(b.claims(), moved);
    assert!(b.grant(t0 + secs(5)).is_none(), "its claim is not seen back yet");
    b.observe(&store.snapshot(), t0 + secs(6));
    assert_eq!(b.grant(t0 + secs(6)).unwrap().slots, moved);
    assert!(!a.holding(t0 + secs(6)).intersects(&moved));
    assert_eq!(
        handovers(&mut b),
        vec![secs(4)],
        "from b's first view of the group (t0 + 2 s) to holding its slots (t0 + 6 s)"
    );
}

/// The handovers a member completed since the last call, in order.
fn handovers(member: &mut Member) -> Vec<Duration> {
    member
        .take_effects()
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::HandedOver(took) => Some(took),
            _ => None,
        })
        .collect()
}

#[test]
fn a_moved_slot_should_drain_until_the_term_ends_when_no_lease_is_handed_back() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    let mut b = member("b");
    store.round(&mut b, t0 + secs(2));
    a.observe(&store.snapshot(), t0 + secs(2));
    let moved = b.assigned();
    // The term in force ends at t0 + 11 s (renewal sent at t0 + 1 s... or later).
    let until = a.grant(t0 + secs(2)).unwrap().until;
    a.poll(until - Duration::from_millis(1));
    assert!(a.claims().intersects(&moved));
    a.poll(until);
    assert!(!a.claims().intersects(&moved));
}

#[test]
fn a_crashed_members_slots_should_be_taken_only_once_its_lease_expired() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _crashed = lone_holder(&mut store, t0);
    let mut b = member("b");
    // b first sees a's last renewal at t0 + 2 s.
    store.round(&mut b, t0 + secs(2));
    store.round(&mut b, t0 + secs(16));
    assert!(b.grant(t0 + secs(16)).is_none(), "a's Lease is 14 s unchanged: not expired");
    store.round(&mut b, t0 + secs(17));
    store.round(&mut b, t0 + secs(18));
    assert_eq!(b.grant(t0 + secs(18)).map(|g| g.slots), Some(SlotSet::FULL));
    assert_eq!(handovers(&mut b), vec![secs(16)], "from a's last renewal b saw (t0 + 2 s) to holding everything");
}

#[test]
fn a_deleted_lease_should_keep_its_slots_until_it_would_have_expired() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _a = lone_holder(&mut store, t0);
    let mut b = member("b");
    // b first sees a's last renewal at t0 + 2 s; then someone deletes a's
    // Lease, while a (paused, say) may still be granting.
    store.round(&mut b, t0 + secs(2));
    store.remove("a");
    store.round(&mut b, t0 + secs(3));
    store.round(&mut b, t0 + secs(16));
    assert_eq!(b.view().len(), 2, "a is a member until its Lease would have expired");
    assert!(b.grant(t0 + secs(16)).is_none(), "a's claims stand though its Lease is gone");
    store.round(&mut b, t0 + secs(17));
    store.round(&mut b, t0 + secs(18));
    assert_eq!(b.grant(t0 + secs(18)).map(|g| g.slots), Some(SlotSet::FULL), "as after a crash");
}

#[test]
fn a_member_whose_lease_is_being_deleted_should_hand_everything_over_and_leave_to_join_again() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    a.take_effects();
    store.mark_deleting("a");
    a.observe(&store.snapshot(), t0 + secs(2));
    assert!(a.is_leaving() && a.was_deleted());
    assert!(a.grant(t0 + secs(2)).is_none(), "nothing granted once it saw the deletion");
    assert_eq!(a.take_effects(), vec![Effect::Revoke(SlotSet::FULL)]);
    assert!(!a.has_left(), "its claims stand until the leases in them ended");
    a.leases_ended(&SlotSet::FULL);
    assert!(store.write(&mut a, t0 + secs(2)));
    assert!(a.has_left(), "left: the shell drops the finalizer and starts a new member");
}

#[test]
fn a_lease_being_deleted_should_keep_its_claims_for_a_member_that_starts_after() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _paused = lone_holder(&mut store, t0);
    store.mark_deleting("a");
    // b starts after the deletion was asked for: it never read a's Lease
    // before, and a (paused) has not seen the deletion.
    let mut b = member("b");
    store.round(&mut b, t0 + secs(3));
    store.round(&mut b, t0 + secs(17));
    assert!(b.grant(t0 + secs(17)).is_none(), "a's claims stand while being deleted, until a's Lease expired");
    assert!(b.expired_leases(t0 + secs(17)).is_empty());
    store.round(&mut b, t0 + secs(18));
    store.round(&mut b, t0 + secs(19));
    assert_eq!(b.grant(t0 + secs(19)).map(|g| g.slots), Some(SlotSet::FULL), "as after a crash");
    let a_version = store.leases["a"].version;
    assert_eq!(b.expired_leases(t0 + secs(19)), vec![(Arc::from("a"), a_version)], "its finalizer may go");
}

#[test]
fn a_deletion_asked_for_should_not_count_as_a_renewal() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _crashed = lone_holder(&mut store, t0);
    let mut b = member("b");
    // b first sees a's last renewal at t0 + 2 s; the deletion, at t0 + 10 s,
    // writes a new version that a did not write.
    store.round(&mut b, t0 + secs(2));
    store.mark_deleting("a");
    store.round(&mut b, t0 + secs(10));
    store.round(&mut b, t0 + secs(17));
    store.round(&mut b, t0 + secs(18));
    assert_eq!(b.grant(t0 + secs(18)).map(|g| g.slots), Some(SlotSet::FULL), "expired 15 s after t0 + 2 s");
}

#[test]
fn a_lease_gone_after_being_read_as_deleted_should_free_its_slots_at_once() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    let mut b = member("b");
    store.round(&mut b, t0 + secs(1));
    store.mark_deleting("a");
    store.round(&mut b, t0 + secs(2));
    a.observe(&store.snapshot(), t0 + secs(2));
    a.leases_ended(&SlotSet::FULL);
    assert!(store.write(&mut a, t0 + secs(2)) && a.has_left());
    // The write that dropped the finalizer deleted the Lease.
    store.remove("a");
    store.round(&mut b, t0 + secs(3));
    store.round(&mut b, t0 + secs(4));
    assert_eq!(b.grant(t0 + secs(4)).map(|g| g.slots), Some(SlotSet::FULL), "no wait for a term or an expiry");
}

/// The check of a claim judges the other Leases as of the claim's write, not
/// as of the moment the snapshot is read: a snapshot read long after it was
/// taken may show a Lease that looks expired now but whose member renewed
/// after the snapshot and still holds. Judged now (`JudgeExpiryNow`), both
/// hold; the simulation, with reads at most 3 s stale, never built this.
#[test]
fn a_check_read_late_should_judge_the_other_claims_as_of_its_own_write() {
    for fault in [Fault::None, Fault::JudgeExpiryNow] {
        let t0 = Instant::now();
        let mut store = Store::default();
        let before_a = store.snapshot();
        let mut a = lone_holder(&mut store, t0);
        let mut b = member("b").with_fault(fault);
        // A stale read from before a existed: b claims everything; then a
        // read with a's Lease (first seen at t0 + 3 s): b keeps claiming its
        // share, and writes that claim.
        b.observe(&before_a, t0 + secs(2));
        b.observe(&store.snapshot(), t0 + secs(3));
        assert!(store.write(&mut b, t0 + secs(4)));
        let late = store.snapshot();
        // a renews, without reading (its reads fail, say); b renews too.
        for t in (5..=17).step_by(2) {
            store.write(&mut a, t0 + secs(t));
            store.write(&mut b, t0 + secs(t));
        }
        // b reads the snapshot taken at t0 + 4 s only now, when a's version
        // in it is 15 s old by b's clock.
        let now = t0 + secs(18);
        b.observe(&late, now);
        let held = |m: &Member| m.grant(now).map_or(SlotSet::EMPTY, |g| g.slots);
        assert_eq!(held(&a), SlotSet::FULL, "a renewed all along");
        let both = held(&a).intersection(&held(&b));
        match fault {
            Fault::None => assert!(both.is_empty(), "b took {} of a's slots", both.len()),
            _ => assert!(!both.is_empty(), "judged as of now, b takes slots a holds"),
        }
    }
}

#[test]
fn a_member_waking_from_a_pause_should_grant_nothing_until_it_checked_its_slots_again() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    a.take_effects();
    // Paused from t0 + 1 s to t0 + 30 s: the term, from the write sent at
    // t0 (no renewal was due at t0 + 1 s), ended at t0 + 10 s.
    let wake = t0 + secs(30);
    assert!(a.grant(wake).is_none());
    assert!(store.write(&mut a, wake));
    assert!(a.grant(wake).is_none(), "a renewal after a gap does not restore the slots");
    let gap = Effect::TermGap(secs(20));
    assert_eq!(a.take_effects(), vec![gap, Effect::Revoke(SlotSet::FULL)], "acknowledged 20 s after the term ended");
    a.observe(&store.snapshot(), wake);
    assert_eq!(a.grant(wake).map(|g| g.slots), Some(SlotSet::FULL), "no one else claims them");
}

#[test]
fn two_members_claiming_one_slot_at_once_should_both_withdraw() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = member("a");
    let mut b = member("b");
    // Each writes its first Lease and reads before the other's is stored:
    // each believes it is alone and claims everything.
    assert!(store.write(&mut a, t0));
    a.observe(&store.snapshot(), t0);
    let alone = store.snapshot();
    assert!(store.write(&mut b, t0));
    b.observe(&Snapshot { revision: alone.revision + 1, ..store.snapshot() }, t0);
    b.observe(&store.snapshot(), t0);
    store.write(&mut a, t0);
    store.write(&mut b, t0);
    // Both read both claims: neither holds the contested slots.
    let snapshot = Snapshot { revision: store.revision, ..store.snapshot() };
    a.observe(&snapshot, t0 + secs(1));
    b.observe(&snapshot, t0 + secs(1));
    let both = a.grant(t0 + secs(1)).map_or(SlotSet::EMPTY, |g| g.slots);
    let b_slots = b.grant(t0 + secs(1)).map_or(SlotSet::EMPTY, |g| g.slots);
    assert!(!both.intersects(&b_slots));
}

#[test]
fn an_older_snapshot_than_one_already_read_should_be_ignored() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = member("a");
    store.write(&mut a, t0);
    let old = store.snapshot();
    let mut b = member("b");
    store.write(&mut b, t0);
    a.observe(&store.snapshot(), t0);
    assert_eq!(a.view().len(), 2);
    a.observe(&old, t0 + secs(1));
    assert_eq!(a.view().len(), 2, "the view did not go back");
}

#[test]
fn a_leaving_member_should_release_everything_then_publish_that_it_left() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    a.leave(t0 + secs(2));
    assert!(a.grant(t0 + secs(2)).is_none());
    a.leases_ended(&SlotSet::FULL);
    assert!(store.write(&mut a, t0 + secs(2)), "one write clears the claims and says it left");
    assert!(a.has_left());
    let mut b = member("b");
    store.round(&mut b, t0 + secs(3));
    store.round(&mut b, t0 + secs(4));
    assert_eq!(b.view().len(), 1, "a left without waiting for its Lease to expire");
    assert_eq!(b.grant(t0 + secs(4)).map(|g| g.slots), Some(SlotSet::FULL));
    assert_eq!(handovers(&mut b), Vec::<Duration>::new(), "a had released everything: nothing was handed over");
}

#[test]
fn a_clean_leave_should_be_timed_as_a_handover_from_when_it_was_seen() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    let mut b = member("b");
    store.round(&mut b, t0 + secs(2));
    a.observe(&store.snapshot(), t0 + secs(3));
    let moved = b.assigned();
    a.leases_ended(&moved);
    store.write(&mut a, t0 + secs(3));
    store.round(&mut b, t0 + secs(4));
    b.observe(&store.snapshot(), t0 + secs(5));
    assert_eq!(b.grant(t0 + secs(5)).map(|g| g.slots), Some(moved));
    handovers(&mut a);

    // b leaves cleanly: it releases its slots, then says it left.
    b.leave(t0 + secs(6));
    b.leases_ended(&moved);
    assert!(store.write(&mut b, t0 + secs(6)));
    assert!(b.has_left());
    store.round(&mut a, t0 + secs(7));
    assert!(a.grant(t0 + secs(7)).is_some_and(|g| !g.slots.intersects(&moved)), "claimed, not yet seen back");
    store.round(&mut a, t0 + secs(8));
    assert_eq!(a.grant(t0 + secs(8)).map(|g| g.slots), Some(SlotSet::FULL));
    assert_eq!(handovers(&mut a), vec![secs(1)], "from a's first look at the leave (t0 + 7 s) to holding b's slots");
}

#[test]
fn a_restarted_member_should_drain_what_its_previous_incarnation_claimed() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _old = lone_holder(&mut store, t0);
    let mut again = member("a");
    again.observe(&store.snapshot(), t0 + secs(2));
    assert_eq!(again.claims(), SlotSet::FULL);
    assert!(again.grant(t0 + secs(2)).is_none());
    again.poll(t0 + secs(17));
    assert!(again.claims().is_empty() || again.claims() == SlotSet::FULL);
}

#[test]
fn a_long_expired_lease_deleted_should_not_bring_its_member_back() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _crashed = lone_holder(&mut store, t0);
    let mut b = member("b");
    store.round(&mut b, t0 + secs(2));
    for at in 17..=31 {
        store.round(&mut b, t0 + secs(at));
    }
    assert_eq!(b.grant(t0 + secs(31)).map(|g| g.slots), Some(SlotSet::FULL), "a expired 15 s after t0 + 2 s");
    assert!(b.long_expired_leases(t0 + secs(31)).is_empty(), "not before a further lease duration");
    let a_version = store.leases["a"].version;
    assert_eq!(b.long_expired_leases(t0 + secs(32)), vec![(Arc::from("a"), a_version)]);

    store.remove("a");
    store.round(&mut b, t0 + secs(33));
    assert_eq!(b.view(), [Arc::from("b")], "a, seen expired before it went, is not live again");
    assert_eq!(b.grant(t0 + secs(33)).map(|g| g.slots), Some(SlotSet::FULL), "nothing moves back to a");
    assert!(b.long_expired_leases(t0 + secs(33)).is_empty(), "a Lease gone is not deleted again");
}

#[test]
fn a_lease_read_as_judged_expired_should_free_its_slots_at_once() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let _crashed = lone_holder(&mut store, t0);
    let mut b = member("b");
    // b joins at t0 + 10 s: by its own clock a's Lease would expire at
    // t0 + 25 s. Another member that has watched a for longer marks it.
    store.round(&mut b, t0 + secs(10));
    assert!(b.expired_leases(t0 + secs(11)).iter().all(|(holder, _)| &**holder != "a"));
    store.mark_expired("a");
    store.round(&mut b, t0 + secs(11));
    assert_eq!(b.view(), [Arc::from("b")], "a is not live once read as judged expired");
    assert!(b.expired_leases(t0 + secs(11)).is_empty(), "a mark is written once");
    store.round(&mut b, t0 + secs(12));
    assert_eq!(b.grant(t0 + secs(12)).map(|g| g.slots), Some(SlotSet::FULL), "13 s before its own judgement");

    // The mark names the write judged: gone once read, a's Lease is forgotten.
    store.remove("a");
    store.round(&mut b, t0 + secs(13));
    assert_eq!(b.grant(t0 + secs(13)).map(|g| g.slots), Some(SlotSet::FULL));
}

#[test]
fn a_lease_renewed_after_it_was_judged_expired_should_be_live_again() {
    let t0 = Instant::now();
    let mut store = Store::default();
    let mut a = lone_holder(&mut store, t0);
    let mut b = member("b");
    store.round(&mut b, t0 + secs(2));
    store.mark_expired("a");
    store.round(&mut b, t0 + secs(3));
    assert_eq!(b.view(), [Arc::from("b")]);

    // a was paused, not dead: it renews, which is a new write.
    store.write(&mut a, t0 + secs(4));
    store.round(&mut b, t0 + secs(5));
    assert_eq!(b.view(), [Arc::from("a"), Arc::from("b")], "the renewal counts; the old mark does not");
    assert!(!b.claims().intersects(&store.leases["a"].record.claims), "a's claims stand again");
}
