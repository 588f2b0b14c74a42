//! A gRPC codec for requests encoded ahead of the call: the bytes go out as
//! they are, so a request sent again (to another gateway, or after a
//! refusal) is neither cloned nor encoded again. Answers decode as usual.

use std::marker::PhantomData;

use bytes::{BufMut, Bytes};
use tonic::Status;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic_prost::ProstDecoder;

/// Sends an encoded protobuf message (`Bytes`), reads a `U`.
#[derive(Debug)]
pub(crate) struct Encoded<U>(PhantomData<fn() -> U>);

impl<U> Default for Encoded<U> {
    fn default() -> Self {
        Encoded(PhantomData)
    }
}

impl<U> Codec for Encoded<U>
where
    U: prost::Message + Default + Send + 'static,
{
    type Encode = Bytes;
    type Decode = U;
    type Encoder = Verbatim;
    type Decoder = ProstDecoder<U>;

    fn encoder(&mut self) -> Verbatim {
        Verbatim
    }

    fn decoder(&mut self) -> ProstDecoder<U> {
        ProstDecoder::default()
    }
}

/// Writes the message's bytes as they are.
#[derive(Debug)]
pub(crate) struct Verbatim;

impl Encoder for Verbatim {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}
