//! The dependency manager on a real client and server (testing::Pair), over SotW and
//! incremental ADS, with bodies built from envoy-types' full messages.

mod envoy_bodies;

use core::time::Duration;
use envoy_bodies as envoy;
use xds_sansio::client::deps::{DependencyManager, DepsConfig, Failure, ResourceKey, Snapshot};
use xds_sansio::client::ClientConfig;
use xds_sansio::server::{ResourceEntry, ServerConfig, StoreOp};
use xds_sansio::types::{
    CLUSTER, ENDPOINT, EXTENSION_CONFIG, LISTENER, ROUTE, SCOPED_ROUTE, SECRET, VIRTUAL_HOST,
};
use xds_sansio::{Transport, Variant};
use xds_sansio_conformance::testing::{Pair, PairConfig};

fn pair(variant: Variant) -> Pair {
    let mut pair = Pair::new(PairConfig {
        client: ClientConfig::new(variant, Transport::Aggregated, Default::default()),
        server: ServerConfig::new(variant, Transport::Aggregated),
        latency: Duration::from_millis(5),
    });
    pair.server.as_mut().unwrap();
    for t in [
        LISTENER,
        ROUTE,
        CLUSTER,
        ENDPOINT,
        SECRET,
        SCOPED_ROUTE,
        EXTENSION_CONFIG,
    ] {
        pair.apply(vec![StoreOp::ServeType {
            type_url: t.type_url.into(),
        }])
        .unwrap();
    }
    pair
}

fn set(type_url: &str, name: &str, body: bytes::Bytes) -> StoreOp {
    StoreOp::Set {
        type_url: type_url.into(),
        entry: ResourceEntry::new(name, body),
    }
}

/// Drives the pair and the manager until both are quiet; the snapshots emitted.
fn settle(pair: &mut Pair, deps: &mut DependencyManager) -> Vec<Snapshot> {
    let mut snapshots = Vec::new();
    for _ in 0..100 {
        while let Some(command) = deps.poll_command() {
            command.apply_to(&mut pair.client).unwrap();
        }
        pair.drive().unwrap();
        let events = pair.take_client_events();
        let now = pair.now();
        for (_, event) in &events {
            deps.handle_event(now, event);
        }
        snapshots.extend(std::iter::from_fn(|| deps.poll_snapshot()));
        if events.is_empty() && deps.poll_timeout().is_none_or(|t| t > now) {
            return snapshots;
        }
    }
    panic!("no quiescence")
}

fn store_config(pair: &mut Pair) {
    pair.apply(vec![
        set(LISTENER.type_url, "l", envoy::api_listener("l", "r")),
        set(
            ROUTE.type_url,
            "r",
            envoy::route("r", &["a"], &["b", "agg"]),
        ),
        set(
            CLUSTER.type_url,
            "a",
            envoy::eds_cluster("a", Some("a-svc"), Some("ca")),
        ),
        set(CLUSTER.type_url, "b", envoy::eds_cluster("b", None, None)),
        set(
            CLUSTER.type_url,
            "agg",
            envoy::aggregate_cluster("agg", &["b", "dns"]),
        ),
        set(CLUSTER.type_url, "dns", envoy::dns_cluster("dns", "cert")),
        set(ENDPOINT.type_url, "a-svc", envoy::endpoints("a-svc", 3)),
        set(ENDPOINT.type_url, "b", envoy::endpoints("b", 2)),
        set(
            SECRET.type_url,
            "ca",
            bytes::Bytes::from_static(b"\x0a\x02ca"),
        ),
        set(
            SECRET.type_url,
            "cert",
            bytes::Bytes::from_static(b"\x0a\x04cert"),
        ),
    ])
    .unwrap();
}

#[test]
fn grpc_shape_resolves_one_listener_over_sotw_and_delta() {
    for variant in [Variant::Sotw, Variant::Delta] {
        let mut pair = pair(variant);
        store_config(&mut pair);
        let mut deps = DependencyManager::new(DepsConfig::default());
        deps.watch_listener(pair.now(), "l").unwrap();
        let snapshots = settle(&mut pair, &mut deps);
        assert_eq!(snapshots.len(), 1, "{variant:?}: one complete snapshot");
        let config = deps.config("l").unwrap();
        assert_eq!(config.status, Ok(()));
        let clusters: Vec<(String, Result<Vec<String>, Failure>)> = config
            .clusters
            .iter()
            .map(|c| (c.name.clone(), c.leaves.clone()))
            .collect();
        assert_eq!(
            clusters,
            [
                ("a".into(), Ok(vec!["a".into()])),
                ("agg".into(), Ok(vec!["b".into(), "dns".into()])),
                ("b".into(), Ok(vec!["b".into()])),
                ("dns".into(), Ok(vec!["dns".into()])),
            ]
        );
        assert_eq!(config.resources.len(), 10, "{variant:?}");
        // Everything the manager asked for is subscribed on the client.
        assert_eq!(
            pair.client.resource_names(ENDPOINT.type_url),
            ["a-svc", "b"]
        );
    }
}

#[test]
fn route_switch_and_deleted_listener_over_delta() {
    let mut pair = pair(Variant::Delta);
    store_config(&mut pair);
    pair.apply(vec![
        set(CLUSTER.type_url, "c", envoy::eds_cluster("c", None, None)),
        set(ENDPOINT.type_url, "c", envoy::endpoints("c", 1)),
    ])
    .unwrap();
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(pair.now(), "l").unwrap();
    settle(&mut pair, &mut deps);
    // The route now names c instead of a: one more snapshot once c and its endpoints are in.
    pair.apply(vec![set(
        ROUTE.type_url,
        "r",
        envoy::route("r", &["c"], &["b", "agg"]),
    )])
    .unwrap();
    let snapshots = settle(&mut pair, &mut deps);
    assert_eq!(snapshots.len(), 1);
    assert!(snapshots[0]
        .changed
        .contains(&ResourceKey::new(CLUSTER.type_url, "c")));
    assert!(snapshots[0]
        .changed
        .contains(&ResourceKey::new(CLUSTER.type_url, "a")));
    // a is unsubscribed only after the grace.
    assert!(pair.client.resource(CLUSTER.type_url, "a").is_some());
    pair.advance(Duration::from_secs(31)).unwrap();
    let now = pair.now();
    deps.handle_timeout(now);
    settle(&mut pair, &mut deps);
    assert!(pair.client.resource(CLUSTER.type_url, "a").is_none());
    assert!(pair.client.resource(ENDPOINT.type_url, "a-svc").is_none());
    // The listener is deleted: the configuration fails.
    pair.store.remove(LISTENER.type_url, "l");
    let snapshots = settle(&mut pair, &mut deps);
    assert_eq!(snapshots.len(), 1);
    assert_eq!(
        deps.config("l").unwrap().status,
        Err(Failure::DoesNotExist(ResourceKey::new(
            LISTENER.type_url,
            "l"
        )))
    );
}

#[test]
fn envoy_shape_over_sotw_wildcards() {
    let mut pair = pair(Variant::Sotw);
    store_config(&mut pair);
    pair.apply(vec![set(
        LISTENER.type_url,
        "tcp",
        envoy::socket_listener("tcp"),
    )])
    .unwrap();
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_all(pair.now());
    let snapshots = settle(&mut pair, &mut deps);
    assert!(
        snapshots.is_empty(),
        "RDS and SDS names the store lacks are waited for"
    );
    assert_eq!(deps.waiting().len(), 4);
    // SotW cannot say a name does not exist: the client's timer does, after 15 s.
    pair.advance(Duration::from_secs(16)).unwrap();
    let snapshots = settle(&mut pair, &mut deps);
    let last = snapshots
        .last()
        .unwrap_or_else(|| panic!("{:?}", deps.waiting()));
    // The socket listener names clusters and secrets the store lacks.
    let failed: Vec<String> = last.failed.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(
        failed,
        [
            "CDS inline-a",
            "CDS tcp-a",
            "CDS tcp-b",
            "RDS rds-route",
            "SDS client-ca",
            "SDS server-cert",
            "SDS ticket-keys",
        ]
    );
    assert_eq!(deps.config("l").unwrap().status, Ok(()));
    assert!(deps.config("tcp").unwrap().status.is_err());
}

#[test]
fn grpc_shape_over_per_type_streams() {
    // One client (and one server stream) per type; the manager's commands go to the
    // client of their type, and every client's events come back to it.
    for variant in [Variant::Sotw, Variant::Delta] {
        let types = [LISTENER, ROUTE, CLUSTER, ENDPOINT, SECRET];
        let mut pairs: Vec<Pair> = types
            .iter()
            .map(|t| {
                let transport = Transport::PerType(t.type_url.into());
                let mut pair = Pair::new(PairConfig {
                    client: ClientConfig::new(variant, transport.clone(), Default::default()),
                    server: ServerConfig::new(variant, transport),
                    latency: Duration::from_millis(5),
                });
                store_config(&mut pair);
                pair
            })
            .collect();
        let mut deps = DependencyManager::new(DepsConfig::default());
        deps.watch_listener(pairs[0].now(), "l").unwrap();
        let mut snapshots = 0;
        for _ in 0..50 {
            while let Some(command) = deps.poll_command() {
                let at = types
                    .iter()
                    .position(|t| t.type_url == command.type_url())
                    .unwrap();
                command.apply_to(&mut pairs[at].client).unwrap();
            }
            let mut events = Vec::new();
            for pair in &mut pairs {
                pair.drive().unwrap();
                events.extend(pair.take_client_events());
            }
            if events.is_empty() {
                break;
            }
            for (at, event) in &events {
                deps.handle_event(*at, event);
            }
            snapshots += std::iter::from_fn(|| deps.poll_snapshot()).count();
        }
        assert_eq!(snapshots, 1, "{variant:?}");
        let config = deps.config("l").unwrap();
        assert_eq!(config.status, Ok(()));
        assert_eq!(config.resources.len(), 10, "{variant:?}");
    }
}

fn keys(list: &[(&'static str, &str)]) -> Vec<ResourceKey> {
    list.iter().map(|(t, n)| ResourceKey::new(t, *n)).collect()
}

fn waiting(deps: &DependencyManager) -> Vec<ResourceKey> {
    deps.waiting().into_iter().map(|(k, _)| k).collect()
}

#[test]
fn ecds_filter_configurations_are_waited_for_and_fail_the_listener() {
    for variant in [Variant::Sotw, Variant::Delta] {
        let mut pair = pair(variant);
        pair.apply(vec![
            set(
                LISTENER.type_url,
                "l",
                envoy::ecds_listener("l", "r", &["authz"], "net-rbac", "tls-inspect"),
            ),
            set(ROUTE.type_url, "r", envoy::route("r", &[], &[])),
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
        ])
        .unwrap();
        let mut deps = DependencyManager::new(DepsConfig::default());
        deps.watch_listener(pair.now(), "l").unwrap();
        let snapshots = settle(&mut pair, &mut deps);
        if variant == Variant::Sotw {
            // SotW cannot say tls-inspect does not exist (before the client's timer).
            assert!(snapshots.is_empty(), "tls-inspect is not in");
            assert_eq!(
                waiting(&deps),
                keys(&[(EXTENSION_CONFIG.type_url, "tls-inspect")])
            );
        } else {
            // Incremental says so at once: complete, and the listener fails.
            assert_eq!(snapshots.len(), 1);
            assert_eq!(
                deps.config("l").unwrap().status,
                Err(Failure::DoesNotExist(ResourceKey::new(
                    EXTENSION_CONFIG.type_url,
                    "tls-inspect"
                )))
            );
        }
        assert_eq!(
            pair.client.subscribed_names(EXTENSION_CONFIG.type_url),
            ["authz", "net-rbac", "tls-inspect"]
        );
        pair.apply(vec![set(
            EXTENSION_CONFIG.type_url,
            "tls-inspect",
            envoy::extension_config("tls-inspect"),
        )])
        .unwrap();
        let snapshots = settle(&mut pair, &mut deps);
        assert_eq!(snapshots.len(), 1, "{variant:?}");
        assert_eq!(deps.config("l").unwrap().status, Ok(()));
        // A filter configuration that goes away fails the listener (Envoy answers 500).
        pair.store.remove(EXTENSION_CONFIG.type_url, "authz");
        if variant == Variant::Sotw {
            // SotW cannot say a non-wildcard resource went away: the store's removal is
            // not sent, so nothing changes for the client.
            continue;
        }
        let snapshots = settle(&mut pair, &mut deps);
        assert_eq!(snapshots.len(), 1);
        assert_eq!(
            deps.config("l").unwrap().status,
            Err(Failure::DoesNotExist(ResourceKey::new(
                EXTENSION_CONFIG.type_url,
                "authz"
            )))
        );
    }
}

/// A cluster's upstream filters over ECDS (`Cluster.filters`, `HttpProtocolOptions`) are
/// subscribed; until they arrive that cluster cannot be used, and the listener is fine.
#[test]
fn upstream_filter_configurations_hold_their_cluster_not_the_listener() {
    let mut pair = pair(Variant::Delta);
    pair.apply(vec![
        set(LISTENER.type_url, "l", envoy::api_listener("l", "r")),
        set(ROUTE.type_url, "r", envoy::route("r", &["c"], &[])),
        set(
            CLUSTER.type_url,
            "c",
            envoy::cluster_with_upstream_filters("c", "up-net", "up-authz"),
        ),
        set(
            EXTENSION_CONFIG.type_url,
            "up-net",
            envoy::extension_config("up-net"),
        ),
    ])
    .unwrap();
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(pair.now(), "l").unwrap();
    settle(&mut pair, &mut deps);
    assert_eq!(
        pair.client.subscribed_names(EXTENSION_CONFIG.type_url),
        ["up-authz", "up-net"]
    );
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()), "the listener stands on its own");
    let cluster = config.clusters.iter().find(|c| c.name == "c").unwrap();
    assert_eq!(
        cluster.leaves,
        Err(Failure::DoesNotExist(ResourceKey::new(
            EXTENSION_CONFIG.type_url,
            "up-authz"
        )))
    );
    pair.apply(vec![set(
        EXTENSION_CONFIG.type_url,
        "up-authz",
        envoy::extension_config("up-authz"),
    )])
    .unwrap();
    settle(&mut pair, &mut deps);
    let config = deps.config("l").unwrap();
    let cluster = config.clusters.iter().find(|c| c.name == "c").unwrap();
    assert_eq!(cluster.leaves, Ok(vec!["c".to_string()]));
}

#[test]
fn srds_scope_set_is_every_scope_and_each_names_its_route() {
    for variant in [Variant::Sotw, Variant::Delta] {
        let mut pair = pair(variant);
        pair.apply(vec![
            set(
                LISTENER.type_url,
                "l",
                envoy::scoped_listener("l", "scopes"),
            ),
            set(SCOPED_ROUTE.type_url, "s1", envoy::scope("s1", "r1")),
            set(SCOPED_ROUTE.type_url, "s2", envoy::scope("s2", "r2")),
            set(ROUTE.type_url, "r1", envoy::route("r1", &["c"], &[])),
            set(CLUSTER.type_url, "c", envoy::eds_cluster("c", None, None)),
            set(ENDPOINT.type_url, "c", envoy::endpoints("c", 1)),
        ])
        .unwrap();
        let mut deps = DependencyManager::new(DepsConfig::default());
        deps.watch_listener(pair.now(), "l").unwrap();
        let snapshots = settle(&mut pair, &mut deps);
        assert_eq!(pair.client.subscribed_names(SCOPED_ROUTE.type_url), ["*"]);
        if variant == Variant::Sotw {
            assert!(snapshots.is_empty(), "r2 is not published");
            assert_eq!(waiting(&deps), keys(&[(ROUTE.type_url, "r2")]));
        } else {
            // A scope's route configuration fails the listener, as its own would.
            assert_eq!(snapshots.len(), 1);
            assert_eq!(
                deps.config("l").unwrap().status,
                Err(Failure::DoesNotExist(ResourceKey::new(
                    ROUTE.type_url,
                    "r2"
                )))
            );
        }
        pair.apply(vec![set(
            ROUTE.type_url,
            "r2",
            envoy::route("r2", &["c"], &[]),
        )])
        .unwrap();
        let snapshots = settle(&mut pair, &mut deps);
        assert_eq!(snapshots.len(), 1, "{variant:?}");
        let config = deps.config("l").unwrap();
        assert_eq!(config.status, Ok(()));
        let held: Vec<String> = config.resources.iter().map(|r| r.key.to_string()).collect();
        assert_eq!(
            held,
            ["CDS c", "EDS c", "LDS l", "RDS r1", "RDS r2", "SRDS s1", "SRDS s2",]
        );
        if variant == Variant::Delta {
            // A scope removed leaves the set, and its route configuration the
            // configuration, which stays usable.
            pair.store.remove(SCOPED_ROUTE.type_url, "s2");
            let snapshots = settle(&mut pair, &mut deps);
            assert_eq!(snapshots.len(), 1);
            let config = deps.config("l").unwrap();
            assert_eq!(config.status, Ok(()));
            let held: Vec<String> = config.resources.iter().map(|r| r.key.to_string()).collect();
            assert_eq!(held, ["CDS c", "EDS c", "LDS l", "RDS r1", "SRDS s1"]);
        }
    }
}

#[test]
fn vhds_route_is_complete_without_virtual_hosts_and_follows_those_received() {
    let mut pair = pair(Variant::Delta);
    pair.apply(vec![
        StoreOp::ServeType {
            type_url: VIRTUAL_HOST.type_url.into(),
        },
        set(LISTENER.type_url, "l", envoy::api_listener("l", "r")),
        set(ROUTE.type_url, "r", envoy::vhds_route("r")),
        set(
            VIRTUAL_HOST.type_url,
            "r/www.example.com",
            envoy::virtual_host("r/www.example.com", &["web"]),
        ),
        set(
            CLUSTER.type_url,
            "web",
            envoy::eds_cluster("web", None, None),
        ),
        set(ENDPOINT.type_url, "web", envoy::endpoints("web", 1)),
    ])
    .unwrap();
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(pair.now(), "l").unwrap();
    let snapshots = settle(&mut pair, &mut deps);
    assert_eq!(snapshots.len(), 1, "complete with no virtual host");
    assert!(pair
        .client
        .subscribed_names(VIRTUAL_HOST.type_url)
        .is_empty());
    // A request for www.example.com finds no route: the application asks VHDS for it.
    pair.client
        .subscribe(VIRTUAL_HOST.type_url, &["r/www.example.com"])
        .unwrap();
    let snapshots = settle(&mut pair, &mut deps);
    assert_eq!(snapshots.len(), 1, "once its cluster and endpoints are in");
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()));
    let held: Vec<String> = config.resources.iter().map(|r| r.key.to_string()).collect();
    assert_eq!(
        held,
        [
            "CDS web",
            "EDS web",
            "LDS l",
            "RDS r",
            "VHDS r/www.example.com"
        ]
    );
    // The virtual host is removed: it leaves the configuration, which stays usable.
    pair.store
        .remove(VIRTUAL_HOST.type_url, "r/www.example.com");
    let snapshots = settle(&mut pair, &mut deps);
    assert_eq!(snapshots.len(), 1);
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()));
    assert!(!config
        .resources
        .iter()
        .any(|r| r.key.type_url == VIRTUAL_HOST.type_url));
}
