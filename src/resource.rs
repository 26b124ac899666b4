//! Reading a resource's name out of its opaque body without decoding it.
//!
//! In SotW the name of a resource lives inside its body. Every xDS resource type of the
//! catalog (Listener, RouteConfiguration, ScopedRouteConfiguration, VirtualHost, Cluster,
//! ClusterLoadAssignment, Secret, Runtime) keeps its name in field 1 as a string, so a
//! small scanner of the protobuf encoding finds it: zero-copy, bounded by the body's
//! length, and with a typed error for a body that is truncated or has no name. Types whose
//! name lives elsewhere get a [`NameExtractor`] from the application.

use bytes::Bytes;

use crate::pb::plain_fields::field_at;
use crate::text::SharedStr;
use core::fmt;

/// Why a name could not be read from a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NameError {
    /// The body ends inside a field.
    Truncated,
    /// A tag or a length is not a valid varint.
    BadVarint,
    /// A field uses a wire type that does not exist (6, 7) or a field number of 0.
    BadWireType,
    /// Field 1 is present but is not length-delimited.
    NameNotString,
    /// Field 1 is not valid UTF-8.
    NameNotUtf8,
    /// The body has no field 1.
    Missing,
    /// Field 1 is the empty string.
    Empty,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameError::Truncated => "resource body is truncated",
            NameError::BadVarint => "resource body has a malformed varint",
            NameError::BadWireType => "resource body has an invalid wire type or field number",
            NameError::NameNotString => "resource name (field 1) is not a string",
            NameError::NameNotUtf8 => "resource name (field 1) is not valid UTF-8",
            NameError::Missing => "resource body has no name (field 1)",
            NameError::Empty => "resource name (field 1) is empty",
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for NameError {}

/// Reads a resource name from a body; the application supplies one for types whose name
/// is not field 1.
pub type NameExtractor = fn(&Bytes) -> Result<Bytes, NameError>;

/// Reads a varint; a one-byte varint (every tag of fields 1-15 and every length under
/// 128, nearly all of a resource's top level) takes the short path.
#[inline]
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, NameError> {
    match buf.get(*pos) {
        Some(&byte) if byte < 0x80 => {
            *pos += 1;
            Ok(u64::from(byte))
        }
        _ => read_long_varint(buf, pos),
    }
}

/// Where in `body` `name` starts: by address when `name` is a slice of it, else in the body's
/// first field when that is field 1 (how every xDS resource type encodes its name, first).
/// The client's cache and the server's store read a resource's name from its body there,
/// so neither keeps a copy of it.
#[inline]
pub(crate) fn name_in_body(body: &[u8], name: &[u8]) -> Option<usize> {
    let (start, at) = (body.as_ptr() as usize, name.as_ptr() as usize);
    let offset = if at >= start && at.saturating_add(name.len()) <= start.saturating_add(body.len())
    {
        at - start
    } else {
        // Tag 0x0a (field 1, length-delimited), then a varint length equal to the name's.
        if body.first() != Some(&0x0a) {
            return None;
        }
        let mut offset = 1;
        let declared = read_varint(body, &mut offset).ok()?;
        let candidate = body.get(offset..offset.checked_add(name.len())?)?;
        if declared != name.len() as u64 || candidate != name {
            return None;
        }
        offset
    };
    Some(offset)
}

#[cold]
fn read_long_varint(buf: &[u8], pos: &mut usize) -> Result<u64, NameError> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or(NameError::Truncated)?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(NameError::BadVarint)
}

fn skip(buf: &[u8], pos: &mut usize, len: u64) -> Result<(), NameError> {
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| pos.checked_add(len))
        .filter(|end| *end <= buf.len())
        .ok_or(NameError::Truncated)?;
    *pos = end;
    Ok(())
}

/// Finds the byte range of field 1 (the last occurrence wins, as in protobuf) and checks
/// the rest of the top-level encoding is well-formed.
#[inline]
fn name_range(buf: &[u8]) -> Result<core::ops::Range<usize>, NameError> {
    match plain_name_range(buf) {
        Some(range) => Ok(range),
        None => any_name_range(buf),
    }
}

/// [`name_range`] of a body whose top level is plain (no groups, nothing prost refuses:
/// [`field_at`]) and whose every field 1 is length-delimited ASCII (every resource an
/// encoder writes, in practice): one tight loop. `None` for anything else, which
/// [`any_name_range`] then reads with every check: when this finds a range, that one
/// finds the same (the same fields skipped the same way, every name UTF-8).
#[inline]
fn plain_name_range(buf: &[u8]) -> Option<core::ops::Range<usize>> {
    let mut pos = 0;
    let mut found: Option<core::ops::Range<usize>> = None;
    while pos < buf.len() {
        let field = field_at(buf, &mut pos)?;
        match field.key >> 3 {
            // Field 0 is refused by the full reader.
            0 => return None,
            // The name: length-delimited ASCII, else the full reader says what it is.
            1 if field.key == 0x0a && is_ascii(buf.get(field.payload.clone())?) => {
                found = Some(field.payload);
            }
            1 => return None,
            _ => {}
        }
    }
    found.filter(|range| !range.is_empty())
}

/// [`name_range`] of any body.
fn any_name_range(buf: &[u8]) -> Result<core::ops::Range<usize>, NameError> {
    let mut pos = 0;
    let mut found = None;
    // Open groups (wire types 3/4) nest; track the depth so they are skipped whole.
    let mut group_depth: u32 = 0;
    while pos < buf.len() {
        let tag = read_varint(buf, &mut pos)?;
        let field = tag >> 3;
        // Length-delimited first: nearly every top-level field of a resource (messages,
        // strings, repeated messages) is one.
        if tag & 7 == 2 && field != 0 {
            let len = read_varint(buf, &mut pos)?;
            let start = pos;
            skip(buf, &mut pos, len)?;
            if field == 1 && group_depth == 0 {
                // The last one is the name, but every one must be a string (a decoder
                // refuses the message otherwise): one replaced is checked now.
                if let Some(earlier) = found.replace(start..pos) {
                    check_utf8(buf.get(earlier).ok_or(NameError::Truncated)?)?;
                }
            }
            continue;
        }
        skip_other(buf, &mut pos, tag, &mut group_depth)?;
    }
    if group_depth != 0 {
        return Err(NameError::Truncated);
    }
    let range = found.ok_or(NameError::Missing)?;
    if range.is_empty() {
        return Err(NameError::Empty);
    }
    check_utf8(buf.get(range.clone()).ok_or(NameError::Truncated)?)?;
    Ok(range)
}

/// Fails unless `name` is UTF-8. Names are nearly always ASCII, which is UTF-8 and several
/// times cheaper to check.
#[inline]
fn check_utf8(name: &[u8]) -> Result<(), NameError> {
    if !is_ascii(name) {
        core::str::from_utf8(name).map_err(|_| NameError::NameNotUtf8)?;
    }
    Ok(())
}

/// Skips a field that is not length-delimited (or refuses it): varints, fixed widths and
/// group markers, none of which may be the name.
fn skip_other(
    buf: &[u8],
    pos: &mut usize,
    tag: u64,
    group_depth: &mut u32,
) -> Result<(), NameError> {
    let field = tag >> 3;
    if field == 0 {
        return Err(NameError::BadWireType);
    }
    let at_top = *group_depth == 0;
    match tag & 7 {
        0 => {
            read_varint(buf, pos)?;
        }
        1 => skip(buf, pos, 8)?,
        3 => *group_depth = group_depth.saturating_add(1),
        4 => {
            *group_depth = group_depth.checked_sub(1).ok_or(NameError::BadWireType)?;
        }
        5 => skip(buf, pos, 4)?,
        _ => return Err(NameError::BadWireType),
    }
    // Field 1 outside any group is the name, a string: any other wire type (the start of
    // a group included) is not one.
    if field == 1 && at_top {
        return Err(NameError::NameNotString);
    }
    Ok(())
}

/// Whether `bytes` is ASCII, a word at a time: names are short (10-60 bytes), where the
/// standard library's check spends more on lining up than on reading.
#[inline]
fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |chunk: &[u8]| {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        u64::from_le_bytes(w)
    };
    if bytes.len() < 8 {
        return bytes.iter().fold(0u8, |acc, b| acc | b) < 0x80;
    }
    let chunks = bytes.chunks_exact(8);
    // The last 8 bytes cover the remainder (reading some bytes twice).
    let tail = bytes.len() - 8;
    let mut any = bytes.get(tail..).map_or(HIGH, word);
    for chunk in chunks {
        any |= word(chunk);
    }
    any & HIGH == 0
}

/// The name (field 1) of an encoded resource, as a slice of `body`.
pub fn name_of(body: &[u8]) -> Result<&str, NameError> {
    let range = name_range(body)?;
    core::str::from_utf8(body.get(range).ok_or(NameError::Truncated)?)
        .map_err(|_| NameError::NameNotUtf8)
}

/// The name (field 1) of an encoded resource, as a zero-copy slice of `body`. This is the
/// default [`NameExtractor`] for every type.
pub fn name_field_1(body: &Bytes) -> Result<Bytes, NameError> {
    let range = name_range(body)?;
    Ok(body.slice(range))
}

/// [`name_field_1`] as a [`SharedStr`], without checking UTF-8 a second time.
pub(crate) fn shared_name_field_1(body: &Bytes) -> Result<SharedStr, NameError> {
    let range = name_range(body)?;
    // SAFETY: `name_range` returns only a range whose bytes it checked to be UTF-8.
    Ok(unsafe { SharedStr::from_utf8_unchecked(body.slice(range)) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use quickcheck::Arbitrary;

    #[test]
    fn is_ascii_agrees_with_the_standard_library_at_every_length_and_position() {
        for len in 0..40 {
            let plain: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            assert!(is_ascii(&plain), "len {len}");
            for at in 0..len {
                for high in [0x80u8, 0xc3, 0xff] {
                    let mut bytes = plain.clone();
                    bytes[at] = high;
                    assert_eq!(is_ascii(&bytes), bytes.is_ascii(), "len {len} at {at}");
                }
            }
        }
    }

    fn field(out: &mut Vec<u8>, number: u8, wire: u8, payload: &[u8]) {
        out.push(number << 3 | wire);
        if wire == 2 {
            out.push(payload.len() as u8);
        }
        out.extend_from_slice(payload);
    }

    #[test]
    fn finds_field_one_among_others_and_last_wins() {
        let mut body = Vec::new();
        field(&mut body, 2, 0, &[0x96, 0x01]);
        field(&mut body, 1, 2, b"first");
        field(&mut body, 3, 5, &[0, 0, 0, 0]);
        field(&mut body, 4, 1, &[0; 8]);
        field(&mut body, 1, 2, b"cluster-a");
        assert_eq!(name_of(&body), Ok("cluster-a"));
        let bytes = Bytes::from(body);
        let name = name_field_1(&bytes).unwrap();
        assert_eq!(&name[..], b"cluster-a");
        // zero-copy: the name points into the body
        assert!(bytes.as_ptr_range().contains(&name.as_ptr()));
    }

    #[test]
    fn typed_errors() {
        assert_eq!(name_of(&[]), Err(NameError::Missing));
        assert_eq!(name_of(&[0x0a, 5, b'a']), Err(NameError::Truncated));
        assert_eq!(name_of(&[0x08, 1]), Err(NameError::NameNotString));
        assert_eq!(name_of(&[0x0a, 0]), Err(NameError::Empty));
        assert_eq!(name_of(&[0x0a, 1, 0xff]), Err(NameError::NameNotUtf8));
        assert_eq!(name_of(&[0x0e]), Err(NameError::BadWireType));
        assert_eq!(name_of(&[0x00]), Err(NameError::BadWireType));
        assert_eq!(name_of(&[0x10; 11]), Err(NameError::Truncated));
        assert_eq!(
            name_of(&[0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
            Err(NameError::BadVarint)
        );
    }

    #[test]
    fn names_inside_groups_are_not_the_name() {
        // field 2 start-group, field 1 "x" inside, end-group; then real name.
        let body = [0x13, 0x0a, 1, b'x', 0x14, 0x0a, 1, b'y'];
        assert_eq!(name_of(&body), Ok("y"));
    }

    quickcheck::quickcheck! {
        fn never_panics(body: Vec<u8>) -> bool {
            let _ = name_of(&body);
            true
        }
    }

    /// A message with a string name in field 1 and nothing else known: what prost makes of
    /// a body is what protobuf says its name is.
    #[derive(Clone, PartialEq, prost::Message)]
    struct Named {
        #[prost(string, tag = "1")]
        name: alloc::string::String,
    }

    /// A body of random top-level fields (any wire type, field 1 among them, groups with
    /// fields inside), possibly cut short.
    #[derive(Clone, Debug)]
    struct Body(Vec<u8>);

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn random_field(g: &mut quickcheck::Gen, out: &mut Vec<u8>, depth: u32) {
        let field = u64::from(*g.choose(&[1u8, 1, 2, 3, 9, 17]).unwrap_or(&1));
        let wire = *g.choose(&[2u64, 2, 2, 0, 1, 5, 3]).unwrap_or(&2);
        varint(out, field << 3 | wire);
        match wire {
            0 => varint(out, u64::arbitrary(g) >> (u8::arbitrary(g) % 64)),
            1 => out.extend_from_slice(&u64::arbitrary(g).to_le_bytes()),
            5 => out.extend_from_slice(&u32::arbitrary(g).to_le_bytes()),
            2 => {
                let text: Vec<u8> = match u8::arbitrary(g) % 4 {
                    0 => Vec::new(),
                    1 => Vec::<u8>::arbitrary(g),
                    _ => alloc::format!("cluster-{}", u16::arbitrary(g)).into_bytes(),
                };
                let pad = if bool::arbitrary(g) { 130 } else { 0 };
                varint(out, (text.len() + pad) as u64);
                out.extend_from_slice(&text);
                out.extend(core::iter::repeat_n(7u8, pad));
            }
            _ => {
                if depth < 2 {
                    for _ in 0..u8::arbitrary(g) % 3 {
                        random_field(g, out, depth + 1);
                    }
                }
                varint(out, field << 3 | 4);
            }
        }
    }

    impl Arbitrary for Body {
        fn arbitrary(g: &mut quickcheck::Gen) -> Body {
            let mut out = Vec::new();
            for _ in 0..u8::arbitrary(g) % 6 {
                random_field(g, &mut out, 0);
            }
            if u8::arbitrary(g) % 8 == 0 && !out.is_empty() {
                let keep = usize::arbitrary(g) % out.len();
                out.truncate(keep);
            }
            Body(out)
        }
    }

    #[test]
    fn a_plain_body_takes_the_tight_loop() {
        // Name, then a 200-byte field (a two-byte length), then the name again.
        let mut body = alloc::vec![0x0a, 3, b'a', b'b', b'c', 0x12, 0xc8, 0x01];
        body.extend([7u8; 200]);
        assert_eq!(plain_name_range(&body), Some(2..5));
        body.extend([0x0a, 2, b'x', b'y']);
        assert_eq!(plain_name_range(&body), Some(210..212));
        assert_eq!(any_name_range(&body), Ok(210..212));
        // Varint, fixed and two-byte-key fields are skipped; a group, a name that is not
        // length-delimited and a non-ASCII name are the full reader's.
        let mixed = [
            0x10, 0x96, 0x01, 0x0a, 1, b'a', 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0xa2, 0x06, 1, 9,
        ];
        assert_eq!(plain_name_range(&mixed), Some(5..6));
        assert_eq!(any_name_range(&mixed), Ok(5..6));
        assert_eq!(plain_name_range(&[0x13, 0x14, 0x0a, 1, b'a']), None);
        assert_eq!(plain_name_range(&[0x08, 1, 0x0a, 1, b'a', 0x08]), None);
        assert_eq!(plain_name_range(&[0x0d, 1, 2, 3, 4]), None);
        assert_eq!(plain_name_range("\n\u{2}é".as_bytes()), None);
        assert_eq!(name_of("\n\u{2}é".as_bytes()), Ok("é"));
    }

    quickcheck::quickcheck! {
        /// When the tight loop finds a name, the full reader finds the same one.
        fn the_plain_path_agrees_with_the_full_reader(body: Body) -> bool {
            plain_name_range(&body.0).is_none_or(|range| any_name_range(&body.0) == Ok(range))
        }

        /// The scanner agrees with a protobuf decoder: the name it reads is the one a
        /// decoder reads (the last field 1), and it refuses what a decoder refuses (and an
        /// empty or absent name).
        fn agrees_with_a_protobuf_decoder(body: Body) -> bool {
            use prost::Message;
            match (name_of(&body.0), Named::decode(body.0.as_slice())) {
                (Ok(ours), Ok(theirs)) => ours == theirs.name,
                (Err(NameError::Empty | NameError::Missing), Ok(theirs)) => theirs.name.is_empty(),
                (Err(_), Err(_)) => true,
                _ => false,
            }
        }
    }
}
