//! A deterministic simulation of the protocol: 100 members in virtual time, with joins, crashes, pauses, partitions, deleted Leases, stale and reordered reads and drifting clocks, checked at every step.
//!
//! Each run is seeded; the same seed replays the same run. The checks:
//! - safety: no slot is held (grantable, or with a lease that may be live)
//!   by two members at one instant of simulator time. Checked after every
//!   event against the slots the member just gained, and every 250 ms
//!   across all members;
//! - liveness: every slot is held again within `takeover_bound` of the last
//!   membership disruption (crash, pause, resume, join, leave, partition);
//! - movement: a membership change moves at most `1/N + 5 %` of the keys.
//!
//! Each check is shown able to fail: the tests at the bottom break one rule
//! of the member on purpose and expect the matching check to catch it.
//! `SHARD_SIM_RUNS` sets the number of runs of the main test (default 6),
//! `SHARD_SIM_FIRST_SEED` its first seed (default 1).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::assignment::Assignment;
use super::fault::Fault;
use super::member::{Effect, Member};
use super::observation::{LeaseVersion, MemberId, ObservedLease, Snapshot};
use super::settings::ShardSettings;
use super::slot::{SLOTS, Slot, SlotSet};

/// splitmix64 as a seeded random source: small, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        super::hash::mix64(self.0)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    fn between(&mut self, low: Duration, high: Duration) -> Duration {
        low + high.saturating_sub(low).mul_f64(self.unit())
    }
}

/// Which assignment rule the movement check measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    Tokens,
    /// Equal ranges over the sorted members: shown to fail the movement check.
    EqualRanges,
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub members: usize,
    pub duration: Duration,
    /// Membership disruptions per run, spread over
    /// `[20 s, duration - quiet - max_pause)`: the run ends with a quiet tail.
    pub disruptions: usize,
    /// The last disruption is at least this long before the end.
    pub quiet: Duration,
    /// Reads are of the Leases as they were up to this long ago.
    pub max_staleness: Duration,
    /// Each member reads every `[gap / 3, gap]`.
    pub max_read_gap: Duration,
    pub max_write_latency: Duration,
    pub write_failure: f64,
    pub lost_ack: f64,
    /// Leases of a moved slot end (handed back by workers) within this; or,
    /// with `no_hand_back` probability, only when the term ends.
    pub max_hand_back: Duration,
    pub no_hand_back: f64,
    pub max_pause: Duration,
    /// Whether some disruptions delete a running member's Lease (by hand,
    /// say); otherwise those are leaves.
    pub delete_leases: bool,
    /// Whether members' Leases carry their finalizer, as the shell writes
    /// them; without, a deletion removes a Lease at once, as one whose
    /// finalizer was removed by hand.
    pub finalizers: bool,
    /// Whether the write that removes an expired Lease's finalizer also
    /// marks it judged expired, as the shell writes it; without, members
    /// judge every Lease by their own clocks only (the protocol before the
    /// marks, for comparison).
    pub expiry_marks: bool,
    pub settings: ShardSettings,
    pub fault: Fault,
    pub rule: Rule,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            members: 100,
            duration: Duration::from_secs(200),
            disruptions: 12,
            quiet: Duration::from_secs(40),
            max_staleness: Duration::from_secs(3),
            max_read_gap: Duration::from_millis(1500),
            max_write_latency: Duration::from_millis(300),
            write_failure: 0.02,
            lost_ack: 0.01,
            max_hand_back: Duration::from_secs(2),
            no_hand_back: 0.2,
            max_pause: Duration::from_secs(40),
            delete_leases: false,
            finalizers: true,
            expiry_marks: true,
            settings: ShardSettings::default(),
            fault: Fault::None,
            rule: Rule::Tokens,
        }
    }
}

/// How often members look at their timers.
const TICK: Duration = Duration::from_millis(500);
/// How often the simulator checks every member at once.
const CHECK_EVERY: Duration = Duration::from_millis(250);

impl Config {
    fn drift(&self) -> f64 {
        f64::from(self.settings.max_drift_ppm) / 1e6
    }

    /// The longest a slot may stay unheld after the last disruption: the
    /// crash path (the last renewal seen late, a lease duration on the
    /// fastest clock, the claim written and seen back) or the handover path
    /// (the join seen late, a term drained, the release seen, the claim seen back).
    pub fn takeover_bound(&self) -> Duration {
        let read = self.max_staleness + self.max_read_gap;
        let crash = self.settings.lease_duration.div_f64(1.0 - self.drift()) + read * 3 + self.max_write_latency * 4;
        let handover = self.settings.renew_deadline.div_f64(1.0 - self.drift()) + read * 3 + self.max_write_latency * 4;
        crash.max(handover) + self.settings.retry_period + TICK * 2
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Running,
    Paused,
    Partitioned,
    Crashed,
    Gone,
}

struct Node {
    member: Member,
    /// Local clock: `base + offset + real * rate`.
    offset: Duration,
    rate: f64,
    status: Status,
    /// Inputs that arrived while paused, taken in on waking.
    inbox: Vec<Ev>,
    /// The workers' side: leases the member may have granted, as
    /// (deadline by the member's clock, slots), until they end or are handed
    /// back. Judged here from every grant the member offered, not from its
    /// own bookkeeping, so a member that forgets a lease is caught.
    leases: Vec<(Instant, SlotSet)>,
    leaving: bool,
}

#[derive(Debug, Clone)]
enum Ev {
    Tick(usize),
    Read(usize),
    Commit {
        node: usize,
        seq: u64,
        lease: Arc<ObservedLease>,
    },
    Ack {
        node: usize,
        seq: u64,
        version: Option<LeaseVersion>,
    },
    HandBack {
        node: usize,
        slots: Box<SlotSet>,
    },
    Check,
    Disrupt,
    Resume(usize),
    Heal(usize),
    /// A member marks `node`'s Lease judged expired at `version`, and
    /// removes its finalizer.
    MarkExpired {
        node: usize,
        version: LeaseVersion,
    },
    /// A member deletes `node`'s Lease, long expired at `version`.
    DeleteExpired {
        node: usize,
        version: LeaseVersion,
    },
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Report {
    pub runs: usize,
    pub safety_violations: usize,
    pub liveness_violations: usize,
    pub movement_violations: usize,
    pub first_violation: Option<String>,
    pub max_takeover: Duration,
    pub membership_changes: usize,
    /// Largest and summed `moved fraction * N` over membership changes (1.0 is ideal).
    pub max_moved_ratio: f64,
    pub sum_moved_ratio: f64,
    pub crashes: usize,
    pub pauses: usize,
    /// Pauses longer than the lease duration: the member wakes to a stale view.
    pub long_pauses: usize,
    pub partitions: usize,
    pub joins: usize,
    pub leaves: usize,
    /// Leases of running members deleted (by an operator, say).
    pub deletions: usize,
    /// Members that left because their Lease was being deleted and joined again.
    pub rejoins: usize,
    /// Expired Leases marked so (their finalizers removed) by other members.
    pub expired_marked: usize,
    /// Long expired Leases deleted by other members.
    pub expired_deleted: usize,
    pub reads: usize,
    pub writes: usize,
    pub gains: usize,
}

impl Report {
    fn merge(&mut self, other: &Report) {
        self.runs += other.runs;
        self.safety_violations += other.safety_violations;
        self.liveness_violations += other.liveness_violations;
        self.movement_violations += other.movement_violations;
        if self.first_violation.is_none() {
            self.first_violation.clone_from(&other.first_violation);
        }
        self.max_takeover = self.max_takeover.max(other.max_takeover);
        self.membership_changes += other.membership_changes;
        self.max_moved_ratio = self.max_moved_ratio.max(other.max_moved_ratio);
        self.sum_moved_ratio += other.sum_moved_ratio;
        self.crashes += other.crashes;
        self.pauses += other.pauses;
        self.long_pauses += other.long_pauses;
        self.partitions += other.partitions;
        self.joins += other.joins;
        self.leaves += other.leaves;
        self.deletions += other.deletions;
        self.rejoins += other.rejoins;
        self.expired_marked += other.expired_marked;
        self.expired_deleted += other.expired_deleted;
        self.reads += other.reads;
        self.writes += other.writes;
        self.gains += other.gains;
    }

    fn violation(&mut self, what: String) {
        if self.first_violation.is_none() {
            self.first_violation = Some(what);
        }
    }
}

/// A Lease as stored: what was read, and whether it carries the finalizer.
#[derive(Clone)]
struct Stored {
    lease: Arc<ObservedLease>,
    finalizer: bool,
}

/// Every Lease's history, in commit order, with the API server's deletion
/// rules: a Lease with a finalizer is only marked as being deleted; one
/// without goes at once, and so does a Lease being deleted once a write drops
/// its finalizer.
#[derive(Default)]
struct Store {
    revision: u64,
    /// Per node: (commit time, Lease or `None` once deleted), oldest first.
    history: Vec<Vec<(Duration, Option<Stored>)>>,
    /// (commit time, revision), for a snapshot's revision.
    commits: Vec<(Duration, u64)>,
}

impl Store {
    fn current(&self, node: usize) -> Option<&Stored> {
        self.history.get(node).and_then(|h| h.last()).and_then(|(_, stored)| stored.as_ref())
    }

    fn push(&mut self, node: usize, at: Duration, stored: Option<Stored>) {
        if self.history.len() <= node {
            self.history.resize_with(node + 1, Vec::new);
        }
        self.history[node].push((at, stored));
        self.commits.push((at, self.revision));
    }

    /// Stores a member's write: with its finalizer unless it left (nothing
    /// is claimed then); a Lease being deleted goes once that finalizer does.
    fn commit(&mut self, node: usize, at: Duration, lease: &ObservedLease, finalizers: bool) -> LeaseVersion {
        self.revision += 1;
        let version = LeaseVersion(self.revision);
        let finalizer = finalizers && !lease.record.leaving;
        let deleting = self.current(node).is_some_and(|stored| stored.lease.deleting);
        let stored = (finalizer || !deleting).then(|| Stored {
            lease: Arc::new(ObservedLease { version, record: lease.record.clone(), deleting, judged_expired: false }),
            finalizer,
        });
        self.push(node, at, stored);
        version
    }

    /// Deletes the node's Lease (by hand): marked while its finalizer holds it, gone otherwise.
    fn delete(&mut self, node: usize, at: Duration) {
        let Some(stored) = self.current(node).cloned() else { return };
        if stored.lease.deleting {
            return;
        }
        self.revision += 1;
        let marked = stored.finalizer.then(|| Stored {
            lease: Arc::new(ObservedLease {
                version: LeaseVersion(self.revision),
                deleting: true,
                ..(*stored.lease).clone()
            }),
            finalizer: true,
        });
        self.push(node, at, marked);
    }

    /// Marks the node's Lease judged expired (or not, without `marks`) and
    /// removes its finalizer, if it is still at `version` (the write's
    /// precondition) and not marked yet: a Lease being deleted goes with it.
    fn mark_expired(&mut self, node: usize, at: Duration, version: LeaseVersion, marks: bool) -> bool {
        if !self.may_mark(node, version, marks) {
            return false;
        }
        let Some(stored) = self.at(node, version).cloned() else { return false };
        self.revision += 1;
        let kept = (!stored.lease.deleting).then(|| Stored {
            lease: Arc::new(ObservedLease {
                version: LeaseVersion(self.revision),
                judged_expired: marks,
                ..(*stored.lease).clone()
            }),
            finalizer: false,
        });
        self.push(node, at, kept);
        true
    }

    /// Deletes the node's Lease if it is still at `version` (the deletion's
    /// precondition) and carries no finalizer.
    fn delete_expired(&mut self, node: usize, at: Duration, version: LeaseVersion) -> bool {
        if !self.may_delete(node, version) {
            return false;
        }
        self.revision += 1;
        self.push(node, at, None);
        true
    }

    /// Whether the node's Lease is stored at `version` and not marked
    /// judged expired yet (with its finalizer, without `marks`).
    fn may_mark(&self, node: usize, version: LeaseVersion, marks: bool) -> bool {
        self.at(node, version).is_some_and(|stored| !stored.lease.judged_expired && (stored.finalizer || marks))
    }

    /// Whether the node's Lease is stored at `version` without its finalizer.
    fn may_delete(&self, node: usize, version: LeaseVersion) -> bool {
        self.at(node, version).is_some_and(|stored| !stored.finalizer)
    }

    /// The node's Lease, if it is stored at `version`.
    fn at(&self, node: usize, version: LeaseVersion) -> Option<&Stored> {
        self.current(node).filter(|stored| stored.lease.version == version)
    }

    /// The Leases as of real time `at`.
    fn snapshot(&self, at: Duration) -> Snapshot {
        let count = self.commits.partition_point(|(t, _)| *t <= at);
        let revision = if count == 0 { 0 } else { self.commits[count - 1].1 };
        let leases = self
            .history
            .iter()
            .filter_map(|h| {
                let n = h.partition_point(|(t, _)| *t <= at);
                if n > 0 { h[n - 1].1.as_ref().map(|stored| stored.lease.clone()) } else { None }
            })
            .collect();
        Snapshot { revision, leases }
    }
}

struct Sim {
    config: Config,
    rng: Rng,
    base: Instant,
    now: Duration,
    seq: u64,
    queue: BinaryHeap<Reverse<(Duration, u64, usize)>>,
    events: Vec<Option<Ev>>,
    nodes: Vec<Node>,
    store: Store,
    /// The true members (running, paused or partitioned, not leaving) and their assignment.
    truth: Assignment,
    last_disruption: Duration,
    report: Report,
}

fn id(i: usize) -> MemberId {
    Arc::from(format!("sidecar-{i}"))
}

/// The equal-ranges rule's owner of each slot, for the movement check's self-test.
fn equal_ranges(members: &[MemberId]) -> Vec<Option<MemberId>> {
    let mut sorted = members.to_vec();
    sorted.sort();
    (0..SLOTS).map(|s| (!sorted.is_empty()).then(|| sorted[s * sorted.len() / SLOTS].clone())).collect()
}

impl Sim {
    fn new(config: Config, seed: u64) -> Sim {
        let mut sim = Sim {
            rng: Rng(seed),
            base: Instant::now(),
            now: Duration::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            events: Vec::new(),
            nodes: Vec::new(),
            store: Store::default(),
            truth: Assignment::empty(),
            last_disruption: Duration::ZERO,
            report: Report { runs: 1, ..Report::default() },
            config,
        };
        for _ in 0..sim.config.members {
            sim.add_node(Duration::from_secs(2));
        }
        sim.truth = Assignment::compute(&sim.true_members());
        // Pauses and partitions started in the window end before the quiet tail.
        let span = (sim.config.duration.saturating_sub(sim.config.quiet + sim.config.max_pause))
            .saturating_sub(Duration::from_secs(20));
        for _ in 0..sim.config.disruptions {
            let at = Duration::from_secs(20) + sim.rng.between(Duration::ZERO, span);
            sim.schedule(at, Ev::Disrupt);
        }
        sim.schedule(CHECK_EVERY, Ev::Check);
        sim
    }

    fn add_node(&mut self, start_within: Duration) {
        let i = self.nodes.len();
        let drift = self.config.drift();
        let rate = 1.0 + drift * (2.0 * self.rng.unit() - 1.0);
        let offset = self.rng.between(Duration::ZERO, Duration::from_secs(1000));
        let member = Member::new(id(i), self.config.settings).with_fault(self.config.fault);
        self.nodes.push(Node {
            member,
            offset,
            rate,
            status: Status::Running,
            inbox: Vec::new(),
            leases: Vec::new(),
            leaving: false,
        });
        let start = self.now + self.rng.between(Duration::ZERO, start_within);
        self.schedule(start, Ev::Tick(i));
        let first_read = start + self.rng.between(Duration::ZERO, self.config.max_read_gap);
        self.schedule(first_read, Ev::Read(i));
    }

    fn local(&self, node: usize) -> Instant {
        let n = &self.nodes[node];
        self.base + n.offset + self.now.mul_f64(n.rate)
    }

    fn schedule(&mut self, at: Duration, ev: Ev) {
        self.seq += 1;
        self.events.push(Some(ev));
        self.queue.push(Reverse((at, self.seq, self.events.len() - 1)));
    }

    fn true_members(&self) -> Vec<MemberId> {
        self.nodes
            .iter()
            .filter(|n| !n.leaving && matches!(n.status, Status::Running | Status::Paused | Status::Partitioned))
            .map(|n| n.member.id().clone())
            .collect()
    }

    fn membership_changed(&mut self) {
        let members = self.true_members();
        let after = self.truth.update(&members);
        let n = self.truth.len().max(after.len());
        let moved = match self.config.rule {
            Rule::Tokens => self.truth.moved(&after).len(),
            Rule::EqualRanges => {
                let before: Vec<MemberId> = self.truth.members().cloned().collect();
                let (a, b) = (equal_ranges(&before), equal_ranges(&members));
                a.iter().zip(&b).filter(|(x, y)| x != y).count()
            }
        };
        let fraction = moved as f64 / SLOTS as f64;
        let ratio = fraction * n as f64;
        self.report.membership_changes += 1;
        self.report.max_moved_ratio = self.report.max_moved_ratio.max(ratio);
        self.report.sum_moved_ratio += ratio;
        if fraction > 1.0 / n as f64 + 0.05 {
            self.report.movement_violations += 1;
            self.report.violation(format!("{moved} slots moved ({fraction:.3}) for N = {n} at {:?}", self.now));
        }
        self.truth = after;
    }

    fn disrupt(&mut self) {
        self.last_disruption = self.now;
        let running: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].status == Status::Running && !self.nodes[*i].leaving)
            .collect();
        let kind = self.rng.below(6);
        if running.len() < self.config.members / 2 || kind == 0 {
            self.report.joins += 1;
            self.add_node(Duration::ZERO);
            self.membership_changed();
            return;
        }
        let node = running[self.rng.below(running.len())];
        match kind {
            1 => {
                self.report.crashes += 1;
                self.nodes[node].status = Status::Crashed;
                self.membership_changed();
            }
            2 => {
                self.report.pauses += 1;
                let pause = self.rng.between(Duration::from_secs(1), self.config.max_pause);
                if pause > self.config.settings.lease_duration {
                    self.report.long_pauses += 1;
                }
                self.nodes[node].status = Status::Paused;
                self.schedule(self.now + pause, Ev::Resume(node));
            }
            3 => {
                self.report.partitions += 1;
                let cut = self.rng.between(Duration::from_secs(1), self.config.max_pause);
                self.nodes[node].status = Status::Partitioned;
                self.schedule(self.now + cut, Ev::Heal(node));
            }
            4 if self.config.delete_leases => {
                // With its finalizer the Lease stays, marked, until the
                // member has left; without, its claims are gone from every
                // read while it runs on, until it writes the Lease again.
                self.report.deletions += 1;
                self.store.delete(node, self.now);
            }
            _ => {
                self.report.leaves += 1;
                let now = self.local(node);
                self.nodes[node].leaving = true;
                self.nodes[node].member.leave(now);
                self.after_input(node);
                self.membership_changed();
            }
        }
    }

    /// Sends a due write and routes the member's effects.
    fn after_input(&mut self, node: usize) {
        let now = self.local(node);
        for effect in self.nodes[node].member.take_effects() {
            match effect {
                Effect::Gained(_) => self.report.gains += 1,
                Effect::HandedOver(_) | Effect::TermGap(_) => {}
                Effect::Revoke(slots) => {
                    if !self.rng.chance(self.config.no_hand_back) {
                        let at = self.now + self.rng.between(Duration::ZERO, self.config.max_hand_back);
                        self.schedule(at, Ev::HandBack { node, slots: Box::new(slots) });
                    }
                }
            }
        }
        if let Some(write) = self.nodes[node].member.next_write(now) {
            self.report.writes += 1;
            let lease = Arc::new(ObservedLease {
                version: LeaseVersion(0),
                record: write.record,
                deleting: false,
                judged_expired: false,
            });
            let at = self.now + self.rng.between(Duration::ZERO, self.config.max_write_latency);
            self.schedule(at, Ev::Commit { node, seq: write.seq, lease });
        }
    }

    /// Every slot where a lease of this member may be live at this instant.
    fn holding(&self, node: usize) -> SlotSet {
        let now = self.local(node);
        let n = &self.nodes[node];
        let granted = n.member.grant(now).map_or(SlotSet::EMPTY, |g| g.slots);
        n.leases.iter().filter(|(until, _)| now < *until).fold(granted, |all, (_, set)| all.union(set))
    }

    /// Records what the member may grant now: workers may hold leases in
    /// those slots until the grant's end.
    fn record_grant(&mut self, node: usize) {
        let now = self.local(node);
        let n = &mut self.nodes[node];
        n.leases.retain(|(until, set)| now < *until && !set.is_empty());
        if let Some(grant) = n.member.grant(now)
            && n.leases.last() != Some(&(grant.until, grant.slots))
        {
            n.leases.push((grant.until, grant.slots));
        }
    }

    fn check_gained(&mut self, node: usize, before: SlotSet) {
        let gained = self.holding(node).difference(&before);
        if gained.is_empty() {
            return;
        }
        for other in 0..self.nodes.len() {
            if other != node {
                let both = self.holding(other).intersection(&gained);
                if !both.is_empty() {
                    self.safety_violation(node, other, both);
                }
            }
        }
    }

    fn safety_violation(&mut self, a: usize, b: usize, slots: SlotSet) {
        self.report.safety_violations += 1;
        let what = format!("slots {slots:?} held by sidecar-{a} and sidecar-{b} at {:?}", self.now);
        self.report.violation(what);
    }

    fn check_all(&mut self) {
        let mut seen = SlotSet::EMPTY;
        for node in 0..self.nodes.len() {
            let holding = self.holding(node);
            if holding.intersects(&seen) {
                let both = holding.intersection(&seen);
                let other = (0..node).find(|o| self.holding(*o).intersects(&both)).unwrap_or(node);
                self.safety_violation(node, other, both);
            }
            seen = seen.union(&holding);
        }
        if seen != SlotSet::FULL {
            let waited = self.now.saturating_sub(self.last_disruption);
            self.report.max_takeover = self.report.max_takeover.max(waited);
            if waited > self.config.takeover_bound() {
                self.report.liveness_violations += 1;
                let unheld = SlotSet::FULL.difference(&seen).len();
                self.report.violation(format!("{unheld} slots unheld {waited:?} after the last disruption"));
                // Once per disruption is enough.
                self.last_disruption = self.now;
            }
        }
    }

    fn run(mut self) -> Report {
        while let Some(Reverse((at, _, index))) = self.queue.pop() {
            if at > self.config.duration {
                break;
            }
            self.now = at;
            let Some(ev) = self.events[index].take() else { continue };
            self.step(ev);
        }
        self.report
    }

    fn step(&mut self, ev: Ev) {
        match ev {
            Ev::Check => {
                self.check_all();
                self.schedule(self.now + CHECK_EVERY, Ev::Check);
            }
            Ev::Disrupt => self.disrupt(),
            Ev::Tick(node) => {
                self.schedule(self.now + TICK, Ev::Tick(node));
                if self.nodes[node].status == Status::Running || self.nodes[node].status == Status::Partitioned {
                    self.input(node, |member, now| member.poll(now));
                }
            }
            Ev::Read(node) => {
                let gap = self.rng.between(self.config.max_read_gap / 3, self.config.max_read_gap);
                self.schedule(self.now + gap, Ev::Read(node));
                if self.nodes[node].status == Status::Running {
                    self.report.reads += 1;
                    let staleness = self.rng.between(Duration::ZERO, self.config.max_staleness);
                    let snapshot = self.store.snapshot(self.now.saturating_sub(staleness));
                    self.input(node, |member, now| member.observe(&snapshot, now));
                    self.tidy_expired(node);
                }
            }
            Ev::MarkExpired { node, version } => {
                if self.store.mark_expired(node, self.now, version, self.config.expiry_marks) {
                    self.report.expired_marked += 1;
                }
            }
            Ev::DeleteExpired { node, version } => {
                if self.store.delete_expired(node, self.now, version) {
                    self.report.expired_deleted += 1;
                }
            }
            Ev::Commit { node, seq, lease } => {
                let status = self.nodes[node].status;
                let failed = status == Status::Partitioned || self.rng.chance(self.config.write_failure);
                let version = (!failed).then(|| self.store.commit(node, self.now, &lease, self.config.finalizers));
                let lost = self.rng.chance(self.config.lost_ack);
                let at = self.now + self.rng.between(Duration::ZERO, self.config.max_write_latency);
                self.schedule(at, Ev::Ack { node, seq, version: version.filter(|_| !lost) });
            }
            ack @ (Ev::Ack { .. } | Ev::HandBack { .. }) => self.deliver(ack),
            Ev::Resume(node) | Ev::Heal(node) => {
                self.last_disruption = self.now;
                if matches!(self.nodes[node].status, Status::Paused | Status::Partitioned) {
                    self.nodes[node].status = Status::Running;
                    for ev in std::mem::take(&mut self.nodes[node].inbox) {
                        self.deliver(ev);
                    }
                    self.input(node, |member, now| member.poll(now));
                }
            }
        }
    }

    /// An answer to a write, or leases handed back: taken in now, or on
    /// waking if the member is paused.
    fn deliver(&mut self, ev: Ev) {
        let node = match &ev {
            Ev::Ack { node, .. } | Ev::HandBack { node, .. } => *node,
            _ => return,
        };
        match self.nodes[node].status {
            Status::Paused => self.nodes[node].inbox.push(ev),
            Status::Crashed | Status::Gone => {}
            Status::Running | Status::Partitioned => match ev {
                Ev::Ack { seq, version: Some(version), .. } => {
                    self.input(node, |member, now| member.write_succeeded(seq, version, now));
                }
                Ev::Ack { seq, version: None, .. } => self.input(node, |member, _| member.write_failed(seq)),
                Ev::HandBack { slots, .. } => {
                    for (_, set) in &mut self.nodes[node].leases {
                        *set = set.difference(&slots);
                    }
                    self.input(node, |member, _| member.leases_ended(&slots));
                }
                _ => {}
            },
        }
    }

    /// As the shell does after a read: marks every other Lease the member
    /// judges expired so (removing its finalizer), and deletes those it
    /// judges long expired once their finalizer is gone, each only if the
    /// Lease is still at the version judged.
    fn tidy_expired(&mut self, node: usize) {
        let now = self.local(node);
        let member = &self.nodes[node].member;
        let expired = member.expired_leases(now).into_iter().map(|judged| (judged, true));
        let long_expired = member.long_expired_leases(now).into_iter().map(|judged| (judged, false));
        let marks = self.config.expiry_marks;
        let writes: Vec<Ev> = expired
            .chain(long_expired)
            .filter_map(|((holder, version), mark)| {
                let owner = holder.strip_prefix("sidecar-").and_then(|i| i.parse::<usize>().ok())?;
                if mark {
                    self.store.may_mark(owner, version, marks).then_some(Ev::MarkExpired { node: owner, version })
                } else {
                    self.store.may_delete(owner, version).then_some(Ev::DeleteExpired { node: owner, version })
                }
            })
            .collect();
        for write in writes {
            let at = self.now + self.rng.between(Duration::ZERO, self.config.max_write_latency);
            self.schedule(at, write);
        }
    }

    /// Gives one input to a member, then checks what it gained.
    fn input(&mut self, node: usize, f: impl FnOnce(&mut Member, Instant)) {
        let now = self.local(node);
        let before = self.holding(node);
        f(&mut self.nodes[node].member, now);
        self.after_input(node);
        self.record_grant(node);
        if self.nodes[node].member.is_leaving() && !self.nodes[node].leaving {
            // Its Lease is being deleted: it leaves, to join again.
            self.nodes[node].leaving = true;
            self.membership_changed();
        }
        if self.nodes[node].member.has_left() {
            if self.nodes[node].member.was_deleted() {
                self.rejoin(node);
            } else {
                self.nodes[node].status = Status::Gone;
            }
        }
        self.check_gained(node, before);
    }

    /// A member that left because its Lease was being deleted starts again
    /// as a new member under the same name, as the shell does.
    fn rejoin(&mut self, node: usize) {
        self.report.rejoins += 1;
        self.nodes[node].member = self.nodes[node].member.successor();
        self.nodes[node].leaving = false;
        self.last_disruption = self.now;
        self.membership_changed();
    }
}

/// Runs `runs` seeds from `first_seed`, on two threads.
pub(crate) fn simulate(config: &Config, first_seed: u64, runs: usize) -> Report {
    let threads = 2.min(runs.max(1));
    let mut total = Report::default();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut report = Report::default();
                    for run in (t..runs).step_by(threads) {
                        report.merge(&Sim::new(config.clone(), first_seed.wrapping_add(run as u64)).run());
                    }
                    report
                })
            })
            .collect();
        for handle in handles {
            total.merge(&handle.join().expect("a simulation thread panicked"));
        }
    });
    total
}

fn runs_from_env(default: usize) -> usize {
    std::env::var("SHARD_SIM_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The first seed of the main test's runs (`SHARD_SIM_FIRST_SEED`, default
/// 1), so a long series can be run in parts.
fn first_seed_from_env() -> u64 {
    std::env::var("SHARD_SIM_FIRST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

fn print(name: &str, config: &Config, r: &Report) {
    let mean = if r.membership_changes == 0 { 0.0 } else { r.sum_moved_ratio / r.membership_changes as f64 };
    println!(
        "{name}: {} runs of {} members over {:?}: safety violations {}, liveness violations {}, movement violations {}; \
         max takeover {:?} (bound {:?}); moved per change x N: max {:.2}, mean {:.2} over {} changes; \
         {} crashes, {} pauses ({} longer than the lease), {} partitions, {} joins, {} leaves, {} Leases deleted \
         ({} members joined again, {} expired Leases marked, {} long expired Leases deleted); \
         {} reads, {} writes, {} gains; first violation: {:?}",
        r.runs,
        config.members,
        config.duration,
        r.safety_violations,
        r.liveness_violations,
        r.movement_violations,
        r.max_takeover,
        config.takeover_bound(),
        r.max_moved_ratio,
        mean,
        r.membership_changes,
        r.crashes,
        r.pauses,
        r.long_pauses,
        r.partitions,
        r.joins,
        r.leaves,
        r.deletions,
        r.rejoins,
        r.expired_marked,
        r.expired_deleted,
        r.reads,
        r.writes,
        r.gains,
        r.first_violation,
    );
}

/// `SHARD_SIM_EXPIRY_MARKS=off` runs the protocol before the marks, to
/// compare takeovers on the same seeds.
fn expiry_marks_from_env() -> bool {
    std::env::var("SHARD_SIM_EXPIRY_MARKS").map_or(true, |v| v != "off")
}

#[test]
fn no_slot_should_ever_be_held_by_two_members_and_every_slot_should_be_held_again_in_time() {
    let config = Config { expiry_marks: expiry_marks_from_env(), ..Config::default() };
    let first_seed = first_seed_from_env();
    let report = simulate(&config, first_seed, runs_from_env(6));
    print(&format!("protocol (seeds from {first_seed})"), &config, &report);
    assert_eq!(report.safety_violations, 0, "{:?}", report.first_violation);
    assert_eq!(report.liveness_violations, 0, "{:?}", report.first_violation);
    assert_eq!(report.movement_violations, 0, "{:?}", report.first_violation);
    assert!(report.crashes + report.pauses + report.partitions > 0);
    assert!(report.expired_marked > 0, "crashed members' Leases are judged expired");
    assert!(report.expired_deleted > 0, "crashed members' Leases are deleted once long expired");
}

/// Leases of running members deleted by hand. Each carries a finalizer, so
/// it stays readable, claims and all, while being deleted: every member,
/// also one starting or cut off when the deletion came, sees the claims
/// until the deleted member has left (then it joins again under a new
/// Lease) or its Lease expired. Before the finalizer, members that were not
/// reading at the deletion took such slots early: 22 violations in 130 runs
/// (docs/sharding.md, "Failure cases"). `SHARD_SIM_RUNS` sets the runs.
#[test]
fn a_deleted_lease_should_not_free_its_slots_while_its_member_may_grant() {
    let config = Config { delete_leases: true, ..Config::default() };
    let report = simulate(&config, first_seed_from_env(), runs_from_env(6));
    print("deleted Leases", &config, &report);
    assert!(report.deletions > 0, "some Leases were deleted under running members");
    assert!(report.rejoins > 0, "members whose Lease was deleted joined again");
    assert_eq!(report.safety_violations, 0, "{:?}", report.first_violation);
    assert_eq!(report.liveness_violations, 0, "{:?}", report.first_violation);
    assert_eq!(report.movement_violations, 0, "{:?}", report.first_violation);
}

/// 1,000 runs (`SHARD_SIM_RUNS=1000`, release build, about 5 minutes) once
/// found 283 safety violations, all while the members were starting (seeds
/// 148, 195, 196, ...): the write that started a term chain confirmed claims
/// made after it was sent. Seed 148 met it; the 6 default runs never did.
#[test]
fn start_up_should_never_let_two_members_hold_one_slot() {
    let report = Sim::new(Config::default(), 148).run();
    assert_eq!(report.safety_violations, 0, "{:?}", report.first_violation);
}

// The checks can fail: each rule broken on purpose is caught.

fn caught(fault: Fault, runs: usize) -> Report {
    let deletions = matches!(fault, Fault::ForgetDeletedLeases | Fault::IgnoreDeletingLeases);
    // A Lease gone from the reads while its member runs: only once its
    // finalizer is removed by hand.
    let finalizers = fault != Fault::ForgetDeletedLeases;
    let config = Config { fault, delete_leases: deletions, finalizers, ..Config::default() };
    let report = simulate(&config, 1000, runs);
    print(&format!("{fault:?}"), &config, &report);
    report
}

#[test]
fn the_safety_check_should_catch_a_member_that_claims_without_waiting_for_the_release() {
    assert!(caught(Fault::IgnoreOtherClaims, 2).safety_violations > 0);
}

#[test]
fn the_safety_check_should_catch_a_member_that_frees_a_moved_slot_before_its_leases_end() {
    assert!(caught(Fault::FreeWithoutDraining, 2).safety_violations > 0);
}

#[test]
fn the_safety_check_should_catch_a_paused_member_that_keeps_its_slots_on_waking() {
    assert!(caught(Fault::KeepSlotsAcrossGap, 4).safety_violations > 0);
}

#[test]
fn the_safety_check_should_catch_a_member_that_takes_the_slots_of_a_deleted_lease_at_once() {
    assert!(caught(Fault::ForgetDeletedLeases, 2).safety_violations > 0);
}

#[test]
fn the_safety_check_should_catch_a_member_that_takes_the_slots_of_a_lease_being_deleted() {
    assert!(caught(Fault::IgnoreDeletingLeases, 2).safety_violations > 0);
}

#[test]
fn the_safety_check_should_catch_a_member_that_keeps_a_lease_judged_expired_after_it_renewed() {
    assert!(caught(Fault::KeepJudgementAcrossRenewal, 4).safety_violations > 0);
}

#[test]
fn the_liveness_check_should_catch_slots_of_a_crashed_member_never_taken_over() {
    assert!(caught(Fault::NeverExpire, 2).liveness_violations > 0);
}

#[test]
fn the_movement_check_should_catch_equal_ranges_over_the_sorted_members() {
    let config = Config { rule: Rule::EqualRanges, ..Config::default() };
    let report = simulate(&config, 1, 1);
    print("EqualRanges", &config, &report);
    assert!(report.movement_violations > 0);
}

#[test]
fn the_same_seed_should_replay_the_same_run() {
    let config = Config { members: 20, duration: Duration::from_secs(90), ..Config::default() };
    let a = Sim::new(config.clone(), 7).run();
    let b = Sim::new(config, 7).run();
    assert_eq!((a.reads, a.writes, a.gains, a.max_takeover), (b.reads, b.writes, b.gains, b.max_takeover));
}

#[test]
fn slots_should_cover_the_hash_space_in_order() {
    assert_eq!(Slot::all().count(), SLOTS);
}
