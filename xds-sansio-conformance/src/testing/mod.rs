//! Test harnesses: a client and a server joined by a simulated stream.
//!
//! Usable from tests, benches and fuzz targets of this crate and of crates that embed it.
//! [`Sim`] is the stream, with either side optional; [`Pair`] runs both sides on it with
//! latency; the scenario runner ([`crate::script`]) runs on it too.

mod pair;
mod sim;

pub use pair::{Pair, PairConfig, Stuck};
pub use sim::{ClientSlot, Sim, TimerLivelock};
