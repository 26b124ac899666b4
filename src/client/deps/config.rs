//! What the manager hands the application: resource keys, failures, snapshots, and the
//! resolved configuration of one listener.

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;

use super::graph::{Graph, State};
use crate::refs::RefError;
use crate::text::SharedStr;
use crate::types::{
    TypeInfo, CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, SECRET,
    VIRTUAL_HOST,
};

/// The deepest chain of aggregate clusters followed (gRPC A37: "maximum depth of 16").
pub const MAX_AGGREGATE_DEPTH: usize = 16;

/// A resource: its type URL and name. Ordered by type URL, then name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceKey {
    /// The type URL (v3).
    pub type_url: &'static str,
    /// The name (canonical when `xdstp://`).
    pub name: String,
}

impl ResourceKey {
    /// A key.
    pub fn new(type_url: &'static str, name: impl Into<String>) -> ResourceKey {
        ResourceKey {
            type_url,
            name: name.into(),
        }
    }
}

impl Ord for ResourceKey {
    fn cmp(&self, other: &ResourceKey) -> core::cmp::Ordering {
        // Type URLs are the catalog's constants: the same pointer is the same type, which
        // spares comparing their long common prefix on every map step.
        let same_type = core::ptr::eq(self.type_url, other.type_url);
        let types = if same_type {
            core::cmp::Ordering::Equal
        } else {
            self.type_url.cmp(other.type_url)
        };
        types.then_with(|| self.name.cmp(&other.name))
    }
}

impl PartialOrd for ResourceKey {
    fn partial_cmp(&self, other: &ResourceKey) -> Option<core::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for ResourceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = TypeInfo::of(self.type_url)
            .short_name()
            .unwrap_or(self.type_url);
        write!(f, "{short} {}", self.name)
    }
}

/// Why a resource (or a cluster tree) of the configuration cannot be used. A failure makes
/// the listener that needs the resource fail when it is the listener itself, its route
/// configuration or a scope (gRPC A74: the whole configuration is an error), and only the
/// cluster concerned when it is a cluster, its endpoints or a secret (A74: per-cluster
/// errors).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// The resource does not exist (the client's does-not-exist, a server removal, or
    /// absence from a wildcard type's full state).
    DoesNotExist(ResourceKey),
    /// Its TTL ran out.
    Expired(ResourceKey),
    /// The server reported an error for it and no body is held (gRPC A88: with a body
    /// held, the error is ambient and the body stays in use).
    ServerError {
        /// The resource.
        key: ResourceKey,
        /// The `google.rpc.Code`.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// Its only version was rejected (NACKed), so nothing is held.
    Rejected {
        /// The resource.
        key: ResourceKey,
        /// The NACK's message.
        error: String,
    },
    /// Its references could not be read.
    Malformed(RefError),
    /// Not received yet (only in a configuration read before it was complete).
    Waiting(ResourceKey),
    /// An aggregate cluster reaches itself (gRPC A37).
    AggregateCycle {
        /// The aggregate cluster whose tree loops.
        cluster: String,
    },
    /// An aggregate cluster tree deeper than [`MAX_AGGREGATE_DEPTH`].
    AggregateTooDeep {
        /// The aggregate cluster.
        cluster: String,
    },
    /// An aggregate cluster with no usable leaf cluster.
    AggregateEmpty {
        /// The aggregate cluster.
        cluster: String,
    },
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::DoesNotExist(key) => write!(f, "{key} does not exist"),
            Failure::Expired(key) => write!(f, "{key} expired"),
            Failure::ServerError { key, code, message } => {
                write!(f, "{key}: server error {code}: {message}")
            }
            Failure::Rejected { key, error } => write!(f, "{key} rejected: {error}"),
            Failure::Malformed(error) => write!(f, "{error}"),
            Failure::Waiting(key) => write!(f, "{key} not received yet"),
            Failure::AggregateCycle { cluster } => {
                write!(f, "aggregate cluster {cluster} reaches itself")
            }
            Failure::AggregateTooDeep { cluster } => write!(
                f,
                "aggregate cluster {cluster} is deeper than {MAX_AGGREGATE_DEPTH}"
            ),
            Failure::AggregateEmpty { cluster } => {
                write!(f, "aggregate cluster {cluster} has no usable cluster")
            }
        }
    }
}

/// A complete configuration was reached (every resource the roots reach is held or known
/// not to be usable): what changed since the previous one. Read each listener's
/// configuration with [`DependencyManager::config`](super::DependencyManager::config).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// 1, 2, 3, ...
    pub generation: u64,
    /// Resources that entered, left or changed in the configuration since the previous
    /// snapshot, sorted.
    pub changed: Vec<ResourceKey>,
    /// Resources of the configuration that cannot be used, sorted, with why (aggregate
    /// cluster trees are judged per listener, in its configuration).
    pub failed: Vec<(ResourceKey, Failure)>,
}

/// A resource of a configuration, as held.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The resource.
    pub key: ResourceKey,
    /// Its version.
    pub version: SharedStr,
    /// Its body (a slice of the response it came in).
    pub body: Bytes,
}

/// One cluster of a listener's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    /// The cluster's name.
    pub name: String,
    /// The leaf clusters it balances over, in priority order: itself for a plain cluster,
    /// the usable leaves of its tree for an aggregate one (gRPC A37); or why it cannot be
    /// used.
    pub leaves: Result<Vec<String>, Failure>,
}

/// The configuration one listener resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerConfig {
    /// The listener's name.
    pub name: String,
    /// `Err` when the listener, its route configuration or a scope cannot be used (the
    /// first failure, in key order): the listener cannot serve.
    pub status: Result<(), Failure>,
    /// Every resource the listener reaches that is held, sorted by key (the listener, its
    /// route configurations, clusters, endpoints, secrets).
    pub resources: Vec<Resolved>,
    /// Every cluster the listener reaches (route clusters and their aggregate members),
    /// sorted by name, each with its leaves or its failure.
    pub clusters: Vec<ClusterConfig>,
    /// Resources it reaches that cannot be used, sorted by key.
    pub failed: Vec<Failure>,
}

/// Whether a failure of a resource of this type takes the whole listener down: the
/// listener, its routing (route configurations, scopes, virtual hosts) and its filters'
/// ECDS configurations. Not modelled: a filter's `ExtensionConfigSource.default_config`,
/// with which Envoy applies the default instead of failing; here a missing configuration
/// fails the listener whether or not the filter has one.
fn fails_listener(type_url: &str) -> bool {
    [
        LISTENER.type_url,
        ROUTE.type_url,
        SCOPED_ROUTE.type_url,
        VIRTUAL_HOST.type_url,
        EXTENSION_CONFIG.type_url,
    ]
    .contains(&type_url)
}

impl Graph {
    /// Why `key` cannot be used, if it cannot.
    fn failure_of(&self, key: &ResourceKey) -> Option<Failure> {
        match self.nodes.get(key) {
            None => Some(Failure::Waiting(key.clone())),
            Some(node) if node.is_pending() => Some(Failure::Waiting(key.clone())),
            Some(node) => node.failure().cloned(),
        }
    }

    /// The configuration `root` (a listener, or a cluster for a wildcard CDS) resolves to.
    pub(crate) fn resolve(&self, root: &ResourceKey) -> ListenerConfig {
        let mut reached = BTreeSet::new();
        let mut work = alloc::vec![root.clone()];
        while let Some(key) = work.pop() {
            if !reached.insert(key.clone()) {
                continue;
            }
            if let Some(node) = self.nodes.get(&key) {
                work.extend(node.refs().iter().cloned());
            }
        }
        // What the listener itself stands on: everything reached without passing through a
        // cluster (a cluster's own references, such as its upstream filters' ECDS
        // configurations, make that cluster unusable, not the listener).
        let mut listener_side = BTreeSet::new();
        let mut work = alloc::vec![root.clone()];
        while let Some(key) = work.pop() {
            if !listener_side.insert(key.clone()) || key.type_url == CLUSTER.type_url {
                continue;
            }
            if let Some(node) = self.nodes.get(&key) {
                work.extend(node.refs().iter().cloned());
            }
        }
        let mut resources = Vec::new();
        let mut failed = Vec::new();
        let mut status = Ok(());
        for key in &reached {
            if let Some(failure) = self.failure_of(key) {
                if status.is_ok() && fails_listener(key.type_url) && listener_side.contains(key) {
                    status = Err(failure.clone());
                }
                failed.push(failure);
            }
            if super::members::is_collection(key) {
                continue; // the scope set: its scopes are listed, it is no resource
            }
            if let Some(State::Present(held)) = self.nodes.get(key).and_then(|n| n.state.as_ref()) {
                resources.push(Resolved {
                    key: key.clone(),
                    version: held.version.clone(),
                    body: held.body.clone(),
                });
            }
        }
        let clusters = reached
            .iter()
            .filter(|k| k.type_url == CLUSTER.type_url)
            .map(|k| ClusterConfig {
                name: k.name.clone(),
                leaves: self.leaves(&k.name),
            })
            .collect();
        ListenerConfig {
            name: root.name.clone(),
            status,
            resources,
            clusters,
            failed,
        }
    }

    /// The usable leaf clusters of `cluster`, in priority order (gRPC A37: depth-first over
    /// the aggregate's list, each leaf once), or why there are none.
    fn leaves(&self, cluster: &str) -> Result<Vec<String>, Failure> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.leaves_into(cluster, &mut path, &mut out)?;
        if out.is_empty() {
            return Err(Failure::AggregateEmpty {
                cluster: cluster.into(),
            });
        }
        Ok(out)
    }

    fn leaves_into(
        &self,
        cluster: &str,
        path: &mut Vec<String>,
        out: &mut Vec<String>,
    ) -> Result<(), Failure> {
        let key = ResourceKey::new(CLUSTER.type_url, cluster);
        let root = path.first().cloned().unwrap_or_else(|| cluster.into());
        if path.iter().any(|p| p == cluster) {
            return Err(Failure::AggregateCycle { cluster: root });
        }
        if path.len() >= MAX_AGGREGATE_DEPTH {
            return Err(Failure::AggregateTooDeep { cluster: root });
        }
        let held = match self.nodes.get(&key).and_then(|n| n.state.as_ref()) {
            Some(State::Present(held)) if held.malformed.is_none() => held,
            _ if path.is_empty() => {
                return Err(self.failure_of(&key).unwrap_or(Failure::Waiting(key)))
            }
            // A member that cannot be used is left out (the aggregate uses the others).
            _ => return Ok(()),
        };
        // A cluster whose upstream filters' ECDS configuration cannot be used yet cannot be
        // used either (Envoy warms it until the configuration arrives).
        let filters_failure = self.nodes.get(&key).and_then(|node| {
            node.refs()
                .iter()
                .filter(|r| r.type_url == EXTENSION_CONFIG.type_url)
                .find_map(|r| self.failure_of(r))
        });
        if let Some(failure) = filters_failure {
            return if path.is_empty() {
                Err(failure)
            } else {
                Ok(())
            };
        }
        let Some(children) = &held.aggregate else {
            if !out.iter().any(|o| o == cluster) {
                out.push(cluster.into());
            }
            return Ok(());
        };
        path.push(cluster.into());
        for child in children {
            self.leaves_into(child, path, out)?;
        }
        path.pop();
        Ok(())
    }
}

/// The types the manager follows: every type a reference can name (RTDS and unknown
/// types are named by nothing).
pub(crate) fn followed(type_url: &str) -> bool {
    [
        LISTENER.type_url,
        ROUTE.type_url,
        SCOPED_ROUTE.type_url,
        VIRTUAL_HOST.type_url,
        CLUSTER.type_url,
        ENDPOINT.type_url,
        SECRET.type_url,
        EXTENSION_CONFIG.type_url,
    ]
    .contains(&type_url)
}
