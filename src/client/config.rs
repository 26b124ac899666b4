//! How a [`Client`](super::Client) behaves: variant, transport, node, timers, NACK policy and
//! limits.

use core::time::Duration;

use super::changes::EventShape;

use crate::message::{Transport, Variant};
use crate::pb::envoy::config::core::v3::Node;

/// What happens to the valid resources of a response in which some resource was rejected
/// by the application's validator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NackPolicy {
    /// Envoy: reject the whole response; nothing of it is applied.
    #[default]
    RejectAll,
    /// gRPC A46: apply the resources that passed validation, keep the previous value of those
    /// that did not, and still NACK the response (with the previous good version).
    KeepValid,
}

/// What a data error does to a resource the client holds (gRPC A88, "Handling Data
/// Errors"): a deletion (a full-state LDS/CDS response that leaves it out, an incremental
/// removal, a body-less does-not-exist marker), a `resource_errors` entry of code
/// NOT_FOUND or PERMISSION_DENIED, or (with [`DataErrors::FailOnDataErrors`]) a NACK of it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DataErrors {
    /// Before A88 (xRFC TP3 and gRPC A53): a deletion drops the held resource unless
    /// [`ClientConfig::ignore_resource_deletion`]; a NOT_FOUND entry is a deletion; every
    /// other code keeps what is held; a NACK keeps the previous value.
    #[default]
    Legacy,
    /// gRPC A88 without the `fail_on_data_errors` server feature: every data error keeps
    /// the held resource ("the new default behavior is to treat all data errors as
    /// transient, including resource deletion"); a deletion leaves it held with status
    /// `DoesNotExist`, an entry with status `ReceivedError`.
    /// [`ClientConfig::ignore_resource_deletion`] is ignored (A88 deprecates it).
    KeepCached,
    /// gRPC A88 with `fail_on_data_errors`: every data error drops the held resource ("we
    /// will delete the existing cached resource, if any"), a NACK of it too.
    /// [`ClientConfig::ignore_resource_deletion`] is ignored.
    FailOnDataErrors,
}

/// Bounds on what a peer can make the client hold. A response that would exceed one is
/// NACKed with a message naming the limit and changes no state; a subscription that would
/// exceed one is refused with [`ClientError::LimitExceeded`](super::ClientError).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Limits {
    /// Names subscribed plus resources held, per type URL.
    pub max_names_per_type: usize,
    /// Resources (and removals) in one response.
    pub max_resources_per_response: usize,
    /// Bytes in one resource name (or alias).
    pub max_name_len: usize,
    /// Responses of one type held back while a deferred verdict is pending; one more is
    /// NACKed unseen.
    pub max_held_responses: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_names_per_type: 1_000_000,
            max_resources_per_response: 1_000_000,
            max_name_len: 2048,
            max_held_responses: 64,
        }
    }
}

/// The configuration of one [`Client`](super::Client).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ClientConfig {
    /// SotW or incremental.
    pub variant: Variant,
    /// ADS (every type on this stream) or one type per stream.
    pub transport: Transport,
    /// The node identity sent on the first request of every stream.
    pub node: Node,
    /// Send the node on every request instead of only the first one of each stream
    /// (`ApiConfigSource.set_node_on_first_message_only = false`).
    pub node_on_every_request: bool,
    /// The does-not-exist timer (gRPC A57, Envoy's `initial_fetch_timeout`); `None` disables
    /// it. Default 15 s, as the protocol text recommends.
    pub does_not_exist_timeout: Option<Duration>,
    /// What a rejected resource does to the rest of its response.
    pub nack_policy: NackPolicy,
    /// Bounds on peer-controlled state.
    pub limits: Limits,
    /// SotW, non-standard: when a resource's TTL runs out, forget the type's accepted
    /// version and send a request with an empty `version_info`, so that the server sees a
    /// client without the current version and delivers it again (Envoy's behaviour since
    /// envoy#15667). Off by default: the protocol says `version_info` is "the version_info
    /// received with the most recent successfully processed response" (discovery.proto),
    /// and an expired resource changes nothing the server sent.
    pub sotw_refetch_on_ttl_expiry: bool,
    /// gRPC A53 (the bootstrap's `ignore_resource_deletion` server feature): a held
    /// resource the server deletes (absent from a full-state SotW LDS/CDS response, named
    /// in incremental `removed_resources`, or announced as not existing) is kept, with
    /// [`ClientEvent::DeletionIgnored`](super::ClientEvent::DeletionIgnored) once and
    /// [`ResourceStatus::deletion_ignored`](super::ResourceStatus::deletion_ignored) until
    /// it arrives again. Names never held still go does-not-exist. Off by default; only
    /// read under [`DataErrors::Legacy`].
    pub ignore_resource_deletion: bool,
    /// What a data error does to a held resource (gRPC A88). [`DataErrors::Legacy`] by
    /// default.
    pub data_errors: DataErrors,
    /// gRPC A88's `resource_timer_is_transient_error` server feature: when the
    /// does-not-exist timer fires, the name is not declared missing but in error with
    /// UNAVAILABLE ([`ClientEvent::ResourceError`](super::ClientEvent::ResourceError),
    /// status [`ResourceState::TimedOut`](super::ResourceState::TimedOut)): "the timer will
    /// be set for 30 seconds instead of 15 seconds, and when the timer fires, the resulting
    /// error will have status UNAVAILABLE instead of NOT_FOUND". Set both with
    /// [`ClientConfig::with_transient_resource_timer`]. Off by default.
    pub resource_timer_is_transient_error: bool,
    /// One owned event per cache change (the default), or one batch per response whose
    /// entries borrow from the cache ([`EventShape::Batched`]: the cheaper path for large
    /// configurations).
    pub event_shape: EventShape,
}

impl ClientConfig {
    /// A configuration with the defaults: node on the first request only, 15 s
    /// does-not-exist timer, Envoy's reject-all NACK policy, default limits.
    pub fn new(variant: Variant, transport: Transport, node: Node) -> ClientConfig {
        ClientConfig {
            variant,
            transport,
            node,
            node_on_every_request: false,
            does_not_exist_timeout: Some(Duration::from_secs(15)),
            nack_policy: NackPolicy::RejectAll,
            limits: Limits::default(),
            sotw_refetch_on_ttl_expiry: false,
            ignore_resource_deletion: false,
            data_errors: DataErrors::Legacy,
            resource_timer_is_transient_error: false,
            event_shape: EventShape::PerResource,
        }
    }

    /// gRPC A88's `resource_timer_is_transient_error`: a 30 s does-not-exist timer whose
    /// expiry is a transient error, not a verdict on the resource
    /// ([`ClientConfig::resource_timer_is_transient_error`]).
    pub fn with_transient_resource_timer(mut self) -> ClientConfig {
        self.resource_timer_is_transient_error = true;
        self.does_not_exist_timeout = Some(TRANSIENT_RESOURCE_TIMER);
        self
    }
}

/// The resource timer under gRPC A88's `resource_timer_is_transient_error`.
pub const TRANSIENT_RESOURCE_TIMER: Duration = Duration::from_secs(30);

impl Default for ClientConfig {
    /// SotW over ADS with an empty node.
    fn default() -> ClientConfig {
        ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default())
    }
}
