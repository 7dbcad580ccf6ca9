//! A newer API server than the sidecar's protobuf table knows, played by the real one: a client whose
//! answers carry, in every ConfigMap sent as protobuf whose name starts with `newer-`, a field the table
//! has never heard of (as a field added in a later Kubernetes would arrive).
//!
//! It sits where kube's HTTP service sits (`Client::new`), so TLS and authentication stay the real
//! client's; it asks for answers without gzip, so that it can read and rewrite them.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_util::StreamExt;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_TYPE};
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use kube::Client;
use kube::client::Body;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What names the objects that gain the unknown field.
pub const NEWER_PREFIX: &str = "newer-";

/// The field every newer object gains: number 99, a varint 1. No kind in
/// the table has a field numbered that high.
const UNKNOWN_FIELD: [u8; 3] = [0x98, 0x06, 0x01];

/// A request the informers made, and how it was answered.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path_and_query: String,
    pub accept: String,
    pub answered_protobuf: bool,
}

/// What the newer API server did, in order.
#[derive(Clone, Default)]
pub struct Record {
    log: Arc<Mutex<Vec<Logged>>>,
}

enum Logged {
    Request(Seen),
    /// An object sent with the unknown field, by name.
    Rewritten(String),
}

impl Record {
    pub fn seen(&self) -> Vec<Seen> {
        requests(&self.log.lock().unwrap())
    }

    /// The names of the objects sent with the unknown field, in order.
    pub fn rewritten(&self) -> Vec<String> {
        let log = self.log.lock().unwrap();
        log.iter().filter_map(|l| if let Logged::Rewritten(name) = l { Some(name.clone()) } else { None }).collect()
    }

    /// The requests made after the first object with the unknown field was sent.
    pub fn requests_after_first_rewrite(&self) -> Vec<Seen> {
        let log = self.log.lock().unwrap();
        let first = log.iter().position(|l| matches!(l, Logged::Rewritten(_))).unwrap_or(log.len());
        requests(&log[first..])
    }

    fn push(&self, logged: Logged) {
        self.log.lock().unwrap().push(logged);
    }
}

/// The requests among `log`.
fn requests(log: &[Logged]) -> Vec<Seen> {
    log.iter().filter_map(|l| if let Logged::Request(seen) = l { Some(seen.clone()) } else { None }).collect()
}

/// A client through the newer API server, and what it saw.
pub fn client(real: &Client) -> (Client, Record) {
    let record = Record::default();
    let service = Newer { real: real.clone(), record: record.clone() };
    (Client::new(service, real.default_namespace()), record)
}

#[derive(Clone)]
struct Newer {
    real: Client,
    record: Record,
}

impl tower::Service<Request<Body>> for Newer {
    type Response = Response<UnsyncBoxBody<Bytes, BoxError>>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let (real, record) = (self.real.clone(), self.record.clone());
        Box::pin(async move {
            request.headers_mut().remove(ACCEPT_ENCODING);
            let path_and_query = request.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
            let accept = header(request.headers(), ACCEPT);
            let response = real.send(request).await?;
            let content_type = header(response.headers(), CONTENT_TYPE);
            let answered_protobuf = content_type.starts_with("application/vnd.kubernetes.protobuf");
            record.push(Logged::Request(Seen { path_and_query, accept, answered_protobuf }));
            let (parts, body) = response.into_parts();
            let body = if !answered_protobuf || !parts.status.is_success() {
                body.map_err(BoxError::from).boxed_unsync()
            } else if content_type.contains("stream=watch") {
                watch_rewritten(body, record.clone())
            } else {
                let whole = body.collect().await?.to_bytes();
                let rewritten = rewrite_envelope(&whole, "ConfigMapList", &mut |list| {
                    map_len_field(list, 2, &mut |item| newer(item, &record))
                });
                Full::new(rewritten.map_or(whole, Bytes::from)).map_err(|never| match never {}).boxed_unsync()
            };
            Ok(Response::from_parts(parts, body))
        })
    }
}

fn header(headers: &http::HeaderMap, name: http::header::HeaderName) -> String {
    headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned()
}

/// A watch answer, each length-prefixed frame rewritten as it arrives.
fn watch_rewritten(body: Body, record: Record) -> UnsyncBoxBody<Bytes, BoxError> {
    let mut pending = BytesMut::new();
    let frames = body.into_data_stream().map(move |chunk| {
        let chunk = chunk.map_err(BoxError::from)?;
        pending.extend_from_slice(&chunk);
        let mut out = Vec::new();
        while pending.len() >= 4 {
            let length = u32::from_be_bytes(pending[..4].try_into().unwrap()) as usize;
            if pending.len() < 4 + length {
                break;
            }
            let frame = pending.split_to(4 + length);
            let event = watch_event(&frame[4..], &record);
            out.extend_from_slice(&(event.len() as u32).to_be_bytes());
            out.extend_from_slice(&event);
        }
        Ok::<_, BoxError>(http_body::Frame::data(Bytes::from(out)))
    });
    BodyExt::boxed_unsync(StreamBody::new(frames))
}

/// A watch event (type 1, object 2: a RawExtension whose raw 1 is an
/// envelope), its object rewritten when it is a newer ConfigMap that was
/// added, changed or deleted (a bookmark's object carries only metadata).
fn watch_event(event: &[u8], record: &Record) -> Vec<u8> {
    let kind = len_field(event, 1).unwrap_or_default();
    if !matches!(kind, b"ADDED" | b"MODIFIED" | b"DELETED") {
        return event.to_vec();
    }
    map_len_field(event, 2, &mut |raw_extension| {
        map_len_field(raw_extension, 1, &mut |raw| {
            rewrite_envelope(raw, "ConfigMap", &mut |object| newer(object, record)).unwrap_or_else(|| raw.to_vec())
        })
    })
}

/// The ConfigMap with the unknown field when its name is a newer one.
fn newer(object: &[u8], record: &Record) -> Vec<u8> {
    let name = len_field(object, 1).and_then(|meta| len_field(meta, 1)).unwrap_or_default();
    let name = String::from_utf8_lossy(name);
    if !name.starts_with(NEWER_PREFIX) {
        return object.to_vec();
    }
    record.push(Logged::Rewritten(name.into_owned()));
    [object, &UNKNOWN_FIELD].concat()
}

/// `k8s\0` and a `runtime.Unknown` (type meta 1, raw 2): the raw rewritten
/// when the type meta's kind (2) is `kind`; `None` otherwise.
fn rewrite_envelope(answer: &[u8], kind: &str, rewrite: &mut dyn FnMut(&[u8]) -> Vec<u8>) -> Option<Vec<u8>> {
    let unknown = answer.strip_prefix(b"k8s\0")?;
    let type_meta = len_field(unknown, 1)?;
    if len_field(type_meta, 2)? != kind.as_bytes() {
        return None;
    }
    Some([&b"k8s\0"[..], &map_len_field(unknown, 2, rewrite)].concat())
}

/// One field of a protobuf message: its number, and for a length-delimited
/// one its contents; `whole` is the field as written, key included.
struct Field<'a> {
    number: u64,
    contents: Option<&'a [u8]>,
    whole: &'a [u8],
}

/// The fields of `message`, in order. Panics on what is not protobuf: the
/// API server wrote it.
fn fields(message: &[u8]) -> Vec<Field<'_>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < message.len() {
        let start = at;
        let key = varint(message, &mut at);
        let contents = match key & 7 {
            0 => {
                varint(message, &mut at);
                None
            }
            1 => {
                at += 8;
                None
            }
            2 => {
                let length = varint(message, &mut at) as usize;
                at += length;
                Some(&message[at - length..at])
            }
            5 => {
                at += 4;
                None
            }
            other => panic!("wire type {other} in an API server's answer"),
        };
        fields.push(Field { number: key >> 3, contents, whole: &message[start..at] });
    }
    fields
}

/// The first length-delimited field numbered `number`.
fn len_field(message: &[u8], number: u64) -> Option<&[u8]> {
    fields(message).into_iter().find(|f| f.number == number).and_then(|f| f.contents)
}

/// `message` with each length-delimited field numbered `number` rewritten.
fn map_len_field(message: &[u8], number: u64, rewrite: &mut dyn FnMut(&[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 16);
    for field in fields(message) {
        match field.contents {
            Some(contents) if field.number == number => {
                let contents = rewrite(contents);
                put_varint(&mut out, number << 3 | 2);
                put_varint(&mut out, contents.len() as u64);
                out.extend_from_slice(&contents);
            }
            _ => out.extend_from_slice(field.whole),
        }
    }
    out
}

fn varint(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = bytes[*at];
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return value;
        }
    }
    panic!("a varint longer than 10 bytes");
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}
