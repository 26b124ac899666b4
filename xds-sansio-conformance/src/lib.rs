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
//! The conformance toolkit of [`xds_sansio`]: what other implementations test themselves
//! against, beside the core that owns the protocol.
//!
//! - [`script`]: the scenario language (the protocol text's sequence-diagram notation,
//!   made executable), its parser, its replay on the model, and the generator of
//!   differential-fuzzing cases.
//! - [`check`]: the checker of recorded conversations, with the record format (JSON lines).
//! - [`transcript`]: a conversation as one side saw it, and the scenario notation.
//! - [`faults`]: faults by rule for a test control plane (drop, delay, duplicate,
//!   reorder, wrong or stale nonces, resent NACKed responses, closes, refusals), from a seed.
//! - [`testing`]: `Sim`, a simulated stream, and `Pair`, a client and a server on it.
//!
//! The core never depends on this crate; this crate reads the core only through its
//! public API, so a rule lives once, in the core, and the toolkit judges by it.
//!
//! # Features
//!
//! - `arbitrary`: `arbitrary::Arbitrary` for the generated conversations, so a `cargo
//!   fuzz` target of another crate can drive differential fuzzing.
//! - `fuzzing` (hidden): the bodies of the fuzz targets in `fuzz/`.
extern crate alloc;

pub mod check;
pub mod faults;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod script;
pub mod testing;
pub mod transcript;
