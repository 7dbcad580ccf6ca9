//! `InformerRegistry`: every informer of the sidecar by name, exactly one watch each, the queues they feed, and readiness.
//!
//! Built in two steps so that nothing is watched before every queue is
//! subscribed: [`InformerRegistry::build`] resolves each informer by
//! discovery and subscribes the queues to its writer, giving back the
//! registry (the readers, to share) and the [`InformerWatches`] (the
//! writers, to start once): [`InformerWatches::start`] closes the gates of
//! the informer-fed queues, moves each writer into its watch task, and opens
//! each gate once all of that queue's informers have synced.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use kube::Client;
use tracing::info;

use super::error::{CacheReadError, InformerStartError};
use super::keying::{Role, Subscriber};
use super::shard_watch::ShardWatch;
use super::shared::SharedInformer;
use super::spec::{InformerSpec, QueueBinding};
use super::writer::InformerWriter;
use super::{list_watch, resolve, streaming_probe};
use crate::queue_registry::{Queue, QueueRegistry};

/// The hold a queue carries until every informer it uses has synced.
pub const CACHES_SYNCING: &str = "caches syncing";

/// Every informer's read side by name.
pub struct InformerRegistry {
    informers: HashMap<String, Arc<SharedInformer>>,
    /// Names in config order.
    names: Vec<String>,
    /// The primary informer of each queue that has one, for Lease.object.
    primaries: HashMap<String, Arc<SharedInformer>>,
    /// Watches opened so far: one per informer, however many queues use it.
    watches_opened: Arc<AtomicU64>,
}

/// Every informer's writer, its queues subscribed, waiting to be started.
pub struct InformerWatches {
    /// In config order.
    writers: Vec<InformerWriter>,
    /// Each informer-fed queue and the informers it waits for.
    gated: Vec<(Queue, Vec<Arc<SharedInformer>>)>,
    client: Option<Client>,
    watches_opened: Arc<AtomicU64>,
    /// What the sharded informers follow, when some are.
    shard: Option<ShardWatch>,
}

/// One of the informers' futures, for the caller to spawn and own.
pub struct InformerTask {
    /// What it does, for logs: "watch users", "gate queue users".
    pub name: String,
    /// True for a watch, which ends only when aborted; false
    /// for a gate, which ends once its informers have synced.
    pub runs_until_aborted: bool,
    pub future: BoxFuture<'static, ()>,
}

impl InformerRegistry {
    /// No informers: the standalone mode, which needs no Kubernetes.
    pub fn empty() -> Self {
        InformerRegistry {
            informers: HashMap::new(),
            names: Vec::new(),
            primaries: HashMap::new(),
            watches_opened: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Resolves each informer by discovery and subscribes the queues of
    /// `bindings` (queue name -> binding; every name is defined, as the
    /// config checked). Watches nothing yet: that is the returned
    /// [`InformerWatches`]' `start`.
    pub async fn build<'a>(
        client: Client,
        specs: &[InformerSpec],
        queues: &QueueRegistry,
        bindings: impl IntoIterator<Item = (&'a str, &'a QueueBinding)>,
    ) -> Result<(Self, InformerWatches), InformerStartError> {
        let mut registry = InformerRegistry::empty();
        let mut watches = InformerWatches::none();
        watches.watches_opened = registry.watches_opened.clone();
        let mut writers = HashMap::new();
        for spec in specs {
            let (resource, namespaced) = resolve::discover(&client, spec).await?;
            if !namespaced && spec.namespace.is_some() {
                return Err(InformerStartError::NamespaceOnClusterScoped {
                    informer: spec.name.clone(),
                    kind: spec.kind.clone(),
                });
            }
            resolve::try_list(&client, spec, &resource, namespaced).await?;
            let writer = InformerWriter::new(spec.clone(), resource, namespaced);
            registry.names.push(spec.name.clone());
            registry.informers.insert(spec.name.clone(), writer.informer().clone());
            writers.insert(spec.name.clone(), writer);
        }
        for (queue_name, binding) in bindings {
            if binding.is_plain() {
                continue;
            }
            let queue =
                queues.get(queue_name).ok_or_else(|| InformerStartError::UnknownQueue(queue_name.to_owned()))?;
            let informers = registry.subscribe(&mut writers, queue, binding)?;
            // Held from here, before any listener serves: a key added before
            // the caches synced must not be handed out against an empty cache.
            queue.term().set_hold(CACHES_SYNCING, true);
            watches.gated.push((queue.clone(), informers));
        }
        watches.writers = registry.names.iter().filter_map(|name| writers.remove(name)).collect();
        watches.client = Some(client);
        Ok((registry, watches))
    }

    /// Subscribes `queue` to the writers of its binding's informers; returns
    /// the informers it waits for.
    fn subscribe(
        &mut self,
        writers: &mut HashMap<String, InformerWriter>,
        queue: &Queue,
        binding: &QueueBinding,
    ) -> Result<Vec<Arc<SharedInformer>>, InformerStartError> {
        let primary = match binding.primary.as_deref() {
            Some(name) => {
                let primary = writer(writers, name)?;
                primary.subscribe(Subscriber {
                    queue: queue.clone(),
                    role: Role::Primary,
                    predicates: binding.predicates.clone(),
                    priorities: binding.priorities,
                });
                self.primaries.insert(queue.name().to_string(), primary.informer().clone());
                Some(primary.informer().clone())
            }
            None => None,
        };
        for trigger in &binding.triggers {
            let (Some(primary), informer) = (&primary, writer(writers, &trigger.informer)?) else {
                continue; // the config refuses triggers without a primary
            };
            informer.subscribe(Subscriber {
                queue: queue.clone(),
                role: Role::Trigger { map: trigger.map.clone(), primary: primary.clone() },
                predicates: trigger.predicates.clone(),
                priorities: binding.priorities,
            });
        }
        let waits_for =
            |name: &str| self.get(name).cloned().ok_or_else(|| InformerStartError::UnknownInformer(name.into()));
        binding.informers().into_iter().map(waits_for).collect()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<SharedInformer>> {
        self.informers.get(name)
    }

    /// The informer `name`, or the error a read of it gets.
    pub fn informer(&self, name: &str) -> Result<&Arc<SharedInformer>, CacheReadError> {
        self.get(name).ok_or_else(|| CacheReadError::UnknownInformer(name.to_owned()))
    }

    /// The primary informer of `queue`, when it has one.
    pub fn primary_of(&self, queue: &str) -> Option<&Arc<SharedInformer>> {
        self.primaries.get(queue)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn is_empty(&self) -> bool {
        self.informers.is_empty()
    }

    /// Every informer, in config order.
    pub fn all(&self) -> Vec<Arc<SharedInformer>> {
        self.names.iter().map(|name| self.informers[name].clone()).collect()
    }

    /// Readiness: every informer has finished its first list (true with none).
    pub fn all_synced(&self) -> bool {
        self.informers.values().all(|i| i.is_synced())
    }

    /// How many watches this registry has opened: one per informer.
    pub fn watches_opened(&self) -> u64 {
        self.watches_opened.load(Ordering::Relaxed)
    }
}

fn writer<'a>(
    writers: &'a mut HashMap<String, InformerWriter>,
    name: &str,
) -> Result<&'a mut InformerWriter, InformerStartError> {
    writers.get_mut(name).ok_or_else(|| InformerStartError::UnknownInformer(name.into()))
}

impl InformerWatches {
    /// Nothing to watch: the standalone mode.
    pub fn none() -> Self {
        InformerWatches {
            writers: Vec::new(),
            gated: Vec::new(),
            client: None,
            watches_opened: Arc::default(),
            shard: None,
        }
    }

    /// The informers with `shard_by` list and watch only the slots `shard`
    /// says this replica owns (without it, they list every object).
    pub fn shard(&mut self, shard: ShardWatch) {
        self.shard = Some(shard);
    }

    /// Whether any informer lists only this replica's shard slots.
    pub fn has_sharded(&self) -> bool {
        self.writers.iter().any(|writer| writer.informer().spec().shard_by.is_some())
    }

    /// Returns what runs the informers, for the caller to spawn and own: one
    /// watch per informer (its resync timer inside), and for each gated queue
    /// (held since `build`) a future that opens its gate once its informers
    /// have synced.
    pub async fn start(self) -> Vec<InformerTask> {
        let Some(client) = &self.client else { return Vec::new() };
        let mut tasks = Vec::new();
        for writer in self.writers {
            let name = writer.informer().name().clone();
            let streaming = streaming_probe::supports_streaming_lists(writer.informer(), client.clone()).await;
            self.watches_opened.fetch_add(1, Ordering::Relaxed);
            tasks.push(InformerTask {
                name: format!("watch {name}"),
                runs_until_aborted: true,
                future: {
                    let shard = self.shard.clone().filter(|_| writer.informer().spec().shard_by.is_some());
                    list_watch::run(writer, client.clone(), streaming, shard.map(|shard| shard.owned)).boxed()
                },
            });
        }
        for (queue, informers) in self.gated {
            tasks.push(InformerTask {
                name: format!("gate queue {}", queue.name()),
                runs_until_aborted: false,
                future: async move {
                    for informer in &informers {
                        let mut synced = informer.synced_watch();
                        let _ = synced.wait_for(|s| *s).await;
                    }
                    queue.term().set_hold(CACHES_SYNCING, false);
                    info!(queue = %queue.name(), "informers synced; queue hands out keys");
                }
                .boxed(),
            });
        }
        tasks
    }
}
