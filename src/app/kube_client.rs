//! The Kubernetes client: from a kubeconfig file, or inferred ($KUBECONFIG, ~/.kube/config, the pod's service account).

use std::path::Path;

use anyhow::Context;
use tracing::info;

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
    info!(api_server = %config.cluster_url, "using the Kubernetes API server");
    kube::Client::try_from(config).context("building the Kubernetes client")
}
