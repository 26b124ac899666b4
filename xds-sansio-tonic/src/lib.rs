#![warn(missing_docs)]
// Peer input must never panic: no unwrap/expect/indexing/panic in library code. Tests may.
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic,
        clippy::unreachable,
        clippy::todo,
        clippy::unimplemented
    )
)]
//! A production gRPC xDS management server and client (tokio + tonic) on the
//! [`xds_sansio`] state machines.
//!
//! A client, `examples/watch_listener.rs`: a gRPC bootstrap file, a watch on a listener,
//! the complete configuration it resolves to printed at every change (listener, route
//! configuration, clusters, endpoints: gRPC A74's dependency manager), and CSDS served
//! for debugging tools ([`client`], [`csds`]):
//!
//! ```no_run
#![doc = include_str!("../examples/watch_listener.rs")]
//! ```
//!
//! The smallest useful server, `examples/hello.rs`:
//!
//! ```no_run
#![doc = include_str!("../examples/hello.rs")]
//! ```
//!
//! A complete one, `examples/file_server.rs`: node groups from files, reloaded when they
//! change.
//!
//! ```no_run
#![doc = include_str!("../examples/file_server.rs")]
//! ```
//!
//! # What it does
//!
//! The crate moves bytes and time between tonic and the core's state machines, nothing
//! else: every protocol rule (ACK/NACK, nonces, wildcard, versions, what to send when) is
//! the core's ([`xds_sansio::server`]). What it adds is what every embedding would write
//! again (see [`server`] for each decision):
//!
//! - every discovery service of the catalog: ADS and the per-type services (listeners,
//!   routes, scoped routes, virtual hosts, clusters, endpoints, secrets, runtime, extension
//!   configs), SotW and delta, v3 and v2 ([`wire::SERVICES`]), each response sent as the core encoded it
//!   (`poll_response_encoded`: bodies are never re-encoded);
//! - node groups: a function maps a node to a group, each group has its own
//!   [`ResourceStore`](xds_sansio::ResourceStore), a publish wakes only the streams of the
//!   group it concerns, and several types published at once are one revision;
//! - flow control where the newest state wins: a slow or stalled peer never blocks the
//!   publisher or another stream, and never holds a queue of stale responses;
//! - limits (streams, message sizes, time to the first request, the core's per-request
//!   bounds), each a clear gRPC status and a tracing event;
//! - an authorization hook that sees the peer (address, metadata, client certificate with
//!   feature `tls`) and the node a stream claims: a stream may only read the groups it is
//!   allowed to, else `PERMISSION_DENIED`;
//! - [`Callbacks`] (stream opened/closed, request, response, ACK, NACK, publish), metrics
//!   through the `metrics` facade ([`server::metrics`]), a `tracing` span per stream, the
//!   gRPC health service, graceful shutdown, keepalive and compression through tonic.
//!
//! The client side ([`client`]): [`client::XdsClient`] reads gRPC's bootstrap, owns the
//! connections (gRPC's jittered backoff seeded from the OS, fallback and revert between
//! servers as gRPC A71 says, TLS through tonic), serves [`client::ConfigWatch`]es (a
//! listener's complete configuration, through the core's dependency manager: the usual
//! way to watch a listener) and [`client::Watch`]es (one resource as it is) on the core's
//! events, with the application's validators deciding ACK or NACK, and answers CSDS
//! ([`csds`]). One gRPC call, the plumbing the client, the server and the CLI share, is
//! [`call`]: connect, start, pump, [`call::Tap`], and [`client::run_stream`], one core
//! `Client` over one call for programs that run their own loop.
// Links to feature-gated modules only when they exist (rustdoc would warn).
#![cfg_attr(
    feature = "record",
    doc = "[`record`] (feature `record`) records conversations for the conformance checker."
)]
#![cfg_attr(
    not(feature = "record"),
    doc = "`record` (feature `record`) records conversations for the conformance checker."
)]
//!
//! # Features
//!
//! - `tls`: TLS and mutual TLS through tonic (rustls, ring); [`Peer`] then carries the
//!   client's certificate chain.
//! - `gzip`, `zstd`: compression through tonic.
//! - `faults`: `XdsServerBuilder::faults`, a test control plane that injects faults by
//!   rule, from a seed (docs/test-control-plane.md).
#![cfg_attr(
    feature = "record",
    doc = "- `record`: [`record::Recorder`], JSON lines for `xds-sansio check`."
)]
#![cfg_attr(
    not(feature = "record"),
    doc = "- `record`: `record::Recorder`, JSON lines for `xds-sansio check`."
)]
#![cfg_attr(
    feature = "envoy-types",
    doc = "- `envoy-types`: [`envoy_types`], conversions between the `envoy-types` crate's"
)]
#![cfg_attr(
    not(feature = "envoy-types"),
    doc = "- `envoy-types`: `envoy_types`, conversions between the `envoy-types` crate's"
)]
//!   discovery messages and the core's, through bytes.
#![cfg_attr(
    feature = "etcd",
    doc = "- `etcd`: [`etcd`], replicas fed from etcd and publications written into it."
)]
#![cfg_attr(
    not(feature = "etcd"),
    doc = "- `etcd`: `etcd`, replicas fed from etcd and publications written into it."
)]

pub mod call;
pub mod client;
pub mod csds;
#[cfg(feature = "envoy-types")]
pub mod envoy_types;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fail_static;
#[cfg(feature = "record")]
pub mod record;
pub mod server;
pub mod wire;

pub use server::{
    Authorize, Callbacks, Peer, ServeError, StreamInfo, XdsServer, XdsServerBuilder, DEFAULT_GROUP,
};
