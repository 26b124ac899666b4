//! Per-node applied state: for every open stream (its node and group) and every type, the
//! version the client ACKed, the version it NACKed with its error, the response in flight,
//! and when, in wall-clock time. Read with [`XdsServer::applied`](super::XdsServer::applied),
//! as JSON ([`XdsServer::applied_json`](super::XdsServer::applied_json), for a debug page),
//! through the CSDS service ([`crate::server::XdsServer::csds_service`]), and told to
//! [`Callbacks::applied`](super::Callbacks::applied) as it changes. The state is the core's
//! ([`xds_sansio::server::ServerStream::applied`]); this only keeps it per stream.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use serde_json::{json, Value};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::AppliedState;
use xds_sansio::time::{Instant, StdClock};

/// One open stream's applied state.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeApplied {
    /// The stream ([`StreamInfo::id`](super::StreamInfo::id)).
    pub stream: u64,
    /// Its node, once identified.
    pub node: Option<Node>,
    /// Its node group, once authorized.
    pub group: Option<Arc<str>>,
    /// Each type it requested, in ADS order.
    pub types: Vec<TypeApplied>,
}

/// One type's applied state on a stream, in wall-clock time.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TypeApplied {
    /// The type URL.
    pub type_url: String,
    /// The version last ACKed, and when.
    pub acked: Option<(String, SystemTime)>,
    /// The version NACKed since the last ACK: version, `error_detail` code and message,
    /// when.
    pub nacked: Option<(String, i32, String, SystemTime)>,
    /// The response not answered yet: nonce, version, sent when.
    pub in_flight: Option<(String, String, SystemTime)>,
}

impl NodeApplied {
    /// Stream `stream`'s entry before anything was applied or its node known.
    pub(crate) fn new(stream: u64) -> NodeApplied {
        NodeApplied {
            stream,
            node: None,
            group: None,
            types: Vec::new(),
        }
    }

    /// Takes the stream's node and group where not known yet: once known, neither
    /// changes for the stream's life, so they are copied once.
    pub(crate) fn learn(&mut self, node: &Option<Node>, group: &Option<Arc<str>>) {
        if self.node.is_none() {
            self.node.clone_from(node);
        }
        if self.group.is_none() {
            self.group.clone_from(group);
        }
    }
}

impl TypeApplied {
    fn from_core(state: AppliedState, wall: impl Fn(Instant) -> SystemTime) -> TypeApplied {
        TypeApplied {
            type_url: state.type_url,
            acked: state.acked.map(|(v, at)| (v, wall(at))),
            nacked: state
                .nacked
                .map(|n| (n.version, n.error.code, n.error.message, wall(n.at))),
            in_flight: state.in_flight.map(|f| (f.nonce, f.version, wall(f.since))),
        }
    }
}

/// The applied state of every open stream.
#[derive(Debug)]
pub(crate) struct Registry {
    streams: Mutex<BTreeMap<u64, NodeApplied>>,
    /// One reading of both clocks, so a time converts to the same wall time every time.
    anchor: (std::time::Instant, SystemTime),
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            streams: Mutex::new(BTreeMap::new()),
            anchor: (std::time::Instant::now(), SystemTime::now()),
        }
    }
}

impl Registry {
    /// Refreshes `entry` (a stream's own copy, kept between updates) to the core's
    /// `states`, then the registry's copy of it in place: a stream's node and group are
    /// copied the first time only (they do not change once known), its types with
    /// `clone_from`. Called twice an update on every stream (the response sent, its
    /// answer): cloning the node and the whole entry each time, and re-inserting it, was
    /// a sixth of the server's own CPU in a one-cluster delta fan-out
    /// (`benches/README.md`).
    pub(crate) fn update(
        &self,
        entry: &mut NodeApplied,
        states: Vec<AppliedState>,
        clock: &StdClock,
    ) {
        let (std_anchor, wall_anchor) = self.anchor;
        let wall = |at: Instant| {
            let at = clock.to_std(at);
            match at.checked_duration_since(std_anchor) {
                Some(after) => wall_anchor + after,
                None => wall_anchor - std_anchor.saturating_duration_since(at),
            }
        };
        entry.types.clear();
        entry
            .types
            .extend(states.into_iter().map(|s| TypeApplied::from_core(s, wall)));
        let mut streams = self.lock();
        match streams.get_mut(&entry.stream) {
            Some(kept) => {
                kept.learn(&entry.node, &entry.group);
                kept.types.clone_from(&entry.types);
            }
            None => {
                streams.insert(entry.stream, entry.clone());
            }
        }
    }

    /// Stream `id` ended.
    pub(crate) fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Every open stream's entry, by stream id.
    pub(crate) fn all(&self) -> Vec<NodeApplied> {
        self.lock().values().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, NodeApplied>> {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The JSON of a debug page: one object per stream.
pub(crate) fn to_json(all: &[NodeApplied]) -> Value {
    Value::Array(
        all.iter()
            .map(|n| {
                json!({
                    "stream": n.stream,
                    "node": n.node.as_ref().map(|node| node.id.clone()),
                    "cluster": n.node.as_ref().map(|node| node.cluster.clone()),
                    "group": n.group.as_deref(),
                    "types": n.types.iter().map(|t| json!({
                        "type_url": t.type_url,
                        "acked": t.acked.as_ref().map(|(v, at)| json!({"version": v, "at": seconds(*at)})),
                        "nacked": t.nacked.as_ref().map(|(v, code, message, at)| json!({
                            "version": v, "code": code, "message": message, "at": seconds(*at)
                        })),
                        "in_flight": t.in_flight.as_ref().map(|(nonce, v, since)| json!({
                            "nonce": nonce, "version": v, "since": seconds(*since)
                        })),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str) -> Node {
        Node {
            id: id.into(),
            ..Node::default()
        }
    }

    #[test]
    fn an_entry_is_kept_in_place_and_learns_its_node_once() {
        let registry = Registry::default();
        let clock = StdClock::new();
        let mut entry = NodeApplied::new(7);
        registry.update(&mut entry, Vec::new(), &clock);
        assert_eq!(registry.all(), vec![entry.clone()]);
        // The node becomes known later: the registry's copy takes it.
        entry.node = Some(node("a"));
        entry.group = Some("g".into());
        registry.update(&mut entry, Vec::new(), &clock);
        assert_eq!(registry.all(), vec![entry.clone()]);
        // Once known it is not copied again (a stream's node does not change).
        entry.node = Some(node("b"));
        registry.update(&mut entry, Vec::new(), &clock);
        assert_eq!(registry.all()[0].node, Some(node("a")));
        registry.remove(7);
        assert!(registry.all().is_empty());
    }
}
