//! Incremental streams in step with the store (issue 28): a wildcard stream that keeps only
//! what differs from the store must answer exactly as one that keeps an entry per resource
//! (`ServerConfig::delta_in_step` off), whatever the store and the client do and however
//! late the stream is polled; and a stream whose change log ran past it must end with a
//! typed status, never answer wrongly.

mod server_common;

use quickcheck::{Arbitrary, Gen, QuickCheck};
use server_common::*;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{
    ProtocolError, ResourceStore, ServerConfig, ServerStream, StreamId, StreamSet, TYPE_WIDE,
};
use xds_sansio::{Request, Response, Transport, Variant};

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];

#[derive(Clone, Debug)]
enum Op {
    Set { cds: bool, name: u8, generation: u8 },
    Remove { cds: bool, name: u8 },
    SetError { cds: bool, name: u8 },
    ClearError { cds: bool, name: u8 },
    Subscribe { cds: bool, name: u8 },
    Unsubscribe { cds: bool, name: u8 },
    Poll,
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let cds = bool::arbitrary(g);
        // `NAMES.len()` stands for the wildcard, or, for errors, the type-wide error.
        let name = u8::arbitrary(g) % (NAMES.len() as u8 + 1);
        match u8::arbitrary(g) % 12 {
            0..=3 => Op::Set {
                cds,
                name: name % NAMES.len() as u8,
                generation: u8::arbitrary(g) % 3,
            },
            4 | 5 => Op::Remove {
                cds,
                name: name % NAMES.len() as u8,
            },
            6 => Op::SetError { cds, name },
            7 => Op::ClearError { cds, name },
            8 => Op::Subscribe { cds, name },
            9 => Op::Unsubscribe { cds, name },
            _ => Op::Poll,
        }
    }
}

fn type_of(cds: bool) -> &'static str {
    if cds {
        CDS
    } else {
        EDS
    }
}

fn name_of(i: u8) -> &'static str {
    NAMES.get(i as usize).copied().unwrap_or(TYPE_WIDE)
}

fn config(in_step: bool) -> ServerConfig {
    let mut c = ServerConfig::new(Variant::Delta, Transport::Aggregated);
    c.delta_in_step = in_step;
    c
}

/// Four streams told the same things: in step or not, alone or in a [`StreamSet`].
struct Streams {
    alone: [ServerStream; 2],
    set: StreamSet,
    in_set: [StreamId; 2],
}

impl Streams {
    fn new() -> Streams {
        let mut set = StreamSet::new();
        let in_set = [set.insert(config(true)), set.insert(config(false))];
        Streams {
            alone: [
                ServerStream::new(config(true)),
                ServerStream::new(config(false)),
            ],
            set,
            in_set,
        }
    }

    fn send(&mut self, request: Request) {
        for s in &mut self.alone {
            s.handle_request(T0, request.clone());
        }
        for id in self.in_set {
            self.set.handle_request(id, T0, request.clone()).unwrap();
        }
    }

    /// Polls every stream until it has nothing to send, ACKing each response; whether all
    /// four sent the same responses.
    fn poll(&mut self, store: &ResourceStore) -> bool {
        for _ in 0..20 {
            let mut got: Vec<Option<Response>> = Vec::new();
            for s in &mut self.alone {
                got.push(s.poll_response(T0, store));
            }
            self.set.sync(store);
            for id in self.in_set {
                got.push(self.set.poll_response(id, T0, store));
            }
            if got.iter().any(|r| *r != got[0]) {
                eprintln!("responses differ: {got:#?}");
                return false;
            }
            let Some(Some(Response::Delta(d))) = got.pop() else {
                return true;
            };
            let mut ack = delta(&d.type_url, &[], &[], &d.nonce);
            ack.node = None;
            self.send(Request::Delta(ack));
        }
        eprintln!("more than 20 responses in a row");
        false
    }
}

fn status() -> Status {
    Status {
        code: 5,
        message: "not found here".into(),
        details: vec![],
    }
}

fn conversation(ops: Vec<Op>) -> bool {
    let mut store = ResourceStore::new();
    let mut streams = Streams::new();
    streams.send(dreq(delta(CDS, &["*"], &[], "")));
    streams.send(dreq(delta(EDS, &["*", "a"], &[], "")));
    for op in ops {
        match op {
            Op::Set {
                cds,
                name,
                generation,
            } => {
                let n = name_of(name);
                store
                    .set(type_of(cds), n, body(n, &generation.to_string()))
                    .unwrap();
            }
            Op::Remove { cds, name } => {
                store.remove(type_of(cds), name_of(name));
            }
            Op::SetError { cds, name } => {
                store
                    .set_error(type_of(cds), name_of(name), status())
                    .unwrap();
            }
            Op::ClearError { cds, name } => {
                store.clear_error(type_of(cds), name_of(name));
            }
            Op::Subscribe { cds, name } => {
                let n = if name as usize == NAMES.len() {
                    "*"
                } else {
                    name_of(name)
                };
                streams.send(dreq(delta(type_of(cds), &[n], &[], "")));
            }
            Op::Unsubscribe { cds, name } => {
                let n = if name as usize == NAMES.len() {
                    "*"
                } else {
                    name_of(name)
                };
                streams.send(dreq(delta(type_of(cds), &[], &[n], "")));
            }
            Op::Poll => {
                if !streams.poll(&store) {
                    return false;
                }
            }
        }
    }
    streams.poll(&store)
}

#[test]
fn in_step_streams_answer_as_streams_that_keep_every_entry() {
    // As many cases as QUICKCHECK_TESTS says (scripts/test.sh: 10 000).
    QuickCheck::new().quickcheck(conversation as fn(Vec<Op>) -> bool);
}

/// Serves a wildcard CDS stream every cluster and ACKs; returns the stream.
fn served(store: &ResourceStore, in_step: bool) -> ServerStream {
    let mut s = ServerStream::new(config(in_step));
    s.handle_request(T0, dreq(delta(CDS, &["*"], &[], "")));
    let first = one_delta(drain(&mut s, T0, store));
    assert_eq!(first.resources.len(), store.len(CDS));
    let mut ack = delta(CDS, &[], &[], &first.nonce);
    ack.node = None;
    s.handle_request(T0, dreq(ack));
    s
}

#[test]
fn an_in_step_stream_the_log_ran_past_recovers_from_the_removed_names() {
    let mut store = ResourceStore::with_log_capacity(2);
    for n in ["a", "b", "c"] {
        store.set(CDS, n, body(n, "1")).unwrap();
    }
    let mut in_step = served(&store, true);
    let mut explicit = served(&store, false);
    // More changes than the log holds, "b" among them removed.
    store.remove(CDS, "b");
    for g in 2..6 {
        store.set(CDS, "a", body("a", &g.to_string())).unwrap();
    }
    for s in [&mut in_step, &mut explicit] {
        let d = one_delta(drain(s, T0, &store));
        assert!(!s.is_closed());
        assert_eq!(delta_names(&d), ["a"]);
        assert_eq!(d.removed_resources, ["b"]);
    }
}

#[test]
fn a_change_log_that_runs_past_even_the_removed_names_ends_an_in_step_stream_unavailable() {
    // The removed names are kept as long as the log is (here 2 removals).
    let mut store = ResourceStore::with_log_capacity(2);
    for n in ["a", "b", "c", "d"] {
        store.set(CDS, n, body(n, "1")).unwrap();
    }
    let mut in_step = served(&store, true);
    let mut explicit = served(&store, false);
    for n in ["b", "c", "d"] {
        store.remove(CDS, n);
    }
    assert!(drain(&mut in_step, T0, &store).is_empty());
    let Some(ProtocolError::ChangeLogOutrun { type_url }) = in_step.closed_by() else {
        panic!("closed by {:?}", in_step.closed_by());
    };
    assert_eq!(type_url, CDS);
    assert_eq!(in_step.closed_by().map(ProtocolError::grpc_code), Some(14));
    // Without stepping in, the stream resyncs in place and tells every removal.
    let d = one_delta(drain(&mut explicit, T0, &store));
    assert!(!explicit.is_closed());
    assert_eq!(d.removed_resources, ["b", "c", "d"]);
}

#[test]
fn an_in_step_stream_polled_late_sends_what_changed_and_what_was_removed() {
    let mut store = ResourceStore::new();
    for n in ["a", "b", "c"] {
        store.set(CDS, n, body(n, "1")).unwrap();
    }
    let mut s = served(&store, true);
    store.set(CDS, "a", body("a", "2")).unwrap();
    store.set(CDS, "a", body("a", "3")).unwrap();
    store.remove(CDS, "b");
    store.set(CDS, "d", body("d", "1")).unwrap();
    // Changed back to what the client holds: nothing to send for "c".
    store.set(CDS, "c", body("c", "2")).unwrap();
    store.set(CDS, "c", body("c", "1")).unwrap();
    let d = one_delta(drain(&mut s, T0, &store));
    assert_eq!(delta_names(&d), ["a", "d"]);
    assert_eq!(d.removed_resources, ["b"]);
}

/// One wildcard CDS stream, alone or in a [`StreamSet`].
#[allow(clippy::large_enum_variant)]
enum OneStream {
    Alone(ServerStream),
    InSet(StreamSet, StreamId),
}

impl OneStream {
    fn open(in_set: bool) -> OneStream {
        if in_set {
            let mut set = StreamSet::new();
            let id = set.insert(config(true));
            OneStream::InSet(set, id)
        } else {
            OneStream::Alone(ServerStream::new(config(true)))
        }
    }

    fn send(&mut self, r: xds_sansio::pb::discovery::DeltaDiscoveryRequest) {
        match self {
            OneStream::Alone(s) => s.handle_request(T0, dreq(r)),
            OneStream::InSet(set, id) => set.handle_request(*id, T0, dreq(r)).unwrap(),
        }
    }

    fn poll(&mut self, store: &ResourceStore) -> Option<Response> {
        match self {
            OneStream::Alone(s) => s.poll_response(T0, store),
            OneStream::InSet(set, id) => {
                set.sync(store);
                set.poll_response(*id, T0, store)
            }
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            OneStream::Alone(s) => s.is_closed(),
            OneStream::InSet(set, id) => set.stream(*id).is_none_or(ServerStream::is_closed),
        }
    }
}

/// A model incremental client of wildcard CDS against a store whose change log holds 3
/// changes: whatever the store does and however late the stream is polled, once the
/// stream is quiet the client's cache is the store. A stream the log ran past ends, and
/// the client resumes on a new one presenting what it holds, as a real client does.
fn converges(ops: Vec<Op>, in_set: bool) -> bool {
    use std::collections::BTreeMap;
    let mut store = ResourceStore::with_log_capacity(3);
    let mut cache: BTreeMap<String, (String, bytes::Bytes)> = BTreeMap::new();
    let mut stream = OneStream::open(in_set);
    stream.send(delta(CDS, &["*"], &[], ""));
    let mut reconnects = 0;
    for op in ops {
        match op {
            Op::Set {
                name, generation, ..
            } => {
                let n = name_of(name % NAMES.len() as u8);
                store.set(CDS, n, body(n, &generation.to_string())).unwrap();
            }
            Op::SetError { name, .. } => {
                let n = name_of(name % NAMES.len() as u8);
                store.set(CDS, n, body(n, "9")).unwrap();
            }
            Op::Remove { name, .. }
            | Op::ClearError { name, .. }
            | Op::Unsubscribe { name, .. } => {
                store.remove(CDS, name_of(name % NAMES.len() as u8));
            }
            Op::Subscribe { .. } | Op::Poll => {
                for _ in 0..20 {
                    match stream.poll(&store) {
                        Some(Response::Delta(d)) => {
                            for r in &d.resources {
                                if let Some(any) = &r.resource {
                                    cache.insert(
                                        r.name.clone(),
                                        (r.version.clone(), any.value.clone()),
                                    );
                                }
                            }
                            for n in &d.removed_resources {
                                cache.remove(n);
                            }
                            let mut ack = delta(CDS, &[], &[], &d.nonce);
                            ack.node = None;
                            stream.send(ack);
                        }
                        Some(other) => panic!("not incremental: {other:?}"),
                        None if stream.is_closed() => {
                            reconnects += 1;
                            stream = OneStream::open(in_set);
                            let mut r = delta(CDS, &["*"], &[], "");
                            r.initial_resource_versions = cache
                                .iter()
                                .map(|(n, (v, _))| (n.clone(), v.clone()))
                                .collect();
                            stream.send(r);
                        }
                        None => break,
                    }
                }
                let held: BTreeMap<String, bytes::Bytes> = cache
                    .iter()
                    .map(|(n, (_, b))| (n.clone(), b.clone()))
                    .collect();
                let stored: BTreeMap<String, bytes::Bytes> = store
                    .iter(CDS)
                    .map(|r| (r.name().to_string(), r.body().clone()))
                    .collect();
                if held != stored {
                    eprintln!("after {reconnects} reconnects: held {held:?}, stored {stored:?}");
                    return false;
                }
            }
        }
    }
    true
}

#[test]
fn a_client_of_an_in_step_stream_over_a_short_log_holds_the_store() {
    QuickCheck::new().quickcheck(converges as fn(Vec<Op>, bool) -> bool);
}
