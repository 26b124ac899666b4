//! The conformance checker: follows a recorded conversation and reports every message of
//! one side that breaks a protocol rule, with the line and the seed text the rule comes
//! from (feature `check`).
//!
//! It judges other implementations, so it accepts every behaviour the protocol allows:
//! any order of names, hint updates at any time, ACKs sent late or for older responses,
//! requests in flight while responses cross them. It reports only what no correct peer
//! does. The rules and their identifiers are in [`Rule`]; the record format is in
//! [`record`].
//!
//! | id | side | broken when |
//! |---|---|---|
//! | `node-missing` | client | the first request of a stream has no node |
//! | `node-changed` | client | a request's node differs from the stream's first |
//! | `nonce-unknown` | client | a request names a nonce never sent on the stream for its type |
//! | `nack-without-nonce` | client | `error_detail` without the rejected response's nonce |
//! | `nack-moved-version` | client | a SotW NACK's version is not the last accepted one |
//! | `ack-version-mismatch` | client | the first error-free answer to a response carries another version |
//! | `version-not-accepted` | client | a later SotW request carries a version the client never accepted (empty, a reset, is allowed) |
//! | `initial-versions-late` | client | delta `initial_resource_versions` after the first request of its type |
//! | `delta-nonce-repeated` | client | a delta request repeats a nonce it already answered |
//! | `duplicate-names` | server | a response holds one name twice |
//! | `nonce-reused` | server | a response reuses an earlier nonce of the stream |
//! | `nonce-missing` | server | a delta response has no nonce |
//! | `removed-and-sent` | server | a delta response both updates and removes a name |
//! | `unchanged-resend` | server | a response repeats what the client has, unasked |
//! | `response-to-stale-request` | server | ... right after a stale request |
//! | `resent-rejected-version` | server | ... the very content the client rejected |
//! | `full-state-missing-resource` | server | an LDS/CDS SotW response leaves out a subscribed resource that exists |

pub mod record;
mod rules;

pub use record::{parse_jsonl, to_jsonl, Entry};
pub use rules::{Rule, RuleSide, ALL_RULES};

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use crate::message::{Request, Response};
use crate::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use crate::pb::envoy::config::core::v3::Node;
use crate::types::{TypeInfo, RESOURCE_WRAPPER_TYPE_URL};

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
    responses: BTreeMap<String, Sent>,
    latest_nonce: Option<String>,
    answered: BTreeSet<String>,
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

#[derive(Default)]
struct StreamTrack {
    node: Option<Node>,
    requests: u64,
    nonces: BTreeSet<String>,
    types: BTreeMap<String, TypeTrack>,
}

/// Checks a recorded conversation; returns the violations of `side`, in line order.
pub fn check(entries: &[Entry], side: CheckSide) -> Vec<Violation> {
    let mut checker = Checker {
        side,
        streams: BTreeMap::new(),
        store: BTreeMap::new(),
        violations: Vec::new(),
    };
    for entry in entries {
        match entry {
            Entry::Request {
                line,
                stream,
                request,
            } => checker.request(*line, *stream, request),
            Entry::Response {
                line,
                stream,
                response,
            } => checker.response(*line, *stream, response),
            Entry::Store {
                type_url,
                name,
                version,
                ..
            } => {
                let names = checker.store.entry(type_url.clone()).or_default();
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
    checker.violations
}

struct Checker {
    side: CheckSide,
    streams: BTreeMap<u64, StreamTrack>,
    /// What the server holds, per type, when the record says (store lines).
    store: BTreeMap<String, BTreeMap<String, String>>,
    violations: Vec<Violation>,
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
                    return (wrapper.name, version, body);
                }
            }
            let name = crate::resource::name_of(&any.value).unwrap_or("").into();
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

impl Checker {
    fn report(&mut self, side: CheckSide, line: usize, rule: Rule, detail: String) {
        if side == self.side {
            self.violations.push(Violation { line, rule, detail });
        }
    }

    fn request(&mut self, line: usize, stream: u64, request: &Request) {
        let s = self.streams.entry(stream).or_default();
        let node = match request {
            Request::Sotw(r) => r.node.as_ref(),
            Request::Delta(r) => r.node.as_ref(),
        };
        let mut found = Vec::new();
        if s.requests == 0 {
            match node {
                None => found.push((
                    Rule::NodeMissing,
                    "the first request of the stream has no node".into(),
                )),
                Some(node) => s.node = Some(node.clone()),
            }
        } else if let (Some(node), Some(first)) = (node, &s.node) {
            if node != first {
                found.push((
                    Rule::NodeChanged,
                    format!("node {:?} differs from the first, {:?}", node.id, first.id),
                ));
            }
        } else if let (Some(node), None) = (node, &s.node) {
            s.node = Some(node.clone());
        }
        s.requests += 1;
        let type_url = String::from(request.type_url());
        let t = s.types.entry(type_url.clone()).or_default();
        let first_of_type = t.requests == 0;
        t.requests += 1;
        let (nonce, error) = match request {
            Request::Sotw(r) => (r.response_nonce.as_str(), r.error_detail.is_some()),
            Request::Delta(r) => (r.response_nonce.as_str(), r.error_detail.is_some()),
        };
        let known = t.responses.get(nonce).cloned();
        if !nonce.is_empty() && known.is_none() {
            found.push((
                Rule::NonceUnknown,
                format!("nonce {nonce:?} was never sent on this stream for this type"),
            ));
        }
        if error && nonce.is_empty() {
            found.push((
                Rule::NackWithoutNonce,
                "error_detail without a response_nonce".into(),
            ));
        }
        let first_answer = !nonce.is_empty() && !t.answered.contains(nonce);
        t.last_request_stale = !nonce.is_empty() && t.latest_nonce.as_deref() != Some(nonce);
        match request {
            Request::Sotw(r) => {
                if first_of_type {
                    t.accepted = Some(r.version_info.clone());
                }
                let accepted = t.accepted.clone().unwrap_or_default();
                match (&known, error, first_answer) {
                    (Some(_), true, _) if r.version_info != accepted => found.push((
                        Rule::NackMovedVersion,
                        format!(
                            "NACK carries version {:?}, the last accepted is {accepted:?}",
                            r.version_info
                        ),
                    )),
                    (Some(sent), false, true) if r.version_info != sent.version => found.push((
                        Rule::AckVersionMismatch,
                        format!(
                            "the answer to {nonce:?} carries version {:?}, the response had {:?}",
                            r.version_info, sent.version
                        ),
                    )),
                    (Some(sent), false, true) => t.accepted = Some(sent.version.clone()),
                    // An empty version is a client that dropped its state (Envoy does
                    // on TTL expiry, envoy#15667): allowed, and now its accepted version.
                    (_, false, false) if !first_of_type && r.version_info.is_empty() => {
                        t.accepted = Some(String::new());
                    }
                    (_, false, false) if !first_of_type && r.version_info != accepted => found
                        .push((
                            Rule::VersionNotAccepted,
                            format!(
                                "version {:?} was never accepted (last accepted {accepted:?})",
                                r.version_info
                            ),
                        )),
                    _ => {}
                }
                // Only a rejection of the latest response holds the server: if it has sent
                // something else since, the rejected state is no longer what it holds.
                if let (Some(sent), true, true) = (&known, error, first_answer) {
                    if t.latest_nonce.as_deref() == Some(nonce) {
                        t.rejected = Some(sent.clone());
                    }
                }
                let names: BTreeSet<String> = r.resource_names.iter().cloned().collect();
                // Legacy wildcard lasts while the names stay empty; `*` is explicit. Where the
                // seeds disagree (legacy wildcard kept after names appear), the checker
                // assumes less, so it never reports what either text allows.
                // An empty list keeps only a legacy wildcard that never saw a name; after an
                // explicit `*` or names it means "nothing" (newest text).
                let legacy = names.is_empty()
                    && TypeInfo::of(&type_url).legacy_wildcard()
                    && (first_of_type || t.legacy);
                t.legacy = legacy;
                let wildcard = legacy || names.contains("*");
                if names != t.names || wildcard != t.wildcard {
                    t.generation += 1;
                }
                t.names = names;
                t.wildcard = wildcard;
            }
            Request::Delta(r) => {
                if !first_of_type && !r.initial_resource_versions.is_empty() {
                    found.push((
                        Rule::InitialVersionsLate,
                        "initial_resource_versions on a request that is not the first of its type"
                            .into(),
                    ));
                }
                if !nonce.is_empty() && known.is_some() && !first_answer {
                    found.push((
                        Rule::DeltaNonceRepeated,
                        format!("nonce {nonce:?} was already answered"),
                    ));
                }
                if first_of_type {
                    for (name, version) in &r.initial_resource_versions {
                        t.held.insert(name.clone(), version.clone());
                    }
                }
                if let (Some(sent), true, true) = (&known, error, first_answer) {
                    for (name, (version, _)) in &sent.resources {
                        // Only while that version is the last one sent of the name.
                        if t.held.get(name) == Some(version) {
                            t.rejected_versions.insert(name.clone(), version.clone());
                            t.held.remove(name);
                        }
                    }
                }
                let legacy = first_of_type
                    && r.resource_names_subscribe.is_empty()
                    && r.resource_names_unsubscribe.is_empty()
                    && TypeInfo::of(&type_url).legacy_wildcard();
                let mut changed = legacy;
                for name in &r.resource_names_subscribe {
                    // A name subscribed again must be sent again, unless the first request
                    // says the client holds it (initial_resource_versions).
                    if !(first_of_type && r.initial_resource_versions.contains_key(name)) {
                        t.held.remove(name);
                    }
                    t.rejected_versions.remove(name);
                    if name == "*" {
                        t.wildcard = true;
                        t.held.clear();
                    }
                    t.names.insert(name.clone());
                    changed = true;
                }
                for name in &r.resource_names_unsubscribe {
                    // The client may drop what it unsubscribes from; under a wildcard the
                    // server answers with the resource again (or its removal).
                    t.held.remove(name);
                    if name == "*" {
                        t.wildcard = false;
                    }
                    t.names.remove(name);
                    changed = true;
                }
                if legacy {
                    t.wildcard = true;
                }
                if changed {
                    t.generation += 1;
                }
            }
        }
        if !nonce.is_empty() {
            t.answered.insert(nonce.into());
        }
        for (rule, detail) in found {
            self.report(CheckSide::Client, line, rule, detail);
        }
    }

    fn response(&mut self, line: usize, stream: u64, response: &Response) {
        let store = self.store.clone();
        let s = self.streams.entry(stream).or_default();
        let nonce = String::from(response.nonce());
        let type_url = String::from(response.type_url());
        let mut found = Vec::new();
        if !nonce.is_empty() && !s.nonces.insert(nonce.clone()) {
            found.push((
                Rule::NonceReused,
                format!("nonce {nonce:?} was already used on this stream"),
            ));
        }
        let t = s.types.entry(type_url.clone()).or_default();
        let sent = match response {
            Response::Sotw(r) => sotw_sent(r, t.generation),
            Response::Delta(r) => delta_sent(r, t.generation),
        };
        let names: Vec<String> = match response {
            Response::Sotw(r) => sotw_resources(r).into_iter().map(|(n, _, _)| n).collect(),
            Response::Delta(r) => r.resources.iter().map(delta_name).collect(),
        };
        let mut seen = BTreeSet::new();
        for name in &names {
            if !seen.insert(name) {
                found.push((Rule::DuplicateNames, format!("{name:?} appears twice")));
            }
        }
        match response {
            Response::Sotw(r) => {
                // A response of body-less wrappers only is a TTL heartbeat, never a resend.
                let heartbeat = !r.resources.is_empty()
                    && r.resources.iter().all(|any| {
                        any.type_url == RESOURCE_WRAPPER_TYPE_URL
                            && Resource::decode(any.value.clone())
                                .is_ok_and(|w| w.resource.is_none())
                    });
                let unchanged = |other: &Option<Sent>| {
                    !heartbeat
                        && other.as_ref().is_some_and(|o| {
                            o.version == sent.version
                                && o.resources == sent.resources
                                && o.generation == t.generation
                        })
                };
                if unchanged(&t.rejected) {
                    found.push((
                        Rule::ResentRejectedVersion,
                        format!(
                            "version {:?} was rejected and nothing asked for it again",
                            sent.version
                        ),
                    ));
                } else if unchanged(&t.last_response) {
                    let rule = if t.last_request_stale {
                        Rule::ResponseToStaleRequest
                    } else {
                        Rule::UnchangedResend
                    };
                    found.push((
                        rule,
                        format!(
                            "version {:?} repeats the previous response unchanged",
                            sent.version
                        ),
                    ));
                }
                if TypeInfo::of(&type_url).full_state_in_sotw() {
                    if let Some(held) = store.get(&type_url) {
                        for name in held.keys() {
                            let wanted = t.wildcard || t.names.contains(name.as_str());
                            if wanted && !sent.resources.contains_key(name) {
                                found.push((Rule::FullStateMissingResource, format!("{name:?} exists and is subscribed but is not in the response")));
                            }
                        }
                    } else if let Some(previous) = &t.last_response {
                        if previous.version == sent.version {
                            for name in previous.resources.keys() {
                                if !sent.resources.contains_key(name) {
                                    found.push((
                                        Rule::FullStateMissingResource,
                                        format!(
                                            "{name:?} is missing at the same version {:?}",
                                            sent.version
                                        ),
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            Response::Delta(r) => {
                if nonce.is_empty() {
                    found.push((
                        Rule::NonceMissing,
                        "a delta response without a nonce".into(),
                    ));
                }
                for name in &r.removed_resources {
                    if sent.resources.contains_key(name) {
                        found.push((
                            Rule::RemovedAndSent,
                            format!("{name:?} is both sent and removed"),
                        ));
                    }
                }
                // A body-less resource is a TTL heartbeat or a does-not-exist marker, never
                // a resend.
                let bodyless: BTreeSet<String> = r
                    .resources
                    .iter()
                    .filter(|res| res.resource.is_none())
                    .map(delta_name)
                    .collect();
                for (name, (version, _)) in &sent.resources {
                    if bodyless.contains(name) {
                        continue;
                    }
                    if t.rejected_versions.get(name) == Some(version) {
                        found.push((
                            Rule::ResentRejectedVersion,
                            format!("{name:?} at {version:?} was rejected"),
                        ));
                    } else if t.held.get(name) == Some(version) {
                        let rule = if t.last_request_stale {
                            Rule::ResponseToStaleRequest
                        } else {
                            Rule::UnchangedResend
                        };
                        found.push((
                            rule,
                            format!("the client already has {name:?} at {version:?}"),
                        ));
                    }
                }
                for (name, (version, _)) in &sent.resources {
                    if t.rejected_versions.get(name).is_some_and(|v| v != version) {
                        t.rejected_versions.remove(name);
                    }
                    t.held.insert(name.clone(), version.clone());
                }
                for name in &sent.removed {
                    t.held.remove(name);
                }
            }
        }
        if !nonce.is_empty() {
            t.responses.insert(nonce.clone(), sent.clone());
            t.latest_nonce = Some(nonce);
        }
        // A response with other content moves the client on from what it rejected: sending
        // the rejected state again later (the store went back to it) is a change then.
        if t.rejected
            .as_ref()
            .is_some_and(|r| r.resources != sent.resources || r.version != sent.version)
        {
            t.rejected = None;
        }
        t.last_response = Some(sent);
        t.last_request_stale = false;
        for (rule, detail) in found {
            self.report(CheckSide::Server, line, rule, detail);
        }
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
