//! A queue's informer fields in the config file: `primary`, `triggers`, `predicates`, `priorities`.

use serde::Deserialize;
use serde::de::{self, Deserializer};

use crate::informer::{IndexValue, LanePriorities, Predicate, TriggerMap, TriggerSpec, check_label_key};

/// One entry of `triggers:`. Which mapping it uses is `by`; the other keys
/// belong to that mapping and are refused elsewhere.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `informer` and `by` (owner, label or index)")]
struct TriggerFields {
    informer: String,
    by: TriggerBy,
    /// `by: owner`: only the owner reference marked `controller: true`.
    controller_only: Option<bool>,
    /// `by: label`: the label whose value names the primary object.
    label: Option<String>,
    /// `by: index`: the index of the primary informer to look up.
    index: Option<String>,
    /// `by: index`: which property of the trigger object to look up.
    value: Option<IndexValueDoc>,
    #[serde(default)]
    predicates: Vec<PredicateDoc>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum TriggerBy {
    Owner,
    Label,
    Index,
}

/// A trigger, checked while the parser still knows its position.
pub(super) struct TriggerDoc(pub(super) TriggerSpec);

impl<'de> Deserialize<'de> for TriggerDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let f = TriggerFields::deserialize(deserializer)?;
        let misplaced = |key: &str, by: &str| -> D::Error {
            de::Error::custom(format!("`{key}` belongs to `by: {by}` triggers only"))
        };
        let map = match f.by {
            TriggerBy::Owner => {
                if f.label.is_some() {
                    return Err(misplaced("label", "label"));
                }
                if f.index.is_some() || f.value.is_some() {
                    return Err(misplaced(if f.index.is_some() { "index" } else { "value" }, "index"));
                }
                TriggerMap::Owner { controller_only: f.controller_only.unwrap_or(false) }
            }
            TriggerBy::Label => {
                if f.controller_only.is_some() {
                    return Err(misplaced("controller_only", "owner"));
                }
                if f.index.is_some() || f.value.is_some() {
                    return Err(misplaced(if f.index.is_some() { "index" } else { "value" }, "index"));
                }
                match f.label {
                    Some(label) if !label.is_empty() => {
                        check_label_key(&label).map_err(de::Error::custom)?;
                        TriggerMap::Label(label)
                    }
                    _ => {
                        return Err(de::Error::custom(
                            "`by: label` needs `label`: the label whose value names the primary object",
                        ));
                    }
                }
            }
            TriggerBy::Index => {
                if f.controller_only.is_some() {
                    return Err(misplaced("controller_only", "owner"));
                }
                if f.label.is_some() {
                    return Err(misplaced("label", "label"));
                }
                match f.index {
                    Some(index) if !index.is_empty() => {
                        TriggerMap::Index { index, value: f.value.map_or(IndexValue::Name, |v| v.0) }
                    }
                    _ => return Err(de::Error::custom("`by: index` needs `index`: an index of the primary informer")),
                }
            }
        };
        Ok(TriggerDoc(TriggerSpec {
            informer: f.informer,
            map,
            predicates: f.predicates.into_iter().map(|p| p.0).collect(),
        }))
    }
}

/// `name`, `key` or `uid`.
struct IndexValueDoc(IndexValue);

impl<'de> Deserialize<'de> for IndexValueDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        enum Doc {
            Name,
            Key,
            Uid,
        }
        Ok(IndexValueDoc(match Doc::deserialize(deserializer)? {
            Doc::Name => IndexValue::Name,
            Doc::Key => IndexValue::Key,
            Doc::Uid => IndexValue::Uid,
        }))
    }
}

/// `generation_changed`, `labels_changed` or `annotations_changed`.
pub(super) struct PredicateDoc(pub(super) Predicate);

impl<'de> Deserialize<'de> for PredicateDoc {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[allow(clippy::enum_variant_names)] // the names are the config's words
        enum Doc {
            GenerationChanged,
            LabelsChanged,
            AnnotationsChanged,
        }
        Ok(PredicateDoc(match Doc::deserialize(deserializer)? {
            Doc::GenerationChanged => Predicate::GenerationChanged,
            Doc::LabelsChanged => Predicate::LabelsChanged,
            Doc::AnnotationsChanged => Predicate::AnnotationsChanged,
        }))
    }
}

/// `priorities:`; a missing lane keeps its default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a map with `initial_list`, `resync`, `events` and/or `triggers`")]
pub(super) struct PrioritiesDoc {
    initial_list: Option<i32>,
    resync: Option<i32>,
    events: Option<i32>,
    triggers: Option<i32>,
}

impl PrioritiesDoc {
    pub(super) fn into_priorities(self) -> LanePriorities {
        let d = LanePriorities::default();
        LanePriorities {
            initial_list: self.initial_list.unwrap_or(d.initial_list),
            resync: self.resync.unwrap_or(d.resync),
            events: self.events.unwrap_or(d.events),
            triggers: self.triggers.unwrap_or(d.triggers),
        }
    }
}
