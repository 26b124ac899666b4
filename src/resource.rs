//! Reading a resource's name out of its opaque body without decoding it.
//!
//! In SotW the name of a resource lives inside its body. Every xDS resource type of the
//! catalog (Listener, RouteConfiguration, ScopedRouteConfiguration, VirtualHost, Cluster,
//! ClusterLoadAssignment, Secret, Runtime) keeps its name in field 1 as a string, so a
//! small scanner of the protobuf encoding finds it: zero-copy, bounded by the body's
//! length, and with a typed error for a body that is truncated or has no name. Types whose
//! name lives elsewhere get a [`NameExtractor`] from the application.

use bytes::Bytes;

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

fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, NameError> {
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
fn name_range(buf: &[u8]) -> Result<core::ops::Range<usize>, NameError> {
    let mut pos = 0;
    let mut found = None;
    // Open groups (wire types 3/4) nest; track the depth so they are skipped whole.
    let mut group_depth: u32 = 0;
    while pos < buf.len() {
        let tag = read_varint(buf, &mut pos)?;
        let field = tag >> 3;
        if field == 0 {
            return Err(NameError::BadWireType);
        }
        match tag & 7 {
            0 => {
                read_varint(buf, &mut pos)?;
            }
            1 => skip(buf, &mut pos, 8)?,
            2 => {
                let len = read_varint(buf, &mut pos)?;
                let start = pos;
                skip(buf, &mut pos, len)?;
                if field == 1 && group_depth == 0 {
                    found = Some(start..pos);
                }
            }
            3 => group_depth = group_depth.saturating_add(1),
            4 => {
                group_depth = group_depth.checked_sub(1).ok_or(NameError::BadWireType)?;
            }
            5 => skip(buf, &mut pos, 4)?,
            _ => return Err(NameError::BadWireType),
        }
        if field == 1 && group_depth == 0 && tag & 7 != 2 && tag & 7 != 4 {
            return Err(NameError::NameNotString);
        }
    }
    if group_depth != 0 {
        return Err(NameError::Truncated);
    }
    let range = found.ok_or(NameError::Missing)?;
    if range.is_empty() {
        return Err(NameError::Empty);
    }
    let name = buf.get(range.clone()).ok_or(NameError::Truncated)?;
    // Names are nearly always ASCII, which is UTF-8 and several times cheaper to check.
    if !name.is_ascii() {
        core::str::from_utf8(name).map_err(|_| NameError::NameNotUtf8)?;
    }
    Ok(range)
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
}
