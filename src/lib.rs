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

pub mod message;
pub mod pb;
pub mod resource;
pub mod server;
pub mod time;
pub mod types;

pub use message::{Request, Response, Transport, Variant};
pub use server::{ResourceStore, ServerConfig, ServerEvent, ServerStream, StreamSet};
pub use time::Instant;
