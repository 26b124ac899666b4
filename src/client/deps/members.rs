//! Resources that belong to another instead of being named by it: the scopes of an SRDS
//! scope set (every `ScopedRouteConfiguration` the SRDS wildcard brings) and the virtual
//! hosts a VHDS route configuration receives on demand. The owner links its members like
//! references, so what a member names is followed and waited for; the manager never
//! subscribes a member by name (the wildcard brings scopes, the application asks for
//! virtual hosts when a request needs one).
//!
//! - **SRDS**: a listener whose connection manager has `scoped_rds` reaches every scope of
//!   the type: "The set of routing scopes associated with the HCM will be dynamically
//!   loaded via the SRDS API" (`ScopedRoutes.scoped_rds`), and no scope is named
//!   (`ScopedRoutes.name` is "The name assigned to the scoped routing configuration", no
//!   resource; `ScopedRds.srds_resources_locator`, a collection, is not implemented in
//!   Envoy and not read). The set is the node
//!   `SRDS *`, subscribed as the explicit wildcard `"*"` (xDS protocol, "How the client
//!   specifies what resources to return"); it is complete once the client says the
//!   wildcard's first response was handled ([`ClientEvent::Ready`](crate::client::ClientEvent::Ready)).
//! - **VHDS**: "Virtual hosts in VHDS are identified by a combination of the name of the
//!   route configuration to which the virtual host belongs as well as the HTTP host header
//!   ... `<route configuration name>/<host entry>`" (Envoy, "Virtual Host Discovery Service
//!   (VHDS)"), fetched only "If a route for the contents of a host/authority header cannot
//!   be resolved". So a route configuration with `vhds` is complete without any virtual
//!   host; one received is a member of its route configuration (and its clusters are
//!   followed); one removed or found not to exist leaves it.

use alloc::collections::BTreeSet;
use alloc::vec::Vec;
use bytes::Bytes;

use super::graph::{Held, State};
use super::{DependencyManager, ResourceKey};
use crate::client::WILDCARD;
use crate::refs::References;
use crate::types::{ROUTE, SCOPED_ROUTE, VIRTUAL_HOST};

/// The name of the node that stands for every scope of SRDS.
pub(crate) const ALL_SCOPES: &str = WILDCARD;

/// The node that stands for every scope of SRDS.
pub(crate) fn all_scopes() -> ResourceKey {
    ResourceKey::new(SCOPED_ROUTE.type_url, ALL_SCOPES)
}

/// Whether `key` stands for a set of resources (no resource of its own).
pub(crate) fn is_collection(key: &ResourceKey) -> bool {
    key.type_url == SCOPED_ROUTE.type_url && key.name == ALL_SCOPES
}

/// Whether `key` is a member: subscribed by the wildcard or the application, never by the
/// manager.
pub(crate) fn is_member(key: &ResourceKey) -> bool {
    key.type_url == VIRTUAL_HOST.type_url
        || (key.type_url == SCOPED_ROUTE.type_url && key.name != ALL_SCOPES)
}

/// An owner's edges: its own references and its members, sorted, each once.
pub(crate) fn with_members(
    own: &[ResourceKey],
    members: Option<&BTreeSet<ResourceKey>>,
) -> Vec<ResourceKey> {
    let mut refs: Vec<ResourceKey> = own.to_vec();
    refs.extend(members.into_iter().flatten().cloned());
    refs.sort();
    refs.dedup();
    refs
}

impl DependencyManager {
    /// The owner of a member resource, when the manager knows it (a route configuration
    /// owns virtual hosts only while it has `vhds`).
    pub(super) fn owner_of(&self, type_url: &str, name: &str) -> Option<ResourceKey> {
        if type_url == SCOPED_ROUTE.type_url && name != ALL_SCOPES {
            let key = all_scopes();
            return self.graph.nodes.contains_key(&key).then_some(key);
        }
        if type_url == VIRTUAL_HOST.type_url {
            let route = crate::refs::vhds_route_configuration(name)?;
            let key = ResourceKey::new(ROUTE.type_url, route);
            let vhds = matches!(
                self.graph.nodes.get(&key).and_then(|n| n.state.as_ref()),
                Some(State::Present(held)) if held.vhds
            );
            return vhds.then_some(key);
        }
        None
    }

    /// `member` belongs to `owner` (received).
    pub(super) fn add_member(&mut self, owner: &ResourceKey, member: &ResourceKey) {
        if self
            .graph
            .members
            .entry(owner.clone())
            .or_default()
            .insert(member.clone())
        {
            self.relink(owner);
        }
    }

    /// `member` left `owner` (removed, unsubscribed, or it does not exist): it leaves the
    /// configuration without failing it.
    pub(super) fn drop_member(&mut self, owner: &ResourceKey, member: &ResourceKey) {
        if let Some(members) = self.graph.members.get_mut(owner) {
            if members.remove(member) {
                self.relink(owner);
            }
        }
        self.graph.forget(member);
    }

    /// Sets `owner`'s edges to its own references and its members.
    fn relink(&mut self, owner: &ResourceKey) {
        let Some(Some(State::Present(held))) = self.graph.nodes.get(owner).map(|n| &n.state) else {
            return;
        };
        let mut held = held.clone();
        held.refs = with_members(&held.own_refs, self.graph.members.get(owner));
        self.graph.set_state(owner, State::Present(held));
    }

    /// The SRDS wildcard's first response was handled: the scope set is in, with the
    /// scopes received so far.
    pub(super) fn scopes_ready(&mut self) {
        let key = all_scopes();
        if !self.graph.nodes.get(&key).is_some_and(|n| n.is_pending()) {
            return;
        }
        let held = Held {
            version: crate::text::SharedStr::default(),
            body: Bytes::new(),
            refs: with_members(&[], self.graph.members.get(&key)),
            own_refs: Vec::new(),
            aggregate: None,
            vhds: false,
            malformed: None,
        };
        self.graph.set_state(&key, State::Present(held));
    }
}

/// The references of a held resource, as graph keys (types the manager follows only; a
/// scope set over SRDS is every scope).
pub(crate) fn keys_of(refs: &References) -> Vec<ResourceKey> {
    let mut keys: Vec<ResourceKey> = refs
        .iter()
        .filter(|r| super::followed(r.type_url))
        .map(|r| {
            if r.type_url == SCOPED_ROUTE.type_url {
                all_scopes()
            } else {
                ResourceKey::new(r.type_url, r.name.as_str())
            }
        })
        .collect();
    keys.sort();
    keys.dedup();
    keys
}
