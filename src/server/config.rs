//! How one server stream behaves: the variant and transport it speaks and the options
//! and bounds its owner chose. Read by the stream and by each type's state.

use alloc::string::String;
use alloc::vec::Vec;

use super::event::Limit;
#[cfg(doc)]
use super::event::ProtocolError;
use crate::message::{Request, Transport, Variant};

/// How a delta stream tells a client that a subscribed name does not exist.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NotFoundReporting {
    /// In `removed_resources`: what deployed clients (Envoy, gRPC) expect.
    #[default]
    RemovedResources,
    /// As a `Resource` with the name and no body, as the protocol text describes.
    BodylessResource,
}

/// How one stream behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// SotW or delta: which request type the gRPC method carries.
    pub variant: Variant,
    /// ADS or one type.
    pub transport: Transport,
    /// How delta reports subscribed names that do not exist.
    pub not_found: NotFoundReporting,
    /// Whether the first request must carry a node (the protocol says it does).
    pub require_node: bool,
    /// A TTL resource's heartbeat is sent `ttl / heartbeat_divisor` after it was last sent
    /// (values below 2 count as 2, so a heartbeat always comes before expiry).
    pub heartbeat_divisor: u32,
    /// Bounds on what one client may make the stream hold; a request beyond them closes
    /// the stream with [`ProtocolError::LimitExceeded`] before anything of it is applied.
    pub limits: ServerLimits,
    /// SotW legacy wildcard (a first LDS/CDS request with no names) lasts for the whole
    /// stream and later names are ignored, as the older protocol text says. Off by default: the newest
    /// protocol text and Envoy since 1.21 end it when a request names resources without
    /// `*` (go-control-plane#558).
    pub sticky_legacy_wildcard: bool,
    /// SotW: tell the client at once that a subscribed name does not exist, with a
    /// `resource_errors` entry of code NOT_FOUND (newest text, xRFC TP3), when the name is
    /// newly subscribed (or re-requested on a new stream) and absent, or when a resource
    /// the stream sent or names is removed from a non-full-state type. Off by default:
    /// clients that predate the field ignore it and fall back on their does-not-exist
    /// timer, so turning it on is safe but changes the bytes sent.
    pub sotw_not_found_errors: bool,
    /// Flow control: at most one response per type in flight. After a response of a type,
    /// the next one for that type waits until the client answers it (a request carrying
    /// its nonce: ACK or NACK); what changes meanwhile stays state, so the next response
    /// carries the newest. A type never waits for another type's answer (Envoy holds its
    /// CDS ACK until the EDS of warming clusters arrives), and delta removals still wait
    /// for every type's upserts, held ones included. A client that never answers gets
    /// nothing more for that type. Off by default (the protocol allows sending before the
    /// ACK); a server whose transport buffers responses (HTTP/2 does) turns it on so a slow
    /// reader is never sent a queue of stale states. go-control-plane's watches behave so.
    pub await_ack: bool,
    /// Delta: once a wildcard type's full answer is out, keep only what differs from the
    /// store instead of an entry per resource sent (see the `server` module docs, "Memory
    /// of an incremental stream"). On by default: a wildcard stream then costs what is in
    /// flight, not its type's size. The price: a stream whose store's change log runs
    /// past it resends every resource changed meanwhile (not only those the client does
    /// not hold), and one that falls behind by more removals than the log holds ends with
    /// [`ProtocolError::ChangeLogOutrun`] (`UNAVAILABLE`), for the client to resume with
    /// `initial_resource_versions`. Off: every stream keeps an entry per resource and
    /// resyncs in place instead.
    pub delta_in_step: bool,
}

impl ServerConfig {
    /// The defaults: node required, not-found in `removed_resources`, heartbeat at half the
    /// TTL.
    pub fn new(variant: Variant, transport: Transport) -> ServerConfig {
        ServerConfig {
            variant,
            transport,
            not_found: NotFoundReporting::RemovedResources,
            require_node: true,
            heartbeat_divisor: 2,
            sticky_legacy_wildcard: false,
            sotw_not_found_errors: false,
            await_ack: false,
            delta_in_step: true,
            limits: ServerLimits::default(),
        }
    }
}

/// Bounds on what a client may make one stream hold, so memory stays within what the
/// application configured whatever the peer sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerLimits {
    /// Names in one request (SotW `resource_names`; delta subscribe, unsubscribe and
    /// `initial_resource_versions` together). Default 1 000 000.
    pub max_names_per_request: usize,
    /// Bytes in one resource name. Default 64 KiB.
    pub max_name_len: usize,
    /// Distinct type URLs on one stream. Default 256.
    pub max_types: usize,
}

impl Default for ServerLimits {
    fn default() -> ServerLimits {
        ServerLimits {
            max_names_per_request: 1_000_000,
            max_name_len: 64 * 1024,
            max_types: 256,
        }
    }
}

impl ServerLimits {
    /// What of `request` goes beyond the limits, if anything.
    pub(crate) fn exceeded(&self, request: &Request) -> Option<Limit> {
        let names: Vec<&str> = match request {
            Request::Sotw(r) => r.resource_names.iter().map(String::as_str).collect(),
            Request::Delta(r) => r
                .resource_names_subscribe
                .iter()
                .chain(&r.resource_names_unsubscribe)
                .chain(r.initial_resource_versions.keys())
                .map(String::as_str)
                .collect(),
        };
        if names.len() > self.max_names_per_request {
            Some(Limit::NamesPerRequest)
        } else if names.iter().any(|n| n.len() > self.max_name_len) {
            Some(Limit::NameLength)
        } else {
            None
        }
    }
}
