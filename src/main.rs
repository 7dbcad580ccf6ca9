//! The `workqueue-sidecar` binary: parses the command line, sets up logging, and runs the sidecar (`app`) until SIGTERM or SIGINT.
//!
//! Exit status: 0 after a clean stop; 2 when it cannot start with its config,
//! flags or files (before any port is bound); 1 when it fails while serving.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use tokio::signal::unix::{SignalKind, signal};
use tracing::{error, info};
use workqueue_sidecar::app::{Options, Sidecar};
use workqueue_sidecar::cli::{Cli, LogFormat};
use workqueue_sidecar::config::Config;
use workqueue_sidecar::error_chain::one_line;
use workqueue_sidecar::replicas::leader::ElectionSettings;
use workqueue_sidecar::replicas::shard_membership::MembershipSettings;
use workqueue_sidecar::server::{Exposure, ServerLimits};
use workqueue_sidecar::shard::ShardSettings;
use workqueue_sidecar::tls::TlsFiles;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli);
    let runtime = match build_runtime(cli.worker_threads) {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let checking = cli.check_config;
    let (err, status) = match runtime.block_on(run(cli)) {
        Ok(()) => return ExitCode::SUCCESS,
        Err(Failure::Start(err)) => (err, ExitCode::from(2)),
        Err(Failure::Run(err)) => (err, ExitCode::FAILURE),
    };
    // Said once: on the terminal for a config check, else as a log line
    // (one JSON entry under `--log-format json`).
    let text = one_line(&*err);
    if checking {
        eprintln!("error: {text}");
    } else {
        error!("{text}");
    }
    status
}

/// Why the sidecar exits non-zero: it could not start with this config,
/// these flags and files (status 2, before any port is bound), or it failed
/// while serving (status 1).
enum Failure {
    Start(anyhow::Error),
    Run(anyhow::Error),
}

/// The async runtime: a single-threaded one for one thread (no work-stealing
/// and no cross-thread wake-ups to pay for), else a work-stealing pool.
fn build_runtime(threads: u16) -> std::io::Result<tokio::runtime::Runtime> {
    match threads {
        1 => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        n => tokio::runtime::Builder::new_multi_thread().worker_threads(usize::from(n)).enable_all().build(),
    }
}

fn init_logging(cli: &Cli) {
    // kube-client logs every failed request at ERROR without saying which
    // informer sent it or what comes next; the sidecar's own line says both.
    // Heard again when the filter names kube.
    let mut directives = cli.log.clone();
    if !directives.contains("kube") {
        directives.push_str(",kube_client::client::builder=off");
    }
    let filter = tracing_subscriber::EnvFilter::try_new(&directives).expect("the flag's parser checked the filter");
    let colors = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colors);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

async fn run(cli: Cli) -> Result<(), Failure> {
    let shutdown = shutdown_signal().map_err(Failure::Run)?;
    let Some(options) = options(&cli).map_err(Failure::Start)? else { return Ok(()) };
    // A sidecar waiting for its API server stops at once when asked to.
    let mut shutdown = std::pin::pin!(shutdown);
    let sidecar = tokio::select! {
        bound = Sidecar::bind(options) => bound.map_err(Failure::Start)?,
        reason = &mut shutdown => {
            info!(signal = reason, "stopped before serving");
            return Ok(());
        }
    };
    sidecar.run(shutdown).await.map_err(Failure::Run)
}

/// The sidecar's options from the flags and the config file; `None` after
/// `--check-config`, which has printed its summary.
fn options(cli: &Cli) -> anyhow::Result<Option<Options>> {
    let config = match &cli.config {
        Some(path) => Config::load(path)?,
        None => Config::standalone(),
    };
    if cli.check_config {
        let source = cli.config.as_deref().map_or("no config file (standalone)".into(), |p| p.display().to_string());
        println!("{source}: valid\n");
        print!("{}", config.summary());
        return Ok(None);
    }
    Ok(Some(Options {
        config,
        tcp: cli.tcp.0,
        unix: cli.unix.clone(),
        admin: cli.admin.0,
        exposure: Exposure { allow_remote: cli.allow_remote, insecure: cli.insecure },
        tls: match (&cli.tls_cert, &cli.tls_key) {
            (Some(cert), Some(key)) => {
                Some(TlsFiles { cert: cert.clone(), key: key.clone(), client_ca: cli.tls_client_ca.clone() })
            }
            _ => None,
        },
        kubeconfig: cli.kubeconfig.clone(),
        election: election_settings(cli)?,
        sharding: sharding_settings(cli)?,
        grace_period: cli.grace_period,
        allow_shutdown_rpc: cli.allow_shutdown_rpc,
        limits: ServerLimits {
            max_connections: cli.max_connections as usize,
            max_streams_per_connection: cli.max_streams_per_connection,
            max_calls: cli.max_calls as usize,
        },
    }))
}

/// The election's settings from the flags, when `--leader-election` is on.
fn election_settings(cli: &Cli) -> anyhow::Result<Option<ElectionSettings>> {
    if !cli.leader_election {
        return Ok(None);
    }
    let identity = identity(cli)?;
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

/// The shard membership's settings from the flags, when `--shard-group` is given.
fn sharding_settings(cli: &Cli) -> anyhow::Result<Option<MembershipSettings>> {
    let Some(group) = &cli.shard_group else { return Ok(None) };
    Ok(Some(MembershipSettings {
        namespace: cli.leader_election_namespace.clone(),
        group: group.clone(),
        identity: identity(cli)?,
        timings: ShardSettings {
            lease_duration: cli.leader_election_lease_duration,
            renew_deadline: cli.leader_election_renew_deadline,
            retry_period: cli.leader_election_retry_period,
            ..ShardSettings::default()
        },
    }))
}

/// This replica's name among its peers: the flag (POD_NAME), else the host name.
fn identity(cli: &Cli) -> anyhow::Result<String> {
    match &cli.leader_election_identity {
        Some(identity) => Ok(identity.clone()),
        None => std::env::var("HOSTNAME")
            .or_else(|_| std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_string()))
            .context("no --leader-election-identity (POD_NAME) and no host name to use instead"),
    }
}

/// Completes on SIGTERM or SIGINT, naming it; the handlers are installed now.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = &'static str>> {
    let mut terminate = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        }
    })
}
