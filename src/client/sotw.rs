//! State of the World: the protocol checks of a `DiscoveryResponse` and the shape of a
//! `DiscoveryRequest`. Everything else is shared (see `type_state` and `cache`).

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use prost::Message;

use super::config::Limits;
use super::defect::{At, ResponseDefect};
use super::incoming::{self, Incoming, Reject, Update};
use super::turn::{Due, DueKind};
use super::type_view::{TypeParts, TypeView};
use crate::pb::discovery::{DiscoveryRequest, DiscoveryResponse, Resource};
use crate::pb::envoy::config::core::v3::Node;
use crate::resource::{shared_name_field_1, NameExtractor};
use crate::text::SharedStr;
use crate::types::RESOURCE_WRAPPER_TYPE_URL;

/// Checks a SotW response of `type_url` (the effective type of the stream) and keeps the
/// resources the client asked for.
pub(crate) fn parse(
    resp: DiscoveryResponse,
    type_url: &str,
    ts: TypeView<'_>,
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
    let full_state = ts.info.full_state_in_sotw();
    let checked = incoming::check_count("resource errors", resource_errors.len(), limits)
        .and_then(|()| check(resources, type_url, &version, ts, limits, extractor))
        .and_then(|resources| {
            let errors = incoming::read_resource_errors(resource_errors, limits)?;
            Ok((resources, Vec::new(), errors))
        });
    incoming::finish(SharedStr::from(nonce), version, full_state, checked)
}

fn name_of(
    body: &Bytes,
    extractor: Option<NameExtractor>,
    at: usize,
) -> Result<SharedStr, ResponseDefect> {
    let unreadable = |error| ResponseDefect::UnreadableName { at, error };
    let name = match extractor {
        None => shared_name_field_1(body).map_err(unreadable)?,
        // An application's extractor is checked: `SharedStr` relies on UTF-8 for soundness.
        Some(extract) => SharedStr::from_utf8(extract(body).map_err(unreadable)?)
            .map_err(|_| ResponseDefect::NameNotUtf8 { at })?,
    };
    incoming::received_name(name)
}

/// One entry of `resources`: an `Any` of the response's type, or a `Resource` wrapper.
fn incoming(
    any: crate::pb::google::protobuf::Any,
    type_url: &str,
    at: usize,
    extractor: Option<NameExtractor>,
) -> Result<Incoming, ResponseDefect> {
    if any.type_url != RESOURCE_WRAPPER_TYPE_URL {
        let body = incoming::body_of(any, type_url, || At::Index(at), false)?;
        return Ok(Incoming {
            name: name_of(&body, extractor, at)?,
            version: None,
            body: Some(body),
            rare: None,
            hash: 0,
        });
    }
    let wrapper = Resource::decode(any.value).map_err(|e| ResponseDefect::UndecodableWrapper {
        at,
        error: alloc::format!("{e}"),
    })?;
    let ttl = incoming::ttl_of(wrapper.ttl, || At::Index(at))?;
    let body = wrapper
        .resource
        .map(|inner| incoming::body_of(inner, type_url, || At::Index(at), true))
        .transpose()?;
    let name = match (
        incoming::wrapper_name(wrapper.name, wrapper.resource_name),
        &body,
    ) {
        (Some(name), _) => incoming::received_name(SharedStr::from(name))?,
        (None, Some(body)) => name_of(body, extractor, at)?,
        (None, None) => return Err(ResponseDefect::NamelessHeartbeat { at }),
    };
    Ok(Incoming {
        name,
        version: (!wrapper.version.is_empty()).then(|| SharedStr::from(wrapper.version)),
        body,
        rare: Incoming::rare_of(
            wrapper.aliases.into_iter().map(SharedStr::from).collect(),
            ttl,
        ),
        hash: 0,
    })
}

fn check(
    resources: Vec<crate::pb::google::protobuf::Any>,
    type_url: &str,
    response_version: &SharedStr,
    ts: TypeView<'_>,
    limits: &Limits,
    extractor: Option<NameExtractor>,
) -> Result<Vec<Incoming>, ResponseDefect> {
    incoming::check_count("resources", resources.len(), limits)?;
    let mut out = Vec::with_capacity(resources.len());
    for (i, any) in resources.into_iter().enumerate() {
        let inc = incoming(any, type_url, i, extractor)?;
        incoming::check_name_len("name", Some(At::Index(i)), &inc.name, limits)?;
        out.push(inc);
    }
    incoming::check_duplicates(&mut out, &[], ts.cache.name_hasher())?;
    if !ts.sub.is_wildcard() {
        out.retain(|inc| ts.sub.wants(&inc.name, &[]));
    }
    // A body-less wrapper is a heartbeat only at the version held ("a response that
    // doesn't change the resource version", discovery.proto, `Resource.resource`).
    for inc in out.iter().filter(|inc| inc.body.is_none()) {
        let version = inc.version.as_ref().unwrap_or(response_version);
        let held = ts.cache.resource(&inc.name);
        if held.is_none_or(|c| c.version() != version.as_str()) {
            return Err(ResponseDefect::BodylessAtOtherVersion {
                name: inc.name.clone(),
                version: version.clone(),
            });
        }
    }
    ts.cache.check_capacity(
        &out,
        ts.info.full_state_in_sotw(),
        limits.max_names_per_type,
    )?;
    Ok(out)
}

/// The kind of SotW request due for a type, if any: the answer to the latest response
/// first (a response that beat our first request is answered by it), then the first
/// request, then an interest change (or a version reset). While a verdict is pending, only
/// the answers owed to responses before it may leave.
pub(crate) fn due(ts: TypeView<'_>) -> Option<DueKind> {
    if ts.turn.owes_reply() {
        return Some(DueKind::Reply);
    }
    if ts.waits_for_verdict {
        return None;
    }
    if !ts.turn.sent_first() {
        return ts.sub.has_interest().then_some(DueKind::Initial);
    }
    (ts.turn.resend() || ts.sub.sotw_changed(ts.info.legacy_wildcard())).then_some(DueKind::Change)
}

/// Builds the request and records what was sent. Returns it with the names it carries.
pub(crate) fn build(
    ts: TypeParts<'_>,
    due: Due,
    node: Option<Node>,
) -> (DiscoveryRequest, Vec<SharedStr>) {
    let names = ts.sub.sotw_names(ts.info.legacy_wildcard());
    let (version, nonce, error) = match due {
        // Never a nonce from another stream; the last accepted version survives.
        Due::Initial => (ts.cache.sotw_version().clone(), SharedStr::EMPTY, None),
        Due::Reply(r) => (r.version, r.nonce, r.error),
        Due::Change => (
            ts.cache.sotw_version().clone(),
            ts.turn.nonce().clone(),
            None,
        ),
    };
    ts.turn.sent();
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
