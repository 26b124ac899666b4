//! The two forms a SotW response leaves the server in: a `DiscoveryResponse` message (its
//! `resources` are `Any`s sharing the stored bodies) or the encoded message, assembled from
//! the frames the store encoded once per resource. The choice of what to send has one home
//! (`sotw.rs`); it writes the chosen resources into a [`ResourceSink`], and each form is a
//! sink.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::encoding::WireType;
use prost::Message;

use super::store::StoredResource;
use crate::message::{Response, Variant};
use crate::pb::discovery::DiscoveryResponse;
use crate::pb::google::protobuf::{Any, TypeUrl};

/// Where the resources of a SotW response go, in order.
pub(crate) trait ResourceSink {
    /// Called once, before any resource: the response's `version_info`, how many
    /// resources follow and how many encoded bytes they take (a capacity hint).
    fn begin(&mut self, version: &str, count: usize, frame_bytes: usize);
    /// A resource as stored (its body, or its TTL wrapper).
    fn stored(&mut self, resource: &StoredResource, type_url: &TypeUrl);
    /// Any other resource (a heartbeat, built on the spot).
    fn any(&mut self, any: Any);
}

/// The message form: `Any`s that share the stored bodies.
impl ResourceSink for Vec<Any> {
    fn begin(&mut self, _version: &str, count: usize, _frame_bytes: usize) {
        self.reserve(count);
    }
    fn stored(&mut self, resource: &StoredResource, type_url: &TypeUrl) {
        self.push(resource.sotw_any(type_url));
    }
    fn any(&mut self, any: Any) {
        self.push(any);
    }
}

/// The encoded form: field 1 (`version_info`), then the frames (field 2), then the other
/// fields; byte for byte what prost writes for the same message, since prost writes fields
/// in number order and a frame is prost's own encoding of the `Any`.
#[derive(Debug, Default)]
pub(crate) struct WireSink {
    buf: Vec<u8>,
}

impl ResourceSink for WireSink {
    fn begin(&mut self, version: &str, _count: usize, frame_bytes: usize) {
        // version_info, the frames, then type_url, nonce and control plane (small).
        self.buf.reserve(
            frame_bytes
                .saturating_add(version.len())
                .saturating_add(256),
        );
        if !version.is_empty() {
            // What prost writes for a string field 1, without copying it into a String.
            prost::encoding::encode_key(1, WireType::LengthDelimited, &mut self.buf);
            prost::encoding::encode_varint(version.len() as u64, &mut self.buf);
            self.buf.extend_from_slice(version.as_bytes());
        }
    }
    fn stored(&mut self, resource: &StoredResource, _type_url: &TypeUrl) {
        self.buf.extend_from_slice(resource.sotw_frame());
    }
    fn any(&mut self, any: Any) {
        prost::encoding::message::encode(2, &any, &mut self.buf);
    }
}

impl WireSink {
    /// Appends every field of `rest` but `version_info` and `resources` (fields 3 and up)
    /// and returns the encoded response.
    pub(crate) fn finish(mut self, mut rest: DiscoveryResponse) -> Bytes {
        rest.version_info = String::new();
        rest.resources = Vec::new();
        // Writing into a Vec cannot run out of room.
        let _ = rest.encode(&mut self.buf);
        Bytes::from(self.buf)
    }
}

/// A response already encoded for the wire, from
/// [`ServerStream::poll_response_encoded`](super::ServerStream::poll_response_encoded):
/// `bytes` is exactly `response.encode_to_vec()` of the response
/// [`poll_response`](super::ServerStream::poll_response) would have returned, built without
/// the message (SotW bodies are copied once from the frames the store encoded when they
/// were set). Hand `bytes` to a codec that writes pre-encoded messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodedResponse {
    /// SotW (`DiscoveryResponse`) or incremental (`DeltaDiscoveryResponse`).
    pub variant: Variant,
    /// The response's type URL.
    pub type_url: String,
    /// The response's nonce.
    pub nonce: String,
    /// SotW `version_info`, incremental `system_version_info`.
    pub version: String,
    /// The encoded message.
    pub bytes: Bytes,
}

impl EncodedResponse {
    /// The encoded form of a response built as a message (incremental responses, whose
    /// resources carry per-stream fields, are encoded whole).
    pub(crate) fn of(response: &Response) -> EncodedResponse {
        match response {
            Response::Sotw(r) => EncodedResponse {
                variant: Variant::Sotw,
                type_url: r.type_url.clone(),
                nonce: r.nonce.clone(),
                version: r.version_info.clone(),
                bytes: Bytes::from(r.encode_to_vec()),
            },
            Response::Delta(r) => EncodedResponse {
                variant: Variant::Delta,
                type_url: r.type_url.clone(),
                nonce: r.nonce.clone(),
                version: r.system_version_info.clone(),
                bytes: Bytes::from(r.encode_to_vec()),
            },
        }
    }

    /// Decodes the bytes back into the message (tests, logs).
    pub fn decode(&self) -> Result<Response, prost::DecodeError> {
        Ok(match self.variant {
            Variant::Sotw => Response::Sotw(DiscoveryResponse::decode(self.bytes.clone())?),
            Variant::Delta => Response::Delta(
                crate::pb::discovery::DeltaDiscoveryResponse::decode(self.bytes.clone())?,
            ),
        })
    }
}
