//! The options of a whole sidecar built in process (`app::Sidecar::bind`): gRPC on a free loopback port, nothing else.
#![allow(dead_code)] // each test binary uses its own subset

use std::time::Duration;

use workqueue_sidecar::app::Options;
use workqueue_sidecar::config::Config;
use workqueue_sidecar::server::{Exposure, ServerLimits};

/// `config` served on 127.0.0.1:0 over plaintext TCP, without the admin
/// port, TLS, election or sharding; Kubernetes from `kubeconfig`.
pub fn loopback(config: Config, kubeconfig: Option<std::path::PathBuf>) -> Options {
    Options {
        config,
        tcp: Some("127.0.0.1:0".parse().unwrap()),
        unix: None,
        admin: None,
        exposure: Exposure::default(),
        tls: None,
        kubeconfig,
        election: None,
        sharding: None,
        grace_period: Duration::from_secs(5),
        allow_shutdown_rpc: false,
        limits: ServerLimits::default(),
    }
}
