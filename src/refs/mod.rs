//! The names a resource refers to, read from its encoded body without a full decode.
//!
//! A Listener names a RouteConfiguration (or holds one inline), a route names Clusters, a
//! Cluster names its ClusterLoadAssignment and may aggregate other Clusters; listeners and
//! clusters name Secrets through their TLS transport sockets. The client's dependency
//! manager ([`crate::client::deps`]) follows these names, and the server checks a
//! publication's consistency with them ([`crate::server::ResourceStore::consistency`]).
//!
//! [`references`] walks the encoded body and descends only into the fields on a path to a
//! reference (each cited by its Envoy field path in the code), skipping every other field
//! without decoding it; names are zero-copy slices of the body. No message is built, so
//! this costs a fraction of a full decode (`benches/README.md`) and needs no protoc. The
//! same paths as minimal prost messages (`wire.rs`) build the bodies scenarios and tests
//! use.
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
//!   `DownstreamTlsContext`; the ECDS name of every filter configured by
//!   `config_discovery`: HTTP filters (`HttpFilter.name`), network filters (`Filter.name`)
//!   and listener filters (`ListenerFilter.name`).
//! - **RouteConfiguration**: every virtual host's routes: `route.cluster`,
//!   `weighted_clusters.clusters[].name`, the cluster-specifier plugin a route names
//!   (`cluster_specifier_plugin`, looked up in `cluster_specifier_plugins`) or holds
//!   inline, of which the RLS plugin (gRPC A28, `grpc.lookup.v1.RouteLookupClusterSpecifier`)
//!   names its `default_target`; request mirror policies at every level (CDS);
//!   [`References::vhds`] when the virtual hosts come from VHDS (their names are known
//!   only on demand).
//! - **ScopedRouteConfiguration** (SRDS): `route_configuration_name` (RDS) or the inline
//!   route configuration's references.
//! - **VirtualHost** (VHDS): its routes' and mirror policies' clusters, as in a route
//!   configuration.
//! - **TypedExtensionConfig** (ECDS): a connection manager or TCP proxy delivered over
//!   ECDS names what it would name inline; other extensions add nothing.
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
//!   what a store holds however either was written; a malformed one is
//!   [`RefError::MalformedXdstpName`]. Other names are taken as written; an empty name is no
//!   reference.
//! - **A reference is never relative to the resource that holds it.** No published xDS
//!   text resolves a name against the referrer's: xRFC TP1 writes every name whole,
//!   "`xdstp://[{authority}]/{resource type}/{id/*}?{context parameters}`", and ties the
//!   referrer only to the *server* ("When the `ConfigSource` adjacent to a resource name
//!   matches the URI authority, the `ConfigSource` will continue to be used. When there is
//!   no match, the xDS client will fallback to the bootstrap"); gRPC A47 gives a name
//!   without authority the empty authority ("New-style resource names without any
//!   authority will use the empty string as the key"); Envoy's `ConfigSource.self` picks
//!   "the same server it got the ConfigSource from", not a name. So `xdstp:///T/r` in a
//!   resource of authority `a` is `xdstp:///T/r`, and a plain name stays plain (the
//!   protocol text of envoyproxy/envoy `docs/root/api-docs/xds_protocol.rst` says nothing
//!   more of `xdstp://` names).
//! - **Deterministic**: references come sorted by type (make-before-break order) and name,
//!   each once, whatever the order of the body.
//! - **A filter's ECDS name is read only with `config_discovery`**, whatever its
//!   `default_config`: the name is what the client subscribes to either way (whether it
//!   waits, `ExtensionConfigSource.apply_default_config_without_warming`, is not read).
//! - **Upstream filters are read like downstream ones**: a cluster's network filters
//!   (`Cluster.filters`) and the HTTP filters of its `HttpProtocolOptions`
//!   (`typed_extension_protocol_options`, `http_filters`) name their ECDS configuration
//!   when they have `config_discovery`.
//! - **Not read**: the `matcher` trees of virtual hosts and filter chains, on-demand CDS,
//!   and `TypedStruct` configurations (JSON, not protobuf).

pub mod build;
mod wire;

/// `envoy.config.cluster.v3.Cluster.DiscoveryType.EDS`.
const DISCOVERY_TYPE_EDS: u64 = 3;

use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;

use crate::name::{NameParseError, XdstpName, XDSTP_SCHEME};
use crate::text::SharedStr;
use crate::types::{
    ads_order, CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, SECRET,
    VIRTUAL_HOST,
};

/// The types whose bodies [`references`] reads (every other type refers to nothing): one
/// list for the dependency manager, the store's consistency check and the fuzz target.
pub const REFERRING: [&str; 6] = [
    LISTENER.type_url,
    ROUTE.type_url,
    SCOPED_ROUTE.type_url,
    VIRTUAL_HOST.type_url,
    CLUSTER.type_url,
    EXTENSION_CONFIG.type_url,
];

/// The name of a VHDS virtual host's route configuration: VHDS names are `<route
/// configuration name>/<host entry>`, and "matching should be done from right to left since
/// a host entry cannot contain slashes while a route configuration name can" (Envoy, "Virtual
/// Host Discovery Service (VHDS)"). The text gives no other form for `xdstp://` route
/// configurations, so theirs are named the same way (`xdstp://a/…RouteConfiguration/r/host`
/// belongs to `xdstp://a/…RouteConfiguration/r`).
pub fn vhds_route_configuration(name: &str) -> Option<&str> {
    name.rsplit_once('/')
        .map(|(route, _)| route)
        .filter(|r| !r.is_empty())
}

/// `Any` type of the HTTP connection manager network filter.
pub const HTTP_CONNECTION_MANAGER: &str =
    "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
/// `Any` type of the TCP proxy network filter.
pub const TCP_PROXY: &str = "envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy";
/// `Any` type of a cluster's upstream HTTP options
/// (`Cluster.typed_extension_protocol_options`), which carry its upstream HTTP filters.
pub const UPSTREAM_HTTP_PROTOCOL_OPTIONS: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";
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
    /// Its name (canonical when `xdstp://`): a slice of the body it was read from.
    pub name: SharedStr,
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
#[non_exhaustive]
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
    MalformedXdstpName {
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
            RefError::MalformedXdstpName {
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
/// refers to nothing). Names are zero-copy slices of `body` (canonical `xdstp://` names
/// excepted), so decode `body` from the buffer the resource came in.
pub fn references(type_url: &str, body: &Bytes) -> Result<References, RefError> {
    let mut reader = Reader {
        type_url,
        body,
        out: References::default(),
    };
    if type_url == LISTENER.type_url {
        reader.listener(body)?;
    } else if type_url == ROUTE.type_url {
        reader.route_configuration(body, "")?;
    } else if type_url == SCOPED_ROUTE.type_url {
        reader.scope(body, "")?;
    } else if type_url == VIRTUAL_HOST.type_url {
        // Plugins are named in the route configuration, not in a virtual host alone.
        reader.virtual_host(body, "", &mut Vec::new())?;
    } else if type_url == CLUSTER.type_url {
        reader.cluster(body)?;
    } else if type_url == EXTENSION_CONFIG.type_url {
        reader.extension_config(body)?;
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

/// One field of an encoded message: its number and, for the wire types a reference can
/// travel in, its value.
enum Value<'a> {
    Varint(u64),
    Len(&'a [u8]),
    /// Fixed-width or a group: skipped.
    Other,
}

fn varint(buf: &[u8], pos: &mut usize) -> Result<u64, &'static str> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*pos).ok_or("truncated")?;
        *pos += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("malformed varint")
}

fn advance(buf: &[u8], pos: &mut usize, len: u64) -> Result<(), &'static str> {
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| pos.checked_add(len))
        .filter(|end| *end <= buf.len())
        .ok_or("truncated")?;
    *pos = end;
    Ok(())
}

/// The fields of an encoded message, in order; groups (wire types 3 and 4) are skipped
/// whole. Every step is bounded by the buffer: no recursion, no allocation.
struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Fields<'a> {
    fn next(&mut self) -> Result<Option<(u64, Value<'a>)>, &'static str> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let tag = varint(self.buf, &mut self.pos)?;
        let field = tag >> 3;
        if field == 0 {
            return Err("field number 0");
        }
        let value = match tag & 7 {
            0 => Value::Varint(varint(self.buf, &mut self.pos)?),
            1 => {
                advance(self.buf, &mut self.pos, 8)?;
                Value::Other
            }
            2 => {
                let len = varint(self.buf, &mut self.pos)?;
                let start = self.pos;
                advance(self.buf, &mut self.pos, len)?;
                Value::Len(self.buf.get(start..self.pos).ok_or("truncated")?)
            }
            3 => {
                self.skip_group()?;
                Value::Other
            }
            5 => {
                advance(self.buf, &mut self.pos, 4)?;
                Value::Other
            }
            _ => return Err("invalid wire type"),
        };
        Ok(Some((field, value)))
    }

    /// Skips to the end of the group just opened (nested groups included).
    fn skip_group(&mut self) -> Result<(), &'static str> {
        let mut depth: u32 = 1;
        while depth > 0 {
            let tag = varint(self.buf, &mut self.pos)?;
            match tag & 7 {
                0 => {
                    varint(self.buf, &mut self.pos)?;
                }
                1 => advance(self.buf, &mut self.pos, 8)?,
                2 => {
                    let len = varint(self.buf, &mut self.pos)?;
                    advance(self.buf, &mut self.pos, len)?;
                }
                3 => depth = depth.saturating_add(1),
                4 => depth -= 1,
                5 => advance(self.buf, &mut self.pos, 4)?,
                _ => return Err("invalid wire type"),
            }
        }
        Ok(())
    }
}

fn fields(buf: &[u8]) -> Fields<'_> {
    Fields { buf, pos: 0 }
}

/// The type name an `Any`'s type URL names (what follows its last `/`).
fn any_type(type_url: &[u8]) -> &[u8] {
    match type_url.iter().rposition(|b| *b == b'/') {
        Some(at) => type_url.get(at + 1..).unwrap_or(&[]),
        None => type_url,
    }
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

    fn malformed(&self, field: &str, detail: &str) -> RefError {
        RefError::Malformed {
            type_url: self.type_url.into(),
            resource: self.resource(),
            field: field.into(),
            detail: detail.into(),
        }
    }

    /// Calls `visit` for every field of the message `buf` (named `at` in errors).
    fn each<'b>(
        &mut self,
        buf: &'b [u8],
        at: &str,
        mut visit: impl FnMut(&mut Self, u64, Value<'b>) -> Result<(), RefError>,
    ) -> Result<(), RefError> {
        let mut fields = fields(buf);
        loop {
            match fields.next() {
                Ok(Some((field, value))) => visit(self, field, value)?,
                Ok(None) => return Ok(()),
                Err(detail) => return Err(self.malformed(at, detail)),
            }
        }
    }

    /// The value of a length-delimited field, or an error naming it.
    fn len<'b>(&self, value: Value<'b>, at: &str) -> Result<&'b [u8], RefError> {
        match value {
            Value::Len(bytes) => Ok(bytes),
            _ => Err(self.malformed(at, "expected a length-delimited field")),
        }
    }

    /// An `Any`: its type name and its value.
    fn any<'b>(&mut self, buf: &'b [u8], at: &str) -> Result<(&'b [u8], &'b [u8]), RefError> {
        let (mut type_url, mut value): (&[u8], &[u8]) = (&[], &[]);
        self.each(buf, at, |r, field, v| {
            match field {
                1 => type_url = r.len(v, at)?,
                2 => value = r.len(v, at)?,
                _ => {}
            }
            Ok(())
        })?;
        Ok((any_type(type_url), value))
    }

    fn add(
        &mut self,
        type_url: &'static str,
        name: &[u8],
        field: &'static str,
    ) -> Result<(), RefError> {
        if name.is_empty() {
            return Ok(());
        }
        let Ok(text) = core::str::from_utf8(name) else {
            return Err(self.malformed(field, "not valid UTF-8"));
        };
        let name = if text.starts_with(XDSTP_SCHEME) {
            let canonical = XdstpName::parse(text)
                .map_err(|error| RefError::MalformedXdstpName {
                    type_url: self.type_url.into(),
                    resource: self.resource(),
                    field,
                    name: text.into(),
                    error,
                })?
                .canonical();
            if canonical == text {
                SharedStr::from_utf8(self.body.slice_ref(name)).unwrap_or_default()
            } else {
                SharedStr::from(canonical)
            }
        } else {
            // A slice of the body: no copy.
            SharedStr::from_utf8(self.body.slice_ref(name))
                .unwrap_or_else(|_| SharedStr::from(text))
        };
        self.out.refs.push(Reference {
            type_url,
            name,
            field,
        });
        Ok(())
    }

    fn listener(&mut self, buf: &[u8]) -> Result<(), RefError> {
        self.each(buf, "", |r, field, v| {
            match field {
                // Listener.filter_chains
                3 => r.filter_chain(r.len(v, "filter_chains")?, "filter_chains")?,
                // Listener.api_listener -> ApiListener.api_listener (Any)
                19 => {
                    let api = r.len(v, "api_listener")?;
                    r.each(api, "api_listener", |r, field, v| {
                        if field == 1 {
                            let at = "api_listener.api_listener";
                            let (kind, value) = r.any(r.len(v, at)?, at)?;
                            if kind == HTTP_CONNECTION_MANAGER.as_bytes() {
                                r.connection_manager(value, at)?;
                            }
                        }
                        Ok(())
                    })?;
                }
                // Listener.listener_filters -> ListenerFilter.config_discovery (5)
                9 => {
                    let filter = r.len(v, "listener_filters")?;
                    r.discovered(filter, "listener_filters", 5, "ListenerFilter.name")?;
                }
                // Listener.default_filter_chain
                25 => r.filter_chain(r.len(v, "default_filter_chain")?, "default_filter_chain")?,
                _ => {}
            }
            Ok(())
        })
    }

    /// A filter whose configuration may come from ECDS: with `config_discovery` (field
    /// `discovery`), its name (field 1) is the ECDS resource's name (`HttpFilter.name`: "It
    /// also serves as a resource name in ExtensionConfigDS"; the same for listener, network
    /// and HTTP filters).
    fn discovered(
        &mut self,
        buf: &[u8],
        at: &str,
        discovery: u64,
        label: &'static str,
    ) -> Result<(), RefError> {
        let (mut name, mut discovered): (&[u8], bool) = (&[], false);
        self.each(buf, at, |r, field, v| {
            if field == 1 {
                name = r.len(v, at)?;
            } else if field == discovery {
                r.len(v, at)?;
                discovered = true;
            }
            Ok(())
        })?;
        if discovered {
            self.add(EXTENSION_CONFIG.type_url, name, label)?;
        }
        Ok(())
    }

    /// A network filter's configuration (an `Any`): the connection manager and the TCP proxy
    /// name resources; every other filter adds nothing.
    fn network_filter(&mut self, any: &[u8], at: &str) -> Result<(), RefError> {
        let (kind, value) = self.any(any, at)?;
        if kind == HTTP_CONNECTION_MANAGER.as_bytes() {
            self.connection_manager(value, at)?;
        } else if kind == TCP_PROXY.as_bytes() {
            self.tcp_proxy(value, at)?;
        }
        Ok(())
    }

    /// An ECDS resource (`TypedExtensionConfig`): a network filter configuration delivered
    /// over ECDS names what it would name inline.
    fn extension_config(&mut self, buf: &[u8]) -> Result<(), RefError> {
        let (_, config) = self.extension(buf, "typed_config")?;
        if config.is_empty() {
            return Ok(());
        }
        self.network_filter(config, "typed_config")
    }

    /// A filter chain (`at`: `filter_chains` or `default_filter_chain`).
    fn filter_chain(&mut self, buf: &[u8], at: &'static str) -> Result<(), RefError> {
        let (filters, typed, socket) = if at == "filter_chains" {
            (
                "filter_chains.filters",
                "filter_chains.filters.typed_config",
                "filter_chains.transport_socket",
            )
        } else {
            (
                "default_filter_chain.filters",
                "default_filter_chain.filters.typed_config",
                "default_filter_chain.transport_socket",
            )
        };
        self.each(buf, at, |r, field, v| {
            match field {
                // FilterChain.filters -> Filter.typed_config (Any) or Filter.config_discovery
                3 => {
                    let bytes = r.len(v, filters)?;
                    r.each(bytes, filters, |r, field, v| {
                        if field == 4 {
                            r.network_filter(r.len(v, typed)?, typed)?;
                        }
                        Ok(())
                    })?;
                    r.discovered(bytes, filters, 5, "Filter.name")?;
                }
                // FilterChain.transport_socket
                6 => r.transport_socket(r.len(v, socket)?, socket, DOWNSTREAM_TLS)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn connection_manager(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                // HttpConnectionManager.rds -> Rds.route_config_name
                3 => {
                    let rds = r.len(v, at)?;
                    r.each(rds, at, |r, field, v| {
                        if field == 2 {
                            let name = r.len(v, at)?;
                            r.add(ROUTE.type_url, name, "Rds.route_config_name")?;
                        }
                        Ok(())
                    })?;
                }
                // HttpConnectionManager.route_config
                4 => r.route_configuration(r.len(v, at)?, at)?,
                // HttpConnectionManager.http_filters -> HttpFilter.config_discovery (5)
                5 => r.discovered(r.len(v, at)?, at, 5, "HttpFilter.name")?,
                // HttpConnectionManager.scoped_routes
                31 => r.scoped_routes(r.len(v, at)?, at)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn scoped_routes(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        let (mut name, mut scoped_rds): (&[u8], bool) = (&[], false);
        self.each(buf, at, |r, field, v| {
            match field {
                // ScopedRoutes.name
                1 => name = r.len(v, at)?,
                // ScopedRoutes.scoped_route_configurations_list -> .scoped_route_configurations
                4 => {
                    let list = r.len(v, at)?;
                    r.each(list, at, |r, field, v| {
                        if field == 1 {
                            r.scope(r.len(v, at)?, at)?;
                        }
                        Ok(())
                    })?;
                }
                // ScopedRoutes.scoped_rds
                5 => scoped_rds = true,
                _ => {}
            }
            Ok(())
        })?;
        if scoped_rds {
            self.add(SCOPED_ROUTE.type_url, name, "ScopedRoutes.name")?;
        }
        Ok(())
    }

    fn scope(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                // ScopedRouteConfiguration.route_configuration_name
                2 => {
                    let name = r.len(v, at)?;
                    r.add(
                        ROUTE.type_url,
                        name,
                        "ScopedRouteConfiguration.route_configuration_name",
                    )?;
                }
                // ScopedRouteConfiguration.route_configuration
                5 => r.route_configuration(r.len(v, at)?, at)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn route_configuration(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        // Plugins are looked up by name from the routes; collect them first.
        let mut plugins: Vec<&[u8]> = Vec::new();
        let mut named: Vec<&[u8]> = Vec::new();
        self.each(buf, at, |r, field, v| {
            match field {
                // RouteConfiguration.virtual_hosts
                2 => r.virtual_host(r.len(v, at)?, at, &mut named)?,
                // RouteConfiguration.vhds
                9 => r.out.vhds = true,
                // RouteConfiguration.cluster_specifier_plugins
                12 => plugins.push(r.len(v, at)?),
                // RouteConfiguration.request_mirror_policies
                13 => r.mirror(r.len(v, at)?, at)?,
                _ => {}
            }
            Ok(())
        })?;
        for plugin in plugins {
            let mut extension: &[u8] = &[];
            self.each(plugin, at, |r, field, v| {
                if field == 1 {
                    extension = r.len(v, at)?;
                }
                Ok(())
            })?;
            let (name, config) = self.extension(extension, at)?;
            if named.contains(&name) {
                self.plugin_config(config, at)?;
            }
        }
        Ok(())
    }

    /// `TypedExtensionConfig`: its name and its `typed_config`.
    fn extension<'b>(&mut self, buf: &'b [u8], at: &str) -> Result<(&'b [u8], &'b [u8]), RefError> {
        let (mut name, mut config): (&[u8], &[u8]) = (&[], &[]);
        self.each(buf, at, |r, field, v| {
            match field {
                1 => name = r.len(v, at)?,
                2 => config = r.len(v, at)?,
                _ => {}
            }
            Ok(())
        })?;
        Ok((name, config))
    }

    /// A plugin's `typed_config` (an `Any`): the RLS plugin names its default target.
    fn plugin_config(&mut self, any: &[u8], at: &str) -> Result<(), RefError> {
        if any.is_empty() {
            return Ok(());
        }
        let (kind, value) = self.any(any, at)?;
        if kind != ROUTE_LOOKUP_PLUGIN.as_bytes() {
            return Ok(());
        }
        // RouteLookupClusterSpecifier.route_lookup_config -> RouteLookupConfig.default_target
        self.each(value, at, |r, field, v| {
            if field == 1 {
                let config = r.len(v, at)?;
                r.each(config, at, |r, field, v| {
                    if field == 9 {
                        let name = r.len(v, at)?;
                        r.add(CLUSTER.type_url, name, "RouteLookupConfig.default_target")?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })
    }

    fn virtual_host<'b>(
        &mut self,
        buf: &'b [u8],
        at: &str,
        named: &mut Vec<&'b [u8]>,
    ) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                // VirtualHost.routes -> Route.route (RouteAction)
                3 => {
                    let route = r.len(v, at)?;
                    r.each(route, at, |r, field, v| {
                        if field == 2 {
                            r.route_action(r.len(v, at)?, at, named)?;
                        }
                        Ok(())
                    })?;
                }
                // VirtualHost.request_mirror_policies
                22 => r.mirror(r.len(v, at)?, at)?,
                _ => {}
            }
            Ok(())
        })
    }

    fn route_action<'b>(
        &mut self,
        buf: &'b [u8],
        at: &str,
        named: &mut Vec<&'b [u8]>,
    ) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                // RouteAction.cluster
                1 => {
                    let name = r.len(v, at)?;
                    r.add(CLUSTER.type_url, name, "RouteAction.cluster")?;
                }
                // RouteAction.weighted_clusters -> WeightedCluster.clusters -> ClusterWeight.name
                3 => r.weighted(r.len(v, at)?, at, "WeightedCluster.ClusterWeight.name")?,
                // RouteAction.request_mirror_policies
                30 => r.mirror(r.len(v, at)?, at)?,
                // RouteAction.cluster_specifier_plugin
                37 => named.push(r.len(v, at)?),
                // RouteAction.inline_cluster_specifier_plugin -> .extension
                39 => {
                    let plugin = r.len(v, at)?;
                    let mut extension: &[u8] = &[];
                    r.each(plugin, at, |r, field, v| {
                        if field == 1 {
                            extension = r.len(v, at)?;
                        }
                        Ok(())
                    })?;
                    let (_, config) = r.extension(extension, at)?;
                    r.plugin_config(config, at)?;
                }
                _ => {}
            }
            Ok(())
        })
    }

    /// `WeightedCluster` (route or TCP proxy): `clusters[].name` (field 1 of field 1).
    fn weighted(&mut self, buf: &[u8], at: &str, label: &'static str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            if field == 1 {
                let weight = r.len(v, at)?;
                r.each(weight, at, |r, field, v| {
                    if field == 1 {
                        let name = r.len(v, at)?;
                        r.add(CLUSTER.type_url, name, label)?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        })
    }

    /// `RequestMirrorPolicy.cluster`.
    fn mirror(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            if field == 1 {
                let name = r.len(v, at)?;
                r.add(CLUSTER.type_url, name, "RequestMirrorPolicy.cluster")?;
            }
            Ok(())
        })
    }

    /// `TcpProxy.cluster` and `TcpProxy.weighted_clusters`.
    fn tcp_proxy(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                2 => {
                    let name = r.len(v, at)?;
                    r.add(CLUSTER.type_url, name, "TcpProxy.cluster")?;
                }
                10 => r.weighted(
                    r.len(v, at)?,
                    at,
                    "TcpProxy.WeightedCluster.ClusterWeight.name",
                )?,
                _ => {}
            }
            Ok(())
        })
    }

    fn cluster(&mut self, buf: &[u8]) -> Result<(), RefError> {
        let (mut name, mut eds, mut service): (&[u8], bool, &[u8]) = (&[], false, &[]);
        let mut aggregate: Option<&[u8]> = None;
        let mut sockets: Vec<(&[u8], &'static str)> = Vec::new();
        self.each(buf, "", |r, field, v| {
            match field {
                // Cluster.name (the last one wins, as in protobuf)
                1 => name = r.len(v, "Cluster.name")?,
                // Cluster.type
                2 => match v {
                    Value::Varint(t) => eds = t == DISCOVERY_TYPE_EDS,
                    _ => return Err(r.malformed("Cluster.type", "expected a varint")),
                },
                // Cluster.eds_cluster_config -> EdsClusterConfig.service_name
                3 => {
                    let config = r.len(v, "eds_cluster_config")?;
                    r.each(config, "eds_cluster_config", |r, field, v| {
                        if field == 2 {
                            service = r.len(v, "eds_cluster_config")?;
                        }
                        Ok(())
                    })?;
                }
                // Cluster.transport_socket
                24 => sockets.push((r.len(v, "transport_socket")?, "transport_socket")),
                // Cluster.typed_extension_protocol_options: map<string, Any>, entries of
                // key (1) and value (2); HttpProtocolOptions.http_filters (6)
                36 => {
                    let at = "typed_extension_protocol_options";
                    let entry = r.len(v, at)?;
                    r.each(entry, at, |r, field, v| {
                        if field == 2 {
                            let (kind, options) = r.any(r.len(v, at)?, at)?;
                            if kind == UPSTREAM_HTTP_PROTOCOL_OPTIONS.as_bytes() {
                                let at = "HttpProtocolOptions.http_filters";
                                r.each(options, at, |r, field, v| {
                                    if field == 6 {
                                        r.discovered(r.len(v, at)?, at, 5, "HttpFilter.name")?;
                                    }
                                    Ok(())
                                })?;
                            }
                        }
                        Ok(())
                    })?;
                }
                // Cluster.filters: cluster.v3.Filter { name = 1, typed_config = 2,
                // config_discovery = 3 }
                40 => {
                    let filter = r.len(v, "Cluster.filters")?;
                    r.discovered(filter, "Cluster.filters", 3, "Cluster.filters.name")?;
                }
                // Cluster.cluster_type (CustomClusterType: name, typed_config)
                38 => {
                    let custom = r.len(v, "cluster_type")?;
                    let (_, config) = r.extension(custom, "cluster_type")?;
                    if !config.is_empty() {
                        let (kind, value) = r.any(config, "cluster_type.typed_config")?;
                        if kind == AGGREGATE_CLUSTER.as_bytes() {
                            aggregate = Some(value);
                        }
                    }
                }
                // Cluster.transport_socket_matches -> TransportSocketMatch.transport_socket
                43 => {
                    let at = "transport_socket_matches.transport_socket";
                    let entry = r.len(v, at)?;
                    r.each(entry, at, |r, field, v| {
                        if field == 3 {
                            sockets.push((r.len(v, at)?, at));
                        }
                        Ok(())
                    })?;
                }
                _ => {}
            }
            Ok(())
        })?;
        if eds {
            if service.is_empty() {
                self.add(ENDPOINT.type_url, name, "Cluster.name")?;
            } else {
                self.add(ENDPOINT.type_url, service, "EdsClusterConfig.service_name")?;
            }
        }
        if let Some(config) = aggregate {
            let mut children = Vec::new();
            // ClusterConfig.clusters
            self.each(config, "cluster_type.typed_config", |r, field, v| {
                if field == 1 {
                    let child = r.len(v, "ClusterConfig.clusters")?;
                    let before = r.out.refs.len();
                    r.add(CLUSTER.type_url, child, "ClusterConfig.clusters")?;
                    if let Some(added) = r.out.refs.get(before) {
                        children.push(String::from(added.name.as_str()));
                    }
                }
                Ok(())
            })?;
            self.out.aggregate = Some(children);
        }
        for (socket, at) in sockets {
            self.transport_socket(socket, at, UPSTREAM_TLS)?;
        }
        Ok(())
    }

    /// A transport socket whose `typed_config` (field 3) is the TLS context `tls`.
    fn transport_socket(&mut self, buf: &[u8], at: &str, tls: &str) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            if field == 3 {
                let (kind, value) = r.any(r.len(v, at)?, at)?;
                if kind == tls.as_bytes() {
                    r.tls_context(value, at, tls == DOWNSTREAM_TLS)?;
                }
            }
            Ok(())
        })
    }

    /// `UpstreamTlsContext` / `DownstreamTlsContext`: `common_tls_context` (1) and, in the
    /// downstream one, `session_ticket_keys_sds_secret_config` (5; in the upstream one,
    /// field 5 is a deprecated bool wrapper, which has no field 2 and so names nothing).
    fn tls_context(&mut self, buf: &[u8], at: &str, downstream: bool) -> Result<(), RefError> {
        self.each(buf, at, |r, field, v| {
            match field {
                1 => {
                    // CommonTlsContext
                    let common = r.len(v, at)?;
                    r.each(common, at, |r, field, v| {
                        match field {
                            // tls_certificate_sds_secret_configs,
                            // validation_context_sds_secret_config
                            6 | 7 => r.secret(r.len(v, at)?, at)?,
                            // combined_validation_context -> validation_context_sds_secret_config
                            8 => {
                                let combined = r.len(v, at)?;
                                r.each(combined, at, |r, field, v| {
                                    if field == 2 {
                                        r.secret(r.len(v, at)?, at)?;
                                    }
                                    Ok(())
                                })?;
                            }
                            _ => {}
                        }
                        Ok(())
                    })?;
                }
                5 if downstream => r.secret(r.len(v, at)?, at)?,
                _ => {}
            }
            Ok(())
        })
    }

    /// `SdsSecretConfig`: an SDS reference when it has `sds_config`.
    fn secret(&mut self, buf: &[u8], at: &str) -> Result<(), RefError> {
        let (mut name, mut sds): (&[u8], bool) = (&[], false);
        self.each(buf, at, |r, field, v| {
            match field {
                1 => name = r.len(v, at)?,
                2 => sds = true,
                _ => {}
            }
            Ok(())
        })?;
        if sds {
            self.add(SECRET.type_url, name, "SdsSecretConfig.name")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
