//! The gRPC xDS bootstrap: where it is found and read, as gRPC does. What it says, and
//! every rule of it (A27, A47, A71, A53, A65), is the core's
//! ([`xds_sansio::client::session::bootstrap::file`]), which this reads it with.
//!
//! # Decisions
//!
//! - **Where it comes from** ([`Bootstrap::from_env`]): the file named by
//!   `GRPC_XDS_BOOTSTRAP`, else the content of `GRPC_XDS_BOOTSTRAP_CONFIG`.
//! - **This client's node fields** (A27: filled by the client, not the file): it is
//!   [`USER_AGENT_NAME`] at this crate's version, and `tls` credentials are supported with
//!   the crate's `tls` feature.

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};

use xds_sansio::client::session::bootstrap::file::{BootstrapFile, BootstrapFileError, Embedder};
use xds_sansio::pb::envoy::config::core::v3::Node;

pub use xds_sansio::client::session::bootstrap::file::{
    Authority, ChannelCreds, ManagementServer, TlsFiles, CLIENT_FEATURES,
};
/// The server feature of gRPC A53: keep held resources the server deletes.
pub use xds_sansio::client::session::IGNORE_RESOURCE_DELETION;

/// The `user_agent_name` the client sends.
pub const USER_AGENT_NAME: &str = "xds-sansio-tonic";

/// A parsed bootstrap: the core's [`BootstrapFile`] (its fields are read and changed
/// through it), read the way this client does. See the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct Bootstrap(pub BootstrapFile);

impl Deref for Bootstrap {
    type Target = BootstrapFile;

    fn deref(&self) -> &BootstrapFile {
        &self.0
    }
}

impl DerefMut for Bootstrap {
    fn deref_mut(&mut self) -> &mut BootstrapFile {
        &mut self.0
    }
}

/// Why a bootstrap could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum BootstrapError {
    /// Neither `GRPC_XDS_BOOTSTRAP` nor `GRPC_XDS_BOOTSTRAP_CONFIG` is set.
    NotConfigured,
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
    /// Not a valid bootstrap: not JSON, or a field that breaks a rule (the core's error
    /// names the field).
    Invalid(BootstrapFileError),
}

impl fmt::Display for BootstrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BootstrapError::NotConfigured => {
                f.write_str("neither GRPC_XDS_BOOTSTRAP nor GRPC_XDS_BOOTSTRAP_CONFIG is set")
            }
            BootstrapError::Io(path, e) => write!(f, "cannot read {}: {e}", path.display()),
            BootstrapError::Invalid(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for BootstrapError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BootstrapError::Io(_, e) => Some(e),
            BootstrapError::Invalid(e) => Some(e),
            BootstrapError::NotConfigured => None,
        }
    }
}

/// This client as the core's bootstrap reader sees it.
fn embedder() -> Embedder {
    Embedder::new(USER_AGENT_NAME, env!("CARGO_PKG_VERSION")).with_tls(cfg!(feature = "tls"))
}

impl Bootstrap {
    /// A bootstrap with one plain-text server and this node (the client's fields filled
    /// in), for programs that do not read a file.
    pub fn single(server_uri: impl Into<String>, node: Node) -> Bootstrap {
        Bootstrap(BootstrapFile::single(server_uri, node, &embedder()))
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

    /// Parses bootstrap JSON ([`BootstrapFile::from_json`]).
    pub fn from_json(json: &str) -> Result<Bootstrap, BootstrapError> {
        BootstrapFile::from_json(json, &embedder())
            .map(Bootstrap)
            .map_err(BootstrapError::Invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_with_this_clients_fields() {
        let json = r#"{"xds_servers": [{"server_uri": "s:443", "channel_creds": [{"type": "tls"}, {"type": "insecure"}]}]}"#;
        let b = Bootstrap::from_json(json).unwrap();
        assert_eq!(b.node.user_agent_name, USER_AGENT_NAME);
        let tls = matches!(b.servers[0].channel_creds, ChannelCreds::Tls(_));
        assert_eq!(tls, cfg!(feature = "tls"));
        assert!(matches!(
            Bootstrap::from_json("{"),
            Err(BootstrapError::Invalid(BootstrapFileError::Json(_)))
        ));
        assert!(matches!(
            Bootstrap::from_file("/nonexistent/bootstrap.json"),
            Err(BootstrapError::Io(..))
        ));
    }
}
