//! The session's rules in virtual time, without sockets (the scenarios under
//! `scenarios/client/session/` tell the same stories on the wire).

use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use crate::pb::google::protobuf::Any;

use super::*;
use crate::pb::discovery::DiscoveryResponse;
use crate::types::CLUSTER;
use crate::Response;

fn server(uri: &str) -> ServerEntry {
    ServerEntry::new(uri, "insecure")
}

fn session(bootstrap: BootstrapServers) -> Session {
    Session::new(
        bootstrap,
        SessionConfig::new(Variant::Sotw, Node::default(), 7),
    )
}

/// A Cluster body: field 1 is its name.
fn cluster(name: &str) -> Any {
    let mut body = vec![0x0a, name.len() as u8];
    body.extend_from_slice(name.as_bytes());
    Any {
        type_url: CLUSTER.type_url.into(),
        value: body.into(),
    }
}

fn response(version: &str, names: &[&str]) -> Response {
    Response::Sotw(DiscoveryResponse {
        version_info: version.into(),
        type_url: CLUSTER.type_url.into(),
        nonce: version.into(),
        resources: names.iter().map(|n| cluster(n)).collect(),
        ..Default::default()
    })
}

/// (server, stream) of each command of one kind.
type Streams = Vec<(usize, u64)>;

/// Drains the commands: (connects, closes).
fn drain(s: &mut Session) -> (Streams, Streams) {
    let (mut connects, mut closes) = (Vec::new(), Vec::new());
    while let Some(c) = s.poll_command() {
        match c {
            SessionCommand::Connect { key, stream, .. } => connects.push((key.server.0, stream)),
            SessionCommand::Close { key, stream } => closes.push((key.server.0, stream)),
            _ => {}
        }
    }
    (connects, closes)
}

fn events(s: &mut Session) -> Vec<SessionEvent> {
    core::iter::from_fn(|| s.poll_event()).collect()
}

fn key(server: usize) -> StreamKey {
    StreamKey {
        server: ServerId(server),
        slot: 0,
    }
}

#[test]
fn falls_back_when_missing_then_reverts_on_the_primary_s_first_response() {
    let mut s = session(BootstrapServers::new(vec![server("a"), server("b")]));
    let t = Instant::from_secs;
    s.watch(t(0), 1, CLUSTER.type_url, Some("c1")).unwrap();
    assert_eq!(drain(&mut s).0, vec![(0, 1)]);
    // The primary cannot be reached: c1 is missing, so b is started (A71).
    s.handle_ended(t(1), key(0), 1, &StreamEnd::transport("refused"));
    assert_eq!(drain(&mut s).0, vec![(1, 2)]);
    let ev = events(&mut s);
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::FellBack {
            to: ServerId(1),
            ..
        }
    )));
    let retry = ev.iter().find_map(|e| match e {
        SessionEvent::StreamFailed { retry_in, .. } => Some(*retry_in),
        _ => None,
    });
    // gRPC's first delay, jittered: within [0.8 s, 1.2 s].
    let retry = retry.unwrap();
    assert!(retry >= Duration::from_millis(800) && retry <= Duration::from_millis(1200));
    s.handle_connected(t(1), key(1), 2);
    s.handle_response(t(1), key(1), 2, response("b1", &["c1"]));
    drain(&mut s);
    assert!(events(&mut s).iter().any(|e| matches!(
        e,
        SessionEvent::Watch { id: 1, event: WatchEvent::Changed { version, .. } } if version == "b1"
    )));
    // The primary's backoff runs out: it is tried again, answers, and b is closed.
    let at = s.poll_timeout().unwrap();
    assert!(at <= t(1).saturating_add(retry));
    s.handle_timeout(at);
    assert_eq!(drain(&mut s).0, vec![(0, 3)]);
    s.handle_connected(at, key(0), 3);
    s.handle_response(at, key(0), 3, response("a1", &["c1"]));
    let (_, closes) = drain(&mut s);
    assert_eq!(closes, vec![(1, 2)]);
    let ev = events(&mut s);
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::Reverted {
            to: ServerId(0),
            ..
        }
    )));
    assert!(ev.iter().any(|e| matches!(
        e,
        SessionEvent::Watch { id: 1, event: WatchEvent::Changed { version, .. } } if version == "a1"
    )));
    assert!(s
        .servers()
        .iter()
        .all(|u| u.in_use == (u.server_uri == "a")));
}

#[test]
fn no_fallback_when_nothing_is_missing_the_outage_is_told_once() {
    let mut s = session(BootstrapServers::new(vec![server("a"), server("b")]));
    let t = Instant::from_secs;
    s.watch(t(0), 1, CLUSTER.type_url, Some("c1")).unwrap();
    drain(&mut s);
    s.handle_connected(t(0), key(0), 1);
    s.handle_response(t(0), key(0), 1, response("a1", &["c1"]));
    drain(&mut s);
    events(&mut s);
    // Ends after a response: reconnects at once, no failure.
    s.handle_ended(t(1), key(0), 1, &StreamEnd::transport("gone"));
    assert_eq!(drain(&mut s).0, vec![(0, 2)]);
    // Fails before answering: c1 is held, so no fallback; watchers told once.
    s.handle_ended(t(1), key(0), 2, &StreamEnd::transport("refused"));
    assert!(drain(&mut s).0.is_empty());
    let unreachable = |ev: &[SessionEvent]| {
        ev.iter()
            .filter(|e| {
                matches!(
                    e,
                    SessionEvent::Watch {
                        event: WatchEvent::Error {
                            error: WatchError::Unreachable { .. },
                            ..
                        },
                        ..
                    }
                )
            })
            .count()
    };
    assert_eq!(unreachable(&events(&mut s)), 1);
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    assert_eq!(drain(&mut s).0, vec![(0, 3)]);
    s.handle_ended(at, key(0), 3, &StreamEnd::transport("refused"));
    assert_eq!(unreachable(&events(&mut s)), 0);
}

#[test]
fn federation_routes_xdstp_names_to_their_authority_and_refuses_unknown_ones() {
    let bootstrap =
        BootstrapServers::new(vec![server("a")]).with_authority("fed.example", vec![server("f")]);
    let mut s = session(bootstrap);
    let t = Instant::ZERO;
    let fed = "xdstp://fed.example/envoy.config.cluster.v3.Cluster/c2";
    s.watch(t, 1, CLUSTER.type_url, Some("c1")).unwrap();
    s.watch(t, 2, CLUSTER.type_url, Some(fed)).unwrap();
    let (connects, _) = drain(&mut s);
    assert_eq!(connects, vec![(0, 1), (1, 2)]);
    assert_eq!(
        s.server(ServerId(1)).map(|c| c.server_uri.as_str()),
        Some("f")
    );
    assert_eq!(
        s.watch(
            t,
            3,
            CLUSTER.type_url,
            Some("xdstp://other/envoy.config.cluster.v3.Cluster/x")
        ),
        Err(WatchRefused::UnknownAuthority(String::from("other")))
    );
    assert_eq!(
        s.watch(t, 1, CLUSTER.type_url, Some("c9")),
        Err(WatchRefused::DuplicateId(1))
    );
    // The federated server fails: only its authority's watch hears of it.
    s.handle_ended(t, key(1), 2, &StreamEnd::transport("refused"));
    let told: Vec<u64> = events(&mut s)
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Watch {
                id,
                event: WatchEvent::Error { .. },
            } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(told, vec![2]);
}

#[test]
fn listener_names_from_templates_percent_encode_for_xdstp_only() {
    assert_eq!(listener_name("%s", "svc example:80"), "svc example:80");
    let template = default_listener_template("fed.example");
    assert_eq!(
        listener_name(&template, "svc example:80"),
        "xdstp://fed.example/envoy.config.listener.v3.Listener/svc%20example:80"
    );
}

#[test]
fn a_fleet_spreads_over_a_servers_replicas() {
    // 300 clients with their own seeds (as the adapter draws them from the OS), one server
    // with two replicas: each address gets about a third of the first connections.
    let mut first: BTreeMap<String, usize> = BTreeMap::new();
    for seed in 0..300 {
        let top = server("top").with_replicas(vec!["r1".into(), "r2".into()]);
        let mut s = Session::new(
            BootstrapServers::new(vec![top]),
            SessionConfig::new(Variant::Sotw, Node::default(), seed),
        );
        s.watch(Instant::ZERO, 1, CLUSTER.type_url, Some("c1"))
            .unwrap();
        while let Some(c) = s.poll_command() {
            if let SessionCommand::Connect { address, .. } = c {
                *first.entry(address).or_default() += 1;
            }
        }
    }
    assert_eq!(first.len(), 3, "{first:?}");
    assert!(
        first.values().all(|&n| (70..=130).contains(&n)),
        "{first:?}"
    );
}

#[test]
fn replica_addresses_wrap_and_a_server_without_replicas_keeps_its_uri() {
    let top = server("top").with_replicas(vec!["r1".into(), "r2".into()]);
    assert_eq!(top.address_count(), 3);
    let all: Vec<&str> = (0..4).map(|i| top.address(i)).collect();
    assert_eq!(all, ["top", "r1", "r2", "top"]);
    let alone = server("alone");
    assert_eq!((alone.address_count(), alone.address(5)), (1, "alone"));
}

fn restored(name: &str, version: &str) -> RestoredResource {
    RestoredResource {
        authority: String::new(),
        type_url: SharedStr::from_static(CLUSTER.type_url),
        name: SharedStr::from(name),
        version: SharedStr::from(version),
        body: cluster(name).value,
    }
}

/// What watch `id` was told, as (kind, name).
fn told(ev: &[SessionEvent], id: u64) -> Vec<(&'static str, String)> {
    ev.iter()
        .filter_map(|e| match e {
            SessionEvent::Watch { id: i, event } if *i == id => Some(match event {
                WatchEvent::Changed { name, .. } => ("changed", name.to_string()),
                WatchEvent::DoesNotExist { name } => ("does-not-exist", name.to_string()),
                WatchEvent::Error { .. } => ("error", String::new()),
                WatchEvent::Reachable { .. } => ("reachable", String::new()),
            }),
            _ => None,
        })
        .collect()
}

#[test]
fn fail_static_serves_what_a_former_run_held_only_while_no_server_ever_answered() {
    let mut s = session(BootstrapServers::new(vec![server("a")]));
    let t = Instant::from_secs;
    // c3 is wanted only through the wildcard.
    s.restore(vec![
        restored("c1", "old"),
        restored("c2", "old"),
        restored("c3", "old"),
    ]);
    s.watch(t(0), 1, CLUSTER.type_url, Some("c1")).unwrap();
    s.watch(t(0), 2, CLUSTER.type_url, None).unwrap();
    drain(&mut s);
    // Nothing restored is served while the server may still answer.
    assert!(told(&events(&mut s), 1).is_empty());
    // Every server failed before any answered: the restored resources are served, marked
    // as such in the dump.
    s.handle_ended(t(1), key(0), 1, &StreamEnd::transport("refused"));
    let ev = events(&mut s);
    assert_eq!(
        told(&ev, 1),
        [("error", String::new()), ("changed", "c1".into())]
    );
    let mut wildcard = told(&ev, 2);
    wildcard.sort();
    assert_eq!(
        wildcard[..2],
        [("changed", "c1".into()), ("changed", "c2".into())]
    );
    let dump = s.dump();
    assert!(dump.iter().all(|e| e.restored), "{dump:?}");
    assert_eq!(s.served().len(), 3);
    // A new watch starts with what is restored.
    s.watch(t(1), 3, CLUSTER.type_url, Some("c2")).unwrap();
    assert_eq!(told(&events(&mut s), 3), [("changed", "c2".into())]);
    // The server answers with c1 only: c1 is replaced at once, c2 stays in use until the
    // type is ready (its does-not-exist timer says the server does not have it), then goes.
    let at = s.poll_timeout().unwrap();
    s.handle_timeout(at);
    drain(&mut s);
    s.handle_connected(at, key(0), 2);
    s.handle_response(at, key(0), 2, response("new", &["c1"]));
    drain(&mut s);
    let ev = events(&mut s);
    assert_eq!(
        told(&ev, 1),
        [("changed", "c1".into()), ("reachable", String::new())]
    );
    assert_eq!(told(&ev, 3), [("reachable", String::new())]);
    let dne = s.poll_timeout().unwrap();
    s.handle_timeout(dne);
    drain(&mut s);
    let ev = events(&mut s);
    assert_eq!(told(&ev, 3), [("does-not-exist", "c2".into())]);
    // The type is ready now: c3, which the server's answer left out, goes too.
    assert!(
        told(&ev, 2).contains(&("does-not-exist", "c3".into())),
        "{ev:?}"
    );
    assert!(s.dump().iter().all(|e| !e.restored));
    let at = dne;
    // Once a server has answered, nothing is restored again, whatever fails later.
    s.restore(vec![restored("c9", "old")]);
    s.handle_ended(at, key(0), 2, &StreamEnd::transport("gone"));
    drain(&mut s);
    s.handle_ended(at, key(0), 3, &StreamEnd::transport("refused"));
    s.watch(at, 4, CLUSTER.type_url, Some("c9")).unwrap();
    assert!(told(&events(&mut s), 4).is_empty());
}

#[test]
fn a_server_s_retry_hint_stretches_the_backoff_within_its_bound() {
    let retry_of = |end: &StreamEnd| {
        let mut s = session(BootstrapServers::new(vec![server("a")]));
        s.watch(Instant::ZERO, 1, CLUSTER.type_url, Some("c1"))
            .unwrap();
        drain(&mut s);
        s.handle_ended(Instant::from_secs(1), key(0), 1, end);
        events(&mut s)
            .into_iter()
            .find_map(|e| match e {
                SessionEvent::StreamFailed { retry_in, .. } => Some(retry_in),
                _ => None,
            })
            .unwrap()
    };
    let shed = StreamEnd::status(14, "shed");
    // A hint longer than the backoff (gRPC's first delay, at most 1.2 s) is waited.
    assert_eq!(
        retry_of(&shed.clone().with_retry_after(Duration::from_secs(7))),
        Duration::from_secs(7)
    );
    // A shorter one changes nothing: the backoff still spreads the clients.
    let short = retry_of(&shed.clone().with_retry_after(Duration::from_millis(10)));
    assert!(short >= Duration::from_millis(800), "{short:?}");
    // A hint beyond the backoff's bound waits the bound (120 s by default).
    assert_eq!(
        retry_of(&shed.with_retry_after(Duration::from_secs(86_400))),
        BackoffConfig::default().max
    );
    // A transport failure has no trailers to carry a hint.
    assert_eq!(
        StreamEnd::transport("gone")
            .with_retry_after(Duration::from_secs(7))
            .retry_after(),
        None
    );
}
