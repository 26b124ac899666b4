//! The rules the checker enforces: stable identifiers, the side they bind, and the protocol
//! passage each one comes from (the xDS protocol text by section title, `discovery.proto` by
//! field).

/// A protocol rule a recorded message can break.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// The first request of a stream carries no node.
    NodeMissing,
    /// A request carries a node different from the stream's first one.
    NodeChanged,
    /// A request names a response nonce never sent on this stream for its type.
    NonceUnknown,
    /// A NACK (`error_detail`) without the nonce of the rejected response.
    NackWithoutNonce,
    /// A NACK whose `version_info` is not the last accepted version.
    NackMovedVersion,
    /// The first answer to a response, without `error_detail`, whose `version_info` is not
    /// that response's version.
    AckVersionMismatch,
    /// A later request at a version the client never accepted.
    VersionNotAccepted,
    /// Incremental: `initial_resource_versions` on a request that is not the first of its
    /// type on the stream.
    InitialVersionsLate,
    /// Incremental: a request repeats the nonce of a response it already answered.
    DeltaNonceRepeated,
    /// A response contains the same resource name twice.
    DuplicateNames,
    /// A response reuses the nonce of an earlier response on the stream.
    NonceReused,
    /// Incremental: a response without a nonce.
    NonceMissing,
    /// Incremental: a name both updated and removed in one response.
    RemovedAndSent,
    /// A response that only repeats what the client already has, with no subscription
    /// change that asked for it.
    UnchangedResend,
    /// A response that answers a stale request (one whose nonce was superseded).
    ResponseToStaleRequest,
    /// The version the client rejected is sent again, unchanged, without a subscription
    /// change.
    ResentRejectedVersion,
    /// A full-state (LDS/CDS) SotW response leaves out a subscribed resource that exists.
    FullStateMissingResource,
    /// A resource's type (its `Any`, or the `Any` inside a `Resource` wrapper) is not the
    /// response's `type_url`.
    TypeMismatch,
    /// A full-state (LDS/CDS) SotW response presents a version that an earlier response of
    /// the type held a resource at, on any stream of the same node, and leaves that
    /// resource out although it is subscribed.
    SameVersionMissingResource,
}

/// Every rule, in the documented order.
pub const ALL_RULES: [Rule; 19] = [
    Rule::NodeMissing,
    Rule::NodeChanged,
    Rule::NonceUnknown,
    Rule::NackWithoutNonce,
    Rule::NackMovedVersion,
    Rule::AckVersionMismatch,
    Rule::VersionNotAccepted,
    Rule::InitialVersionsLate,
    Rule::DeltaNonceRepeated,
    Rule::DuplicateNames,
    Rule::NonceReused,
    Rule::NonceMissing,
    Rule::RemovedAndSent,
    Rule::UnchangedResend,
    Rule::ResponseToStaleRequest,
    Rule::ResentRejectedVersion,
    Rule::FullStateMissingResource,
    Rule::TypeMismatch,
    Rule::SameVersionMissingResource,
];

/// Which side a rule binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSide {
    /// Rules on requests.
    Client,
    /// Rules on responses.
    Server,
}

impl Rule {
    /// The stable identifier, as reports print it.
    pub fn id(self) -> &'static str {
        match self {
            Rule::NodeMissing => "node-missing",
            Rule::NodeChanged => "node-changed",
            Rule::NonceUnknown => "nonce-unknown",
            Rule::NackWithoutNonce => "nack-without-nonce",
            Rule::NackMovedVersion => "nack-moved-version",
            Rule::AckVersionMismatch => "ack-version-mismatch",
            Rule::VersionNotAccepted => "version-not-accepted",
            Rule::InitialVersionsLate => "initial-versions-late",
            Rule::DeltaNonceRepeated => "delta-nonce-repeated",
            Rule::DuplicateNames => "duplicate-names",
            Rule::NonceReused => "nonce-reused",
            Rule::NonceMissing => "nonce-missing",
            Rule::RemovedAndSent => "removed-and-sent",
            Rule::UnchangedResend => "unchanged-resend",
            Rule::ResponseToStaleRequest => "response-to-stale-request",
            Rule::ResentRejectedVersion => "resent-rejected-version",
            Rule::FullStateMissingResource => "full-state-missing-resource",
            Rule::TypeMismatch => "type-mismatch",
            Rule::SameVersionMissingResource => "same-version-missing-resource",
        }
    }

    /// The side whose messages the rule binds.
    pub fn side(self) -> RuleSide {
        match self {
            Rule::NodeMissing
            | Rule::NodeChanged
            | Rule::NonceUnknown
            | Rule::NackWithoutNonce
            | Rule::NackMovedVersion
            | Rule::AckVersionMismatch
            | Rule::VersionNotAccepted
            | Rule::InitialVersionsLate
            | Rule::DeltaNonceRepeated => RuleSide::Client,
            _ => RuleSide::Server,
        }
    }

    /// The protocol passage the rule comes from, quoted, and where to read it: the xDS
    /// protocol text ("xDS REST and gRPC protocol") by section title, or `discovery.proto`
    /// by message and field.
    pub fn passage(self) -> &'static str {
        match self {
            Rule::NodeMissing => {
                "\"Only the first request on a stream is guaranteed to carry the node identifier.\" (xDS protocol, Basic Protocol Overview)"
            }
            Rule::NodeChanged => {
                "\"The node identifier should always be identical if present more than once on the stream.\" (xDS protocol, Basic Protocol Overview)"
            }
            Rule::NonceUnknown => {
                "\"response_nonce: nonce corresponding to DiscoveryResponse being ACK/NACKed.\" (discovery.proto, DiscoveryRequest.response_nonce)"
            }
            Rule::NackWithoutNonce => {
                "\"the nonce provides a way to explicitly ack a specific DiscoveryResponse in a following DiscoveryRequest\" (discovery.proto, DiscoveryResponse.nonce)"
            }
            Rule::NackMovedVersion => {
                "\"If Envoy had instead rejected configuration update X, it would reply with error_detail populated and its previous version\" (xDS protocol, NACK)"
            }
            Rule::AckVersionMismatch => {
                "\"If the update was successfully applied, the version_info will be X\" (xDS protocol, ACK)"
            }
            Rule::VersionNotAccepted => {
                "\"the version_info field indicating the most recent valid version seen by the client\" (xDS protocol, ACK/NACK and resource type instance version)"
            }
            Rule::InitialVersionsLate => {
                "\"It will not be populated: ... [2] in any message after the first in a stream (for a given type_url)\" (discovery.proto, DeltaDiscoveryRequest.initial_resource_versions)"
            }
            Rule::DeltaNonceRepeated => {
                "\"When the DeltaDiscoveryRequest is a ACK or NACK ... the response_nonce must be the nonce in the DeltaDiscoveryResponse. Otherwise ... response_nonce must be omitted.\" (discovery.proto, DeltaDiscoveryRequest.response_nonce)"
            }
            Rule::DuplicateNames => {
                "\"It is an error for a server to send a single response that contains the same resource name twice.\" (xDS protocol, Duplicate Resource Names)"
            }
            Rule::NonceReused => {
                "\"A nonce becomes stale following a newer nonce being presented to Envoy in a DiscoveryResponse.\" (xDS protocol, Resource updates): nonces tell responses apart"
            }
            Rule::NonceMissing => {
                "\"In the delta xDS wire protocol, the nonce field is required\" (xDS protocol, Incremental xDS)"
            }
            Rule::RemovedAndSent => {
                "\"the server signals the client that a resource should be deleted via the removed_resources field\" (xDS protocol, Deleting Resources): a resource cannot be both"
            }
            Rule::UnchangedResend => {
                "\"The management server should only send updates to the Envoy client when the resources in the DiscoveryResponse have changed.\" (xDS protocol, When to send an update)"
            }
            Rule::ResponseToStaleRequest => {
                "\"The management server should not send a DiscoveryResponse for any DiscoveryRequest that has a stale nonce.\" (xDS protocol, Resource updates)"
            }
            Rule::ResentRejectedVersion => {
                "\"If the management server provides the same set of resources rather than waiting for a change to occur, it will cause needless work\" (xDS protocol, When to send an update)"
            }
            Rule::FullStateMissingResource => {
                "\"Listener and Cluster resource types ... the server must include the complete state of the world\" (xDS protocol, Grouping Resources into Responses)"
            }
            Rule::TypeMismatch => {
                "\"Must be consistent with the type_url in the 'resources' repeated Any (if non-empty).\" (discovery.proto, DiscoveryResponse.type_url; DeltaDiscoveryResponse.resources: \"typed resources, whose types must match the type_url field\")"
            }
            Rule::SameVersionMissingResource => {
                "\"the version for a resource type is not a property of an individual xDS stream but rather a property of the resources themselves\" (xDS protocol, ACK/NACK and resource type instance version); full state: \"the server must include the complete state of the world\" (Grouping Resources into Responses)"
            }
        }
    }
}
