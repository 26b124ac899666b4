//! Test harnesses (feature `testing`): a client and a server joined by a simulated stream.
//!
//! Usable from tests, benches and fuzz targets of this crate and of crates that embed it.

mod pair;

pub use pair::{Pair, PairConfig, Stuck};
