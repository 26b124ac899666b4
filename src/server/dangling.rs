//! The check behind [`super::consistency`]'s decisions: what a publication would leave
//! dangling, and the make-before-break split, over any [`Published`] view of a store (the
//! store implements it, so this file never reads the store's insides).

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;

use super::consistency::{ConsistencyReport, Dangling};
use super::publication::StoreOp;
use super::resource_errors::TYPE_WIDE;
use crate::name::comparable;
use crate::refs::{references, Reference, REFERRING};
use crate::types::{CLUSTER, ENDPOINT, EXTENSION_CONFIG, ROUTE, SECRET};

/// The types a reference is checked into (resources named by name).
const CHECKED: [&str; 5] = [
    ROUTE.type_url,
    CLUSTER.type_url,
    ENDPOINT.type_url,
    SECRET.type_url,
    EXTENSION_CONFIG.type_url,
];

/// What the check reads of a store.
pub(crate) trait Published {
    /// Whether the type was published.
    fn is_served(&self, type_url: &str) -> bool;
    /// Whether a resource of the type holds the name (canonical form).
    fn has(&self, type_url: &str, name: &str) -> bool;
    /// The names and bodies of the type's resources.
    fn resources<'s>(
        &'s self,
        type_url: &'static str,
    ) -> impl Iterator<Item = (&'s str, &'s Bytes)> + 's;
}

/// A publication split in two ([`ResourceStore::plan_make_before_break`](super::ResourceStore::plan_make_before_break)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TwoPhase {
    /// Apply now: every set and publication, and the removals nothing published names.
    pub now: Vec<StoreOp>,
    /// Apply once every stream has sent `now` and its client has ACKed it: the removals
    /// of resources that something published before `now` names.
    pub later: Vec<StoreOp>,
}

/// The store as `ops` would leave it, for the names that matter here.
struct View<'a, S> {
    store: &'a S,
    /// (type, canonical name) -> the body set, or `None` when removed.
    overlay: BTreeMap<(&'a str, String), Option<&'a Bytes>>,
    published: BTreeSet<&'a str>,
}

impl<'a, S: Published> View<'a, S> {
    fn new(store: &'a S, ops: &'a [StoreOp]) -> View<'a, S> {
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
                StoreOp::ServeType { type_url } => {
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
        self.published.contains(type_url) || self.store.is_served(type_url)
    }

    fn exists(&self, type_url: &str, name: &str) -> bool {
        if self.overlay.is_empty() {
            return self.store.has(type_url, name);
        }
        match self.overlay.get(&(type_url, String::from(name))) {
            Some(body) => body.is_some(),
            None => self.store.has(type_url, name),
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
                report.dangling.push(dangling(type_url, name, r));
            }
        }
    }

    /// Every referring resource of the view, with its body.
    fn referring<'s>(&'s self) -> impl Iterator<Item = (&'a str, &'s str, &'a Bytes)> + 's {
        let kept = REFERRING.into_iter().flat_map(move |t| {
            self.store
                .resources(t)
                .filter(move |(name, _)| {
                    self.overlay.is_empty() || !self.overlay.contains_key(&(t, String::from(*name)))
                })
                .map(move |(name, body)| (t, name, body))
        });
        let set = self
            .overlay
            .iter()
            .filter(|((t, _), body)| REFERRING.contains(t) && body.is_some())
            .filter_map(|((t, n), body)| Some((*t, n.as_str(), (*body)?)));
        kept.chain(set)
    }
}

/// Every referring resource of the store, checked.
pub(crate) fn check_all<S: Published>(store: &S) -> ConsistencyReport {
    let view = View::new(store, &[]);
    let mut report = ConsistencyReport::default();
    for (type_url, name, body) in view.referring() {
        view.check(type_url, name, body, &mut report);
    }
    finish(report)
}

/// The store as `ops` would leave it, checked where `ops` change it.
pub(crate) fn check_ops<'a, S: Published>(store: &'a S, ops: &'a [StoreOp]) -> ConsistencyReport {
    let view = View::new(store, ops);
    let mut report = ConsistencyReport::default();
    for ((type_url, name), body) in &view.overlay {
        if let Some(body) = body {
            view.check(type_url, name, body, &mut report);
        }
    }
    let removed: BTreeSet<(&str, &str)> = view
        .overlay
        .iter()
        .filter(|((t, n), body)| body.is_none() && store.has(t, n))
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
                if CHECKED.contains(&r.type_url) && removed.contains(&(r.type_url, r.name.as_str()))
                {
                    report.dangling.push(dangling(type_url, name, r));
                }
            }
        }
    }
    finish(report)
}

/// `ops` split for make-before-break.
pub(crate) fn plan<S: Published>(store: &S, ops: Vec<StoreOp>) -> TwoPhase {
    let removes = ops
        .iter()
        .any(|op| matches!(op, StoreOp::Remove { .. } | StoreOp::SetError { .. }));
    let mut named: BTreeSet<(String, String)> = BTreeSet::new();
    if removes {
        for type_url in REFERRING {
            for (_, body) in store.resources(type_url) {
                if let Ok(refs) = references(type_url, body) {
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

/// Reference `r` of resource `name` of `type_url`, as a finding.
fn dangling(type_url: &str, name: &str, r: &Reference) -> Dangling {
    Dangling {
        from_type: String::from(type_url),
        from: String::from(name),
        to_type: r.type_url,
        to: String::from(r.name.as_str()),
        field: r.field,
    }
}

fn finish(mut report: ConsistencyReport) -> ConsistencyReport {
    report.dangling.sort();
    report.dangling.dedup();
    report
}
