//! The references reader against bodies built with envoy-types' full messages (the public
//! protos' field numbers, independent of the crate's minimal messages).

mod envoy_bodies;

use envoy_bodies as envoy;
use xds_sansio::refs::{references, References};
use xds_sansio::types::{CLUSTER, LISTENER, ROUTE, SCOPED_ROUTE};

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
