//! One side of a scenario played by a real implementation (`xds-sansio conform`): the
//! runner sends it what the scenario's other side says and checks what it sends against
//! the scenario's lines. The caller owns the network, the hooks and real time; the runner
//! stays Sans-IO.
//!
//! Decisions:
//! - **The real implementation takes the model's place.** In a scenario where the model
//!   plays the client (`model: client` or `both`), a real client can stand in for the
//!   model's client: its requests are matched against the `C->S` lines exactly as the
//!   model's would be, and the scenario's server (built responses, or the model's server in
//!   `model: both`) answers it. The same holds for a real server.
//! - **A real client's requests are matched per type.** Over ADS, the protocol fixes the
//!   order of each type's requests (its ACKs and NACKs answer its responses in turn), not
//!   the order between types: a client may subscribe to what a response names before or
//!   after it ACKs the response, and may open a new stream with its types in any order
//!   (xDS protocol, "Aggregated Discovery Service": one stream carries each type's
//!   independent conversation). A `C->S` line takes the real client's oldest request of
//!   its type; requests of other types that came first are held for their own lines, and
//!   any left at the end are reported like other messages the scenario does not account
//!   for. The model's own requests stay in its order.
//! - **What cannot be observed is skipped, and says so.** A real implementation's events,
//!   cache and statuses are its own: such an expectation passes with a note instead of a
//!   guess. `expect ... quiet` is observable: the real side must stay silent for the
//!   remote's quiet period.
//! - **Commands go through the implementer's hooks.** `client subscribe` and the like reach
//!   a real client through [`Remote::client_commands`]; a `server set` line becomes one
//!   publication ([`Remote::publish`]) of the store operations it stands for, with the
//!   bodies and versions the scenario gives.
//! - **Bodies may be real.** A real client validates what it is sent (a Cluster must be a
//!   valid Cluster), so [`Remote::body`] may give the body a `name:tag` stands for;
//!   without one, the scenario's placeholder body is used.

use alloc::string::String;
use core::time::Duration;

use bytes::Bytes;

use crate::script::ast::{ClientCommand, ServerCommand, Side};
use xds_sansio::message::{Request, Response};
use xds_sansio::server::StoreOp;

/// A message between the runner and a real implementation.
#[derive(Clone, Debug, PartialEq)]
// One per message; boxing would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Wire {
    /// A request (from a real client, or to a real server).
    Request(Request),
    /// A response (from a real server, or to a real client).
    Response(Response),
}

/// A real implementation playing one side of a scenario, reached by the caller (over gRPC,
/// in `xds-sansio conform`). Every method may block for real time; an `Err` is a failure
/// of the harness or the hook (the line fails with it), never of the protocol.
pub trait Remote {
    /// The side the real implementation plays.
    fn side(&self) -> Side;
    /// Sends it a message: a response to a real client, a request to a real server.
    fn send(&mut self, message: Wire) -> Result<(), String>;
    /// The next message it sent, waiting at most `within` (`None`: the remote's own
    /// patience for a message a line expects); `Ok(None)` when nothing came.
    fn receive(&mut self, within: Option<Duration>) -> Result<Option<Wire>, String>;
    /// Whether it stays silent for the remote's quiet period: `Ok(Some(message))` is what
    /// it sent instead.
    fn quiet(&mut self) -> Result<Option<Wire>, String>;
    /// Real time passes (`wait`); what it sends meanwhile is kept for later lines.
    fn wait(&mut self, duration: Duration) -> Result<(), String>;
    /// The stream breaks (`disconnect`): the harness ends it.
    fn disconnect(&mut self) -> Result<(), String>;
    /// A new stream (`connect`): the harness opens it, or waits for the real client to.
    fn connect(&mut self) -> Result<(), String>;
    /// Commands of the client application (`client subscribe ...`), for a real client:
    /// the implementer's hook.
    fn client_commands(&mut self, commands: &[ClientCommand]) -> Result<(), String>;
    /// Store operations of one `server` line, as one publication, for a real server: the
    /// implementer's publish hook.
    fn publish(&mut self, ops: &[StoreOp]) -> Result<(), String>;
    /// A `server` line with resource errors (`server error`, `server clear-error`) besides
    /// its operations, as one publication. By default a remote cannot publish errors and
    /// the line fails; without errors it is [`Remote::publish`].
    fn publish_with_errors(
        &mut self,
        ops: &[StoreOp],
        errors: &[&ServerCommand],
    ) -> Result<(), String> {
        if errors.is_empty() {
            self.publish(ops)
        } else {
            Err("server error: this remote cannot publish resource errors".into())
        }
    }
    /// The body `name:tag` of a type stands for, if the implementer gives real ones.
    fn body(&self, type_url: &str, name: &str, tag: &str) -> Option<Bytes> {
        let _ = (type_url, name, tag);
        None
    }
}
