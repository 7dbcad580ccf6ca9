package io.github.workqueuesidecar.client;

/**
 * UNAVAILABLE because the TLS handshake with the sidecar failed: its certificate is not signed by
 * the CA the client trusts or does not name the target's host, or the sidecar refused the client's
 * certificate (mTLS). The message says why, from the JDK's TLS error (e.g. "unable to find valid
 * certification path to requested target"). An {@link UnavailableException}: a running worker keeps
 * retrying, since the sidecar may be serving a rotated certificate by the next attempt.
 */
public class TlsHandshakeException extends UnavailableException {
  private static final long serialVersionUID = 1L;

  public TlsHandshakeException(String message, ErrorDetails details, Throwable cause) {
    super(message, details, cause);
  }
}
