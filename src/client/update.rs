//! A response of either variant, once the protocol checks passed: the one shape the shared
//! apply step works on, so SotW and incremental share every cache, timer and status rule.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;
use hashbrown::HashSet;

use super::text::SharedStr;

/// One resource of a response that the client asked for (by name, alias or wildcard).
#[derive(Clone, Debug)]
pub(crate) struct Incoming {
    pub(crate) name: SharedStr,
    /// `None`: the response's `version_info` (SotW without a wrapper version).
    pub(crate) version: Option<SharedStr>,
    /// `None`: a body-less `Resource` (heartbeat, or incremental "does not exist").
    pub(crate) body: Option<Bytes>,
    pub(crate) aliases: Vec<SharedStr>,
    pub(crate) ttl: Option<Duration>,
}

/// A checked response.
#[derive(Clone, Debug)]
pub(crate) struct Update {
    pub(crate) nonce: SharedStr,
    /// SotW `version_info`; incremental `system_version_info`.
    pub(crate) version: SharedStr,
    pub(crate) resources: Vec<Incoming>,
    /// Incremental removals.
    pub(crate) removed: Vec<SharedStr>,
    /// SotW LDS/CDS: whatever is held and absent was deleted.
    pub(crate) full_state: bool,
}

/// A response that broke a protocol rule: NACKed whole, no state change.
#[derive(Clone, Debug)]
pub(crate) struct Reject {
    pub(crate) nonce: SharedStr,
    pub(crate) version: SharedStr,
    pub(crate) message: String,
}

/// A `google.protobuf.Duration` TTL as a `core` duration; negative or malformed is an error.
pub(crate) fn ttl_of(ttl: Option<prost_types::Duration>) -> Result<Option<Duration>, String> {
    let Some(ttl) = ttl else {
        return Ok(None);
    };
    let secs = u64::try_from(ttl.seconds);
    let nanos = u32::try_from(ttl.nanos);
    match (secs, nanos) {
        (Ok(s), Ok(n)) if n < 1_000_000_000 => Ok(Some(Duration::new(s, n))),
        _ => Err(alloc::format!(
            "invalid ttl {}s {}ns (negative or out of range)",
            ttl.seconds,
            ttl.nanos
        )),
    }
}

/// Fails on the first name that appears twice (seed 000, "Duplicate Resource Names").
pub(crate) fn check_duplicates(resources: &[Incoming]) -> Result<(), String> {
    let mut seen: HashSet<&str> = HashSet::with_capacity(resources.len());
    for inc in resources {
        if !seen.insert(inc.name.as_str()) {
            return Err(alloc::format!(
                "duplicate resource name {:?}",
                inc.name.as_str()
            ));
        }
    }
    Ok(())
}
