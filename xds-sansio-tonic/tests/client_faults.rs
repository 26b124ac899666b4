//! Fault tests of the client driver on loopback, each bounded and self-stopping: the
//! primary killed and restarted (fallback only when something is missing, revert on its
//! return, the cache kept, no false does-not-exist), a server that stalls (detected by
//! HTTP/2 keepalive), servers that send garbage (gRPC frames that do not decode, bytes
//! that are not HTTP/2), and 100 clients restarted together spreading their reconnects.

mod support;

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use support::*;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::CLUSTER;
use xds_sansio::Request;
use xds_sansio_tonic::client::{
    BackoffConfig, Bootstrap, ManagementServer, Watch, WatchError, WatchEvent, XdsClient,
};
use xds_sansio_tonic::{Callbacks, StreamInfo};

const CDS: &str = CLUSTER.type_url;

fn fast() -> BackoffConfig {
    {
        let mut c = BackoffConfig::default();
        c.initial = Duration::from_millis(100);
        c.max = Duration::from_secs(1);
        c.min_connect_timeout = Duration::from_secs(1);
        c
    }
}

fn bootstrap(uris: &[String]) -> Bootstrap {
    let mut b = Bootstrap::single(
        uris[0].clone(),
        Node {
            id: "faults".into(),
            ..Node::default()
        },
    );
    b.servers = uris
        .iter()
        .map(|u| ManagementServer::insecure(u.clone()))
        .collect();
    b
}

fn client(uris: &[String]) -> XdsClient {
    XdsClient::builder(bootstrap(uris))
        .backoff(fast())
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(1)))
        .build()
        .unwrap()
}

fn no_dne(label: &str, events: &[WatchEvent]) {
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, WatchEvent::DoesNotExist { .. })),
        "{label}: a false does-not-exist: {events:#?}"
    );
}

async fn fallback_in_use(client: &XdsClient, want: bool) {
    let deadline = Instant::now() + STEP;
    loop {
        let servers = client.servers().await;
        if servers.get(1).is_some_and(|s| s.in_use == want) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "fallback in use should be {want}: {servers:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Collects what the watch received while `f` runs.
async fn drain(w: &mut Watch) -> Vec<WatchEvent> {
    let mut out = Vec::new();
    while let Some(e) = w.try_next() {
        out.push(e);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn primary_killed_falls_back_when_needed_then_reverts() {
    let mut primary = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "p1")).unwrap();
        s.set(CDS, "c2", body("c2", "p2")).unwrap();
    })
    .await;
    let fallback = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "f1")).unwrap();
        s.set(CDS, "c3", body("c3", "f3")).unwrap();
    })
    .await;
    let client = client(&[primary.uri(), fallback.uri()]);
    let mut w1 = client.watch(CDS, "c1").unwrap();
    let mut w2 = client.watch(CDS, "c2").unwrap();
    until(&mut w1, "c1 from the primary", changed_to("c1", "p1")).await;
    until(&mut w2, "c2 from the primary", changed_to("c2", "p2")).await;

    // Killed with everything cached: no fallback (gRPC A71), one connectivity error each.
    primary.kill().await;
    let (event, _) = until(&mut w1, "unreachable", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    assert!(
        matches!(
            event,
            WatchEvent::Error {
                name: None,
                error: WatchError::Unreachable { .. }
            }
        ),
        "{event:?}"
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        fallback.server.as_ref().unwrap().stream_count(),
        0,
        "fell back with nothing missing"
    );
    let mut seen1 = drain(&mut w1).await;
    assert!(
        seen1.iter().all(|e| matches!(e, WatchEvent::Error { .. })),
        "{seen1:?}"
    );

    // Something missing: the next failure falls back; the fallback's c1 does not replace
    // the primary's, and its does-not-exist verdict on c2 does not reach the watcher.
    let mut w3 = client.watch(CDS, "c3").unwrap();
    until(&mut w3, "c3 from the fallback", changed_to("c3", "f3")).await;
    fallback_in_use(&client, true).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // past the 1 s does-not-exist timer
    seen1.extend(drain(&mut w1).await);
    let seen2 = drain(&mut w2).await;
    assert!(
        !seen1
            .iter()
            .any(|e| matches!(e, WatchEvent::Changed { .. })),
        "{seen1:?}"
    );
    no_dne("c1 during fallback", &seen1);
    no_dne("c2 during fallback", &seen2);
    let dump = client.dump().await;
    let c1 = dump
        .iter()
        .find(|d| d.status.name.as_str() == "c1")
        .unwrap();
    assert!(contains(c1.body.as_ref().unwrap(), b"p1"), "{c1:?}");
    assert_eq!(c1.server, primary.uri());
    let c3 = dump
        .iter()
        .find(|d| d.status.name.as_str() == "c3")
        .unwrap();
    assert_eq!(c3.server, fallback.uri());

    // The primary returns: the client reverts to it and closes the fallback.
    primary
        .restart(|s| {
            s.set(CDS, "c1", body("c1", "p1b")).unwrap();
            s.set(CDS, "c2", body("c2", "p2")).unwrap();
            s.set(CDS, "c3", body("c3", "p3")).unwrap();
        })
        .await;
    let (_, before3) = until(&mut w3, "c3 from the primary again", changed_to("c3", "p3")).await;
    let (_, before1) = until(
        &mut w1,
        "c1 changed on the primary",
        changed_to("c1", "p1b"),
    )
    .await;
    fallback_in_use(&client, false).await;
    let deadline = Instant::now() + STEP;
    while fallback.server.as_ref().unwrap().stream_count() > 0 {
        assert!(
            Instant::now() < deadline,
            "the fallback's stream was not closed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    no_dne("c3 across the revert", &before3);
    no_dne("c1 across the revert", &before1);
    no_dne("c2 across the revert", &drain(&mut w2).await);
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_primary_is_noticed_by_keepalive() {
    let primary = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "p1")).unwrap();
        s.set(CDS, "c3", body("c3", "p3")).unwrap();
    })
    .await;
    let proxy = StallProxy::start(primary.addr).await;
    let fallback = Killable::start(|s| {
        s.set(CDS, "c3", body("c3", "f3")).unwrap();
    })
    .await;
    let client = XdsClient::builder(bootstrap(&[proxy.uri(), fallback.uri()]))
        .backoff(fast())
        .keepalive(Duration::from_millis(200), Duration::from_millis(300))
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(2)))
        .build()
        .unwrap();
    let mut w1 = client.watch(CDS, "c1").unwrap();
    until(&mut w1, "c1", changed_to("c1", "p1")).await;
    proxy.stall(true);
    let (event, before) = until(&mut w1, "stall noticed", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    assert!(
        matches!(
            event,
            WatchEvent::Error {
                error: WatchError::Unreachable { .. },
                ..
            }
        ),
        "{event:?}"
    );
    no_dne("c1", &before);
    let mut w3 = client.watch(CDS, "c3").unwrap();
    until(
        &mut w3,
        "c3 from the fallback while stalled",
        changed_to("c3", "f3"),
    )
    .await;
    proxy.stall(false);
    until(
        &mut w3,
        "c3 from the primary once it moves",
        changed_to("c3", "p3"),
    )
    .await;
    fallback_in_use(&client, false).await;
    no_dne("c1 after", &drain(&mut w1).await);
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_servers_back_off_and_fall_back() {
    // gRPC frames that are not DiscoveryResponses, and bytes that are not HTTP/2.
    let grpc_garbage = GarbageServer::start(Bytes::from(vec![0xff; 64])).await;
    let tcp_garbage = Mute::start(Some(b"HTTP/1.1 200 OK\r\n\r\nnot http/2 at all".to_vec())).await;
    for (label, primary) in [
        ("grpc garbage", grpc_garbage.uri()),
        ("tcp garbage", tcp_garbage.uri()),
    ] {
        let fallback = Killable::start(|s| {
            s.set(CDS, "c1", body("c1", "f1")).unwrap();
        })
        .await;
        let client = client(&[primary.clone(), fallback.uri()]);
        let mut w1 = client.watch(CDS, "c1").unwrap();
        let (_, before) = until(&mut w1, label, changed_to("c1", "f1")).await;
        no_dne(label, &before);
        client.shutdown();
    }
    // Backoff, not a tight loop: about log1.6(2 s / 100 ms) attempts in 2 s.
    let before = grpc_garbage.streams.load(Ordering::Relaxed);
    let client = client(&[grpc_garbage.uri()]);
    let mut w = client.watch(CDS, "c1").unwrap();
    let (event, _) = until(&mut w, "a protocol failure", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    // Frames that do not decode end the call with INTERNAL: a broken protocol, told as
    // such (client::session::ending), and retried with backoff all the same.
    assert!(
        matches!(
            event,
            WatchEvent::Error {
                error: WatchError::Protocol { code: 13, .. },
                ..
            }
        ),
        "{event:?}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let attempts = grpc_garbage.streams.load(Ordering::Relaxed) - before;
    assert!((2..=12).contains(&attempts), "{attempts} attempts in 2 s");
    client.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_speaks_http2() {
    let mute = Mute::start(None).await;
    let fallback = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "f1")).unwrap();
    })
    .await;
    let client = XdsClient::builder(bootstrap(&[mute.uri(), fallback.uri()]))
        .backoff(fast())
        .keepalive(Duration::from_millis(200), Duration::from_millis(300))
        .build()
        .unwrap();
    let mut w1 = client.watch(CDS, "c1").unwrap();
    let (_, before) = until(&mut w1, "c1 from the fallback", changed_to("c1", "f1")).await;
    no_dne("mute primary", &before);
    assert!(mute.accepted.load(Ordering::Relaxed) >= 1);
    client.shutdown();
}

/// The time each node's first request reached the server.
#[derive(Default)]
struct FirstRequests(Mutex<HashMap<String, Instant>>);

impl Callbacks for FirstRequests {
    fn request(&self, _: &StreamInfo, request: &Request) {
        if let Request::Sotw(r) = request {
            if let Some(node) = &r.node {
                self.0
                    .lock()
                    .unwrap()
                    .entry(node.id.clone())
                    .or_insert_with(Instant::now);
            }
        }
    }
}

/// 100 clients of one server; the server is killed and restarted; how far apart do the
/// clients come back? Returns (spread, standard deviation) in seconds.
async fn fleet(seed: Option<u64>) -> (f64, f64) {
    const N: usize = 100;
    let first = Arc::new(FirstRequests::default());
    let mut server = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
    })
    .await;
    let mut clients = Vec::new();
    for i in 0..N {
        let mut b = Bootstrap::single(
            server.uri(),
            Node {
                id: format!("n{i}"),
                ..Node::default()
            },
        );
        b.servers[0] = ManagementServer::insecure(server.uri());
        let mut builder = XdsClient::builder(b);
        if let Some(seed) = seed {
            builder = builder.backoff_seed(seed);
        }
        let client = builder.build().unwrap();
        let mut w = client.watch(CDS, "c1").unwrap();
        until(&mut w, "fleet", changed_to("c1", "a")).await;
        clients.push((client, w));
    }
    server.kill().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.callbacks_for_restart(first.clone());
    server
        .restart(|s| {
            s.set(CDS, "c1", body("c1", "a")).unwrap();
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while first.0.lock().unwrap().len() < N {
        assert!(
            Instant::now() < deadline,
            "only {} of {N} came back",
            first.0.lock().unwrap().len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let times: Vec<Instant> = first.0.lock().unwrap().values().copied().collect();
    let t0 = *times.iter().min().unwrap();
    let secs: Vec<f64> = times
        .iter()
        .map(|t| t.duration_since(t0).as_secs_f64())
        .collect();
    let spread = secs.iter().cloned().fold(0.0, f64::max);
    let mean = secs.iter().sum::<f64>() / N as f64;
    let sd = (secs.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / N as f64).sqrt();
    for (c, _) in &clients {
        c.shutdown();
    }
    (spread, sd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_restarted_together_spreads_its_reconnects() {
    let (spread, sd) = fleet(None).await;
    let (lock_spread, lock_sd) = fleet(Some(1)).await;
    eprintln!(
        "100 clients, server killed and restarted: reconnects spread over {:.0} ms (sd {:.0} ms) \
         with OS-seeded jitter; {:.0} ms (sd {:.0} ms) with one fixed seed for all",
        spread * 1e3,
        sd * 1e3,
        lock_spread * 1e3,
        lock_sd * 1e3
    );
    // gRPC's jitter spreads the first retry uniformly over [0.8 s, 1.2 s].
    assert!(spread > 0.25, "spread {spread}");
    assert!(sd > 0.07, "sd {sd}");
    // What is left with one seed is the scheduling of 100 clients on a loaded machine.
    assert!(
        lock_sd < sd,
        "a fixed seed should reconnect closer together: {lock_sd} vs {sd}"
    );
}

/// A server whose authorization refuses the client (PERMISSION_DENIED) is told to the
/// watch as `Refused` with the status, not as unreachable; once it lets the client in,
/// the resource arrives and the watch is told the server is reachable again (issue 29,
/// item 4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_is_typed_and_its_end_is_told() {
    use std::sync::atomic::AtomicBool;
    let allow = Arc::new(AtomicBool::new(false));
    let gate = allow.clone();
    let server = xds_sansio_tonic::XdsServer::builder()
        .body_checks(xds_sansio::server::BodyChecks::Off)
        .authorize(move |_: &xds_sansio_tonic::Peer, _: &Node, group: &str| {
            match gate.load(Ordering::SeqCst) {
                true => Ok(()),
                false => Err(format!("no token for group {group}")),
            }
        })
        .build();
    server
        .update(xds_sansio_tonic::DEFAULT_GROUP, |s| {
            s.set(CDS, "c1", body("c1", "v1"))
        })
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = listener.local_addr().unwrap().to_string();
    let serving = tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    let client = client(&[uri]);
    let mut watch = client.watch(CDS, "c1").unwrap();
    let (refused, before) = until(&mut watch, "a refusal", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    match refused {
        WatchEvent::Error {
            name: None,
            error: WatchError::Refused { code, message, .. },
        } => {
            assert_eq!(code, 7, "PERMISSION_DENIED");
            assert!(message.contains("no token for group"), "{message}");
        }
        other => panic!("not a refusal: {other:?} (before: {before:?})"),
    }
    allow.store(true, Ordering::SeqCst);
    until(&mut watch, "c1 once allowed", changed_to("c1", "v1")).await;
    until(&mut watch, "reachable again", |e| {
        matches!(e, WatchEvent::Reachable { .. })
    })
    .await;
    server.shutdown();
    let _ = serving.await;
}

/// The fail-static cache (issue 29, item 8): what a client was served is on disk; a new
/// client whose server is down starts with it (marked as restored in its dump), and the
/// server's own answer replaces it when it comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_static_start_with_the_server_down() {
    use xds_sansio_tonic::fail_static::CacheDir;
    let dir = std::env::temp_dir().join(format!("xds-fail-static-start-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let with_cache = |uri: String| {
        XdsClient::builder(bootstrap(&[uri]))
            .backoff(fast())
            .fail_static(CacheDir::new(&dir))
            .build()
            .unwrap()
    };
    // A first run is served c1 and writes it down.
    let mut server = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "first")).unwrap();
    })
    .await;
    let first = with_cache(server.uri());
    let mut w = first.watch(CDS, "c1").unwrap();
    until(&mut w, "c1 from the server", changed_to("c1", "first")).await;
    let deadline = Instant::now() + STEP;
    while CacheDir::new(&dir).load().is_empty() {
        assert!(Instant::now() < deadline, "the cache was not written");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((w, first));
    server.kill().await;

    // The next run starts with the server down: the outage, then c1 as the cache held it.
    let second = with_cache(server.uri());
    let mut w = second.watch(CDS, "c1").unwrap();
    let (_, before) = until(&mut w, "c1 from the cache", changed_to("c1", "first")).await;
    assert!(
        before.iter().any(|e| matches!(
            e,
            WatchEvent::Error {
                error: WatchError::Unreachable { .. },
                ..
            }
        )),
        "the outage comes first: {before:?}"
    );
    let dump = second.dump().await;
    assert!(
        dump.iter()
            .any(|e| e.restored && e.status.name.as_str() == "c1"),
        "{dump:?}"
    );

    // The server comes back with another c1: it replaces the cached one.
    server
        .restart(|s| {
            s.set(CDS, "c1", body("c1", "second")).unwrap();
        })
        .await;
    until(
        &mut w,
        "c1 from the server again",
        changed_to("c1", "second"),
    )
    .await;
    let dump = second.dump().await;
    assert!(dump.iter().all(|e| !e.restored), "{dump:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
