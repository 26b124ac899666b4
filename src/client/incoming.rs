//! What SotW and incremental share before the apply step: the one shape a checked response
//! takes ([`Update`], so both variants share every cache, timer and status rule), the
//! checks both make (duplicates, limits, TTLs, names, `resource_errors`). (The kinds of
//! request a type may owe are the type state's, `Due`.)

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::hash::BuildHasher;
use core::time::Duration;
use hashbrown::hash_table::Entry;
use hashbrown::{DefaultHashBuilder, HashTable};

use super::config::Limits;
use super::defect::{At, ResponseDefect};
use crate::name::{XdstpName, XDSTP_SCHEME};
use crate::pb::discovery::{ResourceError, ResourceName};
use crate::pb::google::protobuf::Any;
use crate::text::SharedStr;

/// One resource of a response that the client asked for (by name, alias or wildcard).
#[derive(Clone, Debug)]
pub(crate) struct Incoming {
    pub(crate) name: SharedStr,
    /// `None`: the response's `version_info` (SotW without a wrapper version).
    pub(crate) version: Option<SharedStr>,
    /// `None`: a body-less `Resource` (heartbeat, or incremental "does not exist").
    pub(crate) body: Option<Bytes>,
    /// Its aliases and TTL, when it has either: boxed, as both are rare (VHDS, TTL
    /// heartbeats), so an `Incoming` moves without a `memcpy` call and drops without
    /// dropping an empty vector (~80 instructions a resource together, callgrind).
    pub(crate) rare: Option<Box<IncomingRare>>,
    /// The name's hash by its type's cache (the hash its record is found by), set by
    /// [`check_duplicates`], which every response passes: the duplicate check and the
    /// cache's record lookup share one hash of each name.
    pub(crate) hash: u64,
}

/// What few resources of a response carry (see [`Incoming::rare`]).
#[derive(Clone, Debug)]
pub(crate) struct IncomingRare {
    pub(crate) aliases: Vec<SharedStr>,
    pub(crate) ttl: Option<Duration>,
}

impl Incoming {
    /// The [`Incoming::rare`] part for `aliases` and `ttl`: `None` without either.
    pub(crate) fn rare_of(
        aliases: Vec<SharedStr>,
        ttl: Option<Duration>,
    ) -> Option<Box<IncomingRare>> {
        (!aliases.is_empty() || ttl.is_some()).then(|| Box::new(IncomingRare { aliases, ttl }))
    }

    /// Its aliases (incremental).
    #[inline]
    pub(crate) fn aliases(&self) -> &[SharedStr] {
        self.rare.as_deref().map_or(&[], |r| r.aliases.as_slice())
    }

    /// The TTL it came with.
    #[inline]
    pub(crate) fn ttl(&self) -> Option<Duration> {
        self.rare.as_deref().and_then(|r| r.ttl)
    }

    /// The length of its body (0 without one).
    #[inline]
    pub(crate) fn body_len(&self) -> usize {
        self.body.as_ref().map_or(0, Bytes::len)
    }
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
    /// `resource_errors`, every code (what NOT_FOUND does is the apply step's call).
    pub(crate) errors: Vec<ReportedError>,
}

/// A `resource_errors` entry (xRFC TP3).
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
    name.is_empty() || name == "*" || crate::name::is_glob(name)
}

/// Reads `resource_errors` (xRFC TP3, both variants; the caller bounds their count). An
/// entry without a name is about the legacy wildcard (`""`); one without `error_detail`
/// counts as UNKNOWN. What each code does is decided in `type_state` (gRPC A88).
pub(crate) fn read_resource_errors(
    errors: Vec<ResourceError>,
    limits: &Limits,
) -> Result<Vec<ReportedError>, ResponseDefect> {
    let mut reported = Vec::with_capacity(errors.len());
    for (i, e) in errors.into_iter().enumerate() {
        let name = e.resource_name.map(|n| n.name).unwrap_or_default();
        if name.len() > limits.max_name_len {
            return Err(ResponseDefect::NameTooLong {
                what: "resource error name",
                at: Some(At::Index(i)),
                len: name.len(),
                limit: limits.max_name_len,
            });
        }
        let (code, message) = e
            .error_detail
            .map_or((UNKNOWN, String::new()), |s| (s.code, s.message));
        let name = received_name(SharedStr::from(name))?;
        reported.push(ReportedError {
            name,
            code,
            message,
        });
    }
    Ok(reported)
}

/// A response that broke a protocol rule: NACKed whole, no state change.
#[derive(Clone, Debug)]
pub(crate) struct Reject {
    pub(crate) nonce: SharedStr,
    pub(crate) version: SharedStr,
    /// Boxed: rare, and it keeps the `Err` of every check small.
    pub(crate) defect: alloc::boxed::Box<ResponseDefect>,
}

/// What a variant's checks keep of a response: the resources wanted, the names removed and
/// the errors to report.
pub(crate) type Checked = (Vec<Incoming>, Vec<SharedStr>, Vec<ReportedError>);

/// The result of a variant's checks as the shared step takes it: an [`Update`], or a
/// [`Reject`] carrying the response's nonce and version.
pub(crate) fn finish(
    nonce: SharedStr,
    version: SharedStr,
    full_state: bool,
    checked: Result<Checked, ResponseDefect>,
) -> Result<Update, Reject> {
    match checked {
        Ok((resources, removed, errors)) => Ok(Update {
            nonce,
            version,
            resources,
            removed,
            full_state,
            errors,
        }),
        Err(defect) => Err(Reject {
            nonce,
            version,
            defect: alloc::boxed::Box::new(defect),
        }),
    }
}

/// A `google.protobuf.Duration` TTL as a `core` duration; negative or malformed is an error.
pub(crate) fn ttl_of(
    ttl: Option<prost_types::Duration>,
    at: impl FnOnce() -> At,
) -> Result<Option<Duration>, ResponseDefect> {
    let Some(ttl) = ttl else {
        return Ok(None);
    };
    let secs = u64::try_from(ttl.seconds);
    let nanos = u32::try_from(ttl.nanos);
    match (secs, nanos) {
        (Ok(s), Ok(n)) if n < 1_000_000_000 => Ok(Some(Duration::new(s, n))),
        _ => Err(ResponseDefect::InvalidTtl {
            at: at(),
            seconds: ttl.seconds,
            nanos: ttl.nanos,
        }),
    }
}

/// The body an `Any` carries, if it is of the response's type (`discovery.proto`,
/// `DiscoveryResponse.type_url`: "Must be consistent with the type_url in the 'resources'
/// repeated Any"); `wrapped` when the `Any` is the one inside a `Resource` wrapper.
pub(crate) fn body_of(
    any: Any,
    type_url: &str,
    at: impl FnOnce() -> At,
    wrapped: bool,
) -> Result<Bytes, ResponseDefect> {
    if any.type_url != type_url {
        return Err(ResponseDefect::TypeMismatch {
            at: at(),
            found: String::from(any.type_url.as_str()),
            expected: String::from(type_url),
            wrapped,
        });
    }
    Ok(any.value)
}

/// The name a `Resource` (wrapper or incremental) gives itself: `name`, else
/// `resource_name.name`; `None` when both are empty.
pub(crate) fn wrapper_name(name: String, resource_name: Option<ResourceName>) -> Option<String> {
    if goes_by_name(&name) {
        Some(name)
    } else {
        resource_name.map(|rn| rn.name).filter(|n| !n.is_empty())
    }
}

/// The length of what [`wrapper_name`] returns (0 for `None`), read without taking it.
pub(crate) fn wrapper_name_len(name: &str, resource_name: Option<&ResourceName>) -> usize {
    if goes_by_name(name) {
        name.len()
    } else {
        resource_name.map_or(0, |rn| rn.name.len())
    }
}

/// Whether a `Resource` goes by its `name` rather than its `resource_name`.
fn goes_by_name(name: &str) -> bool {
    !name.is_empty()
}

/// A name from the wire in the form the client compares it in: an `xdstp://` name
/// canonicalised (xDS TP1: context parameters in any order are the same resource), a
/// malformed one refused. Any other name is kept as it is (no copy).
#[inline]
pub(crate) fn received_name(name: SharedStr) -> Result<SharedStr, ResponseDefect> {
    if !name.starts_with(XDSTP_SCHEME) {
        return Ok(name);
    }
    canonical_xdstp(name)
}

/// [`received_name`] of an `xdstp://` name.
#[cold]
fn canonical_xdstp(name: SharedStr) -> Result<SharedStr, ResponseDefect> {
    let urn = XdstpName::parse(&name).map_err(|error| ResponseDefect::MalformedXdstpName {
        name: String::from(name.as_str()),
        error,
    })?;
    let canonical = urn.canonical();
    Ok(if canonical == name.as_str() {
        name
    } else {
        SharedStr::from(canonical)
    })
}

/// Fails on the first name that appears twice ("Clients should NACK responses that contain
/// multiple instances of the same resource name", xDS protocol, "Duplicate Resource
/// Names"): among the resources, among the removed names, or in both. Notes each
/// resource's [`Incoming::hash`] by `hasher`, the one its type's cache finds its record by.
pub(crate) fn check_duplicates(
    resources: &mut [Incoming],
    removed: &[SharedStr],
    hasher: &DefaultHashBuilder,
) -> Result<(), ResponseDefect> {
    for inc in resources.iter_mut() {
        inc.hash = hasher.hash_one(inc.name.as_str());
    }
    let removed_hashes: Vec<u64> = removed
        .iter()
        .map(|n| hasher.hash_one(n.as_str()))
        .collect();
    let named = |i: usize| {
        resources
            .get(i)
            .map(|inc| (&inc.name, inc.hash))
            .or_else(|| {
                let r = i.checked_sub(resources.len())?;
                Some((removed.get(r)?, *removed_hashes.get(r)?))
            })
    };
    // Positions among the resources, then the removed names; room for all, so it never
    // grows (the rehash below is never called).
    let mut seen: HashTable<u32> = HashTable::with_capacity(resources.len() + removed.len());
    for i in 0..resources.len().saturating_add(removed.len()) {
        let (Some((name, hash)), Ok(slot)) = (named(i), u32::try_from(i)) else {
            break;
        };
        match seen.entry(
            hash,
            |&j| named(j as usize).is_some_and(|(n, _)| n == name),
            |&j| named(j as usize).map_or(0, |(_, h)| h),
        ) {
            Entry::Occupied(_) => return Err(ResponseDefect::DuplicateName(name.clone())),
            Entry::Vacant(v) => {
                v.insert(slot);
            }
        }
    }
    Ok(())
}

/// Fails when a response carries more than [`Limits::max_resources_per_response`] of
/// `what`.
pub(crate) fn check_count(
    what: &'static str,
    count: usize,
    limits: &Limits,
) -> Result<(), ResponseDefect> {
    if count > limits.max_resources_per_response {
        return Err(ResponseDefect::TooManyResources {
            what,
            count,
            limit: limits.max_resources_per_response,
        });
    }
    Ok(())
}

/// Fails when `name` is longer than [`Limits::max_name_len`].
pub(crate) fn check_name_len(
    what: &'static str,
    at: Option<At>,
    name: &str,
    limits: &Limits,
) -> Result<(), ResponseDefect> {
    if name.len() > limits.max_name_len {
        return Err(ResponseDefect::NameTooLong {
            what,
            at,
            len: name.len(),
            limit: limits.max_name_len,
        });
    }
    Ok(())
}
