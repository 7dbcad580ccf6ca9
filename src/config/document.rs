//! The config file's YAML shape: what serde reads, before the settings are validated.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::binding::{PredicateDoc, PrioritiesDoc, TriggerDoc};
use super::byte_size::ByteSize;
use super::duration::HumanDuration;
use super::informer::InformerEntries;
use super::queue_name;
use super::rate_limiter::RateLimiterDoc;
use super::shard_by::ShardByDoc;
use super::writes::WriteDoc;
use crate::informer::{QueueBinding, ShardBy};
use crate::queue::QueueSettings;

/// The whole file. Unknown top-level keys are refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with a `queues` key")]
pub(super) struct FileDoc {
    /// `None` when the key is missing or empty; the caller refuses that.
    #[serde(default)]
    pub(super) queues: Option<QueueEntries>,
    /// The shared informers, by name; missing or empty: none (a plain remote workqueue).
    #[serde(default)]
    pub(super) informers: Option<InformerEntries>,
    /// The field manager of writes through the sidecar that name none.
    #[serde(default)]
    pub(super) field_manager: Option<String>,
    /// What workers may write through the sidecar; missing: nothing.
    #[serde(default)]
    pub(super) writes: Option<Vec<WriteDoc>>,
}

/// One queue as read: its name, settings and informer binding.
pub(super) struct QueueEntry {
    pub(super) name: String,
    pub(super) settings: QueueSettings,
    pub(super) binding: QueueBinding,
}

/// `queues:`, a map from queue name to settings, kept in file order.
pub(super) struct QueueEntries(pub(super) Vec<QueueEntry>);

impl<'de> Deserialize<'de> for QueueEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(QueueEntriesVisitor)
    }
}

struct QueueEntriesVisitor;

impl<'de> Visitor<'de> for QueueEntriesVisitor {
    type Value = QueueEntries;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from queue name to its settings")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<QueueEntries, A::Error> {
        let mut entries: Vec<QueueEntry> = Vec::new();
        while let Some(name) = map.next_key_seed(QueueName { taken: &entries })? {
            // `orders:` with nothing under it is a queue with every default.
            let doc: Option<QueueDoc> = map.next_value()?;
            let (settings, binding) = doc.unwrap_or_default().into_parts();
            entries.push(QueueEntry { name, settings, binding });
        }
        Ok(QueueEntries(entries))
    }
}

/// Reads one queue name and checks it while the parser still knows its
/// position, so a bad or repeated name is reported at its own line.
struct QueueName<'a> {
    taken: &'a [QueueEntry],
}

impl<'de> DeserializeSeed<'de> for QueueName<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for QueueName<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a queue name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<String, E> {
        queue_name::check(name).map_err(E::custom)?;
        if self.taken.iter().any(|taken| taken.name == name) {
            return Err(E::custom(format!("queue {name:?} is defined twice; queue names must be unique")));
        }
        Ok(name.to_owned())
    }
}

/// One queue's settings; a missing field keeps `QueueSettings::default()`.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map of queue settings")]
struct QueueDoc {
    lease_ttl: Option<HumanDuration>,
    max_lease_ttl: Option<HumanDuration>,
    max_wait: Option<HumanDuration>,
    /// Missing: the default limit; a number: that limit; `~` (null) is refused.
    #[serde(default, deserialize_with = "bound")]
    max_keys: Option<usize>,
    max_memory: Option<ByteSize>,
    settle_timeout: Option<HumanDuration>,
    rate_limiter: Option<RateLimiterDoc>,
    /// The informer whose objects are this queue's keys.
    primary: Option<String>,
    #[serde(default)]
    triggers: Vec<TriggerDoc>,
    #[serde(default)]
    predicates: Vec<PredicateDoc>,
    priorities: Option<PrioritiesDoc>,
    finalizer: Option<String>,
    shard_by: Option<ShardByDoc>,
}

impl QueueDoc {
    fn into_parts(self) -> (QueueSettings, QueueBinding) {
        let default = QueueSettings::default();
        let binding = QueueBinding {
            primary: self.primary,
            triggers: self.triggers.into_iter().map(|t| t.0).collect(),
            predicates: self.predicates.into_iter().map(|p| p.0).collect(),
            priorities: self.priorities.map(PrioritiesDoc::into_priorities).unwrap_or_default(),
            finalizer: self.finalizer,
            shard_by: self.shard_by.map(ShardBy::from),
        };
        let settings = QueueSettings {
            lease_ttl: self.lease_ttl.map_or(default.lease_ttl, |d| d.0),
            max_lease_ttl: self.max_lease_ttl.map_or(default.max_lease_ttl, |d| d.0),
            max_wait: self.max_wait.map_or(default.max_wait, |d| d.0),
            max_keys: self.max_keys.unwrap_or(default.max_keys),
            max_memory: self.max_memory.map_or(default.max_memory, |size| size.0),
            rate_limiter: self.rate_limiter.map_or(default.rate_limiter, |r| r.0),
            settle_timeout: self.settle_timeout.map_or(default.settle_timeout, |d| d.0),
        };
        (settings, binding)
    }
}

/// A bound given (a field left out never gets here, by `#[serde(default)]`):
/// a number; null, once "no limit", is refused, since every queue is bounded.
fn bound<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<usize>, D::Error> {
    match Option::<usize>::deserialize(deserializer)? {
        Some(limit) => Ok(Some(limit)),
        None => Err(de::Error::custom(
            "must be a number: every queue is bounded (max_keys, max_memory); raise the bound rather than remove it",
        )),
    }
}
