//! What the client tells the application: cache mutations, verdicts on responses,
//! readiness, validation requests, and the errors of misused methods.

use alloc::collections::VecDeque;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;

use super::changes::{Change, ChangeBatch, RemovalReason};
use super::defect::ResponseDefect;
use crate::name::NameParseError;
use crate::text::SharedStr;

/// Why a response was dropped without an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum IgnoreReason {
    /// The type URL was never subscribed on this client (the protocol says: ignore, no ACK).
    NeverSubscribed,
    /// A SotW response on an incremental client or the reverse.
    WrongVariant,
    /// The type URL does not travel on this per-type stream.
    NotCarried,
    /// No stream is up (`handle_response` between `disconnected` and `connected`).
    NotConnected,
}

/// A ticket for a deferred validation; hand it back to
/// [`Client::verdict`](super::Client::verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VerdictTicket(pub(crate) u64);

/// One resource the application must judge, in [`ClientEvent::ValidationNeeded`].
#[derive(Clone, Debug, PartialEq)]
pub struct PendingResource {
    /// The resource name.
    pub name: SharedStr,
    /// The version it arrives with.
    pub version: SharedStr,
    /// Its body, a slice of the response buffer.
    pub body: Bytes,
}

/// Something the application should know; drain with
/// [`Client::poll_event`](super::Client::poll_event) after every input.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ClientEvent {
    /// A resource was added or its body changed (not emitted when only the version or TTL
    /// changed).
    Upserted {
        /// Type URL.
        type_url: SharedStr,
        /// Resource name.
        name: SharedStr,
        /// Its version (SotW: the response version unless a `Resource` wrapper gave one).
        version: SharedStr,
        /// The body: a handle to the cache's copy of it (no copy of its own).
        body: Bytes,
        /// Other names the resource goes by (incremental).
        aliases: Vec<SharedStr>,
    },
    /// With [`EventShape::Batched`](super::EventShape::Batched): a run of changes of one
    /// type, in place of their `Upserted`, `Removed` and `DoesNotExist` events; read the
    /// resources with [`Client::changes`](super::Client::changes).
    Changed {
        /// Type URL.
        type_url: SharedStr,
        /// What changed, in order.
        changes: ChangeBatch,
    },
    /// A resource left the cache.
    Removed {
        /// Type URL.
        type_url: SharedStr,
        /// Resource name.
        name: SharedStr,
        /// Why.
        reason: RemovalReason,
    },
    /// A subscribed name is known not to exist (timer, incremental removal or body-less
    /// resource, or absence from a full-state SotW response).
    DoesNotExist {
        /// Type URL.
        type_url: SharedStr,
        /// The subscribed name.
        name: SharedStr,
    },
    /// The server reported an error for a subscribed resource, or for the whole wildcard
    /// subscription, in `resource_errors` (xRFC TP3). Before gRPC A88 a NOT_FOUND is
    /// [`ClientEvent::DoesNotExist`] instead; a held body stays held unless A88's
    /// `fail_on_data_errors` dropped it ([`ClientEvent::Removed`] first).
    ResourceError {
        /// Type URL.
        type_url: SharedStr,
        /// The resource name; `""` or `*` (or an `xdstp` glob) for the subscription as a
        /// whole.
        name: SharedStr,
        /// The `google.rpc.Code`.
        code: i32,
        /// The server's message.
        message: String,
    },
    /// The server deleted a held resource and
    /// [`ClientConfig::ignore_resource_deletion`](super::ClientConfig::ignore_resource_deletion)
    /// kept it (gRPC A53: worth a warning, since the server and the client now disagree).
    /// Once per deletion: again only after the resource has arrived anew.
    DeletionIgnored {
        /// Type URL.
        type_url: SharedStr,
        /// Resource name.
        name: SharedStr,
    },
    /// A response was accepted; its ACK is queued.
    Acked {
        /// Type URL.
        type_url: SharedStr,
        /// SotW: the version now applied; incremental: `system_version_info`.
        version: SharedStr,
        /// The response nonce.
        nonce: SharedStr,
    },
    /// A response was rejected; its NACK is queued.
    Nacked {
        /// Type URL.
        type_url: SharedStr,
        /// The rejected version (SotW `version_info`, incremental `system_version_info`).
        version: SharedStr,
        /// The response nonce.
        nonce: SharedStr,
        /// The message sent in `error_detail` (capped): the validator's text, as the client
        /// produced it. The server sees it as a `google.rpc.Status` with this message and
        /// code `INTERNAL` ([`NACK_CODE`](crate::client::NACK_CODE), 13), as Envoy sends
        /// (gRPC's clients send `INVALID_ARGUMENT`; the protocol text names no code and
        /// servers act on the message only), hence `ServerEvent::Nacked::error` is a
        /// `Status` there.
        error: String,
        /// The names whose content was rejected; empty when the response as a whole broke a
        /// protocol rule.
        rejected: Vec<SharedStr>,
        /// The protocol rule the response broke, when it was rejected whole for one (its
        /// `Display` is `error`); `None` when the application rejected content.
        defect: Option<ResponseDefect>,
    },
    /// Every name subscribed before the type's first answer has arrived, been rejected or is
    /// known not to exist (for a wildcard: the first response was handled). Once per type,
    /// and once more after a wildcard is added to a type already ready.
    Ready {
        /// Type URL.
        type_url: SharedStr,
    },
    /// Deferred validation: judge these resources and call
    /// [`Client::verdict`](super::Client::verdict). No request of this type is sent until
    /// then.
    ValidationNeeded {
        /// The ticket to answer with.
        ticket: VerdictTicket,
        /// Type URL.
        type_url: SharedStr,
        /// SotW `version_info` / incremental `system_version_info`.
        version: SharedStr,
        /// The resources with a body that would be applied.
        resources: Vec<PendingResource>,
    },
    /// A response was dropped unanswered.
    Ignored {
        /// Its type URL.
        type_url: SharedStr,
        /// Its nonce.
        nonce: SharedStr,
        /// Why.
        reason: IgnoreReason,
    },
}

/// The application misused a method; the client's state is unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// A per-type stream cannot carry this type URL.
    TypeNotCarried,
    /// The type URL is empty.
    EmptyTypeUrl,
    /// An empty name, or no names for a type that has no legacy wildcard.
    EmptyName,
    /// A name is longer than [`Limits::max_name_len`](super::Limits) or a type would hold
    /// more than [`Limits::max_names_per_type`](super::Limits).
    LimitExceeded,
    /// The ticket is unknown, already answered, or from a stream that has since broken.
    UnknownTicket,
    /// A name starts with `xdstp://` but is not a well-formed xdstp name (xDS TP1).
    MalformedXdstpName(NameParseError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientError::TypeNotCarried => "this per-type stream does not carry that type URL",
            ClientError::EmptyTypeUrl => "empty type URL",
            ClientError::EmptyName => {
                "empty resource name, or no names for a type without legacy wildcard"
            }
            ClientError::LimitExceeded => "a configured limit would be exceeded",
            ClientError::UnknownTicket => "unknown or stale verdict ticket",
            ClientError::MalformedXdstpName(e) => return write!(f, "malformed xdstp name: {e}"),
        })
    }
}

#[cfg(feature = "std")]
impl std::error::Error for ClientError {}

/// Adds one change to the batch of `type_url` at the back of the queue, opening a new
/// batch (room for `hint` changes) when the back is anything else.
#[inline]
pub(crate) fn push_batched(
    events: &mut VecDeque<ClientEvent>,
    hint: usize,
    type_url: &SharedStr,
    name: SharedStr,
    change: Change,
    at: Option<usize>,
) {
    if let Some(ClientEvent::Changed {
        type_url: open,
        changes,
    }) = events.back_mut()
    {
        if open == type_url {
            changes.push(name, change, at);
            return;
        }
    }
    let mut changes = ChangeBatch::with_capacity(hint.max(1));
    changes.push(name, change, at);
    events.push_back(ClientEvent::Changed {
        type_url: type_url.clone(),
        changes,
    });
}
