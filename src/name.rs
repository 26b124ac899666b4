//! Resource names: plain names, the wildcard `*`, and `xdstp://` URNs.
//!
//! An `xdstp://` name (xDS TP1, cncf/xds `resource_name.proto`) has the textual form
//! `xdstp://[authority]/<resource type>/<id path>?<context params>`. Two URNs are the same
//! resource when they are equal component-wise modulo the order of their context
//! parameters, so every comparison goes through the [canonical form](XdstpName::canonical):
//! decode the percent-escapes, then re-encode with the context parameters sorted. The
//! escape sets are the ones Envoy uses: the authority escapes `%/?#`, the id `%:?#[]`
//! (never `/`: the id path is opaque and `/` separates its segments), parameter keys and
//! values `%#[]&=`. The resource type, one segment, escapes `/` as well as the id's set.
//!
//! A name whose id path ends in `/*` (or is `*`) is a glob collection: it stands for every
//! resource with the same authority, type and exactly the same context parameters whose
//! id is the same prefix plus one more segment. [`XdstpName::glob_of`] gives the glob a
//! received name belongs to, which is how Envoy matches: replace the last segment with `*`,
//! canonicalise, look up.
//!
//! Directives (`#alt=`, `#entry=`) belong to resource *locators*, not names; a name with a
//! fragment is rejected with [`NameParseError::Directives`].

use alloc::borrow::Cow;
use alloc::collections::BTreeMap;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};

/// The wildcard name: subscribe to every resource of a type.
pub const WILDCARD: &str = "*";

/// The scheme prefix of xdstp:// names.
pub const XDSTP_SCHEME: &str = "xdstp://";

/// A parsed resource name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceName {
    /// `*`: every resource of the type.
    Wildcard,
    /// An opaque name, compared byte for byte.
    Plain(String),
    /// An `xdstp://` URN.
    Xdstp(XdstpName),
}

/// Why a name is malformed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NameParseError {
    /// The name is the empty string.
    Empty,
    /// The name does not start with `xdstp://`.
    NotXdstp,
    /// There is no `/<resource type>` after the authority.
    MissingResourceType,
    /// The resource type is present but the id path is missing or empty.
    MissingId,
    /// A `%` is not followed by two hex digits; the byte offset in the name.
    BadPercentEscape(usize),
    /// A decoded component is not valid UTF-8.
    NotUtf8,
    /// A context parameter has no `=`; the parameter as written.
    MalformedParam(String),
    /// A context parameter key appears twice.
    DuplicateParam(String),
    /// A context parameter key is empty.
    EmptyParamKey,
    /// The name has a `#` fragment: directives belong to locators, not names.
    Directives,
}

impl fmt::Display for NameParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameParseError::Empty => f.write_str("resource name is empty"),
            NameParseError::NotXdstp => f.write_str("name does not start with xdstp://"),
            NameParseError::MissingResourceType => {
                f.write_str("xdstp name has no resource type after the authority")
            }
            NameParseError::MissingId => f.write_str("xdstp name has an empty id path"),
            NameParseError::BadPercentEscape(at) => {
                write!(f, "malformed percent-escape at byte {at}")
            }
            NameParseError::NotUtf8 => f.write_str("decoded name component is not UTF-8"),
            NameParseError::MalformedParam(p) => {
                write!(f, "context parameter {p:?} has no '='")
            }
            NameParseError::DuplicateParam(k) => {
                write!(f, "context parameter {k:?} appears twice")
            }
            NameParseError::EmptyParamKey => f.write_str("context parameter with an empty key"),
            NameParseError::Directives => {
                f.write_str("a resource name cannot carry #directives (only a locator can)")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for NameParseError {}

impl ResourceName {
    /// Classifies and parses a name: `*`, `xdstp://...`, or anything else (plain).
    pub fn parse(name: &str) -> Result<ResourceName, NameParseError> {
        if name.is_empty() {
            Err(NameParseError::Empty)
        } else if name == WILDCARD {
            Ok(ResourceName::Wildcard)
        } else if name.starts_with(XDSTP_SCHEME) {
            XdstpName::parse(name).map(ResourceName::Xdstp)
        } else {
            Ok(ResourceName::Plain(name.into()))
        }
    }

    /// The canonical text of the name: xdstp names canonicalised, the rest as given.
    pub fn canonical(&self) -> String {
        match self {
            ResourceName::Wildcard => WILDCARD.into(),
            ResourceName::Plain(name) => name.clone(),
            ResourceName::Xdstp(urn) => urn.canonical(),
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceName::Wildcard => f.write_str(WILDCARD),
            ResourceName::Plain(name) => f.write_str(name),
            ResourceName::Xdstp(urn) => urn.fmt(f),
        }
    }
}

/// The canonical text of `name` (xdstp names canonicalised, other names unchanged), for
/// use as a map key wherever names are compared.
pub fn canonicalize(name: &str) -> Result<String, NameParseError> {
    ResourceName::parse(name).map(|n| n.canonical())
}

/// `name` in the form it is compared in: an `xdstp://` name canonicalised, any other name
/// (and an `xdstp://` name that does not parse, which then matches only itself) as given.
/// Costs nothing for names that are not `xdstp://`.
pub fn comparable(name: &str) -> Cow<'_, str> {
    if !name.starts_with(XDSTP_SCHEME) {
        return Cow::Borrowed(name);
    }
    match XdstpName::parse(name) {
        Ok(urn) => {
            let canonical = urn.canonical();
            if canonical == name {
                Cow::Borrowed(name)
            } else {
                Cow::Owned(canonical)
            }
        }
        Err(_) => Cow::Borrowed(name),
    }
}

/// The canonical glob collection an `xdstp://` resource name belongs to (xDS TP1: a
/// subscription to `xdstp://authority/TYPE/path/*` covers `xdstp://authority/TYPE/path/x`
/// with the same context parameters), if `name` is such a resource name.
pub fn collection_of(name: &str) -> Option<String> {
    if !name.starts_with(XDSTP_SCHEME) {
        return None;
    }
    Some(XdstpName::parse(name).ok()?.glob_of()?.canonical())
}

/// Whether `name` is an `xdstp://` glob collection (its id path is `*` or ends in `/*`).
pub fn is_glob(name: &str) -> bool {
    name.starts_with(XDSTP_SCHEME) && XdstpName::parse(name).is_ok_and(|urn| urn.is_glob())
}

/// An `xdstp://` URN, decoded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct XdstpName {
    /// The authority (may be empty).
    pub authority: String,
    /// The resource type, without the `type.googleapis.com/` prefix.
    pub resource_type: String,
    /// The id path; `/` separates its segments.
    pub id: String,
    /// The context parameters.
    pub context: BTreeMap<String, String>,
}

const AUTHORITY_ESCAPES: &[u8] = b"%/?#";
const ID_ESCAPES: &[u8] = b"%:?#[]";
/// The resource type is one path segment: `/` in it must be escaped too, or the canonical
/// form would parse back with a different type and id (found by fuzzing).
const TYPE_ESCAPES: &[u8] = b"%/:?#[]";
const PARAM_ESCAPES: &[u8] = b"%#[]&=";

fn hex_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Percent-decodes `text`, which starts at byte `offset` of the whole name (for errors).
fn decode(text: &str, offset: usize) -> Result<String, NameParseError> {
    if !text.contains('%') {
        return Ok(text.into());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex_value);
            let lo = bytes.get(i + 2).copied().and_then(hex_value);
            match (hi, lo) {
                (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                _ => return Err(NameParseError::BadPercentEscape(offset + i)),
            }
            i += 3;
        } else {
            out.push(byte);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| NameParseError::NotUtf8)
}

fn encode_into(out: &mut String, text: &str, escapes: &[u8]) {
    for ch in text.chars() {
        if ch.is_ascii() && escapes.contains(&(ch as u8)) {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{:02X}", ch as u8);
        } else {
            out.push(ch);
        }
    }
}

impl XdstpName {
    /// Parses an `xdstp://` name.
    pub fn parse(name: &str) -> Result<XdstpName, NameParseError> {
        let rest = name
            .strip_prefix(XDSTP_SCHEME)
            .ok_or(NameParseError::NotXdstp)?;
        if rest.contains('#') {
            return Err(NameParseError::Directives);
        }
        let base = XDSTP_SCHEME.len();
        let (authority, after) = rest
            .split_once('/')
            .ok_or(NameParseError::MissingResourceType)?;
        let (path, query) = match after.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (after, None),
        };
        let path_at = base + authority.len() + 1;
        let (resource_type, id) = path
            .split_once('/')
            .ok_or(NameParseError::MissingResourceType)?;
        if resource_type.is_empty() {
            return Err(NameParseError::MissingResourceType);
        }
        if id.is_empty() {
            return Err(NameParseError::MissingId);
        }
        let mut context = BTreeMap::new();
        if let Some(query) = query {
            let mut at = path_at + path.len() + 1;
            for param in query.split('&').filter(|p| !p.is_empty()) {
                let (key, value) = param
                    .split_once('=')
                    .ok_or_else(|| NameParseError::MalformedParam(param.into()))?;
                let key = decode(key, at)?;
                let value = decode(value, at + key.len() + 1)?;
                if key.is_empty() {
                    return Err(NameParseError::EmptyParamKey);
                }
                if context.contains_key(&key) {
                    return Err(NameParseError::DuplicateParam(key));
                }
                context.insert(key, value);
                at += param.len() + 1;
            }
        }
        Ok(XdstpName {
            authority: decode(authority, base)?,
            resource_type: decode(resource_type, path_at)?,
            id: decode(id, path_at + resource_type.len() + 1)?,
            context,
        })
    }

    /// The canonical text: components re-escaped, context parameters sorted by their
    /// encoded `key=value` text.
    pub fn canonical(&self) -> String {
        let mut out = String::with_capacity(
            XDSTP_SCHEME.len()
                + self.authority.len()
                + self.resource_type.len()
                + self.id.len()
                + 8,
        );
        out.push_str(XDSTP_SCHEME);
        encode_into(&mut out, &self.authority, AUTHORITY_ESCAPES);
        out.push('/');
        encode_into(&mut out, &self.resource_type, TYPE_ESCAPES);
        out.push('/');
        encode_into(&mut out, &self.id, ID_ESCAPES);
        if !self.context.is_empty() {
            let mut params: Vec<String> = self
                .context
                .iter()
                .map(|(k, v)| {
                    let mut param = String::new();
                    encode_into(&mut param, k, PARAM_ESCAPES);
                    param.push('=');
                    encode_into(&mut param, v, PARAM_ESCAPES);
                    param
                })
                .collect();
            params.sort();
            out.push('?');
            out.push_str(&params.join("&"));
        }
        out
    }

    /// Whether this name is a glob collection (its id path is `*` or ends in `/*`).
    pub fn is_glob(&self) -> bool {
        self.id == "*" || self.id.ends_with("/*")
    }

    /// The glob collection this resource belongs to: the same name with the last segment
    /// of the id replaced by `*`. `None` for a name that is itself a glob.
    pub fn glob_of(&self) -> Option<XdstpName> {
        if self.is_glob() {
            return None;
        }
        let prefix = self
            .id
            .rfind('/')
            .and_then(|at| self.id.get(..=at))
            .unwrap_or("");
        let mut glob = self.clone();
        glob.id = alloc::format!("{prefix}*");
        Some(glob)
    }

    /// Whether `self`, a glob, stands for `name`.
    pub fn glob_matches(&self, name: &XdstpName) -> bool {
        self.is_glob() && name.glob_of().as_ref() == Some(self)
    }

    /// Merges the node's context parameters into this name (the subscription option
    /// `add_xdstp_node_context_params`); parameters already in the name win.
    pub fn merge_node_context<'a>(
        &mut self,
        node_params: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) {
        for (key, value) in node_params {
            self.context
                .entry(key.into())
                .or_insert_with(|| value.into());
        }
    }
}

impl fmt::Display for XdstpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.canonical())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;
    use quickcheck::{Arbitrary, Gen};

    #[test]
    fn parses_components_and_sorts_params() {
        let name =
            XdstpName::parse("xdstp://foo/envoy.config.cluster.v3.Cluster/bar/baz?some=thing&a=b")
                .unwrap();
        assert_eq!(name.authority, "foo");
        assert_eq!(name.resource_type, "envoy.config.cluster.v3.Cluster");
        assert_eq!(name.id, "bar/baz");
        assert_eq!(
            name.canonical(),
            "xdstp://foo/envoy.config.cluster.v3.Cluster/bar/baz?a=b&some=thing"
        );
    }

    #[test]
    fn escapes_are_decoded_and_reencoded_canonically() {
        let name = XdstpName::parse("xdstp://a%2fb/T/i%3ad?k%26=v%3d1").unwrap();
        assert_eq!(name.authority, "a/b");
        assert_eq!(name.id, "i:d");
        assert_eq!(name.context.get("k&").map(String::as_str), Some("v=1"));
        assert_eq!(name.canonical(), "xdstp://a%2Fb/T/i%3Ad?k%26=v%3D1");
    }

    #[test]
    fn empty_authority_is_allowed() {
        let name = XdstpName::parse("xdstp:///T/x").unwrap();
        assert_eq!(name.authority, "");
        assert_eq!(name.canonical(), "xdstp:///T/x");
    }

    #[test]
    fn malformed_names_give_typed_errors() {
        use NameParseError::*;
        assert_eq!(ResourceName::parse(""), Err(Empty));
        assert_eq!(XdstpName::parse("http://a/T/x"), Err(NotXdstp));
        assert_eq!(XdstpName::parse("xdstp://a"), Err(MissingResourceType));
        assert_eq!(XdstpName::parse("xdstp://a/T"), Err(MissingResourceType));
        assert_eq!(XdstpName::parse("xdstp://a//x"), Err(MissingResourceType));
        assert_eq!(XdstpName::parse("xdstp://a/T/"), Err(MissingId));
        assert_eq!(
            XdstpName::parse("xdstp://a/T/x%zz"),
            Err(BadPercentEscape(13))
        );
        assert_eq!(XdstpName::parse("xdstp://a/T/x%ff"), Err(NotUtf8));
        assert_eq!(
            XdstpName::parse("xdstp://a/T/x?k"),
            Err(MalformedParam("k".into()))
        );
        assert_eq!(
            XdstpName::parse("xdstp://a/T/x?k=1&k=2"),
            Err(DuplicateParam("k".into()))
        );
        assert_eq!(XdstpName::parse("xdstp://a/T/x?=1"), Err(EmptyParamKey));
        assert_eq!(XdstpName::parse("xdstp://a/T/x#entry=1"), Err(Directives));
        assert!(NotUtf8.to_string().contains("UTF-8"));
    }

    #[test]
    fn classifies_names() {
        assert_eq!(ResourceName::parse("*"), Ok(ResourceName::Wildcard));
        assert_eq!(
            ResourceName::parse("foo"),
            Ok(ResourceName::Plain("foo".into()))
        );
        assert!(matches!(
            ResourceName::parse("xdstp://a/T/x"),
            Ok(ResourceName::Xdstp(_))
        ));
        assert_eq!(
            canonicalize("xdstp://a/T/x?b=2&a=1").unwrap(),
            "xdstp://a/T/x?a=1&b=2"
        );
        assert_eq!(canonicalize("plain?b=2&a=1").unwrap(), "plain?b=2&a=1");
    }

    #[test]
    fn glob_matching_follows_the_tp1_rule() {
        let glob = XdstpName::parse("xdstp://foo/T/bar/*?some=thing").unwrap();
        assert!(glob.is_glob());
        let yes = XdstpName::parse("xdstp://foo/T/bar/a?some=thing").unwrap();
        let no_params = XdstpName::parse("xdstp://foo/T/bar/a").unwrap();
        let too_deep = XdstpName::parse("xdstp://foo/T/bar/baz/a?some=thing").unwrap();
        let other_auth = XdstpName::parse("xdstp://other/T/bar/a?some=thing").unwrap();
        assert!(glob.glob_matches(&yes));
        assert!(!glob.glob_matches(&no_params));
        assert!(!glob.glob_matches(&too_deep));
        assert!(!glob.glob_matches(&other_auth));
        assert_eq!(glob.glob_of(), None);
        let top = XdstpName::parse("xdstp://foo/T/*").unwrap();
        assert!(top.glob_matches(&XdstpName::parse("xdstp://foo/T/leaf").unwrap()));
    }

    #[test]
    fn node_context_merges_without_overriding() {
        let mut name = XdstpName::parse("xdstp://foo/T/bar/*?thing=some&some=thing").unwrap();
        name.merge_node_context([("foo", "bar"), ("some", "ignored")]);
        assert_eq!(
            name.canonical(),
            "xdstp://foo/T/bar/*?foo=bar&some=thing&thing=some"
        );
    }

    /// Small alphabets so that escapes, separators and collisions are common.
    fn text(g: &mut Gen, alphabet: &[char], allow_empty: bool) -> String {
        let len = usize::arbitrary(g) % 5 + usize::from(!allow_empty);
        (0..len).map(|_| *g.choose(alphabet).unwrap()).collect()
    }

    const ALPHABET: &[char] = &[
        'a', 'b', '/', '%', '?', '#', '&', '=', ':', '[', ']', '*', 'é',
    ];

    impl Arbitrary for XdstpName {
        fn arbitrary(g: &mut Gen) -> XdstpName {
            let segments = usize::arbitrary(g) % 3 + 1;
            let id = (0..segments)
                .map(|_| text(g, &['a', 'b', '*', ':', '%', '#', '?'], false))
                .collect::<Vec<_>>()
                .join("/");
            let params = usize::arbitrary(g) % 3;
            XdstpName {
                authority: text(g, ALPHABET, true),
                resource_type: text(g, &['a', 'b', '.', '%', ':', '/'], false),
                id,
                context: (0..params)
                    .map(|_| (text(g, ALPHABET, false), text(g, ALPHABET, true)))
                    .collect(),
            }
        }
    }

    /// The naive definition: same authority, type and context; the glob's id is a prefix
    /// P (empty or ending in '/') plus `*`; the name's id is P plus one non-empty segment.
    fn naive_glob_match(glob: &XdstpName, name: &XdstpName) -> bool {
        let Some(prefix) = glob.id.strip_suffix('*') else {
            return false;
        };
        let prefix_ok = prefix.is_empty() || prefix.ends_with('/');
        let leaf_ok = name
            .id
            .strip_prefix(prefix)
            .is_some_and(|leaf| !leaf.is_empty() && !leaf.contains('/') && leaf != "*");
        let name_is_glob = name.id == "*" || name.id.ends_with("/*");
        prefix_ok
            && leaf_ok
            && !name_is_glob
            && glob.authority == name.authority
            && glob.resource_type == name.resource_type
            && glob.context == name.context
    }

    quickcheck::quickcheck! {
        fn parse_display_round_trips(name: XdstpName) -> bool {
            XdstpName::parse(&name.to_string()) == Ok(name)
        }

        fn canonical_form_is_idempotent(name: XdstpName) -> bool {
            let once = name.canonical();
            XdstpName::parse(&once).map(|n| n.canonical()) == Ok(once)
        }

        fn glob_matching_agrees_with_naive_definition(name: XdstpName, glob_id_prefix: bool) -> bool {
            // Build globs that often match: the name's own glob, or a sibling glob.
            let glob = match name.glob_of() {
                Some(g) if glob_id_prefix => g,
                _ => {
                    let mut g = name.clone();
                    g.id = "*".into();
                    g
                }
            };
            glob.glob_matches(&name) == naive_glob_match(&glob, &name)
        }

        fn arbitrary_text_never_panics(text: String) -> bool {
            let _ = ResourceName::parse(&text);
            let _ = XdstpName::parse(&alloc::format!("xdstp://{text}"));
            true
        }
    }
}
