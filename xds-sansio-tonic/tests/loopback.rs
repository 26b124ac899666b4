//! Interop over real gRPC: our client (the adapter's client driver) and our server (the
//! adapter's `XdsServer`), talking HTTP/2 on 127.0.0.1, in all four variants
//! (SotW and delta, ADS and per-type streams). Every message is recorded and the checker
//! must find no violation on either side.
//!
//! The story: first fetch of two clusters and one endpoint set; a cluster change; an
//! invalid cluster NACKed (the server holds it and the client keeps the previous one), then
//! fixed; a cluster removal; an endpoint change; the server ends every stream and the
//! clients resume with the versions they hold (nothing re-delivered as a change); an
//! endpoint change on the new streams. Every wait is bounded.
#![cfg(feature = "record")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use xds_sansio::client::{ClientEvent, RemovalReason};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::ResourceStore;
use xds_sansio::time::StdClock;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Client, ClientConfig, Request, Transport, Variant};
use xds_sansio_conformance::check::{check, CheckSide};
use xds_sansio_conformance::transcript::Entry;
use xds_sansio_tonic::call::run_until_stopped;
use xds_sansio_tonic::client::{ManagementServer, StreamCommand};
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const STEP: Duration = Duration::from_secs(10);
const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

/// A Cluster-shaped body: the name in field 1, opaque content in field 2.
fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// The one group this test uses.
struct Server(XdsServer);

impl Server {
    fn update<R>(&self, change: impl FnOnce(&mut ResourceStore) -> R) -> R {
        self.0.update(DEFAULT_GROUP, change)
    }
    fn with_store<R>(&self, read: impl FnOnce(&ResourceStore) -> R) -> R {
        self.0.read(DEFAULT_GROUP, read)
    }
    fn end_streams(&self) {
        self.0.end_streams()
    }
}

struct Harness {
    server: Server,
    recorder: Arc<Recorder>,
    events: mpsc::UnboundedReceiver<ClientEvent>,
    stops: Vec<mpsc::UnboundedSender<StreamCommand>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Reconnects (50 ms pause) until stopped, like an application would.
async fn client_loop(
    mut client: Client,
    uri: String,
    events: mpsc::UnboundedSender<ClientEvent>,
    mut commands: mpsc::UnboundedReceiver<StreamCommand>,
) {
    let mut on_event = move |_: &Client, e: ClientEvent| {
        let _ = events.send(e);
    };
    let server = ManagementServer::insecure(uri);
    let clock = StdClock::new();
    run_until_stopped(&mut client, &server, &clock, &mut commands, &mut on_event).await;
}

impl Harness {
    async fn start(variant: Variant, per_type: bool) -> Harness {
        let recorder = Arc::new(Recorder::new(None));
        let server = XdsServer::builder()
            .callbacks(recorder.clone())
            .body_checks(xds_sansio::server::BodyChecks::Off) // placeholder bodies
            .build();
        let uri = support::loopback::serve_on_loopback(&server).await;
        let server = Server(server);
        server.update(|s| {
            s.set(CDS, "c1", body("c1", "a")).unwrap();
            s.set(CDS, "c2", body("c2", "a")).unwrap();
            s.set(EDS, "c1", body("c1", "e1")).unwrap();
        });
        let node = Node {
            id: "loopback".into(),
            ..Node::default()
        };
        let transports: Vec<(Transport, Vec<&str>)> = if per_type {
            vec![
                (Transport::PerType(CDS.into()), vec![CDS]),
                (Transport::PerType(EDS.into()), vec![EDS]),
            ]
        } else {
            vec![(Transport::Aggregated, vec![CDS, EDS])]
        };
        let (events_tx, events) = mpsc::unbounded_channel();
        let (mut stops, mut tasks) = (Vec::new(), Vec::new());
        for (transport, types) in transports {
            let mut client = Client::new(ClientConfig::new(variant, transport, node.clone()));
            for ty in types {
                let names: &[&str] = if ty == CDS { &["c1", "c2"] } else { &["c1"] };
                client.subscribe(ty, names).unwrap();
                client.set_validator(
                    ty,
                    Box::new(|_: &str, _: &str, b: &Bytes| {
                        if contains(b, b"bad") {
                            Err("content is bad".to_string())
                        } else {
                            Ok(())
                        }
                    }),
                );
            }
            let (tx, rx) = mpsc::unbounded_channel();
            stops.push(tx);
            tasks.push(tokio::spawn(client_loop(
                client,
                uri.clone(),
                events_tx.clone(),
                rx,
            )));
        }
        Harness {
            server,
            recorder,
            events,
            stops,
            tasks,
        }
    }

    /// Waits for an event matching `f`; returns the events seen before it.
    async fn wait(&mut self, what: &str, f: impl Fn(&ClientEvent) -> bool) -> Vec<ClientEvent> {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(STEP, async {
            while let Some(e) = self.events.recv().await {
                if f(&e) {
                    return true;
                }
                seen.push(e);
            }
            false
        })
        .await;
        assert_eq!(found, Ok(true), "waiting for {what}; saw {seen:#?}");
        seen
    }

    fn streams(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .recorder
            .entries()
            .iter()
            .filter_map(|e| match e {
                Entry::Request { stream, .. } => Some(*stream),
                _ => None,
            })
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    async fn stop(self) -> Vec<Entry> {
        for s in &self.stops {
            let _ = s.send(StreamCommand::Stop);
        }
        for t in self.tasks {
            tokio::time::timeout(STEP, t).await.unwrap().unwrap();
        }
        self.recorder.entries()
    }
}

fn upserted(
    ty: &'static str,
    name: &'static str,
    content: &'static str,
) -> impl Fn(&ClientEvent) -> bool {
    move |e| {
        matches!(e, ClientEvent::Upserted { type_url, name: n, body, .. }
            if &**type_url == ty && &**n == name && contains(body, content.as_bytes()))
    }
}

async fn story(variant: Variant, per_type: bool) {
    let mut h = Harness::start(variant, per_type).await;
    let mut first = Vec::new();
    for _ in 0..3 {
        first.extend(
            h.wait("first fetch", |e| matches!(e, ClientEvent::Upserted { .. }))
                .await,
        );
    }

    h.server
        .update(|s| s.set(CDS, "c1", body("c1", "b")).unwrap());
    h.wait("cluster change", upserted(CDS, "c1", "b")).await;

    h.server
        .update(|s| s.set(CDS, "c1", body("c1", "bad")).unwrap());
    h.wait("NACK of the bad cluster", |e| {
        matches!(e, ClientEvent::Nacked { type_url, rejected, .. }
            if &**type_url == CDS && rejected.iter().any(|n| &**n == "c1"))
    })
    .await;
    // The server holds: nothing more for CDS until the store changes again.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let seen = h.server.with_store(|s| s.revision());
    h.server
        .update(|s| s.set(CDS, "c1", body("c1", "c")).unwrap());
    let between = h.wait("fixed cluster", upserted(CDS, "c1", "c")).await;
    assert!(
        !between
            .iter()
            .any(|e| matches!(e, ClientEvent::Nacked { .. })),
        "the rejected version was sent again (store at {seen:?}): {between:#?}"
    );

    h.server.update(|s| s.remove(CDS, "c2"));
    h.wait("cluster removal", |e| {
        matches!(e, ClientEvent::Removed { type_url, name, reason }
            if &**type_url == CDS && &**name == "c2"
                && matches!(reason, RemovalReason::ServerRemoved | RemovalReason::AbsentFromResponse))
    })
    .await;

    h.server
        .update(|s| s.set(EDS, "c1", body("c1", "e2")).unwrap());
    h.wait("endpoint change", upserted(EDS, "c1", "e2")).await;

    // The server ends every stream; the clients reconnect with what they hold.
    let before = h.streams().len();
    h.server.end_streams();
    tokio::time::timeout(STEP, async {
        while h.streams().len() < before * 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the clients reconnect");
    h.server
        .update(|s| s.set(EDS, "c1", body("c1", "e3")).unwrap());
    let after = h
        .wait("endpoint change after reconnect", upserted(EDS, "c1", "e3"))
        .await;
    assert!(
        !after.iter().any(|e| matches!(
            e,
            ClientEvent::Upserted { .. } | ClientEvent::Removed { .. }
        )),
        "a reconnect re-delivered or lost something: {after:#?}"
    );

    let entries = h.stop().await;
    // The first request of each new stream resumes from what the client holds.
    let resumed: Vec<&Request> = entries
        .iter()
        .filter_map(|e| match e {
            Entry::Request {
                stream, request, ..
            } if *stream > before as u64 => Some(request),
            _ => None,
        })
        .collect();
    let cds_resume = resumed
        .iter()
        .find(|r| r.type_url() == CDS)
        .expect("a CDS request on the new stream");
    match cds_resume {
        Request::Sotw(r) => assert!(!r.version_info.is_empty(), "{r:?}"),
        Request::Delta(r) => assert_eq!(
            r.initial_resource_versions.keys().collect::<Vec<_>>(),
            vec!["c1"],
            "{r:?}"
        ),
    }
    // Keep the conversation for inspection (target/tmp/interop-<variant>.jsonl).
    let codec = xds_sansio::codec::json::JsonCodec::new();
    let text: Vec<String> = entries
        .iter()
        .map(|e| xds_sansio_conformance::check::to_jsonl(e, &codec).unwrap())
        .collect();
    let name = format!(
        "interop-{variant:?}-{}.jsonl",
        if per_type { "per-type" } else { "ads" }
    );
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    for side in [CheckSide::Client, CheckSide::Server] {
        let violations = check(&entries, side);
        assert!(
            violations.is_empty(),
            "{side:?} ({}): {violations:#?}",
            path.display()
        );
    }
    assert!(entries.len() > 10, "{entries:#?}");
}

async fn bounded(variant: Variant, per_type: bool) {
    tokio::time::timeout(Duration::from_secs(90), story(variant, per_type))
        .await
        .expect("the story finishes within 90 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_ads() {
    bounded(Variant::Sotw, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_ads() {
    bounded(Variant::Delta, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_per_type() {
    bounded(Variant::Sotw, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_per_type() {
    bounded(Variant::Delta, true).await;
}
