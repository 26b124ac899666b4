//! The manager alone, fed the events a client would emit.

use super::*;
use crate::refs::build::body_with_refs;
use crate::text::SharedStr;
use crate::types::{ENDPOINT, ROUTE};
use alloc::vec;

const L: &str = LISTENER.type_url;
const R: &str = ROUTE.type_url;
const C: &str = CLUSTER.type_url;
const E: &str = ENDPOINT.type_url;

fn upsert(type_url: &str, name: &str, refs: &[(&str, &str)]) -> ClientEvent {
    ClientEvent::Upserted {
        type_url: SharedStr::from(type_url),
        name: SharedStr::from(name),
        version: SharedStr::from("1"),
        body: body_with_refs(type_url, name, refs, ""),
        aliases: Vec::new(),
    }
}

fn dne(type_url: &str, name: &str) -> ClientEvent {
    ClientEvent::DoesNotExist {
        type_url: SharedStr::from(type_url),
        name: SharedStr::from(name),
    }
}

fn commands(deps: &mut DependencyManager) -> Vec<Command> {
    core::iter::from_fn(|| deps.poll_command()).collect()
}

fn sub(type_url: &'static str, names: &[&str]) -> Command {
    Command::Subscribe {
        type_url,
        names: names.iter().map(|n| String::from(*n)).collect(),
    }
}

fn unsub(type_url: &'static str, names: &[&str]) -> Command {
    Command::Unsubscribe {
        type_url,
        names: names.iter().map(|n| String::from(*n)).collect(),
    }
}

fn now(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

/// Listener l -> route r -> clusters a, b -> endpoints a, b.
fn cascade(deps: &mut DependencyManager) {
    deps.watch_listener(now(0), "l").unwrap();
    assert_eq!(commands(deps), [sub(L, &["l"])]);
    deps.handle_event(now(1), &upsert(L, "l", &[(R, "r")]));
    assert_eq!(commands(deps), [sub(R, &["r"])]);
    deps.handle_event(now(1), &upsert(R, "r", &[(C, "a"), (C, "b")]));
    assert_eq!(commands(deps), [sub(C, &["a", "b"])]);
    deps.handle_event(now(1), &upsert(C, "a", &[(E, "a")]));
    deps.handle_event(now(1), &upsert(C, "b", &[(E, "b")]));
    assert_eq!(commands(deps), [sub(E, &["a"]), sub(E, &["b"])]);
    assert_eq!(deps.poll_snapshot(), None, "endpoints still missing");
    deps.handle_event(now(1), &upsert(E, "a", &[]));
    assert_eq!(deps.poll_snapshot(), None);
    deps.handle_event(now(1), &upsert(E, "b", &[]));
}

#[test]
fn cascade_emits_one_snapshot_when_complete() {
    let mut deps = DependencyManager::new(DepsConfig::default());
    cascade(&mut deps);
    let snapshot = deps.poll_snapshot().expect("complete");
    assert_eq!(snapshot.generation, 1);
    assert_eq!(snapshot.changed.len(), 6);
    assert!(snapshot.failed.is_empty());
    assert_eq!(deps.poll_snapshot(), None);
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()));
    assert_eq!(config.resources.len(), 6);
    let leaves: Vec<_> = config.clusters.iter().map(|c| c.leaves.clone()).collect();
    assert_eq!(leaves, [Ok(vec!["a".into()]), Ok(vec!["b".into()])]);
}

#[test]
fn route_switch_unsubscribes_after_the_grace_and_flip_back_does_not_churn() {
    let mut deps = DependencyManager::new(DepsConfig::default());
    cascade(&mut deps);
    deps.poll_snapshot();
    // r now names a and c: c is subscribed, b waits for the grace.
    deps.handle_event(now(10), &upsert(R, "r", &[(C, "a"), (C, "c")]));
    assert_eq!(commands(&mut deps), [sub(C, &["c"])]);
    assert_eq!(deps.poll_snapshot(), None, "c missing");
    assert_eq!(deps.poll_timeout(), Some(now(40)));
    deps.handle_event(now(11), &upsert(C, "c", &[(E, "c")]));
    assert_eq!(commands(&mut deps), [sub(E, &["c"])]);
    deps.handle_event(now(11), &upsert(E, "c", &[]));
    let snapshot = deps.poll_snapshot().unwrap();
    assert!(snapshot.changed.contains(&ResourceKey::new(C, "b")));
    // b back within the grace: nothing to subscribe, nothing dropped.
    deps.handle_event(now(20), &upsert(R, "r", &[(C, "a"), (C, "b"), (C, "c")]));
    assert_eq!(commands(&mut deps), []);
    assert!(
        deps.poll_snapshot().is_some(),
        "b and its endpoints are held"
    );
    deps.handle_timeout(now(40));
    assert_eq!(commands(&mut deps), []);
    // c leaves for good: unsubscribed with its endpoints after 30 s.
    deps.handle_event(now(50), &upsert(R, "r", &[(C, "a"), (C, "b")]));
    deps.handle_timeout(now(79));
    assert_eq!(commands(&mut deps), []);
    deps.handle_timeout(now(80));
    assert_eq!(commands(&mut deps), [unsub(C, &["c"]), unsub(E, &["c"])]);
}

#[test]
fn missing_cluster_fails_only_that_cluster_and_missing_route_fails_the_listener() {
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(now(0), "l").unwrap();
    deps.handle_event(now(1), &upsert(L, "l", &[(R, "r")]));
    deps.handle_event(now(1), &upsert(R, "r", &[(C, "a"), (C, "gone")]));
    deps.handle_event(now(1), &upsert(C, "a", &[]));
    assert_eq!(deps.poll_snapshot(), None);
    assert_eq!(
        deps.waiting(),
        [(ResourceKey::new(C, "gone"), vec![ResourceKey::new(R, "r")])]
    );
    deps.handle_event(now(16), &dne(C, "gone"));
    let snapshot = deps.poll_snapshot().unwrap();
    assert_eq!(
        snapshot.failed,
        [(
            ResourceKey::new(C, "gone"),
            Failure::DoesNotExist(ResourceKey::new(C, "gone"))
        )]
    );
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()));
    assert_eq!(
        config.clusters[1].leaves,
        Err(Failure::DoesNotExist(ResourceKey::new(C, "gone")))
    );
    // The route goes away: the listener fails.
    deps.handle_event(now(20), &dne(R, "r"));
    assert!(deps.poll_snapshot().is_some());
    let config = deps.config("l").unwrap();
    assert_eq!(
        config.status,
        Err(Failure::DoesNotExist(ResourceKey::new(R, "r")))
    );
}

#[test]
fn aggregate_cycle_and_depth_are_failures_and_a_dead_cycle_is_dropped() {
    let mut deps = DependencyManager::new(DepsConfig {
        unsubscribe_grace: Duration::ZERO,
    });
    deps.watch_listener(now(0), "l").unwrap();
    deps.handle_event(now(0), &upsert(L, "l", &[(R, "r")]));
    deps.handle_event(now(0), &upsert(R, "r", &[(C, "agg")]));
    deps.handle_event(now(0), &upsert(C, "agg", &[(C, "x")]));
    deps.handle_event(now(0), &upsert(C, "x", &[(C, "agg")]));
    commands(&mut deps);
    assert!(deps.poll_snapshot().is_some(), "a cycle is complete");
    let config = deps.config("l").unwrap();
    assert_eq!(
        config.clusters[0].leaves,
        Err(Failure::AggregateCycle {
            cluster: "agg".into()
        })
    );
    // The route stops naming agg: the cycle is nobody's, both leave.
    deps.handle_event(now(1), &upsert(R, "r", &[]));
    assert_eq!(commands(&mut deps), [unsub(C, &["agg", "x"])]);
    // A chain deeper than 16.
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(now(0), "l").unwrap();
    deps.handle_event(now(0), &upsert(L, "l", &[(R, "r")]));
    deps.handle_event(now(0), &upsert(R, "r", &[(C, "c0")]));
    for i in 0..20 {
        let next = alloc::format!("c{}", i + 1);
        deps.handle_event(now(0), &upsert(C, &alloc::format!("c{i}"), &[(C, &next)]));
    }
    deps.handle_event(now(0), &upsert(C, "c20", &[]));
    assert!(deps.poll_snapshot().is_some());
    let config = deps.config("l").unwrap();
    assert_eq!(
        config
            .clusters
            .iter()
            .find(|c| c.name == "c0")
            .unwrap()
            .leaves,
        Err(Failure::AggregateTooDeep {
            cluster: "c0".into()
        })
    );
    assert_eq!(
        config
            .clusters
            .iter()
            .find(|c| c.name == "c10")
            .unwrap()
            .leaves,
        Ok(vec!["c20".into()])
    );
}

#[test]
fn held_resource_survives_errors_and_nacks() {
    let mut deps = DependencyManager::new(DepsConfig::default());
    cascade(&mut deps);
    deps.poll_snapshot();
    deps.handle_event(
        now(5),
        &ClientEvent::ResourceError {
            type_url: SharedStr::from(C),
            name: SharedStr::from("a"),
            code: 14,
            message: "unavailable".into(),
        },
    );
    assert_eq!(deps.poll_snapshot(), None, "nothing changed");
    assert_eq!(deps.config("l").unwrap().status, Ok(()));
}

#[test]
fn envoy_shape_wildcards_and_absent_names() {
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_all(now(0));
    assert_eq!(
        commands(&mut deps),
        [
            Command::SubscribeAll { type_url: C },
            Command::SubscribeAll { type_url: L }
        ]
    );
    deps.handle_event(now(1), &upsert(C, "a", &[(E, "a")]));
    deps.handle_event(now(1), &ClientEvent::Ready { type_url: C.into() });
    assert_eq!(commands(&mut deps), [sub(E, &["a"])]);
    deps.handle_event(now(1), &upsert(L, "l", &[(R, "r")]));
    deps.handle_event(now(1), &ClientEvent::Ready { type_url: L.into() });
    assert_eq!(commands(&mut deps), [sub(R, &["r"])]);
    deps.handle_event(now(1), &upsert(R, "r", &[(C, "a"), (C, "nowhere")]));
    deps.handle_event(now(1), &upsert(E, "a", &[]));
    let snapshot = deps
        .poll_snapshot()
        .expect("complete: nowhere is absent from CDS");
    assert_eq!(
        snapshot.failed,
        [(
            ResourceKey::new(C, "nowhere"),
            Failure::DoesNotExist(ResourceKey::new(C, "nowhere"))
        )]
    );
    assert_eq!(
        deps.roots(),
        [ResourceKey::new(C, "a"), ResourceKey::new(L, "l")]
    );
}

#[test]
fn batched_client_changes_resolve_the_same_cascade() {
    use crate::client::{ClientConfig, EventShape};
    use crate::message::{Response, Transport, Variant};
    use crate::pb::discovery::DiscoveryResponse;
    use crate::pb::google::protobuf::Any;
    let mut config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, Default::default());
    config.event_shape = EventShape::Batched;
    let mut client = Client::new(config);
    client.connected(now(0));
    let mut deps = DependencyManager::new(DepsConfig::default());
    deps.watch_listener(now(0), "l").unwrap();
    let answer = |type_url: &str, resources: &[(&str, &[(&str, &str)])]| {
        Response::Sotw(DiscoveryResponse {
            version_info: "1".into(),
            resources: resources
                .iter()
                .map(|(name, refs)| Any {
                    type_url: type_url.into(),
                    value: body_with_refs(type_url, name, refs, ""),
                })
                .collect(),
            type_url: type_url.into(),
            nonce: "n".into(),
            ..DiscoveryResponse::default()
        })
    };
    let mut batches = 0;
    let mut pump = |client: &mut Client, deps: &mut DependencyManager| {
        while let Some(command) = deps.poll_command() {
            command.apply_to(client).unwrap();
        }
        while client.poll_request(now(1)).is_some() {}
        while let Some(event) = client.poll_event() {
            match &event {
                ClientEvent::Changed { type_url, changes } => {
                    batches += 1;
                    deps.handle_changes(now(1), client, type_url, changes)
                }
                event => deps.handle_event(now(1), event),
            }
        }
        while let Some(command) = deps.poll_command() {
            command.apply_to(client).unwrap();
        }
    };
    pump(&mut client, &mut deps);
    client.handle_response(now(1), answer(L, &[("l", &[(R, "r")])]));
    pump(&mut client, &mut deps);
    client.handle_response(now(1), answer(R, &[("r", &[(C, "a"), (C, "b")])]));
    pump(&mut client, &mut deps);
    client.handle_response(now(1), answer(C, &[("a", &[(E, "a")]), ("b", &[(E, "b")])]));
    pump(&mut client, &mut deps);
    assert_eq!(deps.poll_snapshot(), None, "endpoints still missing");
    client.handle_response(now(1), answer(E, &[("a", &[]), ("b", &[])]));
    pump(&mut client, &mut deps);
    assert_eq!(batches, 4, "one batch per response");
    let snapshot = deps.poll_snapshot().expect("complete");
    assert_eq!(snapshot.changed.len(), 6);
    let config = deps.config("l").unwrap();
    assert_eq!(config.status, Ok(()));
    assert_eq!(config.resources.len(), 6);
}
