//! Incremental: the protocol checks of a `DeltaDiscoveryResponse` and the shape of a
//! `DeltaDiscoveryRequest`. Everything else is shared (see `type_state`).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::config::Limits;
use super::text::SharedStr;
use super::type_state::{Reply, TypeState};
use super::update::{check_duplicates, split_resource_errors, ttl_of, Incoming, Reject, Update};
use crate::pb::discovery::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use crate::pb::envoy::config::core::v3::Node;

/// Checks an incremental response of `type_url` and keeps the resources the client asked
/// for (by name, by alias, or through the wildcard). Costs O(size of the response).
pub(crate) fn parse(
    resp: DeltaDiscoveryResponse,
    type_url: &str,
    ts: &TypeState,
    limits: &Limits,
) -> Result<Update, Reject> {
    let DeltaDiscoveryResponse {
        system_version_info,
        resources,
        removed_resources,
        removed_resource_names,
        nonce,
        resource_errors,
        ..
    } = resp;
    let version = SharedStr::from(system_version_info);
    let nonce = SharedStr::from(nonce);
    let total = resources
        .len()
        .saturating_add(removed_resources.len())
        .saturating_add(removed_resource_names.len())
        .saturating_add(resource_errors.len());
    let checked = if total > limits.max_resources_per_response {
        Err(format!(
            "response carries {total} resources and removals, over the limit of {}",
            limits.max_resources_per_response
        ))
    } else {
        check(resources, type_url, ts, limits).and_then(|resources| {
            let mut removed: Vec<SharedStr> =
                removed_resources.into_iter().map(SharedStr::from).collect();
            removed.extend(
                removed_resource_names
                    .into_iter()
                    .map(|r| SharedStr::from(r.name)),
            );
            if let Some(long) = removed.iter().find(|n| n.len() > limits.max_name_len) {
                return Err(format!(
                    "removed name of {} bytes, over the limit of {}",
                    long.len(),
                    limits.max_name_len
                ));
            }
            let (not_found, errors) = split_resource_errors(resource_errors, limits.max_name_len)?;
            removed.extend(not_found);
            Ok((resources, removed, errors))
        })
    };
    match checked {
        Ok((resources, removed, errors)) => Ok(Update {
            nonce,
            version,
            resources,
            removed,
            full_state: false,
            errors,
        }),
        Err(message) => Err(Reject {
            nonce,
            version,
            message,
        }),
    }
}

fn check(
    resources: Vec<crate::pb::discovery::Resource>,
    type_url: &str,
    ts: &TypeState,
    limits: &Limits,
) -> Result<Vec<Incoming>, String> {
    let mut out = Vec::with_capacity(resources.len());
    for (i, r) in resources.into_iter().enumerate() {
        let name = if !r.name.is_empty() {
            SharedStr::from(r.name)
        } else if let Some(rn) = r.resource_name.filter(|rn| !rn.name.is_empty()) {
            SharedStr::from(rn.name)
        } else {
            return Err(format!("resource {i} has no name"));
        };
        let aliases: Vec<SharedStr> = r.aliases.into_iter().map(SharedStr::from).collect();
        if let Some(long) = core::iter::once(&name)
            .chain(aliases.iter())
            .find(|n| n.len() > limits.max_name_len)
        {
            return Err(format!(
                "resource {i}: name or alias of {} bytes, over the limit of {}",
                long.len(),
                limits.max_name_len
            ));
        }
        let body = match r.resource {
            Some(any) if any.type_url != type_url => {
                return Err(format!(
                    "resource {:?} has type {}, but the response is of type {type_url}",
                    name.as_str(),
                    any.type_url
                ))
            }
            Some(any) => Some(any.value),
            None => None,
        };
        let ttl = ttl_of(r.ttl).map_err(|e| format!("resource {:?}: {e}", name.as_str()))?;
        out.push(Incoming {
            name,
            version: Some(SharedStr::from(r.version)),
            body,
            aliases,
            ttl,
        });
    }
    check_duplicates(&out)?;
    out.retain(|inc| ts.wants(&inc.name, &inc.aliases));
    let new_names = out
        .iter()
        .filter(|inc| inc.body.is_some() && !ts.records.contains_key(inc.name.as_str()))
        .count();
    let after = ts.records.len().saturating_add(new_names);
    if after > limits.max_names_per_type {
        return Err(format!(
            "would hold {after} resources of this type, over the limit of {}",
            limits.max_names_per_type
        ));
    }
    Ok(out)
}

/// The kind of incremental request due for a type, if any.
pub(crate) enum Due {
    /// First request of the type on this stream.
    Initial,
    /// The answer to one response (may carry unsent interest changes).
    Reply(Reply),
    /// Spontaneous interest change (no nonce).
    Change,
}

pub(crate) fn due(ts: &mut TypeState) -> Option<Due> {
    if ts.pending.is_some() {
        // Only the answers owed to responses before the pending one may leave.
        return ts.replies.pop_front().map(Due::Reply);
    }
    if !ts.sent_first && ts.sub.has_interest() {
        return Some(Due::Initial);
    }
    if let Some(reply) = ts.replies.pop_front() {
        return Some(Due::Reply(reply));
    }
    if ts.sent_first && ts.sub.delta_has_diff() {
        return Some(Due::Change);
    }
    None
}

pub(crate) fn has_due(ts: &TypeState) -> bool {
    if ts.pending.is_some() {
        return !ts.replies.is_empty();
    }
    (!ts.sent_first && ts.sub.has_interest())
        || !ts.replies.is_empty()
        || (ts.sent_first && ts.sub.delta_has_diff())
}

/// Builds the request and records what the server is now told. Returns it with the names
/// newly subscribed (for the does-not-exist timers).
pub(crate) fn build(
    ts: &mut TypeState,
    due: Due,
    node: Option<Node>,
) -> (DeltaDiscoveryRequest, Vec<SharedStr>) {
    let mut req = DeltaDiscoveryRequest {
        node,
        type_url: String::from(ts.url.as_str()),
        ..DeltaDiscoveryRequest::default()
    };
    match due {
        Due::Initial => {
            req.resource_names_subscribe = ts.sub.delta_initial(ts.info.legacy_wildcard());
            // Only what was received, accepted, and is still held (not removed, expired or
            // rejected): the cache holds exactly that.
            req.initial_resource_versions = ts
                .records
                .iter()
                .filter_map(|(n, r)| {
                    r.cached
                        .as_ref()
                        .map(|c| (String::from(n.as_str()), String::from(c.version.as_str())))
                })
                .collect::<BTreeMap<_, _>>();
        }
        Due::Reply(reply) => {
            let (sub, unsub) = ts.sub.delta_take_diff();
            req.resource_names_subscribe = sub;
            req.resource_names_unsubscribe = unsub;
            req.response_nonce = String::from(reply.nonce);
            req.error_detail = reply.error;
        }
        Due::Change => {
            let (sub, unsub) = ts.sub.delta_take_diff();
            req.resource_names_subscribe = sub;
            req.resource_names_unsubscribe = unsub;
        }
    }
    ts.sent_first = true;
    let names = req
        .resource_names_subscribe
        .iter()
        .map(|n| SharedStr::from(n.as_str()))
        .collect();
    (req, names)
}
