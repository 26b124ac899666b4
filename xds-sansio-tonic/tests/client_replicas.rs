//! The client driver (`XdsClient`) with a bootstrap that lists replicas of one management
//! server (the `replicas` extension of a server entry): three servers with the same content
//! on 127.0.0.1. The session draws the first replica from the client's seed, so clients
//! spread over them; when the replica in use is killed the client moves to the next one
//! and, speaking incremental xDS or SotW wildcard, is sent nothing it holds.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::*;
use xds_sansio::server::ResourceStore;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Request, Response, Variant};
use xds_sansio_tonic::call::Tap;
use xds_sansio_tonic::client::{Bootstrap, XdsClient};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

fn fill(s: &mut ResourceStore) {
    s.set(CDS, "c1", body("c1", "a")).unwrap();
    s.set(CDS, "c2", body("c2", "a")).unwrap();
    s.set(EDS, "c1", body("c1", "e1")).unwrap();
}

/// Counts the resources the client receives.
#[derive(Default)]
struct Received(AtomicU64);

impl Tap for Received {
    fn request(&self, _: u64, _: &Request) {}
    fn response(&self, _: u64, response: &Response) {
        let n = match response {
            Response::Sotw(r) => r.resources.len(),
            Response::Delta(r) => r.resources.len(),
        };
        self.0.fetch_add(n as u64, Ordering::Relaxed);
    }
}

fn bootstrap(servers: &[Killable]) -> Bootstrap {
    let uris: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
    let json = format!(
        r#"{{"xds_servers": [{{"server_uri": {}, "channel_creds": [{{"type": "insecure"}}], "replicas": [{}]}}],
            "node": {{"id": "replica-client"}}}}"#,
        uris[0],
        uris[1..].join(", ")
    );
    Bootstrap::from_json(&json).unwrap()
}

/// The index of the one server with a stream open (bounded wait).
async fn in_use(servers: &[Killable], not: Option<usize>) -> usize {
    let deadline = Instant::now() + STEP;
    loop {
        let open: Vec<usize> = (0..servers.len())
            .filter(|&i| Some(i) != not)
            .filter(|&i| {
                servers[i]
                    .server
                    .as_ref()
                    .is_some_and(|s| s.stream_count() > 0)
            })
            .collect();
        if open.len() == 1 {
            return open[0];
        }
        assert!(Instant::now() < deadline, "streams open on {open:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_spread_over_replicas_and_move_on_without_resends() {
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(Killable::start(fill).await);
    }

    // Different seeds start on different replicas (the session's draw).
    let mut first = std::collections::BTreeSet::new();
    for seed in 0..6 {
        let client = XdsClient::builder(bootstrap(&servers))
            .backoff_seed(seed)
            .build()
            .unwrap();
        let mut all = client.watch_all(CDS).unwrap();
        until(&mut all, "spread", changed_to("c1", "a")).await;
        first.insert(in_use(&servers, None).await);
        client.shutdown();
        let deadline = Instant::now() + STEP;
        while servers
            .iter()
            .any(|s| s.server.as_ref().is_some_and(|s| s.stream_count() > 0))
        {
            assert!(Instant::now() < deadline, "the client's stream closes");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    assert_eq!(first.len(), 3, "six seeds started on {first:?}");

    // The replica in use dies: the client moves on and is sent nothing it holds.
    for variant in [Variant::Delta, Variant::Sotw] {
        let received = Arc::new(Received::default());
        let client = XdsClient::builder(bootstrap(&servers))
            .variant(variant)
            .backoff_seed(1)
            .tap(received.clone())
            .build()
            .unwrap();
        let mut all = client.watch_all(CDS).unwrap();
        until(&mut all, "before", changed_to("c2", "a")).await;
        let before = in_use(&servers, None).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let held = received.0.load(Ordering::Relaxed);
        servers[before].kill().await;
        let after = in_use(&servers, Some(before)).await;
        assert_ne!(after, before);
        // The new stream has been answered (or deliberately not): its server saw the ACK
        // state settle; nothing arrived.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let moved = quiet(&mut all, Duration::from_millis(100)).await;
        assert!(moved.is_empty(), "{variant:?}: {moved:?}");
        assert_eq!(
            received.0.load(Ordering::Relaxed),
            held,
            "{variant:?}: resources resent after the move"
        );
        // It is live there: an update arrives.
        servers[after].update(|s| s.set(CDS, "c1", body("c1", "b")).unwrap());
        until(&mut all, "after", changed_to("c1", "b")).await;
        client.shutdown();
        servers[after].update(|s| s.set(CDS, "c1", body("c1", "a")).unwrap());
        servers[before].restart(fill).await;
    }
}
