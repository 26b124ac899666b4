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
//! xds-sansio
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

pub mod client;
pub mod message;
pub mod pb;
pub mod resource;
pub mod time;
pub mod types;

pub use client::{Client, ClientConfig, ClientError, ClientEvent};
pub use message::{Request, Response, Transport, Variant};
pub use time::Instant;
