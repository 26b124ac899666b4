//! A value built at most once per revision by whichever stream asks first, then shared by
//! every other stream reading the same store, including streams on other threads holding
//! the store behind a read lock (the store stays `Sync`). A change to the store replaces it
//! with an empty one.
//!
//! Without the `std` feature there is no once-lock in `core` that is `Sync`, so the value
//! is built on every call: correct, just not shared.

use bytes::Bytes;

/// The concatenated frames of a type's full state, or `None` when it cannot be shared.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedFrames {
    #[cfg(feature = "std")]
    cell: std::sync::OnceLock<Option<Bytes>>,
}

impl SharedFrames {
    /// The value, built by `build` if no one built it yet.
    pub(crate) fn get_or_build(&self, build: impl FnOnce() -> Option<Bytes>) -> Option<Bytes> {
        #[cfg(feature = "std")]
        {
            self.cell.get_or_init(build).clone()
        }
        #[cfg(not(feature = "std"))]
        {
            build()
        }
    }
}
