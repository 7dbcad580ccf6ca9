//! The config file's YAML shape: what serde reads, before the settings are validated.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::duration::HumanDuration;
use super::queue_name;
use super::rate_limiter::RateLimiterDoc;
use crate::queue::QueueSettings;

/// The whole file. Unknown top-level keys are refused by name.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with a `queues` key")]
pub(super) struct FileDoc {
    /// `None` when the key is missing or empty; the caller refuses that.
    #[serde(default)]
    pub(super) queues: Option<QueueEntries>,
    /// Reserved for the informers of a later version; any value is refused.
    #[serde(default, rename = "informers")]
    _informers: NotYetSupported,
}

/// `queues:`, a map from queue name to settings, kept in file order.
pub(super) struct QueueEntries(pub(super) Vec<(String, QueueSettings)>);

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
        let mut entries: Vec<(String, QueueSettings)> = Vec::new();
        while let Some(name) = map.next_key_seed(QueueName { taken: &entries })? {
            // `orders:` with nothing under it is a queue with every default.
            let doc: Option<QueueDoc> = map.next_value()?;
            entries.push((name, doc.unwrap_or_default().into_settings()));
        }
        Ok(QueueEntries(entries))
    }
}

/// Reads one queue name and checks it while the parser still knows its
/// position, so a bad or repeated name is reported at its own line.
struct QueueName<'a> {
    taken: &'a [(String, QueueSettings)],
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
        if self.taken.iter().any(|(taken, _)| taken == name) {
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
    /// `~` (null) or missing: no limit.
    max_keys: Option<usize>,
    rate_limiter: Option<RateLimiterDoc>,
}

impl QueueDoc {
    fn into_settings(self) -> QueueSettings {
        let default = QueueSettings::default();
        QueueSettings {
            lease_ttl: self.lease_ttl.map_or(default.lease_ttl, |d| d.0),
            max_lease_ttl: self.max_lease_ttl.map_or(default.max_lease_ttl, |d| d.0),
            max_wait: self.max_wait.map_or(default.max_wait, |d| d.0),
            max_keys: self.max_keys.or(default.max_keys),
            rate_limiter: self.rate_limiter.map_or(default.rate_limiter, |r| r.0),
        }
    }
}

/// A top-level key this version reserves but cannot serve yet: present at
/// all, whatever its value, it is an error.
#[derive(Default)]
struct NotYetSupported;

impl<'de> Deserialize<'de> for NotYetSupported {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Going through `deserialize_any` lets the parser attach the value's position.
        deserializer.deserialize_any(NotYetSupported)
    }
}

impl<'de> Visitor<'de> for NotYetSupported {
    type Value = NotYetSupported;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nothing: not supported yet in this version")
    }

    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Self, A::Error> {
        Err(not_yet_supported())
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self, A::Error> {
        Err(not_yet_supported())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self, E> {
        Err(not_yet_supported())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self, E> {
        Err(not_yet_supported())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self, E> {
        Err(not_yet_supported())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self, E> {
        Err(not_yet_supported())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self, E> {
        Err(not_yet_supported())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self, E> {
        Err(not_yet_supported())
    }
}

fn not_yet_supported<E: de::Error>() -> E {
    E::custom("not supported yet in this version; only `queues` can be configured")
}
