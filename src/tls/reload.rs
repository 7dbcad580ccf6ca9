//! Certificate reload: the TLS files' directories are watched, and once they have been quiet for a moment, changed files become what new connections handshake with; files that do not load are refused and the last good ones kept.
//!
//! Directories, not files, are watched: a Kubernetes Secret volume replaces
//! its files by swapping the `..data` symlink, and tools that write a new
//! file and rename it over the old one leave a watch on the file pointing
//! at a deleted inode. Connections already open keep the certificate they
//! handshook with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use prometheus_client::metrics::counter::Counter;
use rustls::ServerConfig;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tracing::{info, warn};

use super::{Material, TlsError, TlsFiles};

/// How long the directories must be quiet before the files are read: a
/// Secret update or a `cp cert key` is several events, and reading between
/// them would see a new certificate with the old key.
const QUIET: Duration = Duration::from_millis(250);

/// Counts of reloads, for the metrics.
#[derive(Clone, Debug, Default)]
pub struct ReloadCounters {
    /// Changed files that were loaded.
    pub loaded: Counter,
    /// Changed files that could not be used (the previous ones stay).
    pub refused: Counter,
}

/// The TLS configuration new connections get: the files as last loaded.
#[derive(Clone, Debug)]
pub struct ServingTls {
    current: watch::Receiver<Arc<ServerConfig>>,
}

impl ServingTls {
    /// Loads `files` (an error names the file) and watches their
    /// directories for as long as a clone of the result lives. Needs a tokio
    /// runtime.
    pub fn watch(files: TlsFiles, counters: ReloadCounters) -> Result<ServingTls, TlsError> {
        let material = files.read()?;
        let (current_tx, current) = watch::channel(files.build(&material)?);
        let (changed_tx, changed) = mpsc::unbounded_channel();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            // Our own reads show up as access events; only changes matter.
            if event.is_ok_and(|event| !event.kind.is_access()) {
                let _ = changed_tx.send(());
            }
        })
        .map_err(|err| TlsError::Watch { path: files.cert.clone(), problem: err.to_string() })?;
        for directory in directories(&files) {
            watcher
                .watch(&directory, RecursiveMode::NonRecursive)
                .map_err(|err| TlsError::Watch { path: directory.clone(), problem: err.to_string() })?;
        }
        let reloader = Reloader { files, last_read: material, current: current_tx, counters };
        // Self-ending: it returns once every ServingTls is dropped.
        tokio::spawn(reloader.run(watcher, changed));
        Ok(ServingTls { current })
    }

    /// An acceptor with the configuration loaded last.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.current.borrow().clone())
    }
}

/// The directories holding the files, each once.
fn directories(files: &TlsFiles) -> BTreeSet<PathBuf> {
    files
        .paths()
        .map(|path| match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => Path::new(".").to_path_buf(),
        })
        .collect()
}

struct Reloader {
    files: TlsFiles,
    /// The bytes last read, whether they loaded or not: the same bytes are
    /// not tried (nor warned about) twice.
    last_read: Material,
    current: watch::Sender<Arc<ServerConfig>>,
    counters: ReloadCounters,
}

impl Reloader {
    async fn run(mut self, _watcher: notify::RecommendedWatcher, mut changed: mpsc::UnboundedReceiver<()>) {
        loop {
            tokio::select! {
                event = changed.recv() => if event.is_none() { return },
                // Every ServingTls is gone: nobody to serve.
                () = self.current.closed() => return,
            }
            loop {
                match tokio::time::timeout(QUIET, changed.recv()).await {
                    Ok(Some(())) => continue,
                    Ok(None) => return,
                    Err(_quiet) => break,
                }
            }
            self.reload();
        }
    }

    fn reload(&mut self) {
        let material = match self.files.read() {
            Ok(material) => material,
            Err(err) => {
                // A file briefly missing mid-update comes back with an event of its own.
                warn!(%err, "TLS files changed but cannot be read; new connections keep the previous certificate");
                self.counters.refused.inc();
                return;
            }
        };
        if material == self.last_read {
            return;
        }
        match self.files.build(&material) {
            Ok(config) => {
                self.current.send_replace(config);
                self.counters.loaded.inc();
                info!(cert = %self.files.cert.display(), "TLS files reloaded; new connections use them");
            }
            Err(err) => {
                self.counters.refused.inc();
                warn!(%err, "TLS files changed but cannot be used; new connections keep the previous certificate");
            }
        }
        self.last_read = material;
    }
}
