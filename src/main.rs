//! The `workqueue-sidecar` binary: config, then queues, then listeners, then serve until a signal.
//!
//! Startup is ordered so that every configuration error exits non-zero
//! before any port is bound.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tracing::{error, info, warn};
use workqueue_sidecar::admin::{self, Readiness};
use workqueue_sidecar::cli::{Cli, LogFormat};
use workqueue_sidecar::config::Config;
use workqueue_sidecar::informer::{InformerRegistry, WatchProgress};
use workqueue_sidecar::leader::{ElectionSettings, Elector, Leadership, NOT_LEADER};
use workqueue_sidecar::metrics::{self, Metrics};
use workqueue_sidecar::queues::QueueRegistry;
use workqueue_sidecar::tls::{ServingTls, TlsFiles};
use workqueue_sidecar::{grpc, server};

/// How long open connections get to close after the queues drained.
const CLOSE_CONNECTIONS_WITHIN: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error!("{err:#}");
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn init_logging(cli: &Cli) {
    let filter =
        tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let colors = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colors);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::standalone(),
    };
    if cli.check_config {
        for queue in &config.queues {
            println!("queue {}: {:?}", queue.name, queue.settings);
        }
        for informer in &config.informers {
            println!("informer {}: {:?}", informer.name, informer);
        }
        return Ok(());
    }
    let election = election_settings(&cli)?;
    let (informer_specs, bindings): (Vec<_>, Vec<_>) =
        (config.informers.clone(), config.queues.iter().map(|q| (q.name.clone(), q.binding.clone())).collect());
    let metrics = Metrics::new();
    let queues = Arc::new(
        QueueRegistry::observed(config.queues.into_iter().map(|q| (q.name, q.settings)), |name| {
            metrics.queues.observer(name)
        })
        .context("creating the queues")?,
    );
    // Informers only when configured: the standalone mode needs no Kubernetes.
    // Discovery errors exit here, before any port is bound.
    let informers = Arc::new(if informer_specs.is_empty() {
        InformerRegistry::empty()
    } else {
        let progress = WatchProgress::default();
        let client = kube_client(cli.kubeconfig.as_deref(), Some(&progress)).await?;
        let bindings = bindings.iter().map(|(name, binding)| (name.as_str(), binding));
        let informers = InformerRegistry::build(client, &informer_specs, &queues, bindings)
            .await
            .context("resolving the informers")?;
        informers.report_watch_progress_to(&progress);
        informers
    });
    metrics.register_informers(informers.all());
    // Each informer's sync is a readiness condition from here on, before the
    // admin port serves: /readyz answers 503 until every cache has synced
    // (then stays 200 across relists, as client-go's HasSynced; a stale cache
    // shows in workqueue_sidecar_informer_* metrics instead).
    let readiness = Readiness::new();
    for informer in informers.all() {
        let condition = format!("informer {} synced", informer.name());
        tokio::spawn(readiness.follow(condition, informer.synced_watch()));
    }
    // TLS files are read before anything binds: a bad one exits with status 2.
    // Later changes to them are loaded for new connections.
    let tls = match (&cli.tls_cert, &cli.tls_key) {
        (Some(cert), Some(key)) => {
            let files = TlsFiles { cert: cert.clone(), key: key.clone(), client_ca: cli.tls_client_ca.clone() };
            Some(ServingTls::watch(files, metrics.tls_reloads.clone())?)
        }
        _ => None,
    };
    let exposure = server::Exposure { allow_remote: cli.allow_remote, insecure: cli.insecure };
    let listeners = server::Listeners::bind_with(cli.tcp.0, cli.unix.as_deref(), exposure, tls).await?;
    let admin_listener = match cli.admin.0 {
        Some(address) => Some(server::bind_admin(address, cli.allow_remote).await?),
        None => None,
    };
    let api = grpc::api(queues.clone(), informers.clone()).await.context("building the gRPC services")?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let serving = tokio::spawn(server::serve(metrics::instrument(api.routes, &metrics), listeners, stop_rx.clone()));
    if let Some(listener) = admin_listener {
        let router = admin::router(metrics.clone(), queues.clone(), readiness.clone());
        tokio::spawn(admin::serve(listener, router, stop_rx.clone()));
    }
    // Closes the informer-fed queues' gates until their caches sync, then watches.
    informers.start().await;
    let elector = match election {
        Some(settings) => Some(start_election(&cli, settings, queues.clone(), metrics.clone(), stop_rx.clone()).await?),
        None => {
            metrics.leader.set(1);
            None
        }
    };
    info!(queues = ?queues.names(), informers = ?informers.names(), "workqueue-sidecar started");

    let signal_name = wait_for_signal().await?;
    info!(signal = signal_name, grace_period = ?cli.grace_period, "shutting down: no new leases, held leases may finish");
    readiness.shutting_down();
    grpc::set_not_serving(&api.health).await;
    for (queue, report) in queues.drain_all(cli.grace_period).await {
        info!(%queue, finished = report.finished, returned = report.returned, "queue drained");
    }
    let _ = stop_tx.send(true);
    // A leader gives its Lease up now, so another replica takes over at once.
    if let Some(elector) = elector {
        let _ = tokio::time::timeout(CLOSE_CONNECTIONS_WITHIN, elector).await;
    }
    // Streams end by themselves once their leases are gone; a client that
    // keeps a connection open must not keep the process alive.
    match tokio::time::timeout(CLOSE_CONNECTIONS_WITHIN, serving).await {
        Ok(served) => served.context("server task")?.context("serving gRPC")?,
        Err(_) => warn!(after = ?CLOSE_CONNECTIONS_WITHIN, "clients kept connections open; closing them"),
    }
    info!("stopped");
    Ok(())
}

/// A Kubernetes client: from `--kubeconfig`, else inferred ($KUBECONFIG,
/// ~/.kube/config, in-cluster service account); the informers' client also
/// tells `progress` when a watch request is answered.
async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    progress: Option<&WatchProgress>,
) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => kube::Config::infer().await.context("finding a Kubernetes config (give --kubeconfig)")?,
    };
    let builder = kube::client::ClientBuilder::try_from(config).context("building the Kubernetes client")?;
    Ok(match progress {
        Some(progress) => builder.with_layer(&progress.layer()).build(),
        None => builder.build(),
    })
}

/// The election's settings from the flags, when `--leader-election` is on.
fn election_settings(cli: &Cli) -> anyhow::Result<Option<ElectionSettings>> {
    if !cli.leader_election {
        return Ok(None);
    }
    let identity = match &cli.leader_election_identity {
        Some(identity) => identity.clone(),
        None => std::env::var("HOSTNAME")
            .or_else(|_| std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()))
            .context("no --leader-election-identity (POD_NAME) and no host name to use instead")?,
    };
    let settings = ElectionSettings {
        namespace: cli.leader_election_namespace.clone(),
        lease_name: cli.leader_election_lease.clone(),
        identity,
        lease_duration: cli.leader_election_lease_duration,
        renew_deadline: cli.leader_election_renew_deadline,
        retry_period: cli.leader_election_retry_period,
    };
    settings.validate()?;
    Ok(Some(settings))
}

/// Holds every queue as a follower, then runs the elector: a leader's queues
/// grant; a replica that steps down revokes its leases at once.
async fn start_election(
    cli: &Cli,
    settings: ElectionSettings,
    queues: Arc<QueueRegistry>,
    metrics: Arc<Metrics>,
    stop: watch::Receiver<bool>,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    for name in queues.names() {
        queues.get(name).expect("a listed queue exists").set_hold(NOT_LEADER, true);
    }
    metrics.leader.set(0);
    let client = kube_client(cli.kubeconfig.as_deref(), None).await?;
    let elector = Elector::new(client, settings);
    let on_change = move |leadership: Leadership| {
        let term_ends = match leadership {
            Leadership::Leader { term_ends } => Some(term_ends),
            Leadership::Follower => None,
        };
        metrics.leader.set(i64::from(term_ends.is_some()));
        for name in queues.names() {
            let queue = queues.get(name).expect("a listed queue exists");
            queue.set_grant_until(term_ends);
            queue.set_hold(NOT_LEADER, term_ends.is_none());
            if term_ends.is_none() {
                let revoked = queue.revoke_all();
                if revoked > 0 {
                    warn!(%name, revoked, "not the leader: held leases revoked, their keys stay queued here");
                }
            }
        }
    };
    Ok(tokio::spawn(elector.run(on_change, stop)))
}

async fn wait_for_signal() -> anyhow::Result<&'static str> {
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(tokio::select! {
        _ = terminate.recv() => "SIGTERM",
        _ = interrupt.recv() => "SIGINT",
    })
}
