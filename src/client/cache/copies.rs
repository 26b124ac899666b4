//! Where the bodies a response puts in the cache are copied to ([`BodyCopies`]): out of
//! the response's buffer, into chunks shared by the bodies copied after each other.
//!
//! Decisions:
//! - A body decoded zero-copy is a slice of the response's buffer, and keeps all of it
//!   alive: every `Any` wrapper and type URL (43 B a resource for SotW, more for an
//!   incremental `Resource`), and every body of the response the cache did not keep (an
//!   unchanged one it already held). Copying a kept body as it is applied costs one
//!   `memcpy` and a reference count, and keeps alive only the bodies themselves.
//! - A response's chunks grow with what it has copied: the first is the size of its first
//!   copied body, each next one as large as all copied before it, up to [`CHUNK`], and
//!   never larger than the response's bodies still to come. So a response that changes
//!   one body of thousands copies it into a chunk of its own size, and one that changes
//!   every body uses chunks of 64 KiB; what a response allocates and leaves unused is
//!   under what it copied (plus one body), and a chunk lives while one of its bodies does.
//! - Unchanged bodies are not copied: the cache keeps the copy it holds.

use bytes::{Bytes, BytesMut};

/// The size of a chunk bodies are copied into, unless the response's bodies still to come
/// are fewer.
pub(crate) const CHUNK: usize = 64 * 1024;

/// The chunk a response's kept bodies are copied into. See the [module docs](self).
pub(crate) struct BodyCopies {
    chunk: BytesMut,
    /// The bytes of the response's bodies not yet passed (kept or not).
    to_come: usize,
    /// The bytes copied so far.
    copied: usize,
}

impl BodyCopies {
    /// For a response whose bodies total `bodies` bytes.
    pub(crate) fn new(bodies: usize) -> BodyCopies {
        BodyCopies {
            chunk: BytesMut::new(),
            to_come: bodies,
            copied: 0,
        }
    }

    /// A body of `len` bytes was passed (copied or not).
    #[inline]
    pub(crate) fn passed(&mut self, len: usize) {
        self.to_come = self.to_come.saturating_sub(len);
    }

    /// A copy of `body`, in the current chunk (or a new one when it does not fit); call
    /// before [`BodyCopies::passed`] for the same body.
    #[inline]
    pub(crate) fn copy(&mut self, body: &[u8]) -> Bytes {
        if self.chunk.capacity() - self.chunk.len() < body.len() {
            let size = self.copied.min(CHUNK).min(self.to_come).max(body.len());
            self.chunk = BytesMut::with_capacity(size);
        }
        self.copied = self.copied.saturating_add(body.len());
        self.chunk.extend_from_slice(body);
        self.chunk.split().freeze()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn chunks_grow_with_what_was_copied_and_stop_at_what_is_to_come() {
        // Bodies of 10 bytes: chunks of 10, 10, 20, 40, ... each holding whole bodies.
        let mut copies = BodyCopies::new(1000);
        let mut starts = Vec::new();
        for i in 0..8u8 {
            let body = copies.copy(&[i; 10]);
            copies.passed(10);
            assert_eq!(&body[..], &[i; 10]);
            starts.push(body.as_ptr() as usize);
        }
        let adjacent: Vec<bool> = starts.windows(2).map(|w| w[1] == w[0] + 10).collect();
        // New chunks at bodies 0, 1, 2, 4: sizes 10, 10, 20, 40.
        assert_eq!(adjacent, [false, false, true, false, true, true, true]);

        // One body changed of many: a chunk of exactly its size.
        let mut copies = BodyCopies::new(1_000_000);
        copies.passed(500_000);
        let one = copies.copy(&[3; 100]);
        assert_eq!(one.len(), 100);
        assert_eq!(copies.chunk.capacity(), 0, "nothing spare");

        // Never more than what is to come.
        let mut copies = BodyCopies::new(25);
        copies.copy(&[1; 10]);
        copies.passed(10);
        copies.copy(&[1; 10]);
        copies.passed(10);
        copies.copy(&[1; 5]);
        assert_eq!(
            copies.chunk.capacity(),
            0,
            "a chunk of the 5 bytes left, not of 20"
        );

        // A body larger than a chunk gets one of its own size.
        let mut copies = BodyCopies::new(CHUNK * 3);
        let big = copies.copy(&[7; CHUNK + 1]);
        copies.passed(CHUNK + 1);
        assert_eq!(big.len(), CHUNK + 1);
        let next = copies.copy(&[8; 5]);
        assert_eq!(&next[..], &[8; 5]);
    }
}
