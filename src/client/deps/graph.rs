//! The reference graph: what is known of each resource, which resources reference it, and
//! whether a root reaches it (live). Liveness is kept incrementally, so an update costs
//! what it changes: a route that switches ten clusters links ten and unlinks ten.
//!
//! A live node is a root or has a live referrer. Only aggregate clusters can form cycles
//! (CDS -> CDS); a cluster that loses a referrer is checked for an anchor (a root or a
//! referrer of another type) through its cluster referrers, and a component without one
//! dies whole, so a cycle never keeps itself alive.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::{Failure, ResourceKey};
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::CLUSTER;

/// What is known of a resource (a node without a state is waited for).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum State {
    /// Received; its references read.
    Present(Held),
    /// Cannot be used: it does not exist, or nothing usable was received.
    Failed(Failure),
}

/// A resource the client holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Held {
    pub version: SharedStr,
    pub body: Bytes,
    /// Its edges: its own references and, for an owner, its members (`members.rs`).
    pub refs: Vec<ResourceKey>,
    /// The references its body holds.
    pub own_refs: Vec<ResourceKey>,
    pub aggregate: Option<Vec<String>>,
    /// A route configuration whose virtual hosts come from VHDS.
    pub vhds: bool,
    /// The references could not be read: the resource is held but unusable.
    pub malformed: Option<Failure>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    pub state: Option<State>,
    pub referrers: BTreeSet<ResourceKey>,
    pub root: bool,
    pub live: bool,
    /// Subscribed by name on the manager's behalf.
    pub subscribed: bool,
    /// When an unreferenced name is unsubscribed (the grace period).
    pub drop_at: Option<Instant>,
}

impl Node {
    pub fn refs(&self) -> &[ResourceKey] {
        match &self.state {
            Some(State::Present(held)) => &held.refs,
            _ => &[],
        }
    }

    pub fn is_pending(&self) -> bool {
        self.state.is_none()
    }

    pub fn failure(&self) -> Option<&Failure> {
        match &self.state {
            Some(State::Failed(failure)) => Some(failure),
            Some(State::Present(held)) => held.malformed.as_ref(),
            _ => None,
        }
    }
}

/// The nodes and the sets derived from them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Graph {
    pub nodes: BTreeMap<ResourceKey, Node>,
    /// Live nodes not received yet: the configuration is complete when this is empty.
    pub waiting: BTreeSet<ResourceKey>,
    /// Live nodes that cannot be used.
    pub failed: BTreeSet<ResourceKey>,
    /// Nodes whose state or liveness changed since the last snapshot.
    pub changed: BTreeSet<ResourceKey>,
    /// Nodes that became live and are not covered by a wildcard: to subscribe.
    pub became_live: Vec<ResourceKey>,
    /// Nodes that died: to unsubscribe after the grace period.
    pub died: Vec<ResourceKey>,
    /// The members each owner received (SRDS scopes, VHDS virtual hosts; `members.rs`).
    pub members: BTreeMap<ResourceKey, BTreeSet<ResourceKey>>,
}

impl Graph {
    fn node(&mut self, key: &ResourceKey) -> &mut Node {
        self.nodes.entry(key.clone()).or_default()
    }

    /// Re-files `key` in `waiting` and `failed` after a change of state or liveness; a
    /// change of a live node, or of liveness, is a change of the configuration.
    fn file(&mut self, key: &ResourceKey, liveness_changed: bool) {
        let Some(node) = self.nodes.get(key) else {
            self.waiting.remove(key);
            self.failed.remove(key);
            return;
        };
        let (live, pending, failed) = (node.live, node.is_pending(), node.failure().is_some());
        if live && pending {
            self.waiting.insert(key.clone());
        } else {
            self.waiting.remove(key);
        }
        if live && failed {
            self.failed.insert(key.clone());
        } else {
            self.failed.remove(key);
        }
        if live || liveness_changed {
            self.changed.insert(key.clone());
        }
    }

    /// Sets what is known of `key`, relinking its references if it is live.
    pub fn set_state(&mut self, key: &ResourceKey, state: State) {
        let node = self.node(key);
        if node.state.as_ref() == Some(&state) {
            return;
        }
        let old_refs: Vec<ResourceKey> = match node.state.replace(state) {
            Some(State::Present(held)) => held.refs,
            _ => Vec::new(),
        };
        let live = node.live;
        let new_refs: Vec<ResourceKey> = node.refs().to_vec();
        self.file(key, false);
        if live && old_refs != new_refs {
            let mut lost = Vec::new();
            for gone in old_refs
                .iter()
                .filter(|r| new_refs.binary_search(r).is_err())
            {
                lost.extend(self.unlink(key, gone));
            }
            for added in new_refs
                .iter()
                .filter(|r| old_refs.binary_search(r).is_err())
            {
                self.link(key, added);
            }
            self.sweep_cycles(lost);
        }
    }

    /// Makes `key` a root (or not).
    pub fn set_root(&mut self, key: &ResourceKey, root: bool) {
        let node = self.node(key);
        if node.root == root {
            return;
        }
        node.root = root;
        if root {
            self.make_live(key);
        } else if node.referrers.is_empty() {
            self.make_dead(key);
        } else if key.type_url == CLUSTER.type_url {
            self.sweep_cycles(alloc::vec![key.clone()]);
        }
    }

    /// Forgets a node nothing reaches (its name was unsubscribed).
    pub fn forget(&mut self, key: &ResourceKey) {
        if self
            .nodes
            .get(key)
            .is_some_and(|n| !n.live && n.referrers.is_empty())
        {
            self.nodes.remove(key);
            self.file(key, false);
        }
    }

    fn link(&mut self, from: &ResourceKey, to: &ResourceKey) {
        let node = self.node(to);
        node.referrers.insert(from.clone());
        if !node.live {
            self.make_live(to);
        }
    }

    /// Removes an edge; returns the cluster that lost it and stays live, to be checked for
    /// an anchor.
    fn unlink(&mut self, from: &ResourceKey, to: &ResourceKey) -> Option<ResourceKey> {
        let node = self.nodes.get_mut(to)?;
        node.referrers.remove(from);
        if node.referrers.is_empty() && !node.root {
            self.make_dead(to);
            None
        } else {
            (to.type_url == CLUSTER.type_url).then(|| to.clone())
        }
    }

    /// Marks `start` live and links its references, with a work list (a chain of
    /// aggregate clusters may be long).
    fn make_live(&mut self, start: &ResourceKey) {
        let mut work = alloc::vec![start.clone()];
        while let Some(key) = work.pop() {
            let node = self.node(&key);
            if node.live {
                continue;
            }
            node.live = true;
            node.drop_at = None;
            let refs: Vec<ResourceKey> = node.refs().to_vec();
            self.became_live.push(key.clone());
            self.file(&key, true);
            for child in refs {
                let child_node = self.node(&child);
                child_node.referrers.insert(key.clone());
                if !child_node.live {
                    work.push(child);
                }
            }
        }
    }

    /// Marks `start` dead and unlinks its references.
    fn make_dead(&mut self, start: &ResourceKey) {
        let mut work = alloc::vec![start.clone()];
        let mut lost = Vec::new();
        while let Some(key) = work.pop() {
            let Some(node) = self.nodes.get_mut(&key) else {
                continue;
            };
            if !node.live {
                continue;
            }
            node.live = false;
            let refs: Vec<ResourceKey> = node.refs().to_vec();
            self.died.push(key.clone());
            self.file(&key, true);
            for child in refs {
                let Some(child_node) = self.nodes.get_mut(&child) else {
                    continue;
                };
                child_node.referrers.remove(&key);
                if child_node.referrers.is_empty() && !child_node.root {
                    work.push(child);
                } else if child.type_url == CLUSTER.type_url {
                    lost.push(child);
                }
            }
        }
        self.sweep_cycles(lost);
    }

    /// Kills the cluster components among `candidates` that nothing anchors any more: no
    /// root and no referrer of another type among them (aggregate cycles).
    fn sweep_cycles(&mut self, candidates: Vec<ResourceKey>) {
        for start in candidates {
            if !self.nodes.get(&start).is_some_and(|n| n.live) {
                continue;
            }
            let mut seen = BTreeSet::new();
            let mut work = alloc::vec![start.clone()];
            let mut anchored = false;
            while let Some(key) = work.pop() {
                if !seen.insert(key.clone()) {
                    continue;
                }
                let Some(node) = self.nodes.get(&key) else {
                    continue;
                };
                if node.root
                    || node
                        .referrers
                        .iter()
                        .any(|r| r.type_url != CLUSTER.type_url)
                {
                    anchored = true;
                    break;
                }
                work.extend(node.referrers.iter().cloned());
            }
            if anchored {
                continue;
            }
            // Nothing outside the component reaches it: clear the edges inside it first,
            // so each member dies once.
            for key in &seen {
                if let Some(node) = self.nodes.get_mut(key) {
                    node.referrers.retain(|r| !seen.contains(r));
                }
            }
            for key in &seen {
                self.make_dead(key);
            }
        }
    }
}
