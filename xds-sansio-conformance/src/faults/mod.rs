//! Faults by rule, for a test control plane: drop, delay, duplicate or reorder responses,
//! send a wrong or stale nonce, resend a NACKed response, close a stream after N
//! responses, refuse a stream with a status. Deterministic from a seed: the same plan and
//! seed fire the same faults on the same streams, run after run.
//!
//! A [`FaultPlan`] is parsed from text ([`rule`] has the syntax). The server gives each
//! stream its [`StreamFaults`] ([`FaultPlan::stream`], numbered from 1 in the order streams
//! open), a Sans-IO machine between the server's stream and the wire: the adapter's
//! `XdsServerBuilder::faults` (and `xds-sansio serve --fault`) drive it.
//!
//! Decisions:
//! - **A fault is what a real server or network does wrong**, so the client under test
//!   meets it exactly as it would in the field: the server's own stream state is not told
//!   (a dropped response stays pending there, as on a server whose message was lost).
//! - **Nonces**: a wrong nonce is one the server never sent; a stale nonce is the one of
//!   the response sent just before on the stream. The protocol text puts the duty on the
//!   server ("The management server should not send a DiscoveryResponse for any
//!   DiscoveryRequest that has a stale nonce"); the client only echoes what it got
//!   ("specifying the last version successfully applied and the nonce provided by the
//!   management server"). So a client under test should apply both responses and answer
//!   with the nonce it received; the server here then ignores that answer as stale, as the
//!   rule says, and the test sees what the client does next.
//! - **Resending a NACKed response** gives it a fresh nonce, as a server that rebuilds the
//!   same version does; the client should NACK it again and keep what it had.

pub mod rule;

mod rng;
mod stream;
#[cfg(test)]
mod tests;

use alloc::vec::Vec;

pub use rule::{parse_rules, FaultKind, FaultParseError, FaultRule, FaultStatus, Selector};
pub use stream::{FaultEvent, FaultTransmit, StreamFaults};

/// The rules and the seed of a test control plane's faults.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultPlan {
    /// The rules, applied in order to each response.
    pub rules: Vec<FaultRule>,
    /// Where every random draw starts.
    pub seed: u64,
}

impl FaultPlan {
    /// A plan from its text form (one rule per line, [`rule`]) and a seed.
    pub fn parse(text: &str, seed: u64) -> Result<FaultPlan, FaultParseError> {
        Ok(FaultPlan {
            rules: parse_rules(text)?,
            seed,
        })
    }

    /// Whether the plan has no rule (a server without faults).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The faults of the `ordinal`-th stream the server opened (from 1).
    pub fn stream(&self, ordinal: u32) -> StreamFaults {
        StreamFaults::new(self.rules.clone(), self.seed, ordinal)
    }
}
