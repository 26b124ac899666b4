//! The shapes shared by both sides: which protocol variant a stream speaks, which types
//! it carries, and a request or response of either variant.

use alloc::string::String;

use crate::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};

/// State of the World or incremental.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// State of the World: `DiscoveryRequest` / `DiscoveryResponse`.
    Sotw,
    /// Incremental: `DeltaDiscoveryRequest` / `DeltaDiscoveryResponse`.
    Delta,
}

/// What one gRPC stream carries.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// ADS: every type URL multiplexed on one stream.
    Aggregated,
    /// One stream per type: this stream carries only this type URL.
    PerType(String),
}

impl Transport {
    /// Whether `type_url` may travel on this stream.
    pub fn carries(&self, type_url: &str) -> bool {
        match self {
            Transport::Aggregated => true,
            Transport::PerType(url) => url == type_url,
        }
    }
}

/// A request of either variant, as a client sends it.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// A SotW request.
    Sotw(DiscoveryRequest),
    /// An incremental request.
    Delta(DeltaDiscoveryRequest),
}

/// A response of either variant, as a server sends it.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// A SotW response.
    Sotw(DiscoveryResponse),
    /// An incremental response.
    Delta(DeltaDiscoveryResponse),
}

impl Request {
    /// The variant of this request.
    pub fn variant(&self) -> Variant {
        match self {
            Request::Sotw(_) => Variant::Sotw,
            Request::Delta(_) => Variant::Delta,
        }
    }

    /// The type URL this request is about.
    pub fn type_url(&self) -> &str {
        match self {
            Request::Sotw(r) => &r.type_url,
            Request::Delta(r) => &r.type_url,
        }
    }
}

impl Response {
    /// The variant of this response.
    pub fn variant(&self) -> Variant {
        match self {
            Response::Sotw(_) => Variant::Sotw,
            Response::Delta(_) => Variant::Delta,
        }
    }

    /// The type URL this response is about.
    pub fn type_url(&self) -> &str {
        match self {
            Response::Sotw(r) => &r.type_url,
            Response::Delta(r) => &r.type_url,
        }
    }

    /// The nonce of this response.
    pub fn nonce(&self) -> &str {
        match self {
            Response::Sotw(r) => &r.nonce,
            Response::Delta(r) => &r.nonce,
        }
    }

    /// The management server that says it sent this response (`control_plane`), if any.
    pub fn control_plane(&self) -> Option<&crate::pb::envoy::config::core::v3::ControlPlane> {
        match self {
            Response::Sotw(r) => r.control_plane.as_ref(),
            Response::Delta(r) => r.control_plane.as_ref(),
        }
    }
}
