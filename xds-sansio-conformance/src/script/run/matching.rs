//! Matching what the model sent against the line that says what it should send.
//!
//! Decisions:
//! - A field left out of the line is not checked; `V=` checks for an empty version.
//! - Name lists are sets: the order of `resource_names` and of resources is not part of the
//!   protocol (`discovery.proto`, `DiscoveryRequest.resource_names`).
//! - Versions and nonces are symbols (see `symbols`); a resource's version in SotW is the
//!   response's `version_info` unless the resource is wrapped with its own.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use prost::Message;

use super::build::{resource_errors_of, ttl_of};
use super::Runner;
use crate::script::ast::{ErrorPattern, Item, MessagePattern, LATEST_NONCE, NO_NODE};
use crate::transcript::notation;
use xds_sansio::message::{Request, Response};
use xds_sansio::pb::discovery::{Resource, ResourceError};
use xds_sansio::pb::envoy::config::core::v3::{ControlPlane, Node};
use xds_sansio::pb::google::protobuf::{Any, Duration as PbDuration};
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::RESOURCE_WRAPPER_TYPE_URL;

/// A resource the model sent or holds, reduced to what items describe.
pub(super) struct Seen {
    pub(super) version: Option<String>,
    pub(super) body: Option<bytes::Bytes>,
    pub(super) ttl: Option<PbDuration>,
    pub(super) aliases: Vec<String>,
    /// Whether a SotW resource came wrapped in `Resource` (`None`: not a SotW resource).
    pub(super) wrapped: Option<bool>,
}

pub(super) fn sorted(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let set: BTreeSet<String> = names.into_iter().collect();
    set.into_iter().collect()
}

fn seen_sotw(any: &Any) -> (String, Seen) {
    if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
        if let Ok(wrapper) = Resource::decode(any.value.clone()) {
            let (name, seen) = seen_delta(&wrapper);
            return (
                name,
                Seen {
                    wrapped: Some(true),
                    ..seen
                },
            );
        }
    }
    let name = xds_sansio::resource::name_of(&any.value)
        .unwrap_or("")
        .to_string();
    (
        name,
        Seen {
            version: None,
            body: Some(any.value.clone()),
            ttl: None,
            aliases: Vec::new(),
            wrapped: Some(false),
        },
    )
}

fn seen_delta(r: &Resource) -> (String, Seen) {
    (
        r.name.clone(),
        Seen {
            version: (!r.version.is_empty()).then(|| r.version.clone()),
            body: r.resource.as_ref().map(|b| b.value.clone()),
            ttl: r.ttl,
            aliases: r.aliases.clone(),
            wrapped: None,
        },
    )
}

fn check_error(pattern: &ErrorPattern, actual: &Option<Status>) -> Result<(), String> {
    match (pattern, actual) {
        (ErrorPattern::Absent, None) | (ErrorPattern::Any, Some(_)) => Ok(()),
        (ErrorPattern::Contains(text), Some(s)) if s.message.contains(text.as_str()) => Ok(()),
        (ErrorPattern::Exact(text), Some(s)) if s.message == *text => Ok(()),
        (ErrorPattern::Absent, Some(s)) => Err(format!("unexpected error_detail {:?}", s.message)),
        (_, None) => Err("expected error_detail (a NACK), got none".into()),
        (ErrorPattern::Contains(text), Some(s)) => Err(format!(
            "error_detail {:?} does not contain {text:?}",
            s.message
        )),
        (ErrorPattern::Exact(text), Some(s)) => Err(format!(
            "error_detail {:?} is not exactly {text:?}",
            s.message
        )),
    }
}

/// A set of names against the names sent (no set: not checked).
pub(super) fn check_set(
    what: &str,
    expected: &Option<Vec<String>>,
    actual: &[String],
) -> Result<(), String> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let (want, have) = (
        sorted(expected.iter().cloned()),
        sorted(actual.iter().cloned()),
    );
    if want == have {
        Ok(())
    } else {
        Err(format!(
            "{what}: expected {{{}}}, got {{{}}}",
            want.join(","),
            have.join(",")
        ))
    }
}

/// An `F=` set against the response's `resource_errors` (no `F=`: not checked).
fn check_errors(expected: &Option<Vec<Item>>, actual: &[ResourceError]) -> Result<(), String> {
    if expected.is_none() {
        return Ok(());
    }
    let mut want: Vec<String> = resource_errors_of(expected)
        .iter()
        .map(notation::resource_error)
        .collect();
    let mut got: Vec<String> = actual.iter().map(notation::resource_error).collect();
    want.sort();
    got.sort();
    if want == got {
        Ok(())
    } else {
        Err(format!("F: expected {want:?}, got {got:?}"))
    }
}

/// `CP=` against the response's `control_plane` (no `CP=`: not checked; `CP=-`: none).
fn check_control_plane(
    expected: &Option<String>,
    actual: &Option<ControlPlane>,
) -> Result<(), String> {
    let actual = actual.as_ref().map(|cp| cp.identifier.as_str());
    match expected.as_deref() {
        None => Ok(()),
        Some("-") if actual.is_none() => Ok(()),
        Some(id) if actual == Some(id) => Ok(()),
        Some(id) => Err(format!("CP: expected {id:?}, got {actual:?}")),
    }
}

fn check_type(expected: &str, actual: &str) -> Result<(), String> {
    if expected == actual {
        Ok(())
    } else {
        Err(format!(
            "type: expected {}, got {}",
            notation::type_name(expected),
            notation::type_name(actual)
        ))
    }
}

fn check_node(expected: &Option<String>, actual: &Option<Node>) -> Result<(), String> {
    match (expected, actual) {
        (None, _) => Ok(()),
        (Some(id), None) if id == NO_NODE => Ok(()),
        (Some(id), Some(node)) if id == NO_NODE => {
            Err(format!("node: expected none, got {:?}", node.id))
        }
        (Some(id), Some(node)) if &node.id == id => Ok(()),
        (Some(id), other) => Err(format!(
            "node: expected {id:?}, got {:?}",
            other.as_ref().map(|n| &n.id)
        )),
    }
}

impl Runner<'_> {
    /// A scalar symbol against the value the model sent (no symbol: not checked).
    fn check_version(
        &mut self,
        type_url: &str,
        what: &str,
        symbol: &Option<String>,
        value: &str,
    ) -> Result<(), String> {
        match symbol {
            Some(symbol) => self.versions_of(type_url).check(what, symbol, value),
            None => Ok(()),
        }
    }

    /// A request's nonce: a symbol, or `N=^`, the latest nonce of its type.
    fn check_nonce(
        &mut self,
        type_url: &str,
        symbol: &Option<String>,
        value: &str,
    ) -> Result<(), String> {
        match symbol.as_deref() {
            Some(LATEST_NONCE) => {
                let latest = self.latest_nonce(type_url);
                if latest == value {
                    Ok(())
                } else {
                    Err(format!(
                        "N: expected the latest nonce {latest:?}, got {value:?}"
                    ))
                }
            }
            Some(symbol) => self.nonces.check("N", symbol, value),
            None => Ok(()),
        }
    }

    /// A request the model sent against its `C->S` line.
    pub(super) fn match_request(
        &mut self,
        pattern: &MessagePattern,
        request: &Request,
    ) -> Result<(), String> {
        match (pattern, request) {
            (
                MessagePattern::SotwRequest {
                    version,
                    names,
                    nonce,
                    type_url,
                    error,
                    node,
                },
                Request::Sotw(r),
            ) => {
                check_type(type_url, &r.type_url)?;
                self.check_version(type_url, "V", version, &r.version_info)?;
                check_set("R", names, &r.resource_names)?;
                self.check_nonce(type_url, nonce, &r.response_nonce)?;
                check_error(error, &r.error_detail)?;
                check_node(node, &r.node)
            }
            (
                MessagePattern::DeltaRequest {
                    type_url,
                    subscribe,
                    unsubscribe,
                    initial,
                    nonce,
                    error,
                    node,
                },
                Request::Delta(r),
            ) => {
                check_type(type_url, &r.type_url)?;
                check_set("S", subscribe, &r.resource_names_subscribe)?;
                check_set("U", unsubscribe, &r.resource_names_unsubscribe)?;
                if let Some(initial) = initial {
                    let names: Vec<String> = r.initial_resource_versions.keys().cloned().collect();
                    check_set(
                        "I",
                        &Some(initial.iter().map(|i| i.name.clone()).collect()),
                        &names,
                    )?;
                    for item in initial {
                        if let Some(actual) = r.initial_resource_versions.get(&item.name) {
                            let what = format!("I {}", item.name);
                            self.check_version(type_url, &what, &item.version, actual)?;
                        }
                    }
                }
                self.check_nonce(type_url, nonce, &r.response_nonce)?;
                check_error(error, &r.error_detail)?;
                check_node(node, &r.node)
            }
            _ => Err("the request is of the other variant".into()),
        }
    }

    /// Resources the model sent or holds against the items that describe them.
    pub(super) fn match_items(
        &mut self,
        type_url: &str,
        expected: &[Item],
        seen: Vec<(String, Seen)>,
        type_version: &str,
    ) -> Result<(), String> {
        let names: Vec<String> = seen.iter().map(|(n, _)| n.clone()).collect();
        check_set(
            "R",
            &Some(expected.iter().map(|i| i.name.clone()).collect()),
            &names,
        )?;
        for item in expected {
            let Some((_, seen)) = seen.iter().find(|(n, _)| *n == item.name) else {
                continue;
            };
            let actual = seen.version.as_deref().unwrap_or(type_version);
            let what = format!("version of {}", item.name);
            self.check_version(type_url, &what, &item.version, actual)?;
            if let Some(tag) = &item.tag {
                let expected = self.body_for(type_url, item, "");
                if seen.body.as_ref() != Some(&expected) {
                    return Err(format!("body of {}: expected tag {tag}", item.name));
                }
            }
            if item.unwrapped && seen.wrapped == Some(true) {
                return Err(format!("{}: expected no Resource wrapper", item.name));
            }
            if item.wrapped && seen.wrapped == Some(false) {
                return Err(format!("{}: expected a Resource wrapper", item.name));
            }
            if item.no_body && seen.body.is_some() {
                return Err(format!("{}: expected no body", item.name));
            }
            if let Some(ttl) = item.ttl {
                if seen.ttl != Some(ttl_of(ttl)) {
                    return Err(format!("{}: expected TTL {ttl:?}", item.name));
                }
            }
            if !item.aliases.is_empty()
                && sorted(item.aliases.iter().cloned()) != sorted(seen.aliases.iter().cloned())
            {
                return Err(format!(
                    "{}: expected aliases {:?}",
                    item.name, item.aliases
                ));
            }
        }
        Ok(())
    }

    /// A response the model sent against its `S->C` line.
    pub(super) fn match_response(
        &mut self,
        pattern: &MessagePattern,
        response: &Response,
    ) -> Result<(), String> {
        match (pattern, response) {
            (
                MessagePattern::SotwResponse {
                    version,
                    resources,
                    nonce,
                    type_url,
                    errors,
                    control_plane,
                },
                Response::Sotw(r),
            ) => {
                check_type(type_url, &r.type_url)?;
                check_control_plane(control_plane, &r.control_plane)?;
                check_errors(errors, &r.resource_errors)?;
                self.check_version(type_url, "V", version, &r.version_info)?;
                self.check_nonce(type_url, nonce, &r.nonce)?;
                if let Some(items) = resources {
                    let seen = r.resources.iter().map(seen_sotw).collect();
                    self.match_items(type_url, items, seen, &r.version_info)?;
                }
                Ok(())
            }
            (
                MessagePattern::DeltaResponse {
                    version,
                    resources,
                    removed,
                    nonce,
                    type_url,
                    errors,
                    control_plane,
                },
                Response::Delta(r),
            ) => {
                check_type(type_url, &r.type_url)?;
                check_control_plane(control_plane, &r.control_plane)?;
                check_errors(errors, &r.resource_errors)?;
                self.check_version(type_url, "V", version, &r.system_version_info)?;
                self.check_nonce(type_url, nonce, &r.nonce)?;
                check_set("X", removed, &r.removed_resources)?;
                if let Some(items) = resources {
                    let seen = r.resources.iter().map(seen_delta).collect();
                    self.match_items(type_url, items, seen, "")?;
                }
                Ok(())
            }
            _ => Err("the response is of the other variant".into()),
        }
    }
}
