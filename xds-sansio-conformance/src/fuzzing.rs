//! Fuzz target bodies (hidden feature `fuzzing`). They live in the library so they always
//! compile with it; `fuzz/` only wraps them for cargo-fuzz, and `tests/fuzz_corpus.rs`
//! replays the committed corpus through them on stable. Each body checks invariants and
//! panics only when one is broken (a bug of this crate).
//!
//! Session targets read their input as a small program: one opcode byte, then its
//! operands (see [`Op`]), so that seeds can be made from the scenarios ([`encode`]).

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;
use prost::Message;

use crate::testing::{Pair, PairConfig};
use xds_sansio::client::{
    Client, ClientConfig, ClientEvent, EventShape, NackPolicy, VerdictTicket,
};
use xds_sansio::message::{Request, Response, Transport, Variant};
use xds_sansio::name::{ResourceName, XdstpName};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceEntry, ResourceStore, ServerConfig, ServerStream};
use xds_sansio::time::Instant;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER, ROUTE};

/// The types session targets use.
pub const TYPES: [&str; 4] = [
    CLUSTER.type_url,
    ENDPOINT.type_url,
    LISTENER.type_url,
    ROUTE.type_url,
];
/// The names session targets use (the scenarios' names among them).
pub const NAMES: [&str; 8] = ["a", "b", "c", "foo", "bar", "baz", "wc", "*"];

/// Bounds every drain loop: a state machine that keeps producing output is a bug, not a
/// reason to hang the fuzzer.
const DRAIN: usize = 10_000;

/// One operation of a session program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `0, len(u16 LE), bytes`: a message from the peer (a response for client targets,
    /// a request for server targets), encoded.
    Message(Vec<u8>),
    /// `1, type, name`: subscribe (client) or publish a body (server: `type, name, tag`).
    Subscribe(u8, u8),
    /// `2, type, name`: unsubscribe (client) or remove (server).
    Unsubscribe(u8, u8),
    /// `3, centiseconds(u16 LE)`: time passes; timers fire.
    Wait(u16),
    /// `4`: the stream breaks; `5`: it comes back.
    Disconnect,
    /// `5`.
    Connect,
    /// `6, mask`: the verdict on the oldest pending validation (bit i rejects resource i).
    Verdict(u8),
    /// `7, type, on`: deferred validation for a type.
    Defer(u8, u8),
    /// `8, type, name, tag`: a store update (server and pair targets).
    Set(u8, u8, u8),
}

/// Reads the next operation from `data`, or `None` at the end.
fn next_op(data: &mut &[u8]) -> Option<Op> {
    fn take<'a>(data: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        if data.len() < n {
            return None;
        }
        let (head, tail) = data.split_at(n);
        *data = tail;
        Some(head)
    }
    fn byte(data: &mut &[u8]) -> Option<u8> {
        take(data, 1).and_then(|b| b.first().copied())
    }
    fn u16le(data: &mut &[u8]) -> Option<u16> {
        take(data, 2).map(|b| {
            u16::from_le_bytes([
                b.first().copied().unwrap_or(0),
                b.get(1).copied().unwrap_or(0),
            ])
        })
    }
    Some(match byte(data)? % 9 {
        0 => {
            let len = usize::from(u16le(data)?);
            let len = len.min(data.len());
            Op::Message(take(data, len)?.to_vec())
        }
        1 => Op::Subscribe(byte(data)?, byte(data)?),
        2 => Op::Unsubscribe(byte(data)?, byte(data)?),
        3 => Op::Wait(u16le(data)?),
        4 => Op::Disconnect,
        5 => Op::Connect,
        6 => Op::Verdict(byte(data)?),
        7 => Op::Defer(byte(data)?, byte(data)?),
        _ => Op::Set(byte(data)?, byte(data)?, byte(data)?),
    })
}

/// Encodes operations into a session program (for seeds).
pub fn encode(ops: &[Op]) -> Vec<u8> {
    let mut out = Vec::new();
    for op in ops {
        match op {
            Op::Message(bytes) => {
                out.push(0);
                let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(bytes.get(..usize::from(len)).unwrap_or(bytes));
            }
            Op::Subscribe(t, n) => out.extend_from_slice(&[1, *t, *n]),
            Op::Unsubscribe(t, n) => out.extend_from_slice(&[2, *t, *n]),
            Op::Wait(cs) => {
                out.push(3);
                out.extend_from_slice(&cs.to_le_bytes());
            }
            Op::Disconnect => out.push(4),
            Op::Connect => out.push(5),
            Op::Verdict(mask) => out.extend_from_slice(&[6, *mask]),
            Op::Defer(t, on) => out.extend_from_slice(&[7, *t, *on]),
            Op::Set(t, n, tag) => out.extend_from_slice(&[8, *t, *n, *tag]),
        }
    }
    out
}

/// `items[i % len]`; the tables are constants with at least one entry.
fn pick<const N: usize>(items: &[&'static str; N], i: u8) -> &'static str {
    items.get(usize::from(i) % N.max(1)).copied().unwrap_or("")
}

fn body(name: &str, tag: u8) -> bytes::Bytes {
    crate::transcript::notation::body(name, &alloc::format!("t{tag}"))
}

/// The session's variant (bit 0) and transport (bit 1: per type, the type in the high
/// nibble) from its first byte.
fn setup(config: u8) -> (Variant, Transport) {
    let variant = if config & 1 == 0 {
        Variant::Sotw
    } else {
        Variant::Delta
    };
    let transport = if config & 2 == 0 {
        Transport::Aggregated
    } else {
        Transport::PerType(pick(&TYPES, config >> 4).into())
    };
    (variant, transport)
}

/// Resource-name parsing: never panics; canonical forms are fixed points.
#[allow(clippy::panic)]
pub fn names(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(ResourceName::Xdstp(name)) = ResourceName::parse(&text) {
        let canonical = name.canonical();
        match XdstpName::parse(&canonical) {
            Ok(again) if again == name && again.canonical() == canonical => {}
            other => {
                panic!("canonical form {canonical:?} of {text:?} does not round-trip: {other:?}")
            }
        }
        if let Some(glob) = name.glob_of() {
            assert!(
                glob.glob_matches(&name),
                "{name} is not matched by its own glob {glob}"
            );
        }
    }
    let _ = xds_sansio::resource::name_of(data);
}

/// Decoding every discovery message from arbitrary bytes: never panics, what decodes
/// re-encodes to the same value, every decoded message is fed to a state machine, and the
/// crate's own decode of a SotW response has prost's outcome (the same message or the same
/// error).
#[allow(clippy::panic)]
pub fn decode(data: &[u8]) {
    match (
        xds_sansio::pb::decode_discovery_response(bytes::Bytes::copy_from_slice(data)),
        DiscoveryResponse::decode(data),
    ) {
        (Ok(ours), Ok(prost)) => assert_eq!(ours, prost, "the crate's decode differs"),
        (Err(ours), Err(prost)) => assert_eq!(ours.to_string(), prost.to_string()),
        (ours, prost) => panic!("the crate's decode: {ours:?}; prost's: {prost:?}"),
    }
    fn round_trip<M: Message + Default + PartialEq + core::fmt::Debug>(data: &[u8]) -> Option<M> {
        let message = M::decode(data).ok()?;
        let again = M::decode(message.encode_to_vec().as_slice());
        assert!(
            again.as_ref() == Ok(&message),
            "re-encoding changed {message:?}"
        );
        Some(message)
    }
    let now = Instant::from_secs(1);
    if let Some(response) = round_trip::<DiscoveryResponse>(data) {
        let mut client = subscribed_client(Variant::Sotw, &response.type_url);
        client.handle_response(now, Response::Sotw(response));
        drain_client(&mut client, now);
    }
    if let Some(response) = round_trip::<DeltaDiscoveryResponse>(data) {
        let mut client = subscribed_client(Variant::Delta, &response.type_url);
        client.handle_response(now, Response::Delta(response));
        drain_client(&mut client, now);
    }
    let store = ResourceStore::new();
    if let Some(request) = round_trip::<DiscoveryRequest>(data) {
        let mut server = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        server.handle_request(now, Request::Sotw(request));
        drain_server(&mut server, now, &store);
    }
    if let Some(request) = round_trip::<DeltaDiscoveryRequest>(data) {
        let mut server =
            ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated));
        server.handle_request(now, Request::Delta(request));
        drain_server(&mut server, now, &store);
    }
    let _ = round_trip::<Resource>(data);
}

fn subscribed_client(variant: Variant, type_url: &str) -> Client {
    let mut client = Client::new(ClientConfig::new(
        variant,
        Transport::Aggregated,
        Node::default(),
    ));
    client.connected(Instant::ZERO);
    let _ = client.subscribe(type_url, &NAMES);
    drain_client(&mut client, Instant::ZERO);
    client
}

fn drain_client(client: &mut Client, now: Instant) -> Vec<Request> {
    let mut requests = Vec::new();
    for _ in 0..DRAIN {
        match client.poll_request(now) {
            Some(r) => requests.push(r),
            None => break,
        }
    }
    for _ in 0..DRAIN {
        if client.poll_event().is_none() {
            break;
        }
    }
    requests
}

fn drain_server(server: &mut ServerStream, now: Instant, store: &ResourceStore) -> Vec<Response> {
    let mut responses = Vec::new();
    for _ in 0..DRAIN {
        while server.poll_event().is_some() {}
        match server.poll_response(now, store) {
            Some(r) => responses.push(r),
            None => break,
        }
    }
    responses
}

/// A client session: responses from bytes, subscriptions, verdicts, time and reconnects.
/// Invariants: every request's nonce was received on the current stream; after timers
/// fire, none is left due.
#[allow(clippy::panic)]
pub fn client_session(data: &[u8]) {
    let Some((&config, mut data)) = data.split_first() else {
        return;
    };
    let (variant, transport) = setup(config);
    let mut client_config = ClientConfig::new(
        variant,
        transport,
        Node {
            id: "fuzz".into(),
            ..Node::default()
        },
    );
    if config & 4 != 0 {
        client_config.nack_policy = NackPolicy::KeepValid;
    }
    // A twin with batched events must send the same requests and stand for the same events.
    let mut twin_config = client_config.clone();
    twin_config.event_shape = EventShape::Batched;
    let mut twin = Client::new(twin_config);
    let mut client = Client::new(client_config);
    let mut now = Instant::ZERO;
    let mut connected = true;
    client.connected(now);
    twin.connected(now);
    let mut nonces: BTreeSet<String> = BTreeSet::new();
    let mut tickets: Vec<(VerdictTicket, Vec<String>)> = Vec::new();
    let mut ops = 0;
    while let Some(op) = next_op(&mut data) {
        ops += 1;
        if ops > 512 {
            break;
        }
        match op {
            Op::Message(bytes) => {
                let response = match variant {
                    Variant::Sotw => {
                        DiscoveryResponse::decode(bytes.as_slice()).map(Response::Sotw)
                    }
                    Variant::Delta => {
                        DeltaDiscoveryResponse::decode(bytes.as_slice()).map(Response::Delta)
                    }
                };
                if let Ok(response) = response {
                    if connected && !response.nonce().is_empty() {
                        nonces.insert(response.nonce().into());
                    }
                    twin.handle_response(now, response.clone());
                    client.handle_response(now, response);
                }
            }
            Op::Subscribe(t, n) => {
                let _ = twin.subscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
                let _ = client.subscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
            }
            Op::Unsubscribe(t, n) => {
                let _ = twin.unsubscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
                let _ = client.unsubscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
            }
            Op::Wait(cs) => {
                now = now + Duration::from_millis(u64::from(cs) * 10);
                client.handle_timeout(now);
                twin.handle_timeout(now);
            }
            Op::Disconnect => {
                client.disconnected(now);
                twin.disconnected(now);
                connected = false;
                nonces.clear();
            }
            Op::Connect => {
                client.connected(now);
                twin.connected(now);
                connected = true;
                nonces.clear();
            }
            Op::Verdict(mask) => {
                if !tickets.is_empty() {
                    let (ticket, names) = tickets.remove(0);
                    let rejected: Vec<(&str, &str)> = names
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| *i < 8 && mask & (1 << i) != 0)
                        .map(|(_, n)| (n.as_str(), "fuzz says no"))
                        .collect();
                    let _ = twin.verdict(ticket, &rejected);
                    let _ = client.verdict(ticket, &rejected);
                }
            }
            Op::Defer(t, on) => {
                client.set_deferred_validation(pick(&TYPES, t), on & 1 == 1);
                twin.set_deferred_validation(pick(&TYPES, t), on & 1 == 1);
            }
            Op::Set(..) => {}
        }
        for _ in 0..DRAIN {
            let request = client.poll_request(now);
            assert_eq!(
                request,
                twin.poll_request(now),
                "the batched twin sent otherwise"
            );
            let Some(request) = request else {
                break;
            };
            assert!(connected, "a request while disconnected: {request:?}");
            let nonce = match &request {
                Request::Sotw(r) => &r.response_nonce,
                Request::Delta(r) => &r.response_nonce,
            };
            assert!(
                nonce.is_empty() || nonces.contains(nonce),
                "nonce {nonce:?} was never received on this stream"
            );
        }
        let mut expected = Vec::new();
        for _ in 0..DRAIN {
            match twin.poll_event() {
                Some(ClientEvent::Changed { type_url, changes }) => {
                    expected.extend(twin.owned_events(&type_url, &changes));
                }
                Some(event) => expected.push(event),
                None => break,
            }
        }
        let mut seen = Vec::new();
        for _ in 0..DRAIN {
            let event = client.poll_event();
            if let Some(event) = &event {
                seen.push(event.clone());
            }
            match event {
                Some(ClientEvent::ValidationNeeded {
                    ticket, resources, ..
                }) => {
                    tickets.push((
                        ticket,
                        resources
                            .iter()
                            .map(|r| String::from(r.name.as_str()))
                            .collect(),
                    ));
                }
                Some(_) => {}
                None => break,
            }
        }
        assert_eq!(seen, expected, "the batched twin's events stand for others");
        if let Some(deadline) = client.poll_timeout() {
            assert!(
                deadline >= now,
                "a timer in the past: {deadline:?} < {now:?}"
            );
        }
    }
}

/// A server session: requests from bytes, store updates, time.
/// Invariants: response nonces are unique and non-empty; nothing is sent once closed; a
/// twin stream drained with `poll_response_encoded` sends exactly the encoded responses.
#[allow(clippy::panic)]
pub fn server_session(data: &[u8]) {
    let Some((&config, mut data)) = data.split_first() else {
        return;
    };
    let (variant, transport) = setup(config);
    let mut server = ServerStream::new(ServerConfig::new(variant, transport));
    let mut twin = server.clone();
    let mut store = ResourceStore::new();
    let mut now = Instant::ZERO;
    let mut nonces: BTreeSet<String> = BTreeSet::new();
    let mut ops = 0;
    while let Some(op) = next_op(&mut data) {
        ops += 1;
        if ops > 512 {
            break;
        }
        match op {
            Op::Message(bytes) => {
                let request = match variant {
                    Variant::Sotw => DiscoveryRequest::decode(bytes.as_slice()).map(Request::Sotw),
                    Variant::Delta => {
                        DeltaDiscoveryRequest::decode(bytes.as_slice()).map(Request::Delta)
                    }
                };
                if let Ok(request) = request {
                    twin.handle_request(now, request.clone());
                    server.handle_request(now, request);
                }
            }
            Op::Set(t, n, _) | Op::Subscribe(t, n) => {
                let tag = match op {
                    Op::Set(_, _, tag) => tag,
                    _ => 0,
                };
                let name = pick(&NAMES, n);
                let mut entry = ResourceEntry::new(name, body(name, tag));
                if tag & 0x80 != 0 {
                    entry = entry.with_ttl(Duration::from_secs(u64::from(tag & 0x0f) + 1));
                }
                let _ = store.set_entry(pick(&TYPES, t), entry);
            }
            Op::Unsubscribe(t, n) => {
                store.remove(pick(&TYPES, t), pick(&NAMES, n));
            }
            Op::Wait(cs) => {
                now = now + Duration::from_millis(u64::from(cs) * 10);
                server.handle_timeout(now);
                twin.handle_timeout(now);
            }
            _ => {}
        }
        let closed = server.is_closed();
        for response in drain_server(&mut server, now, &store) {
            let encoded = twin.poll_response_encoded(now, &store);
            let bytes = match &response {
                Response::Sotw(r) => r.encode_to_vec(),
                Response::Delta(r) => r.encode_to_vec(),
            };
            assert_eq!(
                encoded.map(|e| e.bytes.to_vec()),
                Some(bytes),
                "the encoded twin differs"
            );
            assert!(!closed, "a response after the stream closed");
            let nonce = String::from(response.nonce());
            assert!(!nonce.is_empty(), "a response without a nonce");
            assert!(nonces.insert(nonce.clone()), "nonce {nonce:?} used twice");
        }
        assert!(
            twin.poll_response_encoded(now, &store).is_none(),
            "the encoded twin sends more"
        );
        if let Some(deadline) = server.poll_timeout() {
            assert!(deadline >= now, "a timer in the past");
        }
    }
}

/// The pair: a client and a server on a simulated stream under fuzz-chosen operations.
/// Invariants: no livelock, and both sides pass the conformance checker on every history.
#[allow(clippy::panic)]
pub fn pair(data: &[u8]) {
    let Some((&config, mut data)) = data.split_first() else {
        return;
    };
    let (variant, transport) = setup(config);
    let mut client = ClientConfig::new(
        variant,
        transport.clone(),
        Node {
            id: "fuzz".into(),
            ..Node::default()
        },
    );
    client.nack_policy = if config & 4 == 0 {
        NackPolicy::RejectAll
    } else {
        NackPolicy::KeepValid
    };
    let mut pair = Pair::new(PairConfig {
        client,
        server: ServerConfig::new(variant, transport),
        latency: Duration::from_millis(5),
    });
    let mut ops = 0;
    while let Some(op) = next_op(&mut data) {
        ops += 1;
        if ops > 128 {
            break;
        }
        match op {
            Op::Subscribe(t, n) => {
                let _ = pair.client.subscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
            }
            Op::Unsubscribe(t, n) => {
                let _ = pair.client.unsubscribe(pick(&TYPES, t), &[pick(&NAMES, n)]);
            }
            Op::Set(t, n, tag) => {
                let name = pick(&NAMES, n);
                if name != "*" {
                    let _ = pair
                        .store
                        .set_entry(pick(&TYPES, t), ResourceEntry::new(name, body(name, tag)));
                    pair.record_store(pick(&TYPES, t), name);
                }
            }
            Op::Message(bytes) => {
                // Partial delivery: as many steps as the message is long (at most 8).
                for _ in 0..bytes.len().min(8) {
                    pair.step();
                }
            }
            Op::Wait(cs) => {
                if let Err(stuck) = pair.advance(Duration::from_millis(u64::from(cs % 3000) * 10)) {
                    panic!("{stuck}");
                }
            }
            Op::Disconnect => pair.break_stream(),
            Op::Connect => {
                if pair.server.is_none() {
                    pair.reconnect();
                }
            }
            Op::Verdict(_) | Op::Defer(..) => {}
        }
        pair.collect();
    }
    if pair.server.is_none() {
        pair.reconnect();
    }
    if let Err(stuck) = pair.drive() {
        panic!("{stuck}");
    }
    {
        use crate::check::{check, CheckSide};
        for (side, view) in [
            (CheckSide::Client, pair.client_view()),
            (CheckSide::Server, pair.server_view()),
        ] {
            let violations = check(view, side);
            assert!(
                violations.is_empty(),
                "{side:?}: {violations:?}\n{}",
                pair.notation()
            );
        }
    }
}

/// The types the `refs` target reads a body as (its first byte picks one).
pub const REFS_TYPES: [&str; 8] = [
    LISTENER.type_url,
    ROUTE.type_url,
    xds_sansio::types::SCOPED_ROUTE.type_url,
    xds_sansio::types::VIRTUAL_HOST.type_url,
    CLUSTER.type_url,
    xds_sansio::types::EXTENSION_CONFIG.type_url,
    ENDPOINT.type_url,
    xds_sansio::types::SECRET.type_url,
];

/// The references reader on arbitrary bytes read as each resource type (the first byte
/// picks the type, the rest is the body): never panics; the result is deterministic,
/// sorted, without duplicates or empty names, `xdstp://` names canonical, aggregate members
/// among the cluster references. The body then goes through the dependency manager (as an
/// upsert of a watched listener's cascade) and the store's consistency check.
#[allow(clippy::panic)]
pub fn refs(data: &[u8]) {
    use xds_sansio::client::deps::{DependencyManager, DepsConfig};
    use xds_sansio::refs::references;
    let Some((&pick_type, body)) = data.split_first() else {
        return;
    };
    let type_url = pick(&REFS_TYPES, pick_type);
    let body = bytes::Bytes::copy_from_slice(body);
    let result = references(type_url, &body);
    assert_eq!(result, references(type_url, &body), "not deterministic");
    if let Ok(refs) = &result {
        let all: Vec<_> = refs.iter().collect();
        for pair in all.windows(2) {
            if let [a, b] = pair {
                let order = xds_sansio::types::ads_order(a.type_url, b.type_url)
                    .then_with(|| a.name.cmp(&b.name));
                assert!(order.is_lt(), "not sorted or duplicated: {a:?} {b:?}");
            }
        }
        for r in &all {
            assert!(!r.name.is_empty(), "empty name from {}", r.field);
            if r.name.starts_with(xds_sansio::name::XDSTP_SCHEME) {
                let canonical = XdstpName::parse(&r.name).map(|n| n.canonical());
                assert_eq!(canonical.as_deref(), Ok(r.name.as_str()), "not canonical");
            }
        }
        for child in refs.aggregate.iter().flatten() {
            assert!(
                refs.of_type(CLUSTER.type_url).any(|c| c == child),
                "aggregate member {child} is not a cluster reference"
            );
        }
    }
    // The dependency manager takes it as the resource a cascade reaches.
    let mut deps = DependencyManager::new(DepsConfig::default());
    let now = Instant::ZERO;
    let _ = deps.watch_listener(now, "a");
    for (t, name) in [(LISTENER.type_url, "a"), (type_url, "a")] {
        deps.handle_event(
            now,
            &ClientEvent::Upserted {
                type_url: t.into(),
                name: name.into(),
                version: "1".into(),
                body: body.clone(),
                aliases: Vec::new(),
            },
        );
    }
    for _ in 0..DRAIN {
        if deps.poll_command().is_none() {
            break;
        }
    }
    while deps.poll_snapshot().is_some() {}
    let _ = deps.config("a");
    let _ = deps.dump();
    deps.handle_timeout(Instant::from_secs(3600));
    // The store's consistency check reads it too.
    let mut store = ResourceStore::new();
    if store
        .set_entry(type_url, ResourceEntry::new("a", body))
        .is_ok()
    {
        // The check reads the referring types: exactly their unreadable bodies are reported.
        let read = xds_sansio::refs::REFERRING.contains(&type_url);
        let report = store.consistency();
        assert_eq!(
            report.unreadable.is_empty(),
            !read || result.is_ok(),
            "consistency check and reader disagree"
        );
    }
}
