#![no_std]
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
//! The xDS protocol as pure, Sans-IO state machines.
//!
//! xDS is Envoy's discovery protocol: a client (Envoy, a gRPC library) subscribes to named
//! resources of a type (Listener, RouteConfiguration, Cluster, ClusterLoadAssignment,
//! Secret, ...) and a management server sends them, over gRPC (State of the World or
//! incremental, one stream per type or aggregated), REST-JSON polling, or files. This
//! crate owns every rule of that protocol and none of its I/O.
//!
//! # The contract
//!
//! Written once, here; each machine's type doc names its methods by kind, and each
//! `poll_*` says when to call it.
//!
//! - **Four kinds of method**: reads (`&self`), inputs (`handle_*`, and a client's
//!   `connected` / `disconnected`), commands from the application (which may return a
//!   typed error and then change nothing), outputs (`poll_*`).
//! - **Inputs**: decoded messages (`handle_*`), application commands and `now`, an
//!   [`Instant`] the caller supplies. The crate never reads a clock.
//! - **Outputs**: drained after every input until they return `None`: messages to send
//!   (`poll_*`), events for the application, and the next deadline (`poll_timeout`).
//!   While output is queued (or, on a server stream, work waits for the next poll),
//!   `poll_timeout` returns the last `now`, so a loop that sleeps until it never sleeps
//!   on pending output.
//! - **Time**: never move `now` backwards (durations saturate if you do); call
//!   `handle_timeout(now)` once the deadline has passed; extra calls are harmless.
//! - **Determinism**: the same inputs give the same outputs, byte for byte; nothing
//!   depends on hash-map iteration order.
//! - **The peer cannot crash us**: anything from the wire becomes state and output (a
//!   NACK, an error event, a protocol error), never a panic and never an `Err` from an
//!   input method. Misuse by the caller returns a typed error.
//! - **Zero-copy**: resource bodies are [`bytes::Bytes`] slices of the buffer a message was
//!   decoded from, from decode to cache to re-encode. One exception, for memory: when the
//!   bodies a response puts in the client's cache are less than half of the bodies it
//!   brought, they are copied into one buffer of their own, so that a few changed bodies
//!   do not keep the whole response buffer alive.
//!
//! # Modules
//!
//! - [`pb`]: the wire types, generated from our own `proto/` (wire-compatible with
//!   `envoy.service.discovery.v3`, newest fields included) and checked in.
//! - [`types`]: the resource type catalog and the per-type rules (full-state, wildcard,
//!   ADS order). Unknown type URLs are opaque types, not errors.
//! - [`name`]: resource names, the wildcard and `xdstp://` URNs.
//! - [`resource`]: reading a resource's name from its opaque body.
//! - [`refs`]: the names a resource refers to (LDS -> RDS -> CDS -> EDS, SDS, aggregate
//!   clusters), read from its encoded body without a full decode.
//! - [`message`]: the variant (SotW or delta) and transport (ADS or per type) of a stream.
//! - [`time`]: the caller-supplied clock.
//! - [`text`]: [`SharedStr`](text::SharedStr), the zero-copy string names, versions and
//!   type URLs travel in.
//! - [`codec`]: the file formats (binary protobuf, JSON, YAML, text format) and, with
//!   feature `json`, canonical proto3 JSON for every message.
//! - [`file`](mod@file): filesystem subscriptions (binary protobuf, JSON, YAML, text format).
//! - `rest` (feature `json`): REST-JSON polling, client and server side.
//! - [`single_type`]: the SotW client of one type without a stream, which REST-JSON
//!   polling and filesystem subscriptions both hold.
//!
//! # Features
//!
//! - `std` (default): `std::error::Error` impls and [`time::StdClock`]. Without it the
//!   crate is `no_std` + `alloc`.
//! - `json`: canonical proto3 JSON through prost-reflect; also enables `rest`.
//! - `yaml`: YAML files for [`file`](mod@file) (serde_norway); implies `json`.
//! - `textproto`: protobuf text format files for [`file`](mod@file) (prost-reflect); implies `json`.
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod client;
pub mod codec;
pub mod file;
pub mod message;
pub mod name;
pub mod pb;
mod queue;
pub mod refs;
pub mod resource;
#[cfg(feature = "json")]
pub mod rest;
pub mod server;
pub mod single_type;
pub mod text;
pub mod time;
pub mod types;

pub use client::{Client, ClientConfig, ClientError, ClientEvent};
pub use message::{Request, Response, Transport, Variant};
pub use server::{ResourceStore, ServerConfig, ServerEvent, ServerStream, StreamSet};
pub use time::Instant;
