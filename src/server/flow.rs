//! The rules SotW and delta share, each with one home: how a request is classified against
//! the nonces sent for its type (first / ACK / NACK / stale / plain update), and the TTL
//! heartbeat timers.

use alloc::collections::{BTreeMap, BTreeSet};
use alloc::string::String;
use alloc::vec::Vec;

use crate::message::Variant;
use crate::pb::google::rpc::Status;
use crate::time::Instant;

/// What a request is, relative to the responses this stream sent for its type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Kind {
    /// The first request of its type on this stream.
    First,
    /// Latest nonce, no `error_detail`: the client applied the response.
    Ack { nonce: String, version: String },
    /// Latest nonce with `error_detail`: the client rejected the response.
    Nack {
        nonce: String,
        version: String,
        error: Status,
    },
    /// A nonce that is not the latest sent for this type (envoy#10363: subscription changes
    /// still apply, but it is never an ACK or a NACK).
    Stale { nonce: String },
    /// No ACK/NACK to read: a subscription change, a repeated ACK (hint update at the same
    /// version), or a spontaneous delta request.
    Update,
    /// `error_detail` on a request that refers to no response.
    ErrorWithoutResponse,
}

/// The nonce bookkeeping of one type on one stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct Flow {
    /// The nonce and version of the latest response sent for this type.
    latest: Option<(String, String)>,
    /// Whether the latest response was already ACKed or NACKed (a repeat is an update).
    answered: bool,
    /// Whether that answer was a NACK.
    nacked: bool,
}

impl Flow {
    /// Records a response just sent.
    pub(crate) fn sent(&mut self, nonce: String, version: String) {
        self.latest = Some((nonce, version));
        self.answered = false;
        self.nacked = false;
    }

    /// Whether the client has ACKed the latest response (or none was sent).
    pub(crate) fn acked(&self) -> bool {
        self.latest.is_none() || (self.answered && !self.nacked)
    }

    /// The nonce and version of the latest response sent, while it is not answered.
    pub(crate) fn in_flight(&self) -> Option<(&str, &str)> {
        self.latest
            .as_ref()
            .filter(|_| !self.answered)
            .map(|(nonce, version)| (nonce.as_str(), version.as_str()))
    }

    /// Whether the latest response sent has not been answered yet (no ACK or NACK of its
    /// nonce arrived).
    pub(crate) fn awaiting_answer(&self) -> bool {
        self.latest.is_some() && !self.answered
    }

    /// Classifies a request that is not the first of its type. `nonce` is the request's
    /// `response_nonce`. NACK is decided by `error_detail` alone, never by the version.
    pub(crate) fn classify(
        &mut self,
        variant: Variant,
        nonce: &str,
        error: Option<&Status>,
    ) -> Kind {
        let Some((latest, version)) = &self.latest else {
            return if !nonce.is_empty() {
                Kind::Stale {
                    nonce: String::from(nonce),
                }
            } else if error.is_some() {
                Kind::ErrorWithoutResponse
            } else {
                Kind::Update
            };
        };
        if nonce.is_empty() {
            // Delta: a spontaneous request carries no nonce by design. SotW: the request
            // was sent before our latest response arrived, so it is stale.
            return match variant {
                Variant::Delta if error.is_some() => Kind::ErrorWithoutResponse,
                Variant::Delta => Kind::Update,
                Variant::Sotw => Kind::Stale {
                    nonce: String::new(),
                },
            };
        }
        if nonce != latest {
            return Kind::Stale {
                nonce: String::from(nonce),
            };
        }
        if self.answered {
            return Kind::Update;
        }
        self.answered = true;
        self.nacked = error.is_some();
        match error {
            Some(error) => Kind::Nack {
                nonce: latest.clone(),
                version: version.clone(),
                error: error.clone(),
            },
            None => Kind::Ack {
                nonce: latest.clone(),
                version: version.clone(),
            },
        }
    }
}

/// What building a response needs to know besides the store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendCtx {
    /// The time the response is built.
    pub(crate) now: Instant,
    /// Heartbeats are due `ttl / divisor` after sending (at least 2).
    pub(crate) divisor: u32,
    /// How delta reports names that do not exist.
    pub(crate) not_found: super::NotFoundReporting,
}

/// Heartbeat timers of the TTL resources of one type: when each must be refreshed.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timers {
    by_name: BTreeMap<String, Instant>,
    by_due: BTreeSet<(Instant, String)>,
}

impl Timers {
    pub(crate) fn schedule(&mut self, name: &str, due: Instant) {
        self.cancel(name);
        self.by_name.insert(String::from(name), due);
        self.by_due.insert((due, String::from(name)));
    }

    pub(crate) fn cancel(&mut self, name: &str) {
        if let Some(due) = self.by_name.remove(name) {
            self.by_due.remove(&(due, String::from(name)));
        }
    }

    /// Whether no heartbeat is scheduled.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    pub(crate) fn clear(&mut self) {
        self.by_name.clear();
        self.by_due.clear();
    }

    pub(crate) fn next(&self) -> Option<Instant> {
        self.by_due.first().map(|(due, _)| *due)
    }

    /// Removes and returns the names due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Vec<String> {
        let mut out = Vec::new();
        while let Some((due, _)) = self.by_due.first() {
            if *due > now {
                break;
            }
            if let Some((_, name)) = self.by_due.pop_first() {
                self.by_name.remove(name.as_str());
                out.push(name);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status() -> Status {
        Status {
            code: 13,
            message: "bad".into(),
            details: Vec::new(),
        }
    }

    #[test]
    fn ack_nack_stale_and_repeats() {
        let mut f = Flow::default();
        assert_eq!(f.classify(Variant::Sotw, "", None), Kind::Update);
        assert_eq!(
            f.classify(Variant::Sotw, "", Some(&status())),
            Kind::ErrorWithoutResponse
        );
        assert!(matches!(
            f.classify(Variant::Sotw, "9", None),
            Kind::Stale { .. }
        ));
        f.sent("1".into(), "X".into());
        assert!(matches!(
            f.classify(Variant::Sotw, "0", None),
            Kind::Stale { .. }
        ));
        assert!(matches!(
            f.classify(Variant::Sotw, "", None),
            Kind::Stale { .. }
        ));
        assert_eq!(f.classify(Variant::Delta, "", None), Kind::Update);
        assert_eq!(
            f.classify(Variant::Sotw, "1", None),
            Kind::Ack {
                nonce: "1".into(),
                version: "X".into()
            }
        );
        // The same nonce again is a hint update, not a second ACK.
        assert_eq!(f.classify(Variant::Sotw, "1", None), Kind::Update);
        f.sent("2".into(), "Y".into());
        assert!(matches!(
            f.classify(Variant::Delta, "2", Some(&status())),
            Kind::Nack { .. }
        ));
    }

    #[test]
    fn timers_pop_in_order() {
        let mut t = Timers::default();
        t.schedule("b", Instant::from_secs(2));
        t.schedule("a", Instant::from_secs(3));
        t.schedule("a", Instant::from_secs(1));
        assert_eq!(t.next(), Some(Instant::from_secs(1)));
        assert_eq!(t.pop_due(Instant::from_secs(2)), ["a", "b"]);
        assert_eq!(t.next(), None);
    }
}
