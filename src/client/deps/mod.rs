//! The dependency manager: follows the references between resources (a listener names a
//! route configuration, a route names clusters, a cluster names its endpoints, aggregate
//! clusters and secrets), turns them into subscriptions, and tells the application when
//! the configuration is complete (gRPC A74, "xDS Config Tears": watch the listener, follow
//! every reference, hand over one complete configuration).
//!
//! Sans-IO like the client under it: the input is the client's events
//! ([`DependencyManager::handle_event`]) and the time; the output is subscription
//! [`Command`]s for the client (or for the per-type clients, by type) and [`Snapshot`]s.
//! It holds no client and no socket.
//!
//! # Call order
//!
//! ```text
//! let mut deps = DependencyManager::new(DepsConfig::default());
//! deps.watch_listener(now, "listener-1")?;   // gRPC's shape; or deps.watch_all(now): Envoy's
//! loop {
//!     while let Some(c) = deps.poll_command() { c.apply_to(&mut client)? }   // by type
//!     ... drive the client; for each event it emits:
//!     deps.handle_event(now, &event);
//!     while let Some(s) = deps.poll_snapshot() { use(deps.config("listener-1")) }
//!     at deps.poll_timeout(): deps.handle_timeout(now)
//! }
//! ```
//!
//! # Decisions
//!
//! - **Two shapes.** gRPC's: the application names listeners
//!   ([`DependencyManager::watch_listener`]); everything else is subscribed by name as
//!   references reach it. Envoy's
//!   ([`DependencyManager::watch_all`]): LDS and CDS are legacy wildcards, every listener
//!   and every cluster is a root, and route configurations, endpoints and secrets are
//!   subscribed by name. Either works over SotW or incremental, ADS or per-type streams:
//!   the commands name their type.
//! - **What is followed**: the [references](crate::refs) of each resource received: RDS,
//!   CDS (aggregate members too), EDS, SDS, ECDS (a filter's `config_discovery`: waited
//!   for like a route configuration, waiting being the default that
//!   `ExtensionConfigSource.apply_default_config_without_warming` opts out of, "Use the
//!   default config as the initial configuration without warming and waiting for the first
//!   discovery response", which is not read; its failure fails the listener, "In case of a
//!   failure and without the default configuration, the HTTP listener responds with code
//!   500", a `default_config` not being read either), SRDS (a scope set is every scope of
//!   the type) and
//!   VHDS (virtual hosts received on demand belong to their route configuration); the
//!   last two in `members.rs`. A name is never resolved against the referrer's: see
//!   [`crate::refs`], "A reference is never relative".
//! - **Liveness and subscriptions.** A resource is in the configuration while a root
//!   reaches it. What a root newly reaches is subscribed at once; what none reaches any
//!   more is unsubscribed after [`DepsConfig::unsubscribe_grace`], so a route that flips
//!   between clusters does not churn subscriptions (a name reached again within the grace
//!   is kept). Only names the manager subscribed are unsubscribed. Aggregate cycles never
//!   keep themselves alive: a cluster component that only its own members reach is
//!   dropped as a whole.
//! - **Complete.** A [`Snapshot`] is emitted only when every resource the roots reach is
//!   held or known not to be usable (does not exist, expired, rejected with nothing held,
//!   a server error with nothing held, unreadable references), and (Envoy's shape) the
//!   first LDS and CDS responses have been handled; then after every input that changes
//!   the configuration while it stays complete. A resource still waited for holds every
//!   snapshot back (A74: "the XdsClient ... will not deliver a config until all resources
//!   are obtained"); the client's does-not-exist timer bounds the wait.
//! - **Errors propagate to whoever needs them** (gRPC A74 and A88): a held resource stays
//!   in use whatever the server says of it later (an ambient error, a NACKed update); a
//!   failure of the listener, its route configuration, a scope, a virtual host or a
//!   filter's ECDS configuration fails the listener
//!   ([`ListenerConfig::status`]); a failure of a cluster, its endpoints or its secrets
//!   fails that cluster only ([`ClusterConfig::leaves`]). With a wildcard type, a name
//!   absent from its full state does not exist.
//! - **Aggregate clusters** (gRPC A37): resolved depth-first in priority order into leaf
//!   clusters, each once; a cycle, a depth over [`MAX_AGGREGATE_DEPTH`] or no usable leaf
//!   is a failure of the aggregate cluster; an unusable member is left out.
//! - **Deterministic**: commands come sorted by type (make-before-break order) then name;
//!   snapshots list keys sorted.

mod config;
mod graph;
mod members;

use alloc::collections::{BTreeSet, VecDeque};
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

use config::followed;
pub use config::{
    ClusterConfig, Failure, ListenerConfig, Resolved, ResourceKey, Snapshot, MAX_AGGREGATE_DEPTH,
};
use graph::{Graph, Held, State};
use members::keys_of;

use super::{Change, ChangeBatch, Client, ClientError, ClientEvent, RemovalReason};
use crate::name::{XdstpName, XDSTP_SCHEME};
use crate::text::SharedStr;
use crate::time::Instant;
use crate::types::{ads_order, CATALOG, CLUSTER, LISTENER, SCOPED_ROUTE};
use bytes::Bytes;

/// How a [`DependencyManager`] behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DepsConfig {
    /// How long a name no root reaches stays subscribed (a route that flips back within it
    /// does not churn). Default 30 s; zero unsubscribes at once.
    pub unsubscribe_grace: Duration,
}

impl Default for DepsConfig {
    fn default() -> DepsConfig {
        DepsConfig {
            unsubscribe_grace: Duration::from_secs(30),
        }
    }
}

/// A change of subscriptions for the client that carries `type_url`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Subscribe to these names (sorted, never empty).
    Subscribe {
        /// The type URL.
        type_url: &'static str,
        /// The names.
        names: Vec<String>,
    },
    /// Subscribe to every resource of the type (legacy wildcard; LDS and CDS).
    SubscribeAll {
        /// The type URL.
        type_url: &'static str,
    },
    /// Unsubscribe from these names (sorted, never empty).
    Unsubscribe {
        /// The type URL.
        type_url: &'static str,
        /// The names.
        names: Vec<String>,
    },
}

impl Command {
    /// The type URL the command is for.
    pub fn type_url(&self) -> &'static str {
        match self {
            Command::Subscribe { type_url, .. }
            | Command::SubscribeAll { type_url }
            | Command::Unsubscribe { type_url, .. } => type_url,
        }
    }

    /// Gives the command to `client` (the one carrying its type).
    pub fn apply_to(&self, client: &mut Client) -> Result<(), ClientError> {
        match self {
            Command::Subscribe { type_url, names } => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.subscribe(type_url, &names)
            }
            Command::SubscribeAll { type_url } => client.subscribe(type_url, &[]),
            Command::Unsubscribe { type_url, names } => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.unsubscribe(type_url, &names)
            }
        }
    }
}

/// Where a resource stands for the manager, in [`DependencyManager::dump`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DepState {
    /// Not received yet.
    Waiting,
    /// Held, at this version.
    Held(crate::text::SharedStr),
    /// Cannot be used.
    Failed(Failure),
}

/// One resource the manager knows of: what it is waiting for, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DepsStatus {
    /// The resource.
    pub key: ResourceKey,
    /// Where it stands.
    pub state: DepState,
    /// A root: a watched listener, or (Envoy's shape) any listener or cluster.
    pub root: bool,
    /// Whether a root reaches it.
    pub live: bool,
    /// The resources in the configuration that reference it (why it is needed), sorted.
    pub needed_by: Vec<ResourceKey>,
    /// When its name will be unsubscribed, if no root reaches it any more.
    pub unsubscribe_at: Option<Instant>,
}

/// Follows references from roots to a complete configuration. See the
/// [module docs](self).
///
/// # Method kinds
///
/// - **inputs**: [`DependencyManager::handle_event`] (every event of the client, in
///   order) and [`DependencyManager::handle_timeout`];
/// - **commands**: [`DependencyManager::watch_listener`], [`DependencyManager::unwatch_listener`],
///   [`DependencyManager::watch_all`];
/// - **outputs**: after every input or command, drain [`DependencyManager::poll_command`]
///   (give each to the client), then [`DependencyManager::poll_snapshot`], then read
///   [`DependencyManager::poll_timeout`];
/// - **reads**: [`DependencyManager::config`], [`DependencyManager::dump`].
#[derive(Clone, Debug)]
pub struct DependencyManager {
    config: DepsConfig,
    /// Envoy's shape: LDS and CDS are wildcards and their resources are roots.
    wildcard: bool,
    graph: Graph,
    /// Wildcard types whose first response was not handled yet.
    unready: BTreeSet<&'static str>,
    /// Unsubscriptions due, by time.
    drops: BTreeSet<(Instant, ResourceKey)>,
    commands: VecDeque<Command>,
    snapshots: VecDeque<Snapshot>,
    generation: u64,
    last_now: Instant,
}

/// The type URL of the catalog a followed type has, as a `'static` string.
fn static_type(type_url: &str) -> Option<&'static str> {
    CATALOG
        .iter()
        .map(|t| t.type_url)
        .find(|t| *t == type_url)
        .filter(|t| followed(t))
}

fn canonical(name: &str) -> Result<String, ClientError> {
    if name.is_empty() {
        return Err(ClientError::EmptyName);
    }
    if !name.starts_with(XDSTP_SCHEME) {
        return Ok(name.into());
    }
    XdstpName::parse(name)
        .map(|n| n.canonical())
        .map_err(ClientError::MalformedXdstpName)
}

impl DependencyManager {
    /// A manager with no roots.
    pub fn new(config: DepsConfig) -> DependencyManager {
        DependencyManager {
            config,
            wildcard: false,
            graph: Graph::default(),
            unready: BTreeSet::new(),
            drops: BTreeSet::new(),
            commands: VecDeque::new(),
            snapshots: VecDeque::new(),
            generation: 0,
            last_now: Instant::ZERO,
        }
    }

    /// Watches a listener (gRPC's shape): it becomes a root, subscribed by name.
    pub fn watch_listener(&mut self, now: Instant, name: &str) -> Result<(), ClientError> {
        let key = ResourceKey::new(LISTENER.type_url, canonical(name)?);
        self.last_now = self.last_now.max(now);
        self.graph.set_root(&key, true);
        self.settle();
        Ok(())
    }

    /// Stops watching a listener: what only it reached leaves the configuration (and is
    /// unsubscribed after the grace).
    pub fn unwatch_listener(&mut self, now: Instant, name: &str) -> Result<(), ClientError> {
        let key = ResourceKey::new(LISTENER.type_url, canonical(name)?);
        self.last_now = self.last_now.max(now);
        self.graph.set_root(&key, false);
        self.settle();
        Ok(())
    }

    /// Envoy's shape: subscribes to every listener and every cluster (legacy wildcards);
    /// each one received is a root. Call once.
    pub fn watch_all(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        if self.wildcard {
            return;
        }
        self.wildcard = true;
        for type_url in [CLUSTER.type_url, LISTENER.type_url] {
            self.unready.insert(type_url);
            self.commands.push_back(Command::SubscribeAll { type_url });
        }
        self.settle();
    }

    /// Whether a wildcard covers `type_url`.
    fn covered(&self, type_url: &str) -> bool {
        self.wildcard && (type_url == LISTENER.type_url || type_url == CLUSTER.type_url)
    }

    /// Takes the changes of a [`ClientEvent::Changed`] (the client's
    /// [`EventShape::Batched`](super::EventShape::Batched)), reading each body from
    /// `client`'s cache; call it where the event is drained, before the next input.
    pub fn handle_changes(
        &mut self,
        now: Instant,
        client: &Client,
        type_url: &str,
        batch: &ChangeBatch,
    ) {
        self.last_now = self.last_now.max(now);
        for view in client.changes(type_url, batch) {
            match (view.change, view.resource) {
                (Change::Upserted, Some(held)) => self.upserted(
                    type_url,
                    view.name,
                    held.version_shared(),
                    held.body_bytes(),
                ),
                // Changed again since: a later batch says how.
                (Change::Upserted, None) => {}
                (Change::Removed(reason), _) => self.removed(type_url, view.name, reason),
                (Change::DoesNotExist, _) => self.does_not_exist(type_url, view.name),
            }
        }
        self.settle();
    }

    fn upserted(&mut self, type_url: &str, name: &str, version: SharedStr, body: Bytes) {
        let Some(key) = self.tracked(type_url, name) else {
            return;
        };
        let held = match crate::refs::references(key.type_url, &body) {
            Ok(refs) => {
                let own_refs = keys_of(&refs);
                let members = if refs.vhds {
                    self.graph.members.get(&key)
                } else {
                    None
                };
                Held {
                    version,
                    body,
                    refs: members::with_members(&own_refs, members),
                    own_refs,
                    aggregate: refs.aggregate,
                    vhds: refs.vhds,
                    malformed: None,
                }
            }
            Err(error) => Held {
                version,
                body,
                refs: Vec::new(),
                own_refs: Vec::new(),
                aggregate: None,
                vhds: false,
                malformed: Some(Failure::Malformed(error)),
            },
        };
        self.graph.set_state(&key, State::Present(held));
        if let Some(owner) = self.owner_of(key.type_url, &key.name) {
            self.add_member(&owner, &key);
        }
        if self.covered(key.type_url) {
            self.graph.set_root(&key, true);
        }
    }

    fn removed(&mut self, type_url: &str, name: &str, reason: RemovalReason) {
        let Some(key) = self.tracked(type_url, name) else {
            return;
        };
        if let Some(owner) = self.owner_of(key.type_url, &key.name) {
            return self.drop_member(&owner, &key);
        }
        match reason {
            RemovalReason::Unsubscribed => self.graph.forget(&key),
            RemovalReason::ServerRemoved | RemovalReason::AbsentFromResponse => {
                self.gone(&key, Failure::DoesNotExist(key.clone()))
            }
            RemovalReason::Expired => self.gone(&key, Failure::Expired(key.clone())),
        }
    }

    fn does_not_exist(&mut self, type_url: &str, name: &str) {
        if let Some(key) = self.tracked(type_url, name) {
            if let Some(owner) = self.owner_of(key.type_url, &key.name) {
                return self.drop_member(&owner, &key);
            }
            self.gone(&key, Failure::DoesNotExist(key.clone()));
        }
    }

    /// Takes one event of the client (every event, in the order the client emitted them;
    /// those about other types or names are ignored).
    pub fn handle_event(&mut self, now: Instant, event: &ClientEvent) {
        self.last_now = self.last_now.max(now);
        match event {
            ClientEvent::Upserted {
                type_url,
                name,
                version,
                body,
                ..
            } => self.upserted(type_url, name, version.clone(), body.clone()),
            ClientEvent::Removed {
                type_url,
                name,
                reason,
            } => self.removed(type_url, name, *reason),
            ClientEvent::DoesNotExist { type_url, name } => self.does_not_exist(type_url, name),
            // A batch carries no bodies: `handle_changes` reads them from the client.
            ClientEvent::Changed { .. } => {}
            ClientEvent::ResourceError {
                type_url,
                name,
                code,
                message,
            } => {
                if let Some(key) = self.tracked(type_url, name) {
                    if !self.held(&key) {
                        let failure = Failure::ServerError {
                            key: key.clone(),
                            code: *code,
                            message: message.clone(),
                        };
                        self.graph.set_state(&key, State::Failed(failure));
                    }
                }
            }
            ClientEvent::Nacked {
                type_url,
                rejected,
                error,
                ..
            } => {
                for name in rejected {
                    if let Some(key) = self.tracked(type_url, name) {
                        if !self.held(&key) {
                            let failure = Failure::Rejected {
                                key: key.clone(),
                                error: error.clone(),
                            };
                            self.graph.set_state(&key, State::Failed(failure));
                        }
                    }
                }
            }
            ClientEvent::Ready { type_url } => {
                if let Some(type_url) = static_type(type_url) {
                    self.unready.remove(type_url);
                    if type_url == SCOPED_ROUTE.type_url {
                        self.scopes_ready();
                    }
                }
            }
            // A deletion the client ignored (gRPC A53) leaves the body held: nothing changes.
            ClientEvent::Acked { .. }
            | ClientEvent::ValidationNeeded { .. }
            | ClientEvent::DeletionIgnored { .. }
            | ClientEvent::Ignored { .. } => {}
        }
        self.settle();
    }

    /// The graph key of an event's resource, when the manager follows it: a name it knows,
    /// any listener or cluster under a wildcard, or a member of a set it follows (an SRDS
    /// scope, a VHDS virtual host).
    fn tracked(&self, type_url: &str, name: &str) -> Option<ResourceKey> {
        let type_url = static_type(type_url)?;
        let key = ResourceKey::new(type_url, name);
        (self.graph.nodes.contains_key(&key)
            || self.covered(type_url)
            || self.owner_of(type_url, name).is_some())
        .then_some(key)
    }

    fn held(&self, key: &ResourceKey) -> bool {
        self.graph
            .nodes
            .get(key)
            .is_some_and(|n| matches!(n.state, Some(State::Present(_))))
    }

    /// A resource that went away: under a wildcard it is no root any more.
    fn gone(&mut self, key: &ResourceKey, failure: Failure) {
        self.graph.set_state(key, State::Failed(failure));
        if self.covered(key.type_url) {
            self.graph.set_root(key, false);
            self.graph.forget(key);
        }
    }

    /// Unsubscribes the names whose grace has run out.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.last_now = self.last_now.max(now);
        let mut due: Vec<ResourceKey> = Vec::new();
        while let Some((at, key)) = self.drops.first().cloned() {
            if at > now {
                break;
            }
            self.drops.pop_first();
            let Some(node) = self.graph.nodes.get_mut(&key) else {
                continue;
            };
            if node.live || node.drop_at != Some(at) || !node.subscribed {
                continue;
            }
            node.subscribed = false;
            node.drop_at = None;
            due.push(key);
        }
        for key in &due {
            self.graph.forget(key);
        }
        self.queue(due, false);
        self.settle();
    }

    /// Turns what the last change did to the graph into commands and, when the
    /// configuration is complete, a snapshot.
    fn settle(&mut self) {
        let now = self.last_now;
        let became_live = core::mem::take(&mut self.graph.became_live);
        let died = core::mem::take(&mut self.graph.died);
        let mut subscribe = Vec::new();
        for key in became_live {
            if self.covered(key.type_url) || members::is_member(&key) {
                // A wildcard brings it, or its absence from the full state says it does
                // not exist (below); a member comes with its set or on demand.
                continue;
            }
            let Some(node) = self.graph.nodes.get_mut(&key) else {
                continue;
            };
            if node.live && !node.subscribed {
                node.subscribed = true;
                subscribe.push(key);
            }
        }
        for key in died {
            let Some(node) = self.graph.nodes.get_mut(&key) else {
                continue;
            };
            if node.live || !node.subscribed || node.drop_at.is_some() {
                continue;
            }
            let at = now.saturating_add(self.config.unsubscribe_grace);
            node.drop_at = Some(at);
            self.drops.insert((at, key));
        }
        if self.wildcard && !self.unready.is_empty() {
            // Until a wildcard's first response, referenced names of it are not judged.
        } else if self.wildcard {
            let absent: Vec<ResourceKey> = self
                .graph
                .waiting
                .iter()
                .filter(|k| self.covered(k.type_url))
                .cloned()
                .collect();
            for key in absent {
                let failure = Failure::DoesNotExist(key.clone());
                self.graph.set_state(&key, State::Failed(failure));
            }
        }
        self.queue(subscribe, true);
        if self.config.unsubscribe_grace.is_zero() && !self.drops.is_empty() {
            self.handle_timeout(now);
            return;
        }
        let complete = self.graph.waiting.is_empty() && self.unready.is_empty();
        if complete && !self.graph.changed.is_empty() {
            self.generation += 1;
            let changed: Vec<ResourceKey> = core::mem::take(&mut self.graph.changed)
                .into_iter()
                .collect();
            let failed = self
                .graph
                .failed
                .iter()
                .filter_map(|k| {
                    let failure = self.graph.nodes.get(k)?.failure()?.clone();
                    Some((k.clone(), failure))
                })
                .collect();
            self.snapshots.push_back(Snapshot {
                generation: self.generation,
                changed,
                failed,
            });
        }
    }

    /// Queues one command per type for `keys`, sorted.
    fn queue(&mut self, mut keys: Vec<ResourceKey>, subscribe: bool) {
        keys.sort_by(|a, b| ads_order(a.type_url, b.type_url).then_with(|| a.name.cmp(&b.name)));
        let mut current: Option<(&'static str, Vec<String>)> = None;
        for key in keys {
            match &mut current {
                Some((type_url, names)) if *type_url == key.type_url => names.push(key.name),
                _ => {
                    if let Some((type_url, names)) = current.take() {
                        self.commands.push_back(command(type_url, names, subscribe));
                    }
                    current = Some((key.type_url, alloc::vec![key.name]));
                }
            }
        }
        if let Some((type_url, names)) = current {
            self.commands.push_back(command(type_url, names, subscribe));
        }
    }

    /// The next subscription change for the client of its type.
    /// Call after every input and command, until `None`.
    pub fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    /// The next complete configuration, if one was reached.
    /// Call after draining [`DependencyManager::poll_command`], until `None`.
    pub fn poll_snapshot(&mut self) -> Option<Snapshot> {
        self.snapshots.pop_front()
    }

    /// When to call [`DependencyManager::handle_timeout`]: the last `now` while output is
    /// queued, else the earliest unsubscription due, else `None`.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.commands.is_empty() || !self.snapshots.is_empty() {
            return Some(self.last_now);
        }
        self.drops.first().map(|(at, _)| *at)
    }

    /// The configuration listener `name` resolves to, as things stand (complete after a
    /// snapshot; before one, what is missing is [`Failure::Waiting`]). `None` when the
    /// manager knows no such listener.
    pub fn config(&self, name: &str) -> Option<ListenerConfig> {
        let key = ResourceKey::new(LISTENER.type_url, canonical(name).ok()?);
        self.graph.nodes.get(&key)?;
        Some(self.graph.resolve(&key))
    }

    /// The roots: watched listeners, or (Envoy's shape) every listener and cluster held.
    pub fn roots(&self) -> Vec<ResourceKey> {
        self.graph
            .nodes
            .iter()
            .filter(|(_, n)| n.root)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Every resource the manager knows of, sorted: its state, whether the configuration
    /// uses it, and what needs it.
    pub fn dump(&self) -> Vec<DepsStatus> {
        self.graph
            .nodes
            .iter()
            .map(|(key, node)| DepsStatus {
                key: key.clone(),
                state: match &node.state {
                    None => DepState::Waiting,
                    Some(State::Present(held)) => match &held.malformed {
                        Some(failure) => DepState::Failed(failure.clone()),
                        None => DepState::Held(held.version.clone()),
                    },
                    Some(State::Failed(failure)) => DepState::Failed(failure.clone()),
                },
                root: node.root,
                live: node.live,
                needed_by: node.referrers.iter().cloned().collect(),
                unsubscribe_at: node.drop_at,
            })
            .collect()
    }

    /// The resources the configuration waits for, sorted, with what needs each.
    pub fn waiting(&self) -> Vec<(ResourceKey, Vec<ResourceKey>)> {
        let mut out: Vec<(ResourceKey, Vec<ResourceKey>)> = self
            .graph
            .waiting
            .iter()
            .map(|k| {
                let needed_by = self
                    .graph
                    .nodes
                    .get(k)
                    .map(|n| n.referrers.iter().cloned().collect())
                    .unwrap_or_default();
                (k.clone(), needed_by)
            })
            .collect();
        for type_url in &self.unready {
            out.push((ResourceKey::new(type_url, "*"), Vec::new()));
        }
        out
    }
}

fn command(type_url: &'static str, names: Vec<String>, subscribe: bool) -> Command {
    if subscribe {
        Command::Subscribe { type_url, names }
    } else {
        Command::Unsubscribe { type_url, names }
    }
}

#[cfg(test)]
mod tests;
