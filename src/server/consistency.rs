//! Consistency of a publication across types: the setting, the report and the decisions
//! (the check and the make-before-break plan are in `dangling.rs`).
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
//! - **Cost**: [`ResourceStore::consistency_of`](super::ResourceStore::consistency_of) reads the references of the resources the
//!   operations set, and, only when they remove something, of every published resource of
//!   a referring type ([`crate::refs::REFERRING`]; to find who still names what goes). A publication
//!   that only adds or changes costs what it changes. [`ResourceStore::consistency`](super::ResourceStore::consistency)
//!   checks the whole store (`benches/README.md`).
//! - **Enforcement** ([`Consistency::Enforce`]): `apply` (and every method built on it)
//!   refuses an inconsistent publication with [`super::StoreError::Inconsistent`] and
//!   changes nothing. A body whose references cannot be read is refused too (a client
//!   would not get past it either).
//! - **Make-before-break** ([`ResourceStore::plan_make_before_break`](super::ResourceStore::plan_make_before_break)): the removals of
//!   resources that something published *now* still names are held for a second
//!   publication; apply the first, wait until every stream has sent it and the client has
//!   ACKed ([`super::ServerStream::is_settled`], [`super::StreamSet::is_settled`]), then
//!   apply the second. See the module docs of [`crate::server`] for what is guaranteed.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::refs::RefError;

/// Whether a store checks its publications.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Consistency {
    /// Publications are not checked (the default; ask with
    /// [`ResourceStore::consistency_of`](super::ResourceStore::consistency_of)).
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
