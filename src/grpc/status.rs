//! The one place where errors become gRPC status codes.

use tonic::{Code, Status};

use crate::informer::InformerError;
use crate::queue::QueueError;

/// Why a request was refused before or by the queue.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("unknown queue {0:?}")]
    UnknownQueue(String),
    #[error("{field}: {problem}")]
    InvalidArgument { field: String, problem: String },
    #[error("{what}: {count} is over the limit of {limit}")]
    OverLimit { what: &'static str, count: usize, limit: usize },
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// A cache read the informers could not serve.
    #[error(transparent)]
    Cache(#[from] InformerError),
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ApiError::InvalidArgument { field: field.into(), problem: problem.into() }
    }
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        Status::new(code_of(&err), err.to_string())
    }
}

/// The status code of an error; also used in stream acknowledgements.
pub fn code_of(err: &ApiError) -> Code {
    match err {
        ApiError::UnknownQueue(_) => Code::NotFound,
        ApiError::InvalidArgument { .. } => Code::InvalidArgument,
        ApiError::OverLimit { .. } => Code::ResourceExhausted,
        ApiError::Queue(QueueError::StaleToken { .. }) => Code::FailedPrecondition,
        ApiError::Queue(QueueError::ShuttingDown) => Code::Unavailable,
        ApiError::Queue(QueueError::Full { .. }) => Code::ResourceExhausted,
        ApiError::Cache(err) => match err {
            InformerError::UnknownInformer(_) | InformerError::UnknownIndex { .. } => Code::NotFound,
            InformerError::BadSelector(_) | InformerError::BadResourceVersion(_) | InformerError::BadPageToken(_) => {
                Code::InvalidArgument
            }
            InformerError::NotSynced { .. } => Code::Unavailable,
            InformerError::VersionNotReached { .. } => Code::DeadlineExceeded,
            // Startup errors; a read never meets them.
            InformerError::Discovery { .. } | InformerError::NamespaceOnClusterScoped { .. } => Code::Internal,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::LeaseToken;

    #[test]
    fn each_error_should_map_to_its_documented_code() {
        let cases = [
            (ApiError::UnknownQueue("x".into()), Code::NotFound),
            (ApiError::invalid("key", "empty"), Code::InvalidArgument),
            (ApiError::OverLimit { what: "keys", count: 2, limit: 1 }, Code::ResourceExhausted),
            (QueueError::StaleToken { token: LeaseToken(1) }.into(), Code::FailedPrecondition),
            (QueueError::ShuttingDown.into(), Code::Unavailable),
            (QueueError::Full { limit: 1 }.into(), Code::ResourceExhausted),
            (InformerError::UnknownInformer("x".into()).into(), Code::NotFound),
            (InformerError::UnknownIndex { informer: "x".into(), index: "i".into() }.into(), Code::NotFound),
            (InformerError::BadSelector("x".into()).into(), Code::InvalidArgument),
            (InformerError::BadResourceVersion("x".into()).into(), Code::InvalidArgument),
            (InformerError::BadPageToken("x".into()).into(), Code::InvalidArgument),
            (
                InformerError::NotSynced { informer: "x".into(), waited: std::time::Duration::ZERO }.into(),
                Code::Unavailable,
            ),
            (
                InformerError::VersionNotReached {
                    informer: "x".into(),
                    wanted: 2,
                    seen: 1,
                    waited: std::time::Duration::ZERO,
                }
                .into(),
                Code::DeadlineExceeded,
            ),
        ];
        for (err, code) in cases {
            assert_eq!(Status::from(err).code(), code);
        }
    }
}
