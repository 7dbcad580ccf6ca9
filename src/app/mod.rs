//! The sidecar as one unit: built from its options (every configuration error before a port is bound), then run until a shutdown signal, owning every task it starts and stopping them in order.

mod kube_client;
mod tasks;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

pub use kube_client::kube_client;
pub use tasks::Tasks;

use crate::admin::{self, Readiness};
use crate::config::Config;
use crate::grpc::{self, ShutDownRpc};
use crate::informer::{InformerRegistry, InformerWatches, ShardWatch};
use crate::informer::{InformerSpec, QueueBinding, ShardBy};
use crate::metrics::{self, Metrics};
use crate::objects::{ObjectWriter, WritePolicy};
use crate::queue_registry::QueueRegistry;
use crate::replicas::leader::{ElectionSettings, Elector, Leadership};
use crate::replicas::shard_membership::{Membership, MembershipSettings};
use crate::replicas::sharded_queues::{follow_shards, shard_of};
use crate::server::{self, Exposure, Listeners, ServerLimits};
use crate::shard::SlotSet;
use crate::tls::{ServingTls, TlsFiles};
use crate::writes::{Freshness, Writes};

/// How long open connections, and a leader's release of its Lease, get after the queues drained.
const CLOSE_CONNECTIONS_WITHIN: Duration = Duration::from_secs(2);

/// What the sidecar is asked to be: the command line, parsed.
pub struct Options {
    pub config: Config,
    /// The gRPC TCP address; `None` serves only the unix socket.
    pub tcp: Option<SocketAddr>,
    pub unix: Option<PathBuf>,
    /// The admin HTTP address (metrics, probes); `None` turns it off.
    pub admin: Option<SocketAddr>,
    pub exposure: Exposure,
    pub tls: Option<TlsFiles>,
    pub kubeconfig: Option<PathBuf>,
    /// Leader election among replicas, when on.
    pub election: Option<ElectionSettings>,
    /// Shard membership, for the queues with `shard_by`.
    pub sharding: Option<MembershipSettings>,
    /// How long held leases may run after a shutdown signal; also a
    /// client's `ShutDown` drain that names no timeout.
    pub grace_period: Duration,
    /// Whether clients may stop a queue with `ShutDown`.
    pub allow_shutdown_rpc: bool,
    /// What gRPC clients may make the server spend.
    pub limits: ServerLimits,
}

/// A sidecar whose queues, informers and listeners exist, ready to run.
pub struct Sidecar {
    queues: Arc<QueueRegistry>,
    informers: Arc<InformerRegistry>,
    watches: InformerWatches,
    /// Writes through the sidecar; `None` without Kubernetes.
    writer: Option<Arc<ObjectWriter>>,
    /// Each queue's declared finalizer: (queue, finalizer).
    finalizers: Vec<(String, String)>,
    /// What workers may write through the sidecar.
    write_policy: WritePolicy,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    listeners: Listeners,
    admin: Option<TcpListener>,
    election: Option<(ElectionSettings, kube::Client)>,
    /// This replica's shard membership, when some queue is sharded, and
    /// where the slots it owns go for the sharded informers.
    membership: Option<(Membership, watch::Sender<Option<SlotSet>>)>,
    grace_period: Duration,
    shut_down_rpc: ShutDownRpc,
}

impl Sidecar {
    /// Builds the queues and informers and binds every listener. Errors come
    /// before any port is bound: config, Kubernetes discovery, TLS files.
    pub async fn bind(options: Options) -> anyhow::Result<Sidecar> {
        let Options {
            config,
            tcp,
            unix,
            admin,
            exposure,
            tls,
            kubeconfig,
            election,
            sharding,
            grace_period,
            allow_shutdown_rpc,
            limits,
        } = options;
        let metrics = Metrics::new();
        warn_of_credentials_served(&config.informers);
        let bindings: Vec<_> = config.queues.iter().map(|q| (q.name.clone(), q.binding.clone())).collect();
        let finalizers =
            bindings.iter().filter_map(|(queue, binding)| Some((queue.clone(), binding.finalizer.clone()?))).collect();
        // The election's and the shard members' Leases live in one namespace:
        // no worker may write a Lease there.
        let own_leases =
            election.as_ref().map(|e| e.namespace.clone()).or(sharding.as_ref().map(|s| s.namespace.clone()));
        let write_policy = WritePolicy::new(config.writes, own_leases);
        let queues = Arc::new(
            QueueRegistry::observed(config.queues.into_iter().map(|q| (q.name, q.settings)), |name| {
                metrics.queues.observer(name)
            })
            .context("creating the queues")?,
        );
        // One Kubernetes client for the informers, the writes, the election
        // and the shard membership: its clones share one config and one
        // connection pool. None at all in the standalone mode.
        let needs_kube = !config.informers.is_empty() || election.is_some() || sharding.is_some();
        let kube = if needs_kube { Some(kube_client(kubeconfig.as_deref()).await?) } else { None };
        let (informers, mut watches, writer) = match kube.clone().filter(|_| !config.informers.is_empty()) {
            None => (InformerRegistry::empty(), InformerWatches::none(), None),
            Some(client) => {
                let (informers, watches, writer) =
                    build_informers(client, &config.informers, &config.field_manager, &queues, &bindings).await?;
                (informers, watches, Some(writer))
            }
        };
        let informers = Arc::new(informers);
        metrics.register_informers(informers.all());
        let membership = shard_queues(&bindings, &queues, &informers, sharding, kube.as_ref())?;
        let membership = follow_membership(membership, &queues, &mut watches)?;
        let election = match election {
            Some(settings) => Some((settings, kube.clone().context("an election needs a Kubernetes client")?)),
            None => None,
        };
        // A replica that runs an election hands out nothing before it leads:
        // held from here, before any listener serves (informer-fed queues are
        // held until their caches sync, since `InformerRegistry::build`).
        if election.is_some() {
            queues.follow_election();
        }
        // Later changes to the TLS files are loaded for new connections.
        let tls = tls.map(|files| ServingTls::watch(files, metrics.tls_reloads.clone())).transpose()?;
        let listeners =
            Listeners::bind_with(tcp, unix.as_deref(), exposure, tls).await?.within(limits, metrics.server.clone());
        let admin = bind_admin(admin, exposure).await?;
        Ok(Sidecar {
            queues,
            informers,
            watches,
            writer,
            finalizers,
            write_policy,
            metrics,
            readiness: Readiness::new(),
            listeners,
            admin,
            election,
            membership,
            grace_period,
            shut_down_rpc: if allow_shutdown_rpc {
                ShutDownRpc::Allowed { drain_grace: grace_period }
            } else {
                ShutDownRpc::Refused
            },
        })
    }

    /// The queues, as built (for tests: what holds they carry before `run`).
    pub fn queues(&self) -> &Arc<QueueRegistry> {
        &self.queues
    }

    /// The gRPC TCP listener's address (its port, when 0 was asked).
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.listeners.tcp_address()
    }

    /// Serves until `shutdown` completes (it names the reason), then drains
    /// the queues within the grace period and stops every task. A task that
    /// fails or ends on its own stops the sidecar too, and is the error.
    pub async fn run(self, shutdown: impl Future<Output = &'static str>) -> anyhow::Result<()> {
        let Sidecar {
            queues,
            informers,
            watches,
            writer,
            finalizers,
            write_policy,
            metrics,
            readiness,
            listeners,
            admin,
            election,
            membership,
            grace_period,
            shut_down_rpc,
        } = self;
        let mut tasks = Tasks::default();
        // Each informer's sync is a readiness condition from here on, before
        // the admin port serves: /readyz answers 503 until every cache has
        // synced (then stays 200 across relists, as client-go's HasSynced).
        for informer in informers.all() {
            let condition = format!("informer {} synced", informer.name());
            tasks.step(format!("readiness: {condition}"), readiness.follow(condition, informer.synced_watch()));
        }
        // The stale-read guard follows every cache from the start.
        let writes = writer.map(|writer| {
            let freshness = Arc::new(Freshness::new(&informers, queues.clone()));
            tasks.background("stale-read guard: follows the caches", freshness.clone().follow_caches());
            Writes { writer, freshness, finalizers, policy: write_policy }
        });
        let api = grpc::api(queues.clone(), informers.clone(), writes, shut_down_rpc)
            .await
            .context("building the gRPC services")?;
        let (stop_tx, stop_rx) = watch::channel(false);
        let routes = metrics::instrument(api.routes, api.methods, &metrics);
        let stopped = stop_rx.clone();
        tasks.service("gRPC server", async move { Ok(server::serve(routes, listeners, stopped).await?) });
        if let Some(listener) = admin {
            let router = admin::router(metrics.clone(), queues.clone(), readiness.clone());
            let stopped = stop_rx.clone();
            tasks.service("admin HTTP server", async move { Ok(admin::serve(listener, router, stopped).await?) });
        }
        // Closes the informer-fed queues' gates until their caches sync, then watches.
        for task in watches.start().await {
            if task.runs_until_aborted {
                tasks.background(task.name, task.future);
            } else {
                tasks.step(task.name, task.future);
            }
        }
        let handed_back_wait_at_most = handed_back_wait_at_most(election.as_ref(), membership.as_ref());
        follow_election(&mut tasks, election, &queues, &metrics, stop_rx.clone());
        follow_membership_events(&mut tasks, membership, &queues, &metrics, stop_rx);
        info!(queues = ?queues.names(), informers = ?informers.names(), "workqueue-sidecar started");

        let failure = tokio::select! {
            reason = shutdown => {
                info!(signal = reason, grace_period = ?grace_period, "shutting down: no new leases, held leases may finish");
                None
            }
            failure = tasks.failure() => {
                error!("{failure:#}; shutting down");
                Some(failure)
            }
        };
        readiness.shutting_down();
        grpc::set_not_serving(&api.health).await;
        let stopped = stop(tasks, &queues, grace_period, stop_tx, handed_back_wait_at_most).await;
        info!("stopped");
        match failure {
            Some(failure) => Err(failure),
            None => stopped,
        }
    }
}

/// Drains the queues within `grace_period`, then stops every task. Servers
/// close, streams end once their leases are gone, and a leader or shard
/// member gives its Lease or slots up, so another replica takes over at
/// once; or, if the drain handed leases back, once they are past their
/// deadlines (given that long on top, at most `handed_back_wait_at_most`).
/// A client that keeps a connection open must not keep the process alive.
async fn stop(
    tasks: Tasks,
    queues: &QueueRegistry,
    grace_period: Duration,
    stop_tx: watch::Sender<bool>,
    handed_back_wait_at_most: Duration,
) -> anyhow::Result<()> {
    for (queue, report) in queues.drain_all(grace_period).await {
        info!(%queue, finished = report.finished, returned = report.returned, "queue drained");
    }
    let _ = stop_tx.send(true);
    let handed_back_wait = queues
        .handed_back_until()
        .map_or(Duration::ZERO, |until| until.saturating_duration_since(tokio::time::Instant::now()))
        .min(handed_back_wait_at_most);
    tasks.finish(CLOSE_CONNECTIONS_WITHIN + handed_back_wait).await
}

/// How long a stop waits, at most, for the leases its drain handed back:
/// only a leader or a shard member waits, and never longer than a term,
/// since every lease it grants ends with the term.
fn handed_back_wait_at_most(
    election: Option<&(ElectionSettings, kube::Client)>,
    membership: Option<&(Membership, watch::Sender<Option<SlotSet>>)>,
) -> Duration {
    [
        election.map(|(settings, _)| settings.renew_deadline),
        membership.map(|(membership, _)| membership.renew_deadline()),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(Duration::ZERO)
}

/// With a shard membership, runs it as a service and applies its events to
/// the sharded queues and informers.
fn follow_membership_events(
    tasks: &mut Tasks,
    membership: Option<(Membership, watch::Sender<Option<SlotSet>>)>,
    queues: &QueueRegistry,
    metrics: &Metrics,
    stopped: watch::Receiver<bool>,
) {
    let Some((membership, owned)) = membership else { return };
    let (events_tx, events) = mpsc::unbounded_channel();
    let (leases_ended, leases_ended_rx) = mpsc::unbounded_channel();
    let follow = follow_shards(queues.sharded(), owned, events, leases_ended, metrics.shards.clone());
    // One task: the queues must answer the membership's last revoke while
    // it leaves, after the stop.
    tasks.service("shard membership", async move {
        tokio::join!(membership.run(events_tx, leases_ended_rx, stopped), follow);
        Ok(())
    });
}

/// Warns of each informer whose objects hold credentials (Secrets) and
/// that serves them to clients.
fn warn_of_credentials_served(informers: &[InformerSpec]) {
    for informer in informers.iter().filter(|i| i.is_sensitive() && i.serves_cache_reads()) {
        warn!(
            informer = %informer.name,
            kind = %informer.kind,
            "this informer's objects hold credentials, and cache_reads: true serves them to every client of the sidecar"
        );
    }
}

/// The informers of `specs` (resolved through discovery, their watches not
/// started yet), and the writer of writes through the sidecar.
async fn build_informers(
    client: kube::Client,
    specs: &[InformerSpec],
    field_manager: &str,
    queues: &QueueRegistry,
    bindings: &[(String, QueueBinding)],
) -> anyhow::Result<(InformerRegistry, InformerWatches, Arc<ObjectWriter>)> {
    let bindings = bindings.iter().map(|(name, binding)| (name.as_str(), binding));
    let writer = ObjectWriter::new(client.clone(), field_manager.to_owned());
    let (informers, watches) =
        InformerRegistry::build(client, specs, queues, bindings).await.context("resolving the informers")?;
    Ok((informers, watches, Arc::new(writer)))
}

/// With a shard membership, the queues follow its view and the sharded
/// informers the slots it owns (sent on the returned sender); informers
/// sharded without any sharded queue are refused.
fn follow_membership(
    membership: Option<Membership>,
    queues: &QueueRegistry,
    watches: &mut InformerWatches,
) -> anyhow::Result<Option<(Membership, watch::Sender<Option<SlotSet>>)>> {
    match membership {
        Some(membership) => {
            queues.follow_shard_view(membership.view());
            let (owned, owned_rx) = watch::channel(None);
            watches.shard(ShardWatch { owned: owned_rx });
            Ok(Some((membership, owned)))
        }
        None if watches.has_sharded() => {
            anyhow::bail!("informers set shard_by, but no queue does: shard the queues they feed")
        }
        None => Ok(None),
    }
}

/// The admin port, when one is asked for.
async fn bind_admin(admin: Option<SocketAddr>, exposure: Exposure) -> anyhow::Result<Option<TcpListener>> {
    match admin {
        Some(address) => {
            Ok(Some(server::bind_admin(address, exposure.allow_remote).await.context("the admin port (--admin)")?))
        }
        None => Ok(None),
    }
}

/// Shards the queues with `shard_by` by their primary's objects, and
/// prepares this replica's membership; refuses sharded queues without
/// `--shard-group` and a group without sharded queues.
fn shard_queues(
    bindings: &[(String, QueueBinding)],
    queues: &QueueRegistry,
    informers: &InformerRegistry,
    sharding: Option<MembershipSettings>,
    kube: Option<&kube::Client>,
) -> anyhow::Result<Option<Membership>> {
    let sharded: Vec<(&str, ShardBy, &str)> = bindings
        .iter()
        .filter_map(|(name, binding)| Some((name.as_str(), binding.shard_by?, binding.primary.as_deref()?)))
        .collect();
    let settings = match (sharding, sharded.is_empty()) {
        (None, true) => return Ok(None),
        (Some(settings), false) => settings,
        (None, false) => {
            let names: Vec<&str> = sharded.iter().map(|(name, ..)| *name).collect();
            anyhow::bail!("queues {names:?} set shard_by: give --shard-group (WQS_SHARD_GROUP) to share their keys")
        }
        (Some(settings), true) => {
            anyhow::bail!("--shard-group {:?} is given, but no queue sets shard_by", settings.group)
        }
    };
    for (name, by, primary) in sharded {
        let queue = queues.get(name).expect("every configured queue exists");
        let primary = informers.get(primary).expect("a queue's primary informer exists").clone();
        let fresh = queue.shards().keys_by(shard_of(by, primary));
        debug_assert!(fresh, "each queue is sharded once");
    }
    let client = kube.context("a shard group needs a Kubernetes client")?.clone();
    let group = settings.group.clone();
    Ok(Some(Membership::new(client, settings).with_context(|| format!("shard group {group:?}"))?))
}

/// With an election, queues hand out keys only while this replica leads
/// (applied by the queue registry), the leader gauge follows, and the
/// elector is a service; without one, this replica always leads.
fn follow_election(
    tasks: &mut Tasks,
    election: Option<(ElectionSettings, kube::Client)>,
    queues: &Arc<QueueRegistry>,
    metrics: &Arc<Metrics>,
    stopped: watch::Receiver<bool>,
) {
    let Some((settings, client)) = election else {
        metrics.leader.set(1);
        return;
    };
    metrics.leader.set(0);
    let (changed, metrics) = (queues.clone(), metrics.clone());
    let on_change = move |leadership| {
        metrics.leader.set(i64::from(matches!(leadership, Leadership::Leader { .. })));
        changed.apply(leadership);
    };
    let queues = queues.clone();
    let handed_back_until = move || queues.handed_back_until();
    tasks.service("leader election", async move {
        Elector::new(client, settings).run(on_change, handed_back_until, stopped).await;
        Ok(())
    });
}
