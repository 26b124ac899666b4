//! The vocabulary of a publication: what the application hands the store (entries and
//! operations), what the store answers (revisions, changes, errors). Below the store and
//! its checks, so each of them reads it and none of them reads another through it.

use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use core::num::NonZeroU64;
use core::time::Duration;

use super::consistency::ConsistencyReport;
use crate::name::{collection_of, NameParseError};
use crate::pb::google::rpc::Status;
use crate::resource::NameError;

/// A point in the store's history: every change gets the next revision, so "changed since
/// revision r" is a cheap question.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Revision(pub u64);

/// One resource as the application hands it to the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceEntry {
    /// The resource name (what clients subscribe to).
    pub name: String,
    /// The encoded resource message (not wrapped in `Any`).
    pub body: Bytes,
    /// The version; `None` means the stable hash of the body ([`super::body_version`]).
    pub version: Option<String>,
    /// Time to live: clients drop the resource when it expires unless a heartbeat or an
    /// update refreshes it.
    pub ttl: Option<Duration>,
    /// Other names the resource can be subscribed by (incremental xDS).
    pub aliases: Vec<String>,
}

impl ResourceEntry {
    /// An entry with a default version, no TTL and no aliases.
    pub fn new(name: impl Into<String>, body: Bytes) -> ResourceEntry {
        ResourceEntry {
            name: name.into(),
            body,
            version: None,
            ttl: None,
            aliases: Vec::new(),
        }
    }

    /// An entry for a typed message (an `envoy-types` `Cluster`, any prost message): its
    /// encoding is the body, and its name is read from that body where every client reads
    /// it (field 1, [`crate::resource::name_of`]), so the name is never written twice and
    /// can never disagree with the body. A message without a name is refused
    /// ([`StoreError::Name`]).
    ///
    /// ```
    /// use xds_sansio::pb::envoy::config::core::v3::Node;
    /// use xds_sansio::server::ResourceEntry;
    ///
    /// // Node's field 1 is its id: any message whose field 1 is a string has a name.
    /// let entry = ResourceEntry::of(&Node { id: "n1".into(), ..Node::default() }).unwrap();
    /// assert_eq!(entry.name, "n1");
    /// assert!(ResourceEntry::of(&Node::default()).is_err());
    /// ```
    pub fn of<M: prost::Message>(message: &M) -> Result<ResourceEntry, StoreError> {
        let body = Bytes::from(message.encode_to_vec());
        let name = String::from(crate::resource::name_of(&body).map_err(StoreError::Name)?);
        Ok(ResourceEntry::new(name, body))
    }

    /// Sets an application-chosen version.
    pub fn with_version(mut self, version: impl Into<String>) -> ResourceEntry {
        self.version = Some(version.into());
        self
    }

    /// Sets a TTL.
    pub fn with_ttl(mut self, ttl: Duration) -> ResourceEntry {
        self.ttl = Some(ttl);
        self
    }

    /// Sets the aliases.
    pub fn with_aliases(mut self, aliases: Vec<String>) -> ResourceEntry {
        self.aliases = aliases;
        self
    }
}

/// One change in the log: the resource `name` of `type_url` was set or removed (or its
/// error set or cleared, [`ResourceStore::set_error`](super::ResourceStore::set_error)) at `revision`; when `name` is empty,
/// the type was published for the first time ([`ResourceStore::serve_type`](super::ResourceStore::serve_type)); when it is
/// [`TYPE_WIDE`](super::TYPE_WIDE) (`*`), the type's own error changed (every subscriber is concerned). One revision may hold several changes
/// ([`ResourceStore::apply`](super::ResourceStore::apply)).
///
/// A view the store lends ([`ResourceStore::changes_since`](super::ResourceStore::changes_since)):
/// the log keeps each change in 40 bytes and a copy of its name, and this borrows them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreChange<'a> {
    /// When.
    pub revision: Revision,
    /// Which type.
    pub type_url: &'a str,
    /// Which resource; empty when the type itself was published.
    pub name: &'a str,
    /// Aliases the resource had before or has after the change (subscribers by alias are
    /// affected too).
    pub aliases: &'a [String],
    /// The entry hash ([`entry_hash`](super::entry_hash)) of the body the resource had
    /// just before the change; `None` when it had none (or, one time in 2^64, when that
    /// hash was 0: a reader then resends, never misses). An incremental stream in step
    /// with the store reads it to know what its client holds without a copy of every
    /// name.
    pub before: Option<NonZeroU64>,
}

impl<'a> StoreChange<'a> {
    /// The subscription names this change concerns besides a wildcard: its name, its
    /// aliases, and the `xdstp://` glob collection its name belongs to; nothing when the
    /// type itself was published (then every subscriber of the type is concerned). What
    /// [`super::StreamSet::sync`] looks up in its index; an embedding that keeps its own
    /// index of which stream subscribes to what (to wake only those streams) looks up the
    /// same keys.
    pub fn subscription_keys(self) -> impl Iterator<Item = alloc::borrow::Cow<'a, str>> {
        use alloc::borrow::Cow;
        let named = !self.name.is_empty();
        let glob = named.then(|| collection_of(self.name)).flatten();
        named
            .then_some(Cow::Borrowed(self.name))
            .into_iter()
            .chain(
                self.aliases
                    .iter()
                    .filter(move |_| named)
                    .map(|a| Cow::Borrowed(a.as_str())),
            )
            .chain(glob.map(Cow::Owned))
    }
}

/// The log no longer reaches back to the revision asked about: rescan everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogTruncated;

/// Caller misuse of the store.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreError {
    /// The type URL is empty.
    EmptyTypeUrl,
    /// The resource name is empty.
    EmptyName,
    /// `*` is the wildcard subscription, never a resource name or alias.
    WildcardName,
    /// The alias is already the name or an alias of another resource of the type.
    AliasTaken {
        /// The alias.
        alias: String,
        /// The resource that has it.
        owner: String,
    },
    /// The name could not be read from the body.
    Name(NameError),
    /// `replace_type` was given the same name twice.
    DuplicateName(String),
    /// The name starts with `xdstp://` but is not a well-formed xdstp name.
    MalformedXdstpName {
        /// The name.
        name: String,
        /// What is wrong with it.
        error: NameParseError,
    },
    /// Under [`Consistency::Enforce`](super::Consistency::Enforce): the publication would leave a reference dangling (or
    /// a body whose references cannot be read).
    Inconsistent(ConsistencyReport),
    /// Under [`BodyChecks::Enforce`](super::BodyChecks::Enforce): a type URL no client can ask for.
    UnknownType(String),
    /// Under [`BodyChecks::Enforce`](super::BodyChecks::Enforce): the body names another resource than its entry (a
    /// client would file it under `body_name`).
    NameMismatch {
        /// The entry's name.
        name: String,
        /// The name the body carries (field 1).
        body_name: String,
    },
    /// Under [`BodyChecks::Enforce`](super::BodyChecks::Enforce): the body cannot be read where a client reads names.
    BadBody {
        /// The entry's name.
        name: String,
        /// Which field.
        field: String,
        /// What is wrong with it.
        why: String,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::EmptyTypeUrl => f.write_str("type URL is empty"),
            StoreError::EmptyName => f.write_str("resource name is empty"),
            StoreError::WildcardName => f.write_str("\"*\" is reserved for wildcard"),
            StoreError::AliasTaken { alias, owner } => {
                write!(f, "alias {alias:?} already belongs to {owner:?}")
            }
            StoreError::Name(e) => write!(f, "cannot read the resource name: {e}"),
            StoreError::DuplicateName(n) => write!(f, "resource {n:?} given twice"),
            StoreError::MalformedXdstpName { name, error } => write!(f, "{name:?}: {error}"),
            StoreError::Inconsistent(report) => write!(f, "inconsistent publication: {report}"),
            StoreError::UnknownType(t) => write!(f, "{t:?} is not a type of the xDS catalog"),
            StoreError::NameMismatch { name, body_name } => {
                write!(f, "resource {name:?}: its body is named {body_name:?}")
            }
            StoreError::BadBody { name, field, why } => {
                write!(f, "resource {name:?}: {field}: {why}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for StoreError {}

/// One operation of an update applied as a single revision ([`ResourceStore::apply`](super::ResourceStore::apply)).
#[derive(Clone, Debug, PartialEq)]
pub enum StoreOp {
    /// Set (add or replace) a resource; publishes its type.
    Set {
        /// The type URL.
        type_url: String,
        /// The resource.
        entry: ResourceEntry,
    },
    /// Remove a resource (a no-op when it is not there).
    Remove {
        /// The type URL.
        type_url: String,
        /// The resource name.
        name: String,
    },
    /// Serve a type, with whatever resources it holds (possibly none).
    ServeType {
        /// The type URL.
        type_url: String,
    },
    /// An error for a resource instead of its body ([`TYPE_WIDE`](super::TYPE_WIDE): for every name of the
    /// type that holds neither body nor error of its own), sent in `resource_errors` (gRPC
    /// A88): what [`ResourceStore::set_error`](super::ResourceStore::set_error) does, inside one publication.
    SetError {
        /// The type URL.
        type_url: String,
        /// The resource name, or [`TYPE_WIDE`](super::TYPE_WIDE).
        name: String,
        /// The error (`google.rpc.Status`: a code and a message).
        status: Status,
    },
    /// Clears the error of a resource ([`TYPE_WIDE`](super::TYPE_WIDE): the type's), as
    /// [`ResourceStore::clear_error`](super::ResourceStore::clear_error) does; a no-op when it has none.
    ClearError {
        /// The type URL.
        type_url: String,
        /// The resource name, or [`TYPE_WIDE`](super::TYPE_WIDE).
        name: String,
    },
}

impl StoreOp {
    /// Sets a typed message: its type URL from the message
    /// ([`type_url_of`](crate::types::type_url_of)), its entry from its body
    /// ([`ResourceEntry::of`]).
    pub fn set<M: prost::Message + prost::Name>(message: &M) -> Result<StoreOp, StoreError> {
        Ok(StoreOp::Set {
            type_url: crate::types::type_url_of::<M>(),
            entry: ResourceEntry::of(message)?,
        })
    }
}

/// Resources by type URL, built from typed messages: what a snapshot publishes
/// ([`ResourceStore::replace_types`](super::ResourceStore::replace_types): every type it
/// lists holds exactly its entries afterwards). Each message's type URL comes from its
/// [`prost::Name`] and its name from its body, so neither is written twice.
///
/// ```
/// use xds_sansio::pb::envoy::config::core::v3::Node;
/// use xds_sansio::server::{ResourceSet, ResourceStore};
///
/// let node = |id: &str| Node { id: id.into(), ..Node::default() };
/// let set = ResourceSet::new().with(&node("a"))?.with(&node("b"))?;
/// let mut store = ResourceStore::new();
/// store.replace_types(set.into())?;
/// assert!(store.get("type.googleapis.com/envoy.config.core.v3.Node", "b").is_some());
/// # Ok::<(), xds_sansio::server::StoreError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceSet {
    types: BTreeMap<String, Vec<ResourceEntry>>,
}

impl ResourceSet {
    /// An empty set.
    pub fn new() -> ResourceSet {
        ResourceSet::default()
    }

    /// The set with `message` added ([`ResourceSet::add`]), for chaining.
    pub fn with<M: prost::Message + prost::Name>(
        mut self,
        message: &M,
    ) -> Result<ResourceSet, StoreError> {
        self.add(message)?;
        Ok(self)
    }

    /// Adds a typed message under its type URL.
    pub fn add<M: prost::Message + prost::Name>(
        &mut self,
        message: &M,
    ) -> Result<&mut ResourceSet, StoreError> {
        let entry = ResourceEntry::of(message)?;
        Ok(self.add_entry(crate::types::type_url_of::<M>(), entry))
    }

    /// Adds an entry made by hand (a version, a TTL or aliases of its own) under
    /// `type_url`.
    pub fn add_entry(&mut self, type_url: impl Into<String>, entry: ResourceEntry) -> &mut Self {
        self.types.entry(type_url.into()).or_default().push(entry);
        self
    }

    /// Lists `type_url` even if it holds nothing, so the snapshot serves it empty (and
    /// empties it if it held something).
    pub fn serve_type(&mut self, type_url: impl Into<String>) -> &mut Self {
        self.types.entry(type_url.into()).or_default();
        self
    }

    /// Type URL -> entries, as [`ResourceStore::replace_types`](super::ResourceStore::replace_types) takes them.
    pub fn into_types(self) -> BTreeMap<String, Vec<ResourceEntry>> {
        self.types
    }
}

impl From<ResourceSet> for BTreeMap<String, Vec<ResourceEntry>> {
    fn from(set: ResourceSet) -> Self {
        set.types
    }
}
