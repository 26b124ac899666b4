//! Bodies written byte by byte with the field numbers of the public protos, so a wrong
//! number in `wire.rs` fails here (tests/refs.rs does the same with envoy-types' full
//! messages).

use super::*;
use alloc::format;
use alloc::string::ToString;
use alloc::vec;

/// A length-delimited field.
fn ld(field: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(field << 3 | 2));
    varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

fn vint(field: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    varint(&mut out, u64::from(field << 3));
    varint(&mut out, value);
    out
}

fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn any(type_name: &str, value: &[u8]) -> Vec<u8> {
    let url = format!("type.googleapis.com/{type_name}");
    [ld(1, url.as_bytes()), ld(2, value)].concat()
}

fn names(refs: &References) -> Vec<(&str, &str)> {
    refs.iter()
        .map(|r| {
            (
                crate::types::TypeInfo::of(r.type_url)
                    .short_name()
                    .unwrap_or("?"),
                r.name.as_str(),
            )
        })
        .collect()
}

/// RouteConfiguration { virtual_hosts: [{ routes: [{ route: { cluster } }] }] }.
fn route_to(cluster: &str) -> Vec<u8> {
    let action = ld(1, cluster.as_bytes());
    let route = ld(2, &action);
    ld(2, &ld(3, &route))
}

#[test]
fn rls_plugin_names_its_default_target() {
    // RouteLookupClusterSpecifier { route_lookup_config: { default_target = 9 } }
    let rls = ld(1, &ld(9, b"fallback"));
    let extension = [ld(1, b"rls"), ld(2, &any(ROUTE_LOOKUP_PLUGIN, &rls))].concat();
    let plugin = ld(1, &extension);
    // route names the plugin (RouteAction.cluster_specifier_plugin = 37)
    let action = ld(37, b"rls");
    let host = ld(3, &ld(2, &action));
    let body = [ld(1, b"r"), ld(2, &host), ld(12, &plugin)].concat();
    let refs = references(ROUTE.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("CDS", "fallback")]);
}

#[test]
fn unnamed_plugins_and_unknown_extensions_add_nothing() {
    // A plugin no route names, and a filter of an unknown type whose bytes are garbage.
    let rls = ld(1, &ld(9, b"unused"));
    let extension = [ld(1, b"rls"), ld(2, &any(ROUTE_LOOKUP_PLUGIN, &rls))].concat();
    let body = [ld(1, b"r"), ld(12, &ld(1, &extension))].concat();
    assert!(references(ROUTE.type_url, &Bytes::from(body))
        .unwrap()
        .is_empty());
    let filter = ld(4, &any("acme.Filter", &[0xff, 0xff]));
    let body = [ld(1, b"l"), ld(3, &ld(3, &filter))].concat();
    assert!(references(LISTENER.type_url, &Bytes::from(body))
        .unwrap()
        .is_empty());
}

#[test]
fn inline_route_config_and_default_chain_are_followed() {
    let hcm = ld(4, &route_to("inline-cluster"));
    let filter = ld(4, &any(HTTP_CONNECTION_MANAGER, &hcm));
    let body = [ld(1, b"l"), ld(25, &ld(3, &filter))].concat();
    let refs = references(LISTENER.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("CDS", "inline-cluster")]);
}

#[test]
fn malformed_nested_config_names_the_resource_and_the_field() {
    // HCM whose rds field (3) is a truncated message.
    let hcm = [vec![0x1a, 0x05], b"ab".to_vec()].concat();
    let filter = ld(4, &any(HTTP_CONNECTION_MANAGER, &hcm));
    let body = [ld(1, b"listener-7"), ld(3, &ld(3, &filter))].concat();
    let error = references(LISTENER.type_url, &Bytes::from(body)).unwrap_err();
    let RefError::Malformed {
        resource, field, ..
    } = &error
    else {
        panic!("{error:?}")
    };
    assert_eq!(resource, "listener-7");
    assert_eq!(field, "filter_chains.filters.typed_config");
    let text = error.to_string();
    assert!(
        text.starts_with("envoy.config.listener.v3.Listener \"listener-7\": filter_chains.filters.typed_config: truncated"),
        "{text}"
    );
}

#[test]
fn malformed_body_is_an_error_not_a_panic() {
    let error = references(CLUSTER.type_url, &Bytes::from_static(&[0x0a, 0x09, b'c'])).unwrap_err();
    assert!(matches!(error, RefError::Malformed { ref field, .. } if field.is_empty()));
}

#[test]
fn xdstp_references_are_canonical_and_checked() {
    let name = "xdstp://auth/envoy.config.cluster.v3.Cluster/c?b=2&a=1";
    let body = [ld(1, b"r"), route_to(name)].concat();
    let refs = references(ROUTE.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(
        names(&refs),
        [(
            "CDS",
            "xdstp://auth/envoy.config.cluster.v3.Cluster/c?a=1&b=2"
        )]
    );
    let body = [ld(1, b"r"), route_to("xdstp://auth")].concat();
    let error = references(ROUTE.type_url, &Bytes::from(body)).unwrap_err();
    assert!(matches!(
        error,
        RefError::MalformedXdstpName {
            field: "RouteAction.cluster",
            ..
        }
    ));
}

#[test]
fn eds_name_defaults_to_the_cluster_and_static_secrets_are_not_sds() {
    let body = [ld(1, b"c1"), vint(2, 3)].concat();
    let refs = references(CLUSTER.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("EDS", "c1")]);
    // STRICT_DNS (1): no EDS; a static secret (no sds_config) and an SDS one.
    let sds = |name: &[u8], with_source: bool| {
        let mut secret = ld(1, name);
        if with_source {
            secret.extend(ld(2, &ld(3, &[])));
        }
        secret
    };
    let common = [ld(6, &sds(b"static", false)), ld(6, &sds(b"cert", true))].concat();
    let tls = ld(1, &common);
    let socket = [ld(1, b"tls"), ld(3, &any(UPSTREAM_TLS, &tls))].concat();
    let body = [ld(1, b"c2"), vint(2, 1), ld(24, &socket)].concat();
    let refs = references(CLUSTER.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("SDS", "cert")]);
}

#[test]
fn other_types_refer_to_nothing() {
    let body = Bytes::from(ld(1, b"e"));
    assert!(references(ENDPOINT.type_url, &body).unwrap().is_empty());
    assert!(references(
        "type.googleapis.com/acme.Thing",
        &Bytes::from_static(&[0xff])
    )
    .unwrap()
    .is_empty());
}

quickcheck::quickcheck! {
    fn never_panics(body: Vec<u8>) -> bool {
        let body = Bytes::from(body);
        for t in REFERRING {
            let _ = references(t, &body);
        }
        true
    }
}

#[test]
fn filters_with_config_discovery_name_ecds_configurations() {
    // ExtensionConfigSource { config_source = 1 { ads = 3 {} } }
    let discovery = ld(1, &ld(3, &[]));
    // HttpConnectionManager.http_filters (5): HttpFilter { name = 1, config_discovery = 5 }
    let discovered = [ld(1, b"authz"), ld(5, &discovery)].concat();
    let inline = [ld(1, b"router"), ld(4, &any("acme.Router", &[]))].concat();
    let hcm = [ld(5, &discovered), ld(5, &inline)].concat();
    // Filter { name = 1, typed_config = 4 } and Filter { name = 1, config_discovery = 5 }
    let chain = [
        ld(3, &ld(4, &any(HTTP_CONNECTION_MANAGER, &hcm))),
        ld(3, &[ld(1, b"net"), ld(5, &discovery)].concat()),
    ]
    .concat();
    // Listener.listener_filters (9): ListenerFilter { name = 1, config_discovery = 5 }
    let listener_filter = [ld(1, b"inspect"), ld(5, &discovery)].concat();
    let body = [ld(1, b"l"), ld(3, &chain), ld(9, &listener_filter)].concat();
    let refs = references(LISTENER.type_url, &Bytes::from(body)).unwrap();
    let fields: Vec<(&str, &str)> = refs.iter().map(|r| (r.name.as_str(), r.field)).collect();
    assert_eq!(
        fields,
        [
            ("authz", "HttpFilter.name"),
            ("inspect", "ListenerFilter.name"),
            ("net", "Filter.name")
        ]
    );
}

#[test]
fn virtual_hosts_and_extension_configs_are_read() {
    // VirtualHost { name = 1, routes = 3 { route = 2 { cluster = 1 } } }
    let body = [ld(1, b"r/www"), ld(3, &ld(2, &ld(1, b"web")))].concat();
    let refs = references(VIRTUAL_HOST.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("CDS", "web")]);
    // TypedExtensionConfig { name = 1, typed_config = 2: a TCP proxy naming cluster = 2 }
    let proxy = any(TCP_PROXY, &ld(2, b"backend"));
    let body = [ld(1, b"net"), ld(2, &proxy)].concat();
    let refs = references(EXTENSION_CONFIG.type_url, &Bytes::from(body)).unwrap();
    assert_eq!(names(&refs), [("CDS", "backend")]);
    // A malformed configuration names the resource.
    let body = [ld(1, b"bad"), ld(2, &[0x0a, 0x09])].concat();
    let error = references(EXTENSION_CONFIG.type_url, &Bytes::from(body)).unwrap_err();
    assert!(matches!(error, RefError::Malformed { ref resource, .. } if resource == "bad"));
}

#[test]
fn built_bodies_carry_exactly_their_references() {
    use crate::types::TypeInfo;
    let cases: [(&str, &[(&str, &str)]); 6] = [
        (
            LISTENER.type_url,
            &[
                (ROUTE.type_url, "r"),
                (SCOPED_ROUTE.type_url, "set"),
                (EXTENSION_CONFIG.type_url, "authz"),
            ],
        ),
        (LISTENER.type_url, &[(EXTENSION_CONFIG.type_url, "only")]),
        (SCOPED_ROUTE.type_url, &[(ROUTE.type_url, "r1")]),
        (VIRTUAL_HOST.type_url, &[(CLUSTER.type_url, "web")]),
        (ROUTE.type_url, &[(CLUSTER.type_url, "c")]),
        (EXTENSION_CONFIG.type_url, &[]),
    ];
    for (type_url, wanted) in cases {
        let body = build::body_with_refs(type_url, "x/y", wanted, "t1");
        let refs = references(type_url, &body).unwrap();
        let mut wanted: Vec<(&str, &str)> = wanted
            .iter()
            .map(|(t, n)| (TypeInfo::of(t).short_name().unwrap_or("?"), *n))
            .collect();
        wanted.sort_by(|a, b| {
            let rank =
                |s: &str| crate::types::ResourceType::by_short_name(s).map_or(99, |t| t.ads_rank);
            rank(a.0).cmp(&rank(b.0)).then(a.1.cmp(b.1))
        });
        assert_eq!(names(&refs), wanted, "{type_url}");
        assert_eq!(crate::resource::name_of(&body).ok(), Some("x/y"));
    }
    let vhds = build::body_with_refs(ROUTE.type_url, "r", &[(VIRTUAL_HOST.type_url, "*")], "");
    let refs = references(ROUTE.type_url, &vhds).unwrap();
    assert!(refs.vhds && refs.is_empty());
}

#[test]
fn upstream_filters_with_config_discovery_name_ecds_configurations() {
    let discovery = ld(1, &ld(3, &[]));
    // Cluster.filters (40): cluster.v3.Filter { name = 1, config_discovery = 3 }, and one
    // configured inline (typed_config = 2), which names nothing.
    let network = [ld(1, b"upstream-net"), ld(3, &discovery)].concat();
    let inline = [ld(1, b"inline"), ld(2, &any("acme.Filter", &[]))].concat();
    // typed_extension_protocol_options (36): { key = 1, value = 2: HttpProtocolOptions {
    // http_filters = 6: HttpFilter { name = 1, config_discovery = 5 } } }
    let http_filter = [ld(1, b"upstream-authz"), ld(5, &discovery)].concat();
    let options = ld(6, &http_filter);
    let entry = [
        ld(1, UPSTREAM_HTTP_PROTOCOL_OPTIONS.as_bytes()),
        ld(2, &any(UPSTREAM_HTTP_PROTOCOL_OPTIONS, &options)),
    ]
    .concat();
    let body = [
        ld(1, b"c"),
        vint(2, 1),
        ld(40, &network),
        ld(40, &inline),
        ld(36, &entry),
    ]
    .concat();
    let refs = references(CLUSTER.type_url, &Bytes::from(body)).unwrap();
    let fields: Vec<(&str, &str, &str)> = refs
        .iter()
        .map(|r| (r.type_url, r.name.as_str(), r.field))
        .collect();
    assert_eq!(
        fields,
        [
            (
                EXTENSION_CONFIG.type_url,
                "upstream-authz",
                "HttpFilter.name"
            ),
            (
                EXTENSION_CONFIG.type_url,
                "upstream-net",
                "Cluster.filters.name"
            ),
        ]
    );
    // A malformed options entry names the field, never panics.
    let bad = [ld(1, b"c"), ld(36, &ld(2, &[0xff, 0xff]))].concat();
    assert!(references(CLUSTER.type_url, &Bytes::from(bad)).is_err());
}
