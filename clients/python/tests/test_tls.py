"""TLS and mTLS through ``tls_credentials``, against the real sidecar serving TLS, on
certificates the ``openssl`` command line makes for each test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import grpc
import pytest

from conftest import StartSidecar
from workqueue_sidecar import Client, SyncClient, WorkqueueError, tls_credentials

SERVER_NAMES = "subjectAltName=IP:127.0.0.1,DNS:localhost"
CLIENT_USAGE = "extendedKeyUsage=clientAuth"


class Pki:
    """A CA and another CA, and certificates they sign, as PEM files in a directory."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def __call__(self, name: str) -> Path:
        return self.dir / name

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], cwd=self.dir, check=True, capture_output=True)

    def authority(self, name: str) -> None:
        self._openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN=wqs test {name}",
        )  # fmt: skip

    def leaf(self, name: str, authority: str, extension: str) -> None:
        (self.dir / f"{name}.ext").write_text(extension + "\n")
        self._openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN=wqs test {name}",
        )  # fmt: skip
        self._openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", f"{authority}.pem", "-CAkey", f"{authority}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
        )  # fmt: skip


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    made = Pki(tmp_path)
    made.authority("ca")
    made.authority("other-ca")
    made.leaf("server", "ca", SERVER_NAMES)
    made.leaf("client", "ca", CLIENT_USAGE)
    made.leaf("stranger", "other-ca", CLIENT_USAGE)
    return made


async def round_trip(target: str, credentials: grpc.ChannelCredentials | None) -> None:
    """Adds, takes and finishes a key over a connection made with ``credentials``."""
    async with Client.connect(target, credentials=credentials) as client:
        await client.add("default", "k")
        [lease] = await client.get("default", wait=1)
        await client.done("default", "k", lease.token)


def serving_tls(start_sidecar: StartSidecar, pki: Pki, *extra: str) -> str:
    args = ["--tls-cert", str(pki("server.pem")), "--tls-key", str(pki("server.key")), *extra]
    return start_sidecar(args=args).target


async def test_tls_serves_clients_that_trust_its_ca(start_sidecar: StartSidecar, pki: Pki) -> None:
    target = serving_tls(start_sidecar, pki)
    await round_trip(target, tls_credentials(ca_file=pki("ca.pem")))

    with pytest.raises(WorkqueueError) as untrusted:
        await round_trip(target, tls_credentials(ca_file=pki("other-ca.pem")))
    assert untrusted.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(WorkqueueError):
        await round_trip(target, None)


async def test_mtls_needs_a_client_certificate_of_its_ca(start_sidecar: StartSidecar, pki: Pki) -> None:
    target = serving_tls(start_sidecar, pki, "--tls-client-ca", str(pki("ca.pem")))

    def client_cert(name: str) -> grpc.ChannelCredentials:
        return tls_credentials(ca_file=pki("ca.pem"), cert_file=pki(f"{name}.pem"), key_file=pki(f"{name}.key"))

    await round_trip(target, client_cert("client"))
    with pytest.raises(WorkqueueError):
        await round_trip(target, tls_credentials(ca_file=pki("ca.pem")))
    with pytest.raises(WorkqueueError):
        await round_trip(target, client_cert("stranger"))


def test_sync_client_speaks_tls(start_sidecar: StartSidecar, pki: Pki) -> None:
    target = serving_tls(start_sidecar, pki)
    with SyncClient.connect(target, credentials=tls_credentials(ca_file=pki("ca.pem"))) as client:
        client.add("default", "k")
        assert client.len("default").ready == 1


def test_tls_credentials_name_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(OSError, match=r"ca_file: cannot read .*missing\.pem"):
        tls_credentials(ca_file=tmp_path / "missing.pem")
    with pytest.raises(ValueError, match="cert_file and key_file go together"):
        tls_credentials(cert_file=tmp_path / "client.pem")
