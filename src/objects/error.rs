//! Why a write through the sidecar failed: the request named no known kind, the object did not parse, or the API server said no (with its status, reason, message and causes).

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// Discovery knows no such apiVersion and kind.
    #[error(
        "the API server has no kind {kind} in {api_version}: is its CustomResourceDefinition installed, and the \
         apiVersion spelled as the CRD serves it?"
    )]
    UnknownKind { api_version: String, kind: String },
    /// The request's object or patch is not what the write needs.
    #[error("{field}: {problem}")]
    BadRequest { field: &'static str, problem: String },
    /// The API server refused the write; its own words.
    #[error("{}", .0)]
    Refused(Box<Refusal>),
    /// The API server could not be reached, or did not answer in time.
    #[error("the API server could not be reached: {0}")]
    Unreachable(String),
    /// Every slot of writes out was taken: nothing was sent.
    #[error(
        "{limit} writes to the API server are still unanswered (it is slow or not answering, and a write runs on to \
         its answer even when its caller gave up): nothing was sent; try again later"
    )]
    TooManyOut { limit: usize },
    /// The bodies of the writes out took the bytes out: nothing was sent.
    #[error(
        "the writes to the API server still unanswered hold {limit} bytes of body (it is slow or not answering): \
         nothing was sent; try again later"
    )]
    TooManyBytesOut { limit: usize },
}

/// What the API server said when it refused a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The HTTP status (409, 422, ...).
    pub http_status: u16,
    /// Its machine-readable reason (`Conflict`, `AlreadyExists`, `Invalid`, ...); may be empty.
    pub reason: String,
    /// Its human-readable message.
    pub message: String,
    /// For `Invalid`: each field at fault and why.
    pub causes: Vec<Cause>,
}

/// One field the API server found at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    pub field: String,
    pub message: String,
}

/// How the API server's field manager begins its answer to an apply whose
/// object does not fit the kind's schema (an unknown field, a value of the
/// wrong type, a list item without its key): a plain Go error, so a 500 with
/// no reason, whatever `fieldValidation` says (kubernetes/kubernetes#139253,
/// seen on 1.37). Only the request's object can cause it (the stored
/// object's own misfit says "typed live object"), so a retry never helps.
const APPLY_OUTSIDE_SCHEMA: &str = "failed to create typed patch object";

impl Refusal {
    /// Whether this 500 is the API server's refusal of an apply whose object
    /// does not fit the kind's schema, rather than a fault of its own.
    pub fn is_apply_outside_schema(&self) -> bool {
        self.http_status == 500 && self.reason.is_empty() && self.message.starts_with(APPLY_OUTSIDE_SCHEMA)
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API server's message already names the object and, for
        // Invalid, every cause; the status and reason say which rule hit.
        match self.reason.as_str() {
            "" => write!(f, "the API server refused the write ({}): {}", self.http_status, self.message),
            reason => write!(f, "the API server refused the write ({} {reason}): {}", self.http_status, self.message),
        }
    }
}

impl WriteError {
    /// Sorts what the Kubernetes client returned.
    pub fn from_kube(err: kube::Error) -> Self {
        match err {
            kube::Error::Api(status) => {
                let status = *status;
                let causes = status
                    .details
                    .map(|details| {
                        details.causes.into_iter().map(|c| Cause { field: c.field, message: c.message }).collect()
                    })
                    .unwrap_or_default();
                WriteError::Refused(Box::new(Refusal {
                    http_status: status.code,
                    reason: status.reason,
                    message: status.message,
                    causes,
                }))
            }
            other => WriteError::Unreachable(other.to_string()),
        }
    }
}
