//! Replicas on etcd (feature `etcd`): several management servers behind one name, each a
//! cache of one source of truth, and a client that moves between them is sent nothing it
//! holds.
//!
//! - [`EtcdSource`] feeds an [`XdsServer`](crate::XdsServer) from a key prefix: it loads the
//!   prefix at a revision, then watches from it and applies each etcd revision as one
//!   publication per group ([`source`] says what happens on each failure).
//! - [`publish()`] writes whole node groups into etcd in one transaction, after checking them
//!   as the server would ([`Publication::check`]); `xds-sansio publish --etcd` is its
//!   command.
//! - [`keys`]: where a resource lives (`PREFIX GROUP/TYPE/NAME`).
//! - [`wire`]: the part of etcd's v3 API used, declared here (no `protoc` at build time).
//!
//! `docs/deployment.md` describes a deployment: replicas, sizing etcd, and each failure.
//!
//! # Metrics
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `xds_etcd_connected` | gauge | 1 while fed |
//! | `xds_etcd_revision` | gauge | the last etcd revision applied |
//! | `xds_etcd_publications_total` | counter | |
//! | `xds_etcd_reloads_total` | counter | loads of the whole prefix |
//! | `xds_etcd_disconnects_total` | counter | |
//! | `xds_etcd_rejected_total` | counter | `reason`: `key`, `store` |

pub mod keys;
pub mod publish;
pub mod source;
pub mod wire;

pub use publish::{publish, Publication, PublishError, Published};
pub use source::{EtcdSource, Rejected, SourceConfig, SourceError, SourceStatus, HEALTH_SERVICE};

/// The key prefix used unless the application sets one.
pub const DEFAULT_PREFIX: &str = "/xds/";
