//! Consistency of a publication across types, and make-before-break plans.
//!
//! A listener names a route configuration (or a scope set over SRDS) and its filters'
//! ECDS configurations, a scope names a route configuration, a route configuration or a
//! VHDS virtual host names clusters, a cluster names its endpoints, its aggregate members
//! and its secrets ([`crate::refs`]). A publication is
//! *consistent* when every such name is present in the store as the publication leaves it
//! (go-control-plane's `Snapshot.Consistent()`, here across every referencing type). A
//! server that removes a cluster while a route still names it causes an outage (xDS
//! protocol, "Eventual consistency considerations": "routes are not warmed, i.e., the
//! management plane must ensure that clusters referenced by a route are in place").
//!
//! Decisions:
//! - **Which references are checked**: those into a type the store has published (or the
//!   publication publishes). A reference into a type this store never serves (secrets
//!   from the bootstrap, endpoints of another management server) is not this store's to
//!   check. SRDS scope-set names (`ScopedRoutes.name`) are not resources and are never
//!   checked: the scopes of a set are every SRDS resource, each checked as a referrer. A
//!   VHDS virtual host is named by nobody (clients ask for them on demand), so it is only
//!   a referrer; an ECDS filter configuration is checked like any name.
//! - **Cost**: [`ResourceStore::consistency_of`] reads the references of the resources the
//!   operations set, and, only when they remove something, of every published resource of
//!   a referring type ([`crate::refs::REFERRING`]; to find who still names what goes). A publication
//!   that only adds or changes costs what it changes. [`ResourceStore::consistency`]
//!   checks the whole store (`benches/README.md`).
//! - **Enforcement** ([`Consistency::Enforce`]): `apply` (and every method built on it)
//!   refuses an inconsistent publication with [`super::StoreError::Inconsistent`] and
//!   changes nothing. A body whose references cannot be read is refused too (a client
//!   would not get past it either).
//! - **Make-before-break** ([`ResourceStore::plan_make_before_break`]): the removals of
//!   resources that something published *now* still names are held for a second
//!   publication; apply the first, wait until every stream has sent it and the client has
//!   ACKed ([`super::ServerStream::is_settled`], [`super::StreamSet::is_settled`]), then
//!   apply the second. See the module docs of [`crate::server`] for what is guaranteed.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;

use super::resource_errors::TYPE_WIDE;
use super::store::{ResourceStore, StoreOp};
use crate::name::comparable;
use crate::refs::{references, RefError, REFERRING};
use crate::types::{CLUSTER, ENDPOINT, EXTENSION_CONFIG, ROUTE, SECRET};

/// The types a reference is checked into (resources named by name).
const CHECKED: [&str; 5] = [
    ROUTE.type_url,
    CLUSTER.type_url,
    ENDPOINT.type_url,
    SECRET.type_url,
    EXTENSION_CONFIG.type_url,
];

/// Whether a store checks its publications.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Consistency {
    /// Publications are not checked (the default; ask with
    /// [`ResourceStore::consistency_of`]).
    #[default]
    Off,
    /// An inconsistent publication is refused ([`super::StoreError::Inconsistent`]).
    Enforce,
}

/// A name that a published resource refers to and the publication lacks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dangling {
    /// The type URL of the resource that refers.
    pub from_type: String,
    /// Its name.
    pub from: String,
    /// The type URL referred to.
    pub to_type: &'static str,
    /// The name referred to.
    pub to: String,
    /// The Envoy field that holds the name.
    pub field: &'static str,
}

impl fmt::Display for Dangling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = |t: &str| -> String {
            String::from(crate::types::TypeInfo::of(t).short_name().unwrap_or(t))
        };
        write!(
            f,
            "{} {:?} names {} {:?} ({}), which is not published",
            short(&self.from_type),
            self.from,
            short(self.to_type),
            self.to,
            self.field
        )
    }
}

/// What a consistency check found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsistencyReport {
    /// References to names the publication lacks, sorted.
    pub dangling: Vec<Dangling>,
    /// Resources whose references could not be read.
    pub unreadable: Vec<RefError>,
}

impl ConsistencyReport {
    /// Whether nothing dangles and everything could be read.
    pub fn is_consistent(&self) -> bool {
        self.dangling.is_empty() && self.unreadable.is_empty()
    }
}

impl fmt::Display for ConsistencyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for line in self
            .dangling
            .iter()
            .map(|d| alloc::format!("{d}"))
            .chain(self.unreadable.iter().map(|e| alloc::format!("{e}")))
        {
            if !first {
                f.write_str("; ")?;
            }
            first = false;
            f.write_str(&line)?;
        }
        Ok(())
    }
}

/// A publication split in two ([`ResourceStore::plan_make_before_break`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwoPhase {
    /// Apply now: every set and publication, and the removals nothing published names.
    pub now: Vec<StoreOp>,
    /// Apply once every stream has sent `now` and its client has ACKed it: the removals
    /// of resources that something published before `now` names.
    pub later: Vec<StoreOp>,
}

/// The store as `ops` would leave it, for the names that matter here.
struct View<'a> {
    store: &'a ResourceStore,
    /// (type, canonical name) -> the body set, or `None` when removed.
    overlay: BTreeMap<(&'a str, String), Option<&'a Bytes>>,
    published: BTreeSet<&'a str>,
}

impl<'a> View<'a> {
    fn new(store: &'a ResourceStore, ops: &'a [StoreOp]) -> View<'a> {
        let mut overlay = BTreeMap::new();
        let mut published = BTreeSet::new();
        for op in ops {
            match op {
                StoreOp::Set { type_url, entry } => {
                    published.insert(type_url.as_str());
                    let name = String::from(comparable(&entry.name));
                    overlay.insert((type_url.as_str(), name), Some(&entry.body));
                }
                StoreOp::Remove { type_url, name } => {
                    overlay.insert((type_url.as_str(), String::from(comparable(name))), None);
                }
                StoreOp::Publish { type_url } => {
                    published.insert(type_url.as_str());
                }
                // An error takes the place of the body: what names it now dangles.
                StoreOp::SetError { type_url, name, .. } if name != TYPE_WIDE => {
                    published.insert(type_url.as_str());
                    overlay.insert((type_url.as_str(), String::from(comparable(name))), None);
                }
                StoreOp::SetError { type_url, .. } => {
                    published.insert(type_url.as_str());
                }
                StoreOp::ClearError { .. } => {}
            }
        }
        View {
            store,
            overlay,
            published,
        }
    }

    fn published(&self, type_url: &str) -> bool {
        self.published.contains(type_url) || self.store.is_published(type_url)
    }

    fn exists(&self, type_url: &str, name: &str) -> bool {
        if self.overlay.is_empty() {
            return self.store.get(type_url, name).is_some();
        }
        match self.overlay.get(&(type_url, String::from(name))) {
            Some(body) => body.is_some(),
            None => self.store.get(type_url, name).is_some(),
        }
    }

    /// Checks the references of one resource of the view.
    fn check(&self, type_url: &str, name: &str, body: &Bytes, report: &mut ConsistencyReport) {
        let refs = match references(type_url, body) {
            Ok(refs) => refs,
            Err(error) => {
                report.unreadable.push(error);
                return;
            }
        };
        for r in refs.iter() {
            if CHECKED.contains(&r.type_url)
                && self.published(r.type_url)
                && !self.exists(r.type_url, &r.name)
            {
                report.dangling.push(Dangling {
                    from_type: String::from(type_url),
                    from: String::from(name),
                    to_type: r.type_url,
                    to: String::from(r.name.as_str()),
                    field: r.field,
                });
            }
        }
    }

    /// Every referring resource of the view, with its body.
    fn referring<'s>(&'s self) -> impl Iterator<Item = (&'a str, &'s str, &'a Bytes)> + 's {
        let kept = REFERRING.into_iter().flat_map(move |t| {
            self.store
                .iter(t)
                .filter(move |r| {
                    self.overlay.is_empty()
                        || !self.overlay.contains_key(&(t, String::from(r.name())))
                })
                .map(move |r| (t, r.name(), r.body()))
        });
        let set = self
            .overlay
            .iter()
            .filter(|((t, _), body)| REFERRING.contains(t) && body.is_some())
            .filter_map(|((t, n), body)| Some((*t, n.as_str(), (*body)?)));
        kept.chain(set)
    }
}

impl ResourceStore {
    /// Checks the whole store: every name a published resource of a referring type refers
    /// to is published (in the types the store serves).
    pub fn consistency(&self) -> ConsistencyReport {
        let view = View::new(self, &[]);
        let mut report = ConsistencyReport::default();
        for (type_url, name, body) in view.referring() {
            view.check(type_url, name, body, &mut report);
        }
        finish(report)
    }

    /// Checks the store as `ops` would leave it, without changing anything: the
    /// references of what `ops` set, and, when `ops` remove something, whether anything
    /// left still names it. (Assumes the store itself is consistent, as it is under
    /// [`Consistency::Enforce`]; [`ResourceStore::consistency`] checks everything.)
    pub fn consistency_of(&self, ops: &[StoreOp]) -> ConsistencyReport {
        let view = View::new(self, ops);
        let mut report = ConsistencyReport::default();
        for ((type_url, name), body) in &view.overlay {
            if let Some(body) = body {
                view.check(type_url, name, body, &mut report);
            }
        }
        let removed: BTreeSet<(&str, &str)> = view
            .overlay
            .iter()
            .filter(|((t, n), body)| body.is_none() && self.get(t, n).is_some())
            .map(|((t, n), _)| (*t, n.as_str()))
            .collect();
        if !removed.is_empty() {
            for (type_url, name, body) in view.referring() {
                if view.overlay.contains_key(&(type_url, String::from(name))) {
                    continue; // checked above
                }
                let Ok(refs) = references(type_url, body) else {
                    continue;
                };
                for r in refs.iter() {
                    if CHECKED.contains(&r.type_url)
                        && removed.contains(&(r.type_url, r.name.as_str()))
                    {
                        report.dangling.push(Dangling {
                            from_type: String::from(type_url),
                            from: String::from(name),
                            to_type: r.type_url,
                            to: String::from(r.name.as_str()),
                            field: r.field,
                        });
                    }
                }
            }
        }
        finish(report)
    }

    /// Splits `ops` for make-before-break: a removal of a resource that something
    /// published now names goes to [`TwoPhase::later`] (clients may hold that referrer
    /// until they have the new version); everything else, in order, to [`TwoPhase::now`].
    /// If `ops` leave the store consistent, so does each phase.
    pub fn plan_make_before_break(&self, ops: Vec<StoreOp>) -> TwoPhase {
        let removes = ops
            .iter()
            .any(|op| matches!(op, StoreOp::Remove { .. } | StoreOp::SetError { .. }));
        let mut named: BTreeSet<(String, String)> = BTreeSet::new();
        if removes {
            for type_url in REFERRING {
                for resource in self.iter(type_url) {
                    if let Ok(refs) = references(type_url, resource.body()) {
                        named.extend(
                            refs.iter()
                                .filter(|r| CHECKED.contains(&r.type_url))
                                .map(|r| (String::from(r.type_url), String::from(r.name.as_str()))),
                        );
                    }
                }
            }
        }
        let mut plan = TwoPhase::default();
        for op in ops {
            let later = match &op {
                StoreOp::Remove { type_url, name } | StoreOp::SetError { type_url, name, .. } => {
                    named.contains(&(type_url.clone(), String::from(comparable(name))))
                }
                _ => false,
            };
            if later {
                plan.later.push(op);
            } else {
                plan.now.push(op);
            }
        }
        plan
    }
}

fn finish(mut report: ConsistencyReport) -> ConsistencyReport {
    report.dangling.sort();
    report.dangling.dedup();
    report
}
