//! The two forms a SotW response leaves the server in: a `DiscoveryResponse` message (its
//! `resources` are `Any`s sharing the stored bodies) or the encoded message, assembled from
//! the frames the store encoded once per resource. The choice of what to send has one home
//! (`sotw.rs`); it writes the chosen resources into a [`ResourceSink`], and each form is a
//! sink. An incremental response is built as a message, but for one case: a wildcard
//! stream sent every resource of a type, which the encoded form takes as one piece the store
//! shares ([`DeltaSink`]).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::{Buf, BufMut, Bytes};
use prost::encoding::WireType;
use prost::Message;

use super::frame::FramePrefix;
use super::store::{ResourceStore, StoredResource};
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
    /// Every resource of `type_url`, as stored, in the store's order, when the sink can
    /// take them as one piece the store shares between streams (then it begins the
    /// response itself and returns `true`); `false` leaves the caller to `begin` and write
    /// them one by one.
    fn full_state(&mut self, _version: &str, _store: &ResourceStore, _type_url: &str) -> bool {
        false
    }
}

/// Where an incremental response may take its resources as one shared piece.
pub(crate) trait DeltaSink {
    /// Every resource of `type_url` as stored, with its body, in name order, as one piece
    /// the store shares between streams: the sink begins the response itself (field 1 is
    /// `version`) and returns `true`; `false` (the message form, or a type with a TTL)
    /// leaves the caller to list the resources in the message.
    fn full_state(&mut self, version: &str, store: &ResourceStore, type_url: &str) -> bool;
}

/// The message form of an incremental response lists every resource.
pub(crate) struct Listed;

impl DeltaSink for Listed {
    fn full_state(&mut self, _version: &str, _store: &ResourceStore, _type_url: &str) -> bool {
        false
    }
}

impl DeltaSink for WireSink {
    fn full_state(&mut self, version: &str, store: &ResourceStore, type_url: &str) -> bool {
        match store.shared_delta_frames(type_url) {
            Some(frames) => {
                self.share(version, frames);
                true
            }
            None => false,
        }
    }
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
/// in number order and a frame is prost's own encoding of the `Any`. A full state the store
/// shares is not copied: it becomes the middle chunk of the [`EncodedBytes`].
#[derive(Debug, Default)]
pub(crate) struct WireSink {
    buf: Vec<u8>,
    /// The head (everything before the shared frames) and the shared frames.
    shared: Option<(Bytes, Bytes)>,
    /// The frame prefix of the response's type, once a stored resource was written.
    prefix: Option<Option<FramePrefix>>,
}

impl ResourceSink for WireSink {
    fn begin(&mut self, version: &str, _count: usize, frame_bytes: usize) {
        // version_info, the frames, then type_url, nonce and control plane (small).
        self.buf.reserve(
            frame_bytes
                .saturating_add(version.len())
                .saturating_add(256),
        );
        self.version_field(version);
    }
    fn stored(&mut self, resource: &StoredResource, type_url: &TypeUrl) {
        // Every resource of a response is of its one type: the prefix is encoded once.
        let prefix = self
            .prefix
            .get_or_insert_with(|| FramePrefix::new(type_url));
        resource.write_sotw_frame(type_url, prefix.as_ref(), &mut self.buf);
    }
    fn any(&mut self, any: Any) {
        prost::encoding::message::encode(2, &any, &mut self.buf);
    }
    fn full_state(&mut self, version: &str, store: &ResourceStore, type_url: &str) -> bool {
        let Some(frames) = store.shared_frames(type_url) else {
            return false;
        };
        self.share(version, frames);
        true
    }
}

/// The encoded size of `version_info` (none when empty, as prost writes it).
fn version_field_len(version: &str) -> usize {
    if version.is_empty() {
        return 0;
    }
    prost::encoding::key_len(1)
        + prost::encoding::encoded_len_varint(version.len() as u64)
        + version.len()
}

impl WireSink {
    /// Begins the response with field 1 and `frames`, shared, as field 2.
    fn share(&mut self, version: &str, frames: Bytes) {
        // Exactly field 1's size, for the same reason as the tail's.
        self.buf = Vec::with_capacity(version_field_len(version));
        self.version_field(version);
        let head = Bytes::from(core::mem::take(&mut self.buf));
        self.shared = Some((head, frames));
    }

    /// Whether the sink took a full state the store shares.
    pub(crate) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Field 1, `version_info`: what prost writes for a string field, without copying it
    /// into a `String`.
    fn version_field(&mut self, version: &str) {
        if !version.is_empty() {
            prost::encoding::encode_key(1, WireType::LengthDelimited, &mut self.buf);
            prost::encoding::encode_varint(version.len() as u64, &mut self.buf);
            self.buf.extend_from_slice(version.as_bytes());
        }
    }

    /// Appends every field of `rest` past fields 1 and 2 (the version and the resources:
    /// the sink wrote those, and `rest` must hold neither) and returns the encoded
    /// response. Both responses number their fields so.
    pub(crate) fn finish(mut self, rest: &impl Message) -> EncodedBytes {
        if self.shared.is_some() {
            // Exactly the tail's size: a full `Vec` becomes `Bytes` without another
            // allocation.
            self.buf.reserve_exact(rest.encoded_len());
        }
        // Writing into a Vec cannot run out of room.
        let _ = rest.encode(&mut self.buf);
        let last = Bytes::from(self.buf);
        match self.shared {
            Some((head, frames)) => EncodedBytes::from_parts([head, frames, last]),
            None => EncodedBytes::from(last),
        }
    }
}

/// An encoded message as up to three chunks, to be written in order: the response's own
/// head, the frames of a full state the store encoded once and shares between every stream
/// that sends it (a reference count, not a copy), and its tail (type URL, nonce, ...).
///
/// It is a [`Buf`]: hand it to `BufMut::put` (one copy into a codec's buffer, as tonic's
/// encoders take it), to [`Buf::chunks_vectored`] for a vectored write, or to
/// `prost::Message::decode`. [`EncodedBytes::to_bytes`] makes it contiguous (free when it is
/// one chunk: every response but a shared full state).
/// Equality compares the bytes, not how they are split.
#[derive(Clone, Debug, Default)]
pub struct EncodedBytes {
    parts: [Bytes; 3],
}

impl EncodedBytes {
    fn from_parts(parts: [Bytes; 3]) -> EncodedBytes {
        EncodedBytes { parts }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum()
    }

    /// Whether there are no bytes (an empty message).
    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(Bytes::is_empty)
    }

    /// The non-empty chunks, in order.
    pub fn chunks(&self) -> impl Iterator<Item = &Bytes> {
        self.parts.iter().filter(|p| !p.is_empty())
    }

    /// The bytes in one piece: a clone of the chunk when there is one, else a copy.
    pub fn to_bytes(&self) -> Bytes {
        let mut chunks = self.chunks();
        match (chunks.next(), chunks.next()) {
            (None, _) => Bytes::new(),
            (Some(only), None) => only.clone(),
            _ => Bytes::from(self.to_vec()),
        }
    }

    /// The bytes copied into a vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        for chunk in self.chunks() {
            out.extend_from_slice(chunk);
        }
        out
    }

    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.chunks().flat_map(|c| c.iter().copied())
    }
}

impl From<Bytes> for EncodedBytes {
    fn from(bytes: Bytes) -> EncodedBytes {
        EncodedBytes::from_parts([bytes, Bytes::new(), Bytes::new()])
    }
}

impl From<EncodedBytes> for Bytes {
    fn from(encoded: EncodedBytes) -> Bytes {
        encoded.to_bytes()
    }
}

impl Buf for EncodedBytes {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.chunks().next().map_or(&[], |c| c.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.len(), "advance past the end of an EncodedBytes");
        for part in &mut self.parts {
            let here = cnt.min(part.len());
            part.advance(here);
            cnt -= here;
        }
    }

    #[cfg(feature = "std")]
    fn chunks_vectored<'a>(&'a self, dst: &mut [std::io::IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, chunk) in dst.iter_mut().zip(self.chunks()) {
            *slot = std::io::IoSlice::new(chunk);
            n += 1;
        }
        n
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        // One chunk long enough: a slice of it, no copy.
        if let Some(first) = self.parts.iter_mut().find(|p| !p.is_empty()) {
            if first.len() >= len {
                return first.split_to(len);
            }
        }
        let mut out = bytes::BytesMut::with_capacity(len);
        out.put((&mut *self).take(len));
        out.freeze()
    }
}

impl PartialEq for EncodedBytes {
    fn eq(&self, other: &EncodedBytes) -> bool {
        self.len() == other.len() && self.bytes().eq(other.bytes())
    }
}

impl Eq for EncodedBytes {}

impl PartialEq<[u8]> for EncodedBytes {
    fn eq(&self, other: &[u8]) -> bool {
        self.len() == other.len() && self.bytes().eq(other.iter().copied())
    }
}

impl PartialEq<Vec<u8>> for EncodedBytes {
    fn eq(&self, other: &Vec<u8>) -> bool {
        *self == other[..]
    }
}

impl PartialEq<Bytes> for EncodedBytes {
    fn eq(&self, other: &Bytes) -> bool {
        *self == other[..]
    }
}

/// A response already encoded for the wire, from
/// [`ServerStream::poll_response_encoded`](super::ServerStream::poll_response_encoded):
/// `bytes` is exactly `response.encode_to_vec()` of the response
/// [`poll_response`](super::ServerStream::poll_response) would have returned, built without
/// the message: SotW bodies are copied once from the frames the store encoded when they
/// were set, and a wildcard full state (every resource of a type, none with a TTL; for
/// incremental, to a stream that holds nothing yet) is not copied at all, but shared by
/// every stream that sends it at that revision. Hand `bytes` to a codec that writes
/// pre-encoded messages.
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
    /// The encoded message: one chunk, or three when a full state the store shares is its
    /// middle (see [`EncodedBytes`]).
    pub bytes: EncodedBytes,
}

impl EncodedResponse {
    /// The encoded form of a response built as a message (an incremental response but a
    /// shared full state: its resources are chosen per stream, and encoded whole).
    pub(crate) fn of(response: &Response) -> EncodedResponse {
        match response {
            Response::Sotw(r) => EncodedResponse {
                variant: Variant::Sotw,
                type_url: r.type_url.clone(),
                nonce: r.nonce.clone(),
                version: r.version_info.clone(),
                bytes: Bytes::from(r.encode_to_vec()).into(),
            },
            Response::Delta(r) => EncodedResponse {
                variant: Variant::Delta,
                type_url: r.type_url.clone(),
                nonce: r.nonce.clone(),
                version: r.system_version_info.clone(),
                bytes: Bytes::from(r.encode_to_vec()).into(),
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
