//! Errors the application publishes for resources instead of bodies, sent in
//! `resource_errors` (xRFC TP3, "xDS error propagation"; gRPC A88 is how gRPC clients read
//! them): one per name, and one per type for every name of the type the store holds no
//! body and no error of its own for ([`TYPE_WIDE`]). The store keeps them
//! ([`ResourceStore::set_error`](super::ResourceStore::set_error)); `sotw.rs` and
//! `delta.rs` say them to the streams that subscribe.

use alloc::string::String;

use super::version::pair_hash;
use crate::pb::discovery::{ResourceError, ResourceName};
use crate::pb::google::rpc::Status;

/// The name under which an error concerns the whole type: every name of it that the store
/// holds neither a body nor an error of its own for; to a wildcard subscriber it is said
/// once, under this name (TP3: an error for the wildcard subscription as a whole).
pub const TYPE_WIDE: &str = "*";

/// A published error and the hash it enters version digests with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoredError {
    pub(crate) status: Status,
    pub(crate) hash: u64,
}

impl StoredError {
    pub(crate) fn new(name: &str, status: Status) -> StoredError {
        let hash = error_hash(name, &status);
        StoredError { status, hash }
    }
}

/// The hash of "`name` is in error `status`", as it enters a
/// [`VersionSum`](super::VersionSum) beside the `(name, version)` pairs of bodies: an
/// error that changes the code or the message changes the SotW version, and the same
/// error is the same version on every replica. A `0x01` marker keeps it apart from any
/// body's pair.
pub(crate) fn error_hash(name: &str, status: &Status) -> u64 {
    let mut tag = String::from("\u{1}error:");
    tag.push_str(&alloc::format!("{}:", status.code));
    tag.push_str(&status.message);
    pair_hash(name, &tag)
}

/// One `resource_errors` entry.
pub(crate) fn entry(name: &str, status: &Status) -> ResourceError {
    ResourceError {
        resource_name: Some(ResourceName {
            name: String::from(name),
            ..ResourceName::default()
        }),
        error_detail: Some(status.clone()),
    }
}
