//! Incremental: the protocol checks of a `DeltaDiscoveryResponse` and the shape of a
//! `DeltaDiscoveryRequest`. Everything else is shared (see `type_state` and `cache`).

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::BytesMut;

use super::config::Limits;
use super::defect::{At, ResponseDefect};
use super::incoming::{self, Incoming, Reject, Update};
use super::turn::{Due, DueKind};
use super::type_view::{TypeParts, TypeView};
use crate::pb::discovery::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use crate::pb::envoy::config::core::v3::Node;
use crate::text::SharedStr;

/// Checks an incremental response of `type_url` and keeps the resources the client asked
/// for (by name, by alias, or through the wildcard). Costs O(size of the response).
pub(crate) fn parse(
    resp: DeltaDiscoveryResponse,
    type_url: &str,
    ts: TypeView<'_>,
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
    let total = resources
        .len()
        .saturating_add(removed_resources.len())
        .saturating_add(removed_resource_names.len())
        .saturating_add(resource_errors.len());
    let checked = incoming::check_count("resources and removals", total, limits).and_then(|()| {
        let mut removed = Vec::with_capacity(
            removed_resources
                .len()
                .saturating_add(removed_resource_names.len()),
        );
        let removed_names = removed_resource_names.into_iter().map(|r| r.name);
        for name in removed_resources.into_iter().chain(removed_names) {
            incoming::check_name_len("removed name", None, &name, limits)?;
            removed.push(incoming::received_name(SharedStr::from(name))?);
        }
        let resources = check(resources, type_url, &removed, ts, limits)?;
        let errors = incoming::read_resource_errors(resource_errors, limits)?;
        Ok((resources, removed, errors))
    });
    incoming::finish(
        SharedStr::from(nonce),
        SharedStr::from(system_version_info),
        false,
        checked,
    )
}

fn check(
    resources: Vec<crate::pb::discovery::Resource>,
    type_url: &str,
    removed: &[SharedStr],
    ts: TypeView<'_>,
    limits: &Limits,
) -> Result<Vec<Incoming>, ResponseDefect> {
    let mut out = Vec::with_capacity(resources.len());
    // The names are copied into buffers of `NAMES_PER_BUFFER` names. A name is handed to a
    // change or an event and cloned on the way (into a new record until its body takes
    // over, into timers and the alias index), and a second handle to a name in a buffer of
    // its own allocates that buffer a 24-byte shared header; a buffer shared by 32 names
    // costs each under a byte of it, and a name that outlives the others of its buffer
    // keeps at most 31 of them alive.
    let mut names = BytesMut::new();
    let mut rest = resources.into_iter();
    let mut i = 0;
    while let Some(r) = rest.next() {
        if i % NAMES_PER_BUFFER == 0 {
            let others = rest.as_slice().iter().take(NAMES_PER_BUFFER - 1);
            names = BytesMut::with_capacity(
                wire_name_len(&r) + others.map(wire_name_len).sum::<usize>(),
            );
        }
        let name = incoming::wrapper_name(r.name, r.resource_name)
            .ok_or(ResponseDefect::Nameless { at: i })?;
        incoming::check_name_len("name or alias", Some(At::Index(i)), &name, limits)?;
        names.extend_from_slice(name.as_bytes());
        // SAFETY: the bytes are those of `name`, a `String`: UTF-8.
        let name = unsafe { SharedStr::from_utf8_unchecked(names.split().freeze()) };
        let name = incoming::received_name(name)?;
        let mut aliases: Vec<SharedStr> = Vec::with_capacity(r.aliases.len());
        for alias in r.aliases {
            incoming::check_name_len("name or alias", Some(At::Index(i)), &alias, limits)?;
            aliases.push(SharedStr::from(alias));
        }
        let body = r
            .resource
            .map(|any| incoming::body_of(any, type_url, || At::Name(name.clone()), false))
            .transpose()?;
        let ttl = incoming::ttl_of(r.ttl, || At::Name(name.clone()))?;
        out.push(Incoming {
            name,
            version: Some(SharedStr::from(r.version)),
            body,
            rare: Incoming::rare_of(aliases, ttl),
            hash: 0,
        });
        i += 1;
    }
    incoming::check_duplicates(&mut out, removed, ts.cache.name_hasher())?;
    if !ts.sub.is_wildcard() {
        out.retain(|inc| ts.sub.wants(&inc.name, inc.aliases()));
    }
    ts.cache
        .check_capacity(&out, false, limits.max_names_per_type)?;
    Ok(out)
}

/// How many received names share one buffer (see [`check`]).
const NAMES_PER_BUFFER: usize = 32;

/// The length of the name [`incoming::wrapper_name`] reads from `r`.
fn wire_name_len(r: &crate::pb::discovery::Resource) -> usize {
    incoming::wrapper_name_len(&r.name, r.resource_name.as_ref())
}

/// The kind of incremental request due for a type, if any: the first request of the
/// stream first, then the answers to responses in order (each may carry unsent interest
/// changes), then a spontaneous interest change. While a verdict is pending, only the
/// answers owed to responses before it may leave.
pub(crate) fn due(ts: TypeView<'_>) -> Option<DueKind> {
    if ts.waits_for_verdict {
        return ts.turn.owes_reply().then_some(DueKind::Reply);
    }
    if !ts.turn.sent_first() && ts.sub.has_interest() {
        return Some(DueKind::Initial);
    }
    if ts.turn.owes_reply() {
        return Some(DueKind::Reply);
    }
    (ts.turn.sent_first() && ts.sub.delta_has_diff()).then_some(DueKind::Change)
}

/// Builds the request and records what the server is now told. Returns it with the names
/// newly subscribed (for the does-not-exist timers).
pub(crate) fn build(
    ts: TypeParts<'_>,
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
                .cache
                .held_resources()
                .map(|(r, c)| (String::from(r.name()), String::from(c.version())))
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
    ts.turn.sent();
    let names = req
        .resource_names_subscribe
        .iter()
        .map(|n| SharedStr::from(n.as_str()))
        .collect();
    (req, names)
}
