//! The resource type catalog: type URLs (v2 and v3), gRPC methods, REST paths, and the
//! per-type rules the protocol attaches to them.
//!
//! Unknown type URLs are first-class: [`TypeInfo::of`] returns an opaque entry for them
//! (not full-state, no legacy wildcard, ordered after the known types on ADS), so a client
//! or server can carry any resource type the application understands.

use core::cmp::Ordering;

/// The prefix of every type URL.
pub const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

/// `google.rpc.Code.NOT_FOUND`: in a `resource_errors` entry it means the resource does not
/// exist (xRFC TP3), for the client that reads it and the server that writes it.
pub const NOT_FOUND_CODE: i32 = 5;

/// `google.rpc.Code.PERMISSION_DENIED`: with NOT_FOUND, the `resource_errors` code that gRPC
/// A88 counts as a data error rather than a transient one.
pub const PERMISSION_DENIED_CODE: i32 = 7;

/// `google.rpc.Code.UNAVAILABLE`: a transient error (gRPC A88: what a resource timer
/// reports under `resource_timer_is_transient_error`).
pub const UNAVAILABLE_CODE: i32 = 14;

/// The type URL of the `Resource` wrapper that carries a TTL or a heartbeat in SotW.
pub const RESOURCE_WRAPPER_TYPE_URL: &str =
    "type.googleapis.com/envoy.service.discovery.v3.Resource";

/// gRPC method path of SotW ADS (v3).
pub const ADS_SOTW_METHOD: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
/// gRPC method path of incremental ADS (v3).
pub const ADS_DELTA_METHOD: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
/// gRPC method path of SotW ADS (v2).
pub const ADS_SOTW_METHOD_V2: &str =
    "/envoy.service.discovery.v2.AggregatedDiscoveryService/StreamAggregatedResources";
/// gRPC method path of incremental ADS (v2).
pub const ADS_DELTA_METHOD_V2: &str =
    "/envoy.service.discovery.v2.AggregatedDiscoveryService/DeltaAggregatedResources";

/// The xDS API version a type URL belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ApiVersion {
    /// `envoy.api.v2.*` and friends.
    V2,
    /// `envoy.config.*.v3` and friends.
    V3,
}

/// One known xDS resource type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ResourceType {
    /// The short name used in the protocol text and in scenario files: `LDS`, `CDS`, ...
    pub short_name: &'static str,
    /// The v3 type URL.
    pub type_url: &'static str,
    /// The v2 type URL, `None` for a type born in v3 (ECDS).
    pub type_url_v2: Option<&'static str>,
    /// The SotW gRPC method path (v3), `None` where the type has no SotW method (VHDS).
    pub sotw_method: Option<&'static str>,
    /// The incremental gRPC method path (v3).
    pub delta_method: &'static str,
    /// The SotW gRPC method path (v2).
    pub sotw_method_v2: Option<&'static str>,
    /// The incremental gRPC method path (v2), `None` for a type born in v3.
    pub delta_method_v2: Option<&'static str>,
    /// The REST-JSON polling path (v3), `None` where REST is not offered (VHDS).
    pub rest_path: Option<&'static str>,
    /// The REST-JSON polling path (v2).
    pub rest_path_v2: Option<&'static str>,
    /// In SotW, every response carries every subscribed resource, and a resource missing
    /// from a response is deleted (LDS, CDS).
    pub full_state_in_sotw: bool,
    /// A first request with no names subscribes to everything (legacy wildcard).
    pub legacy_wildcard: bool,
    /// Position in the make-before-break order of ADS (lower goes first).
    pub ads_rank: u8,
}

macro_rules! resource_type {
    ($short:literal, $v3:literal, $v2:literal, $sotw:expr, $delta:literal, $sotw2:expr,
     $delta2:literal, $rest:expr, $rest2:expr, $full:literal, $wild:literal, $rank:literal) => {
        ResourceType {
            short_name: $short,
            type_url: concat!("type.googleapis.com/", $v3),
            type_url_v2: Some(concat!("type.googleapis.com/", $v2)),
            sotw_method: $sotw,
            delta_method: $delta,
            sotw_method_v2: $sotw2,
            delta_method_v2: Some($delta2),
            rest_path: $rest,
            rest_path_v2: $rest2,
            full_state_in_sotw: $full,
            legacy_wildcard: $wild,
            ads_rank: $rank,
        }
    };
}

/// Clusters (CDS).
pub const CLUSTER: ResourceType = resource_type!(
    "CDS",
    "envoy.config.cluster.v3.Cluster",
    "envoy.api.v2.Cluster",
    Some("/envoy.service.cluster.v3.ClusterDiscoveryService/StreamClusters"),
    "/envoy.service.cluster.v3.ClusterDiscoveryService/DeltaClusters",
    Some("/envoy.api.v2.ClusterDiscoveryService/StreamClusters"),
    "/envoy.api.v2.ClusterDiscoveryService/DeltaClusters",
    Some("/v3/discovery:clusters"),
    Some("/v2/discovery:clusters"),
    true,
    true,
    0
);

/// Cluster load assignments (EDS).
pub const ENDPOINT: ResourceType = resource_type!(
    "EDS",
    "envoy.config.endpoint.v3.ClusterLoadAssignment",
    "envoy.api.v2.ClusterLoadAssignment",
    Some("/envoy.service.endpoint.v3.EndpointDiscoveryService/StreamEndpoints"),
    "/envoy.service.endpoint.v3.EndpointDiscoveryService/DeltaEndpoints",
    Some("/envoy.api.v2.EndpointDiscoveryService/StreamEndpoints"),
    "/envoy.api.v2.EndpointDiscoveryService/DeltaEndpoints",
    Some("/v3/discovery:endpoints"),
    Some("/v2/discovery:endpoints"),
    false,
    false,
    1
);

/// Listeners (LDS).
pub const LISTENER: ResourceType = resource_type!(
    "LDS",
    "envoy.config.listener.v3.Listener",
    "envoy.api.v2.Listener",
    Some("/envoy.service.listener.v3.ListenerDiscoveryService/StreamListeners"),
    "/envoy.service.listener.v3.ListenerDiscoveryService/DeltaListeners",
    Some("/envoy.api.v2.ListenerDiscoveryService/StreamListeners"),
    "/envoy.api.v2.ListenerDiscoveryService/DeltaListeners",
    Some("/v3/discovery:listeners"),
    Some("/v2/discovery:listeners"),
    true,
    true,
    2
);

/// Route configurations (RDS).
pub const ROUTE: ResourceType = resource_type!(
    "RDS",
    "envoy.config.route.v3.RouteConfiguration",
    "envoy.api.v2.RouteConfiguration",
    Some("/envoy.service.route.v3.RouteDiscoveryService/StreamRoutes"),
    "/envoy.service.route.v3.RouteDiscoveryService/DeltaRoutes",
    Some("/envoy.api.v2.RouteDiscoveryService/StreamRoutes"),
    "/envoy.api.v2.RouteDiscoveryService/DeltaRoutes",
    Some("/v3/discovery:routes"),
    Some("/v2/discovery:routes"),
    false,
    false,
    3
);

/// Virtual hosts (VHDS): incremental only.
pub const VIRTUAL_HOST: ResourceType = resource_type!(
    "VHDS",
    "envoy.config.route.v3.VirtualHost",
    "envoy.api.v2.route.VirtualHost",
    None,
    "/envoy.service.route.v3.VirtualHostDiscoveryService/DeltaVirtualHosts",
    None,
    "/envoy.api.v2.VirtualHostDiscoveryService/DeltaVirtualHosts",
    None,
    None,
    false,
    false,
    4
);

/// Scoped route configurations (SRDS).
pub const SCOPED_ROUTE: ResourceType = resource_type!(
    "SRDS",
    "envoy.config.route.v3.ScopedRouteConfiguration",
    "envoy.api.v2.ScopedRouteConfiguration",
    Some("/envoy.service.route.v3.ScopedRoutesDiscoveryService/StreamScopedRoutes"),
    "/envoy.service.route.v3.ScopedRoutesDiscoveryService/DeltaScopedRoutes",
    Some("/envoy.api.v2.ScopedRoutesDiscoveryService/StreamScopedRoutes"),
    "/envoy.api.v2.ScopedRoutesDiscoveryService/DeltaScopedRoutes",
    Some("/v3/discovery:scoped-routes"),
    Some("/v2/discovery:scoped-routes"),
    false,
    false,
    5
);

/// Secrets (SDS).
pub const SECRET: ResourceType = resource_type!(
    "SDS",
    "envoy.extensions.transport_sockets.tls.v3.Secret",
    "envoy.api.v2.auth.Secret",
    Some("/envoy.service.secret.v3.SecretDiscoveryService/StreamSecrets"),
    "/envoy.service.secret.v3.SecretDiscoveryService/DeltaSecrets",
    Some("/envoy.service.discovery.v2.SecretDiscoveryService/StreamSecrets"),
    "/envoy.service.discovery.v2.SecretDiscoveryService/DeltaSecrets",
    Some("/v3/discovery:secrets"),
    Some("/v2/discovery:secrets"),
    false,
    false,
    6
);

/// Runtime layers (RTDS).
pub const RUNTIME: ResourceType = resource_type!(
    "RTDS",
    "envoy.service.runtime.v3.Runtime",
    "envoy.service.discovery.v2.Runtime",
    Some("/envoy.service.runtime.v3.RuntimeDiscoveryService/StreamRuntime"),
    "/envoy.service.runtime.v3.RuntimeDiscoveryService/DeltaRuntime",
    Some("/envoy.service.discovery.v2.RuntimeDiscoveryService/StreamRuntime"),
    "/envoy.service.discovery.v2.RuntimeDiscoveryService/DeltaRuntime",
    Some("/v3/discovery:runtime"),
    Some("/v2/discovery:runtime"),
    false,
    false,
    7
);

/// Extension configurations (ECDS): typed filter configs fetched on their own, v3 only.
pub const EXTENSION_CONFIG: ResourceType = ResourceType {
    short_name: "ECDS",
    type_url: "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
    type_url_v2: None,
    sotw_method: Some(
        "/envoy.service.extension.v3.ExtensionConfigDiscoveryService/StreamExtensionConfigs",
    ),
    delta_method:
        "/envoy.service.extension.v3.ExtensionConfigDiscoveryService/DeltaExtensionConfigs",
    sotw_method_v2: None,
    delta_method_v2: None,
    rest_path: Some("/v3/discovery:extension_configs"),
    rest_path_v2: None,
    full_state_in_sotw: false,
    legacy_wildcard: false,
    ads_rank: 8,
};

/// Every known type, in make-before-break ADS order (CDS, EDS, LDS, RDS, VHDS, then the
/// rest).
pub const CATALOG: [ResourceType; 9] = [
    CLUSTER,
    ENDPOINT,
    LISTENER,
    ROUTE,
    VIRTUAL_HOST,
    SCOPED_ROUTE,
    SECRET,
    RUNTIME,
    EXTENSION_CONFIG,
];

/// The ADS rank of types the catalog does not know: after all known ones.
pub const OPAQUE_ADS_RANK: u8 = CATALOG.len() as u8;

impl ResourceType {
    /// Looks a type up by its short name (`CDS`), case-insensitively; a `v2:` prefix
    /// (`v2:CDS`) is accepted and ignored here (see [`TypeInfo::of`] for versions).
    pub fn by_short_name(short: &str) -> Option<ResourceType> {
        let short = short.strip_prefix("v2:").unwrap_or(short);
        CATALOG
            .iter()
            .copied()
            .find(|t| t.short_name.eq_ignore_ascii_case(short))
    }

    /// The type URL for `version` (the v3 one for a type that has no v2 URL).
    pub fn type_url_for(&self, version: ApiVersion) -> &'static str {
        match version {
            ApiVersion::V2 => self.type_url_v2.unwrap_or(self.type_url),
            ApiVersion::V3 => self.type_url,
        }
    }
}

/// What the protocol says about one type URL, known or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeInfo {
    /// The catalog entry and API version, `None` for a type the catalog does not know.
    pub known: Option<(ResourceType, ApiVersion)>,
}

impl TypeInfo {
    /// Classifies a type URL. Never fails: unknown URLs are opaque types.
    pub fn of(type_url: &str) -> TypeInfo {
        let known = CATALOG.iter().find_map(|t| {
            if t.type_url == type_url {
                Some((*t, ApiVersion::V3))
            } else if t.type_url_v2 == Some(type_url) {
                Some((*t, ApiVersion::V2))
            } else {
                None
            }
        });
        TypeInfo { known }
    }

    /// LDS and CDS: SotW responses carry the full state, and absence means deletion.
    pub fn full_state_in_sotw(&self) -> bool {
        self.known.is_some_and(|(t, _)| t.full_state_in_sotw)
    }

    /// LDS and CDS: a first request with no names is a (legacy) wildcard subscription.
    pub fn legacy_wildcard(&self) -> bool {
        self.known.is_some_and(|(t, _)| t.legacy_wildcard)
    }

    /// The make-before-break rank on ADS (lower first); unknown types come last.
    pub fn ads_rank(&self) -> u8 {
        self.known.map_or(OPAQUE_ADS_RANK, |(t, _)| t.ads_rank)
    }

    /// The short name (`CDS`) of a known type.
    pub fn short_name(&self) -> Option<&'static str> {
        self.known.map(|(t, _)| t.short_name)
    }
}

/// Orders type URLs for sending on ADS: make-before-break rank first (CDS, EDS, LDS, RDS,
/// VHDS, then the rest), then the URL itself, so the order is total and deterministic.
pub fn ads_order(a: &str, b: &str) -> Ordering {
    TypeInfo::of(a)
        .ads_rank()
        .cmp(&TypeInfo::of(b).ads_rank())
        .then_with(|| a.cmp(b))
}

/// The type URL of a message type: `type.googleapis.com/` and its full protobuf name (for
/// example `type_url_of::<envoy_types::pb::envoy::config::cluster::v3::Cluster>()` is
/// [`CLUSTER`]'s). The message's own [`prost::Name::type_url`] is not used: a generator may
/// leave its domain out, and xDS compares type URLs as strings.
pub fn type_url_of<M: prost::Name>() -> alloc::string::String {
    let mut url = alloc::string::String::from(TYPE_URL_PREFIX);
    url.push_str(&M::full_name());
    url
}

/// Whether `type_url` has the `type.googleapis.com/` form (any other prefix is accepted by
/// the protocol, but worth telling apart from typos).
pub fn has_standard_prefix(type_url: &str) -> bool {
    type_url
        .strip_prefix(TYPE_URL_PREFIX)
        .is_some_and(|rest| !rest.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;

    #[test]
    fn catalog_is_in_ads_order_and_lookups_agree() {
        for (i, t) in CATALOG.iter().enumerate() {
            assert_eq!(t.ads_rank as usize, i);
            assert_eq!(TypeInfo::of(t.type_url).known, Some((*t, ApiVersion::V3)));
            if let Some(v2) = t.type_url_v2 {
                assert_eq!(TypeInfo::of(v2).known, Some((*t, ApiVersion::V2)));
            }
            assert_eq!(ResourceType::by_short_name(t.short_name), Some(*t));
        }
        assert_eq!(ResourceType::by_short_name("v2:eds"), Some(ENDPOINT));
    }

    #[test]
    fn only_lds_and_cds_are_full_state_and_wildcard() {
        let full: Vec<_> = CATALOG
            .iter()
            .filter(|t| t.full_state_in_sotw)
            .map(|t| t.short_name)
            .collect();
        assert_eq!(full, ["CDS", "LDS"]);
        let wild: Vec<_> = CATALOG
            .iter()
            .filter(|t| t.legacy_wildcard)
            .map(|t| t.short_name)
            .collect();
        assert_eq!(wild, ["CDS", "LDS"]);
    }

    #[test]
    fn unknown_types_are_opaque_and_last() {
        let info = TypeInfo::of("type.googleapis.com/acme.Widget");
        assert_eq!(info.known, None);
        assert!(!info.full_state_in_sotw());
        assert_eq!(info.ads_rank(), OPAQUE_ADS_RANK);
        let mut urls = [
            "type.googleapis.com/acme.Widget",
            ROUTE.type_url,
            LISTENER.type_url,
            ENDPOINT.type_url,
            CLUSTER.type_url,
            VIRTUAL_HOST.type_url,
        ];
        urls.sort_by(|a, b| ads_order(a, b));
        assert_eq!(
            urls,
            [
                CLUSTER.type_url,
                ENDPOINT.type_url,
                LISTENER.type_url,
                ROUTE.type_url,
                VIRTUAL_HOST.type_url,
                "type.googleapis.com/acme.Widget",
            ]
        );
    }

    #[test]
    fn vhds_is_incremental_only() {
        assert_eq!(VIRTUAL_HOST.sotw_method, None);
        assert_eq!(VIRTUAL_HOST.rest_path, None);
    }
}
