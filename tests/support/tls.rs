//! TLS material for black-box tests, made by the `openssl` command line (CI has it), and grpcurl calls that use it.
#![allow(dead_code)] // Each test binary uses the part of this helper it needs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::binary::Sidecar;

/// A CA, a server certificate for 127.0.0.1 and a client certificate signed by it, and a client
/// certificate from another CA, in a directory of the test's own.
pub struct Pki {
    dir: PathBuf,
}

impl Pki {
    pub fn new(name: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("wqs-tls-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pki = Pki { dir };
        pki.ca("ca");
        pki.ca("other-ca");
        pki.leaf("server", "ca", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        pki.leaf("client", "ca", "extendedKeyUsage=clientAuth");
        pki.leaf("stranger", "other-ca", "extendedKeyUsage=clientAuth");
        pki
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_owned()
    }

    fn openssl(&self, args: &[&str]) {
        let output = Command::new("openssl").args(args).current_dir(&self.dir).output().expect("openssl runs");
        assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    }

    fn ca(&self, name: &str) {
        let (key, cert, subject) = (format!("{name}.key"), format!("{name}.pem"), format!("/CN=wqs test {name}"));
        self.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &cert,
            "-days",
            "2",
            "-subj",
            &subject,
        ]);
    }

    pub fn leaf(&self, name: &str, ca: &str, extension: &str) {
        let (key, csr, cert) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
        let subject = format!("/CN=wqs test {name}");
        self.openssl(&[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            &subject,
        ]);
        let extfile = format!("{name}.ext");
        std::fs::write(self.path(&extfile), format!("{extension}\n")).unwrap();
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            &cert,
            "-days",
            "2",
            "-extfile",
            &extfile,
        ]);
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// grpcurl, as `hack/install-grpcurl` builds it (CI runs that before these tests).
pub fn grpcurl() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let output = Command::new(root.join("hack/install-grpcurl")).output().expect("hack/install-grpcurl runs");
    assert!(output.status.success(), "hack/install-grpcurl: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8(output.stdout).unwrap().trim())
}

/// A health check through grpcurl with `flags`; its output.
pub fn health(sidecar: &Sidecar, flags: &[String]) -> Output {
    Command::new(grpcurl())
        .args(flags)
        .args(["-max-time", "5", &sidecar.address.to_string(), "grpc.health.v1.Health/Check"])
        .output()
        .unwrap()
}

pub fn serving(output: &Output) -> bool {
    output.status.success() && String::from_utf8_lossy(&output.stdout).contains("SERVING")
}
