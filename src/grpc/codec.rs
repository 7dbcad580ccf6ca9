//! The protobuf codec of every service: tonic-prost's, except that a request that does not decode (a string that is not UTF-8, a truncated field, random bytes) answers INVALID_ARGUMENT with the decoder's message, not INTERNAL.

use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};
use tonic::{Code, Status};
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};

/// Wired into the generated services by `build.rs` (`codec_path`), so it
/// covers every unary request and every message of the `Work` stream.
#[derive(Debug, Clone)]
pub struct WireCodec<T, U>(ProstCodec<T, U>);

impl<T, U> Default for WireCodec<T, U> {
    fn default() -> Self {
        WireCodec(ProstCodec::default())
    }
}

impl<T, U> Codec for WireCodec<T, U>
where
    T: prost::Message + Send + 'static,
    U: prost::Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = WireDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        self.0.encoder()
    }

    fn decoder(&mut self) -> Self::Decoder {
        WireDecoder(self.0.decoder())
    }
}

/// tonic-prost's decoder, its decode errors answered as the caller's fault.
#[derive(Debug, Clone)]
pub struct WireDecoder<U>(ProstDecoder<U>);

impl<U: prost::Message + Default> Decoder for WireDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|status| match status.code() {
            // The only error a prost decode gives: the bytes are not a valid message of this type.
            Code::Internal => Status::invalid_argument(format!("the message does not decode: {}", status.message())),
            _ => status,
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
