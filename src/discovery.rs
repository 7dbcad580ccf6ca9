//! What a failed discovery of a kind means: no such group, version or kind is served (a CRD not installed, a typo), or the API server could not answer.

/// Whether discovery failed because no such group, version or kind is
/// served, rather than because the API server could not answer.
pub fn is_unknown_kind(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 404,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}
