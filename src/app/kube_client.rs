//! The Kubernetes client: from a kubeconfig file, or inferred ($KUBECONFIG, ~/.kube/config, the pod's service account).

use std::path::Path;

use anyhow::Context;

use crate::informer::WatchProgress;

/// What the informers' client does besides talking to the API server.
pub struct InformerMiddleware<'a> {
    /// Told when a watch request is answered.
    pub progress: &'a WatchProgress,
}

/// A client from `kubeconfig`, else inferred; the informers' client has
/// their middleware.
pub async fn kube_client(
    kubeconfig: Option<&Path>,
    informers: Option<InformerMiddleware<'_>>,
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
    Ok(match informers {
        Some(InformerMiddleware { progress }) => builder.with_layer(&progress.layer()).build(),
        None => builder.build(),
    })
}
