//! The references reader against bodies built with envoy-types' full messages (the public
//! protos' field numbers, independent of the crate's minimal messages).

mod envoy_bodies;

use envoy_bodies as envoy;
use xds_sansio::refs::{references, vhds_route_configuration, References};
use xds_sansio::types::{CLUSTER, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, VIRTUAL_HOST};

fn names(refs: &References) -> Vec<(String, String, &'static str)> {
    refs.iter()
        .map(|r| {
            let short = xds_sansio::types::TypeInfo::of(r.type_url)
                .short_name()
                .unwrap_or("?");
            (short.to_string(), r.name.to_string(), r.field)
        })
        .collect()
}

fn pairs(refs: &References) -> Vec<(String, String)> {
    names(refs).into_iter().map(|(t, n, _)| (t, n)).collect()
}

fn owned(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(t, n)| (t.to_string(), n.to_string()))
        .collect()
}

#[test]
fn api_listener_names_its_route_configuration() {
    let refs = references(LISTENER.type_url, &envoy::api_listener("l", "r1")).unwrap();
    assert_eq!(
        names(&refs),
        [("RDS".to_string(), "r1".to_string(), "Rds.route_config_name")]
    );
}

#[test]
fn socket_listener_chains_inline_routes_tcp_proxy_and_secrets() {
    let refs = references(LISTENER.type_url, &envoy::socket_listener("l")).unwrap();
    assert_eq!(
        pairs(&refs),
        owned(&[
            ("CDS", "inline-a"),
            ("CDS", "tcp-a"),
            ("CDS", "tcp-b"),
            ("RDS", "rds-route"),
            ("SDS", "client-ca"),
            ("SDS", "server-cert"),
            ("SDS", "ticket-keys"),
        ])
    );
}

#[test]
fn scoped_listener_names_its_scope_set_and_scopes_name_routes() {
    let refs = references(LISTENER.type_url, &envoy::scoped_listener("l", "scopes")).unwrap();
    assert_eq!(pairs(&refs), owned(&[("SRDS", "scopes")]));
    let refs = references(SCOPED_ROUTE.type_url, &envoy::scope("s1", "r9")).unwrap();
    assert_eq!(pairs(&refs), owned(&[("RDS", "r9")]));
}

#[test]
fn route_configuration_names_clusters_weighted_and_mirrored() {
    let body = envoy::route("r", &["b", "a", "b"], &["w1", "a"]);
    let refs = references(ROUTE.type_url, &body).unwrap();
    assert_eq!(
        names(&refs),
        [
            ("CDS".into(), "a".into(), "RouteAction.cluster"),
            ("CDS".into(), "b".into(), "RouteAction.cluster"),
            (
                "CDS".into(),
                "w1".into(),
                "WeightedCluster.ClusterWeight.name"
            ),
        ]
    );
    let refs = references(ROUTE.type_url, &envoy::route_with_mirrors_and_vhds("r")).unwrap();
    assert_eq!(
        pairs(&refs),
        owned(&[("CDS", "main"), ("CDS", "shadow"), ("CDS", "top-shadow")])
    );
    assert!(refs.vhds);
}

#[test]
fn clusters_name_endpoints_children_and_secrets() {
    let refs = references(CLUSTER.type_url, &envoy::eds_cluster("c", None, None)).unwrap();
    assert_eq!(names(&refs), [("EDS".into(), "c".into(), "Cluster.name")]);
    let refs = references(
        CLUSTER.type_url,
        &envoy::eds_cluster("c", Some("svc"), Some("ca")),
    )
    .unwrap();
    assert_eq!(pairs(&refs), owned(&[("EDS", "svc"), ("SDS", "ca")]));
    let refs = references(CLUSTER.type_url, &envoy::dns_cluster("d", "cert")).unwrap();
    assert_eq!(pairs(&refs), owned(&[("SDS", "cert")]));
    let refs = references(
        CLUSTER.type_url,
        &envoy::aggregate_cluster("agg", &["primary", "backup"]),
    )
    .unwrap();
    assert_eq!(
        pairs(&refs),
        owned(&[("CDS", "backup"), ("CDS", "primary")])
    );
    assert_eq!(
        refs.aggregate.as_deref(),
        Some(&["primary".to_string(), "backup".to_string()][..])
    );
}

#[test]
fn nested_bodies_are_slices_of_the_resource() {
    // Decoding from a Bytes buffer never copies the nested configurations: only the
    // names are allocated. Checked indirectly: a large body reads fine and fast enough.
    let body = envoy::route(
        "big",
        &(0..2000)
            .map(|i| format!("c{i}"))
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &[],
    );
    let refs = references(ROUTE.type_url, &body).unwrap();
    assert_eq!(refs.len(), 2000);
}

#[test]
fn filters_over_ecds_are_named_by_their_filter_names() {
    let body = envoy::ecds_listener("l", "r", &["authz", "ratelimit"], "net-rbac", "tls-inspect");
    let refs = references(LISTENER.type_url, &body).unwrap();
    assert_eq!(
        names(&refs),
        [
            ("RDS".into(), "r".into(), "Rds.route_config_name"),
            ("ECDS".into(), "authz".into(), "HttpFilter.name"),
            ("ECDS".into(), "net-rbac".into(), "Filter.name"),
            ("ECDS".into(), "ratelimit".into(), "HttpFilter.name"),
            ("ECDS".into(), "tls-inspect".into(), "ListenerFilter.name"),
        ]
    );
    // The router, configured inline, is no ECDS reference.
    assert!(!refs
        .of_type(EXTENSION_CONFIG.type_url)
        .any(|n| n.contains("router")));
}

#[test]
fn upstream_filters_over_ecds_are_named_too() {
    let body = envoy::cluster_with_upstream_filters("c", "upstream-net", "upstream-authz");
    let refs = references(CLUSTER.type_url, &body).unwrap();
    assert_eq!(
        names(&refs),
        [
            ("ECDS".into(), "upstream-authz".into(), "HttpFilter.name"),
            ("ECDS".into(), "upstream-net".into(), "Cluster.filters.name"),
        ]
    );
}

#[test]
fn ecds_resources_name_what_their_configuration_names() {
    let plain = references(EXTENSION_CONFIG.type_url, &envoy::extension_config("authz")).unwrap();
    assert!(plain.is_empty());
    let hcm = envoy::extension_config_hcm("hcm", "r7");
    let refs = references(EXTENSION_CONFIG.type_url, &hcm).unwrap();
    assert_eq!(pairs(&refs), owned(&[("RDS", "r7")]));
}

#[test]
fn vhds_route_names_nothing_and_its_virtual_hosts_name_clusters() {
    let refs = references(ROUTE.type_url, &envoy::vhds_route("r")).unwrap();
    assert!(refs.is_empty());
    assert!(refs.vhds);
    let host = envoy::virtual_host("r/www.example.com", &["web", "api"]);
    let refs = references(VIRTUAL_HOST.type_url, &host).unwrap();
    assert_eq!(pairs(&refs), owned(&[("CDS", "api"), ("CDS", "web")]));
    // "matching should be done from right to left": a route name may hold slashes.
    assert_eq!(
        vhds_route_configuration("team/a/routes/www.example.com"),
        Some("team/a/routes")
    );
    assert_eq!(vhds_route_configuration("no-host"), None);
    // An xdstp route configuration: the same rule (no xdstp form of VHDS names exists).
    assert_eq!(
        vhds_route_configuration(
            "xdstp://auth/envoy.config.route.v3.RouteConfiguration/r1/www.example.com"
        ),
        Some("xdstp://auth/envoy.config.route.v3.RouteConfiguration/r1")
    );
}

#[test]
fn xdstp_references_are_never_relative_to_the_referrer() {
    // A listener of authority "a" naming a route with no authority and a plain route: the
    // names stay as written (TP1: the authority is part of the name; A47: no authority is
    // the empty authority), never completed with the referrer's authority.
    let listener = "xdstp://a/envoy.config.listener.v3.Listener/l";
    let no_authority = "xdstp:///envoy.config.route.v3.RouteConfiguration/r?z=1&b=2";
    for (route, expected) in [
        (
            no_authority,
            "xdstp:///envoy.config.route.v3.RouteConfiguration/r?b=2&z=1",
        ),
        ("r", "r"),
        (
            "xdstp://b/envoy.config.route.v3.RouteConfiguration/r",
            "xdstp://b/envoy.config.route.v3.RouteConfiguration/r",
        ),
    ] {
        let refs = references(LISTENER.type_url, &envoy::api_listener(listener, route)).unwrap();
        assert_eq!(pairs(&refs), owned(&[("RDS", expected)]));
    }
}
