"""TLS credentials for a sidecar serving TLS (``--tls-cert``), read from PEM files."""

from __future__ import annotations

from pathlib import Path

import grpc


def tls_credentials(
    *,
    ca_file: str | Path | None = None,
    cert_file: str | Path | None = None,
    key_file: str | Path | None = None,
) -> grpc.ChannelCredentials:
    """Credentials that verify the sidecar against ``ca_file`` (the system's roots
    when ``None``) and, for a sidecar started with ``--tls-client-ca`` (mTLS),
    present ``cert_file`` and ``key_file``, which go together.

    The files are read now: a rotated client certificate needs new credentials
    (and a new client). A file that cannot be read raises ``OSError`` naming the
    argument and the path.
    """
    if (cert_file is None) != (key_file is None):
        raise ValueError("cert_file and key_file go together: give both for mTLS, or neither")
    return grpc.ssl_channel_credentials(
        root_certificates=_read("ca_file", ca_file),
        private_key=_read("key_file", key_file),
        certificate_chain=_read("cert_file", cert_file),
    )


def _read(argument: str, path: str | Path | None) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise OSError(err.errno, f"{argument}: cannot read {path}: {err.strerror}") from err
