//! The one place where errors become gRPC status codes.

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use super::bounded_text;
use crate::informer::CacheReadError;
use crate::objects::{Refusal, WriteDenied, WriteError};
use crate::queue::QueueError;
use crate::writes::WriteFailure;
use crate::writes::freshness::{FenceError, LeaseEndedDuringWrite};

/// The `domain` of the ErrorInfo detail carried by the API server's refusals.
pub const KUBERNETES_ERROR_DOMAIN: &str = "k8s.io";
/// The `domain` of the ErrorInfo detail of the sidecar's own refusals that
/// share a code with others: `STALE_LEASE` and `NO_KUBERNETES` (both
/// FAILED_PRECONDITION), `LEASE_ENDED_DURING_WRITE` (ABORTED, as the API
/// server's conflicts), `TOO_MANY_WRITES_OUT` (UNAVAILABLE, as an API server
/// that does not answer).
pub const SIDECAR_ERROR_DOMAIN: &str = "workqueue-sidecar";

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
    /// A write through the sidecar that failed.
    #[error(transparent)]
    Write(#[from] WriteError),
    /// A write under a lease made, but answered after the lease ended.
    #[error(transparent)]
    LeaseEnded(#[from] LeaseEndedDuringWrite),
    /// A write the config does not declare (`writes:`).
    #[error(transparent)]
    WriteDenied(#[from] WriteDenied),
    /// A cache read of an informer the config does not serve to clients.
    #[error(
        "informer {0:?} serves no cache reads: a queue uses it as neither primary nor trigger, or its kind holds credentials; set informers.{0}.cache_reads: true to serve it"
    )]
    ReadNotDeclared(String),
    /// A `ShutDown` from a client of a sidecar that lets none stop a queue.
    #[error(
        "ShutDown is off: it would stop queue {0:?} for every worker, and the sidecar drains its queues itself on SIGTERM; start it with --allow-shutdown-rpc to let clients stop a queue"
    )]
    ShutDownNotAllowed(String),
    /// A write asked of a sidecar that has no Kubernetes client.
    #[error("this sidecar runs without Kubernetes (its config names no informers), so it cannot write objects")]
    NoKubernetes,
    /// A fault of the sidecar's own, not of the request.
    #[error("internal error: {0}")]
    Internal(String),
}

impl From<WriteFailure> for ApiError {
    fn from(err: WriteFailure) -> Self {
        match err {
            WriteFailure::Denied(err) => ApiError::WriteDenied(err),
            WriteFailure::Fenced(err) => err.into(),
            WriteFailure::Write(err) => ApiError::Write(err),
            WriteFailure::LeaseEnded(err) => ApiError::LeaseEnded(err),
            cut_off @ WriteFailure::CutOff(_) => ApiError::Internal(cut_off.to_string()),
        }
    }
}

impl From<FenceError> for ApiError {
    fn from(err: FenceError) -> Self {
        match err {
            FenceError::UnknownQueue(queue) => ApiError::UnknownQueue(queue),
            FenceError::Queue(err) => ApiError::Queue(err),
        }
    }
}

impl ApiError {
    pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> Self {
        ApiError::InvalidArgument { field: field.into(), problem: problem.into() }
    }
}

/// The longest status message sent: it travels in a trailer, and a message
/// echoing a long input (a 20 KB page token, a 10 KB name in the API
/// server's 404) went past clients' metadata limit, which then saw only
/// RESOURCE_EXHAUSTED "received metadata size exceeds hard limit".
pub const MAX_STATUS_MESSAGE_BYTES: usize = 2048;

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Status {
        let code = code_of(&err);
        let message = bounded_text::cut(err.to_string(), MAX_STATUS_MESSAGE_BYTES);
        match &err {
            ApiError::Write(WriteError::Refused(refusal)) => {
                Status::with_error_details(code, message, refusal_details(refusal))
            }
            ApiError::Queue(QueueError::StaleToken { .. }) => sidecar_refusal(code, message, SidecarReason::StaleLease),
            ApiError::NoKubernetes => sidecar_refusal(code, message, SidecarReason::NoKubernetes),
            ApiError::LeaseEnded(_) => sidecar_refusal(code, message, SidecarReason::LeaseEndedDuringWrite),
            ApiError::Write(WriteError::TooManyOut { .. } | WriteError::TooManyBytesOut { .. }) => {
                sidecar_refusal(code, message, SidecarReason::TooManyWritesOut)
            }
            ApiError::WriteDenied(_) => sidecar_refusal(code, message, SidecarReason::WriteNotDeclared),
            ApiError::ReadNotDeclared(_) => sidecar_refusal(code, message, SidecarReason::ReadNotDeclared),
            ApiError::ShutDownNotAllowed(_) => sidecar_refusal(code, message, SidecarReason::ShutDownNotAllowed),
            _ => Status::new(code, message),
        }
    }
}

/// The reasons of the sidecar's own refusals (ErrorInfo domain
/// [`SIDECAR_ERROR_DOMAIN`]): clients tell these apart from other refusals
/// of the same code by them. `clients/error-mapping.tsv` lists each, with
/// what every client makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SidecarReason {
    StaleLease,
    NoKubernetes,
    LeaseEndedDuringWrite,
    TooManyWritesOut,
    WriteNotDeclared,
    ReadNotDeclared,
    ShutDownNotAllowed,
}

impl SidecarReason {
    fn as_str(self) -> &'static str {
        match self {
            SidecarReason::StaleLease => "STALE_LEASE",
            SidecarReason::NoKubernetes => "NO_KUBERNETES",
            SidecarReason::LeaseEndedDuringWrite => "LEASE_ENDED_DURING_WRITE",
            SidecarReason::TooManyWritesOut => "TOO_MANY_WRITES_OUT",
            SidecarReason::WriteNotDeclared => "WRITE_NOT_DECLARED",
            SidecarReason::ReadNotDeclared => "READ_NOT_DECLARED",
            SidecarReason::ShutDownNotAllowed => "SHUTDOWN_NOT_ALLOWED",
        }
    }
}

/// A refusal of the sidecar's own, with its reason as an ErrorInfo.
fn sidecar_refusal(code: Code, message: String, reason: SidecarReason) -> Status {
    let details = ErrorDetails::with_error_info(reason.as_str(), SIDECAR_ERROR_DOMAIN, []);
    Status::with_error_details(code, message, details)
}

/// The API server's reason and HTTP status as an ErrorInfo, and its causes
/// (an Invalid object's fields) as a BadRequest, for clients that read details.
fn refusal_details(refusal: &Refusal) -> ErrorDetails {
    let metadata = [("http_status".to_owned(), refusal.http_status.to_string())];
    let mut details = ErrorDetails::with_error_info(refusal.reason.clone(), KUBERNETES_ERROR_DOMAIN, metadata);
    for cause in &refusal.causes {
        details.add_bad_request_violation(cause.field.clone(), cause.message.clone());
    }
    details
}

/// The status code of an HTTP status from the API server.
fn code_of_http(status: u16) -> Code {
    match status {
        // 413: the object is larger than the API server stores; no retry helps.
        400 | 413 | 422 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        409 => Code::Aborted,
        429 | 500 | 503 => Code::Unavailable,
        504 => Code::DeadlineExceeded,
        _ => Code::Unknown,
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
        ApiError::Queue(QueueError::Full { .. } | QueueError::MemoryFull { .. }) => Code::ResourceExhausted,
        ApiError::Cache(err) => match err {
            CacheReadError::UnknownInformer(_) | CacheReadError::UnknownIndex { .. } => Code::NotFound,
            CacheReadError::BadSelector(_)
            | CacheReadError::BadResourceVersion(_)
            | CacheReadError::BadPageToken(_)
            | CacheReadError::PageTokenOfAnotherListing(_) => Code::InvalidArgument,
            CacheReadError::NotSynced { .. } => Code::Unavailable,
            CacheReadError::VersionNotReached { .. } | CacheReadError::WriteNotSeen { .. } => Code::DeadlineExceeded,
        },
        ApiError::Write(err) => match err {
            WriteError::UnknownKind { .. } => Code::NotFound,
            WriteError::BadRequest { .. } => Code::InvalidArgument,
            WriteError::Refused(refusal) if refusal.is_apply_outside_schema() => Code::InvalidArgument,
            WriteError::Refused(refusal) => code_of_http(refusal.http_status),
            WriteError::Unreachable(_) | WriteError::TooManyOut { .. } | WriteError::TooManyBytesOut { .. } => {
                Code::Unavailable
            }
        },
        ApiError::WriteDenied(_) | ApiError::ReadNotDeclared(_) | ApiError::ShutDownNotAllowed(_) => {
            Code::PermissionDenied
        }
        ApiError::NoKubernetes => Code::FailedPrecondition,
        // Like a failed precondition of the API server's (409): the write
        // raced another worker's claim on the object.
        ApiError::LeaseEnded(_) => Code::Aborted,
        ApiError::Internal(_) => Code::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{KindRef, WritePolicy, WriteVerb};
    use crate::queue::LeaseToken;

    #[test]
    fn a_status_message_should_be_cut_to_fit_a_trailer() {
        let echoed = CacheReadError::BadPageToken("t".repeat(20_000));
        let status = Status::from(ApiError::from(echoed));
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().len() <= MAX_STATUS_MESSAGE_BYTES, "{} bytes", status.message().len());
        assert!(status.message().starts_with("page_token: ") && status.message().ends_with("bytes in all)"));
        let short = Status::from(ApiError::from(CacheReadError::BadPageToken("t".into())));
        assert_eq!(short.message(), "page_token: \"t\" is not a token from a previous response");
    }

    /// An error the sidecar refuses with `reason`; the match is exhaustive, so a
    /// new reason needs a case here, and then a line in the clients' table.
    fn refused_with(reason: SidecarReason) -> ApiError {
        match reason {
            SidecarReason::StaleLease => QueueError::StaleToken { token: LeaseToken::new(1).unwrap() }.into(),
            SidecarReason::NoKubernetes => ApiError::NoKubernetes,
            SidecarReason::LeaseEndedDuringWrite => {
                LeaseEndedDuringWrite { queue: "q".into(), key: "ns/a".into() }.into()
            }
            SidecarReason::TooManyWritesOut => WriteError::TooManyOut { limit: 1 }.into(),
            SidecarReason::WriteNotDeclared => WritePolicy::default()
                .check(WriteVerb::Apply, &KindRef::parse("v1", "Secret").unwrap(), None, true)
                .unwrap_err()
                .into(),
            SidecarReason::ReadNotDeclared => ApiError::ReadNotDeclared("secrets".into()),
            SidecarReason::ShutDownNotAllowed => ApiError::ShutDownNotAllowed("default".into()),
        }
    }

    /// A code as clients name it: `FailedPrecondition` is `FAILED_PRECONDITION`.
    fn grpc_name(code: Code) -> String {
        let mut name = String::new();
        for (i, c) in format!("{code:?}").chars().enumerate() {
            if c.is_uppercase() && i > 0 {
                name.push('_');
            }
            name.push(c.to_ascii_uppercase());
        }
        name
    }

    /// `clients/error-mapping.tsv`, the table of refusals every client's tests
    /// read, lists each of the sidecar's own reasons with the code it is sent
    /// with, and no reason of that domain the sidecar does not send.
    #[test]
    fn the_clients_table_of_refusals_should_list_each_reason_the_sidecar_sends() {
        use std::collections::BTreeSet;
        let reasons = [
            SidecarReason::StaleLease,
            SidecarReason::NoKubernetes,
            SidecarReason::LeaseEndedDuringWrite,
            SidecarReason::TooManyWritesOut,
            SidecarReason::WriteNotDeclared,
            SidecarReason::ReadNotDeclared,
            SidecarReason::ShutDownNotAllowed,
        ];
        let sent: BTreeSet<(String, String)> = reasons
            .into_iter()
            .map(|reason| {
                let status = Status::from(refused_with(reason));
                let info = status.get_details_error_info().expect("an ErrorInfo");
                assert_eq!((info.domain.as_str(), info.reason.as_str()), (SIDECAR_ERROR_DOMAIN, reason.as_str()));
                (grpc_name(status.code()), info.reason)
            })
            .collect();
        let table = include_str!("../../clients/error-mapping.tsv");
        let listed: BTreeSet<(String, String)> = table
            .lines()
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .map(|line| line.split('\t').collect::<Vec<_>>())
            .filter(|fields| fields[2] == SIDECAR_ERROR_DOMAIN)
            .map(|fields| (fields[1].to_owned(), fields[3].to_owned()))
            .collect();
        assert_eq!(listed, sent);
    }

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
            (CacheReadError::PageTokenOfAnotherListing("x".into()).into(), Code::InvalidArgument),
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

    fn refused(http_status: u16, reason: &str) -> ApiError {
        let message = format!("{reason} says the API server");
        WriteError::Refused(Box::new(Refusal { http_status, reason: reason.into(), message, causes: Vec::new() }))
            .into()
    }

    #[test]
    fn each_write_error_should_map_to_its_documented_code_with_the_api_servers_message() {
        let cases = [
            (refused(400, "BadRequest"), Code::InvalidArgument),
            (refused(401, "Unauthorized"), Code::Unauthenticated),
            (refused(403, "Forbidden"), Code::PermissionDenied),
            (refused(404, "NotFound"), Code::NotFound),
            (refused(409, "Conflict"), Code::Aborted),
            (refused(409, "AlreadyExists"), Code::Aborted),
            (refused(422, "Invalid"), Code::InvalidArgument),
            (refused(429, "TooManyRequests"), Code::Unavailable),
            (refused(500, "InternalError"), Code::Unavailable),
            (refused(503, "ServiceUnavailable"), Code::Unavailable),
            (refused(504, "Timeout"), Code::DeadlineExceeded),
            (refused(418, ""), Code::Unknown),
            (WriteError::UnknownKind { api_version: "a/v1".into(), kind: "B".into() }.into(), Code::NotFound),
            (WriteError::BadRequest { field: "json", problem: "x".into() }.into(), Code::InvalidArgument),
            (WriteError::Unreachable("refused".into()).into(), Code::Unavailable),
            (WriteError::TooManyOut { limit: 256 }.into(), Code::Unavailable),
            (ApiError::NoKubernetes, Code::FailedPrecondition),
        ];
        for (err, code) in cases {
            let status = Status::from(err);
            assert_eq!(status.code(), code, "{status:?}");
        }
        let status = Status::from(refused(409, "Conflict"));
        assert!(status.message().ends_with("Conflict says the API server"), "{}", status.message());
        let info = status.get_details_error_info().expect("an ErrorInfo detail");
        assert_eq!((info.reason.as_str(), info.domain.as_str()), ("Conflict", KUBERNETES_ERROR_DOMAIN));
        assert_eq!(info.metadata.get("http_status").map(String::as_str), Some("409"));
    }

    #[test]
    fn an_apply_outside_the_schema_should_be_invalid_argument_though_the_api_server_says_500() {
        let said = |reason: &str, message: &str| -> ApiError {
            let refusal =
                Refusal { http_status: 500, reason: reason.into(), message: message.into(), causes: Vec::new() };
            WriteError::Refused(Box::new(refusal)).into()
        };
        let outside =
            "failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .foo: field not declared in schema";
        let status = Status::from(said("", outside));
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().ends_with(outside), "{}", status.message());
        assert_eq!(status.get_details_error_info().unwrap().metadata.get("http_status").unwrap(), "500");
        // The API server's own faults stay retryable.
        let live = "failed to create typed live object (ns/a; /v1, Kind=ConfigMap): .foo: field not declared in schema";
        assert_eq!(Status::from(said("", live)).code(), Code::Unavailable);
        assert_eq!(Status::from(said("InternalError", outside)).code(), Code::Unavailable);
        assert_eq!(Status::from(said("", "etcdserver: request timed out")).code(), Code::Unavailable);
    }
}
