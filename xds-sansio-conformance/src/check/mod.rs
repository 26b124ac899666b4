//! The conformance checker: follows a recorded conversation and reports every message of
//! one side that breaks a protocol rule, with the line and the protocol passage the rule
//! comes from.
//!
//! It judges other implementations, so it accepts every behaviour the protocol allows:
//! any order of names, hint updates at any time, ACKs sent late or for older responses,
//! requests in flight while responses cross them. It reports only what no correct peer
//! does. The rules and their identifiers are in [`Rule`]; the record format is in
//! [`record`]. Server rules judge the order in which the server saw and sent messages, so
//! check a server on its own recording.
//!
//! | id | side | broken when | from |
//! |---|---|---|---|
//! | `node-missing` | client | the first request of a stream has no node | xDS protocol, Basic Protocol Overview |
//! | `node-changed` | client | a request's node differs from the stream's first (the detail names the fields) | xDS protocol, Basic Protocol Overview |
//! | `nonce-unknown` | client | a request names a nonce never sent on the stream for its type | `DiscoveryRequest.response_nonce` |
//! | `nack-without-nonce` | client | `error_detail` without the rejected response's nonce | `DiscoveryResponse.nonce` |
//! | `nack-moved-version` | client | a SotW NACK's version is not the last accepted one | xDS protocol, NACK |
//! | `ack-version-mismatch` | client | the first error-free answer to a response carries another version | xDS protocol, ACK |
//! | `version-not-accepted` | client | a later SotW request carries a version the client never accepted (empty, a reset, is allowed) | xDS protocol, ACK/NACK and resource type instance version |
//! | `initial-versions-late` | client | delta `initial_resource_versions` after the first request of its type | `DeltaDiscoveryRequest.initial_resource_versions` |
//! | `delta-nonce-repeated` | client | a delta request repeats a nonce it already answered | `DeltaDiscoveryRequest.response_nonce` |
//! | `duplicate-names` | server | a response holds one name twice | xDS protocol, Duplicate Resource Names |
//! | `nonce-reused` | server | a response reuses an earlier nonce of the stream | xDS protocol, Resource updates |
//! | `nonce-missing` | server | a delta response has no nonce | xDS protocol, Incremental xDS |
//! | `removed-and-sent` | server | a delta response both updates and removes a name | xDS protocol, Deleting Resources |
//! | `unchanged-resend` | server | a response repeats what the client has, unasked | xDS protocol, When to send an update |
//! | `response-to-stale-request` | server | ... right after a stale request | xDS protocol, Resource updates |
//! | `resent-rejected-version` | server | ... the very content the client rejected | xDS protocol, When to send an update |
//! | `full-state-missing-resource` | server | an LDS/CDS SotW response leaves out a subscribed resource that exists (store lines) | xDS protocol, Grouping Resources into Responses |
//! | `type-mismatch` | server | a resource's type (its `Any`, the `Any` in a `Resource` wrapper, delta `Resource.resource`) is not the response's `type_url` | `DiscoveryResponse.type_url`, `DeltaDiscoveryResponse.resources` |
//! | `same-version-missing-resource` | server | an LDS/CDS SotW response, on any stream of the node, presents a version that held a subscribed resource and leaves it out | xDS protocol, ACK/NACK and resource type instance version |
//!
//! # Decisions
//!
//! * **A reused nonce is the server's fault, reported once.** `nonce-reused` is reported at
//!   the response. The client cannot tell the two responses apart, so an answer carrying
//!   that nonce may answer either: an error-free answer at the version of any of them is
//!   an ACK, each response sent with the nonce is owed one first answer, and a rejection
//!   of one of them is not held against the server (which one is unknown). Protocol:
//!   "the nonce provides a way to explicitly ack a specific DiscoveryResponse"
//!   (`DiscoveryResponse.nonce`).
//! * **Versions outlive streams.** "the version for a resource type is not a property of an
//!   individual xDS stream but rather a property of the resources themselves" (xDS
//!   protocol, ACK/NACK and resource type instance version). For LDS/CDS in SotW, where
//!   every response is the full state, the checker remembers every name each version
//!   held, over the whole record, and reports a response at one of those versions, on any
//!   stream, that leaves out a name it held while the name is subscribed. Two choices keep
//!   it from reporting correct servers: versions are remembered per node id (a server
//!   builds each node's resources, "typically based on the client's node identification",
//!   and may number each node's snapshots on its own, as go-control-plane's snapshot cache
//!   does), and the empty version, which says "no version", is not remembered. A response
//!   of TTL heartbeats only (body-less `Resource` wrappers) is neither judged nor
//!   remembered.
//! * **Never judge a resource read as empty.** A recording is canonical JSON; an `Any`
//!   whose message the checker has no schema for cannot be read from it, and
//!   [`parse_jsonl`] fails naming the line and the type rather than read it as an empty
//!   resource. [`parse_jsonl_with`] takes a [`JsonCodec`](xds_sansio::codec::json::JsonCodec) that
//!   knows the resource types (a `FileDescriptorSet`, e.g. the one Go's `protojson` or
//!   Java's `JsonFormat` recordings need; the CLI's `--descriptors FILE`).

pub mod record;
mod requests;
mod responses;
mod rules;

pub use record::{
    header_jsonl, parse_jsonl, parse_jsonl_with, to_jsonl, write_jsonl, Entry, RECORD_FORMAT,
    RECORD_VERSION,
};
pub use rules::{Rule, RuleSide, ALL_RULES};

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::RESOURCE_WRAPPER_TYPE_URL;

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The line of the offending message.
    pub line: usize,
    /// The rule.
    pub rule: Rule,
    /// What exactly was wrong.
    pub detail: String,
}

/// Which side's messages to judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckSide {
    /// Judge the requests.
    Client,
    /// Judge the responses.
    Server,
}

/// The content of one response, as far as resends are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sent {
    version: String,
    /// name -> (version, body); SotW: version is the response's unless wrapped.
    resources: BTreeMap<String, (String, Bytes)>,
    removed: BTreeSet<String>,
    /// The subscription generation when it was sent.
    generation: u64,
}

#[derive(Default)]
struct TypeTrack {
    /// nonce -> every response sent with it, in order (more than one only when the server
    /// reused the nonce).
    responses: BTreeMap<String, Vec<Sent>>,
    /// nonce -> how many of the responses sent with it no request has answered yet.
    owed: BTreeMap<String, usize>,
    latest_nonce: Option<String>,
    requests: u64,
    accepted: Option<String>,
    names: BTreeSet<String>,
    wildcard: bool,
    /// SotW: the wildcard is the legacy one (no name ever requested on this stream).
    legacy: bool,
    generation: u64,
    last_request_stale: bool,
    last_response: Option<Sent>,
    /// SotW: the content of the last NACKed response.
    rejected: Option<Sent>,
    /// Delta: name -> version sent and not rejected / removed / re-subscribed since.
    held: BTreeMap<String, String>,
    /// Delta: name -> version the client rejected.
    rejected_versions: BTreeMap<String, String>,
}

impl TypeTrack {
    /// Whether `name` is subscribed now.
    fn wants(&self, name: &str) -> bool {
        self.wildcard || self.names.contains(name)
    }
}

#[derive(Default)]
struct StreamTrack {
    node: Option<Node>,
    requests: u64,
    nonces: BTreeSet<String>,
    types: BTreeMap<String, TypeTrack>,
}

impl StreamTrack {
    /// The node id versions are remembered under (empty while the stream has no node).
    fn node_id(&self) -> &str {
        self.node.as_ref().map_or("", |n| n.id.as_str())
    }
}

/// Where full-state versions are remembered: node id, type URL, version.
type VersionKey = (String, String, String);

/// Checks a recorded conversation; returns the violations of `side`, in line order.
pub fn check(entries: &[Entry], side: CheckSide) -> Vec<Violation> {
    let mut checker = Checker::new(side);
    for entry in entries {
        checker.entry(entry);
    }
    checker.violations
}

/// The checker fed one entry at a time, as a conversation happens (`xds-sansio tap`
/// checks live traffic with it): both sides are judged, each violation is reported once,
/// as soon as the entry that breaks the rule arrives.
///
/// # Method kinds
/// An input ([`LiveCheck::handle_entry`]) and an output ([`LiveCheck::poll_violation`]):
/// after every entry, drain `poll_violation` until `None`. [`check`] over the same entries
/// finds the same violations of a side.
pub struct LiveCheck {
    client: Checker,
    server: Checker,
    pending: alloc::collections::VecDeque<(CheckSide, Violation)>,
}

impl Default for LiveCheck {
    fn default() -> Self {
        LiveCheck::new()
    }
}

impl core::fmt::Debug for LiveCheck {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LiveCheck")
            .field("streams", &self.client.streams.len())
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl LiveCheck {
    /// A checker that has seen nothing yet.
    pub fn new() -> LiveCheck {
        LiveCheck {
            client: Checker::new(CheckSide::Client),
            server: Checker::new(CheckSide::Server),
            pending: alloc::collections::VecDeque::new(),
        }
    }

    /// One more line of the conversation, in the order it was seen.
    pub fn handle_entry(&mut self, entry: &Entry) {
        for (side, checker) in [
            (CheckSide::Client, &mut self.client),
            (CheckSide::Server, &mut self.server),
        ] {
            checker.entry(entry);
            self.pending
                .extend(checker.violations.drain(..).map(|v| (side, v)));
        }
    }

    /// The next violation found, with the side that broke the rule.
    /// Call after: [`LiveCheck::handle_entry`].
    pub fn poll_violation(&mut self) -> Option<(CheckSide, Violation)> {
        self.pending.pop_front()
    }
}

struct Checker {
    side: CheckSide,
    streams: BTreeMap<u64, StreamTrack>,
    /// What the server holds, per type, when the record says (store lines).
    store: BTreeMap<String, BTreeMap<String, String>>,
    /// LDS/CDS SotW: every name each version held, with the line that first showed it.
    full_states: BTreeMap<VersionKey, BTreeMap<String, usize>>,
    violations: Vec<Violation>,
}

impl Checker {
    fn new(side: CheckSide) -> Checker {
        Checker {
            side,
            streams: BTreeMap::new(),
            store: BTreeMap::new(),
            full_states: BTreeMap::new(),
            violations: Vec::new(),
        }
    }

    /// Follows one entry, reporting what it breaks.
    fn entry(&mut self, entry: &Entry) {
        match entry {
            Entry::Request {
                line,
                stream,
                request,
            } => self.request(*line, *stream, request),
            Entry::Response {
                line,
                stream,
                response,
            } => self.response(*line, *stream, response),
            Entry::Store {
                type_url,
                name,
                version,
                ..
            } => {
                let names = self.store.entry(type_url.clone()).or_default();
                match version {
                    Some(version) => {
                        names.insert(name.clone(), version.clone());
                    }
                    None => {
                        names.remove(name);
                    }
                }
            }
        }
    }

    fn report(&mut self, side: CheckSide, line: usize, rule: Rule, detail: String) {
        if side == self.side {
            self.violations.push(Violation { line, rule, detail });
        }
    }
}

/// The name of a SotW resource (wrapper or body field 1) and its version and body.
fn sotw_resources(response: &DiscoveryResponse) -> Vec<(String, String, Bytes)> {
    response
        .resources
        .iter()
        .map(|any| {
            if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
                if let Ok(wrapper) = Resource::decode(any.value.clone()) {
                    let body = wrapper.resource.map(|b| b.value).unwrap_or_default();
                    let version = if wrapper.version.is_empty() {
                        response.version_info.clone()
                    } else {
                        wrapper.version
                    };
                    // The wrapper's name, else its resource_name, else the body's.
                    let name = if !wrapper.name.is_empty() {
                        wrapper.name
                    } else if let Some(named) = wrapper.resource_name.filter(|n| !n.name.is_empty())
                    {
                        named.name
                    } else {
                        xds_sansio::resource::name_of(&body).unwrap_or("").into()
                    };
                    return (name, version, body);
                }
            }
            let name = xds_sansio::resource::name_of(&any.value)
                .unwrap_or("")
                .into();
            (name, response.version_info.clone(), any.value.clone())
        })
        .collect()
}

fn delta_name(resource: &Resource) -> String {
    if resource.name.is_empty() {
        resource
            .resource_name
            .as_ref()
            .map(|n| n.name.clone())
            .unwrap_or_default()
    } else {
        resource.name.clone()
    }
}

fn sotw_sent(r: &DiscoveryResponse, generation: u64) -> Sent {
    Sent {
        version: r.version_info.clone(),
        resources: sotw_resources(r)
            .into_iter()
            .map(|(name, version, body)| (name, (version, body)))
            .collect(),
        removed: BTreeSet::new(),
        generation,
    }
}

fn delta_sent(r: &DeltaDiscoveryResponse, generation: u64) -> Sent {
    Sent {
        version: r.system_version_info.clone(),
        resources: r
            .resources
            .iter()
            .map(|res| {
                let body = res
                    .resource
                    .as_ref()
                    .map(|b| b.value.clone())
                    .unwrap_or_default();
                (delta_name(res), (res.version.clone(), body))
            })
            .collect(),
        removed: r
            .removed_resources
            .iter()
            .cloned()
            .chain(r.removed_resource_names.iter().map(|n| n.name.clone()))
            .collect(),
        generation,
    }
}

#[cfg(test)]
mod tests;
