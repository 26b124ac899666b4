//! [`SharedStr`]: a UTF-8 string that is a `Bytes` slice, so names, versions and type URLs
//! cost a reference count to clone instead of an allocation, and a SotW resource name can be
//! a zero-copy slice of the resource body it was read from.

use alloc::string::String;
use bytes::Bytes;
use core::borrow::Borrow;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::ops::Deref;

/// An immutable UTF-8 string backed by [`Bytes`]: cloning it never copies, and it can point
/// into a decoded message buffer.
///
/// It hashes, compares and orders exactly like the `str` it holds, so maps keyed by
/// `SharedStr` can be looked up with a `&str`.
///
/// Where it appears and where `String` does: the client's events and reads, and the type
/// URL of every server event, carry `SharedStr`, since they hand out the same names,
/// versions and type URLs many times (every event, every cache read) and a SotW name is a
/// slice of the body it was read from. What the application hands in (store entries,
/// subscriptions) and the names of server events are `String`s or `&str`s, taken once and
/// kept. Either derefs to `&str`, which is what to write functions against:
///
/// ```
/// # use xds_sansio::text::SharedStr;
/// fn short(type_url: &str) -> &str {
///     type_url.rsplit('.').next().unwrap_or(type_url)
/// }
/// let shared = SharedStr::from("type.googleapis.com/envoy.config.cluster.v3.Cluster");
/// let owned = String::from("type.googleapis.com/envoy.config.cluster.v3.Cluster");
/// assert_eq!(short(&shared), short(&owned));
/// ```
#[derive(Clone, Default, Eq, PartialOrd, Ord)]
pub struct SharedStr(Bytes);

impl SharedStr {
    /// The empty string.
    pub const EMPTY: SharedStr = SharedStr(Bytes::from_static(b""));

    /// Wraps `bytes` if it is valid UTF-8 (no copy).
    pub fn from_utf8(bytes: Bytes) -> Result<SharedStr, core::str::Utf8Error> {
        core::str::from_utf8(&bytes)?;
        Ok(SharedStr(bytes))
    }

    /// Wraps `bytes` that the caller has just checked to be UTF-8 (a second check per
    /// resource name is a measurable share of a client's work).
    ///
    /// # Safety
    /// `bytes` must be valid UTF-8.
    pub(crate) unsafe fn from_utf8_unchecked(bytes: Bytes) -> SharedStr {
        debug_assert!(core::str::from_utf8(&bytes).is_ok());
        SharedStr(bytes)
    }

    /// A string that lives for the whole program (no allocation).
    pub const fn from_static(s: &'static str) -> SharedStr {
        SharedStr(Bytes::from_static(s.as_bytes()))
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        debug_assert!(core::str::from_utf8(&self.0).is_ok());
        // SAFETY: the field is private and every constructor (`from_utf8`, `from_static`,
        // `From<String>`, `From<&str>`) only wraps bytes that are valid UTF-8; `Bytes` is
        // immutable. Hashing calls this for every map operation, so it must not re-validate.
        unsafe { core::str::from_utf8_unchecked(&self.0) }
    }

    /// The underlying bytes (shares the buffer).
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }
}

impl From<String> for SharedStr {
    /// Takes the string's allocation (no copy).
    fn from(s: String) -> SharedStr {
        SharedStr(Bytes::from(s))
    }
}

impl From<&str> for SharedStr {
    /// Copies the string once.
    fn from(s: &str) -> SharedStr {
        SharedStr(Bytes::copy_from_slice(s.as_bytes()))
    }
}

impl From<SharedStr> for String {
    fn from(s: SharedStr) -> String {
        String::from(s.as_str())
    }
}

impl From<&SharedStr> for String {
    fn from(s: &SharedStr) -> String {
        String::from(s.as_str())
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl Hash for SharedStr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

/// Two handles to the same bytes are equal without reading them: a type URL or a version
/// compared with its own clone (every change of a batch, every resource of a response)
/// costs two word comparisons instead of a `memcmp`.
impl PartialEq for SharedStr {
    #[inline]
    fn eq(&self, other: &SharedStr) -> bool {
        let (a, b) = (self.0.as_ref(), other.0.as_ref());
        a.len() == b.len() && (core::ptr::eq(a.as_ptr(), b.as_ptr()) || a == b)
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        self.0.as_ref() == other.as_bytes()
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        self.0.as_ref() == other.as_bytes()
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        self.0.as_ref() == other.as_bytes()
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        other == self
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        other == self
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        other == self
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::HashMap;

    #[test]
    fn behaves_like_str_in_maps() {
        let mut map: HashMap<SharedStr, u32> = HashMap::new();
        map.insert(SharedStr::from("a"), 1);
        assert_eq!(map.get("a"), Some(&1));
        assert!(SharedStr::from_utf8(Bytes::from_static(&[0xff])).is_err());
        assert_eq!(SharedStr::from(String::from("x")), "x");
        let (a, b) = (SharedStr::from("a"), SharedStr::from("b"));
        assert!(a < b);
    }
}
