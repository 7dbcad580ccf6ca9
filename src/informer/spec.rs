//! What an informer watches and how a queue listens to informers, as the config file describes them.

use std::time::Duration;

use crate::queue::{PRIORITY_FAST, PRIORITY_SLOW};

/// One informer: a list+watch cache of one resource, shared by every queue that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InformerSpec {
    /// The name queues and Cache requests use.
    pub name: String,
    /// API group; empty for the core group (`v1` ConfigMaps, Namespaces, …).
    pub group: String,
    pub version: String,
    /// The kind, resolved to a resource by discovery (so CRDs work).
    pub kind: String,
    /// Watch one namespace only; `None` watches all (and is the only choice
    /// for a cluster-scoped resource).
    pub namespace: Option<String>,
    /// Server-side label selector, as the API server takes it.
    pub label_selector: Option<String>,
    /// Server-side field selector, as the API server takes it.
    pub field_selector: Option<String>,
    /// Keep only apiVersion, kind and metadata (a metadata-only watch).
    pub metadata_only: bool,
    /// Drop `metadata.managedFields` before storing (the default): they are
    /// often half an object's size and no reconciler reads them.
    pub strip_managed_fields: bool,
    /// Re-enqueue every object of this informer on its primary queues this often.
    pub resync: Option<Duration>,
    /// Secondary indexes, in file order.
    pub indexes: Vec<IndexSpec>,
    /// List and watch only the objects of this replica's shard slots, by
    /// their uid or namespace (`None`: every object). Only for the informers
    /// of sharded queues, sharded alike.
    pub shard_by: Option<ShardBy>,
    /// Whether `CacheService` serves this informer's objects to clients. As
    /// declared (`cache_reads`) until the config resolves it: then `Some`,
    /// by default whether a queue uses the informer, never for a sensitive
    /// kind ([`InformerSpec::is_sensitive`]) unless declared.
    pub cache_reads: Option<bool>,
}

/// Kinds whose objects are credentials: served to clients only when the
/// config says so by name (`cache_reads: true`), and warned about then.
const SENSITIVE_KINDS: [(&str, &str); 1] = [("", "Secret")];

impl InformerSpec {
    /// Whether the kind holds credentials (a Secret).
    pub fn is_sensitive(&self) -> bool {
        SENSITIVE_KINDS.iter().any(|(group, kind)| self.group == *group && self.kind == *kind)
    }

    /// Whether clients may read this informer through `CacheService`.
    pub fn serves_cache_reads(&self) -> bool {
        self.cache_reads == Some(true)
    }

    /// A spec with the defaults of the config file, for code and tests.
    pub fn new(name: impl Into<String>, group: &str, version: &str, kind: &str) -> Self {
        InformerSpec {
            name: name.into(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind: kind.to_owned(),
            namespace: None,
            label_selector: None,
            field_selector: None,
            metadata_only: false,
            strip_managed_fields: true,
            resync: None,
            indexes: Vec::new(),
            shard_by: None,
            cache_reads: Some(true),
        }
    }

    pub fn index(&self, name: &str) -> Option<&IndexSpec> {
        self.indexes.iter().find(|i| i.name == name)
    }

    /// `group/version` as an apiVersion (`v1` for the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// One named index of an informer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    pub name: String,
    pub by: IndexBy,
}

/// What an index files objects under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexBy {
    /// `metadata.namespace` (empty for cluster-scoped objects).
    Namespace,
    /// The UID of every owner reference.
    Owner,
    /// The value(s) at a dotted field path such as `spec.nodeName`; a path
    /// through a list fans out over its items (`spec.volumes.configMap.name`).
    /// Strings, numbers and booleans are indexed as text; missing fields are not indexed.
    Field(String),
}

/// How one queue listens to informers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueueBinding {
    /// The informer whose objects are the queue's keys (`namespace/name`, or
    /// `name` when cluster-scoped); `None` for a plain queue.
    pub primary: Option<String>,
    /// Other informers whose changes enqueue primary keys.
    pub triggers: Vec<TriggerSpec>,
    /// Filters for update events of the primary; an update passes when any
    /// predicate says so. Empty: every update passes.
    pub predicates: Vec<Predicate>,
    pub priorities: LanePriorities,
    /// A finalizer the sidecar keeps on the primary's live objects and
    /// removes when a worker finishes a deleting object's lease with success.
    pub finalizer: Option<String>,
    /// Replicas share this queue's keys by the shard slot of each primary
    /// object's uid or namespace; `None`: not sharded.
    pub shard_by: Option<ShardBy>,
}

impl QueueBinding {
    /// Whether the queue reads `informer`: as its primary or a trigger.
    pub fn uses(&self, informer: &str) -> bool {
        self.primary.as_deref() == Some(informer) || self.triggers.iter().any(|t| t.informer == informer)
    }
}

/// What a sharded queue's keys are sharded by: the field KEP-5866's
/// `shardRange` hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardBy {
    /// `metadata.uid` of the primary object: even shares, but a key's slot is
    /// known only while its object (or its tombstone) is in the cache.
    Uid,
    /// `metadata.namespace` of the key: known from the key alone, shares as
    /// even as the namespaces are many and alike.
    Namespace,
}

impl QueueBinding {
    /// Every informer the queue depends on (primary first), each once.
    pub fn informers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for name in self.primary.iter().map(String::as_str).chain(self.triggers.iter().map(|t| t.informer.as_str())) {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    pub fn is_plain(&self) -> bool {
        self.primary.is_none() && self.triggers.is_empty()
    }
}

/// One trigger: changes of `informer`'s objects enqueue primary keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TriggerSpec {
    pub informer: String,
    pub map: TriggerMap,
    /// Filters for the trigger object's updates; empty: every update passes.
    pub predicates: Vec<Predicate>,
}

/// How a trigger object names primary keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriggerMap {
    /// Its owner references whose kind and group are the primary's (seed
    /// 001's "watching children"); only the controller reference when
    /// `controller_only`.
    Owner { controller_only: bool },
    /// The value of this label is the primary's name (in the trigger
    /// object's namespace when the primary is namespaced).
    Label(String),
    /// Look up the trigger object's `value` in this index of the primary
    /// informer; every primary object found is enqueued (only those in the
    /// trigger object's namespace when both are namespaced).
    Index { index: String, value: IndexValue },
}

/// Which property of a trigger object is looked up in the primary's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexValue {
    Name,
    /// `namespace/name`, or `name` when cluster-scoped.
    Key,
    Uid,
}

/// Update filters (controller-runtime's predicates of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Predicate {
    /// `metadata.generation` changed: a spec change, not a status one.
    GenerationChanged,
    LabelsChanged,
    AnnotationsChanged,
}

/// The priorities keys are added at, per kind of event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LanePriorities {
    pub initial_list: i32,
    pub resync: i32,
    /// Watch events of the primary (added, updated, deleted).
    pub events: i32,
    pub triggers: i32,
}

impl Default for LanePriorities {
    fn default() -> Self {
        LanePriorities {
            initial_list: PRIORITY_SLOW,
            resync: PRIORITY_SLOW,
            events: PRIORITY_FAST,
            triggers: PRIORITY_FAST,
        }
    }
}
