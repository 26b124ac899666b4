//! The dependency managers the pool runs for configuration watches
//! ([`ConfigWatch`](crate::client::ConfigWatch)): the core's
//! [`DependencyManager`] (gRPC A74) fed what the watchers see, its subscriptions given to
//! the clients beside the watches', its complete configurations handed to the watchers.
//!
//! # Decisions
//!
//! - **A manager sees what the watchers see**: each change the view takes, as the core
//!   event that made it, in the order the clients emitted them. So the fallback rules
//!   (gRPC A71) apply to it too: a fallback server never overrides or deletes what a
//!   higher one delivered, and a reconnect or a fallback changes no configuration by
//!   itself. A name the view already holds is handed over when the manager subscribes to
//!   it, since no client will say it again.
//! - **A second source of interest**: a name a manager subscribes counts as one more watch
//!   of it, so a name wanted by a watch and a manager stays subscribed until neither wants
//!   it; the manager's grace ([`DepsConfig::unsubscribe_grace`]) runs on the pool's clock.
//! - **Two managers, one per shape.** gRPC's (listeners by name) always; Envoy's (every
//!   listener and cluster through the legacy wildcards, A74's and Envoy's shape) while a
//!   watch of every listener lives: the core's manager cannot leave that shape, so it is
//!   dropped with its last watcher, and its subscriptions with it.
//! - **Delivery**: after each snapshot (the configuration is complete) every watched
//!   listener is resolved and delivered to its watchers when it differs from the one
//!   delivered before; a listener Envoy's shape no longer has is delivered as not existing.
//! - **A reference to an authority the bootstrap does not list** (gRPC A47) is an error of
//!   that resource, as gRPC's client reports a watch on one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use xds_sansio::client::deps::{
    Command, DependencyManager, DepsConfig, DepsStatus, Failure, ListenerConfig, ResourceKey,
};
use xds_sansio::client::{ClientEvent, SharedStr, WILDCARD};
use xds_sansio::time::Instant;
use xds_sansio::types::LISTENER;

use super::{authority_of, view_event, Key, Pool};
use crate::client::config_watch::ConfigEvent;
use crate::client::watch::{Sink, WatchError};

/// `google.rpc.Code.FAILED_PRECONDITION`: a name whose authority the bootstrap lacks.
const FAILED_PRECONDITION: i32 = 9;

/// One dependency manager and what it asked of the pool.
pub(super) struct Deps {
    manager: DependencyManager,
    /// What it subscribed: (authority, type, name or `*`).
    subscribed: BTreeSet<(usize, SharedStr, SharedStr)>,
    /// Listeners watched by name (gRPC's shape) -> how many watches.
    listeners: BTreeMap<String, usize>,
    /// The configuration last delivered, per listener.
    delivered: BTreeMap<String, ListenerConfig>,
}

impl Deps {
    pub(super) fn new(config: DepsConfig) -> Deps {
        Deps {
            manager: DependencyManager::new(config),
            subscribed: BTreeSet::new(),
            listeners: BTreeMap::new(),
            delivered: BTreeMap::new(),
        }
    }
}

/// A configuration watch.
pub(super) struct ConfigWatchEntry {
    /// The listener; `None`: every listener (Envoy's shape).
    listener: Option<String>,
    pub(super) sink: Arc<Sink<ConfigEvent>>,
}

#[derive(Clone, Copy)]
enum Shape {
    ByName,
    All,
}

impl Pool {
    fn deps_of(&mut self, shape: Shape) -> Option<&mut Deps> {
        match shape {
            Shape::ByName => Some(&mut self.deps),
            Shape::All => self.all_deps.as_mut(),
        }
    }

    /// Adds a configuration watch of `listener` (canonical, checked by
    /// [`check_watch`](super::check_watch)) or of every listener; its sink gets the
    /// configuration delivered already, if any.
    pub(crate) fn watch_config(
        &mut self,
        now: Instant,
        id: u64,
        listener: Option<SharedStr>,
        sink: Arc<Sink<ConfigEvent>>,
    ) {
        self.last_now = self.last_now.max(now);
        let now = self.last_now;
        match &listener {
            Some(name) => {
                let deps = &mut self.deps;
                let count = deps.listeners.entry(name.to_string()).or_insert(0);
                *count += 1;
                if *count == 1 {
                    if let Err(error) = deps.manager.watch_listener(now, name) {
                        tracing::warn!(%name, %error, "listener refused by the dependency manager");
                        deps.listeners.remove(name.as_str());
                        sink.close();
                        return;
                    }
                } else if let Some(config) = deps.delivered.get(name.as_str()) {
                    sink.push(ConfigEvent::Changed(config.clone()));
                }
            }
            None => {
                let config = self.options.deps;
                let deps = self.all_deps.get_or_insert_with(|| {
                    let mut deps = Deps::new(config);
                    deps.manager.watch_all(now);
                    deps
                });
                for config in deps.delivered.values() {
                    sink.push(ConfigEvent::Changed(config.clone()));
                }
            }
        }
        self.config_watches.insert(
            id,
            ConfigWatchEntry {
                listener: listener.map(|n| n.to_string()),
                sink,
            },
        );
        self.flush();
    }

    /// Removes configuration watch `id`, if it is one.
    pub(super) fn unwatch_config(&mut self, now: Instant, id: u64) -> bool {
        let Some(w) = self.config_watches.remove(&id) else {
            return false;
        };
        w.sink.close();
        match w.listener {
            Some(name) => {
                let last = self.deps.listeners.get_mut(&name).is_some_and(|count| {
                    *count -= 1;
                    *count == 0
                });
                if last {
                    self.deps.listeners.remove(&name);
                    self.deps.delivered.remove(&name);
                    // Accepted by `watch_listener` before, so accepted now.
                    let _ = self.deps.manager.unwatch_listener(now, &name);
                }
            }
            None if !self.config_watches.values().any(|w| w.listener.is_none()) => {
                if let Some(deps) = self.all_deps.take() {
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
            None => {}
        }
        self.flush();
        true
    }

    /// Gives a change the view took to the managers.
    pub(super) fn deps_event(&mut self, event: &ClientEvent) {
        let now = self.last_now;
        self.deps.manager.handle_event(now, event);
        if let Some(deps) = &mut self.all_deps {
            deps.manager.handle_event(now, event);
        }
    }

    /// The managers' next deadline (a name whose grace runs out).
    pub(super) fn deps_poll_timeout(&self) -> impl Iterator<Item = Instant> {
        let all = self
            .all_deps
            .as_ref()
            .and_then(|d| d.manager.poll_timeout());
        [self.deps.manager.poll_timeout(), all]
            .into_iter()
            .flatten()
    }

    pub(super) fn deps_timeout(&mut self, now: Instant) {
        for deps in [Some(&mut self.deps), self.all_deps.as_mut()]
            .into_iter()
            .flatten()
        {
            if deps.manager.poll_timeout().is_some_and(|t| t <= now) {
                deps.manager.handle_timeout(now);
            }
        }
    }

    /// Turns the managers' commands into interest (and hands them what the view holds of
    /// the names they subscribe); whether there were any.
    pub(super) fn apply_deps_commands(&mut self) -> bool {
        let mut any = false;
        let mut dirty = BTreeSet::new();
        for shape in [Shape::ByName, Shape::All] {
            while let Some(deps) = self.deps_of(shape) {
                let commands: Vec<Command> =
                    std::iter::from_fn(|| deps.manager.poll_command()).collect();
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
                                self.deps_subscribe(shape, type_url, name, &mut dirty, &mut feed);
                            }
                        }
                        Command::SubscribeAll { type_url } => {
                            let name = SharedStr::from_static(WILDCARD);
                            self.deps_subscribe(shape, type_url, name, &mut dirty, &mut feed);
                        }
                        Command::Unsubscribe { type_url, names } => {
                            for name in names {
                                let name = SharedStr::from(name);
                                self.deps_unsubscribe(shape, type_url, name, &mut dirty);
                            }
                        }
                    }
                }
                let now = self.last_now;
                if let Some(deps) = self.deps_of(shape) {
                    for event in &feed {
                        deps.manager.handle_event(now, event);
                    }
                }
            }
        }
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
        shape: Shape,
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
        let Some(deps) = self.deps_of(shape) else {
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
        shape: Shape,
        type_url: &'static str,
        name: SharedStr,
        dirty: &mut BTreeSet<usize>,
    ) {
        let type_url = SharedStr::from_static(type_url);
        let Some(a) = self.authority_index_of(&name) else {
            return;
        };
        let Some(deps) = self.deps_of(shape) else {
            return;
        };
        if deps.subscribed.remove(&(a, type_url.clone(), name.clone()))
            && self.remove_interest(a, &type_url, &name)
        {
            dirty.insert(a);
        }
    }

    /// What the view holds already of `name` (or, for `*`, of the type, and whether the
    /// wildcard was answered), as the events that put it there.
    fn catch_up(&self, a: usize, type_url: &SharedStr, name: &SharedStr) -> Vec<ClientEvent> {
        let Some(auth) = self.authorities.get(a) else {
            return Vec::new();
        };
        if name.as_str() != WILDCARD {
            let key = (type_url.clone(), name.clone());
            return auth
                .view
                .get(&key)
                .map(|e| view_event(&key, &e.seen))
                .into_iter()
                .collect();
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

    /// Hands each configuration that changed since its last delivery to its watchers, when
    /// a manager reached a complete configuration.
    pub(super) fn deliver_configs(&mut self) {
        let Pool {
            deps,
            all_deps,
            config_watches,
            ..
        } = self;
        if std::iter::from_fn(|| deps.manager.poll_snapshot()).count() > 0 {
            let names: Vec<String> = deps.listeners.keys().cloned().collect();
            for name in names {
                let Some(config) = deps.manager.config(&name) else {
                    continue;
                };
                if deps.delivered.get(&name) == Some(&config) {
                    continue;
                }
                for w in config_watches.values() {
                    if w.listener.as_deref() == Some(name.as_str()) {
                        w.sink.push(ConfigEvent::Changed(config.clone()));
                    }
                }
                deps.delivered.insert(name, config);
            }
        }
        let Some(all) = all_deps else {
            return;
        };
        if std::iter::from_fn(|| all.manager.poll_snapshot()).count() == 0 {
            return;
        }
        let current: BTreeMap<String, ListenerConfig> = all
            .manager
            .roots()
            .into_iter()
            .filter(|k| k.type_url == LISTENER.type_url)
            .filter_map(|k| Some((k.name.clone(), all.manager.config(&k.name)?)))
            .collect();
        let gone: Vec<String> = all
            .delivered
            .keys()
            .filter(|n| !current.contains_key(*n))
            .cloned()
            .collect();
        let mut changed = Vec::new();
        for name in gone {
            all.delivered.remove(&name);
            let failure = Failure::DoesNotExist(ResourceKey::new(LISTENER.type_url, name.clone()));
            changed.push(ListenerConfig {
                name,
                status: Err(failure.clone()),
                resources: Vec::new(),
                clusters: Vec::new(),
                failed: vec![failure],
            });
        }
        for (name, config) in current {
            if all.delivered.get(&name) != Some(&config) {
                changed.push(config.clone());
                all.delivered.insert(name, config);
            }
        }
        changed.sort_by(|x, y| x.name.cmp(&y.name));
        for config in changed {
            for w in config_watches.values() {
                if w.listener.is_none() {
                    w.sink.push(ConfigEvent::Changed(config.clone()));
                }
            }
        }
    }

    /// An error about `name` of `type_url` (`None`: the whole type) that changes nothing:
    /// to the configuration watchers whose configuration holds it.
    pub(super) fn config_error(&self, type_url: &str, name: Option<&str>, error: &WatchError) {
        for w in self.config_watches.values() {
            let configs: Vec<&ListenerConfig> = match &w.listener {
                Some(l) => self.deps.delivered.get(l).into_iter().collect(),
                None => self
                    .all_deps
                    .iter()
                    .flat_map(|d| d.delivered.values())
                    .collect(),
            };
            let hit = configs
                .iter()
                .flat_map(|c| c.resources.iter())
                .find(|r| r.key.type_url == type_url && name.is_none_or(|n| r.key.name == n));
            if let Some(held) = hit {
                w.sink.push(ConfigEvent::Error {
                    resource: name.map(|_| held.key.clone()),
                    error: error.clone(),
                });
            }
        }
    }

    /// The management servers cannot be reached: every configuration watcher is told, and
    /// keeps its configuration.
    pub(super) fn config_unreachable(&self, error: &WatchError) {
        for w in self.config_watches.values() {
            w.sink.push(ConfigEvent::Error {
                resource: None,
                error: error.clone(),
            });
        }
    }

    /// Every resource the managers know of (gRPC's shape first, then Envoy's).
    pub(crate) fn deps_dump(&self) -> Vec<DepsStatus> {
        let mut out = self.deps.manager.dump();
        if let Some(all) = &self.all_deps {
            out.extend(all.manager.dump());
        }
        out
    }
}
