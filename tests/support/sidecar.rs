//! Starts the built `workqueue-sidecar` binary on a free loopback port, for black-box tests.
#![allow(dead_code)] // Each test binary uses the part of this helper it needs.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use workqueue_sidecar::grpc::pb::{self, work_queue_service_client::WorkQueueServiceClient};

/// Lease timings for tests of replicas (leader election, shard groups):
/// a 3 s Lease, renewed every 0.5 s, given up 2 s after the last renewal.
pub const FAST_LEASES: [&str; 6] = [
    "--leader-election-lease-duration",
    "3s",
    "--leader-election-renew-deadline",
    "2s",
    "--leader-election-retry-period",
    "500ms",
];

pub struct Sidecar {
    child: Child,
    pub address: SocketAddr,
    pub admin: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
}

impl Sidecar {
    /// Starts the binary with `args` plus `--tcp 127.0.0.1:0`, and waits until it listens.
    pub fn start(args: &[&str]) -> Sidecar {
        Starting::spawn(args).listening(Duration::from_secs(30))
    }

    /// As `start`, run by `sh` after the shell command `setup` (e.g. a `umask`).
    pub fn start_in_shell(setup: &str, args: &[&str]) -> Sidecar {
        let script = format!("{setup}; exec \"$0\" \"$@\"");
        let binary = env!("CARGO_BIN_EXE_workqueue-sidecar");
        Starting::spawn_with(Command::new("sh").args(["-c", &script, binary]), args).listening(Duration::from_secs(30))
    }

    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    pub async fn client(&self) -> WorkQueueServiceClient<Channel> {
        WorkQueueServiceClient::connect(self.endpoint()).await.expect("connects to the sidecar")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process's resident memory in MiB, from /proc.
    pub fn rss_mib(&self) -> f64 {
        self.status_mib("VmRSS:")
    }

    /// The most resident memory the process has had, in MiB, from /proc.
    pub fn peak_rss_mib(&self) -> f64 {
        self.status_mib("VmHWM:")
    }

    fn status_mib(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("reads /proc/PID/status");
        let kib: f64 = status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
        kib / 1024.0
    }

    pub fn send_signal(&self, signal: &str) {
        let status = Command::new("kill").args([&format!("-{signal}"), &self.pid().to_string()]).status().unwrap();
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Waits for the process to exit, up to `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Let the log thread catch the last lines.
                std::thread::sleep(Duration::from_millis(50));
                return status;
            }
            assert!(Instant::now() < deadline, "the sidecar did not exit within {timeout:?}; logs:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// GET on the admin port: the status code and the body.
    pub async fn admin_get(&self, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.admin).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.admin);
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).await.unwrap();
        let status = response.split_whitespace().nth(1).unwrap().parse().unwrap();
        let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
        (status, body)
    }

    /// The value of one metric sample, `name{labels}` exactly as exposed.
    pub async fn metric(&self, name_and_labels: &str) -> Option<f64> {
        let (_, body) = self.admin_get("/metrics").await;
        body.lines().find_map(|line| line.strip_prefix(name_and_labels)?.trim().parse().ok())
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }
}

/// The binary started and not yet listening (it resolves its informers first).
pub struct Starting {
    /// Taken once it listens.
    child: Option<Child>,
    logs: Arc<Mutex<Vec<String>>>,
    address: std::sync::mpsc::Receiver<SocketAddr>,
    admin: std::sync::mpsc::Receiver<SocketAddr>,
}

impl Starting {
    /// Starts the binary with `args` plus `--tcp 127.0.0.1:0`, its stderr kept.
    pub fn spawn(args: &[&str]) -> Starting {
        Self::spawn_with(&mut Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar")), args)
    }

    /// As `spawn`, through `command` (the binary, or something that execs it).
    fn spawn_with(command: &mut Command, args: &[&str]) -> Starting {
        let mut child = command
            .args(args)
            .args(["--tcp", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log", "info"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the sidecar binary starts");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (address_tx, address) = std::sync::mpsc::channel();
        let (admin_tx, admin) = std::sync::mpsc::channel();
        let stderr = child.stderr.take().unwrap();
        let sink = logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("transport=\"tcp\" address=").nth(1) {
                    let address = rest.split_whitespace().next().unwrap_or_default();
                    let _ = address_tx.send(address.parse::<SocketAddr>().expect("a socket address in the log"));
                }
                if line.contains("admin http listening")
                    && let Some(rest) = line.split("address=").nth(1)
                {
                    let address = rest.split_whitespace().next().unwrap_or_default();
                    let _ = admin_tx.send(address.parse::<SocketAddr>().expect("a socket address in the log"));
                }
                sink.lock().unwrap().push(line);
            }
        });
        Starting { child: Some(child), logs, address, admin }
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    /// Waits until it listens, up to `within` for each of its two ports.
    pub fn listening(mut self, within: Duration) -> Sidecar {
        let address = match self.address.recv_timeout(within) {
            Ok(address) => address,
            Err(_) => panic!("the sidecar did not report its address; logs:\n{}", self.logs()),
        };
        let admin = match self.admin.recv_timeout(within) {
            Ok(address) => address,
            Err(_) => panic!("the sidecar did not report its admin address; logs:\n{}", self.logs()),
        };
        let child = self.child.take().expect("taken only here");
        Sidecar { child, address, admin, logs: self.logs.clone() }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An Add of `keys` on the queue "default".
pub fn add_request(keys: &[&str]) -> pb::AddRequest {
    pb::AddRequest {
        queue: "default".into(),
        keys: keys.iter().map(|k| k.to_string()).collect(),
        priority: None,
        reason: String::new(),
    }
}

/// A unary Get on the queue "default": up to `max_keys`, waiting up to `wait`,
/// with the queue's lease time unless `ttl` is given.
pub fn get_request(max_keys: u32, wait: Duration, ttl: Option<Duration>) -> pb::GetRequest {
    pb::GetRequest {
        queue: "default".into(),
        worker: "test".into(),
        max_keys,
        wait: Some(wait.try_into().unwrap()),
        lease_ttl: ttl.map(|t| t.try_into().unwrap()),
        include_object: false,
    }
}
