//! TLS on the built binary's TCP listener, checked with grpcurl as a user would: TLS with a CA,
//! mTLS refusing clients without a certificate or with one from another CA, the rule that a
//! plaintext address beyond loopback needs `--insecure`, and bad TLS files refused before any port
//! is bound. Certificates are made by the `openssl` command line (CI has it) for each test.

#[path = "support/sidecar.rs"]
mod binary;
#[path = "support/tls.rs"]
mod tls;

use std::process::{Command, Output};

use binary::Sidecar;
use tls::{Pki, health, serving};

#[test]
fn tls_should_serve_clients_that_trust_its_ca_and_not_plaintext_ones() {
    let pki = Pki::new("plain");
    let sidecar = Sidecar::start(&["--tls-cert", &pki.arg("server.pem"), "--tls-key", &pki.arg("server.key")]);
    let trusted = health(&sidecar, &["-cacert".into(), pki.arg("ca.pem")]);
    assert!(serving(&trusted), "a client trusting the CA: {trusted:?}\nlogs:\n{}", sidecar.logs());
    let untrusted = health(&sidecar, &["-cacert".into(), pki.arg("other-ca.pem")]);
    assert!(!untrusted.status.success(), "a client trusting another CA must fail: {untrusted:?}");
    let plaintext = health(&sidecar, &["-plaintext".into()]);
    assert!(!plaintext.status.success(), "a plaintext client must fail: {plaintext:?}");
}

#[test]
fn mtls_should_refuse_clients_without_a_certificate_of_its_client_ca() {
    let pki = Pki::new("mtls");
    let sidecar = Sidecar::start(&[
        "--tls-cert",
        &pki.arg("server.pem"),
        "--tls-key",
        &pki.arg("server.key"),
        "--tls-client-ca",
        &pki.arg("ca.pem"),
    ]);
    let ca = ["-cacert".to_string(), pki.arg("ca.pem")];
    let with = |cert: &str| {
        [
            ca[0].clone(),
            ca[1].clone(),
            "-cert".into(),
            pki.arg(&format!("{cert}.pem")),
            "-key".into(),
            pki.arg(&format!("{cert}.key")),
        ]
    };
    let client = health(&sidecar, &with("client"));
    assert!(serving(&client), "a client with a certificate of the client CA: {client:?}\nlogs:\n{}", sidecar.logs());
    let anonymous = health(&sidecar, &ca);
    assert!(!anonymous.status.success(), "a client without a certificate must fail: {anonymous:?}");
    let stranger = health(&sidecar, &with("stranger"));
    assert!(!stranger.status.success(), "a certificate from another CA must fail: {stranger:?}");
}

/// Runs the binary with `args` (and `--admin off`) until it exits or 3 s pass; `None` when it kept running.
fn exit_of(args: &[&str]) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_workqueue-sidecar"))
        .args(args)
        .args(["--admin", "off"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    for _ in 0..30 {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn plaintext_beyond_loopback_should_need_insecure_and_bad_tls_files_exit_before_binding() {
    let pki = Pki::new("rules");
    let refused = exit_of(&["--tcp", "0.0.0.0:0", "--allow-remote"]).expect("refused at once");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--insecure") && !stderr.contains("listening"), "{stderr}");
    assert!(exit_of(&["--tcp", "0.0.0.0:0", "--allow-remote", "--insecure"]).is_none(), "--insecure serves plaintext");
    let (cert, key) = (pki.arg("server.pem"), pki.arg("server.key"));
    assert!(
        exit_of(&["--tcp", "0.0.0.0:0", "--allow-remote", "--tls-cert", &cert, "--tls-key", &key]).is_none(),
        "TLS beyond loopback needs no --insecure"
    );
    let missing = pki.arg("missing.pem");
    let other_key = pki.arg("client.key");
    for (args, names) in [
        (vec!["--tls-cert", missing.as_str(), "--tls-key", key.as_str()], missing.as_str()),
        (vec!["--tls-cert", cert.as_str(), "--tls-key", other_key.as_str()], cert.as_str()),
    ] {
        let output = exit_of(&args).expect("refused at once");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(names) && !stderr.contains("listening"), "{args:?} names the file: {stderr}");
    }
}
