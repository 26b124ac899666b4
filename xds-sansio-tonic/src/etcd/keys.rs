//! Where a resource lives in etcd: `PREFIX GROUP / TYPE / NAME`, its value the encoded
//! resource (the message itself, as a `DiscoveryResponse`'s `Any.value` carries it).
//!
//! - `PREFIX` is the application's (`/xds/` by default); it ends with `/`.
//! - `GROUP` is a node group's key ([`crate::server`]): not empty, no `/`.
//! - `TYPE` is the type URL without `type.googleapis.com/` (every type of the catalog has
//!   that host): `envoy.config.cluster.v3.Cluster`; not empty, no `/`.
//! - `NAME` is the resource's name, the rest of the key: it may hold `/` (`xdstp://` names).
//!
//! # Decisions
//!
//! - **Readable keys** (`etcdctl get --prefix /xds/edge/envoy.config.cluster.v3.Cluster/`
//!   lists a group's clusters) rather than escaped type URLs: the catalog's type URLs all
//!   share one host, and a type URL of another host is refused when written
//!   ([`KeyError::TypeUrlHost`]).
//! - **A key that does not parse is peer input**: it becomes a [`KeyError`] that the
//!   replica reports and skips, never a panic, and never a stop of the feed.

use std::fmt;

/// The host every type URL of the catalog has; keys leave it out.
pub const TYPE_URL_HOST: &str = "type.googleapis.com/";

/// Why a key cannot be read or written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// The prefix is empty or does not end with `/`.
    BadPrefix(String),
    /// The key is not valid UTF-8.
    NotUtf8,
    /// The key does not start with the prefix.
    OutsidePrefix,
    /// The key has no `GROUP/TYPE/NAME` after the prefix (the part it lacks).
    Incomplete(&'static str),
    /// A group key is empty or holds `/`.
    BadGroup(String),
    /// A type URL is not `type.googleapis.com/` followed by a message name.
    TypeUrlHost(String),
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::BadPrefix(p) => {
                write!(f, "key prefix {p:?} must be non-empty and end with '/'")
            }
            KeyError::NotUtf8 => write!(f, "key is not UTF-8"),
            KeyError::OutsidePrefix => write!(f, "key is outside the prefix"),
            KeyError::Incomplete(part) => write!(f, "key has no {part} (PREFIX GROUP/TYPE/NAME)"),
            KeyError::BadGroup(g) => write!(f, "group {g:?} must be non-empty without '/'"),
            KeyError::TypeUrlHost(t) => {
                write!(
                    f,
                    "type URL {t:?} must be {TYPE_URL_HOST} and a message name"
                )
            }
        }
    }
}

impl std::error::Error for KeyError {}

/// A key's parts.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EtcdKey {
    /// The node group.
    pub group: String,
    /// The full type URL.
    pub type_url: String,
    /// The resource's name.
    pub name: String,
}

/// Checks a prefix: non-empty, ending with `/`.
pub fn check_prefix(prefix: &str) -> Result<(), KeyError> {
    if prefix.is_empty() || !prefix.ends_with('/') {
        return Err(KeyError::BadPrefix(prefix.to_string()));
    }
    Ok(())
}

/// Checks a group key: non-empty, no `/`.
pub fn check_group(group: &str) -> Result<(), KeyError> {
    if group.is_empty() || group.contains('/') {
        return Err(KeyError::BadGroup(group.to_string()));
    }
    Ok(())
}

/// The prefix of every key of `group`.
pub fn group_prefix(prefix: &str, group: &str) -> String {
    format!("{prefix}{group}/")
}

/// The key of a resource.
pub fn encode(prefix: &str, key: &EtcdKey) -> Result<String, KeyError> {
    check_prefix(prefix)?;
    check_group(&key.group)?;
    let message = key
        .type_url
        .strip_prefix(TYPE_URL_HOST)
        .filter(|m| !m.is_empty() && !m.contains('/'))
        .ok_or_else(|| KeyError::TypeUrlHost(key.type_url.clone()))?;
    if key.name.is_empty() {
        return Err(KeyError::Incomplete("name"));
    }
    Ok(format!("{prefix}{}/{message}/{}", key.group, key.name))
}

/// Reads a key under `prefix`.
pub fn decode(prefix: &str, key: &[u8]) -> Result<EtcdKey, KeyError> {
    let key = std::str::from_utf8(key).map_err(|_| KeyError::NotUtf8)?;
    let rest = key.strip_prefix(prefix).ok_or(KeyError::OutsidePrefix)?;
    let (group, rest) = rest.split_once('/').ok_or(KeyError::Incomplete("type"))?;
    check_group(group)?;
    let (message, name) = rest.split_once('/').ok_or(KeyError::Incomplete("name"))?;
    if message.is_empty() {
        return Err(KeyError::Incomplete("type"));
    }
    if name.is_empty() {
        return Err(KeyError::Incomplete("name"));
    }
    Ok(EtcdKey {
        group: group.to_string(),
        type_url: format!("{TYPE_URL_HOST}{message}"),
        name: name.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(group: &str, type_url: &str, name: &str) -> EtcdKey {
        EtcdKey {
            group: group.into(),
            type_url: type_url.into(),
            name: name.into(),
        }
    }

    #[test]
    fn keys_round_trip_with_slashes_in_names() {
        let k = key(
            "edge",
            "type.googleapis.com/envoy.config.cluster.v3.Cluster",
            "xdstp://auth/envoy.config.cluster.v3.Cluster/a/b",
        );
        let text = encode("/xds/", &k).unwrap();
        assert_eq!(
            text,
            "/xds/edge/envoy.config.cluster.v3.Cluster/xdstp://auth/envoy.config.cluster.v3.Cluster/a/b"
        );
        assert_eq!(decode("/xds/", text.as_bytes()).unwrap(), k);
    }

    #[test]
    fn malformed_keys_are_typed_errors() {
        assert_eq!(
            decode("/xds/", b"/xds/edge"),
            Err(KeyError::Incomplete("type"))
        );
        assert_eq!(
            decode("/xds/", b"/xds/edge/T"),
            Err(KeyError::Incomplete("name"))
        );
        assert_eq!(
            decode("/xds/", b"/xds/edge/T/"),
            Err(KeyError::Incomplete("name"))
        );
        assert_eq!(
            decode("/xds/", b"/xds//T/n"),
            Err(KeyError::BadGroup(String::new()))
        );
        assert_eq!(
            decode("/xds/", b"/xds/edge//n"),
            Err(KeyError::Incomplete("type"))
        );
        assert_eq!(
            decode("/xds/", b"/other/edge/T/n"),
            Err(KeyError::OutsidePrefix)
        );
        assert_eq!(decode("/xds/", b"/xds/\xff/T/n"), Err(KeyError::NotUtf8));
        assert!(matches!(
            encode("/xds/", &key("edge", "example.com/T", "n")),
            Err(KeyError::TypeUrlHost(_))
        ));
        assert!(matches!(
            encode("/xds", &key("edge", "type.googleapis.com/T", "n")),
            Err(KeyError::BadPrefix(_))
        ));
        assert!(matches!(
            encode("/xds/", &key("a/b", "type.googleapis.com/T", "n")),
            Err(KeyError::BadGroup(_))
        ));
    }
}
