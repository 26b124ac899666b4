//! The bootstrap model: which management servers serve which names, in which order, with
//! which features (gRPC A27 "xDS-Based Global Load Balancing", A47 "xDS Federation", A71
//! "xDS Fallback", A53 for `ignore_resource_deletion`). Plain structs, and the rules that
//! follow from them. Reading gRPC's bootstrap JSON into them, with its validation rules,
//! is [`file`](mod@file) (feature `json`); finding and reading the file is the embedder's (the tokio
//! adapter's `Bootstrap::from_env`).
//!
//! # Decisions
//!
//! - **Servers in priority order** (A71): the first is the primary, the others are
//!   fallbacks.
//! - **An authority without servers uses the top-level ones** (A47: "If
//!   `xds_servers` is not specified, the top-level `xds_servers` will be used").
//! - **A server is its URI, features and credentials**: entries equal in all three are
//!   one connection, shared by every authority listing it (A47); the credentials are the
//!   embedder's to interpret, the session only compares them.
//! - **Names**: an `xdstp://` name belongs to its authority, any other name to the
//!   top-level servers (A47); a watch of an authority the bootstrap lacks is refused
//!   ([`WatchRefused::UnknownAuthority`]).

use alloc::collections::BTreeMap;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::client::{SharedStr, WILDCARD};
use crate::name::{canonicalize, XdstpName, XDSTP_SCHEME};

#[cfg(feature = "json")]
pub mod file;

/// The server feature of gRPC A53: keep held resources the server deletes.
pub const IGNORE_RESOURCE_DELETION: &str = "ignore_resource_deletion";

/// A server feature of gRPC A88: a data error (NOT_FOUND, PERMISSION_DENIED, a NACK)
/// drops the held resource ([`DataErrors::FailOnDataErrors`](crate::client::DataErrors)).
pub const FAIL_ON_DATA_ERRORS: &str = "fail_on_data_errors";

/// A server feature of gRPC A88: the resource timer is 30 s and its expiry a transient
/// error ([`ClientConfig::with_transient_resource_timer`](crate::client::ClientConfig::with_transient_resource_timer)).
pub const RESOURCE_TIMER_IS_TRANSIENT_ERROR: &str = "resource_timer_is_transient_error";

/// One entry of `xds_servers`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct ServerEntry {
    /// `server_uri` as written.
    pub server_uri: String,
    /// `server_features` (`ignore_resource_deletion`, `xds_v3`, ...).
    pub server_features: Vec<String>,
    /// The channel credentials as the embedder names them; the session only compares
    /// them (two entries differing only here are two connections).
    pub channel_creds: String,
    /// Other addresses of the same management server: replicas serving the same data
    /// with the same versions (fed from one source of truth). The session spreads its
    /// streams over `server_uri` and these, and moves a stream to the next one when it
    /// fails or ends ([`ServerEntry::address`]).
    pub replicas: Vec<String>,
}

impl ServerEntry {
    /// A server with these credentials and no features.
    pub fn new(server_uri: impl Into<String>, channel_creds: impl Into<String>) -> ServerEntry {
        ServerEntry {
            server_uri: server_uri.into(),
            server_features: Vec::new(),
            channel_creds: channel_creds.into(),
            replicas: Vec::new(),
        }
    }

    /// The same, with `replicas` as the server's other addresses.
    pub fn with_replicas(mut self, replicas: Vec<String>) -> ServerEntry {
        self.replicas = replicas;
        self
    }

    /// How many addresses the server has: `server_uri` and its replicas.
    pub fn address_count(&self) -> usize {
        1 + self.replicas.len()
    }

    /// Address `i` (modulo [`ServerEntry::address_count`]): 0 is `server_uri`, then the
    /// replicas in order.
    pub fn address(&self, i: usize) -> &str {
        match (i % self.address_count()).checked_sub(1) {
            None => &self.server_uri,
            Some(r) => self
                .replicas
                .get(r)
                .map_or(&self.server_uri, String::as_str),
        }
    }

    /// The same, with `features` as its `server_features`.
    pub fn with_features(mut self, features: Vec<String>) -> ServerEntry {
        self.server_features = features;
        self
    }

    /// Whether `server_features` lists `feature`.
    pub fn has_feature(&self, feature: &str) -> bool {
        self.server_features.iter().any(|f| f == feature)
    }
}

/// The servers of a bootstrap. See the [module docs](self).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootstrapServers {
    /// The top-level servers, primary first (`xds_servers`).
    pub servers: Vec<ServerEntry>,
    /// Per authority (`authorities`, A47), its servers, primary first; empty: the
    /// top-level ones.
    pub authorities: BTreeMap<String, Vec<ServerEntry>>,
}

impl BootstrapServers {
    /// A bootstrap with these top-level servers and no authority.
    pub fn new(servers: Vec<ServerEntry>) -> BootstrapServers {
        BootstrapServers {
            servers,
            authorities: BTreeMap::new(),
        }
    }

    /// The same, with `authority` served by `servers` (empty: the top-level ones).
    pub fn with_authority(
        mut self,
        authority: impl Into<String>,
        servers: Vec<ServerEntry>,
    ) -> BootstrapServers {
        self.authorities.insert(authority.into(), servers);
        self
    }

    /// The servers of `authority` (`""`: the top-level ones), primary first; `None` when
    /// the bootstrap lists no such authority (A47).
    pub fn servers_of(&self, authority: &str) -> Option<&[ServerEntry]> {
        servers_of_authority(&self.servers, authority, |a| {
            self.authorities.get(a).map(Vec::as_slice)
        })
    }

    /// Checks a watch's name (`None`: every name of the type) and gives its canonical
    /// form and authority.
    pub fn check_watch(
        &self,
        type_url: &str,
        name: Option<&str>,
    ) -> Result<(SharedStr, String), WatchRefused> {
        if type_url.is_empty() {
            return Err(WatchRefused::Empty);
        }
        let Some(name) = name else {
            return Ok((SharedStr::from_static(WILDCARD), String::new()));
        };
        if name.is_empty() {
            return Err(WatchRefused::Empty);
        }
        let canonical = if name.starts_with(XDSTP_SCHEME) {
            canonicalize(name).map_err(|e| WatchRefused::MalformedXdstpName(e.to_string()))?
        } else {
            name.to_string()
        };
        let authority = authority_of(&canonical).unwrap_or_default();
        if self.servers_of(&authority).is_none() {
            return Err(WatchRefused::UnknownAuthority(authority));
        }
        Ok((SharedStr::from(canonical), authority))
    }
}

/// The servers of `authority`, given the top-level ones and the authority's own list
/// (`listed`: `None` when the bootstrap names no such authority); `""` (old-style names) is
/// the top level. The one home of A47's rule "If `xds_servers` is not specified, the
/// top-level `xds_servers` will be used", for every shape of server a bootstrap holds.
pub fn servers_of_authority<'a, S>(
    top: &'a [S],
    authority: &str,
    listed: impl FnOnce(&str) -> Option<&'a [S]>,
) -> Option<&'a [S]> {
    if authority.is_empty() {
        return Some(top);
    }
    let own = listed(authority)?;
    Some(if own.is_empty() { top } else { own })
}

/// The authority a (canonical) name belongs to: `""` for old-style names, `None` for a
/// malformed `xdstp://` name.
pub fn authority_of(name: &str) -> Option<String> {
    if !name.starts_with(XDSTP_SCHEME) {
        return Some(String::new());
    }
    XdstpName::parse(name).ok().map(|n| n.authority)
}

/// The listener name template of an authority that gives none (A47: "If not present,
/// the default is `xdstp://<authority_name>/envoy.config.listener.v3.Listener/%s`").
pub fn default_listener_template(authority: &str) -> String {
    format!("xdstp://{authority}/envoy.config.listener.v3.Listener/%s")
}

/// The Listener name a gRPC channel to `target` subscribes to, from a listener name
/// template (A47): `%s` replaced by `target`, percent-encoded first when the template is
/// an `xdstp:` name ("the target's path [...] will be percent-encoded").
pub fn listener_name(template: &str, target: &str) -> String {
    let value = if template.starts_with("xdstp:") {
        percent_encode_path(target)
    } else {
        target.to_string()
    };
    template.replace("%s", &value)
}

/// `%`-encodes what RFC 3986 section 3.3 does not allow in a path (A47).
fn percent_encode_path(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        let allowed = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/".contains(&b);
        if allowed {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Why a watch cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchRefused {
    /// An empty type URL or name.
    Empty,
    /// A malformed `xdstp://` name.
    MalformedXdstpName(String),
    /// An `xdstp://` name whose authority the bootstrap does not list (gRPC A47).
    UnknownAuthority(String),
    /// The client has shut down.
    Closed,
    /// The watch id is in use already.
    DuplicateId(u64),
    /// The dependency manager refused the listener.
    Refused(String),
}

impl fmt::Display for WatchRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchRefused::Empty => f.write_str("empty type URL or resource name"),
            WatchRefused::MalformedXdstpName(e) => write!(f, "malformed xdstp name: {e}"),
            WatchRefused::UnknownAuthority(a) => {
                write!(f, "the bootstrap lists no authority {a:?}")
            }
            WatchRefused::Closed => f.write_str("the client has shut down"),
            WatchRefused::DuplicateId(id) => write!(f, "watch id {id} is in use"),
            WatchRefused::Refused(e) => write!(f, "listener refused: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for WatchRefused {}
