//! The response body of a stream the server does not compress: each encoded response
//! written as its gRPC frame from its own buffers, then the stream's status as trailers.
//!
//! Why not tonic's codec: an encoder writes into tonic's buffer, so every response was
//! copied once more, into a fresh allocation of its size. A shared full state (one buffer
//! the store encoded for every stream at a revision) became one copy per stream: in a
//! storm of 5 000 clients of a 150 KB state, that copy and the pages it faulted in were
//! 11 % of the process (`benches/README.md`, "Delta storms"). Here the frame's 5-byte
//! prefix is the only new buffer; the response's chunks go to HTTP/2 as they are (reference
//! counts), and HTTP/2 writes large data frames from them without copying.
//!
//! What tonic's server body does, this does too: the prefix (no compression flag, the
//! length, big-endian), `grpc-status: 0` trailers when the responses end, the status as
//! trailers when the stream ends with one. A compressed stream keeps tonic's codec.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http_body::Frame;
use tokio::sync::mpsc;
use tonic::codegen::http::HeaderMap;
use tonic::Status;
use xds_sansio::server::EncodedBytes;

/// The length prefix of a gRPC message: a compression flag and a 32-bit length.
const PREFIX: usize = 5;
/// A first chunk up to this size is copied behind the prefix (one data frame, not two).
const MERGED: usize = 512;

/// A stream's responses as an HTTP body (see the [module docs](self)).
pub(crate) struct Responses {
    source: mpsc::Receiver<Result<EncodedBytes, Status>>,
    /// The rest of the message being written, chunk by chunk.
    pending: VecDeque<Bytes>,
    /// The trailers went out.
    ended: bool,
}

impl Responses {
    pub(crate) fn new(source: mpsc::Receiver<Result<EncodedBytes, Status>>) -> Responses {
        Responses {
            source,
            pending: VecDeque::new(),
            ended: false,
        }
    }

    /// Queues `message` as one gRPC frame; an error when its length does not fit the
    /// prefix.
    fn queue(&mut self, message: &EncodedBytes) -> Result<(), Status> {
        let len = u32::try_from(message.len()).map_err(|_| {
            Status::resource_exhausted(format!(
                "a response of {} bytes does not fit a gRPC frame",
                message.len()
            ))
        })?;
        let mut chunks = message.chunks().peekable();
        let first = chunks.next_if(|c| c.len() <= MERGED);
        let mut head = BytesMut::with_capacity(PREFIX + first.map_or(0, Bytes::len));
        head.put_u8(0);
        head.put_u32(len);
        if let Some(first) = first {
            head.extend_from_slice(first);
        }
        self.pending.push_back(head.freeze());
        self.pending.extend(chunks.cloned());
        Ok(())
    }

    /// The last frame: the stream's status as trailers.
    fn end(&mut self, status: &Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.ended = true;
        // As tonic's server body writes them (its own `to_header_map` is private).
        let mut trailers = HeaderMap::with_capacity(3);
        Poll::Ready(Some(
            status
                .add_header(&mut trailers)
                .map(|()| Frame::trailers(trailers)),
        ))
    }
}

impl http_body::Body for Responses {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        if let Some(chunk) = this.pending.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(chunk))));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        match ready!(this.source.poll_recv(cx)) {
            Some(Ok(message)) => match this.queue(&message) {
                Ok(()) => match this.pending.pop_front() {
                    Some(chunk) => Poll::Ready(Some(Ok(Frame::data(chunk)))),
                    None => this.end(&Status::internal("an empty frame")),
                },
                Err(status) => this.end(&status),
            },
            Some(Err(status)) => this.end(&status),
            None => this.end(&Status::ok("")),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body;
    use http_body_util::BodyExt;
    use prost::Message;
    use xds_sansio::pb::discovery::DiscoveryResponse;

    /// The encoded response of `version`, one chunk.
    fn encoded(version: &str) -> Bytes {
        let response = DiscoveryResponse {
            version_info: version.into(),
            ..DiscoveryResponse::default()
        };
        Bytes::from(response.encode_to_vec())
    }

    /// The body's data frames and its trailers; the body ends after them.
    async fn drain(mut body: Responses) -> (Vec<Bytes>, HeaderMap) {
        let mut data = Vec::new();
        loop {
            let frame = body.frame().await.expect("a frame").expect("no error");
            match frame.into_data() {
                Ok(chunk) => data.push(chunk),
                Err(frame) => {
                    let trailers = frame.into_trailers().expect("trailers");
                    assert!(body.is_end_stream());
                    assert!(body.frame().await.is_none());
                    return (data, trailers);
                }
            }
        }
    }

    #[tokio::test]
    async fn messages_are_framed_as_grpc_then_the_status_ends_the_stream() {
        let (tx, rx) = mpsc::channel(4);
        let big = "v".repeat(2_000);
        let big_wire = encoded(&big);
        tx.send(Ok(encoded("1").into())).await.unwrap();
        tx.send(Ok(big_wire.clone().into())).await.unwrap();
        drop(tx);
        let (frames, trailers) = drain(Responses::new(rx)).await;
        assert_eq!(trailers.get("grpc-status").unwrap(), "0");
        // The small message is one data frame with its prefix; the large one is its prefix,
        // then its own buffer (not a copy).
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[2].as_ptr(), big_wire.as_ptr());
        let data: Vec<u8> = frames.concat();
        let mut at = 0;
        for version in ["1", big.as_str()] {
            assert_eq!(data[at], 0, "not compressed");
            let len = u32::from_be_bytes(data[at + 1..at + 5].try_into().unwrap()) as usize;
            let message = DiscoveryResponse::decode(&data[at + 5..at + 5 + len]).unwrap();
            assert_eq!(message.version_info, version);
            at += 5 + len;
        }
        assert_eq!(at, data.len());
    }

    #[tokio::test]
    async fn an_error_ends_the_stream_with_its_status_as_trailers() {
        let (tx, rx) = mpsc::channel(4);
        tx.send(Ok(encoded("1").into())).await.unwrap();
        tx.send(Err(Status::unavailable("shutting down")))
            .await
            .unwrap();
        let (frames, trailers) = drain(Responses::new(rx)).await;
        let status = Status::from_header_map(&trailers).expect("a status");
        assert_eq!(status.code(), tonic::Code::Unavailable);
        assert_eq!(status.message(), "shutting down");
        assert_eq!(frames.concat().len(), 5 + encoded("1").len());
    }
}
