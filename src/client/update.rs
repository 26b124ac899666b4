//! A response of either variant, once the protocol checks passed: the one shape the shared
//! apply step works on, so SotW and incremental share every cache, timer and status rule.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::time::Duration;
use hashbrown::HashSet;

use super::text::SharedStr;
use crate::pb::discovery::ResourceError;
use crate::types::NOT_FOUND_CODE as NOT_FOUND;

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
    /// `resource_errors` other than NOT_FOUND (those are in `removed`).
    pub(crate) errors: Vec<ReportedError>,
}

/// A `resource_errors` entry (xRFC TP3) that is not a NOT_FOUND for a concrete name.
#[derive(Clone, Debug)]
pub(crate) struct ReportedError {
    /// `""`, `*` or an `xdstp` glob: the subscription as a whole.
    pub(crate) name: SharedStr,
    pub(crate) code: i32,
    pub(crate) message: String,
}

/// `google.rpc.Code.UNKNOWN`: what an entry without `error_detail` is taken to mean.
const UNKNOWN: i32 = 2;

/// Whether `name` stands for a whole subscription rather than one resource (xRFC TP3,
/// "Wildcard Subscriptions and Glob Collections").
pub(crate) fn is_collection(name: &str) -> bool {
    name.is_empty() || name == "*" || (name.starts_with("xdstp://") && name.ends_with("/*"))
}

/// Splits `resource_errors` (xRFC TP3, both variants): NOT_FOUND for a concrete name means
/// "does not exist", handled exactly like an incremental removal, so it joins the removed
/// names; every other entry is an error to report. An entry without a name is about the
/// legacy wildcard (`""`); one without `error_detail` counts as UNKNOWN.
pub(crate) fn split_resource_errors(
    errors: Vec<ResourceError>,
    max_name_len: usize,
) -> Result<(Vec<SharedStr>, Vec<ReportedError>), String> {
    let mut not_found = Vec::new();
    let mut reported = Vec::new();
    for (i, e) in errors.into_iter().enumerate() {
        let name = e.resource_name.map(|n| n.name).unwrap_or_default();
        if name.len() > max_name_len {
            return Err(alloc::format!(
                "resource error {i}: name of {} bytes, over the limit of {max_name_len}",
                name.len()
            ));
        }
        let (code, message) = e
            .error_detail
            .map_or((UNKNOWN, String::new()), |s| (s.code, s.message));
        let name = SharedStr::from(name);
        if code == NOT_FOUND && !is_collection(&name) {
            not_found.push(name);
        } else {
            reported.push(ReportedError {
                name,
                code,
                message,
            });
        }
    }
    Ok((not_found, reported))
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
