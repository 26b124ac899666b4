//! What a client did with the responses of one type on one stream: the version it last
//! ACKed, the version it last NACKed with its error (until a later ACK), and the response
//! it has not answered yet, each with the time it happened. The material of a per-node
//! status (a management server's CSDS, a debug page): no xDS library reports a node's ACK
//! apart from its NACK (go-control-plane#954, istio#31873).

use alloc::string::String;

use super::flow::Kind;
use crate::pb::google::rpc::Status;
use crate::time::Instant;

/// One type's applied state on one stream ([`super::ServerStream::applied`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AppliedState {
    /// The type URL.
    pub type_url: String,
    /// The version the client last ACKed, and when.
    pub acked: Option<(String, Instant)>,
    /// The version the client NACKed since its last ACK, if any.
    pub nacked: Option<Nacked>,
    /// The response sent and not answered yet, if any.
    pub in_flight: Option<InFlight>,
}

/// A NACK: the version rejected, the client's `error_detail`, and when.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Nacked {
    /// The rejected version.
    pub version: String,
    /// The client's `error_detail`.
    pub error: Status,
    /// When the NACK arrived.
    pub at: Instant,
}

/// A response waiting for its ACK or NACK.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlight {
    /// Its nonce.
    pub nonce: String,
    /// Its version.
    pub version: String,
    /// When it was sent.
    pub since: Instant,
}

/// The applied state of one type, kept as the stream sends and the client answers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Applied {
    acked: Option<(String, Instant)>,
    nacked: Option<Nacked>,
    in_flight: Option<InFlight>,
}

impl Applied {
    /// A response left.
    pub(crate) fn sent(&mut self, nonce: &str, version: &str, now: Instant) {
        self.in_flight = Some(InFlight {
            nonce: String::from(nonce),
            version: String::from(version),
            since: now,
        });
    }

    /// The client answered (an ACK or a NACK of the latest response); other kinds of
    /// request change nothing here.
    pub(crate) fn answered(&mut self, kind: &Kind, now: Instant) {
        match kind {
            Kind::Ack { version, .. } => {
                self.acked = Some((version.clone(), now));
                self.nacked = None;
                self.in_flight = None;
            }
            Kind::Nack { version, error, .. } => {
                self.nacked = Some(Nacked {
                    version: version.clone(),
                    error: error.clone(),
                    at: now,
                });
                self.in_flight = None;
            }
            _ => {}
        }
    }

    /// The state as the application reads it.
    pub(crate) fn state(&self, type_url: &str) -> AppliedState {
        AppliedState {
            type_url: String::from(type_url),
            acked: self.acked.clone(),
            nacked: self.nacked.clone(),
            in_flight: self.in_flight.clone(),
        }
    }
}
