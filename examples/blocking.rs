//! A blocking embedding: std threads and channels only, no async runtime. A server thread
//! owns a `ResourceStore` and a `ServerStream`; a client thread owns a `Client`; they
//! exchange encoded protobuf bytes over channels, as they would over a socket. Each loop
//! blocks on `recv_timeout` until the next message or the state machine's `poll_timeout`.
//!
//! The main thread plays the operator: publishes a cluster and its endpoints, changes the
//! cluster, breaks the stream (the client reconnects and resumes with the versions it
//! holds, so nothing is re-delivered), removes the cluster, and exits.
//!
//! Run: `cargo run --example blocking`

use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::ClientEvent;
use xds_sansio::pb::decode_discovery_response;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::StdClock;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::{Client, ClientConfig, Instant, Request, ResourceStore, Response};
use xds_sansio::{ServerConfig, ServerStream, Transport, Variant};

enum ToServer {
    /// A client opened a stream; responses go to this sender.
    Open(Sender<ToClient>),
    Bytes(Vec<u8>),
    /// The operator changes the store (`None` body: remove).
    Publish(&'static str, String, Option<Bytes>),
    /// The operator breaks the stream.
    Break,
}

enum ToClient {
    Bytes(Vec<u8>),
    Closed,
}

/// How long to block: until `deadline`, or an hour when there is none.
fn wait(clock: &StdClock, deadline: Option<Instant>) -> Duration {
    deadline.map_or(Duration::from_secs(3600), |d| {
        d.saturating_duration_since(clock.now())
    })
}

fn server_thread(inbox: Receiver<ToServer>) {
    let clock = StdClock::new();
    let mut store = ResourceStore::new();
    let mut stream: Option<(ServerStream, Sender<ToClient>)> = None;
    loop {
        let deadline = stream.as_ref().and_then(|(s, _)| s.poll_timeout());
        match inbox.recv_timeout(wait(&clock, deadline)) {
            Ok(ToServer::Open(reply)) => {
                let config = ServerConfig::new(Variant::Sotw, Transport::Aggregated);
                stream = Some((ServerStream::new(config), reply));
            }
            Ok(ToServer::Bytes(bytes)) => {
                if let (Some((s, _)), Ok(r)) = (&mut stream, DiscoveryRequest::decode(&*bytes)) {
                    s.handle_request(clock.now(), Request::Sotw(r));
                }
            }
            Ok(ToServer::Publish(type_url, name, Some(body))) => {
                store.set(type_url, &name, body).expect("valid entry");
            }
            Ok(ToServer::Publish(type_url, name, None)) => {
                store.remove(type_url, &name);
            }
            Ok(ToServer::Break) => {
                if let Some((_, reply)) = stream.take() {
                    let _ = reply.send(ToClient::Closed);
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if let Some((s, _)) = &mut stream {
                    s.handle_timeout(clock.now());
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        }
        // After every input: events, then every response due, in order.
        if let Some((s, reply)) = &mut stream {
            while let Some(event) = s.poll_event() {
                println!("  server: {event:?}");
            }
            while let Some(Response::Sotw(r)) = s.poll_response(clock.now(), &store) {
                let _ = reply.send(ToClient::Bytes(r.encode_to_vec()));
            }
        }
    }
}

fn client_thread(server: Sender<ToServer>, events: Sender<ClientEvent>) {
    let clock = StdClock::new();
    let node = Node {
        id: "blocking-example".into(),
        ..Node::default()
    };
    let mut client = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        node,
    ));
    client.subscribe(CLUSTER.type_url, &["backend"]).unwrap();
    client.subscribe(ENDPOINT.type_url, &["backend"]).unwrap();
    let (tx, mut inbox) = channel();
    let _ = server.send(ToServer::Open(tx));
    client.connected(clock.now());
    loop {
        // After every input: every request due (sent now), then every event.
        while let Some(Request::Sotw(r)) = client.poll_request(clock.now()) {
            let _ = server.send(ToServer::Bytes(r.encode_to_vec()));
        }
        while let Some(event) = client.poll_event() {
            if events.send(event).is_err() {
                return; // the operator is done
            }
        }
        match inbox.recv_timeout(wait(&clock, client.poll_timeout())) {
            Ok(ToClient::Bytes(bytes)) => match decode_discovery_response(Bytes::from(bytes)) {
                Ok(r) => client.handle_response(clock.now(), Response::Sotw(r)),
                Err(e) => eprintln!("  client: undecodable response: {e}"),
            },
            Ok(ToClient::Closed) | Err(RecvTimeoutError::Disconnected) => {
                println!("  client: stream broke, reconnecting");
                client.disconnected(clock.now());
                let (tx, rx) = channel();
                inbox = rx;
                let _ = server.send(ToServer::Open(tx));
                client.connected(clock.now());
            }
            Err(RecvTimeoutError::Timeout) => client.handle_timeout(clock.now()),
        }
    }
}

/// A Cluster-shaped body: field 1 (the name) and some opaque content in field 2.
fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

/// Waits (bounded) for an event matching `what`, printing every event.
fn expect(events: &Receiver<ClientEvent>, what: &str, f: impl Fn(&ClientEvent) -> bool) {
    loop {
        match events.recv_timeout(Duration::from_secs(5)) {
            Ok(event) => {
                println!("client: {event:?}");
                if f(&event) {
                    println!("== {what}");
                    return;
                }
            }
            Err(_) => panic!("timed out waiting for: {what}"),
        }
    }
}

fn main() {
    let (to_server, server_inbox) = channel();
    let (events_tx, events) = channel();
    let server = thread::spawn(move || server_thread(server_inbox));
    let operator = to_server.clone();
    let client = thread::spawn(move || client_thread(to_server, events_tx));
    let publish = |type_url, name: &str, content: Option<&str>| {
        let body = content.map(|c| body(name, c));
        operator
            .send(ToServer::Publish(type_url, name.into(), body))
            .unwrap();
    };
    let upserted = |type_url: &'static str, name: &'static str| {
        move |e: &ClientEvent| {
            matches!(e, ClientEvent::Upserted { type_url: t, name: n, .. }
                if &**t == type_url && &**n == name)
        }
    };

    publish(CLUSTER.type_url, "backend", Some("v1"));
    publish(ENDPOINT.type_url, "backend", Some("127.0.0.1:8080"));
    expect(
        &events,
        "cluster received",
        upserted(CLUSTER.type_url, "backend"),
    );
    expect(
        &events,
        "endpoints received",
        upserted(ENDPOINT.type_url, "backend"),
    );

    publish(CLUSTER.type_url, "backend", Some("v2"));
    expect(
        &events,
        "cluster updated",
        upserted(CLUSTER.type_url, "backend"),
    );

    operator.send(ToServer::Break).unwrap();
    // The client resumes with the versions it holds; the next change is the next event.
    publish(ENDPOINT.type_url, "backend", Some("127.0.0.1:9090"));
    expect(&events, "endpoints updated after the reconnect", |e| {
        matches!(e, ClientEvent::Upserted { type_url, body, .. }
            if &**type_url == ENDPOINT.type_url && body.ends_with(b"9090"))
    });

    publish(CLUSTER.type_url, "backend", None);
    expect(
        &events,
        "cluster removed",
        |e| matches!(e, ClientEvent::Removed { type_url, .. } if &**type_url == CLUSTER.type_url),
    );
    // Both threads block on their channels; returning from main ends them.
    drop((client, server));
    println!("done");
}
