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
        // A token file being rotated, an exec plugin that failed once.
        kube::Error::Auth(_) => true,
        _ => false,
    }
}

/// Whether the API server refused the caller: unknown credentials (401) or
/// no permission (403), either of which may change without a restart.
pub fn is_refused_access(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(status) if matches!(status.code, 401 | 403))
}
