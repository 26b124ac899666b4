//! Configuration watches (`XdsClient::watch_listener`, `watch_all_config`: the core's
//! dependency manager run by the driver, gRPC A74) against the adapter's server over
//! HTTP/2 on 127.0.0.1, SotW and delta over ADS, with bodies built from envoy-types' full
//! messages: a cascade delivered once complete; a route switching clusters (a new
//! configuration, the old clusters unsubscribed after the grace); a missing cluster and a
//! deleted listener as errors of that listener; a name wanted by a watch and the manager;
//! the primary killed, a fallback used and the primary back, with the configuration kept
//! throughout; a listener waiting for a resource not holding back another; a rejected
//! cluster (failed in the configuration, shared by a second listener) and a rejected
//! update (an error, the configuration kept); Envoy's shape. Each test is bounded and
//! stops by itself.

mod envoy_bodies;
mod support;

use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_bodies::endpoints_body;
use envoy_types::pb::envoy::config::cluster::v3 as cluster;
use envoy_types::pb::envoy::config::core::v3 as core;
use envoy_types::pb::envoy::config::listener::v3 as listener;
use envoy_types::pb::envoy::config::route::v3 as route;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
use envoy_types::util::pack_any;
use prost::Message;
use support::*;
use xds_sansio::client::deps::DepState;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::ResourceStore;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};
use xds_sansio::Variant;
use xds_sansio_tonic::client::{
    BackoffConfig, Bootstrap, ConfigEvent, ConfigWatch, DepsConfig, Failure, ListenerConfig,
    ManagementServer, ResourceKey, WatchError, XdsClient, XdsClientBuilder,
};

const LDS: &str = LISTENER.type_url;
const RDS: &str = ROUTE.type_url;
const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

// ---------------------------------------------------------------- bodies

/// A cluster whose load balancing policy is ring hash: the tests' validator rejects it.
fn ring_hash_cluster_body(name: &str) -> Bytes {
    Bytes::from(
        cluster::Cluster {
            name: name.into(),
            lb_policy: cluster::cluster::LbPolicy::RingHash as i32,
            ..cluster::Cluster::decode(cluster_body(name)).unwrap()
        }
        .encode_to_vec(),
    )
}

/// Rejects clusters that ask for ring hash.
fn no_ring_hash(_name: &str, _version: &str, body: &Bytes) -> Result<(), String> {
    match cluster::Cluster::decode(body.clone()) {
        Ok(c) if c.lb_policy == cluster::cluster::LbPolicy::RingHash as i32 => {
            Err("ring hash is not supported".into())
        }
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

fn ads() -> Option<core::ConfigSource> {
    Some(core::ConfigSource {
        config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        ..Default::default()
    })
}

/// gRPC's shape: an API listener whose connection manager takes its routes from RDS.
fn listener_body(name: &str, route_name: &str) -> Bytes {
    let manager = hcm::HttpConnectionManager {
        stat_prefix: "ingress".into(),
        route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(
            hcm::Rds {
                config_source: ads(),
                route_config_name: route_name.into(),
            },
        )),
        ..Default::default()
    };
    Bytes::from(
        listener::Listener {
            name: name.into(),
            api_listener: Some(listener::ApiListener {
                api_listener: Some(pack_any(manager)),
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

/// One virtual host, one route per cluster.
fn route_body(name: &str, clusters: &[&str]) -> Bytes {
    let routes = clusters
        .iter()
        .map(|c| route::Route {
            r#match: Some(route::RouteMatch {
                path_specifier: Some(route::route_match::PathSpecifier::Prefix(format!("/{c}"))),
                ..Default::default()
            }),
            action: Some(route::route::Action::Route(route::RouteAction {
                cluster_specifier: Some(route::route_action::ClusterSpecifier::Cluster(
                    (*c).into(),
                )),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    Bytes::from(
        route::RouteConfiguration {
            name: name.into(),
            virtual_hosts: vec![route::VirtualHost {
                name: "all".into(),
                domains: vec!["*".into()],
                routes,
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

/// An EDS cluster whose endpoints are under its own name.
fn cluster_body(name: &str) -> Bytes {
    Bytes::from(
        cluster::Cluster {
            name: name.into(),
            cluster_discovery_type: Some(cluster::cluster::ClusterDiscoveryType::Type(
                cluster::cluster::DiscoveryType::Eds as i32,
            )),
            eds_cluster_config: Some(cluster::cluster::EdsClusterConfig {
                eds_config: ads(),
                service_name: String::new(),
            }),
            ..Default::default()
        }
        .encode_to_vec(),
    )
}

/// Listener `l` -> route `r` -> `clusters`, each with its endpoints.
fn cascade(s: &mut ResourceStore, l: &str, r: &str, clusters: &[&str]) {
    s.set(LDS, l, listener_body(l, r)).unwrap();
    s.set(RDS, r, route_body(r, clusters)).unwrap();
    for (i, c) in clusters.iter().enumerate() {
        s.set(CDS, c, cluster_body(c)).unwrap();
        s.set(EDS, c, endpoints_body(c, 8000 + i as u32)).unwrap();
    }
}

// ---------------------------------------------------------------- harness

fn node() -> Node {
    Node {
        id: "config-test".into(),
        ..Node::default()
    }
}

fn client(uris: &[String], variant: Variant, grace: Duration) -> XdsClient {
    builder(uris, variant, grace).build().unwrap()
}

/// Short backoff, does-not-exist after 800 ms, the manager's grace `grace`.
fn builder(uris: &[String], variant: Variant, grace: Duration) -> XdsClientBuilder {
    let mut bootstrap = Bootstrap::single(uris[0].clone(), node());
    bootstrap.servers = uris
        .iter()
        .map(|u| ManagementServer::insecure(u.clone()))
        .collect();
    let mut backoff = BackoffConfig::default();
    backoff.initial = Duration::from_millis(100);
    backoff.max = Duration::from_secs(1);
    backoff.min_connect_timeout = Duration::from_secs(1);
    let mut deps = DepsConfig::default();
    deps.unsubscribe_grace = grace;
    XdsClient::builder(bootstrap)
        .variant(variant)
        .backoff(backoff)
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_millis(800)))
        .dependency_config(deps)
}

/// Waits (bounded) for an event matching `want`; the events before it are returned too.
async fn until(
    watch: &mut ConfigWatch,
    what: &str,
    want: impl Fn(&ConfigEvent) -> bool,
) -> (ConfigEvent, Vec<ConfigEvent>) {
    let deadline = tokio::time::Instant::now() + STEP;
    let mut before = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(e)) if want(&e) => return (e, before),
            Ok(Some(e)) => before.push(e),
            Ok(None) => panic!("{what}: the watch ended; before: {before:#?}"),
            Err(_) => panic!("{what}: timed out; events before: {before:#?}"),
        }
    }
}

/// The next configuration delivered (errors before it are returned too).
async fn next_config(watch: &mut ConfigWatch, what: &str) -> (ListenerConfig, Vec<ConfigEvent>) {
    match until(watch, what, |e| matches!(e, ConfigEvent::Changed(_))).await {
        (ConfigEvent::Changed(config), before) => (config, before),
        _ => unreachable!(),
    }
}

/// What arrives within `quiet`.
async fn quiet_for(watch: &mut ConfigWatch, quiet: Duration) -> Vec<ConfigEvent> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + quiet;
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, watch.next()).await {
        got.push(e);
    }
    got
}

fn configs(events: &[ConfigEvent]) -> Vec<&ListenerConfig> {
    events
        .iter()
        .filter_map(|e| match e {
            ConfigEvent::Changed(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// The configuration's resources, as `TYPE name` (short type names), in key order.
fn keys(config: &ListenerConfig) -> Vec<String> {
    config.resources.iter().map(|r| r.key.to_string()).collect()
}

fn clusters(config: &ListenerConfig) -> Vec<(String, Result<Vec<String>, Failure>)> {
    config
        .clusters
        .iter()
        .map(|c| (c.name.clone(), c.leaves.clone()))
        .collect()
}

fn ok(name: &str) -> (String, Result<Vec<String>, Failure>) {
    (name.into(), Ok(vec![name.into()]))
}

/// Whether the client holds or waits for `name` of `type_url` (its status dump).
async fn subscribed(client: &XdsClient, type_url: &str, name: &str) -> bool {
    client
        .dump()
        .await
        .iter()
        .any(|d| d.status.type_url.as_str() == type_url && d.status.name.as_str() == name)
}

async fn until_unsubscribed(client: &XdsClient, what: &str, names: &[(&str, &str)]) {
    let deadline = Instant::now() + STEP;
    loop {
        let mut left = Vec::new();
        for (t, n) in names {
            if subscribed(client, t, n).await {
                left.push(*n);
            }
        }
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still subscribed: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_waiting_for_a_resource_does_not_hold_back_another() {
    let server = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a"]);
        // l2's route names a cluster the server does not have.
        cascade(s, "l2", "r2", &["b"]);
        s.set(RDS, "r2", route_body("r2", &["b", "missing"]))
            .unwrap();
    })
    .await;
    // Long enough that l2 waits through the whole test.
    let client = builder(&[server.uri()], Variant::Sotw, Duration::from_millis(300))
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(60)))
        .build()
        .unwrap();
    let mut w1 = client.watch_listener("l1").unwrap();
    let (c1, _) = next_config(&mut w1, "l1").await;
    assert_eq!(clusters(&c1), [ok("a")]);
    let mut w2 = client.watch_listener("l2").unwrap();
    // l2 is waiting for its missing cluster...
    let deadline = Instant::now() + STEP;
    loop {
        let deps = client.dependencies().await;
        let missing = deps
            .iter()
            .find(|d| d.key == ResourceKey::new(CDS, "missing"));
        if missing.is_some_and(|d| d.state == DepState::Waiting && d.live) {
            break;
        }
        assert!(Instant::now() < deadline, "{deps:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ... and l1's change is delivered all the same.
    server.update(|s| s.set(EDS, "a", endpoints_body("a", 8600)).unwrap());
    let (c1, _) = next_config(&mut w1, "l1 while l2 waits").await;
    let eds_a = c1
        .resources
        .iter()
        .find(|r| r.key == ResourceKey::new(EDS, "a"))
        .unwrap();
    assert_eq!(eds_a.body, endpoints_body("a", 8600));
    let nothing = quiet_for(&mut w2, Duration::from_millis(200)).await;
    assert!(configs(&nothing).is_empty(), "{nothing:#?}");
    // The cluster appears: l2 is complete.
    server.update(|s| {
        s.set(CDS, "missing", cluster_body("missing")).unwrap();
        s.set(EDS, "missing", endpoints_body("missing", 8700))
            .unwrap();
    });
    let (c2, _) = next_config(&mut w2, "l2").await;
    assert_eq!(clusters(&c2), [ok("b"), ok("missing")]);
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_watched_again_within_the_grace_is_delivered_from_what_is_held() {
    let mut server = Killable::start(|s| cascade(s, "l1", "r1", &["a"])).await;
    let client = client(&[server.uri()], Variant::Delta, Duration::from_secs(30));
    let mut watch = client.watch_listener("l1").unwrap();
    let (first, _) = next_config(&mut watch, "first").await;
    drop(watch);
    // Still subscribed (the grace), so the server is not asked again: the configuration
    // comes from what the client holds.
    server.kill().await;
    let mut again = client.watch_listener("l1").unwrap();
    let (second, _) = next_config(&mut again, "watched again").await;
    assert_eq!(second, first);
    client.shutdown();
}

async fn rejected_cluster(variant: Variant) {
    let label = format!("{variant:?}");
    let server = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a"]);
        cascade(s, "l2", "r2", &["b"]);
        // A cluster whose only version is rejected, named by both routes.
        s.set(CDS, "bad", ring_hash_cluster_body("bad")).unwrap();
        s.set(RDS, "r1", route_body("r1", &["a", "bad"])).unwrap();
        s.set(RDS, "r2", route_body("r2", &["b", "bad"])).unwrap();
    })
    .await;
    let client = builder(&[server.uri()], variant, Duration::from_millis(300))
        .validator(CDS, no_ring_hash)
        .build()
        .unwrap();
    let mut w1 = client.watch_listener("l1").unwrap();
    let (c1, _) = next_config(&mut w1, &label).await;
    assert_eq!(c1.status, Ok(()), "{label}");
    let [a, bad] = c1.clusters.as_slice() else {
        panic!("{label}: {:?}", c1.clusters)
    };
    assert_eq!((a.name.as_str(), &a.leaves), ("a", &Ok(vec!["a".into()])));
    assert!(
        matches!(&bad.leaves, Err(Failure::Rejected { key, .. }) if *key == ResourceKey::new(CDS, "bad")),
        "{label}: {bad:?}"
    );

    // A second listener naming the rejected cluster: its own manager subscribes it, but
    // the client will not hear of it again (delta: nothing about it changes; SotW resends
    // it with the next CDS response), so the driver tells the new manager what the
    // client's status says.
    let mut w2 = client.watch_listener("l2").unwrap();
    let (c2, _) = next_config(&mut w2, &label).await;
    assert!(
        c2.clusters
            .iter()
            .any(|c| c.name == "bad" && matches!(c.leaves, Err(Failure::Rejected { .. }))),
        "{label}: {:?}",
        c2.clusters
    );

    // An update of a held cluster rejected: an error, and the configuration stays.
    server.update(|s| s.set(CDS, "a", ring_hash_cluster_body("a")).unwrap());
    let (event, before) = until(&mut w1, &label, |e| matches!(e, ConfigEvent::Error { .. })).await;
    assert!(configs(&before).is_empty(), "{label}: {before:#?}");
    match event {
        ConfigEvent::Error {
            resource: Some(key),
            error: WatchError::Rejected { error, .. },
        } => {
            assert_eq!(key, ResourceKey::new(CDS, "a"), "{label}");
            assert!(error.contains("ring hash"), "{label}: {error}");
        }
        other => panic!("{label}: {other:?}"),
    }
    let after = quiet_for(&mut w1, Duration::from_millis(300)).await;
    assert!(configs(&after).is_empty(), "{label}: {after:#?}");
    // l2 does not hold cluster a: not its error.
    let l2_events = quiet_for(&mut w2, Duration::from_millis(100)).await;
    assert!(l2_events.is_empty(), "{label}: {l2_events:#?}");
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_cluster_sotw() {
    rejected_cluster(Variant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_cluster_delta() {
    rejected_cluster(Variant::Delta).await;
}

async fn cascade_and_route_switch(variant: Variant) {
    let label = format!("{variant:?}");
    let server = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a", "b"]);
        // Not referenced yet: nothing asks for it.
        s.set(CDS, "c", cluster_body("c")).unwrap();
        s.set(EDS, "c", endpoints_body("c", 9000)).unwrap();
    })
    .await;
    let grace = Duration::from_millis(1500);
    let client = client(&[server.uri()], variant, grace);
    let mut watch = client.watch_listener("l1").unwrap();

    // The first event is the whole cascade, resolved.
    let (config, before) = next_config(&mut watch, &label).await;
    assert!(before.is_empty(), "{label}: {before:#?}");
    assert_eq!(config.name, "l1");
    assert_eq!(config.status, Ok(()), "{label}");
    assert_eq!(
        keys(&config),
        ["CDS a", "CDS b", "EDS a", "EDS b", "LDS l1", "RDS r1"],
        "{label}"
    );
    assert_eq!(clusters(&config), [ok("a"), ok("b")], "{label}");
    assert!(config.failed.is_empty(), "{label}: {:?}", config.failed);
    let eds_a = config
        .resources
        .iter()
        .find(|r| r.key == ResourceKey::new(EDS, "a"))
        .unwrap();
    assert_eq!(eds_a.body, endpoints_body("a", 8000), "{label}");
    // Delivered once: nothing more while nothing changes.
    let more = quiet_for(&mut watch, Duration::from_millis(300)).await;
    assert!(more.is_empty(), "{label}: {more:#?}");
    assert!(!subscribed(&client, CDS, "c").await, "{label}");

    // The route switches from b to c: a new configuration with c and its endpoints.
    server.update(|s| s.set(RDS, "r1", route_body("r1", &["a", "c"])).unwrap());
    let (config, before) = next_config(&mut watch, &label).await;
    let switched = Instant::now();
    assert!(before.is_empty(), "{label}: {before:#?}");
    assert_eq!(config.status, Ok(()), "{label}");
    assert_eq!(
        keys(&config),
        ["CDS a", "CDS c", "EDS a", "EDS c", "LDS l1", "RDS r1"],
        "{label}"
    );
    assert_eq!(clusters(&config), [ok("a"), ok("c")], "{label}");

    // b stays subscribed for the grace (the manager says when it goes), then leaves with
    // its endpoints; the configuration does not change for it.
    let deps = client.dependencies().await;
    if switched.elapsed() < grace / 2 {
        let b = deps
            .iter()
            .find(|d| d.key == ResourceKey::new(CDS, "b"))
            .unwrap_or_else(|| panic!("{label}: {deps:#?}"));
        assert!(!b.live && b.unsubscribe_at.is_some(), "{label}: {b:?}");
        assert!(subscribed(&client, CDS, "b").await, "{label}");
    }
    until_unsubscribed(&client, &label, &[(CDS, "b"), (EDS, "b")]).await;
    assert!(
        switched.elapsed() >= grace - Duration::from_millis(100),
        "{label}: unsubscribed after {:?}, before the grace",
        switched.elapsed()
    );
    assert!(subscribed(&client, CDS, "c").await, "{label}");
    let more = quiet_for(&mut watch, Duration::from_millis(200)).await;
    assert!(more.is_empty(), "{label}: {more:#?}");

    // An endpoint change is a new configuration too.
    server.update(|s| s.set(EDS, "c", endpoints_body("c", 9001)).unwrap());
    let (config, _) = next_config(&mut watch, &label).await;
    let eds_c = config
        .resources
        .iter()
        .find(|r| r.key == ResourceKey::new(EDS, "c"))
        .unwrap();
    assert_eq!(eds_c.body, endpoints_body("c", 9001), "{label}");

    // Dropping the watch lets everything go after the grace.
    drop(watch);
    until_unsubscribed(
        &client,
        &label,
        &[(LDS, "l1"), (RDS, "r1"), (CDS, "a"), (CDS, "c"), (EDS, "a")],
    )
    .await;
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascade_and_route_switch_sotw() {
    cascade_and_route_switch(Variant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cascade_and_route_switch_delta() {
    cascade_and_route_switch(Variant::Delta).await;
}

async fn missing_cluster_and_deleted_listener(variant: Variant) {
    let label = format!("{variant:?}");
    let server = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a"]);
        s.set(RDS, "r1", route_body("r1", &["a", "gone"])).unwrap();
    })
    .await;
    let client = client(&[server.uri()], variant, Duration::from_millis(300));
    let mut watch = client.watch_listener("l1").unwrap();

    // The missing cluster holds the configuration back until it is known not to exist;
    // then only that cluster fails.
    let (config, before) = next_config(&mut watch, &label).await;
    assert!(before.is_empty(), "{label}: {before:#?}");
    let gone = Failure::DoesNotExist(ResourceKey::new(CDS, "gone"));
    assert_eq!(config.status, Ok(()), "{label}");
    assert_eq!(
        clusters(&config),
        [ok("a"), ("gone".into(), Err(gone.clone()))],
        "{label}"
    );
    assert_eq!(config.failed, [gone], "{label}");

    // It appears: the configuration is whole.
    server.update(|s| {
        s.set(CDS, "gone", cluster_body("gone")).unwrap();
        s.set(EDS, "gone", endpoints_body("gone", 8100)).unwrap();
    });
    let (config, _) = until(
        &mut watch,
        &label,
        |e| matches!(e, ConfigEvent::Changed(c) if c.failed.is_empty()),
    )
    .await;
    let ConfigEvent::Changed(config) = config else {
        unreachable!()
    };
    assert_eq!(clusters(&config), [ok("a"), ok("gone")], "{label}");

    // The listener is deleted: the listener fails.
    server.update(|s| s.remove(LDS, "l1").unwrap());
    let (config, _) = next_config(&mut watch, &label).await;
    assert_eq!(
        config.status,
        Err(Failure::DoesNotExist(ResourceKey::new(LDS, "l1"))),
        "{label}"
    );
    // It comes back: serving again.
    server.update(|s| s.set(LDS, "l1", listener_body("l1", "r1")).unwrap());
    let (config, _) = next_config(&mut watch, &label).await;
    assert_eq!(config.status, Ok(()), "{label}");
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cluster_and_deleted_listener_sotw() {
    missing_cluster_and_deleted_listener(Variant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cluster_and_deleted_listener_delta() {
    missing_cluster_and_deleted_listener(Variant::Delta).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_wanted_by_a_watch_and_the_manager_stays_until_neither_wants_it() {
    let server = Killable::start(|s| cascade(s, "l1", "r1", &["a"])).await;
    let client = client(&[server.uri()], Variant::Sotw, Duration::from_millis(200));
    let mut raw = client.watch(CDS, "a").unwrap();
    let mut config = client.watch_listener("l1").unwrap();
    next_config(&mut config, "cascade").await;
    // A second configuration watch of the listener starts from the one delivered.
    let mut second = client.watch_listener("l1").unwrap();
    let (again, _) = next_config(&mut second, "second watch").await;
    assert_eq!(again.status, Ok(()));
    drop(second);
    drop(config);
    until_unsubscribed(
        &client,
        "config dropped",
        &[(LDS, "l1"), (RDS, "r1"), (EDS, "a")],
    )
    .await;
    assert!(
        subscribed(&client, CDS, "a").await,
        "the watch still wants a"
    );
    server.update(|s| s.set(CDS, "a", support::body("a", "raw")).unwrap());
    support::until(&mut raw, "a still watched", changed_to("a", "raw")).await;
    drop(raw);
    until_unsubscribed(&client, "watch dropped", &[(CDS, "a")]).await;
    client.shutdown();
}

async fn primary_lost_and_back(variant: Variant) {
    let label = format!("{variant:?}");
    let mut primary = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a"]);
        cascade(s, "l2", "r2", &["p"]);
    })
    .await;
    // The fallback lacks l1 altogether and has l2 otherwise.
    let fallback = Killable::start(|s| cascade(s, "l2", "r2", &["f"])).await;
    let client = client(
        &[primary.uri(), fallback.uri()],
        variant,
        Duration::from_millis(300),
    );
    let mut w1 = client.watch_listener("l1").unwrap();
    let (c1, _) = next_config(&mut w1, &label).await;
    assert_eq!(clusters(&c1), [ok("a")], "{label}");

    // The primary goes away with everything cached: no fallback (gRPC A71), the
    // configuration stays, and the watcher hears of the outage as an error.
    primary.kill().await;
    let (event, before) = until(&mut w1, &label, |e| matches!(e, ConfigEvent::Error { .. })).await;
    assert!(
        matches!(
            &event,
            ConfigEvent::Error {
                resource: None,
                error: WatchError::Unreachable { .. }
            }
        ),
        "{label}: {event:?}"
    );
    assert!(configs(&before).is_empty(), "{label}: {before:#?}");

    // A listener nothing has cached: the fallback serves it; l1 keeps the primary's
    // configuration, though the fallback says l1 does not exist.
    let mut w2 = client.watch_listener("l2").unwrap();
    let (c2, _) = next_config(&mut w2, &label).await;
    assert_eq!(clusters(&c2), [ok("f")], "{label}");
    let during = quiet_for(&mut w1, Duration::from_millis(1200)).await; // past does-not-exist
    assert!(configs(&during).is_empty(), "{label}: {during:#?}");

    // The primary returns: the client reverts; l2 takes the primary's configuration, l1's
    // does not change.
    primary
        .restart(|s| {
            cascade(s, "l1", "r1", &["a"]);
            cascade(s, "l2", "r2", &["p"]);
        })
        .await;
    let (c2, _) = until(
        &mut w2,
        &label,
        |e| matches!(e, ConfigEvent::Changed(c) if c.clusters.iter().any(|c| c.name == "p")),
    )
    .await;
    let ConfigEvent::Changed(c2) = c2 else {
        unreachable!()
    };
    assert_eq!(c2.status, Ok(()), "{label}");
    assert_eq!(clusters(&c2), [ok("p")], "{label}");
    let after = quiet_for(&mut w1, Duration::from_millis(300)).await;
    assert!(configs(&after).is_empty(), "{label}: {after:#?}");
    // And the primary's updates still arrive.
    primary.update(|s| s.set(EDS, "a", endpoints_body("a", 8500)).unwrap());
    let (c1, _) = next_config(&mut w1, &label).await;
    assert_eq!(c1.status, Ok(()), "{label}");
    assert!(c1.failed.is_empty(), "{label}: {:?}", c1.failed);
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_lost_and_back_sotw() {
    primary_lost_and_back(Variant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_lost_and_back_delta() {
    primary_lost_and_back(Variant::Delta).await;
}

async fn envoy_shape(variant: Variant) {
    let label = format!("{variant:?}");
    let server = Killable::start(|s| {
        cascade(s, "l1", "r1", &["a"]);
        cascade(s, "l2", "r2", &["b"]);
    })
    .await;
    let client = client(&[server.uri()], variant, Duration::from_millis(200));
    // A plain watch of one listener first: the wildcard joins a type already answered.
    let mut raw = client.watch(LDS, "l1").unwrap();
    support::until(&mut raw, &label, |e| {
        matches!(e, xds_sansio_tonic::client::WatchEvent::Changed { .. })
    })
    .await;
    let mut all = client.watch_all_config().unwrap();
    let (first, _) = next_config(&mut all, &label).await;
    let (second, _) = next_config(&mut all, &label).await;
    assert_eq!(
        (first.name.as_str(), second.name.as_str()),
        ("l1", "l2"),
        "{label}"
    );
    assert_eq!(clusters(&first), [ok("a")], "{label}");
    assert_eq!(clusters(&second), [ok("b")], "{label}");

    // A listener removed is delivered as not existing.
    server.update(|s| s.remove(LDS, "l2").unwrap());
    let (gone, _) = next_config(&mut all, &label).await;
    assert_eq!(gone.name, "l2", "{label}");
    assert_eq!(
        gone.status,
        Err(Failure::DoesNotExist(ResourceKey::new(LDS, "l2"))),
        "{label}"
    );
    // Dropped: the wildcards go; the plain watch keeps l1.
    drop(all);
    until_unsubscribed(&client, &label, &[(RDS, "r1"), (CDS, "a"), (CDS, "b")]).await;
    assert!(subscribed(&client, LDS, "l1").await, "{label}");
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_shape_sotw() {
    envoy_shape(Variant::Sotw).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_shape_delta() {
    envoy_shape(Variant::Delta).await;
}
