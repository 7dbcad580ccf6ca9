//! Memory stays bounded: a processed and forgotten key leaves nothing behind.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lease::{FinishOutcome, Holder};
use super::reason::{Reason, ReasonKind};
use super::settings::QueueSettings;
use super::state::QueueState;

#[test]
fn internal_maps_should_be_empty_after_a_million_keys_were_processed_and_forgotten() {
    let mut now = Instant::now();
    let mut queue = QueueState::<String>::new(QueueSettings::default(), now);
    let holder: Holder = Arc::from("w");
    let reason = Reason::new(ReasonKind::Added, "informer");
    const KEYS: usize = 1_000_000;
    const BATCH: usize = 10_000;

    for batch in 0..KEYS / BATCH {
        for i in 0..BATCH {
            let key = format!("ns-{batch}/object-{i}");
            // Every shape of life a key can have: plain, delayed, retried, dirty while held.
            match i % 4 {
                0 => drop(queue.add(key, 0, reason.clone(), now).unwrap()),
                1 => drop(queue.add_after(key, Duration::from_millis(1), -100, reason.clone(), now).unwrap()),
                2 => drop(queue.add_rate_limited(key, 0, reason.clone(), now).unwrap()),
                _ => drop(queue.add(key, 5, reason.clone(), now).unwrap()),
            }
        }
        now += Duration::from_secs(2000);
        queue.advance(now);
        let mut processed = 0;
        while let Some(lease) = queue.grant(&holder, None, now) {
            if lease.key.ends_with('3') && !lease.reasons.contains_kind(ReasonKind::Manual) {
                // A new event while held: the key comes back once more.
                queue.add(lease.key.clone(), 0, Reason::of(ReasonKind::Manual), now).unwrap();
            }
            if processed % 7 == 0 {
                queue.finish(&lease.key, lease.token, FinishOutcome::Retry { error: "transient".into() }, now).unwrap();
                queue.forget(&lease.key);
            } else {
                queue.finish(&lease.key, lease.token, FinishOutcome::Success, now).unwrap();
            }
            processed += 1;
            if processed % 1000 == 0 {
                now += Duration::from_secs(2000);
                queue.advance(now);
            }
        }
        now += Duration::from_secs(2000);
        queue.advance(now);
        while let Some(lease) = queue.grant(&holder, None, now) {
            queue.finish(&lease.key, lease.token, FinishOutcome::Success, now).unwrap();
        }
        assert_eq!(queue.internal_sizes(), [0; 7], "after batch {batch}");
    }
    assert_eq!(queue.counts().tracked, 0);
    assert_eq!(queue.counts().key_bytes, 0, "every key's bytes were given back");
}
