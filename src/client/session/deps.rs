//! The dependency managers the session runs for configuration watches
//! ([`Session::watch_config`]): the core's [`DependencyManager`] (gRPC A74) fed what the
//! watchers see, its subscriptions given to the clients beside the watches', its complete
//! configurations handed to the watchers.
//!
//! # Decisions
//!
//! - **A manager sees what the watchers see**: each change the view takes, as the core
//!   event that made it, in the order the clients emitted them. So the fallback rules
//!   (gRPC A71) apply to it too: a fallback server never overrides or deletes what a
//!   higher one delivered, and a reconnect or a fallback changes no configuration by
//!   itself. A name the view already holds is handed over when the manager subscribes to
//!   it, since no client will say it again; so is a name whose only version was rejected,
//!   or that the server reported an error for with nothing held (from the status of the
//!   client in use), so that a second manager does not wait for it forever.
//! - **A second source of interest**: a name a manager subscribes counts as one more watch
//!   of it, so a name wanted by a watch and a manager stays subscribed until neither wants
//!   it; the manager's grace ([`DepsConfig::unsubscribe_grace`]) runs on the session's clock.
//! - **One manager per listener watched by name** (as gRPC runs one
//!   `XdsDependencyManager` per channel, A74): a configuration is delivered when *its*
//!   resources are all there, so a listener still waiting for a resource never holds back
//!   another listener's updates. The watches of one listener share its manager; after the
//!   last one goes, the manager stays until its grace has unsubscribed everything it
//!   subscribed (a listener watched again meanwhile takes it back), then it is dropped.
//!   Envoy's shape (every listener and cluster through the legacy wildcards) has one
//!   manager of its own while a watch of every listener lives: the core's manager cannot
//!   leave that shape, so it is dropped with its last watcher, and its subscriptions with
//!   it. Each manager is handed every event; one ignores, at the cost of a map look-up,
//!   the names it does not follow.
//! - **Delivery**: after a manager's snapshot (its configuration is complete) its listener
//!   (Envoy's shape: every listener) is resolved and delivered to its watchers when it
//!   differs from the one delivered before; a listener Envoy's shape no longer has is
//!   delivered as not existing.
//! - **A reference to an authority the bootstrap does not list** (gRPC A47) is an error of
//!   that resource, as gRPC's client reports a watch on one.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use crate::client::deps::{
    Command, DependencyManager, DepsConfig, DepsStatus, Failure, ListenerConfig, ResourceKey,
};
use crate::client::{ClientEvent, ResourceState, SharedStr, WILDCARD};
use crate::time::Instant;
use crate::types::LISTENER;

use super::view::{view_event, Key};
use super::{authority_of, ConfigEvent, Session, SessionEvent, WatchError, WatchRefused};

/// `google.rpc.Code.FAILED_PRECONDITION`: a name whose authority the bootstrap lacks.
const FAILED_PRECONDITION: i32 = 9;

/// Which configuration watches a manager serves.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Root {
    /// The watches of one listener (canonical name): gRPC's shape.
    Listener(String),
    /// The watches of every listener: Envoy's shape.
    All,
}

/// One dependency manager and what it asked of the session.
pub(super) struct Deps {
    manager: DependencyManager,
    /// What it subscribed: (authority, type, name or `*`).
    subscribed: BTreeSet<(usize, SharedStr, SharedStr)>,
    /// How many configuration watches it serves.
    watchers: usize,
    /// The configuration last delivered, per listener.
    delivered: BTreeMap<String, ListenerConfig>,
}

impl Deps {
    fn new(config: DepsConfig) -> Deps {
        Deps {
            manager: DependencyManager::new(config),
            subscribed: BTreeSet::new(),
            watchers: 0,
            delivered: BTreeMap::new(),
        }
    }
}

impl Session {
    /// Adds configuration watch `id` of `listener` (`None`: every listener, Envoy's
    /// shape); its events start with the configurations delivered already, if any.
    pub fn watch_config(
        &mut self,
        now: Instant,
        id: u64,
        listener: Option<&str>,
    ) -> Result<(), WatchRefused> {
        let listener = match listener {
            Some(name) => Some(self.bootstrap.check_watch(LISTENER.type_url, Some(name))?.0),
            None => None,
        };
        if self.watches.contains_key(&id) || self.config_watches.contains_key(&id) {
            return Err(WatchRefused::DuplicateId(id));
        }
        self.advance(now);
        let now = self.last_now;
        let root = match &listener {
            Some(name) => Root::Listener(name.to_string()),
            None => Root::All,
        };
        let config = self.config.deps;
        let deps = self
            .managers
            .entry(root.clone())
            .or_insert_with(|| Deps::new(config));
        deps.watchers += 1;
        if deps.watchers == 1 {
            let started = match &root {
                Root::Listener(name) => deps.manager.watch_listener(now, name),
                Root::All => {
                    deps.manager.watch_all(now);
                    Ok(())
                }
            };
            if let Err(error) = started {
                deps.watchers -= 1;
                if deps.subscribed.is_empty() {
                    self.managers.remove(&root);
                }
                return Err(WatchRefused::Refused(error.to_string()));
            }
        }
        for config in deps.delivered.values() {
            self.events.push_back(SessionEvent::Config {
                id,
                event: ConfigEvent::Changed(config.clone()),
            });
        }
        self.config_watches.insert(id, root);
        self.flush();
        Ok(())
    }

    /// Removes configuration watch `id`, if it is one.
    pub(super) fn unwatch_config(&mut self, now: Instant, id: u64) -> bool {
        let Some(root) = self.config_watches.remove(&id) else {
            return false;
        };
        let last = self.managers.get_mut(&root).is_some_and(|deps| {
            deps.watchers = deps.watchers.saturating_sub(1);
            deps.watchers == 0
        });
        if last {
            match &root {
                Root::Listener(name) => {
                    if let Some(deps) = self.managers.get_mut(&root) {
                        deps.delivered.clear();
                        // Accepted by `watch_listener` before, so accepted now. What it
                        // reached is unsubscribed after the grace, then the manager goes.
                        let _ = deps.manager.unwatch_listener(now, name);
                    }
                }
                Root::All => {
                    if let Some(deps) = self.managers.remove(&Root::All) {
                        let mut dirty = BTreeSet::new();
                        for (a, type_url, name) in deps.subscribed {
                            if self.remove_interest(a, &type_url, &name) {
                                dirty.insert(a);
                            }
                        }
                        for a in dirty {
                            self.sync_authority(a);
                        }
                    }
                }
            }
        }
        self.flush();
        true
    }

    /// Every resource the managers know of: per manager (the listeners watched by name,
    /// by name, then Envoy's shape), sorted by key within each.
    pub fn deps_dump(&self) -> Vec<DepsStatus> {
        self.managers
            .values()
            .flat_map(|deps| deps.manager.dump())
            .collect()
    }
    /// Gives a change the view took to the managers.
    pub(super) fn deps_event(&mut self, event: &ClientEvent) {
        let now = self.last_now;
        for deps in self.managers.values_mut() {
            deps.manager.handle_event(now, event);
        }
    }

    /// The managers' next deadlines (names whose grace runs out).
    pub(super) fn deps_poll_timeout(&self) -> impl Iterator<Item = Instant> + '_ {
        self.managers
            .values()
            .filter_map(|deps| deps.manager.poll_timeout())
    }

    pub(super) fn deps_timeout(&mut self, now: Instant) {
        for deps in self.managers.values_mut() {
            if deps.manager.poll_timeout().is_some_and(|t| t <= now) {
                deps.manager.handle_timeout(now);
            }
        }
    }

    /// Turns the managers' commands into interest (and hands them what the view holds of
    /// the names they subscribe), and drops the managers no watch needs any more; whether
    /// there were any commands.
    pub(super) fn apply_deps_commands(&mut self) -> bool {
        let mut any = false;
        let mut dirty = BTreeSet::new();
        let roots: Vec<Root> = self.managers.keys().cloned().collect();
        for root in roots {
            while let Some(deps) = self.managers.get_mut(&root) {
                let commands: Vec<Command> =
                    core::iter::from_fn(|| deps.manager.poll_command()).collect();
                if commands.is_empty() {
                    break;
                }
                any = true;
                let mut feed = Vec::new();
                for command in commands {
                    match command {
                        Command::Subscribe { type_url, names } => {
                            for name in names {
                                let name = SharedStr::from(name);
                                self.deps_subscribe(&root, type_url, name, &mut dirty, &mut feed);
                            }
                        }
                        Command::SubscribeAll { type_url } => {
                            let name = SharedStr::from_static(WILDCARD);
                            self.deps_subscribe(&root, type_url, name, &mut dirty, &mut feed);
                        }
                        Command::Unsubscribe { type_url, names } => {
                            for name in names {
                                let name = SharedStr::from(name);
                                self.deps_unsubscribe(&root, type_url, name, &mut dirty);
                            }
                        }
                    }
                }
                let now = self.last_now;
                if let Some(deps) = self.managers.get_mut(&root) {
                    for event in &feed {
                        deps.manager.handle_event(now, event);
                    }
                }
            }
        }
        // A manager without watchers has unsubscribed everything once its grace ran out.
        self.managers
            .retain(|_, deps| deps.watchers > 0 || !deps.subscribed.is_empty());
        for a in dirty {
            self.sync_authority(a);
        }
        any
    }

    /// The authority a manager's name belongs to (the top-level one for a wildcard).
    fn authority_index_of(&self, name: &SharedStr) -> Option<usize> {
        let authority = if name.as_str() == WILDCARD {
            Some(String::new())
        } else {
            authority_of(name)
        };
        authority.and_then(|x| self.authority_index.get(&x).copied())
    }

    fn deps_subscribe(
        &mut self,
        root: &Root,
        type_url: &'static str,
        name: SharedStr,
        dirty: &mut BTreeSet<usize>,
        feed: &mut Vec<ClientEvent>,
    ) {
        let type_url = SharedStr::from_static(type_url);
        let Some(a) = self.authority_index_of(&name) else {
            let authority = authority_of(&name).unwrap_or_default();
            feed.push(ClientEvent::ResourceError {
                type_url,
                name,
                code: FAILED_PRECONDITION,
                message: format!("the bootstrap lists no authority {authority:?} (gRPC A47)"),
            });
            return;
        };
        let Some(deps) = self.managers.get_mut(root) else {
            return;
        };
        if !deps.subscribed.insert((a, type_url.clone(), name.clone())) {
            return;
        }
        if self.add_interest(a, &type_url, &name) {
            dirty.insert(a);
        }
        feed.extend(self.catch_up(a, &type_url, &name));
    }

    fn deps_unsubscribe(
        &mut self,
        root: &Root,
        type_url: &'static str,
        name: SharedStr,
        dirty: &mut BTreeSet<usize>,
    ) {
        let type_url = SharedStr::from_static(type_url);
        let Some(a) = self.authority_index_of(&name) else {
            return;
        };
        let Some(deps) = self.managers.get_mut(root) else {
            return;
        };
        if deps.subscribed.remove(&(a, type_url.clone(), name.clone()))
            && self.remove_interest(a, &type_url, &name)
        {
            dirty.insert(a);
        }
    }

    /// What the view holds already of `name` (or, for `*`, of the type, and whether the
    /// wildcard was answered), as the events that put it there; for a name the view lacks,
    /// a rejection or a server error the client in use holds for it with no body.
    fn catch_up(&self, a: usize, type_url: &SharedStr, name: &SharedStr) -> Vec<ClientEvent> {
        let Some(auth) = self.authorities.get(a) else {
            return Vec::new();
        };
        if name.as_str() != WILDCARD {
            let key = (type_url.clone(), name.clone());
            return match auth.view.get(&key) {
                Some(e) => alloc::vec![view_event(&key, &e.seen)],
                None => self.unusable_event(a, &key).into_iter().collect(),
            };
        }
        let mut keys: Vec<&Key> = auth.view.keys().filter(|(t, _)| t == type_url).collect();
        keys.sort();
        let mut out: Vec<ClientEvent> = keys
            .into_iter()
            .filter_map(|k| auth.view.get(k).map(|e| view_event(k, &e.seen)))
            .collect();
        if auth.answered.contains(type_url) {
            out.push(ClientEvent::Ready {
                type_url: type_url.clone(),
            });
        }
        out
    }

    /// Why `key` cannot be used, when the highest-priority client in use that knows it
    /// rejected its only version or holds a server error for it with no body, as the event
    /// that said so.
    fn unusable_event(&self, a: usize, key: &Key) -> Option<ClientEvent> {
        let auth = self.authorities.get(a)?;
        let status = auth
            .channels
            .iter()
            .take(auth.depth + 1)
            .filter_map(|&c| self.channels.get(c))
            .flat_map(|channel| channel.slots.iter())
            .find_map(|slot| slot.client.status(&key.0, &key.1))?;
        if status.version.is_some() {
            return None;
        }
        if let (ResourceState::Nacked, Some(rejection)) = (status.state, status.rejected) {
            return Some(ClientEvent::Nacked {
                type_url: key.0.clone(),
                version: rejection.version,
                nonce: SharedStr::default(),
                error: rejection.error,
                rejected: alloc::vec![key.1.clone()],
                defect: None,
            });
        }
        if let (ResourceState::ReceivedError | ResourceState::TimedOut, Some(error)) =
            (status.state, status.server_error)
        {
            return Some(ClientEvent::ResourceError {
                type_url: key.0.clone(),
                name: key.1.clone(),
                code: error.code,
                message: error.message,
            });
        }
        None
    }

    /// Hands each configuration that changed since its last delivery to its watchers, when
    /// a manager reached a complete configuration.
    pub(super) fn deliver_configs(&mut self) {
        let Session {
            managers,
            config_watches,
            events,
            ..
        } = self;
        for (root, deps) in managers.iter_mut() {
            if core::iter::from_fn(|| deps.manager.poll_snapshot()).count() == 0
                || deps.watchers == 0
            {
                continue;
            }
            let changed = match root {
                Root::Listener(name) => deps
                    .manager
                    .config(name)
                    .filter(|config| deps.delivered.get(name) != Some(config))
                    .map(|config| {
                        deps.delivered.insert(name.clone(), config.clone());
                        alloc::vec![config]
                    })
                    .unwrap_or_default(),
                Root::All => changed_listeners(deps),
            };
            for config in changed {
                for (id, _) in config_watches.iter().filter(|(_, r)| *r == root) {
                    events.push_back(SessionEvent::Config {
                        id: *id,
                        event: ConfigEvent::Changed(config.clone()),
                    });
                }
            }
        }
    }

    /// An error about `name` of `type_url` (`None`: the whole type) that changes nothing:
    /// to the configuration watchers whose configuration holds it.
    pub(super) fn config_error(&mut self, type_url: &str, name: Option<&str>, error: &WatchError) {
        let mut out = Vec::new();
        for (id, root) in &self.config_watches {
            let Some(deps) = self.managers.get(root) else {
                continue;
            };
            let hit = deps
                .delivered
                .values()
                .flat_map(|c| c.resources.iter())
                .find(|r| r.key.type_url == type_url && name.is_none_or(|n| r.key.name == n));
            if let Some(held) = hit {
                out.push(SessionEvent::Config {
                    id: *id,
                    event: ConfigEvent::Error {
                        resource: name.map(|_| held.key.clone()),
                        error: error.clone(),
                    },
                });
            }
        }
        self.events.extend(out);
    }

    /// The management servers of authority `a` cannot be reached: every configuration
    /// watcher whose manager subscribed something there is told, and keeps its
    /// configuration.
    pub(super) fn config_unreachable(&mut self, a: usize, error: &WatchError) {
        self.tell_configs_of(
            a,
            &ConfigEvent::Error {
                resource: None,
                error: error.clone(),
            },
        );
    }

    /// Authority `a`'s outage is over: `server` answered.
    pub(super) fn config_reachable(&mut self, a: usize, server: &str) {
        self.tell_configs_of(
            a,
            &ConfigEvent::Reachable {
                server: String::from(server),
            },
        );
    }

    /// Tells `event` to every configuration watch that reaches authority `a`.
    fn tell_configs_of(&mut self, a: usize, event: &ConfigEvent) {
        let mut out = Vec::new();
        for (id, root) in &self.config_watches {
            let concerned = self
                .managers
                .get(root)
                .is_some_and(|deps| deps.subscribed.iter().any(|(x, _, _)| *x == a));
            if concerned {
                out.push(SessionEvent::Config {
                    id: *id,
                    event: event.clone(),
                });
            }
        }
        self.events.extend(out);
    }
}

/// Envoy's shape: the listeners whose configuration changed since the last delivery (a
/// listener gone is delivered as not existing), sorted by name.
fn changed_listeners(deps: &mut Deps) -> Vec<ListenerConfig> {
    let current: BTreeMap<String, ListenerConfig> = deps
        .manager
        .roots()
        .into_iter()
        .filter(|k| k.type_url == LISTENER.type_url)
        .filter_map(|k| Some((k.name.clone(), deps.manager.config(&k.name)?)))
        .collect();
    let gone: Vec<String> = deps
        .delivered
        .keys()
        .filter(|n| !current.contains_key(*n))
        .cloned()
        .collect();
    let mut changed = Vec::new();
    for name in gone {
        deps.delivered.remove(&name);
        let failure = Failure::DoesNotExist(ResourceKey::new(LISTENER.type_url, name.clone()));
        changed.push(ListenerConfig {
            name,
            status: Err(failure.clone()),
            resources: Vec::new(),
            clusters: Vec::new(),
            failed: alloc::vec![failure],
        });
    }
    for (name, config) in current {
        if deps.delivered.get(&name) != Some(&config) {
            changed.push(config.clone());
            deps.delivered.insert(name, config);
        }
    }
    changed.sort_by(|x, y| x.name.cmp(&y.name));
    changed
}
