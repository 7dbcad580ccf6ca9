//! Rules a shard member breaks on purpose, in tests only, so the simulation shows that its checks can fail.

/// Rules broken on purpose, so the simulation shows its checks can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Fault {
    #[default]
    None,
    /// Claim and hold a slot without waiting for its old owner's release or expiry.
    IgnoreOtherClaims,
    /// Keep held slots across a gap in the term chain (a paused member waking up).
    KeepSlotsAcrossGap,
    /// Free a moved slot at once, without waiting for its leases to end.
    FreeWithoutDraining,
    /// Judge another Lease expired as of now, not as of the checked write.
    JudgeExpiryNow,
    /// Never judge another member's Lease expired: crashed members keep their slots.
    NeverExpire,
    /// Forget a Lease as soon as a read no longer has it (deleted by hand):
    /// its member may still be granting from its slots.
    ForgetDeletedLeases,
    /// Take a Lease whose deletion was asked for as gone at once, claims and
    /// all: its member may still be granting from its slots.
    IgnoreDeletingLeases,
    /// Keep a Lease judged expired after its member renewed it: the member
    /// is back, granting, and its claims go unseen.
    KeepJudgementAcrossRenewal,
}
