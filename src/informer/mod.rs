//! Shared informers: one list+watch cache per configured resource, turned into keys on the queues and read by the Cache service.
//!
//! - [`spec`]: what an informer watches and how a queue listens (from the config).
//! - [`object`]: a cached object, raw JSON bytes plus parsed metadata.
//! - [`shaping`]: an object's JSON text as sent turned into a cached object, only its metadata parsed.
//! - [`protobuf`]: built-in kinds read as protobuf and written as the JSON client-go would write.
//! - [`store`], [`tombstone`]: objects by key with indexes; deleted objects' last state.
//! - [`selector`], [`field_selector`]: label selectors (config and reads) and field selectors (config), parsed.
//! - [`change`]: what an informer saw happen to one object, and counts by kind.
//! - [`keying`]: event-to-key mapping, reasons, priorities, predicates.
//! - [`shared`]: one informer's cache as its readers see it, and its sync state.
//! - [`writer`]: the one writer of that cache, which hands each change to the subscribed queues.
//! - [`list_watch`], [`api_answer`], [`streaming_probe`], [`backoff`]: the one list and watch that drives the
//!   writer (following the owned slots, when sharded), its answers read as (gzipped) bytes, whether the
//!   server streams lists, and its bounded retry.
//! - [`resolve`]: each informer's kind found and its list tried at start, waiting while the API server cannot answer.
//! - [`registry`]: every informer's reader by name, and the writers started together; readiness.

mod api_answer;
mod backoff;
mod change;
mod error;
mod field_selector;
mod keying;
mod labels;
mod list_watch;
mod object;
mod protobuf;
mod registry;
mod resolve;
mod resource_version;
mod selector;
mod shaping;
mod shard_watch;
mod shared;
mod spec;
mod store;
mod streaming_probe;
mod tombstone;
mod uid;
mod writer;

pub use change::{Change, ChangeKind};
pub use error::{CacheReadError, InformerStartError};
pub use field_selector::FieldSelector;
pub use object::{CachedObject, Meta, OwnerRef};
pub use registry::{InformerRegistry, InformerTask, InformerWatches};
pub use resource_version::ResourceVersion;
pub use selector::{LabelSelector, check_label_key};
pub use shard_watch::ShardWatch;
pub use shared::SharedInformer;
pub use spec::{
    IndexBy, IndexSpec, IndexValue, InformerSpec, LanePriorities, Predicate, QueueBinding, ShardBy, TriggerMap,
    TriggerSpec,
};
pub use store::{ListQuery, Page};
pub use tombstone::{MAX_TOMBSTONES, TOMBSTONE_TTL};
pub use uid::{Uid, UidText};
pub use writer::InformerWriter;
