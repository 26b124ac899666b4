//! Stable versions: the same bytes give the same version on every replica, platform and
//! run, so a client that reconnects to another replica of the management server is not
//! sent what it already holds.
//!
//! - A resource's default version is FNV-1a 64 of its encoded body, written as 16
//!   lower-case hex digits ([`body_version`]).
//! - A set of resources (what a SotW response leaves the client holding) is versioned by
//!   [`VersionSum`]: each is hashed with FNV-1a 64 over `name 0x00 version` (plus
//!   `0x00 ttl` when it has a TTL, see [`entry_hash`]), mixed with the splitmix64 finaliser, and the results are added
//!   (wrapping). The sum does not depend on order, so it can be kept up to date one
//!   resource at a time, and it is the same for the same set whatever the order it was
//!   built in.

use alloc::boxed::Box;
use alloc::string::String;
use core::fmt::Write;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a 64 of `bytes`, continuing from `state` (start with [`fnv1a64`]'s offset basis by
/// calling [`fnv1a64`]).
fn fnv1a64_continue(mut state: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        state ^= u64::from(*byte);
        state = state.wrapping_mul(FNV_PRIME);
    }
    state
}

/// FNV-1a 64 of `bytes`: tiny, dependency-free and identical everywhere.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_continue(FNV_OFFSET, bytes)
}

/// Writes `value` as 16 lower-case hex digits.
pub fn hex16(value: u64) -> String {
    let mut out = String::with_capacity(16);
    // Writing to a String cannot fail.
    let _ = write!(out, "{value:016x}");
    out
}

/// The default version of a resource: FNV-1a 64 of its body as 16 hex digits.
///
/// This is the version of *one resource*: what a delta response carries in
/// `Resource.version` and a client sends back in `initial_resource_versions`. A SotW
/// response's `version_info` is something else, the version of *the set* the response
/// leaves the client holding ([`VersionSum`] of each resource's `(name, version, TTL)`), so
/// the same single body has two different versions on the two variants; delta's
/// `system_version_info` is the [`VersionSum`] of the whole type in the store.
///
/// ```
/// # use bytes::Bytes;
/// # use xds_sansio::server::{body_version, entry_hash, ResourceStore, VersionSum};
/// # use xds_sansio::types::CLUSTER;
/// let body = Bytes::from_static(b"\x0a\x02c1");
/// let mut store = ResourceStore::new();
/// store.set(CLUSTER.type_url, "c1", body.clone()).unwrap();
/// let resource = store.get(CLUSTER.type_url, "c1").unwrap();
/// assert_eq!(resource.version(), body_version(&body)); // delta: Resource.version
/// let mut set = VersionSum::EMPTY;
/// set.add(entry_hash("c1", &body_version(&body), None));
/// assert_eq!(store.type_digest(CLUSTER.type_url), set); // SotW version_info of {c1}
/// ```
pub fn body_version(body: &[u8]) -> String {
    hex16(fnv1a64(body))
}

/// splitmix64's finaliser: spreads the bits of each pair hash before they are summed, so
/// that sums of similar hashes do not collide in the low bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The hash of one `(name, version)` pair, as it enters a [`VersionSum`].
pub fn pair_hash(name: &str, version: &str) -> u64 {
    let state = fnv1a64_continue(FNV_OFFSET, name.as_bytes());
    let state = fnv1a64_continue(state, &[0]);
    mix(fnv1a64_continue(state, version.as_bytes()))
}

/// The hash of what a client holds of one resource: [`pair_hash`] of its name and version,
/// or, when it has a TTL, of `name 0x00 version 0x00 ttl-nanoseconds (u128, little endian)`,
/// so that a TTL change is a change even at the same version.
pub fn entry_hash(name: &str, version: &str, ttl: Option<core::time::Duration>) -> u64 {
    let Some(ttl) = ttl else {
        return pair_hash(name, version);
    };
    let state = fnv1a64_continue(FNV_OFFSET, name.as_bytes());
    let state = fnv1a64_continue(state, &[0]);
    let state = fnv1a64_continue(state, version.as_bytes());
    let state = fnv1a64_continue(state, &[0]);
    mix(fnv1a64_continue(state, &ttl.as_nanos().to_le_bytes()))
}

/// An order-independent digest of a set of `(name, version)` pairs, updated one pair at a
/// time: the SotW type-level version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VersionSum(u64);

impl VersionSum {
    /// The digest of the empty set.
    pub const EMPTY: VersionSum = VersionSum(0);

    /// Adds a pair by its [`pair_hash`].
    pub fn add(&mut self, pair: u64) {
        self.0 = self.0.wrapping_add(pair);
    }

    /// Removes a pair previously added.
    pub fn remove(&mut self, pair: u64) {
        self.0 = self.0.wrapping_sub(pair);
    }

    /// The digest as 16 hex digits, the `version_info` of a SotW response.
    pub fn to_version(self) -> String {
        hex16(self.0)
    }

    /// The raw digest.
    pub fn value(self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_published_vectors() {
        // Test vectors of the FNV reference (Landon Curt Noll's page).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(body_version(b"a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn sum_is_order_independent_and_removable() {
        let a = pair_hash("a", "1");
        let b = pair_hash("b", "2");
        let mut x = VersionSum::EMPTY;
        x.add(a);
        x.add(b);
        let mut y = VersionSum::EMPTY;
        y.add(b);
        y.add(a);
        assert_eq!(x, y);
        x.remove(a);
        let mut z = VersionSum::EMPTY;
        z.add(b);
        assert_eq!(x, z);
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(pair_hash("ab", "c"), pair_hash("a", "bc"));
        assert_eq!(VersionSum::EMPTY.to_version(), "0000000000000000");
    }

    #[test]
    fn names_and_versions_read_back_from_the_body_inline_or_apart() {
        fn named(name: &str) -> alloc::vec::Vec<u8> {
            let mut body = alloc::vec![0x0a, name.len() as u8];
            body.extend_from_slice(name.as_bytes());
            body.extend_from_slice(b"\x12\x01z");
            body
        }
        for (name, version, body, name_apart, version_apart) in [
            (
                "cluster-a",
                "0123456789abcdef",
                named("cluster-a"),
                false,
                false,
            ),
            ("cluster-a", "v1", named("cluster-a"), false, false),
            ("cluster-a", "", named("cluster-a"), false, false),
            ("é", "ü", named("é"), false, false),
            (
                "n",
                "a version that is longer than sixteen bytes",
                named("n"),
                false,
                true,
            ),
            ("a name", "0123456789abcdeé", named("another"), true, true),
            ("a name", "v1", alloc::vec![], true, false),
        ] {
            let (kept, text) = NameAndVersion::new(name, version, &body);
            let text = text.as_deref().unwrap_or_default();
            assert_eq!(kept.name(&body).is_none(), name_apart, "{name}");
            assert_eq!(kept.version().is_none(), version_apart, "{version}");
            let read_name = kept.name(&body).unwrap_or_else(|| kept.name_apart(text));
            let read_version = kept.version().unwrap_or_else(|| kept.version_apart(text));
            assert_eq!((read_name, read_version), (name, version));
        }
        assert_eq!(core::mem::size_of::<NameAndVersion>(), 24);
    }
}

/// A stored resource's name and version in 24 bytes, beside its body. The name is a range
/// of the body: every type of the catalog names itself in field 1, first, so the store
/// keeps no copy of it (a boxed name cost 16 bytes and a buffer a resource). A version of
/// up to 16 bytes (the default one, [`body_version`], always is) is kept inline, padded
/// with `0xFF`, which UTF-8 never holds. A name its body does not spell that way, and a
/// longer version, are kept apart by the resource, in one text: the name, then the version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NameAndVersion {
    /// The version, padded with [`PAD`]; [`APART`] first when it is kept apart.
    version: [u8; 16],
    /// Where the name starts in the body; [`NAME_APART`] when it is kept apart.
    name_at: u32,
    /// The name's length, in the body or in the text kept apart.
    name_len: u32,
}

/// What follows an inline version shorter than 16 bytes (never a UTF-8 byte).
const PAD: u8 = 0xFF;
/// The first inline byte of a version kept apart (never a UTF-8 byte either).
const APART: u8 = 0xFE;
/// `name_at` of a name kept apart.
const NAME_APART: u32 = u32::MAX;

impl NameAndVersion {
    /// Where `name` and `version` of the resource whose body is `body` are kept, and the
    /// text to keep apart, if any.
    pub(crate) fn new(
        name: &str,
        version: &str,
        body: &[u8],
    ) -> (NameAndVersion, Option<Box<str>>) {
        let mut inline = [PAD; 16];
        let version_apart = match inline.get_mut(..version.len()) {
            Some(room) => {
                room.copy_from_slice(version.as_bytes());
                false
            }
            None => {
                inline[0] = APART;
                true
            }
        };
        let in_body = crate::resource::name_in_body(body, name.as_bytes())
            .and_then(|at| Some((u32::try_from(at).ok()?, u32::try_from(name.len()).ok()?)))
            .filter(|(at, _)| *at != NAME_APART);
        let (name_at, name_len, name_apart) = match in_body {
            Some((at, len)) => (at, len, ""),
            // A name of 4 GiB is refused long before (a frame could not carry it).
            None => (
                NAME_APART,
                u32::try_from(name.len()).unwrap_or(u32::MAX),
                name,
            ),
        };
        let text = (!name_apart.is_empty() || version_apart).then(|| {
            let mut text = String::with_capacity(name_apart.len() + version.len());
            text.push_str(name_apart);
            if version_apart {
                text.push_str(version);
            }
            text.into_boxed_str()
        });
        let id = NameAndVersion {
            version: inline,
            name_at,
            name_len,
        };
        (id, text)
    }

    /// The name, read from `body` (the one it was made with); `None` when kept apart.
    #[inline]
    pub(crate) fn name<'b>(&self, body: &'b [u8]) -> Option<&'b str> {
        if self.name_at == NAME_APART {
            return None;
        }
        let start = self.name_at as usize;
        let bytes = body.get(start..start + self.name_len as usize)?;
        // SAFETY: `new` keeps a range only where the body's bytes equal the `&str` it was
        // given, and a stored resource's body never changes.
        Some(unsafe { core::str::from_utf8_unchecked(bytes) })
    }

    /// The version; `None` when kept apart.
    pub(crate) fn version(&self) -> Option<&str> {
        if self.version[0] == APART {
            return None;
        }
        let len = self.version.iter().position(|b| *b == PAD).unwrap_or(16);
        let bytes = self.version.get(..len).unwrap_or_default();
        // Copied whole from a `&str`, so always UTF-8.
        Some(core::str::from_utf8(bytes).unwrap_or_default())
    }

    /// Where the name kept apart ends in the text (0 when it is in the body).
    fn apart_len(&self) -> usize {
        if self.name_at == NAME_APART {
            self.name_len as usize
        } else {
            0
        }
    }

    /// The name kept apart in `text` (what [`NameAndVersion::new`] returned).
    pub(crate) fn name_apart<'t>(&self, text: &'t str) -> &'t str {
        text.get(..self.apart_len()).unwrap_or_default()
    }

    /// The version kept apart in `text`.
    pub(crate) fn version_apart<'t>(&self, text: &'t str) -> &'t str {
        text.get(self.apart_len()..).unwrap_or_default()
    }
}
