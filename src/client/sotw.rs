//! State of the World: the protocol checks of a `DiscoveryResponse` and the shape of a
//! `DiscoveryRequest`. Everything else is shared (see `type_state`).

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use super::config::Limits;
use super::text::SharedStr;
use super::type_state::{Reply, TypeState};
use super::update::{check_duplicates, split_resource_errors, ttl_of, Incoming, Reject, Update};
use crate::pb::discovery::{DiscoveryRequest, DiscoveryResponse, Resource};
use crate::pb::envoy::config::core::v3::Node;
use crate::resource::{name_field_1, NameExtractor};
use crate::types::RESOURCE_WRAPPER_TYPE_URL;

/// Checks a SotW response of `type_url` (the effective type of the stream) and keeps the
/// resources the client asked for.
pub(crate) fn parse(
    resp: DiscoveryResponse,
    type_url: &str,
    ts: &TypeState,
    limits: &Limits,
    extractor: Option<NameExtractor>,
) -> Result<Update, Reject> {
    let DiscoveryResponse {
        version_info,
        resources,
        nonce,
        resource_errors,
        ..
    } = resp;
    let version = SharedStr::from(version_info);
    let nonce = SharedStr::from(nonce);
    let checked = if resource_errors.len() > limits.max_resources_per_response {
        Err(format!(
            "response carries {} resource errors, over the limit of {}",
            resource_errors.len(),
            limits.max_resources_per_response
        ))
    } else {
        check(resources, type_url, ts, limits, extractor).and_then(|resources| {
            split_resource_errors(resource_errors, limits.max_name_len)
                .map(|(removed, errors)| (resources, removed, errors))
        })
    };
    match checked {
        Ok((resources, removed, errors)) => Ok(Update {
            nonce,
            version,
            resources,
            removed,
            full_state: ts.info.full_state_in_sotw(),
            errors,
        }),
        Err(message) => Err(Reject {
            nonce,
            version,
            message,
        }),
    }
}

fn name_of(body: &Bytes, extractor: Option<NameExtractor>, i: usize) -> Result<SharedStr, String> {
    let name = extractor.unwrap_or(name_field_1)(body)
        .map_err(|e| format!("resource {i}: cannot read its name: {e}"))?;
    // Checked again whatever the extractor: `SharedStr` relies on it for soundness.
    SharedStr::from_utf8(name).map_err(|_| format!("resource {i}: name is not UTF-8"))
}

fn check(
    resources: Vec<crate::pb::google::protobuf::Any>,
    type_url: &str,
    ts: &TypeState,
    limits: &Limits,
    extractor: Option<NameExtractor>,
) -> Result<Vec<Incoming>, String> {
    if resources.len() > limits.max_resources_per_response {
        return Err(format!(
            "response carries {} resources, over the limit of {}",
            resources.len(),
            limits.max_resources_per_response
        ));
    }
    let mut out = Vec::with_capacity(resources.len());
    for (i, any) in resources.into_iter().enumerate() {
        let inc = if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
            let wrapper = Resource::decode(any.value)
                .map_err(|e| format!("resource {i}: undecodable Resource wrapper: {e}"))?;
            let ttl = ttl_of(wrapper.ttl).map_err(|e| format!("resource {i}: {e}"))?;
            let body = match wrapper.resource {
                Some(inner) if inner.type_url != type_url => {
                    return Err(format!(
                        "resource {i} has type {} inside its wrapper, but the response is of type {type_url}",
                        inner.type_url
                    ))
                }
                Some(inner) => Some(inner.value),
                None => None,
            };
            let name = if !wrapper.name.is_empty() {
                SharedStr::from(wrapper.name)
            } else if let Some(rn) = wrapper.resource_name.filter(|rn| !rn.name.is_empty()) {
                SharedStr::from(rn.name)
            } else if let Some(body) = &body {
                name_of(body, extractor, i)?
            } else {
                return Err(format!("resource {i}: heartbeat wrapper without a name"));
            };
            Incoming {
                name,
                version: (!wrapper.version.is_empty()).then(|| SharedStr::from(wrapper.version)),
                body,
                aliases: wrapper.aliases.into_iter().map(SharedStr::from).collect(),
                ttl,
            }
        } else if any.type_url != type_url {
            return Err(format!(
                "resource {i} has type {}, but the response is of type {type_url}",
                any.type_url
            ));
        } else {
            Incoming {
                name: name_of(&any.value, extractor, i)?,
                version: None,
                body: Some(any.value),
                aliases: Vec::new(),
                ttl: None,
            }
        };
        if inc.name.len() > limits.max_name_len {
            return Err(format!(
                "resource {i}: name of {} bytes, over the limit of {}",
                inc.name.len(),
                limits.max_name_len
            ));
        }
        out.push(inc);
    }
    check_duplicates(&out)?;
    if !ts.sub.is_wildcard() {
        out.retain(|inc| ts.sub.names(&inc.name));
    }
    let after = if ts.info.full_state_in_sotw() {
        out.len()
    } else {
        let new_names = out
            .iter()
            .filter(|inc| inc.body.is_some() && !ts.records.contains_key(inc.name.as_str()))
            .count();
        ts.records.len().saturating_add(new_names)
    };
    if after > limits.max_names_per_type {
        return Err(format!(
            "would hold {after} resources of this type, over the limit of {}",
            limits.max_names_per_type
        ));
    }
    Ok(out)
}

/// The kind of SotW request due for a type, if any.
pub(crate) enum Due {
    /// First request of the type on this stream.
    Initial,
    /// The answer to a response.
    Reply(Reply),
    /// Interest changed (or the version was reset) between responses.
    Change,
}

pub(crate) fn due(ts: &mut TypeState) -> Option<Due> {
    let legacy = ts.info.legacy_wildcard();
    if ts.pending.is_some() {
        // Only the answers owed to responses before the pending one may leave.
        return ts.replies.pop_front().map(Due::Reply);
    }
    if let Some(reply) = ts.replies.pop_front() {
        // A response that beat our first request is answered by it.
        return Some(Due::Reply(reply));
    }
    if !ts.sent_first && ts.sub.has_interest() {
        return Some(Due::Initial);
    }
    if ts.sent_first && (ts.resend || ts.sub.sotw_changed(legacy)) {
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
        || (ts.sent_first && (ts.resend || ts.sub.sotw_changed(ts.info.legacy_wildcard())))
}

/// Builds the request and records what was sent. Returns it with the names it carries.
pub(crate) fn build(
    ts: &mut TypeState,
    due: Due,
    node: Option<Node>,
) -> (DiscoveryRequest, Vec<SharedStr>) {
    let names = ts.sub.sotw_names(ts.info.legacy_wildcard());
    let (version, nonce, error) = match due {
        // Never a nonce from another stream; the last accepted version survives.
        Due::Initial => (ts.version.clone(), SharedStr::EMPTY, None),
        Due::Reply(r) => (r.version, r.nonce, r.error),
        Due::Change => (ts.version.clone(), ts.nonce.clone(), None),
    };
    ts.sent_first = true;
    ts.resend = false;
    let req = DiscoveryRequest {
        version_info: String::from(version),
        node,
        resource_names: names.iter().map(String::from).collect(),
        resource_locators: Vec::new(),
        type_url: String::from(ts.url.as_str()),
        response_nonce: String::from(nonce),
        error_detail: error,
    };
    ts.sub.sotw_sent(names.clone());
    (req, names)
}
