//! [`EtcdSource`]: a replica's feed from etcd. It loads the prefix at one revision,
//! publishes every group it finds as one snapshot, then watches from the next revision and
//! applies each etcd revision as one publication of each group it touches.
//!
//! # Decisions
//!
//! - **One etcd revision, one publication per group.** etcd gives every transaction one
//!   revision and never splits a revision's events across watch responses (fragmenting is
//!   off), so the events of a revision that fall in one group become one
//!   [`XdsServer::publish`]: a transaction that changes several types is one store
//!   revision, checked as a whole (the group's body checks and consistency check), and
//!   every stream sees all of it or none of it. Groups are independent stores, so a
//!   transaction across groups is one publication in each.
//! - **Versions from content.** Entries carry no version of their own: the store's version
//!   is a digest of the body ([`xds_sansio::server`]), so every replica gives a resource the
//!   same version whatever its history (a replica started later, one that reloaded after a
//!   compaction), and a client that moves between replicas is sent nothing it holds where
//!   the protocol lets it say what it holds. etcd's `mod_revision` would do too, but would
//!   change a resource's version when it is written again unchanged.
//! - **Publishing a group publishes every type of the catalog.** Until a type is
//!   published, streams are held (the restart hazard: a replica that has not loaded must
//!   not tell a client its clusters are gone); once the prefix is loaded, etcd is the truth
//!   and a type with no key in a group is empty. A group with no key at all is unknown: its
//!   streams stay held.
//! - **Losing etcd** (every member unreachable, or no leader: the watch ends): the replica
//!   keeps serving what it has, sets the health service `xds_sansio.etcd` to
//!   `NOT_SERVING` (`""` and the discovery services stay `SERVING`: clients should keep
//!   using it), sets `xds_etcd_connected` to 0, and tries the members in turn with the
//!   core's jittered backoff. It resumes the watch from the revision after the last one it
//!   applied: what it missed is replayed, and unchanged content changes nothing.
//! - **Compaction** (the watch's start revision is gone): the replica reloads the prefix
//!   at the current revision and publishes each group as a snapshot; the store changes
//!   only what differs, so clients are sent only what changed while it was away. Progress
//!   notifications move the revision a replica would resume from, so a quiet prefix in a
//!   busy etcd is not reloaded for nothing.
//! - **A refused publication** (a key that does not parse, a body the checks refuse, an
//!   inconsistent revision written past `xds-sansio publish`): reported ([`Rejected`],
//!   `tracing` warning, `xds_etcd_rejected_total`), the group keeps its last good state,
//!   and the group is marked diverged: its next change reloads the group from etcd at that
//!   revision and publishes it as a snapshot, so a later fix is not applied on top of a
//!   missing step.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use xds_sansio::server::{ResourceEntry, StoreError, StoreOp};
use xds_sansio::types::CATALOG;

use super::keys::{self, EtcdKey, KeyError};
use super::wire::{self, KeyValue, Member, RangeRequest, WatchCreateRequest};
use crate::XdsServer;
use xds_sansio::client::session::{os_seed, Backoff, BackoffConfig};

/// The gRPC health service name that says whether the replica is fed by etcd.
pub const HEALTH_SERVICE: &str = "xds_sansio.etcd";

/// Metric names of the source.
pub mod names {
    /// 1 while the watch is live, 0 while etcd is lost.
    pub const CONNECTED: &str = "xds_etcd_connected";
    /// The last etcd revision applied.
    pub const REVISION: &str = "xds_etcd_revision";
    /// Publications made from etcd revisions and loads.
    pub const PUBLICATIONS: &str = "xds_etcd_publications_total";
    /// Full reloads (start, compaction).
    pub const RELOADS: &str = "xds_etcd_reloads_total";
    /// Times the feed was lost.
    pub const DISCONNECTS: &str = "xds_etcd_disconnects_total";
    /// Keys and publications refused, by `reason` (`key`, `store`).
    pub const REJECTED: &str = "xds_etcd_rejected_total";
}

/// How a replica reaches etcd.
#[derive(Clone, Debug)]
pub struct SourceConfig {
    /// The members' endpoints (`host:port` or `http://host:port`), tried in turn.
    pub endpoints: Vec<String>,
    /// The key prefix (default `/xds/`), ending with `/`.
    pub prefix: String,
    /// The longest a connection attempt or a call may take (default 5 s).
    pub call_timeout: Duration,
    /// HTTP/2 keepalive on the connection to etcd (default a PING every 5 s, dropped when
    /// unanswered for 5 s): a silent network partition ends the watch.
    pub keepalive: Option<(Duration, Duration)>,
    /// Keys per page when loading (default 1 000).
    pub page_size: i64,
    /// The delays between attempts after the feed is lost (the core's jittered backoff;
    /// default 100 ms initial, 1.6x, 20 % jitter, 5 s at most).
    pub backoff: BackoffConfig,
}

impl SourceConfig {
    /// A configuration for these members with the defaults.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>) -> SourceConfig {
        SourceConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: String::from(super::DEFAULT_PREFIX),
            call_timeout: Duration::from_secs(5),
            keepalive: Some((Duration::from_secs(5), Duration::from_secs(5))),
            page_size: 1000,
            backoff: {
                let mut b = BackoffConfig::default();
                b.initial = Duration::from_millis(100);
                b.multiplier = 1.6;
                b.jitter = 0.2;
                b.max = Duration::from_secs(5);
                b.min_connect_timeout = Duration::from_secs(5);
                b
            },
        }
    }
}

/// Why a source cannot start (misuse).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceError {
    /// No endpoint was given.
    NoEndpoints,
    /// The prefix is not a prefix ([`KeyError::BadPrefix`]).
    Prefix(KeyError),
    /// Not called from within a tokio runtime (the feed is a tokio task).
    NoRuntime,
}

impl std::fmt::Display for SourceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourceError::NoEndpoints => write!(f, "no etcd endpoint"),
            SourceError::Prefix(e) => write!(f, "{e}"),
            SourceError::NoRuntime => write!(f, "EtcdSource::start needs a tokio runtime"),
        }
    }
}

impl std::error::Error for SourceError {}

/// Something in etcd the replica refused (peer input: reported, never a crash).
#[derive(Clone, Debug, PartialEq)]
pub enum Rejected {
    /// A key that does not parse (shown lossily).
    Key {
        /// The key.
        key: String,
        /// Why.
        error: KeyError,
    },
    /// A revision the group's store refused (body checks, consistency).
    Publication {
        /// The group.
        group: String,
        /// The etcd revision.
        revision: i64,
        /// The store's reason.
        error: StoreError,
    },
}

/// What a source has done so far, for health pages and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceStatus {
    /// The watch is live: the replica is fed.
    pub connected: bool,
    /// The prefix was loaded at least once (before that, every stream is held).
    pub loaded: bool,
    /// The last etcd revision applied (0 before the first load).
    pub revision: i64,
    /// Publications made (loads and watched revisions that changed a store or not).
    pub publications: u64,
    /// Full loads (the first one, and one per compaction).
    pub loads: u64,
    /// Times the feed was lost.
    pub disconnects: u64,
    /// Why the feed was last lost.
    pub last_error: Option<String>,
    /// The last refusals (at most 16 kept).
    pub rejected: Vec<Rejected>,
    /// Refusals in all.
    pub rejected_total: u64,
}

const REJECTED_KEPT: usize = 16;

/// A replica's feed from etcd; stops when dropped or [`EtcdSource::stop`]ped. See the
/// [module docs](self).
#[derive(Debug)]
pub struct EtcdSource {
    task: JoinHandle<()>,
    status: watch::Receiver<SourceStatus>,
}

impl Drop for EtcdSource {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl EtcdSource {
    /// Starts feeding `server` from etcd (in a task of the current tokio runtime).
    pub fn start(server: XdsServer, config: SourceConfig) -> Result<EtcdSource, SourceError> {
        if config.endpoints.is_empty() {
            return Err(SourceError::NoEndpoints);
        }
        keys::check_prefix(&config.prefix).map_err(SourceError::Prefix)?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SourceError::NoRuntime)?;
        let (tx, status) = watch::channel(SourceStatus::default());
        let feed = Feed {
            backoff: Backoff::with_seed(config.backoff, os_seed()),
            config: Arc::new(config),
            server,
            status: tx,
            groups: BTreeSet::new(),
            diverged: BTreeSet::new(),
            needs_load: true,
        };
        let task = runtime.spawn(feed.run());
        Ok(EtcdSource { task, status })
    }

    /// What the source has done so far.
    pub fn status(&self) -> SourceStatus {
        self.status.borrow().clone()
    }

    /// A receiver that sees every change of the status (to wait for a load or a revision).
    pub fn subscribe(&self) -> watch::Receiver<SourceStatus> {
        self.status.clone()
    }

    /// Stops the feed; the server keeps what it was given.
    pub fn stop(&self) {
        self.task.abort();
    }
}

/// The task's state.
struct Feed {
    config: Arc<SourceConfig>,
    server: XdsServer,
    status: watch::Sender<SourceStatus>,
    backoff: Backoff,
    /// Groups found in etcd at the last load or since.
    groups: BTreeSet<String>,
    /// Groups whose last publication was refused: reloaded on their next change.
    diverged: BTreeSet<String>,
    /// The next connection loads the whole prefix first (start, compaction).
    needs_load: bool,
}

/// Why a feed ended.
struct Lost(String);

/// How a watch ended.
enum Watched {
    /// Its start revision is gone (the oldest kept is this one): reload.
    Compacted(i64),
    /// The feed is lost.
    Lost(Lost),
}

impl Feed {
    async fn run(mut self) {
        self.server
            .report_source_health(HEALTH_SERVICE, false)
            .await;
        let mut next = 0usize;
        loop {
            let count = self.config.endpoints.len().max(1);
            let endpoint = self
                .config
                .endpoints
                .get(next % count)
                .cloned()
                .unwrap_or_default();
            next = next.wrapping_add(1);
            let member =
                Member::connect_with(&endpoint, self.config.call_timeout, self.config.keepalive);
            let lost = match member.await {
                Ok(member) => self.feed(member).await,
                Err(e) => Lost(e),
            };
            self.lose(&endpoint, lost).await;
            tokio::time::sleep(self.backoff.next_delay()).await;
        }
    }

    /// Loads if needed, then applies the watch until it ends. A watch refused because its
    /// start was compacted away reloads through the same member and watches again.
    async fn feed(&mut self, mut member: Member) -> Lost {
        loop {
            if self.needs_load {
                if let Err(e) = self.load(&mut member).await {
                    return e;
                }
            }
            match self.watch(&mut member).await {
                Watched::Compacted(oldest) => {
                    tracing::info!(oldest, "watch start compacted away; reloading");
                    self.needs_load = true;
                }
                Watched::Lost(lost) => return lost,
            }
        }
    }

    /// Applies one watch until it ends.
    async fn watch(&mut self, member: &mut Member) -> Watched {
        let prefix = self.config.prefix.as_bytes().to_vec();
        let create = WatchCreateRequest {
            range_end: wire::prefix_end(&prefix),
            key: prefix,
            start_revision: self.status.borrow().revision + 1,
            progress_notify: true,
        };
        let (_requests, mut responses) = match member.watch(create).await {
            Ok(watch) => watch,
            Err(status) => return Watched::Lost(Lost(format!("watch: {}", status.message()))),
        };
        loop {
            let response = match responses.message().await {
                Ok(Some(response)) => response,
                Ok(None) => return Watched::Lost(Lost("watch closed by etcd".into())),
                Err(status) => return Watched::Lost(Lost(format!("watch: {}", status.message()))),
            };
            if response.canceled {
                if response.compact_revision > 0 {
                    return Watched::Compacted(response.compact_revision);
                }
                let reason = format!("watch cancelled: {}", response.cancel_reason);
                return Watched::Lost(Lost(reason));
            }
            if response.created {
                self.connected().await;
            } else if response.events.is_empty() {
                // A progress notification: every event up to its revision has been sent,
                // so a resume may start after it (and is less likely to find it compacted
                // while other prefixes of the same etcd change).
                let at = response.header.as_ref().map_or(0, |h| h.revision);
                self.status.send_modify(|s| s.revision = s.revision.max(at));
            }
            self.apply_events(member, response.events).await;
        }
    }

    async fn connected(&mut self) {
        self.backoff.reset();
        self.status.send_modify(|s| {
            s.connected = true;
            s.last_error = None;
        });
        metrics::gauge!(names::CONNECTED).set(1.0);
        self.server.report_source_health(HEALTH_SERVICE, true).await;
        tracing::info!(revision = self.status.borrow().revision, "etcd feed live");
    }

    async fn lose(&mut self, endpoint: &str, lost: Lost) {
        let was = self.status.borrow().connected;
        self.status.send_modify(|s| {
            if s.connected {
                s.disconnects += 1;
            }
            s.connected = false;
            s.last_error = Some(lost.0.clone());
        });
        metrics::gauge!(names::CONNECTED).set(0.0);
        if was {
            metrics::counter!(names::DISCONNECTS).increment(1);
            self.server
                .report_source_health(HEALTH_SERVICE, false)
                .await;
            tracing::warn!(endpoint, reason = %lost.0, "etcd feed lost; serving the last state");
        } else {
            tracing::debug!(endpoint, reason = %lost.0, "etcd not reachable");
        }
    }

    /// Every key under `prefix` at one revision (the first page's), page by page.
    async fn read_all(
        &self,
        member: &mut Member,
        prefix: &[u8],
        revision: i64,
    ) -> Result<(i64, Vec<KeyValue>), Lost> {
        let end = wire::prefix_end(prefix);
        let mut key = prefix.to_vec();
        let mut revision = revision;
        let mut out = Vec::new();
        loop {
            let request = RangeRequest {
                key: key.clone(),
                range_end: end.clone(),
                limit: self.config.page_size.max(1),
                revision,
                keys_only: false,
            };
            let page = member
                .range(request)
                .await
                .map_err(|s| Lost(format!("range: {}", s.message())))?;
            if revision == 0 {
                revision = page.header.as_ref().map_or(0, |h| h.revision);
            }
            let more = page.more;
            if let Some(last) = page.kvs.last() {
                key = last.key.to_vec();
                key.push(0);
            }
            let empty = page.kvs.is_empty();
            out.extend(page.kvs);
            if !more || empty {
                return Ok((revision, out));
            }
        }
    }

    /// Loads the whole prefix and publishes every group as a snapshot.
    async fn load(&mut self, member: &mut Member) -> Result<(), Lost> {
        let prefix = self.config.prefix.clone();
        let (revision, kvs) = self.read_all(member, prefix.as_bytes(), 0).await?;
        let mut groups: BTreeMap<String, Vec<(EtcdKey, Bytes)>> = BTreeMap::new();
        for kv in kvs {
            if let Some(key) = self.parse_key(&kv.key) {
                groups
                    .entry(key.group.clone())
                    .or_default()
                    .push((key, kv.value));
            }
        }
        let gone: Vec<String> = self
            .groups
            .iter()
            .filter(|g| !groups.contains_key(*g))
            .cloned()
            .collect();
        for group in gone {
            self.snapshot(&group, Vec::new(), revision);
            self.groups.remove(&group);
        }
        for (group, entries) in groups {
            self.snapshot(&group, entries, revision);
            self.groups.insert(group);
        }
        self.needs_load = false;
        self.status.send_modify(|s| {
            s.loaded = true;
            s.loads += 1;
            s.revision = revision;
        });
        metrics::counter!(names::RELOADS).increment(1);
        metrics::gauge!(names::REVISION).set(revision as f64);
        tracing::info!(revision, groups = self.groups.len(), "loaded from etcd");
        Ok(())
    }

    /// Makes `group` hold exactly `entries` (every type of the catalog), as one revision.
    fn snapshot(&mut self, group: &str, entries: Vec<(EtcdKey, Bytes)>, revision: i64) {
        let mut types: BTreeMap<String, Vec<ResourceEntry>> = CATALOG
            .iter()
            .map(|t| (t.type_url.to_string(), Vec::new()))
            .collect();
        for (key, body) in entries {
            types
                .entry(key.type_url)
                .or_default()
                .push(ResourceEntry::new(key.name, body));
        }
        match self.server.publish_snapshot(group, types) {
            Ok(_) => {
                self.diverged.remove(group);
                self.published();
            }
            Err(error) => self.refused(group, revision, error),
        }
    }

    fn parse_key(&mut self, key: &[u8]) -> Option<EtcdKey> {
        match keys::decode(&self.config.prefix, key) {
            Ok(key) => Some(key),
            Err(error) => {
                let key = String::from_utf8_lossy(key).into_owned();
                tracing::warn!(%key, %error, "etcd key skipped");
                metrics::counter!(names::REJECTED, "reason" => "key").increment(1);
                self.reject(Rejected::Key { key, error });
                None
            }
        }
    }

    fn refused(&mut self, group: &str, revision: i64, error: StoreError) {
        tracing::warn!(group, revision, %error, "etcd revision refused; the group keeps its last state");
        metrics::counter!(names::REJECTED, "reason" => "store").increment(1);
        self.diverged.insert(group.to_string());
        self.reject(Rejected::Publication {
            group: group.to_string(),
            revision,
            error,
        });
    }

    fn reject(&mut self, rejected: Rejected) {
        self.status.send_modify(|s| {
            if s.rejected.len() == REJECTED_KEPT {
                s.rejected.remove(0);
            }
            s.rejected.push(rejected);
            s.rejected_total += 1;
        });
    }

    fn published(&mut self) {
        self.status.send_modify(|s| s.publications += 1);
        metrics::counter!(names::PUBLICATIONS).increment(1);
    }

    /// Applies watched events, one publication per revision and group.
    async fn apply_events(&mut self, member: &mut Member, events: Vec<wire::Event>) {
        let mut batch: Vec<wire::Event> = Vec::new();
        let mut at = 0;
        for event in events {
            let revision = event.kv.as_ref().map_or(0, |kv| kv.mod_revision);
            if revision != at && !batch.is_empty() {
                self.apply_revision(member, at, std::mem::take(&mut batch))
                    .await;
            }
            at = revision;
            batch.push(event);
        }
        if !batch.is_empty() {
            self.apply_revision(member, at, batch).await;
        }
    }

    async fn apply_revision(
        &mut self,
        member: &mut Member,
        revision: i64,
        events: Vec<wire::Event>,
    ) {
        let mut groups: BTreeMap<String, Vec<StoreOp>> = BTreeMap::new();
        for event in events {
            let Some(kv) = event.kv else { continue };
            let Some(key) = self.parse_key(&kv.key) else {
                continue;
            };
            let op = if event.r#type == wire::EVENT_DELETE {
                StoreOp::Remove {
                    type_url: key.type_url,
                    name: key.name,
                }
            } else {
                StoreOp::Set {
                    type_url: key.type_url,
                    entry: ResourceEntry::new(key.name, kv.value),
                }
            };
            groups.entry(key.group).or_default().push(op);
        }
        for (group, mut ops) in groups {
            if self.diverged.contains(&group) {
                // Reload the group as etcd has it at this revision (see the module docs).
                let prefix = keys::group_prefix(&self.config.prefix, &group);
                match self.read_all(member, prefix.as_bytes(), revision).await {
                    Ok((_, kvs)) => {
                        let entries = kvs
                            .into_iter()
                            .filter_map(|kv| Some((self.parse_key(&kv.key)?, kv.value)))
                            .collect();
                        self.snapshot(&group, entries, revision);
                    }
                    // Compacted or unreachable: the next change or load tries again.
                    Err(Lost(e)) => {
                        tracing::warn!(group, revision, error = %e, "group reload failed")
                    }
                }
                continue;
            }
            if self.groups.insert(group.clone()) {
                // A new group: every type of the catalog exists from its first revision.
                let publish = CATALOG.iter().map(|t| StoreOp::ServeType {
                    type_url: t.type_url.to_string(),
                });
                ops.splice(0..0, publish);
            }
            match self.server.publish(&group, ops) {
                Ok(_) => self.published(),
                Err(error) => self.refused(&group, revision, error),
            }
        }
        self.status
            .send_modify(|s| s.revision = s.revision.max(revision));
        metrics::gauge!(names::REVISION).set(revision as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misuse_is_a_typed_error() {
        let server = XdsServer::default();
        let none: [&str; 0] = [];
        let err = EtcdSource::start(server.clone(), SourceConfig::new(none)).unwrap_err();
        assert_eq!(err, SourceError::NoEndpoints);
        let mut config = SourceConfig::new(["127.0.0.1:2379"]);
        config.prefix = "/xds".into();
        assert!(matches!(
            EtcdSource::start(server.clone(), config),
            Err(SourceError::Prefix(KeyError::BadPrefix(_)))
        ));
        // Outside a runtime.
        let err = EtcdSource::start(server, SourceConfig::new(["127.0.0.1:2379"])).unwrap_err();
        assert_eq!(err, SourceError::NoRuntime);
    }
}
