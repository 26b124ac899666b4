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
    fn names_and_versions_read_back_inline_or_apart() {
        for (name, version) in [
            ("cluster-a", "0123456789abcdef"),
            ("cluster-a", "v1"),
            ("", ""),
            ("é", "ü"),
            ("n", "a version that is longer than sixteen bytes"),
            ("a name of sixteen", "0123456789abcdeé"),
        ] {
            let kept = NameAndVersion::new(name, String::from(version));
            assert_eq!((kept.name(), kept.version()), (name, version));
        }
        assert_eq!(core::mem::size_of::<NameAndVersion>(), 32);
    }
}

/// A stored resource's name and version in 32 bytes. A 16-byte version (the default one,
/// [`body_version`], always is) is kept inline, beside the boxed name: a store of a million
/// resources then holds no buffer per version. Any other version (the application's own)
/// follows the name in the same buffer, and the inline bytes say where the name ends: they
/// start with `0xFF`, which no UTF-8 text starts with. A name and a boxed version kept
/// apart cost 40 bytes (the version's enum took a word for its tag) and two buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NameAndVersion {
    /// The name, followed by the version when it is not inline.
    text: alloc::boxed::Box<str>,
    /// The version's 16 bytes, or [`APART`] and the name's length (little-endian).
    version: [u8; 16],
}

/// The first inline byte of a version kept after the name (never a UTF-8 byte).
const APART: u8 = 0xFF;

impl NameAndVersion {
    pub(crate) fn new(name: &str, version: String) -> NameAndVersion {
        match <[u8; 16]>::try_from(version.as_bytes()) {
            Ok(bytes) => NameAndVersion {
                text: name.into(),
                version: bytes,
            },
            Err(_) => {
                let mut text = String::with_capacity(name.len() + version.len());
                text.push_str(name);
                text.push_str(&version);
                let mut inline = [0u8; 16];
                inline[0] = APART;
                inline[1..9].copy_from_slice(&(name.len() as u64).to_le_bytes());
                NameAndVersion {
                    text: text.into_boxed_str(),
                    version: inline,
                }
            }
        }
    }

    /// Where the name ends in `text`, when the version follows it.
    fn split(&self) -> Option<usize> {
        if self.version[0] != APART {
            return None;
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&self.version[1..9]);
        usize::try_from(u64::from_le_bytes(len)).ok()
    }

    pub(crate) fn name(&self) -> &str {
        match self.split() {
            None => &self.text,
            Some(at) => self.text.get(..at).unwrap_or_default(),
        }
    }

    pub(crate) fn version(&self) -> &str {
        match self.split() {
            // Built from a `String`, so always UTF-8.
            None => core::str::from_utf8(&self.version).unwrap_or_default(),
            Some(at) => self.text.get(at..).unwrap_or_default(),
        }
    }
}
