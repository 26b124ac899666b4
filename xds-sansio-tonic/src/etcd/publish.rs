//! Writing a publication into etcd: whole node groups, checked first, in one transaction.
//!
//! A [`Publication`] holds the whole configuration of some groups (every type of the
//! catalog: a type it does not list is empty). [`Publication::check`] runs it through a
//! store with the adapter's checks (bodies, and references with [`Consistency::Enforce`]),
//! so an inconsistent publication is refused before it reaches etcd. [`publish`] then reads
//! what etcd holds under those groups and writes the difference in one etcd transaction:
//! one revision, which every replica applies as one publication per group.
//!
//! # Decisions
//!
//! - **Only the difference is written**: a key whose value is unchanged is not put again,
//!   so its `mod_revision` stays and watchers see nothing for it; an unchanged publication
//!   writes nothing at all ([`Published::revision`] is then etcd's current one).
//! - **Retried until it is known to be written**: a failed call is tried again on the
//!   next member (the answer of a committed transaction can be lost; a retry then reads
//!   the new state and writes nothing).
//! - **Optimistic concurrency**: the transaction holds only if no key under the groups
//!   changed since it was read (a `Compare` of `mod_revision` over each group's range,
//!   etcd 3.3 and later); if another publisher got in between, it reads again and retries
//!   (at most [`ATTEMPTS`] times), so two publishers never interleave inside a group.
//! - **A directory** holds one file per group, `GROUP.EXT`, a `DiscoveryResponse` in one of
//!   the crate's file formats (`.pb`, `.json`, `.yaml`, `.textproto`: [`Format`]), as the
//!   adapter's `file_server` example reads it. Resources wrapped in
//!   `envoy.service.discovery.v3.Resource` are refused: etcd holds bodies, and a wrapper's
//!   TTL would be lost.
//! - **etcd's limits apply**: one transaction holds at most `--max-txn-ops` operations
//!   (128 by default) and `--max-request-bytes` (1.5 MiB by default); a larger publication
//!   is refused by etcd with its own error (`docs/deployment.md`, sizing).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use xds_sansio::codec::{FileCodec, Format, FormatError};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::server::{BodyChecks, Consistency, ResourceEntry, ResourceStore, StoreError};
use xds_sansio::types::{CATALOG, RESOURCE_WRAPPER_TYPE_URL};

use super::keys::{self, EtcdKey, KeyError};
use super::wire::{self, Compare, DeleteRangeRequest, Member, PutRequest, RequestOp, TxnRequest};

/// How many times [`publish`] goes through the endpoints when etcd fails (a leader
/// election, a member down), and reads and tries again when another writer got in
/// between.
pub const ATTEMPTS: usize = 5;

/// Why a publication was not written.
#[derive(Debug)]
pub enum PublishError {
    /// A file of the directory could not be read.
    Io(String, std::io::Error),
    /// A file's extension names no known format.
    UnknownFormat(String),
    /// A file does not parse in its format.
    Format(String, FormatError),
    /// A resource's name cannot be read from its body (the file, and why).
    Name(String, String),
    /// A resource is wrapped in `envoy.service.discovery.v3.Resource` (the file).
    Wrapped(String),
    /// A group, type URL or name cannot be a key.
    Key(KeyError),
    /// The checks refused a group (nothing was written).
    Refused {
        /// The group.
        group: String,
        /// The store's reason.
        error: StoreError,
    },
    /// etcd could not be reached, or refused the transaction (too many operations, too
    /// large), or other writers got in between [`ATTEMPTS`] times.
    Etcd(String),
}

impl std::fmt::Display for PublishError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PublishError::Io(path, e) => write!(f, "{path}: {e}"),
            PublishError::UnknownFormat(path) => write!(f, "{path}: unknown file extension"),
            PublishError::Format(path, e) => write!(f, "{path}: {e}"),
            PublishError::Name(path, e) => write!(f, "{path}: {e}"),
            PublishError::Wrapped(path) => {
                write!(
                    f,
                    "{path}: wrapped resources (Resource) cannot be published to etcd"
                )
            }
            PublishError::Key(e) => write!(f, "{e}"),
            PublishError::Refused { group, error } => {
                write!(f, "group {group:?} refused, nothing written: {error}")
            }
            PublishError::Etcd(e) => write!(f, "etcd: {e}"),
        }
    }
}

impl std::error::Error for PublishError {}

/// The whole configuration of some node groups.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Publication {
    groups: BTreeMap<String, BTreeMap<String, Vec<ResourceEntry>>>,
}

/// What [`publish`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The transaction's etcd revision (etcd's current one when nothing changed).
    pub revision: i64,
    /// Keys written (new or changed).
    pub puts: usize,
    /// Keys deleted.
    pub deletes: usize,
}

impl Publication {
    /// An empty publication.
    pub fn new() -> Publication {
        Publication::default()
    }

    /// Makes `group`'s whole configuration `types` (type URL -> entries; a type of the
    /// catalog not listed is empty). Only the name and body of an entry are written.
    pub fn set_group(
        &mut self,
        group: &str,
        types: BTreeMap<String, Vec<ResourceEntry>>,
    ) -> Result<(), PublishError> {
        keys::check_group(group).map_err(PublishError::Key)?;
        self.groups.insert(group.to_string(), types);
        Ok(())
    }

    /// The groups, sorted.
    pub fn groups(&self) -> impl Iterator<Item = &str> {
        self.groups.keys().map(String::as_str)
    }

    /// A group's configuration (type URL -> entries), as set.
    pub fn group(&self, group: &str) -> Option<&BTreeMap<String, Vec<ResourceEntry>>> {
        self.groups.get(group)
    }

    /// Reads `DIR/GROUP.EXT` files (see the [module docs](self)); `codec` carries the
    /// resource schemas that JSON, YAML and text need to read resources by field.
    pub fn from_dir(dir: &Path, codec: &FileCodec) -> Result<Publication, PublishError> {
        let shown = |p: &Path| p.display().to_string();
        let mut paths: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| PublishError::Io(shown(dir), e))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        paths.sort();
        let mut publication = Publication::new();
        for path in paths {
            let format = Format::from_path(&path.to_string_lossy())
                .ok_or_else(|| PublishError::UnknownFormat(shown(&path)))?;
            let bytes = std::fs::read(&path).map_err(|e| PublishError::Io(shown(&path), e))?;
            let response: DiscoveryResponse = codec
                .decode(format, Bytes::from(bytes))
                .map_err(|e| PublishError::Format(shown(&path), e))?;
            let mut types: BTreeMap<String, Vec<ResourceEntry>> = BTreeMap::new();
            for any in response.resources {
                if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
                    return Err(PublishError::Wrapped(shown(&path)));
                }
                let name = xds_sansio::resource::name_of(&any.value)
                    .map_err(|e| PublishError::Name(shown(&path), e.to_string()))?
                    .to_string();
                types
                    .entry(any.type_url.to_string())
                    .or_default()
                    .push(ResourceEntry::new(name, any.value));
            }
            let stem = path.file_name().map(|n| n.to_string_lossy().into_owned());
            let stem = stem.unwrap_or_default();
            // `edge.pb.txt` is group `edge`: everything from the first dot is the extension.
            let group = stem.split('.').next().unwrap_or_default();
            publication.set_group(group, types)?;
        }
        Ok(publication)
    }

    /// Runs every group through a store with the adapter's checks: body checks and
    /// references ([`Consistency::Enforce`]). Nothing is written anywhere.
    pub fn check(&self) -> Result<(), PublishError> {
        for (group, types) in &self.groups {
            let mut store = ResourceStore::new();
            store.set_body_checks(BodyChecks::Enforce);
            store.set_consistency(Consistency::Enforce);
            store
                .replace_types(whole(types))
                .map_err(|error| PublishError::Refused {
                    group: group.clone(),
                    error,
                })?;
        }
        Ok(())
    }

    /// Every key and value of the publication.
    fn keys(&self, prefix: &str) -> Result<BTreeMap<String, Bytes>, PublishError> {
        let mut out = BTreeMap::new();
        for (group, types) in &self.groups {
            for (type_url, entries) in types {
                for entry in entries {
                    let key = keys::encode(
                        prefix,
                        &EtcdKey {
                            group: group.clone(),
                            type_url: type_url.clone(),
                            name: entry.name.clone(),
                        },
                    )
                    .map_err(PublishError::Key)?;
                    out.insert(key, entry.body.clone());
                }
            }
        }
        Ok(out)
    }
}

/// A group's types with every type of the catalog present.
fn whole(types: &BTreeMap<String, Vec<ResourceEntry>>) -> BTreeMap<String, Vec<ResourceEntry>> {
    let mut out: BTreeMap<String, Vec<ResourceEntry>> = CATALOG
        .iter()
        .map(|t| (t.type_url.to_string(), Vec::new()))
        .collect();
    for (type_url, entries) in types {
        out.insert(type_url.clone(), entries.clone());
    }
    out
}

/// Checks `publication`, then writes it under `prefix` in one etcd transaction through the
/// first of `endpoints` that answers (see the [module docs](self)). A failed attempt (a
/// member down, a leader election) is tried again on every endpoint, [`ATTEMPTS`] rounds
/// with a doubling pause from 100 ms; `timeout` bounds each call. Retrying is safe: a
/// transaction that committed although its answer was lost leaves nothing to write.
pub async fn publish(
    endpoints: &[String],
    prefix: &str,
    publication: &Publication,
    timeout: Duration,
) -> Result<Published, PublishError> {
    keys::check_prefix(prefix).map_err(PublishError::Key)?;
    publication.check()?;
    let wanted = publication.keys(prefix)?;
    let mut errors = Vec::new();
    let mut pause = Duration::from_millis(100);
    for attempt in 0..ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
        for endpoint in endpoints {
            let result = match Member::connect(endpoint, timeout).await {
                Ok(mut member) => write(&mut member, prefix, publication, &wanted).await,
                Err(e) => Err(PublishError::Etcd(e)),
            };
            match result {
                Err(PublishError::Etcd(e)) => errors.push(format!("{endpoint}: {e}")),
                done => return done,
            }
        }
    }
    if errors.is_empty() {
        errors.push("no endpoint".into());
    }
    // The last error of each endpoint says enough.
    let keep = endpoints.len().max(1);
    let first = errors.len().saturating_sub(keep);
    Err(PublishError::Etcd(errors.split_off(first).join("; ")))
}

async fn write(
    member: &mut Member,
    prefix: &str,
    publication: &Publication,
    wanted: &BTreeMap<String, Bytes>,
) -> Result<Published, PublishError> {
    let etcd = |s: tonic::Status| PublishError::Etcd(s.message().to_string());
    for _ in 0..ATTEMPTS {
        let mut held: BTreeMap<String, Bytes> = BTreeMap::new();
        let mut revision = 0;
        let mut compare = Vec::new();
        for group in publication.groups() {
            let start = keys::group_prefix(prefix, group).into_bytes();
            let end = wire::prefix_end(&start);
            let mut key = start.clone();
            loop {
                let page = member
                    .range(wire::RangeRequest {
                        key: key.clone(),
                        range_end: end.clone(),
                        limit: 1000,
                        revision,
                        keys_only: false,
                    })
                    .await
                    .map_err(etcd)?;
                if revision == 0 {
                    revision = page.header.as_ref().map_or(0, |h| h.revision);
                }
                if let Some(last) = page.kvs.last() {
                    key = last.key.to_vec();
                    key.push(0);
                }
                let done = !page.more || page.kvs.is_empty();
                for kv in page.kvs {
                    held.insert(String::from_utf8_lossy(&kv.key).into_owned(), kv.value);
                }
                if done {
                    break;
                }
            }
            compare.push(Compare {
                result: wire::COMPARE_LESS,
                target: wire::COMPARE_MOD,
                key: start,
                mod_revision: revision + 1,
                range_end: end,
            });
        }
        let mut ops = Vec::new();
        let mut puts = 0;
        for (key, value) in wanted {
            if held.get(key) != Some(value) {
                puts += 1;
                ops.push(RequestOp {
                    request: Some(wire::request_op::Request::Put(PutRequest {
                        key: key.clone().into_bytes(),
                        value: value.clone(),
                    })),
                });
            }
        }
        let mut deletes = 0;
        for key in held.keys().filter(|k| !wanted.contains_key(*k)) {
            deletes += 1;
            ops.push(RequestOp {
                request: Some(wire::request_op::Request::DeleteRange(DeleteRangeRequest {
                    key: key.clone().into_bytes(),
                    range_end: Vec::new(),
                })),
            });
        }
        if ops.is_empty() {
            return Ok(Published {
                revision,
                puts: 0,
                deletes: 0,
            });
        }
        let response = member
            .txn(TxnRequest {
                compare,
                success: ops,
                failure: Vec::new(),
            })
            .await
            .map_err(etcd)?;
        if response.succeeded {
            let revision = response.header.map_or(0, |h| h.revision);
            tracing::info!(revision, puts, deletes, "published to etcd");
            return Ok(Published {
                revision,
                puts,
                deletes,
            });
        }
        tracing::debug!("another writer changed the groups; reading again");
    }
    Err(PublishError::Etcd(format!(
        "other writers changed the groups {ATTEMPTS} times in a row"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use xds_sansio::pb::google::protobuf::Any;
    use xds_sansio::types::{CLUSTER, ENDPOINT};

    /// An EDS cluster `c1` (its endpoints are `c1`'s `ClusterLoadAssignment`).
    const EDS_CLUSTER: &[u8] = b"\x0a\x02c1\x10\x03\x1a\x04\x0a\x02\x1a\x00";
    const ENDPOINTS: &[u8] = b"\x0a\x02c1";

    /// A file name and its resources (type URL, body).
    type GroupFile<'a> = (&'a str, Vec<(&'a str, &'a [u8])>);

    fn dir_with(files: &[GroupFile<'_>]) -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("xds-publish-unit-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, resources) in files {
            let response = DiscoveryResponse {
                resources: resources
                    .iter()
                    .map(|(type_url, body)| Any {
                        type_url: (*type_url).into(),
                        value: Bytes::copy_from_slice(body),
                    })
                    .collect(),
                ..Default::default()
            };
            let format = Format::from_path(file).unwrap();
            let bytes = FileCodec::new().encode(format, &response).unwrap();
            std::fs::write(dir.join(file), bytes).unwrap();
        }
        dir
    }

    #[test]
    fn a_directory_is_one_group_per_file_and_is_checked() {
        let dir = dir_with(&[
            (
                "edge.json",
                vec![
                    (CLUSTER.type_url, EDS_CLUSTER),
                    (ENDPOINT.type_url, ENDPOINTS),
                ],
            ),
            ("core.pb", vec![(ENDPOINT.type_url, ENDPOINTS)]),
        ]);
        let p = Publication::from_dir(&dir, &FileCodec::new()).unwrap();
        assert_eq!(p.groups().collect::<Vec<_>>(), ["core", "edge"]);
        p.check().unwrap();
        let keys = p.keys("/xds/").unwrap();
        assert_eq!(
            keys.keys().collect::<Vec<_>>(),
            [
                "/xds/core/envoy.config.endpoint.v3.ClusterLoadAssignment/c1",
                "/xds/edge/envoy.config.cluster.v3.Cluster/c1",
                "/xds/edge/envoy.config.endpoint.v3.ClusterLoadAssignment/c1",
            ]
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn inconsistent_wrapped_and_unreadable_directories_are_refused() {
        let dangling = dir_with(&[("edge.json", vec![(CLUSTER.type_url, EDS_CLUSTER)])]);
        let p = Publication::from_dir(&dangling, &FileCodec::new()).unwrap();
        assert!(matches!(p.check(), Err(PublishError::Refused { group, .. }) if group == "edge"));
        let wrapped = dir_with(&[("edge.json", vec![(RESOURCE_WRAPPER_TYPE_URL, ENDPOINTS)])]);
        assert!(matches!(
            Publication::from_dir(&wrapped, &FileCodec::new()),
            Err(PublishError::Wrapped(_))
        ));
        let unknown = dir_with(&[]);
        std::fs::write(unknown.join("edge.conf"), b"x").unwrap();
        assert!(matches!(
            Publication::from_dir(&unknown, &FileCodec::new()),
            Err(PublishError::UnknownFormat(_))
        ));
        let mut bad = Publication::new();
        assert!(matches!(
            bad.set_group("a/b", BTreeMap::new()),
            Err(PublishError::Key(_))
        ));
        for dir in [dangling, wrapped, unknown] {
            std::fs::remove_dir_all(dir).unwrap();
        }
    }
}
