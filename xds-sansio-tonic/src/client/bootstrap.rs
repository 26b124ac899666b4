//! The gRPC xDS bootstrap file: which management servers to talk to, in which order, with
//! which credentials and features, and the node to present (gRPC A27 "xDS-Based Global
//! Load Balancing", A47 "xDS Federation", A71 "xDS Fallback", A53 for
//! `ignore_resource_deletion`, A65 for the `tls` channel credentials).
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
//!   fallbacks; an authority without `xds_servers` uses the top-level list (A47).
//! - **Channel credentials**: the first supported entry of `channel_creds` is used (A27:
//!   "client will stop at the first type it supports"): `insecure`, and `tls` (A65:
//!   `ca_certificate_file`, `certificate_file`, `private_key_file`) with the crate's `tls`
//!   feature. A server without a supported entry is a bootstrap error.
//! - **`server_uri`** is a gRPC target: `host:port`, `dns:///host:port`, or an `http://` /
//!   `https://` URI (a bare target gets the scheme its credentials imply).
//! - **Node**: the JSON form of `envoy.config.core.v3.Node` (`id`, `cluster`, `locality`,
//!   `metadata`; proto or JSON field names); the client fills `user_agent_name`,
//!   `user_agent_version` and `client_features` (A27: they "should not be specified in the
//!   bootstrap file").
//! - **Unknown fields are ignored** (A27: "to allow for future changes in a
//!   backward-compatible way"); a known field of the wrong shape is an error naming it.
//! - **Where it comes from** ([`Bootstrap::from_env`]): the file named by
//!   `GRPC_XDS_BOOTSTRAP`, else the content of `GRPC_XDS_BOOTSTRAP_CONFIG`, as gRPC reads
//!   them.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use xds_sansio::client::session;
use xds_sansio::pb::envoy::config::core::v3::{node::UserAgentVersionType, Locality, Node};

/// The `user_agent_name` the client sends.
pub const USER_AGENT_NAME: &str = "xds-sansio-tonic";

/// The `client_features` the client sends: it understands `Resource` wrappers in SotW
/// responses (xDS protocol, "Resource Containers").
pub const CLIENT_FEATURES: &[&str] = &["xds.config.resource-in-sotw"];

/// The server feature of gRPC A53: keep held resources the server deletes.
pub use xds_sansio::client::session::IGNORE_RESOURCE_DELETION;

/// A parsed bootstrap. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Bootstrap {
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
}

/// The channel credentials of a server.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ChannelCreds {
    /// Plain text (`insecure`).
    Insecure,
    /// TLS (`tls`, gRPC A65); needs the crate's `tls` feature.
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

/// Why a bootstrap could not be read.
#[derive(Debug)]
pub enum BootstrapError {
    /// Neither `GRPC_XDS_BOOTSTRAP` nor `GRPC_XDS_BOOTSTRAP_CONFIG` is set.
    NotConfigured,
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
    /// Not JSON.
    Json(serde_json::Error),
    /// A field is missing or has the wrong shape: the field's path and what is wrong.
    Invalid(String, String),
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootstrapError::NotConfigured => {
                f.write_str("neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set")
            }
            BootstrapError::Io(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            BootstrapError::Json(e) => write!(f, "bootstrap is not JSON: {e}"),
            BootstrapError::Invalid(field, what) => write!(f, "bootstrap field {field}: {what}"),
        }
    }
}

impl std::error::Error for BootstrapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BootstrapError::Io(_, e) => Some(e),
            BootstrapError::Json(e) => Some(e),
            _ => None,
        }
    }
}

fn invalid(field: &str, what: impl Into<String>) -> BootstrapError {
    BootstrapError::Invalid(field.into(), what.into())
}

impl ManagementServer {
    /// A server with plain-text credentials and no features.
    pub fn insecure(server_uri: impl Into<String>) -> ManagementServer {
        ManagementServer {
            server_uri: server_uri.into(),
            channel_creds: ChannelCreds::Insecure,
            server_features: Vec::new(),
        }
    }

    /// This server in the core's model (see [`Bootstrap::model`]).
    pub fn model(&self) -> session::ServerConfig {
        session::ServerConfig::new(self.server_uri.clone(), format!("{:?}", self.channel_creds))
            .with_features(self.server_features.clone())
    }

    /// Whether `server_features` lists `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.server_features.iter().any(|f| f == feature)
    }

    /// The URI tonic connects to: `server_uri` with the scheme its credentials imply
    /// (`dns:///` dropped).
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

impl Bootstrap {
    /// A bootstrap with one plain-text server and this node (the client's fields filled
    /// in), for programs that do not read a file.
    pub fn single(server_uri: impl Into<String>, node: Node) -> Bootstrap {
        Bootstrap {
            servers: vec![ManagementServer::insecure(server_uri)],
            node: with_client_fields(node),
            authorities: BTreeMap::new(),
            client_default_listener_resource_name_template: "%s".into(),
        }
    }

    /// Reads the bootstrap as gRPC does: the file named by `GRPC_XDS_BOOTSTRAP`, else the
    /// JSON in `GRPC_XDS_BOOTSTRAP_CONFIG`.
    pub fn from_env() -> Result<Bootstrap, BootstrapError> {
        if let Some(path) = std::env::var_os("GRPC_XDS_BOOTSTRAP") {
            return Bootstrap::from_file(path);
        }
        match std::env::var("GRPC_XDS_BOOTSTRAP_CONFIG") {
            Ok(json) => Bootstrap::from_json(&json),
            Err(_) => Err(BootstrapError::NotConfigured),
        }
    }

    /// Reads a bootstrap file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Bootstrap, BootstrapError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| BootstrapError::Io(path.into(), e))?;
        Bootstrap::from_json(&text)
    }

    /// Parses bootstrap JSON.
    pub fn from_json(json: &str) -> Result<Bootstrap, BootstrapError> {
        let value: Value = serde_json::from_str(json).map_err(BootstrapError::Json)?;
        let root = value
            .as_object()
            .ok_or_else(|| invalid("(root)", "not an object"))?;
        let top = match root.get("xds_servers") {
            Some(v) => servers(v, "xds_servers")?,
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
                let field = format!("authorities.{name}");
                let entry = entry
                    .as_object()
                    .ok_or_else(|| invalid(&field, "not an object"))?;
                let template_field = format!("{field}.client_listener_resource_name_template");
                let template = match string_of(
                    entry,
                    "client_listener_resource_name_template",
                    &template_field,
                )? {
                    Some(t) => {
                        if !t.starts_with(&format!("xdstp://{name}/")) {
                            return Err(invalid(
                                &template_field,
                                format!("must start with xdstp://{name}/ (gRPC A47)"),
                            ));
                        }
                        t
                    }
                    None => session::default_listener_template(name),
                };
                let servers = match entry.get("xds_servers") {
                    Some(v) => servers(v, &format!("{field}.xds_servers"))?,
                    None => Vec::new(),
                };
                authorities.insert(
                    name.clone(),
                    Authority {
                        client_listener_resource_name_template: template,
                        servers,
                    },
                );
            }
        }
        let template = string_of(
            root,
            "client_default_listener_resource_name_template",
            "client_default_listener_resource_name_template",
        )?
        .unwrap_or_else(|| "%s".into());
        Ok(Bootstrap {
            servers: top,
            node: with_client_fields(node),
            authorities,
            client_default_listener_resource_name_template: template,
        })
    }

    /// The model the core's session runs on: the servers in priority order, per authority,
    /// with their features; the credentials as an opaque key (the session only compares
    /// them).
    pub fn model(&self) -> session::Bootstrap {
        let servers = |list: &[ManagementServer]| list.iter().map(|s| s.model()).collect();
        let mut model = session::Bootstrap::new(servers(&self.servers));
        for (name, authority) in &self.authorities {
            model = model.with_authority(name.clone(), servers(&authority.servers));
        }
        model
    }

    /// The servers of `authority` (A47): its own list, else the top-level one. `None` for
    /// an authority the bootstrap does not name; `""` (old-style names) is the top level.
    pub fn servers_of(&self, authority: &str) -> Option<&[ManagementServer]> {
        if authority.is_empty() {
            return Some(&self.servers);
        }
        let entry = self.authorities.get(authority)?;
        Some(if entry.servers.is_empty() {
            &self.servers
        } else {
            &entry.servers
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
        Some(session::listener_name(template, target))
    }
}

fn string_of(
    object: &Map<String, Value>,
    key: &str,
    field: &str,
) -> Result<Option<String>, BootstrapError> {
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

fn servers(value: &Value, field_name: &str) -> Result<Vec<ManagementServer>, BootstrapError> {
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
        let creds_field = format!("{at}.channel_creds");
        let creds = entry
            .get("channel_creds")
            .and_then(Value::as_array)
            .ok_or_else(|| invalid(&creds_field, "missing or not a list"))?;
        let mut chosen = None;
        let mut seen = Vec::new();
        for (j, c) in creds.iter().enumerate() {
            let cf = format!("{creds_field}[{j}]");
            let c = c.as_object().ok_or_else(|| invalid(&cf, "not an object"))?;
            let kind = string_of(c, "type", &format!("{cf}.type"))?
                .ok_or_else(|| invalid(&format!("{cf}.type"), "missing"))?;
            if let Some(creds) = channel_creds(&kind, c.get("config"), &cf)? {
                chosen = Some(creds);
                break;
            }
            seen.push(kind);
        }
        let channel_creds = chosen.ok_or_else(|| {
            invalid(
                &creds_field,
                format!("no supported type among {seen:?} (supported: insecure, tls with feature `tls`)"),
            )
        })?;
        let server_features = match entry.get("server_features") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect(),
            Some(_) => return Err(invalid(&format!("{at}.server_features"), "not a list")),
        };
        out.push(ManagementServer {
            server_uri,
            channel_creds,
            server_features,
        });
    }
    Ok(out)
}

/// The credentials of a `channel_creds` entry, `None` when this build does not support
/// its type.
fn channel_creds(
    kind: &str,
    config: Option<&Value>,
    at: &str,
) -> Result<Option<ChannelCreds>, BootstrapError> {
    match kind {
        "insecure" => Ok(Some(ChannelCreds::Insecure)),
        "tls" if cfg!(feature = "tls") => {
            let empty = Map::new();
            let config = match config {
                None | Some(Value::Null) => &empty,
                Some(Value::Object(m)) => m,
                Some(_) => return Err(invalid(&format!("{at}.config"), "not an object")),
            };
            let file = |key: &str| -> Result<Option<PathBuf>, BootstrapError> {
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

fn node(value: &Value) -> Result<Node, BootstrapError> {
    let object = value
        .as_object()
        .ok_or_else(|| invalid("node", "not an object"))?;
    let text = |proto: &str, json: &str| -> Result<String, BootstrapError> {
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
        let part = |proto: &str, json: &str| -> Result<String, BootstrapError> {
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

/// The node with the client's own fields (A27: filled by the client, not the file).
pub fn with_client_fields(mut node: Node) -> Node {
    node.user_agent_name = USER_AGENT_NAME.into();
    node.user_agent_version_type = Some(UserAgentVersionType::UserAgentVersion(
        env!("CARGO_PKG_VERSION").into(),
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

    #[test]
    fn full_bootstrap() {
        let b = Bootstrap::from_json(FULL).unwrap();
        assert_eq!(b.servers.len(), 2);
        let primary = &b.servers[0];
        assert_eq!(primary.channel_creds, ChannelCreds::Insecure);
        assert!(primary.has_feature(IGNORE_RESOURCE_DELETION));
        assert_eq!(primary.endpoint_uri(), "http://primary.example:443");
        assert_eq!(b.servers[1].endpoint_uri(), "http://localhost:18001");
        assert_eq!(b.node.id, "n1");
        assert_eq!(b.node.locality.as_ref().unwrap().sub_zone, "s");
        assert_eq!(b.node.metadata.as_ref().unwrap().fields.len(), 3);
        assert_eq!(b.node.user_agent_name, USER_AGENT_NAME);
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
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "node": {"id": 3}}"#,
                "node.id",
            ),
            (
                r#"{"xds_servers": [{"server_uri": "a", "channel_creds": [{"type": "insecure"}]}], "authorities": {"x": {"client_listener_resource_name_template": "xdstp://y/%s"}}}"#,
                "authorities.x.client_listener_resource_name_template",
            ),
        ];
        for (json, field) in cases {
            match Bootstrap::from_json(json) {
                Err(BootstrapError::Invalid(f, _)) => assert_eq!(f, field, "{json}"),
                other => panic!("{json}: {other:?}"),
            }
        }
        assert!(matches!(
            Bootstrap::from_json("{"),
            Err(BootstrapError::Json(_))
        ));
        assert!(matches!(
            Bootstrap::from_file("/nonexistent/bootstrap.json"),
            Err(BootstrapError::Io(..))
        ));
    }

    #[cfg(feature = "tls")]
    #[test]
    fn tls_creds() {
        let b = Bootstrap::from_json(r#"{"xds_servers": [{"server_uri": "s:443", "channel_creds": [{"type": "tls", "config": {"ca_certificate_file": "ca.pem"}}]}]}"#).unwrap();
        assert_eq!(b.servers[0].endpoint_uri(), "https://s:443");
        assert!(
            matches!(&b.servers[0].channel_creds, ChannelCreds::Tls(f) if f.ca_certificate_file.is_some())
        );
    }
}
