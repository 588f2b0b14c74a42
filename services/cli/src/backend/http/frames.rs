//! Nomad's stream frames (`{"Offset":…,"Data":"<base64>","File":…}` one
//! after another) read into the bytes they carry, as they arrive.

use base64::Engine;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::Value;

use super::client::unexpected_body;
use crate::backend::{ByteStream, Result};

/// Splits the complete frames off the front of `buf`, returning their data
/// (frames without data, such as heartbeats and file events, give none).
fn take_frames(buf: &mut Vec<u8>, address: &str) -> Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut consumed = 0;
    let mut frames = serde_json::Deserializer::from_slice(buf).into_iter::<Value>();
    loop {
        match frames.next() {
            None => {
                consumed = buf.len();
                break;
            }
            Some(Ok(frame)) => {
                consumed = frames.byte_offset();
                if let Some(text) = frame.get("Data").and_then(Value::as_str) {
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .map_err(|e| unexpected_body(address, &format!("a frame's Data: {e}")))?;
                    data.extend_from_slice(&bytes);
                }
            }
            // The rest is a frame still arriving.
            Some(Err(e)) if e.is_eof() => break,
            Some(Err(e)) => return Err(unexpected_body(address, &format!("a frame: {e}"))),
        }
    }
    buf.drain(..consumed);
    Ok(data)
}

/// The data of the frames of `body`.
pub fn data(body: BoxStream<'static, Result<Bytes>>, address: String) -> ByteStream {
    futures::stream::unfold(
        (body, Vec::new(), address, false),
        |(mut body, mut buf, address, done)| async move {
            if done {
                return None;
            }
            loop {
                match body.next().await {
                    None => return None,
                    Some(Err(e)) => return Some((Err(e), (body, buf, address, true))),
                    Some(Ok(chunk)) => {
                        buf.extend_from_slice(&chunk);
                        match take_frames(&mut buf, &address) {
                            Ok(data) if data.is_empty() => continue,
                            Ok(data) => return Some((Ok(data), (body, buf, address, false))),
                            Err(e) => return Some((Err(e), (body, buf, address, true))),
                        }
                    }
                }
            }
        },
    )
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_are_joined() {
        let mut buf = br#"{"Data":"aGk=","File":"x"}{"Offset":5}{"Da"#.to_vec();
        assert_eq!(take_frames(&mut buf, "a").unwrap(), b"hi");
        assert_eq!(buf, br#"{"Da"#);
        buf.extend_from_slice(br#"ta":"IQ=="}"#);
        assert_eq!(take_frames(&mut buf, "a").unwrap(), b"!");
        assert!(buf.is_empty());
        let mut bad = b"{\"Data\": 3} nonsense".to_vec();
        assert!(take_frames(&mut bad, "a").is_err());
    }
}
