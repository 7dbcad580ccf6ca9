//! `informers:` in the config file: a map from informer name to what it watches.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};

use super::duration::HumanDuration;
use super::queue_name;
use super::shard_by::ShardByDoc;
use crate::informer::{FieldSelector, IndexBy, IndexSpec, InformerSpec, LabelSelector, ShardBy};

/// `informers:`, kept in file order.
pub(super) struct InformerEntries(pub(super) Vec<InformerSpec>);

impl<'de> Deserialize<'de> for InformerEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(InformerEntriesVisitor)
    }
}

struct InformerEntriesVisitor;

impl<'de> Visitor<'de> for InformerEntriesVisitor {
    type Value = InformerEntries;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from informer name to what it watches")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<InformerEntries, A::Error> {
        let mut entries: Vec<InformerSpec> = Vec::new();
        while let Some(name) = map.next_key_seed(InformerName { taken: &entries })? {
            let doc: InformerDoc = map.next_value()?;
            entries.push(doc.into_spec(name));
        }
        Ok(InformerEntries(entries))
    }
}

/// Reads one informer name and checks it where the parser knows its position.
struct InformerName<'a> {
    taken: &'a [InformerSpec],
}

impl<'de> DeserializeSeed<'de> for InformerName<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for InformerName<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an informer name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<String, E> {
        queue_name::check_as("informer", name).map_err(E::custom)?;
        if self.taken.iter().any(|taken| taken.name == name) {
            return Err(E::custom(format!("informer {name:?} is defined twice; informer names must be unique")));
        }
        Ok(name.to_owned())
    }
}

/// One informer's fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `version` and `kind` (and optionally `group`, `namespace`, …)")]
struct InformerDoc {
    /// Empty or missing: the core group.
    #[serde(default)]
    group: String,
    version: NonEmpty,
    kind: NonEmpty,
    namespace: Option<Namespace>,
    label_selector: Option<Selector<LabelSyntax>>,
    field_selector: Option<Selector<FieldSyntax>>,
    #[serde(default)]
    metadata_only: bool,
    #[serde(default = "yes")]
    strip_managed_fields: bool,
    resync: Option<Resync>,
    #[serde(default)]
    indexes: Option<IndexEntries>,
    shard_by: Option<ShardByDoc>,
    cache_reads: Option<bool>,
}

fn yes() -> bool {
    true
}

impl InformerDoc {
    fn into_spec(self, name: String) -> InformerSpec {
        InformerSpec {
            name,
            group: self.group,
            version: self.version.0,
            kind: self.kind.0,
            namespace: self.namespace.map(|n| n.0),
            label_selector: self.label_selector.map(|s| s.0),
            field_selector: self.field_selector.map(|s| s.0),
            metadata_only: self.metadata_only,
            strip_managed_fields: self.strip_managed_fields,
            resync: self.resync.and_then(|r| r.0),
            indexes: self.indexes.map(|i| i.0).unwrap_or_default(),
            shard_by: self.shard_by.map(ShardBy::from),
            cache_reads: self.cache_reads,
        }
    }
}

/// A selector's text, parsed when the config is read so that a malformed
/// one exits before any port is bound (the API server would refuse it on
/// every retry); kept as text for the watch.
struct Selector<S>(String, std::marker::PhantomData<S>);

/// How one kind of selector is parsed.
trait SelectorSyntax {
    fn check(text: &str) -> Result<(), String>;
}

struct LabelSyntax;
struct FieldSyntax;

impl SelectorSyntax for LabelSyntax {
    fn check(text: &str) -> Result<(), String> {
        LabelSelector::parse(text).map(drop)
    }
}

impl SelectorSyntax for FieldSyntax {
    fn check(text: &str) -> Result<(), String> {
        let selector = FieldSelector::parse(text)?;
        // Of `metadata`, the API server selects every kind by these two only;
        // other fields are each kind's own, for the server to say at start.
        let unknown =
            selector.terms().iter().map(|t| t.field.as_str()).find(|field| {
                field.starts_with("metadata.") && !matches!(*field, "metadata.name" | "metadata.namespace")
            });
        match unknown {
            Some(field) => Err(format!(
                "{field:?} cannot be selected by: of metadata, only metadata.name and metadata.namespace can"
            )),
            None => Ok(()),
        }
    }
}

impl<'de, S: SelectorSyntax> Deserialize<'de> for Selector<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let NonEmpty(text) = NonEmpty::deserialize(deserializer)?;
        S::check(&text).map_err(de::Error::custom)?;
        Ok(Selector(text, std::marker::PhantomData))
    }
}

/// `namespace:`, a namespace's name as the API server takes one: a DNS
/// label. Another name lists nothing, and the informer would sync empty.
struct Namespace(String);

impl<'de> Deserialize<'de> for Namespace {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let NonEmpty(name) = NonEmpty::deserialize(deserializer)?;
        if !crate::k8s_names::is_dns_label(&name) {
            return Err(de::Error::custom(format!(
                "{name:?} is not a namespace name: at most 63 lowercase letters, digits and '-', \
                 starting and ending with a letter or digit"
            )));
        }
        Ok(Namespace(name))
    }
}

/// `resync:`, off at zero (as client-go's zero period) and otherwise at
/// least a second (client-go's shortest): a shorter one relists the keys of
/// the whole cache faster than any worker takes them.
struct Resync(Option<std::time::Duration>);

/// The shortest resync period taken.
const SHORTEST_RESYNC: std::time::Duration = std::time::Duration::from_secs(1);

impl<'de> Deserialize<'de> for Resync {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let HumanDuration(period) = HumanDuration::deserialize(deserializer)?;
        if !period.is_zero() && period < SHORTEST_RESYNC {
            return Err(de::Error::custom(format!(
                "{period:?} is too short: at least {SHORTEST_RESYNC:?}, or 0s for no resync"
            )));
        }
        Ok(Resync(Some(period).filter(|p| !p.is_zero())))
    }
}

/// A string that must not be empty.
struct NonEmpty(String);

impl<'de> Deserialize<'de> for NonEmpty {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        if text.trim().is_empty() {
            return Err(de::Error::custom("must not be empty"));
        }
        Ok(NonEmpty(text))
    }
}

/// `indexes:`, a map from index name to `namespace`, `owner` or `{ field: path }`.
struct IndexEntries(Vec<IndexSpec>);

impl<'de> Deserialize<'de> for IndexEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(IndexEntriesVisitor)
    }
}

struct IndexEntriesVisitor;

impl<'de> Visitor<'de> for IndexEntriesVisitor {
    type Value = IndexEntries;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map from index name to `namespace`, `owner` or `{ field: path }`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IndexEntries, A::Error> {
        let mut entries: Vec<IndexSpec> = Vec::new();
        while let Some(name) = map.next_key_seed(IndexName { taken: &entries })? {
            let by: IndexByDoc = map.next_value()?;
            entries.push(IndexSpec { name, by: by.0 });
        }
        Ok(IndexEntries(entries))
    }
}

struct IndexName<'a> {
    taken: &'a [IndexSpec],
}

impl<'de> DeserializeSeed<'de> for IndexName<'_> {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<String, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for IndexName<'_> {
    type Value = String;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an index name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<String, E> {
        queue_name::check_as("index", name).map_err(E::custom)?;
        if self.taken.iter().any(|taken| taken.name == name) {
            return Err(E::custom(format!("index {name:?} is defined twice")));
        }
        Ok(name.to_owned())
    }
}

/// `namespace`, `owner`, or `{ field: spec.nodeName }`.
struct IndexByDoc(IndexBy);

const INDEX_KINDS: &str = "`namespace`, `owner` or `{ field: <dotted path> }`";

impl<'de> Deserialize<'de> for IndexByDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(IndexByVisitor)
    }
}

struct IndexByVisitor;

impl<'de> Visitor<'de> for IndexByVisitor {
    type Value = IndexByDoc;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "one of {INDEX_KINDS}")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<IndexByDoc, E> {
        match text {
            "namespace" => Ok(IndexByDoc(IndexBy::Namespace)),
            "owner" => Ok(IndexByDoc(IndexBy::Owner)),
            other => Err(E::custom(format!("unknown index kind {other:?}, expected one of {INDEX_KINDS}"))),
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IndexByDoc, A::Error> {
        let key: Option<String> = map.next_key()?;
        match key.as_deref() {
            Some("field") => {}
            Some(other) => return Err(de::Error::custom(format!("unknown key `{other}`, expected `field`"))),
            None => return Err(de::Error::custom(format!("empty index, give one of {INDEX_KINDS}"))),
        }
        let path: String = map.next_value()?;
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(de::Error::custom(format!("invalid field path {path:?}: use dotted names like spec.nodeName")));
        }
        if map.next_key::<String>()?.is_some() {
            return Err(de::Error::custom("an index has one `field`"));
        }
        Ok(IndexByDoc(IndexBy::Field(path)))
    }
}
