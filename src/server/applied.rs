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

/// The applied state of one type, kept as the stream sends and the client answers. Cheap
/// on the send path (one time stamp); the response in flight is read from the type's
/// nonce bookkeeping, and the ACKed version reuses its buffer.
#[derive(Clone, Debug, Default)]
pub(crate) struct Applied {
    acked: Option<Instant>,
    acked_version: String,
    nacked: Option<Nacked>,
    sent_at: Instant,
}

impl Applied {
    /// A response left.
    pub(crate) fn sent(&mut self, now: Instant) {
        self.sent_at = now;
    }

    /// The client answered (an ACK or a NACK of the latest response); other kinds of
    /// request change nothing here.
    pub(crate) fn answered(&mut self, kind: &Kind, now: Instant) {
        match kind {
            Kind::Ack { version, .. } => {
                self.acked_version.clear();
                self.acked_version.push_str(version);
                self.acked = Some(now);
                self.nacked = None;
            }
            Kind::Nack { version, error, .. } => {
                self.nacked = Some(Nacked {
                    version: version.clone(),
                    error: error.clone(),
                    at: now,
                });
            }
            _ => {}
        }
    }

    /// The state as the application reads it; `in_flight` is the latest response sent
    /// when it is not answered yet (`(nonce, version)`).
    pub(crate) fn state(&self, type_url: &str, in_flight: Option<(&str, &str)>) -> AppliedState {
        AppliedState {
            type_url: String::from(type_url),
            acked: self.acked.map(|at| (self.acked_version.clone(), at)),
            nacked: self.nacked.clone(),
            in_flight: in_flight.map(|(nonce, version)| InFlight {
                nonce: String::from(nonce),
                version: String::from(version),
                since: self.sent_at,
            }),
        }
    }
}
