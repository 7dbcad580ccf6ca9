//! Starts the `workqueue-sidecar` binary on a free loopback port for a benchmark, without the admin port.
#![allow(dead_code)] // Each bench uses the part of this helper it needs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use workqueue_sidecar::grpc::pb::work_queue_service_client::WorkQueueServiceClient;

pub type Client = WorkQueueServiceClient<tonic::transport::Channel>;

/// The running sidecar; killed on drop (and its config file and socket removed).
pub struct ReleaseSidecar {
    child: Child,
    config: Option<PathBuf>,
    pub endpoint: String,
    /// Its unix socket, when started with one (`start_with_unix_socket`).
    pub unix_socket: Option<PathBuf>,
}

impl Drop for ReleaseSidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for path in self.config.iter().chain(&self.unix_socket) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl ReleaseSidecar {
    /// Starts the binary with `--tcp 127.0.0.1:0 --admin off` and waits for its address.
    pub fn start() -> ReleaseSidecar {
        Self::spawn(None, &[])
    }

    /// Like `start`, with `args` added to its command line.
    pub fn start_with_args(args: &[&str]) -> ReleaseSidecar {
        Self::spawn(None, args)
    }

    /// Like `start_with_args`, also listening on a unix socket of its own
    /// (`connect_unix`), as a pod's sidecar serves its workers.
    pub fn start_with_unix_socket(args: &[&str]) -> ReleaseSidecar {
        let path = temp_path("sock");
        let path_arg = path.to_str().expect("the temporary directory's path is UTF-8");
        let mut sidecar = Self::spawn(None, &[&["--unix", path_arg], args].concat());
        // It binds both listeners before it logs either address.
        assert!(path.exists(), "the sidecar listens on {}", path.display());
        sidecar.unix_socket = Some(path);
        sidecar
    }

    /// Like `start`, with `yaml` as its `--config` file.
    pub fn start_with_config(yaml: &str) -> ReleaseSidecar {
        let path = temp_path("yaml");
        std::fs::write(&path, yaml).expect("writes the benchmark's config");
        Self::spawn(Some(path), &[])
    }

    fn spawn(config: Option<PathBuf>, args: &[&str]) -> ReleaseSidecar {
        let mut command = Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"));
        // Only what the benchmark passes configures the sidecar: a `WQS_*`
        // setting (or a pod's name) left in the shell that runs the benchmark
        // would change what is measured, as `WQS_WORKER_THREADS` would.
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(|name| name.starts_with("WQS_") || name.starts_with("POD_")) {
                command.env_remove(name);
            }
        }
        command.args(["--tcp", "127.0.0.1:0", "--admin", "off", "--log", "warn,workqueue_sidecar::server=info"]);
        // The gRPC load benchmark ends its workers by stopping the queue.
        command.arg("--allow-shutdown-rpc");
        if let Some(path) = &config {
            command.arg("--config").arg(path);
        }
        command.args(args);
        let mut child = command.stderr(Stdio::piped()).spawn().expect("starts the sidecar");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("the sidecar logs its address").unwrap();
            if let Some(rest) = line.split("transport=\"tcp\" address=").nth(1) {
                break rest.split_whitespace().next().unwrap().to_string();
            }
        };
        // Keep reading, so the sidecar never blocks on a full stderr pipe.
        std::thread::spawn(move || for _ in lines {});
        ReleaseSidecar { child, config, endpoint: format!("http://{address}"), unix_socket: None }
    }

    pub async fn connect(&self) -> Client {
        WorkQueueServiceClient::connect(self.endpoint.clone()).await.unwrap()
    }

    /// A client over the unix socket (`start_with_unix_socket`).
    pub async fn connect_unix(&self) -> Client {
        let path = self.unix_socket.clone().expect("started with a unix socket");
        // The URI is not used: every connection goes to the socket.
        let channel = tonic::transport::Endpoint::from_static("http://[::1]:1")
            .connect_with_connector(tower::service_fn(move |_| {
                let path = path.clone();
                async move {
                    Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(tokio::net::UnixStream::connect(path).await?))
                }
            }))
            .await
            .unwrap();
        WorkQueueServiceClient::new(channel)
    }

    /// The process's resident set size in KiB (`VmRSS`).
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The process's peak resident set size in KiB (`VmHWM`).
    pub fn peak_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap_or_else(|| panic!("{field} in status"));
        line[field.len()..].trim().trim_end_matches("kB").trim().parse().unwrap()
    }
}

/// A fresh path in the temporary directory, unique to this process and call.
fn temp_path(extension: &str) -> PathBuf {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    let nth = MADE.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("wqs-bench-{}-{nth}.{extension}", std::process::id()))
}
