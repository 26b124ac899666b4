//! The names a resource refers to, read from its encoded body without a full decode.
//!
//! A Listener names a RouteConfiguration (or holds one inline), a route names Clusters, a
//! Cluster names its ClusterLoadAssignment and may aggregate other Clusters; listeners and
//! clusters name Secrets through their TLS transport sockets. The client's dependency
//! manager ([`crate::client::deps`]) follows these names, and the server checks a
//! publication's consistency with them ([`crate::server::ResourceStore::consistency`]).
//!
//! [`references`] decodes the body into minimal messages that hold only the fields on a
//! path to a reference (`wire.rs`, each field citing its Envoy field path); prost skips
//! every other field, so this costs a fraction of a full decode (`benches/README.md`) and
//! needs no protoc.
//!
//! # What is read
//!
//! - **Listener** (`envoy.config.listener.v3.Listener`): the HTTP connection manager in
//!   `api_listener` (gRPC) and in the network filters of every filter chain and of
//!   `default_filter_chain` (Envoy): `rds.route_config_name` (RDS), an inline
//!   `route_config` (its references in turn), `scoped_routes` (an inline scope list: each
//!   scope's `route_configuration_name` or inline route configuration; with `scoped_rds`,
//!   the scope set's `ScopedRoutes.name` as an SRDS reference); a TCP proxy's `cluster` and
//!   `weighted_clusters` (CDS); the SDS secrets of every filter chain's
//!   `DownstreamTlsContext`.
//! - **RouteConfiguration**: every virtual host's routes: `route.cluster`,
//!   `weighted_clusters.clusters[].name`, the cluster-specifier plugin a route names
//!   (`cluster_specifier_plugin`, looked up in `cluster_specifier_plugins`) or holds
//!   inline, of which the RLS plugin (gRPC A28, `grpc.lookup.v1.RouteLookupClusterSpecifier`)
//!   names its `default_target`; request mirror policies at every level (CDS);
//!   [`References::vhds`] when the virtual hosts come from VHDS (their names are known
//!   only on demand).
//! - **ScopedRouteConfiguration** (SRDS): `route_configuration_name` (RDS) or the inline
//!   route configuration's references.
//! - **Cluster**: an EDS cluster's ClusterLoadAssignment (`eds_cluster_config.service_name`,
//!   else the cluster's own name; xDS protocol, "Resource types": "the EDS resource name
//!   is the cluster name unless service_name is set"); an aggregate cluster's
//!   `ClusterConfig.clusters` (CDS, in priority order, also [`References::aggregate`]: the
//!   walk over them, with a depth limit and cycle detection, belongs to whoever follows
//!   references across resources); the SDS secrets of `transport_socket` and of every
//!   `transport_socket_matches[].transport_socket` (`UpstreamTlsContext`).
//! - Every other type (ClusterLoadAssignment, Secret, Runtime, unknown types): no
//!   references.
//!
//! # Decisions
//!
//! - **Unknown extensions are skipped, never an error**: a filter, transport socket,
//!   cluster type or plugin whose `Any` type is not one of the above adds nothing. A body
//!   that is not valid protobuf where it matters is [`RefError::Malformed`], naming the
//!   resource, the field and prost's path inside it.
//! - **A secret is an SDS reference only with `sds_config`** (`SdsSecretConfig.sds_config`:
//!   "When only name is specified, then secret will be loaded from static resources").
//! - **Names are compared canonically**: an `xdstp://` reference is put in canonical form
//!   (xDS TP1: context parameters sorted), so it matches what a client subscribes to and
//!   what a store holds however either was written; a reference names its own authority
//!   (an `xdstp://` name is a full URN, never relative to the resource that holds it); a
//!   malformed one is [`RefError::BadName`]. Other names are taken as written; an empty
//!   name is no reference.
//! - **Deterministic**: references come sorted by type (make-before-break order) and name,
//!   each once, whatever the order of the body.
//! - **Not read**: filter configurations discovered over ECDS (`config_discovery`), the
//!   `matcher` trees of virtual hosts and filter chains, on-demand CDS, and `TypedStruct`
//!   configurations (JSON, not protobuf).

#[cfg(any(test, feature = "script"))]
pub(crate) mod build;
mod wire;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use prost::Message;

use crate::name::{NameParseError, XdstpName, XDSTP_SCHEME};
use crate::pb::google::protobuf::Any;
use crate::types::{ads_order, CLUSTER, ENDPOINT, LISTENER, ROUTE, SCOPED_ROUTE, SECRET};

/// `Any` type of the HTTP connection manager network filter.
pub const HTTP_CONNECTION_MANAGER: &str =
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
/// `Any` type of the TCP proxy network filter.
pub const TCP_PROXY: &str = "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
/// `Any` type of the aggregate cluster's configuration (`Cluster.cluster_type.typed_config`).
pub const AGGREGATE_CLUSTER: &str = "envoy.extensions.clusters.aggregate.v3.ClusterConfig";
/// `Any` type of a downstream (listener) TLS transport socket.
pub const DOWNSTREAM_TLS: &str = "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";
/// `Any` type of an upstream (cluster) TLS transport socket.
pub const UPSTREAM_TLS: &str = "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext";
/// `Any` type of gRPC's RLS cluster-specifier plugin (gRPC A28).
pub const ROUTE_LOOKUP_PLUGIN: &str = "grpc.lookup.v1.RouteLookupClusterSpecifier";

/// One name a resource refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Reference {
    /// The type URL of the resource referred to (v3).
    pub type_url: &'static str,
    /// Its name (canonical when `xdstp://`).
    pub name: String,
    /// The Envoy field the name was read from (the first one, when several name it), e.g.
    /// `Rds.route_config_name`.
    pub field: &'static str,
}

/// Everything one resource refers to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct References {
    refs: Vec<Reference>,
    /// A route configuration whose virtual hosts come from VHDS (`RouteConfiguration.vhds`).
    pub vhds: bool,
    /// An aggregate cluster's clusters, in priority order (`ClusterConfig.clusters`).
    pub aggregate: Option<Vec<String>>,
}

impl References {
    /// Every reference, sorted by type (make-before-break order) then name, each once.
    pub fn iter(&self) -> impl Iterator<Item = &Reference> {
        self.refs.iter()
    }

    /// The names referred to of one type, sorted.
    pub fn of_type<'a>(&'a self, type_url: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.refs
            .iter()
            .filter(move |r| r.type_url == type_url)
            .map(|r| r.name.as_str())
    }

    /// How many references.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// Whether the resource refers to nothing.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }
}

/// Why the references of a body could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefError {
    /// The body (or a configuration inside it) is not valid protobuf where a reference
    /// lives.
    Malformed {
        /// The resource's type URL.
        type_url: String,
        /// The resource's name (field 1), empty when unreadable.
        resource: String,
        /// Where in the resource: empty for the body itself, else the `Any` field whose
        /// content failed (e.g. `filter_chains[0].filters[1].typed_config`).
        field: String,
        /// prost's message, with its path of messages and fields.
        detail: String,
    },
    /// A reference is a malformed `xdstp://` name.
    BadName {
        /// The resource's type URL.
        type_url: String,
        /// The resource's name.
        resource: String,
        /// The field that holds the name.
        field: &'static str,
        /// The name as written.
        name: String,
        /// What is wrong with it.
        error: NameParseError,
    },
}

impl fmt::Display for RefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RefError::Malformed {
                type_url,
                resource,
                field,
                detail,
            } => {
                write!(f, "{} {resource:?}: ", short(type_url))?;
                if !field.is_empty() {
                    write!(f, "{field}: ")?;
                }
                f.write_str(detail)
            }
            RefError::BadName {
                type_url,
                resource,
                field,
                name,
                error,
            } => write!(
                f,
                "{} {resource:?}: {field} {name:?}: {error}",
                short(type_url)
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for RefError {}

fn short(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// The references of an encoded resource of `type_url` (v3 type URLs; every other type
/// refers to nothing). Decode `body` from a `Bytes` buffer: nested configurations are then
/// read as slices of it.
pub fn references(type_url: &str, body: &Bytes) -> Result<References, RefError> {
    let mut reader = Reader {
        type_url,
        body,
        out: References::default(),
    };
    if type_url == LISTENER.type_url {
        reader.listener()?;
    } else if type_url == ROUTE.type_url {
        let route: wire::RouteConfiguration = reader.decode_body()?;
        reader.route_configuration(&route)?;
    } else if type_url == SCOPED_ROUTE.type_url {
        let scope: wire::ScopedRouteConfiguration = reader.decode_body()?;
        reader.scope(&scope)?;
    } else if type_url == CLUSTER.type_url {
        reader.cluster()?;
    }
    let mut out = reader.out;
    out.refs.sort_by(|a, b| {
        ads_order(a.type_url, b.type_url)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.field.cmp(b.field))
    });
    out.refs
        .dedup_by(|b, a| a.type_url == b.type_url && a.name == b.name);
    Ok(out)
}

/// Whether `any` holds the message `full_name` (any host before the last `/`).
fn holds(any: &Any, full_name: &str) -> bool {
    any.type_url.rsplit('/').next() == Some(full_name)
}

struct Reader<'a> {
    type_url: &'a str,
    body: &'a Bytes,
    out: References,
}

impl Reader<'_> {
    fn resource(&self) -> String {
        crate::resource::name_of(self.body)
            .map(String::from)
            .unwrap_or_default()
    }

    fn malformed(&self, field: String, error: &prost::DecodeError) -> RefError {
        RefError::Malformed {
            type_url: self.type_url.into(),
            resource: self.resource(),
            field,
            detail: error.to_string(),
        }
    }

    fn decode_body<M: Message + Default>(&self) -> Result<M, RefError> {
        M::decode(self.body.clone()).map_err(|e| self.malformed(String::new(), &e))
    }

    /// The message inside an `Any`, or an error naming `field` (built only on error).
    fn decode_any<M: Message + Default>(
        &self,
        any: &Any,
        field: impl FnOnce() -> String,
    ) -> Result<M, RefError> {
        M::decode(any.value.clone()).map_err(|e| self.malformed(field(), &e))
    }

    fn add(
        &mut self,
        type_url: &'static str,
        name: &str,
        field: &'static str,
    ) -> Result<(), RefError> {
        if name.is_empty() {
            return Ok(());
        }
        let name = if name.starts_with(XDSTP_SCHEME) {
            XdstpName::parse(name)
                .map_err(|error| RefError::BadName {
                    type_url: self.type_url.into(),
                    resource: self.resource(),
                    field,
                    name: name.into(),
                    error,
                })?
                .canonical()
        } else {
            String::from(name)
        };
        self.out.refs.push(Reference {
            type_url,
            name,
            field,
        });
        Ok(())
    }

    fn listener(&mut self) -> Result<(), RefError> {
        let listener: wire::Listener = self.decode_body()?;
        if let Some(any) = listener
            .api_listener
            .as_ref()
            .and_then(|a| a.api_listener.as_ref())
        {
            if holds(any, HTTP_CONNECTION_MANAGER) {
                let hcm = self.decode_any(any, || "api_listener.api_listener".into())?;
                self.connection_manager(&hcm)?;
            }
        }
        let chains = listener
            .filter_chains
            .iter()
            .enumerate()
            .map(|(i, c)| (Some(i), c))
            .chain(listener.default_filter_chain.iter().map(|c| (None, c)));
        for (index, chain) in chains {
            let at = move || match index {
                Some(i) => format!("filter_chains[{i}]"),
                None => "default_filter_chain".into(),
            };
            for (f, filter) in chain.filters.iter().enumerate() {
                let Some(any) = &filter.typed_config else {
                    continue;
                };
                let field = || format!("{}.filters[{f}].typed_config", at());
                if holds(any, HTTP_CONNECTION_MANAGER) {
                    let hcm = self.decode_any(any, field)?;
                    self.connection_manager(&hcm)?;
                } else if holds(any, TCP_PROXY) {
                    let tcp: wire::TcpProxy = self.decode_any(any, field)?;
                    self.add(CLUSTER.type_url, &tcp.cluster, "TcpProxy.cluster")?;
                    for weight in tcp.weighted_clusters.iter().flat_map(|w| &w.clusters) {
                        self.add(
                            CLUSTER.type_url,
                            &weight.name,
                            "TcpProxy.WeightedCluster.ClusterWeight.name",
                        )?;
                    }
                }
            }
            if let Some(any) = chain
                .transport_socket
                .as_ref()
                .and_then(|t| t.typed_config.as_ref())
            {
                if holds(any, DOWNSTREAM_TLS) {
                    let tls: wire::DownstreamTlsContext =
                        self.decode_any(any, || format!("{}.transport_socket.typed_config", at()))?;
                    self.tls(tls.common_tls_context.as_ref())?;
                    self.secret(tls.session_ticket_keys_sds_secret_config.as_ref())?;
                }
            }
        }
        Ok(())
    }

    fn connection_manager(&mut self, hcm: &wire::HttpConnectionManager) -> Result<(), RefError> {
        if let Some(rds) = &hcm.rds {
            self.add(
                ROUTE.type_url,
                &rds.route_config_name,
                "Rds.route_config_name",
            )?;
        }
        if let Some(route) = &hcm.route_config {
            self.route_configuration(route)?;
        }
        if let Some(scoped) = &hcm.scoped_routes {
            if scoped.scoped_rds.is_some() {
                self.add(SCOPED_ROUTE.type_url, &scoped.name, "ScopedRoutes.name")?;
            }
            for scope in scoped
                .scoped_route_configurations_list
                .iter()
                .flat_map(|l| &l.scoped_route_configurations)
            {
                self.scope(scope)?;
            }
        }
        Ok(())
    }

    fn scope(&mut self, scope: &wire::ScopedRouteConfiguration) -> Result<(), RefError> {
        self.add(
            ROUTE.type_url,
            &scope.route_configuration_name,
            "ScopedRouteConfiguration.route_configuration_name",
        )?;
        if let Some(route) = &scope.route_configuration {
            self.route_configuration(route)?;
        }
        Ok(())
    }

    fn route_configuration(&mut self, route: &wire::RouteConfiguration) -> Result<(), RefError> {
        self.out.vhds |= route.vhds.is_some();
        self.mirrors(&route.request_mirror_policies)?;
        for host in &route.virtual_hosts {
            self.mirrors(&host.request_mirror_policies)?;
            for action in host.routes.iter().filter_map(|r| r.route.as_ref()) {
                self.add(CLUSTER.type_url, &action.cluster, "RouteAction.cluster")?;
                for weight in action.weighted_clusters.iter().flat_map(|w| &w.clusters) {
                    self.add(
                        CLUSTER.type_url,
                        &weight.name,
                        "WeightedCluster.ClusterWeight.name",
                    )?;
                }
                self.mirrors(&action.request_mirror_policies)?;
                if !action.cluster_specifier_plugin.is_empty() {
                    let named = route.cluster_specifier_plugins.iter().find(|p| {
                        p.extension
                            .as_ref()
                            .is_some_and(|e| e.name == action.cluster_specifier_plugin)
                    });
                    if let Some(plugin) = named {
                        self.plugin(plugin)?;
                    }
                }
                if let Some(plugin) = &action.inline_cluster_specifier_plugin {
                    self.plugin(plugin)?;
                }
            }
        }
        Ok(())
    }

    fn mirrors(&mut self, policies: &[wire::RequestMirrorPolicy]) -> Result<(), RefError> {
        for policy in policies {
            self.add(
                CLUSTER.type_url,
                &policy.cluster,
                "RequestMirrorPolicy.cluster",
            )?;
        }
        Ok(())
    }

    fn plugin(&mut self, plugin: &wire::ClusterSpecifierPlugin) -> Result<(), RefError> {
        let Some(extension) = &plugin.extension else {
            return Ok(());
        };
        let Some(any) = &extension.typed_config else {
            return Ok(());
        };
        if holds(any, ROUTE_LOOKUP_PLUGIN) {
            let rls: wire::RouteLookupClusterSpecifier = self.decode_any(any, || {
                format!(
                    "cluster_specifier_plugins[{}].extension.typed_config",
                    extension.name
                )
            })?;
            if let Some(config) = &rls.route_lookup_config {
                self.add(
                    CLUSTER.type_url,
                    &config.default_target,
                    "RouteLookupConfig.default_target",
                )?;
            }
        }
        Ok(())
    }

    fn cluster(&mut self) -> Result<(), RefError> {
        let cluster: wire::Cluster = self.decode_body()?;
        if cluster.r#type == Some(wire::DISCOVERY_TYPE_EDS) {
            let service = cluster
                .eds_cluster_config
                .as_ref()
                .map_or("", |e| e.service_name.as_str());
            if service.is_empty() {
                self.add(ENDPOINT.type_url, &cluster.name, "Cluster.name")?;
            } else {
                self.add(ENDPOINT.type_url, service, "EdsClusterConfig.service_name")?;
            }
        }
        if let Some(any) = cluster
            .cluster_type
            .as_ref()
            .and_then(|t| t.typed_config.as_ref())
        {
            if holds(any, AGGREGATE_CLUSTER) {
                let aggregate: wire::AggregateClusterConfig =
                    self.decode_any(any, || "cluster_type.typed_config".into())?;
                let mut children = Vec::with_capacity(aggregate.clusters.len());
                for child in &aggregate.clusters {
                    self.add(CLUSTER.type_url, child, "ClusterConfig.clusters")?;
                    if let Some(added) = self.out.refs.last() {
                        if !child.is_empty() {
                            children.push(added.name.clone());
                        }
                    }
                }
                self.out.aggregate = Some(children);
            }
        }
        let sockets = cluster.transport_socket.iter().map(|s| (None, s)).chain(
            cluster
                .transport_socket_matches
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((Some(i), m.transport_socket.as_ref()?))),
        );
        for (index, socket) in sockets {
            let Some(any) = &socket.typed_config else {
                continue;
            };
            if holds(any, UPSTREAM_TLS) {
                let tls: wire::UpstreamTlsContext = self.decode_any(any, || match index {
                    None => "transport_socket.typed_config".into(),
                    Some(i) => {
                        format!("transport_socket_matches[{i}].transport_socket.typed_config")
                    }
                })?;
                self.tls(tls.common_tls_context.as_ref())?;
            }
        }
        Ok(())
    }

    fn tls(&mut self, common: Option<&wire::CommonTlsContext>) -> Result<(), RefError> {
        let Some(common) = common else {
            return Ok(());
        };
        for secret in &common.tls_certificate_sds_secret_configs {
            self.secret(Some(secret))?;
        }
        self.secret(common.validation_context_sds_secret_config.as_ref())?;
        self.secret(
            common
                .combined_validation_context
                .as_ref()
                .and_then(|c| c.validation_context_sds_secret_config.as_ref()),
        )
    }

    fn secret(&mut self, secret: Option<&wire::SdsSecretConfig>) -> Result<(), RefError> {
        match secret {
            Some(secret) if secret.sds_config.is_some() => {
                self.add(SECRET.type_url, &secret.name, "SdsSecretConfig.name")
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
