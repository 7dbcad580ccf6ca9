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
pub fn is_transient(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => matches!(status.code, 408 | 429 | 500..),
        kube::Error::HyperError(_) | kube::Error::Service(_) | kube::Error::ReadEvents(_) => true,
        // Credentials that cannot be had (an exec plugin missing, a token
        // file unreadable) are the kubeconfig's fault, as are the rest.
        _ => false,
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
