//! A resource's SotW *frame*: the `resources` entry of an encoded `DiscoveryResponse`
//! (field 2's tag, its length, then the `Any`), written straight from the type URL and the
//! body so the store need not keep one per resource. Byte for byte what prost writes for
//! the same `Any`: fields in number order, empty ones left out.

use alloc::vec::Vec;
use prost::encoding::{encode_varint, encoded_len_varint};

/// The tag of a length-delimited field 1 (`Any.type_url`).
const TAG_1: u8 = 0x0a;
/// The tag of a length-delimited field 2 (`DiscoveryResponse.resources`, `Any.value`).
const TAG_2: u8 = 0x12;

/// The encoded length of a length-delimited field of `len` bytes; none when empty (proto3
/// leaves an empty string or bytes field out).
fn field_len(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        1 + encoded_len_varint(len as u64) + len
    }
}

/// The length of the `Any` of `type_url` and `value`.
fn any_len(type_url: &str, value: &[u8]) -> usize {
    field_len(type_url.len()) + field_len(value.len())
}

/// The encoded length of the frame of an `Any` of `type_url` wrapping `value`.
pub(crate) fn frame_len(type_url: &str, value: &[u8]) -> usize {
    let any = any_len(type_url, value);
    1 + encoded_len_varint(any as u64) + any
}

/// Appends the frame of an `Any` of `type_url` wrapping `value` to `out`, through prost's
/// varint encoder: the way of the few frames a [`FramePrefix`] does not write (a TTL's
/// wrapper, a type URL too long for its room; about 180 instructions a frame).
pub(crate) fn write_frame(type_url: &str, value: &[u8], out: &mut Vec<u8>) {
    let any = any_len(type_url, value);
    out.reserve(1 + encoded_len_varint(any as u64) + any);
    out.push(TAG_2);
    encode_varint(any as u64, out);
    if !type_url.is_empty() {
        out.push(TAG_1);
        encode_varint(type_url.len() as u64, out);
        out.extend_from_slice(type_url.as_bytes());
    }
    if !value.is_empty() {
        out.push(TAG_2);
        encode_varint(value.len() as u64, out);
        out.extend_from_slice(value);
    }
}

/// The room of a [`FramePrefix`]: type URLs up to 94 bytes (every xDS type's is shorter;
/// the longest, SDS's, is 68).
const PREFIX_ROOM: usize = 96;

/// The room of a head in a [`FrameHeads`] block: a tag and a varint of up to 35 bits.
const HEAD_ROOM: usize = 6;
/// A [`FrameHeads`] block: the head, a spare byte, then the head's length (copied whole,
/// one 8-byte move).
const BLOCK: usize = 8;
/// Where a block keeps its head's length.
const LEN_AT: usize = BLOCK - 1;
/// Where the first block keeps the length of the type URL field its `Any` length counts.
const PREFIX_AT: usize = BLOCK - 2;
// The safety of `FramePrefix::write` rests on every block fitting the prefix's room.
const _: () = assert!(BLOCK <= PREFIX_ROOM && HEAD_ROOM <= PREFIX_AT);

/// What every frame of one type starts its `Any` with: the type URL field, encoded once
/// per build and copied into each frame as one block of fixed size (a few vector moves,
/// no call).
///
/// Why frames are written, not kept: keeping one per resource cost the store 59 bytes of
/// framing (the type URL, in every frame) and a second buffer handle a resource. Writing
/// one through prost's encoder cost a build about 180 instructions a frame (callgrind),
/// against 29 to copy a kept frame, and 113 by hand with the lengths worked out on the
/// spot; with the prefix and each body's [`FrameHeads`] worked out beforehand, a frame is
/// three fixed-size blocks and the body's copy: a full-state build costs 134 instructions
/// a resource against 104 with kept frames (part of it glibc's merging of freed chunks).
#[derive(Debug)]
pub(crate) struct FramePrefix {
    bytes: [u8; PREFIX_ROOM],
    len: usize,
}

/// The tags and lengths of one body's frame, around its type's [`FramePrefix`]: field 2's
/// tag and the `Any`'s length before it, `Any.value`'s tag and length after it. Worked out
/// once, when the body is stored (16 bytes a resource, for two varints a frame less).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FrameHeads {
    /// Field 2's tag and the `Any`'s length; at [`PREFIX_AT`] the length of the type URL
    /// field that length counts (a prefix of another length, a stream answering under
    /// another type URL, writes the frame the slow way).
    before: [u8; BLOCK],
    /// `Any.value`'s tag and length (nothing for an empty body).
    after: [u8; BLOCK],
}

impl FrameHeads {
    /// The heads of the frame of `value` under a type URL of `type_url_len` bytes. When a
    /// varint would not fit (an `Any` of 32 GiB or more) or the type URL's field would not
    /// fit a [`FramePrefix`], heads that do not [`fit`](FrameHeads::fit), not an `Option`:
    /// that would cost 8 bytes a resource.
    pub(crate) fn new(type_url_len: usize, value_len: usize) -> FrameHeads {
        let prefix = field_len(type_url_len);
        let Some(prefix_len) = u8::try_from(prefix)
            .ok()
            .filter(|l| usize::from(*l) <= PREFIX_ROOM)
        else {
            return FrameHeads::UNFIT;
        };
        let any = prefix + field_len(value_len);
        let after = match value_len {
            0 => Some([0; BLOCK]),
            len => head(TAG_2, len),
        };
        match (head(TAG_2, any), after) {
            (Some(mut before), Some(after)) => {
                before[PREFIX_AT] = prefix_len;
                FrameHeads { before, after }
            }
            _ => FrameHeads::UNFIT,
        }
    }

    /// Heads that do not fit: the frame is written another way (a body of 32 GiB, or one
    /// whose frame wraps it in something else, such as a TTL's `Resource`).
    pub(crate) const UNFIT: FrameHeads = FrameHeads {
        before: [0; BLOCK],
        after: [0; BLOCK],
    };

    /// Whether these are the heads of a frame that `prefix` can write
    /// ([`FramePrefix::write`]): its type URL's field is as long as the one they count.
    pub(crate) fn fit(&self, prefix: &FramePrefix) -> bool {
        // A frame always starts with a tag and a length.
        self.before[LEN_AT] != 0 && usize::from(self.before[PREFIX_AT]) == prefix.len
    }
}

/// A block of a tag and the varint of `len`, with how many bytes they take at [`LEN_AT`];
/// `None` past [`HEAD_ROOM`].
fn head(tag: u8, len: usize) -> Option<[u8; BLOCK]> {
    let mut bytes = [0u8; BLOCK];
    let head = bytes.get_mut(..HEAD_ROOM)?;
    let mut value = len as u64;
    let mut at = 1;
    *head.get_mut(0)? = tag;
    while value >= 0x80 {
        *head.get_mut(at)? = (value as u8) | 0x80;
        value >>= 7;
        at += 1;
    }
    *head.get_mut(at)? = value as u8;
    bytes[LEN_AT] = u8::try_from(at + 1).ok()?;
    Some(bytes)
}

impl FramePrefix {
    /// The prefix of `type_url`'s frames; `None` when its field does not fit the room
    /// (then [`write_frame`] writes them).
    pub(crate) fn new(type_url: &str) -> Option<FramePrefix> {
        let len = field_len(type_url.len());
        if len > PREFIX_ROOM {
            return None;
        }
        let mut bytes = [0u8; PREFIX_ROOM];
        if !type_url.is_empty() {
            // Without allocating: a response of one resource works this out too.
            let tag = head(TAG_1, type_url.len())?;
            let tag_len = usize::from(tag[LEN_AT]);
            bytes
                .get_mut(..tag_len)?
                .copy_from_slice(tag.get(..tag_len)?);
            bytes
                .get_mut(tag_len..len)?
                .copy_from_slice(type_url.as_bytes());
        }
        Some(FramePrefix { bytes, len })
    }

    /// Appends the frame of an `Any` of this prefix's type URL wrapping `value` to `out`,
    /// `heads` being [`FrameHeads::new`] of this type URL's length and `value`'s, and
    /// [`fit`](FrameHeads::fit) for it: what [`write_frame`] writes for them.
    #[inline]
    pub(crate) fn write(&self, heads: &FrameHeads, value: &[u8], out: &mut Vec<u8>) {
        debug_assert!(heads.fit(self));
        let before = usize::from(heads.before[LEN_AT]);
        let after = usize::from(heads.after[LEN_AT]);
        let total = before + self.len + after + value.len();
        // Each block is copied whole, past where the next write starts when shorter.
        out.reserve(total + PREFIX_ROOM);
        let start = out.len();
        // SAFETY: `reserve` made room for `total + PREFIX_ROOM` bytes past `start`. Each
        // block starts at most `total` bytes in and is at most `PREFIX_ROOM` bytes long, so
        // every write stays within that room. The position advances by each part's real
        // length, so the parts end exactly `total` bytes in, and the length is set to cover
        // them once all are written: a block's spare bytes are overwritten by the next part
        // or left past the length. `heads`, `self` and `value` are borrowed, so they cannot
        // overlap `out`.
        unsafe {
            let first = out.as_mut_ptr().add(start);
            let mut at = first;
            core::ptr::copy_nonoverlapping(heads.before.as_ptr(), at, BLOCK);
            at = at.add(before);
            core::ptr::copy_nonoverlapping(self.bytes.as_ptr(), at, PREFIX_ROOM);
            at = at.add(self.len);
            core::ptr::copy_nonoverlapping(heads.after.as_ptr(), at, BLOCK);
            at = at.add(after);
            core::ptr::copy_nonoverlapping(value.as_ptr(), at, value.len());
            at = at.add(value.len());
            debug_assert_eq!(at.offset_from(first), total as isize);
            out.set_len(start + total);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::google::protobuf::{Any, TypeUrl};
    use alloc::string::String;
    use bytes::Bytes;
    use quickcheck::{QuickCheck, TestResult};

    /// What prost writes for the `resources` entry of this `Any`.
    fn prost_frame(type_url: &str, value: &[u8]) -> Vec<u8> {
        let any = Any {
            type_url: TypeUrl::from(type_url),
            value: Bytes::copy_from_slice(value),
        };
        let mut out = Vec::new();
        prost::encoding::message::encode(2, &any, &mut out);
        out
    }

    fn agrees(type_url: &str, value: &[u8]) -> bool {
        let expected = prost_frame(type_url, value);
        let mut ours = b"before".to_vec();
        write_frame(type_url, value, &mut ours);
        let direct = ours.get(6..) == Some(&expected[..]);
        // Through the prefix, twice in a row (the second after the first's spare bytes).
        let heads = FrameHeads::new(type_url.len(), value.len());
        let prefixed = match (FramePrefix::new(type_url), heads) {
            (Some(prefix), heads) if heads.fit(&prefix) => {
                let mut ours = Vec::new();
                prefix.write(&heads, value, &mut ours);
                prefix.write(&heads, value, &mut ours);
                ours == [&expected[..], &expected[..]].concat()
            }
            (prefix, heads) => prefix.is_none() && heads == FrameHeads::UNFIT,
        };
        direct && prefixed && frame_len(type_url, value) == expected.len()
    }

    #[test]
    fn frames_are_what_prost_writes() {
        fn property(type_url: String, value: Vec<u8>, pad: u16) -> TestResult {
            // Lengths across the one-, two- and three-byte varints.
            let mut value = value;
            value.resize(value.len() + usize::from(pad) * 3, 7);
            TestResult::from_bool(agrees(&type_url, &value))
        }
        QuickCheck::new().quickcheck(property as fn(String, Vec<u8>, u16) -> TestResult);
    }

    #[test]
    fn empty_fields_are_left_out_as_prost_does() {
        assert!(agrees("", b""));
        assert!(agrees("", b"x"));
        assert!(agrees(
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            b""
        ));
        let long = alloc::vec![1u8; 200_000];
        assert!(agrees("t", &long));
        // Heads for one type URL's length do not fit another's prefix.
        let heads = FrameHeads::new(10, 5);
        assert!(heads.fit(&FramePrefix::new("0123456789").unwrap()));
        assert!(!heads.fit(&FramePrefix::new("012345678").unwrap()));
        // Type URLs at the prefix's room and past it (then written without it).
        for len in [93, 94, 95, 200] {
            let url = "u".repeat(len);
            assert_eq!(FramePrefix::new(&url).is_some(), len <= 94);
            assert!(agrees(&url, b"body"));
        }
    }
}
