//! What the API server answers an informer's list or watch with, read as bytes: asked for gzip (as client-go asks), the gzip undone (an API server since 1.37 sends a streaming list as one gzip member per event), a watch's events split (JSON lines, or length-prefixed protobuf frames), and an error answer turned into the API's `Status`.
//!
//! kube-client asks for no compression on a watch, because its decoder
//! stops after the first gzip member. Uncompressed, the API server writes
//! each of a streaming list's events as its own TLS record, and reading
//! 10,000 ConfigMaps took 205-220 ms here against 150-170 ms gzipped (a Go
//! reader of the same request, no decoding, 3 runs each). Lists are gzipped
//! too; a watch from a version, the server (1.37) sends uncompressed
//! whatever is asked.

use std::io::Write;

use bytes::Bytes;
use flate2::write::MultiGzDecoder;
use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_TYPE, HeaderValue};
use http_body_util::BodyExt;
use kube::Client;
use kube::client::Body;
use kube::core::Status;

use super::protobuf::{ProtobufKind, Unknown};

/// What client-go asks for a built-in kind: protobuf, or JSON where the
/// server has no protobuf for it (custom resources). A watch is answered
/// `application/vnd.kubernetes.protobuf;stream=watch`.
const PROTOBUF_OR_JSON: &str = "application/vnd.kubernetes.protobuf, application/json";
const PROTOBUF: &[u8] = b"application/vnd.kubernetes.protobuf";

/// The largest watch frame read: a corrupt length must not take the
/// memory (objects are at most 1.5 MiB in etcd by default; client-go
/// allows 16 MiB a frame).
const MAX_FRAME: usize = 64 << 20;

/// Sends `request` asking for gzip, and for protobuf when `protobuf`; an
/// answer that is not a success is the error it carries (`kube::Error::Api`).
pub async fn send(client: &Client, request: http::Request<Vec<u8>>, protobuf: bool) -> Result<Answer, kube::Error> {
    let mut request = request.map(Body::from);
    request.headers_mut().insert(ACCEPT_ENCODING, HeaderValue::from_static("gzip"));
    if protobuf {
        request.headers_mut().insert(ACCEPT, HeaderValue::from_static(PROTOBUF_OR_JSON));
    }
    let response = client.send(request).await?;
    let status = response.status();
    let gzip = response.headers().get(CONTENT_ENCODING).is_some_and(|encoding| encoding.as_bytes() == b"gzip");
    let protobuf = response.headers().get(CONTENT_TYPE).is_some_and(|kind| kind.as_bytes().starts_with(PROTOBUF));
    let answer =
        Answer { chunks: response.into_body().into_data_stream().boxed(), decoded: Decoded::new(gzip), protobuf };
    if status.is_success() {
        return Ok(answer);
    }
    let protobuf = answer.protobuf;
    let body = answer.bytes().await?;
    Err(kube::Error::Api(error_status(&body, protobuf, status.as_u16()).boxed()))
}

/// The `Status` an error answer carries: JSON, or protobuf when asked for
/// it (a built-in kind's list or watch: the API server answers errors in
/// the format asked, and the bytes as text are unreadable). Anything else
/// is kept as its text, made readable, with the HTTP code.
fn error_status(body: &[u8], protobuf: bool, code: u16) -> Status {
    let json = if protobuf { protobuf_status_json(body) } else { Some(body.to_vec()) };
    if let Some(status) = json.and_then(|json| serde_json::from_slice::<Status>(&json).ok()) {
        return status;
    }
    let text: String = String::from_utf8_lossy(body).chars().filter(|c| !c.is_control() || *c == ' ').collect();
    Status::failure(text.trim(), "the API server's answer is not a Status").with_code(code)
}

/// A protobuf `Status` answer (`k8s\0`, `runtime.Unknown`, `metav1.Status`) as JSON.
fn protobuf_status_json(body: &[u8]) -> Option<Vec<u8>> {
    let unknown = Unknown::read(body).ok()?;
    let status = ProtobufKind::status();
    status.check_envelope(unknown.kind, false).ok()?;
    status.to_json(unknown.raw).ok()
}

/// The body of a successful answer.
pub struct Answer {
    chunks: BoxStream<'static, Result<Bytes, kube::Error>>,
    decoded: Decoded,
    /// Whether the server answered in protobuf (else JSON).
    protobuf: bool,
}

impl Answer {
    pub fn is_protobuf(&self) -> bool {
        self.protobuf
    }

    /// The body as a watch's protobuf frames, each after its 4-byte length.
    pub fn frames(self) -> Frames {
        Frames { answer: self, start: 0 }
    }

    /// The whole body, decompressed.
    pub async fn bytes(mut self) -> Result<Vec<u8>, kube::Error> {
        while let Some(chunk) = self.next_chunk().await? {
            self.decoded.push(&chunk)?;
        }
        Ok(std::mem::take(self.decoded.bytes()))
    }

    /// The body as lines, as a watch sends its events.
    pub fn lines(self) -> Lines {
        Lines { answer: self, start: 0, ended: false }
    }

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, kube::Error> {
        self.chunks.next().await.transpose()
    }

    /// Drops the first `read` decoded bytes (already handed out), then
    /// decodes the next chunk after the rest; false once the body has ended.
    async fn read_more(&mut self, read: usize) -> Result<bool, kube::Error> {
        self.decoded.bytes().drain(..read);
        match self.next_chunk().await? {
            Some(chunk) => self.decoded.push(&chunk).map(|()| true),
            None => Ok(false),
        }
    }
}

/// The bytes decoded so far, and how to decode the next.
enum Decoded {
    Plain(Vec<u8>),
    /// Writes what it decodes into its own `Vec`.
    Gzip(Box<MultiGzDecoder<Vec<u8>>>),
}

impl Decoded {
    fn new(gzip: bool) -> Self {
        if gzip { Decoded::Gzip(Box::new(MultiGzDecoder::new(Vec::new()))) } else { Decoded::Plain(Vec::new()) }
    }

    fn push(&mut self, chunk: &[u8]) -> Result<(), kube::Error> {
        match self {
            Decoded::Plain(bytes) => bytes.extend_from_slice(chunk),
            Decoded::Gzip(decoder) => {
                // The decoder keeps what it decoded until its next write or a
                // flush: an event must not wait for the one after it.
                decoder.write_all(chunk).and_then(|()| decoder.flush()).map_err(kube::Error::ReadEvents)?
            }
        }
        Ok(())
    }

    fn bytes(&mut self) -> &mut Vec<u8> {
        match self {
            Decoded::Plain(bytes) => bytes,
            Decoded::Gzip(decoder) => decoder.get_mut(),
        }
    }
}

/// A body read line by line.
pub struct Lines {
    answer: Answer,
    /// Where the next line starts in the decoded bytes.
    start: usize,
    ended: bool,
}

impl Lines {
    /// The next line, without its newline; `None` once the body has ended.
    /// A last line with no newline is returned too.
    pub async fn next(&mut self) -> Option<Result<&[u8], kube::Error>> {
        loop {
            let decoded = self.answer.decoded.bytes();
            if let Some(length) = memchr::memchr(b'\n', &decoded[self.start..]) {
                let line = self.start..self.start + length;
                self.start = line.end + 1;
                return Some(Ok(&self.answer.decoded.bytes()[line]));
            }
            if self.ended {
                let rest = self.start..decoded.len();
                self.start = rest.end;
                return (!rest.is_empty()).then(|| Ok(&self.answer.decoded.bytes()[rest]));
            }
            // Only part of a line is left: keep it, drop what was read.
            match self.answer.read_more(std::mem::take(&mut self.start)).await {
                Ok(more) => self.ended = !more,
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

/// A protobuf watch read frame by frame.
pub struct Frames {
    answer: Answer,
    /// Where the next frame's length starts in the decoded bytes.
    start: usize,
}

impl Frames {
    /// The next frame, without its length; `None` once the body has ended
    /// between frames. A body that ends inside a frame is an error.
    pub async fn next(&mut self) -> Option<Result<&[u8], kube::Error>> {
        loop {
            let decoded = self.answer.decoded.bytes();
            let buffered = &decoded[self.start..];
            if let Some(length) = buffered.first_chunk::<4>().map(|length| u32::from_be_bytes(*length) as usize) {
                if length > MAX_FRAME {
                    let error = format!("a watch frame of {length} bytes, over the {MAX_FRAME} allowed");
                    return Some(Err(kube::Error::ReadEvents(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        error,
                    ))));
                }
                if buffered.len() >= 4 + length {
                    let frame = self.start + 4..self.start + 4 + length;
                    self.start = frame.end;
                    return Some(Ok(&self.answer.decoded.bytes()[frame]));
                }
            }
            // Only part of a frame is left: keep it, drop what was read.
            match self.answer.read_more(std::mem::take(&mut self.start)).await {
                Ok(true) => {}
                Ok(false) if self.answer.decoded.bytes().is_empty() => return None,
                Ok(false) => {
                    let cut = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the watch ended inside a frame");
                    return Some(Err(kube::Error::ReadEvents(cut)));
                }
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use flate2::Compression;
    use flate2::write::GzEncoder;

    use super::*;

    fn gzip(member: &[u8]) -> Vec<u8> {
        let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
        encoder.write_all(member).unwrap();
        encoder.finish().unwrap()
    }

    /// A forbidden list answered in protobuf, as the API server answers a
    /// built-in kind's list: `k8s\0`, `runtime.Unknown`, `metav1.Status`.
    fn protobuf_forbidden() -> Vec<u8> {
        use prost::encoding::{bytes, int32, string};
        let mut status = Vec::new();
        string::encode(2, &"Failure".to_string(), &mut status);
        string::encode(3, &"configmaps is forbidden: User \"nobody\" cannot list resource".to_string(), &mut status);
        string::encode(4, &"Forbidden".to_string(), &mut status);
        int32::encode(6, &403, &mut status);
        let mut type_meta = Vec::new();
        string::encode(1, &"v1".to_string(), &mut type_meta);
        string::encode(2, &"Status".to_string(), &mut type_meta);
        let mut answer = b"k8s\0".to_vec();
        bytes::encode(1, &type_meta, &mut answer);
        bytes::encode(2, &status, &mut answer);
        answer
    }

    #[test]
    fn an_error_answered_in_protobuf_should_read_as_its_status() {
        let status = error_status(&protobuf_forbidden(), true, 403);
        assert_eq!(status.message, "configmaps is forbidden: User \"nobody\" cannot list resource");
        assert_eq!((status.reason.as_str(), status.code), ("Forbidden", 403));
    }

    #[test]
    fn an_error_that_is_no_status_should_keep_readable_text_and_the_code() {
        let status = error_status(b"404 page not found\n", false, 404);
        assert_eq!((status.message.as_str(), status.code), ("404 page not found", 404));
        let garbled = error_status(b"k8s\0\x0c\x02not a status", true, 500);
        assert!(!garbled.message.chars().any(char::is_control), "{:?}", garbled.message);
        assert_eq!(garbled.code, 500);
    }

    /// The lines of a body that arrives in `chunks`, decoded as `gzip` says.
    async fn lines_of(chunks: Vec<Vec<u8>>, gzip: bool) -> Vec<String> {
        let chunks = futures_util::stream::iter(chunks.into_iter().map(|chunk| Ok(Bytes::from(chunk)))).boxed();
        let mut lines = Answer { chunks, decoded: Decoded::new(gzip), protobuf: false }.lines();
        let mut out = Vec::new();
        while let Some(line) = lines.next().await {
            out.push(String::from_utf8(line.unwrap().to_vec()).unwrap());
        }
        out
    }

    #[tokio::test]
    async fn lines_should_come_whole_however_the_body_is_cut() {
        let body = b"{\"a\":1}\n{\"b\":2}\n\n{\"c\":3}".to_vec();
        for cut in 0..body.len() {
            let chunks = vec![body[..cut].to_vec(), body[cut..].to_vec()];
            assert_eq!(lines_of(chunks, false).await, ["{\"a\":1}", "{\"b\":2}", "", "{\"c\":3}"], "cut at {cut}");
        }
    }

    #[tokio::test]
    async fn a_watch_sent_as_one_gzip_member_per_event_should_be_read_in_full() {
        let events: Vec<String> =
            (0..50).map(|i| format!("{{\"type\":\"ADDED\",\"object\":{{\"n\":{i}}}}}\n")).collect();
        let wire: Vec<u8> = events.iter().flat_map(|event| gzip(event.as_bytes())).collect();
        // Cut into pieces that straddle the members' boundaries.
        let chunks: Vec<Vec<u8>> = wire.chunks(7).map(<[u8]>::to_vec).collect();
        let lines = lines_of(chunks, true).await;
        assert_eq!(lines.len(), 50, "a decoder that stops after the first member reads 1");
        assert_eq!(lines[49], events[49].trim_end());
    }

    #[tokio::test]
    async fn each_event_should_be_read_as_soon_as_its_member_arrives() {
        let member = gzip(b"{\"type\":\"BOOKMARK\"}\n");
        // A watch that then stays quiet: nothing more ever comes.
        let chunks =
            futures_util::stream::iter([Ok(Bytes::from(member))]).chain(futures_util::stream::pending()).boxed();
        let mut lines = Answer { chunks, decoded: Decoded::new(true), protobuf: false }.lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(5), lines.next()).await;
        let line = line.expect("the event is read without waiting for the next").unwrap().unwrap();
        assert_eq!(line, b"{\"type\":\"BOOKMARK\"}");
    }

    /// The frames of a body that arrives in `chunks`; an error ends them.
    async fn frames_of(chunks: Vec<Vec<u8>>, gzip: bool) -> Vec<Result<Vec<u8>, String>> {
        let chunks = futures_util::stream::iter(chunks.into_iter().map(|chunk| Ok(Bytes::from(chunk)))).boxed();
        let mut frames = Answer { chunks, decoded: Decoded::new(gzip), protobuf: true }.frames();
        let mut out = Vec::new();
        while let Some(frame) = frames.next().await {
            let ended = frame.is_err();
            out.push(frame.map(<[u8]>::to_vec).map_err(|err| err.to_string()));
            if ended {
                break;
            }
        }
        out
    }

    fn framed(frames: &[&[u8]]) -> Vec<u8> {
        frames.iter().flat_map(|frame| [&(frame.len() as u32).to_be_bytes()[..], frame].concat()).collect()
    }

    #[tokio::test]
    async fn frames_should_come_whole_however_the_body_is_cut() {
        let body = framed(&[b"first", b"", b"third one"]);
        for cut in 0..body.len() {
            let chunks = vec![body[..cut].to_vec(), body[cut..].to_vec()];
            let frames: Vec<Vec<u8>> = frames_of(chunks, false).await.into_iter().map(Result::unwrap).collect();
            assert_eq!(frames, [b"first".to_vec(), vec![], b"third one".to_vec()], "cut at {cut}");
        }
        let gzipped: Vec<u8> = [b"a".as_slice(), b"bc"].iter().flat_map(|frame| gzip(&framed(&[frame]))).collect();
        let frames = frames_of(gzipped.chunks(3).map(<[u8]>::to_vec).collect(), true).await;
        assert_eq!(frames, [Ok(b"a".to_vec()), Ok(b"bc".to_vec())]);
    }

    #[tokio::test]
    async fn a_body_cut_inside_a_frame_or_with_a_huge_length_should_be_an_error() {
        let body = framed(&[b"whole", b"cut short"]);
        let frames = frames_of(vec![body[..body.len() - 2].to_vec()], false).await;
        assert_eq!(frames[0], Ok(b"whole".to_vec()));
        assert!(frames[1].as_ref().is_err_and(|err| err.contains("inside a frame")), "{frames:?}");
        let huge = frames_of(vec![u32::MAX.to_be_bytes().to_vec()], false).await;
        assert!(huge[0].as_ref().is_err_and(|err| err.contains("over the")), "{huge:?}");
    }

    #[tokio::test]
    async fn a_corrupt_gzip_body_should_be_an_error_not_an_end() {
        let mut wire = gzip(b"{\"a\":1}\n");
        wire.extend_from_slice(b"not gzip at all");
        let chunks = futures_util::stream::iter([Ok(Bytes::from(wire))]).boxed();
        let mut lines = Answer { chunks, decoded: Decoded::new(true), protobuf: false }.lines();
        let first = lines.next().await.unwrap();
        assert!(first.is_err() || lines.next().await.is_some_and(|line| line.is_err()));
    }
}
