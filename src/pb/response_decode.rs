//! A `DiscoveryResponse` (SotW) or `DeltaDiscoveryResponse` (incremental) read from its
//! wire bytes ([`decode_discovery_response`], [`decode_delta_discovery_response`]) with
//! exactly the outcome of prost's `decode`, at a fraction of its cost for the field that
//! carries nearly all of a response: `resources`.
//!
//! Decisions:
//! - prost decodes each `Any` through its generic field loop (a key, a dispatch, a merge
//!   per field, a `Bytes` taken from a `Buf` per field) and grows the vector by doubling:
//!   about 800 instructions a resource for a 10 000-cluster response
//!   (`benches/README.md`, "The client reads a response from its wire bytes"). An `Any`
//!   encoded the way every encoder writes it (type URL, then value, nothing else) is read
//!   here in one straight pass, its type URL shared with the resource before it (a known
//!   type's URL is a `'static` string: no reference count), and the vector is sized once.
//!   An incremental `Resource` is plain when it is its version, its `Any`, its name and its
//!   aliases, in that order, each at most once but the aliases (how every encoder writes
//!   the resources servers send); its vector of ~150-byte entries, grown by doubling, was
//!   the largest cost of a 5 000-client delta storm's clients (page faults in `realloc`).
//! - Everything else is prost's, so the outcome cannot differ: the fields other than
//!   `resources` are copied out in their order and decoded by prost (protobuf decodes a
//!   message's fields one after another, so decoding them apart from `resources` changes
//!   nothing). A message with anything else (an `Any` or a `Resource` in another shape, a
//!   group, a truncated field, a malformed varint, a string not UTF-8, a field prost
//!   refuses) is handed to prost whole, so it fails exactly as prost fails, with prost's
//!   error.

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::ops::Range;
use prost::{DecodeError, Message};

use super::envoy::service::discovery::v3::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use super::google::protobuf::{Any, TypeUrl};
use super::plain_fields::{field_at, varint};
use crate::types::CATALOG;

/// `resources`: field 2, length-delimited.
const RESOURCES_KEY: u64 = (2 << 3) | 2;
/// `Any.type_url`: field 1, length-delimited.
const ANY_TYPE_URL_KEY: u8 = (1 << 3) | 2;
/// `Any.value`: field 2, length-delimited.
const ANY_VALUE_KEY: u8 = (2 << 3) | 2;
/// `Resource.version`, `.resource`, `.name`, `.aliases`: fields 1 to 4, length-delimited.
const RESOURCE_VERSION_KEY: u64 = (1 << 3) | 2;
const RESOURCE_ANY_KEY: u64 = (2 << 3) | 2;
const RESOURCE_NAME_KEY: u64 = (3 << 3) | 2;
const RESOURCE_ALIAS_KEY: u64 = (4 << 3) | 2;

/// Decodes a SotW `DiscoveryResponse` from `wire`: the same message, or the same error, as
/// prost's `DiscoveryResponse::decode(wire)`. Every resource's value is a slice of `wire`,
/// as with prost. See the [module docs](self).
pub fn decode_discovery_response(wire: Bytes) -> Result<DiscoveryResponse, DecodeError> {
    match plain_response::<DiscoveryResponse>(&wire) {
        Some(response) => Ok(response),
        None => DiscoveryResponse::decode(wire),
    }
}

/// Decodes an incremental `DeltaDiscoveryResponse` from `wire`: the same message, or the
/// same error, as prost's `DeltaDiscoveryResponse::decode(wire)`. Every resource's value is
/// a slice of `wire`, as with prost. See the [module docs](self).
pub fn decode_delta_discovery_response(wire: Bytes) -> Result<DeltaDiscoveryResponse, DecodeError> {
    match plain_response::<DeltaDiscoveryResponse>(&wire) {
        Some(response) => Ok(response),
        None => DeltaDiscoveryResponse::decode(wire),
    }
}

/// A response whose `resources` (field 2) this module reads.
trait Resources: Message + Default {
    /// One entry of `resources`.
    type Entry;
    fn resources(&mut self) -> &mut Vec<Self::Entry>;
    /// The entry encoded at `range` of `wire`, when it is plain.
    fn plain_entry(
        wire: &Bytes,
        range: Range<usize>,
        last_url: &mut TypeUrl,
    ) -> Option<Self::Entry>;
}

impl Resources for DiscoveryResponse {
    type Entry = Any;
    fn resources(&mut self) -> &mut Vec<Any> {
        &mut self.resources
    }
    #[inline(always)]
    fn plain_entry(wire: &Bytes, range: Range<usize>, last_url: &mut TypeUrl) -> Option<Any> {
        plain_any(wire, range, last_url)
    }
}

impl Resources for DeltaDiscoveryResponse {
    type Entry = Resource;
    fn resources(&mut self) -> &mut Vec<Resource> {
        &mut self.resources
    }
    #[inline(always)]
    fn plain_entry(wire: &Bytes, range: Range<usize>, last_url: &mut TypeUrl) -> Option<Resource> {
        plain_resource(wire, range, last_url)
    }
}

/// The response, when its outer layer and every entry of `resources` are plain and prost
/// decodes the other fields; `None` hands the whole message to prost, for its outcome and
/// its error.
fn plain_response<M: Resources>(wire: &Bytes) -> Option<M> {
    // Two walks of the outer layer: the first counts the resources (so their vector is
    // allocated once: growing it by doubling cost ~80 instructions a resource) and copies
    // out the other fields, the second reads the resources.
    let mut count = 0;
    let mut rest = Vec::new();
    let mut at = 0;
    while at < wire.len() {
        let field = field_at(wire, &mut at)?;
        if field.key == RESOURCES_KEY {
            count += 1;
        } else {
            rest.extend_from_slice(wire.get(field.start..field.end())?);
        }
    }
    let mut response = if rest.is_empty() {
        M::default()
    } else {
        M::decode(Bytes::from(rest)).ok()?
    };
    let list = response.resources();
    list.reserve_exact(count);
    let mut last_url = TypeUrl::default();
    let mut at = 0;
    while at < wire.len() {
        let field = field_at(wire, &mut at)?;
        if field.key == RESOURCES_KEY {
            list.push(M::plain_entry(wire, field.payload.clone(), &mut last_url)?);
        }
    }
    Some(response)
}

/// The incremental `Resource` encoded at `range` of `wire`, when it is plain (see the
/// [module docs](self)): its version, a plain `Any`, its name, then its aliases.
#[inline]
fn plain_resource(wire: &Bytes, range: Range<usize>, last_url: &mut TypeUrl) -> Option<Resource> {
    let within = wire.get(..range.end)?;
    let mut resource = Resource::default();
    // The lowest field number that may come next: each at most once, in number order.
    let mut next = 1;
    let mut at = range.start;
    while at < range.end {
        let field = field_at(within, &mut at)?;
        match field.key {
            RESOURCE_VERSION_KEY if next <= 1 => {
                resource.version = utf8(within, field.payload)?;
                next = 2;
            }
            RESOURCE_ANY_KEY if next <= 2 => {
                resource.resource = Some(plain_any(wire, field.payload, last_url)?);
                next = 3;
            }
            RESOURCE_NAME_KEY if next <= 3 => {
                resource.name = utf8(within, field.payload)?;
                next = 4;
            }
            RESOURCE_ALIAS_KEY => {
                resource.aliases.push(utf8(within, field.payload)?);
                next = 4;
            }
            _ => return None,
        }
    }
    Some(resource)
}

/// The string at `range` of `wire`, when it is UTF-8 (else prost refuses it).
fn utf8(wire: &[u8], range: Range<usize>) -> Option<String> {
    core::str::from_utf8(wire.get(range)?)
        .ok()
        .map(String::from)
}

/// The `Any` encoded at `range` of `wire`, when it is a non-empty ASCII type URL field
/// then a value field and nothing else; its type URL is `last_url` when equal to it.
#[inline(always)]
fn plain_any(wire: &Bytes, range: Range<usize>, last_url: &mut TypeUrl) -> Option<Any> {
    let end = range.end;
    let mut at = range.start;
    if *wire.get(at)? != ANY_TYPE_URL_KEY {
        return None;
    }
    at += 1;
    let url_len = usize::try_from(varint(wire, &mut at)?).ok()?;
    let url = at..at.checked_add(url_len)?;
    at = url.end;
    if url.is_empty() || at >= end || *wire.get(at)? != ANY_VALUE_KEY {
        return None;
    }
    at += 1;
    let value_len = usize::try_from(varint(wire, &mut at)?).ok()?;
    let value = at..at.checked_add(value_len)?;
    if value.end != end {
        return None;
    }
    let url_bytes = wire.get(url.clone())?;
    if url_bytes != last_url.as_str().as_bytes() {
        *last_url = match known_type_url(url_bytes) {
            Some(known) => TypeUrl::from_static(known),
            // ASCII is UTF-8; anything else is left to prost's check.
            None if url_bytes.is_ascii() => TypeUrl::from_checked_bytes(wire.slice(url)),
            None => return None,
        };
    }
    Some(Any {
        type_url: last_url.clone(),
        value: wire.slice(value),
    })
}

/// The `'static` type URL of a catalogued type equal to `url`.
fn known_type_url(url: &[u8]) -> Option<&'static str> {
    CATALOG
        .iter()
        .flat_map(|t| core::iter::once(t.type_url).chain(t.type_url_v2))
        .find(|known| known.as_bytes() == url)
}

#[cfg(test)]
mod tests;
