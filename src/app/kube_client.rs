//! The Kubernetes client: from a kubeconfig file, or inferred ($KUBECONFIG, ~/.kube/config, the pod's service account).

use std::path::Path;

use anyhow::Context;
use tracing::info;

/// The longest an answer from the API server may be silent.
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(295);

/// A client from `kubeconfig`, else inferred.
pub async fn kube_client(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Client> {
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
    let mut config = config;
    // kube-client reads without a timeout by default: an API server that
    // stops answering (frozen, a dropped connection no RST reaches) left a
    // watch waiting forever with a stale cache, and a write hanging. A
    // watch asks the server to end it after 290 s, so no healthy answer is
    // silent longer than this; counted from each request sent.
    config.read_timeout = Some(READ_TIMEOUT);
    config.reset_reader_on_write = true;
    info!(api_server = %config.cluster_url, "using the Kubernetes API server");
    kube::Client::try_from(config).context("building the Kubernetes client")
}
