//! Minimal messages: for each Envoy message on a path to a reference, only the fields on
//! that path, with the field numbers of the public API: what scenarios and tests encode
//! bodies with references from (`build.rs`), the reader's paths written as messages.
//! Each field cites its Envoy field path (`api/envoy/...` proto files of
//! envoyproxy/envoy; `grpc/lookup/v1/rls_config.proto` of grpc/grpc-proto for RLS).
//!
//! A `oneof` member is written as its own optional field: on the wire a oneof is the same
//! fields, and a body that sets two members of one oneof has both read (a reference more
//! is harmless where one fewer would not be).

use alloc::string::String;
use alloc::vec::Vec;

use crate::pb::google::protobuf::Any;

/// `envoy.config.listener.v3.Listener`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Listener {
    /// `Listener.filter_chains`.
    #[prost(message, repeated, tag = "3")]
    pub filter_chains: Vec<FilterChain>,
    /// `Listener.listener_filters`.
    #[prost(message, repeated, tag = "9")]
    pub listener_filters: Vec<ListenerFilter>,
    /// `Listener.api_listener` (gRPC's listener: the HTTP connection manager in an `Any`).
    #[prost(message, optional, tag = "19")]
    pub api_listener: Option<ApiListener>,
    /// `Listener.default_filter_chain`.
    #[prost(message, optional, tag = "25")]
    pub default_filter_chain: Option<FilterChain>,
}

/// `envoy.config.listener.v3.ApiListener`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ApiListener {
    /// `ApiListener.api_listener`.
    #[prost(message, optional, tag = "1")]
    pub api_listener: Option<Any>,
}

/// `envoy.config.listener.v3.FilterChain`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FilterChain {
    /// `FilterChain.filters`.
    #[prost(message, repeated, tag = "3")]
    pub filters: Vec<Filter>,
    /// `FilterChain.transport_socket` (a `DownstreamTlsContext` names secrets).
    #[prost(message, optional, tag = "6")]
    pub transport_socket: Option<TransportSocket>,
}

/// `envoy.config.listener.v3.Filter`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Filter {
    /// `Filter.name` (the ECDS resource name with `config_discovery`).
    #[prost(string, tag = "1")]
    pub name: String,
    /// `Filter.typed_config` (oneof `config_type`).
    #[prost(message, optional, tag = "4")]
    pub typed_config: Option<Any>,
    /// `Filter.config_discovery` (oneof `config_type`).
    #[prost(message, optional, tag = "5")]
    pub config_discovery: Option<ExtensionConfigSource>,
}

/// `envoy.config.listener.v3.ListenerFilter`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ListenerFilter {
    /// `ListenerFilter.name` (the ECDS resource name with `config_discovery`).
    #[prost(string, tag = "1")]
    pub name: String,
    /// `ListenerFilter.config_discovery` (oneof `config_type`).
    #[prost(message, optional, tag = "5")]
    pub config_discovery: Option<ExtensionConfigSource>,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpFilter`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HttpFilter {
    /// `HttpFilter.name`: "It also serves as a resource name in ExtensionConfigDS."
    #[prost(string, tag = "1")]
    pub name: String,
    /// `HttpFilter.typed_config` (oneof `config_type`).
    #[prost(message, optional, tag = "4")]
    pub typed_config: Option<Any>,
    /// `HttpFilter.config_discovery` (oneof `config_type`).
    #[prost(message, optional, tag = "5")]
    pub config_discovery: Option<ExtensionConfigSource>,
}

/// `envoy.config.core.v3.ExtensionConfigSource`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ExtensionConfigSource {
    /// `ExtensionConfigSource.config_source`.
    #[prost(message, optional, tag = "1")]
    pub config_source: Option<ConfigSource>,
    /// `ExtensionConfigSource.type_urls`: the extension types an update may carry.
    #[prost(string, repeated, tag = "4")]
    pub type_urls: Vec<String>,
}

/// `envoy.config.core.v3.ConfigSource`, over ADS.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ConfigSource {
    /// `ConfigSource.ads` (oneof `config_source_specifier`; `AggregatedConfigSource` is empty).
    #[prost(message, optional, tag = "3")]
    pub ads: Option<Present>,
    /// `ConfigSource.resource_api_version` (`ApiVersion.V3` is 2).
    #[prost(int32, tag = "6")]
    pub resource_api_version: i32,
}

/// `ApiVersion.V3`.
pub(crate) const API_V3: i32 = 2;

impl ConfigSource {
    /// ADS, v3 resources: what a real configuration names most.
    pub fn ads() -> ConfigSource {
        ConfigSource {
            ads: Some(Present {}),
            resource_api_version: API_V3,
        }
    }
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HttpConnectionManager {
    /// `HttpConnectionManager.rds` (oneof `route_specifier`).
    #[prost(message, optional, tag = "3")]
    pub rds: Option<Rds>,
    /// `HttpConnectionManager.route_config` (oneof `route_specifier`).
    #[prost(message, optional, tag = "4")]
    pub route_config: Option<RouteConfiguration>,
    /// `HttpConnectionManager.http_filters`.
    #[prost(message, repeated, tag = "5")]
    pub http_filters: Vec<HttpFilter>,
    /// `HttpConnectionManager.scoped_routes` (oneof `route_specifier`).
    #[prost(message, optional, tag = "31")]
    pub scoped_routes: Option<ScopedRoutes>,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.Rds`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Rds {
    /// `Rds.config_source`.
    #[prost(message, optional, tag = "1")]
    pub config_source: Option<ConfigSource>,
    /// `Rds.route_config_name`.
    #[prost(string, tag = "2")]
    pub route_config_name: String,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.ScopedRoutes`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopedRoutes {
    /// `ScopedRoutes.name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `ScopedRoutes.scope_key_builder` (required).
    #[prost(message, optional, tag = "2")]
    pub scope_key_builder: Option<ScopeKeyBuilder>,
    /// `ScopedRoutes.rds_config_source`: where the scopes' route configurations come from.
    #[prost(message, optional, tag = "3")]
    pub rds_config_source: Option<ConfigSource>,
    /// `ScopedRoutes.scoped_route_configurations_list` (oneof `config_specifier`).
    #[prost(message, optional, tag = "4")]
    pub scoped_route_configurations_list: Option<ScopedRouteConfigurationsList>,
    /// `ScopedRoutes.scoped_rds` (oneof `config_specifier`).
    #[prost(message, optional, tag = "5")]
    pub scoped_rds: Option<ScopedRds>,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.ScopedRds`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopedRds {
    /// `ScopedRds.scoped_rds_config_source`.
    #[prost(message, optional, tag = "1")]
    pub scoped_rds_config_source: Option<ConfigSource>,
}

/// `ScopedRoutes.ScopeKeyBuilder`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeKeyBuilder {
    /// `ScopeKeyBuilder.fragments`.
    #[prost(message, repeated, tag = "1")]
    pub fragments: Vec<FragmentBuilder>,
}

/// `ScopeKeyBuilder.FragmentBuilder`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct FragmentBuilder {
    /// `FragmentBuilder.header_value_extractor` (oneof `type`).
    #[prost(message, optional, tag = "1")]
    pub header_value_extractor: Option<HeaderValueExtractor>,
}

/// `FragmentBuilder.HeaderValueExtractor`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HeaderValueExtractor {
    /// `HeaderValueExtractor.name`: the request header the key is read from.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `envoy.extensions.filters.network.http_connection_manager.v3.ScopedRouteConfigurationsList`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopedRouteConfigurationsList {
    /// `ScopedRouteConfigurationsList.scoped_route_configurations`.
    #[prost(message, repeated, tag = "1")]
    pub scoped_route_configurations: Vec<ScopedRouteConfiguration>,
}

/// `envoy.config.route.v3.ScopedRouteConfiguration` (also an SRDS resource).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopedRouteConfiguration {
    /// `ScopedRouteConfiguration.route_configuration_name`.
    #[prost(string, tag = "2")]
    pub route_configuration_name: String,
    /// `ScopedRouteConfiguration.key` (required).
    #[prost(message, optional, tag = "3")]
    pub key: Option<ScopeKey>,
    /// `ScopedRouteConfiguration.route_configuration` (inline).
    #[prost(message, optional, tag = "5")]
    pub route_configuration: Option<RouteConfiguration>,
}

/// `ScopedRouteConfiguration.Key`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeKey {
    /// `Key.fragments` -> `Fragment.string_key` (1).
    #[prost(message, repeated, tag = "1")]
    pub fragments: Vec<ScopeKeyFragment>,
}

/// `ScopedRouteConfiguration.Key.Fragment`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ScopeKeyFragment {
    /// `Fragment.string_key` (oneof `type`).
    #[prost(string, tag = "1")]
    pub string_key: String,
}

/// `envoy.config.route.v3.RouteConfiguration`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RouteConfiguration {
    /// `RouteConfiguration.virtual_hosts`.
    #[prost(message, repeated, tag = "2")]
    pub virtual_hosts: Vec<VirtualHost>,
    /// `RouteConfiguration.vhds`.
    #[prost(message, optional, tag = "9")]
    pub vhds: Option<Vhds>,
    /// `RouteConfiguration.cluster_specifier_plugins`.
    #[prost(message, repeated, tag = "12")]
    pub cluster_specifier_plugins: Vec<ClusterSpecifierPlugin>,
    /// `RouteConfiguration.request_mirror_policies`.
    #[prost(message, repeated, tag = "13")]
    pub request_mirror_policies: Vec<RequestMirrorPolicy>,
}

/// `envoy.config.route.v3.Vhds`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Vhds {
    /// `Vhds.config_source` (VHDS is incremental only).
    #[prost(message, optional, tag = "1")]
    pub config_source: Option<ConfigSource>,
}

/// `envoy.config.route.v3.VirtualHost` (also a VHDS resource).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct VirtualHost {
    /// `VirtualHost.domains`.
    #[prost(string, repeated, tag = "2")]
    pub domains: Vec<String>,
    /// `VirtualHost.routes`.
    #[prost(message, repeated, tag = "3")]
    pub routes: Vec<Route>,
    /// `VirtualHost.request_mirror_policies`.
    #[prost(message, repeated, tag = "22")]
    pub request_mirror_policies: Vec<RequestMirrorPolicy>,
}

/// `envoy.config.route.v3.Route`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Route {
    /// `Route.route` (oneof `action`; redirects and direct responses name no cluster).
    #[prost(message, optional, tag = "2")]
    pub route: Option<RouteAction>,
}

/// `envoy.config.route.v3.RouteAction`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RouteAction {
    /// `RouteAction.cluster` (oneof `cluster_specifier`).
    #[prost(string, tag = "1")]
    pub cluster: String,
    /// `RouteAction.weighted_clusters` (oneof `cluster_specifier`).
    #[prost(message, optional, tag = "3")]
    pub weighted_clusters: Option<WeightedCluster>,
    /// `RouteAction.request_mirror_policies`.
    #[prost(message, repeated, tag = "30")]
    pub request_mirror_policies: Vec<RequestMirrorPolicy>,
    /// `RouteAction.cluster_specifier_plugin` (oneof `cluster_specifier`): the name of a
    /// plugin of `RouteConfiguration.cluster_specifier_plugins`.
    #[prost(string, tag = "37")]
    pub cluster_specifier_plugin: String,
    /// `RouteAction.inline_cluster_specifier_plugin` (oneof `cluster_specifier`).
    #[prost(message, optional, tag = "39")]
    pub inline_cluster_specifier_plugin: Option<ClusterSpecifierPlugin>,
}

/// `envoy.config.route.v3.WeightedCluster`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WeightedCluster {
    /// `WeightedCluster.clusters`.
    #[prost(message, repeated, tag = "1")]
    pub clusters: Vec<ClusterWeight>,
}

/// `envoy.config.route.v3.WeightedCluster.ClusterWeight`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ClusterWeight {
    /// `ClusterWeight.name`.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `envoy.config.route.v3.RouteAction.RequestMirrorPolicy`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RequestMirrorPolicy {
    /// `RequestMirrorPolicy.cluster`.
    #[prost(string, tag = "1")]
    pub cluster: String,
}

/// `envoy.config.route.v3.ClusterSpecifierPlugin`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ClusterSpecifierPlugin {
    /// `ClusterSpecifierPlugin.extension`.
    #[prost(message, optional, tag = "1")]
    pub extension: Option<TypedExtensionConfig>,
}

/// `envoy.config.core.v3.TypedExtensionConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TypedExtensionConfig {
    /// `TypedExtensionConfig.name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `TypedExtensionConfig.typed_config`.
    #[prost(message, optional, tag = "2")]
    pub typed_config: Option<Any>,
}

/// `envoy.config.cluster.v3.Cluster`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Cluster {
    /// `Cluster.name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `Cluster.type` (oneof `cluster_discovery_type`; the enum `DiscoveryType` as its number).
    #[prost(int32, optional, tag = "2")]
    pub r#type: Option<i32>,
    /// `Cluster.eds_cluster_config`.
    #[prost(message, optional, tag = "3")]
    pub eds_cluster_config: Option<EdsClusterConfig>,
    /// `Cluster.transport_socket`.
    #[prost(message, optional, tag = "24")]
    pub transport_socket: Option<TransportSocket>,
    /// `Cluster.cluster_type` (oneof `cluster_discovery_type`): custom cluster types, the
    /// aggregate cluster among them.
    #[prost(message, optional, tag = "38")]
    pub cluster_type: Option<TypedExtensionConfig>,
    /// `Cluster.transport_socket_matches`.
    #[prost(message, repeated, tag = "43")]
    pub transport_socket_matches: Vec<TransportSocketMatch>,
}

/// `envoy.config.cluster.v3.Cluster.DiscoveryType.EDS`.
pub(crate) const DISCOVERY_TYPE_EDS: i32 = super::DISCOVERY_TYPE_EDS as i32;

/// `envoy.config.cluster.v3.Cluster.EdsClusterConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct EdsClusterConfig {
    /// `EdsClusterConfig.service_name`.
    #[prost(string, tag = "2")]
    pub service_name: String,
}

/// `envoy.config.cluster.v3.Cluster.TransportSocketMatch`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TransportSocketMatch {
    /// `TransportSocketMatch.transport_socket`.
    #[prost(message, optional, tag = "3")]
    pub transport_socket: Option<TransportSocket>,
}

/// `envoy.extensions.clusters.aggregate.v3.ClusterConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct AggregateClusterConfig {
    /// `ClusterConfig.clusters`, in priority order.
    #[prost(string, repeated, tag = "1")]
    pub clusters: Vec<String>,
}

/// `envoy.config.core.v3.TransportSocket`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct TransportSocket {
    /// `TransportSocket.typed_config` (oneof `config_type`).
    #[prost(message, optional, tag = "3")]
    pub typed_config: Option<Any>,
}

/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct UpstreamTlsContext {
    /// `UpstreamTlsContext.common_tls_context`.
    #[prost(message, optional, tag = "1")]
    pub common_tls_context: Option<CommonTlsContext>,
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CommonTlsContext {
    /// `CommonTlsContext.tls_certificate_sds_secret_configs`.
    #[prost(message, repeated, tag = "6")]
    pub tls_certificate_sds_secret_configs: Vec<SdsSecretConfig>,
    /// `CommonTlsContext.validation_context_sds_secret_config` (oneof
    /// `validation_context_type`).
    #[prost(message, optional, tag = "7")]
    pub validation_context_sds_secret_config: Option<SdsSecretConfig>,
    /// `CommonTlsContext.combined_validation_context` (oneof `validation_context_type`).
    #[prost(message, optional, tag = "8")]
    pub combined_validation_context: Option<CombinedCertificateValidationContext>,
}

/// `envoy.extensions.transport_sockets.tls.v3.CommonTlsContext.CombinedCertificateValidationContext`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct CombinedCertificateValidationContext {
    /// `CombinedCertificateValidationContext.validation_context_sds_secret_config`.
    #[prost(message, optional, tag = "2")]
    pub validation_context_sds_secret_config: Option<SdsSecretConfig>,
}

/// `envoy.extensions.transport_sockets.tls.v3.SdsSecretConfig`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SdsSecretConfig {
    /// `SdsSecretConfig.name`.
    #[prost(string, tag = "1")]
    pub name: String,
    /// `SdsSecretConfig.sds_config`: without it the secret is static (bootstrap), not SDS.
    #[prost(message, optional, tag = "2")]
    pub sds_config: Option<Present>,
}

/// A message of which only the presence matters: every field is skipped.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Present {}
