//! The server's consistency check, its enforcement, and make-before-break publications
//! (two phases) seen from a real client: at no point does the client hold a route whose
//! cluster it lacks.

mod envoy_bodies;

use core::time::Duration;
use envoy_bodies as envoy;
use xds_sansio::client::ClientConfig;
use xds_sansio::refs::references;
use xds_sansio::server::{
    Consistency, ResourceEntry, ResourceStore, ServerConfig, StoreError, StoreOp,
};
use xds_sansio::types::{
    CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, VIRTUAL_HOST,
};
use xds_sansio::{Transport, Variant};
use xds_sansio_conformance::testing::{Pair, PairConfig};

fn set(type_url: &str, name: &str, body: bytes::Bytes) -> StoreOp {
    StoreOp::Set {
        type_url: type_url.into(),
        entry: ResourceEntry::new(name, body),
    }
}

fn remove(type_url: &str, name: &str) -> StoreOp {
    StoreOp::Remove {
        type_url: type_url.into(),
        name: name.into(),
    }
}

fn base() -> Vec<StoreOp> {
    vec![
        set(LISTENER.type_url, "l", envoy::api_listener("l", "r")),
        set(ROUTE.type_url, "r", envoy::route("r", &["x"], &[])),
        set(
            CLUSTER.type_url,
            "x",
            envoy::eds_cluster("x", None, Some("ca")),
        ),
        set(ENDPOINT.type_url, "x", envoy::endpoints("x", 1)),
    ]
}

#[test]
fn full_check_reports_dangling_references_of_served_types_only() {
    let mut store = ResourceStore::new();
    store.apply(base()).unwrap();
    // SDS is not served by this store: the secret "ca" is not checked.
    assert!(store.consistency().is_consistent());
    store.serve_type(SECRET.type_url).unwrap();
    let report = store.consistency();
    assert_eq!(report.dangling.len(), 1);
    assert_eq!(
        report.dangling[0].to_string(),
        "CDS \"x\" names SDS \"ca\" (SdsSecretConfig.name), which is not published"
    );
    store.remove(ENDPOINT.type_url, "x");
    let report = store.consistency();
    let names: Vec<(&str, &str)> = report
        .dangling
        .iter()
        .map(|d| (d.from.as_str(), d.to.as_str()))
        .collect();
    assert_eq!(
        names,
        [("x", "x"), ("x", "ca")],
        "sorted by type, then name"
    );
}

#[test]
fn incremental_check_and_enforcement() {
    let mut store = ResourceStore::new();
    store.apply(base()).unwrap();
    store.set_consistency(Consistency::Enforce);
    // A route naming a cluster that is not there is refused, the store untouched.
    let ops = vec![set(
        ROUTE.type_url,
        "r",
        envoy::route("r", &["x", "y"], &[]),
    )];
    let Err(StoreError::Inconsistent(report)) = store.apply(ops) else {
        panic!("refused")
    };
    assert_eq!(report.dangling[0].to, "y");
    assert_eq!(
        references(
            ROUTE.type_url,
            store.get(ROUTE.type_url, "r").unwrap().body()
        )
        .unwrap()
        .len(),
        1
    );
    // Removing a cluster a route names is refused; with the route switched in the same
    // publication it is not.
    assert!(store.remove(CLUSTER.type_url, "x").is_none());
    let err = store
        .apply(vec![
            remove(CLUSTER.type_url, "x"),
            remove(ENDPOINT.type_url, "x"),
        ])
        .unwrap_err();
    assert!(
        err.to_string().contains("RDS \"r\" names CDS \"x\""),
        "{err}"
    );
    store
        .apply(vec![
            set(CLUSTER.type_url, "y", envoy::eds_cluster("y", None, None)),
            set(ENDPOINT.type_url, "y", envoy::endpoints("y", 1)),
            set(ROUTE.type_url, "r", envoy::route("r", &["y"], &[])),
            remove(CLUSTER.type_url, "x"),
            remove(ENDPOINT.type_url, "x"),
        ])
        .unwrap();
    assert!(store.consistency().is_consistent());
    // An unreadable body is refused under enforcement.
    let bad = set(
        CLUSTER.type_url,
        "z",
        bytes::Bytes::from_static(&[0x0a, 0x01, b'z', 0x1a, 0x09]),
    );
    assert!(
        matches!(store.apply(vec![bad]), Err(StoreError::Inconsistent(r)) if r.unreadable.len() == 1)
    );
}

/// Whether the client holds every cluster its routes name, and the endpoints of every
/// cluster it holds.
fn client_consistent(pair: &Pair) -> Result<(), String> {
    let client = &pair.client;
    for route in client.resource_names(ROUTE.type_url) {
        let body = client
            .resource(ROUTE.type_url, &route)
            .unwrap()
            .body_bytes();
        for cluster in references(ROUTE.type_url, &body)
            .unwrap()
            .of_type(CLUSTER.type_url)
        {
            if client.resource(CLUSTER.type_url, cluster).is_none() {
                return Err(format!("route {route} names {cluster}, not held"));
            }
        }
    }
    Ok(())
}

#[test]
fn two_phase_publication_never_leaves_the_client_with_a_dangling_route() {
    for variant in [Variant::Sotw, Variant::Delta] {
        let mut pair = Pair::new(PairConfig {
            client: ClientConfig::new(variant, Transport::Aggregated, Default::default()),
            server: ServerConfig::new(variant, Transport::Aggregated),
            latency: Duration::from_millis(5),
        });
        pair.apply(base()).unwrap();
        pair.client.subscribe(LISTENER.type_url, &["l"]).unwrap();
        pair.client.subscribe(ROUTE.type_url, &["r"]).unwrap();
        pair.client.subscribe(CLUSTER.type_url, &[]).unwrap();
        pair.client
            .subscribe(ENDPOINT.type_url, &["x", "y"])
            .unwrap();
        pair.drive().unwrap();
        assert!(pair.client.resource(CLUSTER.type_url, "x").is_some());
        // One publication switches the route from x to y and removes x.
        let ops = vec![
            set(CLUSTER.type_url, "y", envoy::eds_cluster("y", None, None)),
            set(ENDPOINT.type_url, "y", envoy::endpoints("y", 1)),
            set(ROUTE.type_url, "r", envoy::route("r", &["y"], &[])),
            remove(CLUSTER.type_url, "x"),
            remove(ENDPOINT.type_url, "x"),
        ];
        if variant == Variant::Sotw {
            // In one publication, SotW's full-state CDS response (without x) goes out
            // before the route that stops naming x: the client is left with a dangling route.
            let mut single = pair.clone();
            single.apply(ops.clone()).unwrap();
            let mut broke = false;
            while single.step() {
                broke |= client_consistent(&single).is_err();
            }
            assert!(broke, "the single publication shows the hazard");
        }
        let plan = pair.store.plan_make_before_break(ops);
        assert_eq!(plan.later.len(), 2, "x and its endpoints wait");
        assert!(pair.store.consistency_of(&plan.now).is_consistent());
        pair.apply(plan.now).unwrap();
        let mut steps = 0;
        loop {
            client_consistent(&pair).unwrap();
            pair.collect();
            let settled = pair.server.as_ref().unwrap().is_settled(&pair.store);
            if settled {
                break;
            }
            assert!(
                pair.step(),
                "{variant:?}: not settled and nothing in flight"
            );
            steps += 1;
        }
        assert!(steps > 0);
        assert!(
            pair.client.resource(CLUSTER.type_url, "x").is_some(),
            "phase 1 keeps x"
        );
        pair.apply(plan.later).unwrap();
        while pair.step() {
            client_consistent(&pair).unwrap();
        }
        assert!(
            pair.client.resource(CLUSTER.type_url, "x").is_none(),
            "{variant:?}"
        );
        assert!(pair.client.resource(CLUSTER.type_url, "y").is_some());
    }
}

/// The dangling references of the store, as text.
fn dangling(store: &ResourceStore) -> Vec<String> {
    store
        .consistency()
        .dangling
        .iter()
        .map(|d| d.to_string())
        .collect()
}

#[test]
fn ecds_srds_and_vhds_references_are_checked_and_planned() {
    let mut store = ResourceStore::new();
    store
        .apply(vec![
            set(
                LISTENER.type_url,
                "l",
                envoy::ecds_listener("l", "r", &["authz"], "net-rbac", "tls-inspect"),
            ),
            set(
                LISTENER.type_url,
                "scoped",
                envoy::scoped_listener("scoped", "set"),
            ),
            set(ROUTE.type_url, "r", envoy::vhds_route("r")),
            set(SCOPED_ROUTE.type_url, "s1", envoy::scope("s1", "r-scoped")),
            set(
                VIRTUAL_HOST.type_url,
                "r/www",
                envoy::virtual_host("r/www", &["web"]),
            ),
            set(
                EXTENSION_CONFIG.type_url,
                "authz",
                envoy::extension_config("authz"),
            ),
            set(
                EXTENSION_CONFIG.type_url,
                "net-rbac",
                envoy::extension_config("net-rbac"),
            ),
            StoreOp::ServeType {
                type_url: CLUSTER.type_url.into(),
            },
        ])
        .unwrap();
    // The scope set's name is no resource; a VHDS route names no virtual host.
    assert_eq!(
        dangling(&store),
        [
            "LDS \"l\" names ECDS \"tls-inspect\" (ListenerFilter.name), which is not published",
            "SRDS \"s1\" names RDS \"r-scoped\" (ScopedRouteConfiguration.route_configuration_name), which is not published",
            "VHDS \"r/www\" names CDS \"web\" (RouteAction.cluster), which is not published",
        ]
    );
    store
        .apply(vec![
            set(
                EXTENSION_CONFIG.type_url,
                "tls-inspect",
                envoy::extension_config("tls-inspect"),
            ),
            set(
                ROUTE.type_url,
                "r-scoped",
                envoy::route("r-scoped", &[], &[]),
            ),
            set(
                CLUSTER.type_url,
                "web",
                envoy::eds_cluster("web", None, None),
            ),
        ])
        .unwrap();
    assert!(store.consistency().is_consistent());
    // Removing what a listener's filter, a scope and a virtual host name: each dangles,
    // and make-before-break holds each removal for the second phase.
    let ops = vec![
        remove(EXTENSION_CONFIG.type_url, "authz"),
        remove(ROUTE.type_url, "r-scoped"),
        remove(CLUSTER.type_url, "web"),
        remove(SCOPED_ROUTE.type_url, "s1"),
    ];
    assert_eq!(store.consistency_of(&ops[..3]).dangling.len(), 3);
    let plan = store.plan_make_before_break(ops);
    assert_eq!(plan.now, [remove(SCOPED_ROUTE.type_url, "s1")]);
    assert_eq!(plan.later.len(), 3);
    store.set_consistency(Consistency::Enforce);
    assert!(matches!(
        store.apply(vec![remove(EXTENSION_CONFIG.type_url, "authz")]),
        Err(StoreError::Inconsistent(_))
    ));
}
