//! Messages written back in the protocol text's diagram notation, for diagrams and transcripts: the scenario
//! runner draws with it, and so does the pair harness, without needing the scenario language.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use prost::Message;

use xds_sansio::message::{Request, Response};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
    ResourceError,
};
use xds_sansio::pb::envoy::config::core::v3::ControlPlane;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::types::{TypeInfo, RESOURCE_WRAPPER_TYPE_URL};

/// The short name of a type (`EDS`, `v2:EDS`), or its URL when the catalog does not know
/// it.
pub fn type_name(type_url: &str) -> String {
    match TypeInfo::of(type_url).known {
        Some((t, xds_sansio::types::ApiVersion::V3)) => t.short_name.into(),
        Some((t, xds_sansio::types::ApiVersion::V2)) => format!("v2:{}", t.short_name),
        None => type_url.into(),
    }
}

/// A name as scenario files write it: in quotes when it holds white space or a character
/// of the notation, with `"` and `\` escaped by a backslash.
pub fn quoted(name: &str) -> String {
    if name.is_empty()
        || name
            .chars()
            .any(|c| c.is_whitespace() || "@:[](){},\"#=&;\\".contains(c))
    {
        let escaped = name.replace('\\', "\\\\").replace('"', "\\\"");
        format!("\"{escaped}\"")
    } else {
        name.into()
    }
}

/// `{a,b}`, each name quoted where the notation needs it.
pub fn set<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let names: Vec<String> = names.into_iter().map(quoted).collect();
    format!("{{{}}}", names.join(","))
}

fn error(status: &Option<Status>) -> String {
    match status {
        Some(status) => {
            let mut message: String = status.message.chars().take(40).collect();
            if message.len() < status.message.len() {
                message.push('…');
            }
            format!(",E=\"{}\"", message.replace('"', "'").replace('\n', " "))
        }
        None => String::new(),
    }
}

/// A body as scenario files write it: its tag when it is one of the bodies the scenario
/// tools make (`name` in field 1, tag in field 2), otherwise its size.
fn body_tag(body: &[u8]) -> String {
    match ScenarioBody::decode(body) {
        Ok(b)
            if !b.tag.is_empty()
                && b.encoded_len() == body.len()
                && !b.tag.chars().any(char::is_control) =>
        {
            b.tag
        }
        // A body with references (`[ref=..]`) keeps its tag in field 999.
        _ => match RefsBodyTag::decode(body) {
            Ok(b) if !b.tag.is_empty() => b.tag,
            _ => format!("{}B", body.len()),
        },
    }
}

/// The tag of a scenario body that carries references (field 999, which no resource
/// reader looks at).
#[derive(Clone, PartialEq, Message)]
struct RefsBodyTag {
    #[prost(string, tag = "999")]
    tag: String,
}

fn sotw_item(any: &Any) -> String {
    if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
        if let Ok(wrapper) = Resource::decode(any.value.clone()) {
            return delta_item(&wrapper);
        }
    }
    match xds_sansio::resource::name_of(&any.value) {
        Ok(name) => format!("{}:{}", quoted(name), body_tag(&any.value)),
        Err(_) => format!("?:{}", body_tag(&any.value)),
    }
}

fn delta_item(resource: &Resource) -> String {
    let mut out = quoted(&resource.name);
    if !resource.version.is_empty() {
        out.push('@');
        out.push_str(&quoted(&resource.version));
    }
    match &resource.resource {
        Some(body) => {
            out.push(':');
            out.push_str(&body_tag(&body.value));
        }
        None => out.push_str("[nobody]"),
    }
    if let Some(ttl) = &resource.ttl {
        let millis = ttl
            .seconds
            .saturating_mul(1000)
            .saturating_add(i64::from(ttl.nanos / 1_000_000));
        out.push_str(&format!("[ttl={millis}ms]"));
    }
    for alias in &resource.aliases {
        out.push_str(&format!("[alias={alias}]"));
    }
    out
}

/// `(V=..,R={..},N=..,T=..[,E=..])`
pub fn sotw_request(r: &DiscoveryRequest) -> String {
    format!(
        "(V={},R={},N={},T={}{})",
        r.version_info,
        set(r.resource_names.iter().map(String::as_str)),
        r.response_nonce,
        type_name(&r.type_url),
        error(&r.error_detail)
    )
}

/// `(V=..,R={..},N=..,T=..[,F={..}][,CP=..])`
pub fn sotw_response(r: &DiscoveryResponse) -> String {
    let items: Vec<String> = r.resources.iter().map(sotw_item).collect();
    format!(
        "(V={},R={{{}}},N={},T={}{}{})",
        r.version_info,
        items.join(","),
        r.nonce,
        type_name(&r.type_url),
        resource_errors(&r.resource_errors),
        control_plane(&r.control_plane)
    )
}

/// `,CP=identifier` for a `control_plane`, or nothing.
fn control_plane(control_plane: &Option<ControlPlane>) -> String {
    match control_plane {
        Some(cp) => format!(",CP={}", quoted(&cp.identifier)),
        None => String::new(),
    }
}

/// `,F={name@CODE,...}` for `resource_errors`, or nothing.
fn resource_errors(errors: &[ResourceError]) -> String {
    if errors.is_empty() {
        return String::new();
    }
    let items: Vec<String> = errors.iter().map(resource_error).collect();
    format!(",F={{{}}}", items.join(","))
}

/// One `resource_errors` entry as `name@CODE` (no status counts as UNKNOWN).
pub fn resource_error(e: &ResourceError) -> String {
    let name = e.resource_name.as_ref().map_or("", |n| n.name.as_str());
    let code = e.error_detail.as_ref().map_or(2, |s| s.code);
    format!("{}@{}", quoted(name), code_name(code))
}

/// The `google.rpc.Code` names the notation uses (a number for the others).
const CODE_NAMES: [(i32, &str); 5] = [
    (2, "UNKNOWN"),
    (5, "NOT_FOUND"),
    (7, "PERMISSION_DENIED"),
    (13, "INTERNAL"),
    (14, "UNAVAILABLE"),
];

/// The notation of a status code.
pub fn code_name(code: i32) -> String {
    CODE_NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| code.to_string(), |(_, n)| String::from(*n))
}

/// A status code from the notation (a name of [`code_name`] or a number).
pub fn code_of(text: &str) -> Option<i32> {
    CODE_NAMES
        .iter()
        .find(|(_, n)| *n == text)
        .map(|(c, _)| *c)
        .or_else(|| text.parse().ok())
}

/// `(T=..,S={..},U={..},I={..},N=..[,E=..])`
pub fn delta_request(r: &DeltaDiscoveryRequest) -> String {
    let initial: Vec<String> = r
        .initial_resource_versions
        .iter()
        .map(|(name, version)| format!("{}@{}", quoted(name), quoted(version)))
        .collect();
    format!(
        "(T={},S={},U={},I={{{}}},N={}{})",
        type_name(&r.type_url),
        set(r.resource_names_subscribe.iter().map(String::as_str)),
        set(r.resource_names_unsubscribe.iter().map(String::as_str)),
        initial.join(","),
        r.response_nonce,
        error(&r.error_detail)
    )
}

/// The names a delta response removes, by name or by resource locator.
fn removed(r: &DeltaDiscoveryResponse) -> impl Iterator<Item = &str> {
    r.removed_resources
        .iter()
        .map(String::as_str)
        .chain(r.removed_resource_names.iter().map(|n| n.name.as_str()))
}

/// `(V=..,R={..},X={..},N=..,T=..[,F={..}][,CP=..])`
pub fn delta_response(r: &DeltaDiscoveryResponse) -> String {
    let items: Vec<String> = r.resources.iter().map(delta_item).collect();
    format!(
        "(V={},R={{{}}},X={},N={},T={}{}{})",
        r.system_version_info,
        items.join(","),
        set(removed(r)),
        r.nonce,
        type_name(&r.type_url),
        resource_errors(&r.resource_errors),
        control_plane(&r.control_plane)
    )
}

/// A response by what the protocol fixes of it, not by what a server chooses: names,
/// bodies, removals, TTLs, aliases and resource errors; no system version, nonce or
/// per-resource version (`(R={..},T=..)`, delta `(R={..},X={..},T=..)`). A line in this
/// form matches any server that sends the same contents.
pub fn response_contents(response: &Response) -> String {
    let strip = |mut r: Resource| {
        r.version.clear();
        delta_item(&r)
    };
    match response {
        Response::Sotw(r) => {
            let items: Vec<String> = r
                .resources
                .iter()
                .map(|any| match Resource::decode(any.value.clone()) {
                    Ok(wrapper) if any.type_url == RESOURCE_WRAPPER_TYPE_URL => strip(wrapper),
                    _ => sotw_item(any),
                })
                .collect();
            format!(
                "(R={{{}}},T={}{})",
                items.join(","),
                type_name(&r.type_url),
                resource_errors(&r.resource_errors)
            )
        }
        Response::Delta(r) => {
            let items: Vec<String> = r.resources.iter().cloned().map(strip).collect();
            format!(
                "(R={{{}}},X={},T={}{})",
                items.join(","),
                set(removed(r)),
                type_name(&r.type_url),
                resource_errors(&r.resource_errors)
            )
        }
    }
}

/// A request in the notation.
pub fn request(request: &Request) -> String {
    match request {
        Request::Sotw(r) => sotw_request(r),
        Request::Delta(r) => delta_request(r),
    }
}

/// A response in the notation.
pub fn response(response: &Response) -> String {
    match response {
        Response::Sotw(r) => sotw_response(r),
        Response::Delta(r) => delta_response(r),
    }
}

/// The body the scenario tools make for a resource: a message with the name in field 1
/// (where every xDS resource keeps it) and the tag in field 2.
#[derive(Clone, PartialEq, Message)]
pub struct ScenarioBody {
    /// The resource name.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The tag that stands for the body's contents.
    #[prost(string, tag = "2")]
    pub tag: String,
}

/// The encoded body for `name` with `tag`.
pub fn body(name: &str, tag: &str) -> bytes::Bytes {
    ScenarioBody {
        name: name.into(),
        tag: tag.into(),
    }
    .encode_to_vec()
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec;
    use xds_sansio::types::ENDPOINT;

    #[test]
    fn renders_in_the_seed_notation() {
        let request = DiscoveryRequest {
            version_info: "X".into(),
            resource_names: vec!["foo".into(), "bar".into()],
            type_url: ENDPOINT.type_url.into(),
            response_nonce: "A".into(),
            ..Default::default()
        };
        assert_eq!(sotw_request(&request), "(V=X,R={foo,bar},N=A,T=EDS)");
        let response = DiscoveryResponse {
            version_info: "X".into(),
            resources: vec![Any {
                type_url: ENDPOINT.type_url.into(),
                value: body("foo", "a"),
            }],
            type_url: ENDPOINT.type_url.into(),
            nonce: "A".into(),
            ..Default::default()
        };
        assert_eq!(sotw_response(&response), "(V=X,R={foo:a},N=A,T=EDS)");
        assert_eq!(
            type_name("type.googleapis.com/envoy.api.v2.ClusterLoadAssignment"),
            "v2:EDS"
        );
        assert_eq!(quoted("xdstp://a/T/x"), "\"xdstp://a/T/x\"");
    }
}
