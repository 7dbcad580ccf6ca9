//! What can be wrong with protobuf the API server sent.

/// Why a protobuf answer, event or object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProtobufError {
    #[error("the protobuf ends in the middle of a field")]
    Truncated,
    #[error("a varint longer than 10 bytes")]
    VarintTooLong,
    #[error("field number {0} is out of range")]
    FieldNumber(u64),
    #[error("wire type {0} (groups are not used by Kubernetes)")]
    UnknownWireType(u8),
    #[error("a field that should be {expected} is not")]
    WireType { expected: &'static str },
    #[error("the answer does not start with Kubernetes' protobuf prefix")]
    NoPrefix,
    #[error("{message}: the raw JSON of a RawExtension is not JSON: {source}")]
    RawJson { message: &'static str, source: serde_json::Error },
    /// The server knows a field this sidecar's table does not (a newer
    /// Kubernetes): read as protobuf, it would be lost.
    #[error("field {number} of {message} is not in this sidecar's table (a newer API server?)")]
    UnknownField { message: &'static str, number: u32 },
    /// The envelope names another kind than the one asked for: read with
    /// this kind's table, its fields would be taken for others.
    #[error("the answer holds a {got}, not a {expected}")]
    WrongKind { expected: String, got: String },
}
