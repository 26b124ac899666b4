//! The client's rules: what each request may carry, given what the stream has seen.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{CheckSide, Checker, Rule, Sent};
use xds_sansio::message::Request;
use xds_sansio::pb::envoy::config::core::v3::node::UserAgentVersionType;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::TypeInfo;

impl Checker {
    pub(super) fn request(&mut self, line: usize, stream: u64, request: &Request) {
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
            let changes = node_changes(node, first);
            if !changes.is_empty() {
                found.push((
                    Rule::NodeChanged,
                    format!(
                        "the node differs from the stream's first in {}",
                        changes.join(", ")
                    ),
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
        let sent_with_nonce = t.responses.get(nonce).map(Vec::as_slice).unwrap_or(&[]);
        let known = !sent_with_nonce.is_empty();
        if !nonce.is_empty() && !known {
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
        let owed = t.owed.get(nonce).copied().unwrap_or(0);
        // An unknown nonce is reported above; its request is not judged as an answer.
        let first_answer = !nonce.is_empty() && (!known || owed > 0);
        // A reused nonce names several responses: see the module's decisions.
        let ambiguous = sent_with_nonce.len() > 1;
        // A first answer answers the oldest response of the nonce not answered yet.
        let answered: Option<Sent> = if first_answer {
            sent_with_nonce.get(sent_with_nonce.len().saturating_sub(owed))
        } else {
            sent_with_nonce.last()
        }
        .cloned();
        let versions: BTreeSet<String> = sent_with_nonce
            .iter()
            .map(|sent| sent.version.clone())
            .collect();
        t.last_request_stale = !nonce.is_empty() && t.latest_nonce.as_deref() != Some(nonce);
        match request {
            Request::Sotw(r) => {
                if first_of_type {
                    t.accepted = Some(r.version_info.clone());
                }
                let accepted = t.accepted.clone().unwrap_or_default();
                match (&answered, error, first_answer) {
                    (Some(_), true, _) if r.version_info != accepted => found.push((
                        Rule::NackMovedVersion,
                        format!(
                            "NACK carries version {:?}, the last accepted is {accepted:?}",
                            r.version_info
                        ),
                    )),
                    (Some(_), false, _) if ambiguous && versions.contains(&r.version_info) => {
                        t.accepted = Some(r.version_info.clone());
                    }
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
                if let (Some(sent), true, true, false) = (&answered, error, first_answer, ambiguous)
                {
                    if t.latest_nonce.as_deref() == Some(nonce) {
                        t.rejected = Some(sent.clone());
                    }
                }
                let names: BTreeSet<String> = r.resource_names.iter().cloned().collect();
                // Legacy wildcard lasts while the names stay empty; `*` is explicit. Where the
                // protocol texts disagree (legacy wildcard kept after names appear), the
                // checker assumes less, so it never reports what either text allows.
                // An empty list keeps only a legacy wildcard that never saw a name (newest
                // text, "How the client specifies what resources to return").
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
                if known && !first_answer {
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
                if let (Some(sent), true, true, false) = (&answered, error, first_answer, ambiguous)
                {
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
        if known && owed > 0 {
            t.owed.insert(nonce.into(), owed - 1);
        }
        for (rule, detail) in found {
            self.report(CheckSide::Client, line, rule, detail);
        }
    }
}

/// The fields of `node` that differ from `first`, by their `Node` field names; text fields
/// with both values.
fn node_changes(node: &Node, first: &Node) -> Vec<String> {
    fn text(field: &str, now: &str, was: &str) -> Option<String> {
        (now != was).then(|| format!("{field} ({now:?}, first {was:?})"))
    }
    let mut changes: Vec<String> = [
        text("id", &node.id, &first.id),
        text("cluster", &node.cluster, &first.cluster),
        text(
            "user_agent_name",
            &node.user_agent_name,
            &first.user_agent_name,
        ),
    ]
    .into_iter()
    .flatten()
    .collect();
    match (
        &node.user_agent_version_type,
        &first.user_agent_version_type,
    ) {
        (
            Some(UserAgentVersionType::UserAgentVersion(now)),
            Some(UserAgentVersionType::UserAgentVersion(was)),
        ) => changes.extend(text("user_agent_version", now, was)),
        (now, was) if now != was => changes.push("user_agent_version_type".into()),
        _ => {}
    }
    // `listening_addresses` is deprecated, but a client may still send it.
    #[allow(deprecated)]
    let others = [
        ("metadata", node.metadata != first.metadata),
        ("locality", node.locality != first.locality),
        ("extensions", node.extensions != first.extensions),
        (
            "client_features",
            node.client_features != first.client_features,
        ),
        (
            "listening_addresses",
            node.listening_addresses != first.listening_addresses,
        ),
        (
            "dynamic_parameters",
            node.dynamic_parameters != first.dynamic_parameters,
        ),
    ];
    changes.extend(
        others
            .into_iter()
            .filter(|(_, differs)| *differs)
            .map(|(field, _)| String::from(field)),
    );
    if changes.is_empty() && node != first {
        // A field this list does not name yet (the message may grow).
        changes.push("a field".into());
    }
    changes
}
