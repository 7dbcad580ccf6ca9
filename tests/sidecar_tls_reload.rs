//! Certificate rotation on the built binary, as the kubelet does it to a Secret volume: new
//! connections get the new certificate, a connection opened before keeps working, and files that
//! do not load are refused (counted in a metric) while the last good certificate is served.

#[path = "support/sidecar.rs"]
mod binary;
#[path = "support/tls.rs"]
mod tls;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use binary::Sidecar;
use tls::{Pki, grpcurl, health, serving};

/// A directory laid out as a Kubernetes Secret volume: `tls.crt` and `tls.key` are symlinks into
/// `..data`, a symlink to a directory of this generation's files, swapped by a rename.
struct SecretVolume {
    dir: PathBuf,
    generation: u32,
}

impl SecretVolume {
    fn new(dir: PathBuf, cert: &Path, key: &Path) -> SecretVolume {
        std::fs::create_dir_all(&dir).unwrap();
        let mut volume = SecretVolume { dir, generation: 0 };
        volume.update(cert, key);
        for name in ["tls.crt", "tls.key"] {
            std::os::unix::fs::symlink(format!("..data/{name}"), volume.dir.join(name)).unwrap();
        }
        volume
    }

    /// Writes a new generation and swaps `..data` to it in one rename, as the kubelet's atomic writer does.
    fn update(&mut self, cert: &Path, key: &Path) {
        self.generation += 1;
        let generation = format!("..generation-{}", self.generation);
        let files = self.dir.join(&generation);
        std::fs::create_dir(&files).unwrap();
        std::fs::copy(cert, files.join("tls.crt")).unwrap();
        std::fs::copy(key, files.join("tls.key")).unwrap();
        let staged = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&generation, &staged).unwrap();
        std::fs::rename(&staged, self.dir.join("..data")).unwrap();
        if self.generation > 1 {
            std::fs::remove_dir_all(self.dir.join(format!("..generation-{}", self.generation - 1))).unwrap();
        }
    }

    fn arg(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_owned()
    }
}

/// Polls `condition` for up to 20 s; whether it came true.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// A Work stream through grpcurl that stays open: requests are written to its stdin, responses
/// read line by line from its stdout.
struct WorkStream {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl WorkStream {
    fn open(sidecar: &Sidecar, ca: &str) -> WorkStream {
        let mut child = Command::new(grpcurl())
            .args(["-cacert", ca, "-d", "@", &sidecar.address.to_string(), "workqueue.v1.WorkQueueService/Work"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut stream = WorkStream { child, lines };
        stream.send(r#"{"open": {"queue": "default", "credits": 1}}"#);
        stream
    }

    fn send(&mut self, request: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{request}").unwrap();
        stdin.flush().unwrap();
    }

    /// Reads responses until a line contains `needle`; that line.
    fn read_until(&self, needle: &str) -> String {
        loop {
            let line = self.lines.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }
}

#[test]
fn rotated_certificate_should_serve_new_connections_and_keep_open_ones() {
    let pki = Pki::new("rotate");
    pki.leaf("rotated", "other-ca", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    let mut volume = SecretVolume::new(pki.path("volume"), &pki.path("server.pem"), &pki.path("server.key"));
    let sidecar = Sidecar::start(&["--tls-cert", &volume.arg("tls.crt"), "--tls-key", &volume.arg("tls.key")]);
    let trusting = |ca: &str| serving(&health(&sidecar, &["-cacert".into(), pki.arg(ca)]));
    assert!(trusting("ca.pem"), "the first certificate is served; logs:\n{}", sidecar.logs());

    // A connection made with the first certificate, holding a lease across the rotation.
    let added = Command::new(grpcurl())
        .args(["-cacert", &pki.arg("ca.pem"), "-d", r#"{"queue": "default", "keys": ["k"]}"#])
        .args([&sidecar.address.to_string(), "workqueue.v1.WorkQueueService/Add"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let mut stream = WorkStream::open(&sidecar, &pki.arg("ca.pem"));
    stream.read_until("\"lease\"");
    let token = stream.read_until("\"token\"");
    let token = token.split('"').nth(3).expect("\"token\": \"N\"").to_owned();

    volume.update(&pki.path("rotated.pem"), &pki.path("rotated.key"));
    assert!(eventually(|| trusting("other-ca.pem")), "new connections get the rotated certificate");
    assert!(!trusting("ca.pem"), "and no longer the first one");

    stream.send(&format!(r#"{{"finish": {{"key": "k", "token": "{token}", "success": {{}}}}}}"#));
    let ack = stream.read_until("finishAck");
    drop(stream.child.stdin.take());
    assert!(!ack.contains("\"code\""), "the connection opened before the rotation still finishes its lease: {ack}");
    let exit = stream.child.wait_with_output().unwrap();
    assert!(exit.status.success(), "the old stream ends cleanly: {}", String::from_utf8_lossy(&exit.stderr));

    // A certificate with someone else's key is refused; the rotated one stays.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let refused = || runtime.block_on(sidecar.metric("workqueue_sidecar_tls_reloads_total{result=\"refused\"}"));
    let loaded = runtime.block_on(sidecar.metric("workqueue_sidecar_tls_reloads_total{result=\"loaded\"}"));
    assert_eq!((loaded, refused()), (Some(1.0), Some(0.0)), "one rotation loaded, none refused");
    volume.update(&pki.path("server.pem"), &pki.path("client.key"));
    assert!(eventually(|| refused() == Some(1.0)), "a mismatched pair is refused; logs:\n{}", sidecar.logs());
    assert!(trusting("other-ca.pem"), "the last good certificate is still served");
    assert!(sidecar.logs().contains("cannot be used"), "the refusal is logged:\n{}", sidecar.logs());
}
