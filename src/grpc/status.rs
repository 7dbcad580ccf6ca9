//! The one place where errors become gRPC status codes.

use tonic::{Code, Status};

use crate::informer::CacheReadError;
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
    Cache(#[from] CacheReadError),
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
            CacheReadError::UnknownInformer(_) | CacheReadError::UnknownIndex { .. } => Code::NotFound,
            CacheReadError::BadSelector(_)
            | CacheReadError::BadResourceVersion(_)
            | CacheReadError::BadPageToken(_) => Code::InvalidArgument,
            CacheReadError::NotSynced { .. } => Code::Unavailable,
            CacheReadError::VersionNotReached { .. } => Code::DeadlineExceeded,
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
            (QueueError::StaleToken { token: LeaseToken::new(1).unwrap() }.into(), Code::FailedPrecondition),
            (QueueError::ShuttingDown.into(), Code::Unavailable),
            (QueueError::Full { limit: 1 }.into(), Code::ResourceExhausted),
            (CacheReadError::UnknownInformer("x".into()).into(), Code::NotFound),
            (CacheReadError::UnknownIndex { informer: "x".into(), index: "i".into() }.into(), Code::NotFound),
            (CacheReadError::BadSelector("x".into()).into(), Code::InvalidArgument),
            (CacheReadError::BadResourceVersion("x".into()).into(), Code::InvalidArgument),
            (CacheReadError::BadPageToken("x".into()).into(), Code::InvalidArgument),
            (
                CacheReadError::NotSynced { informer: "x".into(), waited: std::time::Duration::ZERO }.into(),
                Code::Unavailable,
            ),
            (
                CacheReadError::VersionNotReached {
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
