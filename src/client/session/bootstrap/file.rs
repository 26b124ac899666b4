//! gRPC's xDS bootstrap file, read from its JSON (feature `json`): which management
//! servers to talk to, in which order, with which credentials and features, and the node
//! to present (gRPC A27 "xDS-Based Global Load Balancing", A47 "xDS Federation", A71 "xDS
//! Fallback", A53 for `ignore_resource_deletion`, A65 for the `tls` channel credentials).
//! Finding the file (`GRPC_XDS_BOOTSTRAP`, `GRPC_XDS_BOOTSTRAP_CONFIG`) and reading it is
//! the embedder's; [`BootstrapFile::model`] gives what the [`Session`]
//! runs on.
//!
//! ```json
//! {
//!   "xds_servers": [
//!     {"server_uri": "xds.example.com:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "ca.pem"}}],
//!      "server_features": ["xds_v3", "ignore_resource_deletion"]},
//!     {"server_uri": "localhost:18000", "channel_creds": [{"type": "insecure"}]}
//!   ],
//!   "node": {"id": "my-node", "cluster": "my-cluster", "locality": {"zone": "z1"}, "metadata": {"k": "v"}},
//!   "authorities": {"xds.example.com": {"xds_servers": [ ... ]}},
//!   "client_default_listener_resource_name_template": "%s"
//! }
//! ```
//!
//! # Decisions
//!
//! - **Servers in priority order** (A71): the first is the primary, the others are
//!   fallbacks; an authority without `xds_servers` uses the top-level list (A47, the rule's
//!   home is [`servers_of_authority`]).
//! - **Replicas** (this crate's extension, `"replicas": ["host:port", ...]` in a server
//!   entry): other addresses of the same management server, serving the same data with
//!   the same versions. They are one server for fallback, not a fallback list: the
//!   session spreads its streams over them and moves on when one fails (the session's
//!   docs). gRPC ignores the field; a list of something else than non-empty strings is an
//!   error.
//! - **Channel credentials**: the first supported entry of `channel_creds` is used (A27:
//!   "client will stop at the first type it supports"): `insecure`, and `tls` (A65:
//!   `ca_certificate_file`, `certificate_file`, `private_key_file`) when the embedder
//!   supports it ([`Embedder::tls`]). A server without a supported entry is an error.
//! - **An authority's listener name template must be in the authority** (A47: "it is an
//!   error if `client_listener_resource_name_template` does not start with
//!   `xdstp://<authority_name>/`"); without one, [`default_listener_template`].
//! - **`server_uri`** is a gRPC target: `host:port`, `dns:///host:port`, or an `http://` /
//!   `https://` URI (a bare target gets the scheme its credentials imply:
//!   [`ManagementServer::endpoint_uri`]). **A malformed one is refused here**, naming the
//!   field (as is each of `replicas`): no host, a port that is not a number up to 65535,
//!   spaces or other characters no host name has, or a scheme other than `dns`, `http`
//!   and `https` (gRPC's `unix:` and `xds:` targets are not management servers this crate
//!   connects to). Accepted, such a target would only fail at every connection attempt,
//!   retried forever with backoff, which reads as "unreachable" instead of "misconfigured".
//! - **Node**: the JSON form of `envoy.config.core.v3.Node` (`id`, `cluster`, `locality`,
//!   `metadata`; proto or JSON field names); the client's fields are filled from the
//!   [`Embedder`] (A27: `user_agent_name`, `user_agent_version` and `client_features`
//!   "should not be specified in the bootstrap file"): [`with_client_fields`].
//! - **Unknown fields are ignored** (A27: "to allow for future changes in a
//!   backward-compatible way"); a known field of the wrong shape is an error naming it
//!   ([`BootstrapFileError::Invalid`]). Reading never panics, whatever the input.

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::super::Session;
use super::{
    default_listener_template, listener_name, servers_of_authority, BootstrapServers, ServerEntry,
};
use crate::pb::envoy::config::core::v3::{node::UserAgentVersionType, Locality, Node};

/// The `client_features` a client on the core sends: it understands `Resource` wrappers
/// in SotW responses (xDS protocol, "Resource Containers").
pub const CLIENT_FEATURES: &[&str] = &["xds.config.resource-in-sotw"];

/// What the client embedding the core is and can do: the node fields it fills (A27) and
/// the channel credentials it can use (A27: the first supported entry is chosen).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Embedder {
    /// The node's `user_agent_name`.
    pub user_agent_name: String,
    /// The node's `user_agent_version`.
    pub user_agent_version: String,
    /// Whether `tls` channel credentials (A65) are supported.
    pub tls: bool,
}

impl Embedder {
    /// An embedder by this name and version that supports `insecure` credentials only.
    pub fn new(user_agent_name: impl Into<String>, user_agent_version: impl Into<String>) -> Self {
        Embedder {
            user_agent_name: user_agent_name.into(),
            user_agent_version: user_agent_version.into(),
            tls: false,
        }
    }

    /// The same, supporting `tls` credentials or not.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }
}

/// A parsed bootstrap file. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct BootstrapFile {
    /// The management servers, primary first (`xds_servers`).
    pub servers: Vec<ManagementServer>,
    /// The node the client presents, with the client's own fields filled in.
    pub node: Node,
    /// Per-authority settings for `xdstp://` names (`authorities`, A47).
    pub authorities: BTreeMap<String, Authority>,
    /// `client_default_listener_resource_name_template` (A47), `"%s"` when absent.
    pub client_default_listener_resource_name_template: String,
}

/// One entry of `xds_servers`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ManagementServer {
    /// `server_uri` as written.
    pub server_uri: String,
    /// The first supported entry of `channel_creds`.
    pub channel_creds: ChannelCreds,
    /// `server_features` (`ignore_resource_deletion`, `xds_v3`, ...).
    pub server_features: Vec<String>,
    /// `replicas`, this crate's extension (gRPC's bootstrap has no such field and ignores
    /// it): other addresses of the same management server, with the same credentials
    /// ([`ServerEntry::replicas`]).
    pub replicas: Vec<String>,
}

/// The channel credentials of a server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChannelCreds {
    /// Plain text (`insecure`).
    Insecure,
    /// TLS (`tls`, gRPC A65), when the [`Embedder`] supports it.
    Tls(TlsFiles),
}

/// The files of `tls` channel credentials (gRPC A65); each is optional.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TlsFiles {
    /// The CA bundle that verifies the server (`ca_certificate_file`); without it, the
    /// system's roots.
    pub ca_certificate_file: Option<PathBuf>,
    /// The client certificate chain for mutual TLS (`certificate_file`).
    pub certificate_file: Option<PathBuf>,
    /// Its key (`private_key_file`).
    pub private_key_file: Option<PathBuf>,
}

/// One entry of `authorities` (A47).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authority {
    /// `client_listener_resource_name_template`, by default
    /// `xdstp://<authority>/envoy.config.listener.v3.Listener/%s`.
    pub client_listener_resource_name_template: String,
    /// Its servers, primary first; empty: the top-level servers.
    pub servers: Vec<ManagementServer>,
}

/// Why bootstrap JSON could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum BootstrapFileError {
    /// Not JSON.
    Json(serde_json::Error),
    /// A field is missing, has the wrong shape or breaks a rule: the field's path and
    /// what is wrong.
    Invalid(String, String),
}

impl fmt::Display for BootstrapFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootstrapFileError::Json(e) => write!(f, "bootstrap is not JSON: {e}"),
            BootstrapFileError::Invalid(field, what) => {
                write!(f, "bootstrap field {field}: {what}")
            }
        }
    }
}

impl std::error::Error for BootstrapFileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BootstrapFileError::Json(e) => Some(e),
            BootstrapFileError::Invalid(..) => None,
        }
    }
}

fn invalid(field: &str, what: impl Into<String>) -> BootstrapFileError {
    BootstrapFileError::Invalid(field.into(), what.into())
}

impl ManagementServer {
    /// A server with plain-text credentials and no features.
    pub fn insecure(server_uri: impl Into<String>) -> ManagementServer {
        ManagementServer {
            server_uri: server_uri.into(),
            channel_creds: ChannelCreds::Insecure,
            server_features: Vec::new(),
            replicas: Vec::new(),
        }
    }

    /// This server in the session's model (see [`BootstrapFile::model`]).
    pub fn model(&self) -> ServerEntry {
        ServerEntry::new(self.server_uri.clone(), format!("{:?}", self.channel_creds))
            .with_features(self.server_features.clone())
            .with_replicas(self.replicas.clone())
    }

    /// Whether `server_features` lists `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.server_features.iter().any(|f| f == feature)
    }

    /// The URI to connect to: `server_uri` (a gRPC target) with the scheme its credentials
    /// imply (`dns:///` dropped).
    pub fn endpoint_uri(&self) -> String {
        let uri = self.server_uri.trim();
        if uri.starts_with("http://") || uri.starts_with("https://") {
            return uri.to_string();
        }
        let target = uri
            .strip_prefix("dns:///")
            .or_else(|| uri.strip_prefix("dns:"))
            .unwrap_or(uri);
        let scheme = match self.channel_creds {
            ChannelCreds::Insecure => "http",
            ChannelCreds::Tls(_) => "https",
        };
        format!("{scheme}://{target}")
    }
}

impl BootstrapFile {
    /// A bootstrap with one plain-text server and this node (the embedder's fields filled
    /// in), for programs that do not read a file.
    pub fn single(server_uri: impl Into<String>, node: Node, embedder: &Embedder) -> Self {
        BootstrapFile {
            servers: alloc::vec![ManagementServer::insecure(server_uri)],
            node: with_client_fields(node, embedder),
            authorities: BTreeMap::new(),
            client_default_listener_resource_name_template: "%s".into(),
        }
    }

    /// Parses bootstrap JSON. See the [module docs](self) for the rules.
    pub fn from_json(json: &str, embedder: &Embedder) -> Result<Self, BootstrapFileError> {
        let value: Value = serde_json::from_str(json).map_err(BootstrapFileError::Json)?;
        let root = value
            .as_object()
            .ok_or_else(|| invalid("(root)", "not an object"))?;
        let top = match root.get("xds_servers") {
            Some(v) => servers(v, "xds_servers", embedder)?,
            None => return Err(invalid("xds_servers", "missing")),
        };
        if top.is_empty() {
            return Err(invalid("xds_servers", "empty"));
        }
        let node = match root.get("node") {
            Some(v) => node(v)?,
            None => Node::default(),
        };
        let mut authorities = BTreeMap::new();
        if let Some(v) = root.get("authorities") {
            let map = v
                .as_object()
                .ok_or_else(|| invalid("authorities", "not an object"))?;
            for (name, entry) in map {
                authorities.insert(name.clone(), authority(name, entry, embedder)?);
            }
        }
        let template = string_of(
            root,
            "client_default_listener_resource_name_template",
            "client_default_listener_resource_name_template",
        )?
        .unwrap_or_else(|| "%s".into());
        Ok(BootstrapFile {
            servers: top,
            node: with_client_fields(node, embedder),
            authorities,
            client_default_listener_resource_name_template: template,
        })
    }

    /// The model the session runs on: the servers in priority order, per authority, with
    /// their features; the credentials as an opaque key (the session only compares them).
    pub fn model(&self) -> BootstrapServers {
        let servers = |list: &[ManagementServer]| list.iter().map(|s| s.model()).collect();
        let mut model = BootstrapServers::new(servers(&self.servers));
        for (name, authority) in &self.authorities {
            model = model.with_authority(name.clone(), servers(&authority.servers));
        }
        model
    }

    /// The entry of each server of `session` (made from [`BootstrapFile::model`]), in
    /// [`ServerId`](super::super::ServerId) order: what to connect to when the session
    /// names a server.
    pub fn servers_by_id(&self, session: &Session) -> Vec<ManagementServer> {
        let all: Vec<&ManagementServer> = self
            .servers
            .iter()
            .chain(self.authorities.values().flat_map(|a| a.servers.iter()))
            .collect();
        session
            .server_ids()
            .filter_map(|id| {
                let model = session.server(id)?;
                all.iter()
                    .find(|m| m.model() == *model)
                    .map(|m| (*m).clone())
            })
            .collect()
    }

    /// The servers of `authority` (A47: [`servers_of_authority`]). `None` for an authority
    /// the bootstrap does not name; `""` (old-style names) is the top level.
    pub fn servers_of(&self, authority: &str) -> Option<&[ManagementServer]> {
        servers_of_authority(&self.servers, authority, |a| {
            self.authorities
                .get(a)
                .map(|entry| entry.servers.as_slice())
        })
    }

    /// The Listener name a gRPC channel to `target` subscribes to (A47): `target` is the
    /// path of an `xds:` URI, `authority` its authority if any. `None` for an authority
    /// the bootstrap does not name.
    pub fn listener_name(&self, authority: Option<&str>, target: &str) -> Option<String> {
        let template = match authority {
            Some(a) => self
                .authorities
                .get(a)?
                .client_listener_resource_name_template
                .as_str(),
            None => self.client_default_listener_resource_name_template.as_str(),
        };
        Some(listener_name(template, target))
    }
}

/// One entry of `authorities`; its template must be in it (A47).
fn authority(
    name: &str,
    entry: &Value,
    embedder: &Embedder,
) -> Result<Authority, BootstrapFileError> {
    let field = format!("authorities.{name}");
    let entry = entry
        .as_object()
        .ok_or_else(|| invalid(&field, "not an object"))?;
    let template_field = format!("{field}.client_listener_resource_name_template");
    let key = "client_listener_resource_name_template";
    let template = match string_of(entry, key, &template_field)? {
        Some(t) if !t.starts_with(&format!("xdstp://{name}/")) => {
            return Err(invalid(
                &template_field,
                format!("must start with xdstp://{name}/ (gRPC A47)"),
            ));
        }
        Some(t) => t,
        None => default_listener_template(name),
    };
    let servers = match entry.get("xds_servers") {
        Some(v) => servers(v, &format!("{field}.xds_servers"), embedder)?,
        None => Vec::new(),
    };
    Ok(Authority {
        client_listener_resource_name_template: template,
        servers,
    })
}

/// Whether `target` is a gRPC target this crate can connect to (see the module docs), and
/// what is wrong with it when not.
fn check_target(target: &str) -> Result<(), String> {
    let rest = if let Some(rest) = target.strip_prefix("http://") {
        rest
    } else if let Some(rest) = target.strip_prefix("https://") {
        rest
    } else if let Some(rest) = target.strip_prefix("dns:///") {
        rest
    } else if let Some(rest) = target.strip_prefix("dns:") {
        rest
    } else if let Some((scheme, _)) = target.split_once(':').filter(|(s, r)| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphabetic())
            && !r.starts_with(|c: char| c.is_ascii_digit())
    }) {
        return Err(format!(
            "{target:?}: scheme {scheme:?} is not one of dns, http, https"
        ));
    } else {
        target
    };
    // The authority: up to the first `/` (a URI's path), without userinfo.
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, after)) => (host, after.strip_prefix(':')),
            None => return Err(format!("{target:?}: an IPv6 address without its ']'")),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return Err(format!("{target:?}: no host"));
    }
    let host_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%');
    if !host.chars().all(host_char) {
        return Err(format!(
            "{target:?}: {host:?} is not a host name or address"
        ));
    }
    if let Some(port) = port {
        if port.parse::<u16>().is_err() {
            return Err(format!(
                "{target:?}: port {port:?} is not a number up to 65535"
            ));
        }
    }
    Ok(())
}

fn string_of(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, BootstrapFileError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid(field, "not a string")),
    }
}

/// A field by its proto name or its JSON (lowerCamelCase) name.
fn field<'a>(object: &'a Map<String, Value>, proto: &str, json: &str) -> Option<&'a Value> {
    object.get(proto).or_else(|| object.get(json))
}

fn servers(
    value: &Value,
    field_name: &str,
    embedder: &Embedder,
) -> Result<Vec<ManagementServer>, BootstrapFileError> {
    let list = value
        .as_array()
        .ok_or_else(|| invalid(field_name, "not a list"))?;
    let mut out = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let at = format!("{field_name}[{i}]");
        let entry = entry
            .as_object()
            .ok_or_else(|| invalid(&at, "not an object"))?;
        let server_uri = string_of(entry, "server_uri", &format!("{at}.server_uri"))?
            .filter(|s| !s.is_empty())
            .ok_or_else(|| invalid(&format!("{at}.server_uri"), "missing"))?;
        check_target(&server_uri).map_err(|why| invalid(&format!("{at}.server_uri"), why))?;
        let server_features = match entry.get("server_features") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect(),
            Some(_) => return Err(invalid(&format!("{at}.server_features"), "not a list")),
        };
        let replicas = match entry.get("replicas") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .map(|r| r.as_str().filter(|s| !s.is_empty()).map(String::from))
                .collect::<Option<Vec<String>>>()
                .ok_or_else(|| invalid(&format!("{at}.replicas"), "not a list of addresses"))?,
            Some(_) => return Err(invalid(&format!("{at}.replicas"), "not a list")),
        };
        for (j, replica) in replicas.iter().enumerate() {
            check_target(replica).map_err(|why| invalid(&format!("{at}.replicas[{j}]"), why))?;
        }
        out.push(ManagementServer {
            server_uri,
            channel_creds: first_supported_creds(entry, &at, embedder)?,
            server_features,
            replicas,
        });
    }
    Ok(out)
}

/// The first entry of `channel_creds` the embedder supports (A27: "client will stop at the
/// first type it supports"); none is an error.
fn first_supported_creds(
    entry: &Map<String, Value>,
    at: &str,
    embedder: &Embedder,
) -> Result<ChannelCreds, BootstrapFileError> {
    let creds_field = format!("{at}.channel_creds");
    let creds = entry
        .get("channel_creds")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(&creds_field, "missing or not a list"))?;
    let mut seen = Vec::new();
    for (j, c) in creds.iter().enumerate() {
        let cf = format!("{creds_field}[{j}]");
        let c = c.as_object().ok_or_else(|| invalid(&cf, "not an object"))?;
        let kind = string_of(c, "type", &format!("{cf}.type"))?
            .ok_or_else(|| invalid(&format!("{cf}.type"), "missing"))?;
        if let Some(creds) = channel_creds(&kind, c.get("config"), &cf, embedder)? {
            return Ok(creds);
        }
        seen.push(kind);
    }
    let supported = if embedder.tls {
        "insecure, tls"
    } else {
        "insecure"
    };
    Err(invalid(
        &creds_field,
        format!("no supported type among {seen:?} (supported: {supported})"),
    ))
}

/// The credentials of a `channel_creds` entry, `None` when the embedder does not support
/// its type.
fn channel_creds(
    kind: &str,
    config: Option<&Value>,
    at: &str,
    embedder: &Embedder,
) -> Result<Option<ChannelCreds>, BootstrapFileError> {
    match kind {
        "insecure" => Ok(Some(ChannelCreds::Insecure)),
        "tls" if embedder.tls => {
            let empty = Map::new();
            let config = match config {
                None | Some(Value::Null) => &empty,
                Some(Value::Object(m)) => m,
                Some(_) => return Err(invalid(&format!("{at}.config"), "not an object")),
            };
            let file = |key: &str| -> Result<Option<PathBuf>, BootstrapFileError> {
                Ok(string_of(config, key, &format!("{at}.config.{key}"))?.map(PathBuf::from))
            };
            let files = TlsFiles {
                ca_certificate_file: file("ca_certificate_file")?,
                certificate_file: file("certificate_file")?,
                private_key_file: file("private_key_file")?,
            };
            if files.certificate_file.is_some() != files.private_key_file.is_some() {
                return Err(invalid(
                    &format!("{at}.config"),
                    "certificate_file and private_key_file go together",
                ));
            }
            Ok(Some(ChannelCreds::Tls(files)))
        }
        _ => Ok(None),
    }
}

fn node(value: &Value) -> Result<Node, BootstrapFileError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("node", "not an object"))?;
    let text = |proto: &str, json: &str| -> Result<String, BootstrapFileError> {
        match field(object, proto, json) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(invalid(&format!("node.{proto}"), "not a string")),
        }
    };
    let mut node = Node {
        id: text("id", "id")?,
        cluster: text("cluster", "cluster")?,
        ..Node::default()
    };
    if let Some(v) = field(object, "locality", "locality").filter(|v| !v.is_null()) {
        let l = v
            .as_object()
            .ok_or_else(|| invalid("node.locality", "not an object"))?;
        let part = |proto: &str, json: &str| -> Result<String, BootstrapFileError> {
            match field(l, proto, json) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(invalid(&format!("node.locality.{proto}"), "not a string")),
            }
        };
        node.locality = Some(Locality {
            region: part("region", "region")?,
            zone: part("zone", "zone")?,
            sub_zone: part("sub_zone", "subZone")?,
        });
    }
    if let Some(v) = field(object, "metadata", "metadata").filter(|v| !v.is_null()) {
        let m = v
            .as_object()
            .ok_or_else(|| invalid("node.metadata", "not an object"))?;
        node.metadata = Some(to_struct(m));
    }
    Ok(node)
}

fn to_struct(map: &Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map.iter().map(|(k, v)| (k.clone(), to_value(v))).collect(),
    }
}

fn to_value(value: &Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match value {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(list) => Kind::ListValue(prost_types::ListValue {
            values: list.iter().map(to_value).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// The node with the client's own fields (A27: `user_agent_name`, `user_agent_version`
/// and `client_features` are the client's, not the file's): the embedder's name and
/// version, and [`CLIENT_FEATURES`] added to those present.
pub fn with_client_fields(mut node: Node, embedder: &Embedder) -> Node {
    node.user_agent_name = embedder.user_agent_name.clone();
    node.user_agent_version_type = Some(UserAgentVersionType::UserAgentVersion(
        embedder.user_agent_version.clone(),
    ));
    for feature in CLIENT_FEATURES {
        if !node.client_features.iter().any(|f| f == feature) {
            node.client_features.push((*feature).into());
        }
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::session::IGNORE_RESOURCE_DELETION;

    const FULL: &str = r#"{
      "xds_servers": [
        {"server_uri": "dns:///primary.example:443", "channel_creds": [{"type": "google_default"}, {"type": "insecure"}],
         "server_features": ["xds_v3", "ignore_resource_deletion"]},
        {"server_uri": "localhost:18001", "channel_creds": [{"type": "insecure"}]}
      ],
      "node": {"id": "n1", "cluster": "c1", "locality": {"zone": "z", "subZone": "s"},
               "metadata": {"a": 1, "b": [true, "x"], "c": {"d": null}}, "unknown": 5},
      "authorities": {
        "fed.example": {"xds_servers": [{"server_uri": "fed:1", "channel_creds": [{"type": "insecure"}]}]},
        "plain.example": {}
      },
      "certificate_providers": {"ignored": {}}
    }"#;

    fn embedder() -> Embedder {
        Embedder::new("test-agent", "1.2.3")
    }

    fn with_uri(uri: &str) -> Result<BootstrapFile, BootstrapFileError> {
        let json = format!(
            r#"{{"xds_servers": [{{"server_uri": {uri:?}, "channel_creds": [{{"type": "insecure"}}]}}]}}"#
        );
        BootstrapFile::from_json(&json, &embedder())
    }

    #[test]
    fn a_malformed_server_uri_is_refused_naming_the_field() {
        for good in [
            "localhost:18000",
            "xds.example.com:443",
            "dns:///xds.example.com:443",
            "dns:xds.example.com",
            "http://127.0.0.1:18000",
            "https://xds.example.com/prefix",
            "[::1]:18000",
            "xds.example.com",
        ] {
            assert!(
                with_uri(good).is_ok(),
                "{good} refused: {:?}",
                with_uri(good).err()
            );
        }
        for bad in [
            "local host:18000",
            "localhost:99999",
            "localhost:port",
            ":18000",
            "http://",
            "unix:///tmp/xds.sock",
            "xds:///listener",
            "[::1:18000",
        ] {
            match with_uri(bad) {
                Err(BootstrapFileError::Invalid(field, why)) => {
                    assert_eq!(field, "xds_servers[0].server_uri", "{bad}: {why}");
                }
                other => panic!("{bad} accepted: {other:?}"),
            }
        }
        let json = r#"{"xds_servers": [{"server_uri": "a:1", "replicas": ["b:2", "c d:3"],
                       "channel_creds": [{"type": "insecure"}]}]}"#;
        match BootstrapFile::from_json(json, &embedder()) {
            Err(BootstrapFileError::Invalid(field, _)) => {
                assert_eq!(field, "xds_servers[0].replicas[1]")
            }
            other => panic!("a malformed replica accepted: {other:?}"),
        }
    }

    #[test]
    fn full_bootstrap() {
        let b = BootstrapFile::from_json(FULL, &embedder()).unwrap();
        assert_eq!(b.servers.len(), 2);
        let primary = &b.servers[0];
        assert_eq!(primary.channel_creds, ChannelCreds::Insecure);
        assert!(primary.has_feature(IGNORE_RESOURCE_DELETION));
        assert_eq!(primary.endpoint_uri(), "http://primary.example:443");
        assert_eq!(b.servers[1].endpoint_uri(), "http://localhost:18001");
        assert_eq!(b.node.id, "n1");
        assert_eq!(b.node.locality.as_ref().unwrap().sub_zone, "s");
        assert_eq!(b.node.metadata.as_ref().unwrap().fields.len(), 3);
        assert_eq!(b.node.user_agent_name, "test-agent");
        assert_eq!(
            b.node.user_agent_version_type,
            Some(UserAgentVersionType::UserAgentVersion("1.2.3".into()))
        );
        assert_eq!(b.node.client_features, CLIENT_FEATURES);
        assert_eq!(b.servers_of("").unwrap().len(), 2);
        assert_eq!(b.servers_of("fed.example").unwrap()[0].server_uri, "fed:1");
        assert_eq!(b.servers_of("plain.example").unwrap().len(), 2);
        assert!(b.servers_of("nowhere").is_none());
        assert_eq!(
            b.listener_name(None, "svc.example:80").unwrap(),
            "svc.example:80"
        );
        assert_eq!(
            b.listener_name(Some("plain.example"), "svc example")
                .unwrap(),
            "xdstp://plain.example/envoy.config.listener.v3.Listener/svc%20example"
        );
        let model = b.model();
        assert_eq!(model.servers_of("plain.example").unwrap().len(), 2);
        assert_eq!(
            model.servers_of("fed.example").unwrap()[0].server_uri,
            "fed:1"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("[]", "(root)"),
            ("{}", "xds_servers"),
            (r#"{"xds_servers": []}"#, "xds_servers"),
            (
                r#"{"xds_servers": [{"channel_creds": [{"type": "insecure"}]}]}"#,
                "xds_servers[0].server_uri",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a"}]}"#,
                "xds_servers[0].channel_creds",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "google_default"}]}]}"#,
                "xds_servers[0].channel_creds",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "tls"}]}]}"#,
                "xds_servers[0].channel_creds",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "node": {"id": 3}}"#,
                "node.id",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "authorities": {"x": {"client_listener_resource_name_template": "xdstp://y/%s"}}}"#,
                "authorities.x.client_listener_resource_name_template",
            ),
        ];
        for (json, field) in cases {
            match BootstrapFile::from_json(json, &embedder()) {
                Err(BootstrapFileError::Invalid(f, _)) => assert_eq!(f, field, "{json}"),
                other => panic!("{json}: {other:?}"),
            }
        }
        assert!(matches!(
            BootstrapFile::from_json("{", &embedder()),
            Err(BootstrapFileError::Json(_))
        ));
    }

    #[test]
    fn tls_creds_when_the_embedder_supports_them() {
        let json = r#"{"xds_servers": [{"server_uri": "s:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "ca.pem"}}]}]}"#;
        let b = BootstrapFile::from_json(json, &embedder().with_tls(true)).unwrap();
        assert_eq!(b.servers[0].endpoint_uri(), "https://s:443");
        assert!(
            matches!(&b.servers[0].channel_creds, ChannelCreds::Tls(f) if f.ca_certificate_file.is_some())
        );
        let half = r#"{"xds_servers": [{"server_uri": "s", "channel_creds": [{"type": "tls", "config": {"certificate_file": "c.pem"}}]}]}"#;
        assert!(matches!(
            BootstrapFile::from_json(half, &embedder().with_tls(true)),
            Err(BootstrapFileError::Invalid(f, _)) if f == "xds_servers[0].channel_creds[0].config"
        ));
    }

    #[test]
    fn replicas_are_other_addresses_of_one_server() {
        let json = r#"{"xds_servers": [{"server_uri": "a:1", "channel_creds": [{"type": "insecure"}], "replicas": ["b:1", "c:1"]}]}"#;
        let b = BootstrapFile::from_json(json, &embedder()).unwrap();
        assert_eq!(b.servers[0].replicas, ["b:1", "c:1"]);
        let model = b.servers[0].model();
        assert_eq!(model.address_count(), 3);
        assert_eq!(model.address(2), "c:1");
        for bad in [r#""b:1""#, r#"[1]"#, r#"[""]"#] {
            let json = format!(
                r#"{{"xds_servers": [{{"server_uri": "a", "channel_creds": [{{"type": "insecure"}}], "replicas": {bad}}}]}}"#
            );
            assert!(matches!(
                BootstrapFile::from_json(&json, &embedder()),
                Err(BootstrapFileError::Invalid(f, _)) if f == "xds_servers[0].replicas"
            ));
        }
    }

    #[test]
    fn any_json_value_is_an_error_or_a_bootstrap_never_a_panic() {
        for json in [
            "null",
            "1",
            r#""s""#,
            r#"{"xds_servers": {}}"#,
            r#"{"xds_servers": [1]}"#,
            r#"{"xds_servers": [{"server_uri": 1, "channel_creds": []}]}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [1]}]}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}], "server_features": 1}]}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "node": {"locality": 1}}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "node": {"metadata": []}}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "authorities": {"x": 1}}"#,
            r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "authorities": []}"#,
        ] {
            assert!(
                BootstrapFile::from_json(json, &embedder().with_tls(true)).is_err(),
                "{json}"
            );
        }
    }
}
