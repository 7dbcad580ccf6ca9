//! What a failed request to the API server means: no such group, version or kind is served (a CRD not installed, a typo), access refused, or no answer to wait out.

/// Whether discovery failed because no such group, version or kind is
/// served, rather than because the API server could not answer.
pub fn is_unknown_kind(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 404,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}

/// Whether the API server could not answer now (unreachable, timed out,
/// overloaded, failing) rather than refused the request: worth trying again.
/// A TLS failure is not: a certificate that does not verify is the
/// kubeconfig's (or the server's) fault, and stays so.
pub fn is_transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => matches!(status.code, 408 | 429 | 500..),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => !is_tls_failure(err),
        // Credentials that cannot be had (an exec plugin missing, a token
        // file unreadable) are the kubeconfig's fault, as are the rest.
        _ => false,
    }
}

/// Whether a TLS error (a certificate that does not verify, a handshake
/// refused) is among the error's causes; hyper-rustls carries it in an
/// `io::Error`, itself in another.
fn is_tls_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    // An io::Error's `source` is its inner error's source, skipping the inner
    // error itself, and hyper-util nests one io::Error in another.
    let inner = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref());
    err.is::<rustls::Error>()
        || inner.is_some_and(|inner| is_tls_failure(inner))
        || err.source().is_some_and(is_tls_failure)
}

/// What the API server said (its Status message and code), else the
/// error's text with each cause once: kube's own text of an API error
/// carries the whole Status as debug output.
pub fn said(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => crate::error_chain::one_line(other),
    }
}

/// Whether the API server refused the caller: unknown credentials (401) or
/// no permission (403), either of which may change without a restart.
pub fn is_refused_access(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if matches!(status.code, 401 | 403))
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn answered(code: u16) -> kube::Error {
        kube::Error::Api(Status::failure("said", "Reason").with_code(code).boxed())
    }

    #[test]
    fn only_an_api_server_that_could_not_answer_should_be_waited_for() {
        for code in [408, 429, 500, 503, 504] {
            assert!(is_transient(&answered(code)), "{code}");
        }
        for code in [400, 401, 403, 404, 405, 422] {
            assert!(!is_transient(&answered(code)), "{code}");
        }
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert!(is_transient(&kube::Error::Service(Box::new(refused))));
        assert!(!is_transient(&kube::Error::TlsRequired));
    }

    #[test]
    fn refused_access_should_be_401_and_403_only() {
        assert!(is_refused_access(&answered(401)) && is_refused_access(&answered(403)));
        assert!(!is_refused_access(&answered(404)) && !is_refused_access(&answered(500)));
    }
}
