//! Walking the fields of an encoded message the way prost reads them, for the readers that
//! take a fast path over plain encodings (a response's resources, a body's name) and hand
//! anything else to a full reader: one home for what "plain" means.

use core::ops::Range;

/// One field of a message: its key, where it starts, and its payload (which ends where the
/// field does).
pub(crate) struct Field {
    pub(crate) key: u64,
    pub(crate) start: usize,
    pub(crate) payload: Range<usize>,
}

impl Field {
    pub(crate) fn end(&self) -> usize {
        self.payload.end
    }
}

/// The field at `at` (advanced past it); `None` at anything that is not plain, and prost
/// then decides on the whole message (or the full reader on the whole body).
#[inline(always)]
pub(crate) fn field_at(wire: &[u8], at: &mut usize) -> Option<Field> {
    let start = *at;
    let key = varint(wire, at)?;
    // prost refuses keys beyond u32 (and field 0, which its caller judges).
    if key > u64::from(u32::MAX) {
        return None;
    }
    let end = match key & 7 {
        0 => varint(wire, at).map(|_| *at)?,
        1 => at.checked_add(8)?,
        2 => {
            let len = usize::try_from(varint(wire, at)?).ok()?;
            at.checked_add(len)?
        }
        5 => at.checked_add(4)?,
        // Groups (3, 4) and wire types prost refuses (6, 7).
        _ => return None,
    };
    if end > wire.len() {
        return None;
    }
    let payload = *at..end;
    *at = end;
    Some(Field {
        key,
        start,
        payload,
    })
}

/// A base-128 varint at `at` (advanced past it), as prost reads one; `None` where prost
/// would fail (or when it runs off the end).
#[inline(always)]
pub(crate) fn varint(wire: &[u8], at: &mut usize) -> Option<u64> {
    // One and two bytes (every key, every length under 16 KiB) without a loop.
    let first = *wire.get(*at)?;
    if first < 0x80 {
        *at += 1;
        return Some(u64::from(first));
    }
    let second = *wire.get(*at + 1)?;
    if second < 0x80 {
        *at += 2;
        return Some(u64::from(first & 0x7f) | (u64::from(second) << 7));
    }
    long_varint(wire, at)
}

#[cold]
fn long_varint(wire: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let byte = *wire.get(*at + i)?;
        // The tenth byte may carry only the top bit of a u64.
        if i == 9 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            *at += i + 1;
            return Some(value);
        }
    }
    None
}
