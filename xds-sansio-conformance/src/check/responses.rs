//! The server's rules: what each response may carry, given what the client asked for, what
//! it holds, and what the record says the server holds.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use prost::Message;

use super::{
    delta_name, delta_sent, sotw_resources, sotw_sent, CheckSide, Checker, Rule, Sent, TypeTrack,
};
use xds_sansio::message::Response;
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use xds_sansio::types::{TypeInfo, RESOURCE_WRAPPER_TYPE_URL};

impl Checker {
    pub(super) fn response(&mut self, line: usize, stream: u64, response: &Response) {
        let s = self.streams.entry(stream).or_default();
        let nonce = String::from(response.nonce());
        let type_url = String::from(response.type_url());
        let node_id = String::from(s.node_id());
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
        let mismatched = match response {
            Response::Sotw(r) => sotw_type_mismatches(r),
            Response::Delta(r) => delta_type_mismatches(r),
        };
        found.extend(mismatched.into_iter().map(|d| (Rule::TypeMismatch, d)));
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
                    let mut missing = BTreeSet::new();
                    if let Some(held) = self.store.get(&type_url) {
                        for name in held.keys() {
                            if t.wants(name) && !sent.resources.contains_key(name) {
                                found.push((
                                    Rule::FullStateMissingResource,
                                    format!(
                                        "{name:?} exists and is subscribed but is not in the response"
                                    ),
                                ));
                                missing.insert(name.clone());
                            }
                        }
                    }
                    if !heartbeat && !sent.version.is_empty() {
                        let key = (node_id, type_url.clone(), sent.version.clone());
                        let held = self.full_states.entry(key).or_default();
                        found.extend(same_version_missing(held, t, &sent, &missing));
                        for name in sent.resources.keys() {
                            held.entry(name.clone()).or_insert(line);
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
            t.responses
                .entry(nonce.clone())
                .or_default()
                .push(sent.clone());
            *t.owed.entry(nonce.clone()).or_default() += 1;
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

/// The subscribed names an earlier full-state response at this version held (`held`: name
/// -> line) that `sent` leaves out; names in `reported` are already reported by the store.
fn same_version_missing(
    held: &BTreeMap<String, usize>,
    t: &TypeTrack,
    sent: &Sent,
    reported: &BTreeSet<String>,
) -> Vec<(Rule, String)> {
    held.iter()
        .filter(|(name, _)| {
            t.wants(name) && !sent.resources.contains_key(*name) && !reported.contains(*name)
        })
        .map(|(name, at)| {
            (
                Rule::SameVersionMissingResource,
                format!(
                    "{name:?} is subscribed and was in version {:?} (line {at}), but is missing at that version",
                    sent.version
                ),
            )
        })
        .collect()
}

/// SotW resources whose `Any` (or the `Any` inside their `Resource` wrapper) is not of the
/// response's type.
fn sotw_type_mismatches(r: &DiscoveryResponse) -> Vec<String> {
    let mut out = Vec::new();
    for (i, any) in r.resources.iter().enumerate() {
        if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
            let inner = Resource::decode(any.value.clone())
                .ok()
                .and_then(|w| w.resource);
            if let Some(inner) = inner.filter(|inner| inner.type_url != r.type_url) {
                out.push(format!(
                    "resource {i} has type {} inside its wrapper, the response's type_url is {:?}",
                    inner.type_url, r.type_url
                ));
            }
        } else if any.type_url != r.type_url {
            out.push(format!(
                "resource {i} has type {}, the response's type_url is {:?}",
                any.type_url, r.type_url
            ));
        }
    }
    out
}

/// Delta resources whose `resource` is not of the response's type.
fn delta_type_mismatches(r: &DeltaDiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .filter_map(|res| {
            let any = res.resource.as_ref()?;
            (any.type_url != r.type_url).then(|| {
                format!(
                    "resource {:?} has type {}, the response's type_url is {:?}",
                    delta_name(res),
                    any.type_url,
                    r.type_url
                )
            })
        })
        .collect()
}
