//! Instruction counts of the hot paths, under valgrind's callgrind: the same binary and
//! inputs give the same count whatever else the machine is doing, so a regression of a few
//! percent shows, where wall-clock figures on a shared machine move 2x.
//!
//! `cargo bench --bench instructions` runs each workload twice under callgrind, once with
//! its setup only and once with setup and work, and reports (work − setup) / iterations;
//! it fails when a figure is more than 10 % above the one kept in
//! `benches/instructions.txt`. `-- --update` rewrites that file. Without valgrind it says
//! so loudly and passes, unless `XDS_INSTRUCTIONS_REQUIRED=1` (CI sets it).

mod support;

use std::collections::BTreeMap;
use std::hint::black_box;
use std::process::{Command, ExitCode};

use bytes::Bytes;
use prost::Message;
use support::{
    cds_wildcard_stream, cluster_body, eds_body, fanout_setup, ingest_sotw, ingest_sotw_wire, CDS,
    EDS,
};
use xds_sansio::client::{Client, ClientConfig, EventShape};
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse, Resource};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::pb::{decode_delta_discovery_response, decode_discovery_response};
use xds_sansio::server::ResourceStore;
use xds_sansio::{Instant, Response, Transport, Variant};

const CHILD: &str = "XDS_INSTRUCTIONS_CHILD";
const BASELINE: &str = "benches/instructions.txt";
/// A figure more than this much above its kept value fails the run.
const TOLERANCE: f64 = 0.10;

/// One measured path: its name, how many times `work` repeats its unit, and the two phases
/// (the state `setup` builds is what `work` consumes).
struct Workload {
    name: &'static str,
    iterations: u64,
    run: fn(work: bool),
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "client_sotw_first_load_10k",
        iterations: 3,
        run: client_sotw_first_load,
    },
    Workload {
        name: "client_sotw_first_load_10k_batched",
        iterations: 3,
        run: client_sotw_first_load_batched,
    },
    Workload {
        name: "client_sotw_all_changed_10k",
        iterations: 3,
        run: client_sotw_all_changed,
    },
    Workload {
        name: "client_sotw_all_changed_10k_batched",
        iterations: 3,
        run: client_sotw_all_changed_batched,
    },
    Workload {
        name: "client_sotw_unchanged_10k_batched",
        iterations: 3,
        run: client_sotw_unchanged_batched,
    },
    Workload {
        name: "prost_decode_cds_10k",
        iterations: 3,
        run: prost_decode_cds,
    },
    Workload {
        name: "wire_decode_cds_10k",
        iterations: 3,
        run: wire_decode_cds,
    },
    Workload {
        name: "prost_decode_delta_cds_10k",
        iterations: 3,
        run: prost_decode_delta_cds,
    },
    Workload {
        name: "wire_decode_delta_cds_10k",
        iterations: 3,
        run: wire_decode_delta_cds,
    },
    Workload {
        name: "client_sotw_first_load_10k_batched_wire",
        iterations: 3,
        run: client_sotw_first_load_batched_wire,
    },
    Workload {
        name: "client_sotw_all_changed_10k_batched_wire",
        iterations: 3,
        run: client_sotw_all_changed_batched_wire,
    },
    Workload {
        name: "client_sotw_unchanged_10k_batched_wire",
        iterations: 3,
        run: client_sotw_unchanged_batched_wire,
    },
    Workload {
        name: "client_delta_one_update_1k_cached",
        iterations: 1000,
        run: client_delta_update,
    },
    Workload {
        name: "server_build_encoded_cds_10k",
        iterations: 5,
        run: server_build_encoded,
    },
    Workload {
        name: "server_build_encoded_cds_10k_shared",
        iterations: 100,
        run: server_build_encoded_shared,
    },
    Workload {
        name: "server_fanout_one_change_100_streams",
        iterations: 200,
        run: server_fanout,
    },
];

// ---------------------------------------------------------------- workloads

fn sotw_client() -> Client {
    sotw_client_with(EventShape::PerResource)
}

fn sotw_client_with(shape: EventShape) -> Client {
    let mut config = ClientConfig::new(Variant::Sotw, Transport::Aggregated, Node::default());
    config.event_shape = shape;
    let mut c = Client::new(config);
    c.subscribe(CDS, &[]).unwrap_or_default();
    c.connected(Instant::ZERO);
    while c.poll_request(Instant::ZERO).is_some() {}
    c
}

/// A 10 000-cluster SotW CDS response, encoded.
fn cds_response() -> Bytes {
    cds_response_at(1)
}

/// The same clusters at `generation` (every body differs from another generation's).
fn cds_response_at(generation: u8) -> Bytes {
    let resp = DiscoveryResponse {
        version_info: format!("v{generation}"),
        resources: (0..10_000)
            .map(|i| {
                let mut body = cluster_body(&format!("cluster-{i:05}"), 200).to_vec();
                if let Some(last) = body.last_mut() {
                    *last = generation;
                }
                Any {
                    type_url: CDS.into(),
                    value: Bytes::from(body),
                }
            })
            .collect(),
        type_url: CDS.into(),
        nonce: format!("n{generation}"),
        ..DiscoveryResponse::default()
    };
    Bytes::from(resp.encode_to_vec())
}

/// The floor: decode the 10k-cluster response (and drop it), nothing else.
fn prost_decode_cds(work: bool) {
    let wire = cds_response();
    if work {
        for _ in 0..3 {
            black_box(DiscoveryResponse::decode(wire.clone()).unwrap_or_default());
        }
    }
    black_box(wire);
}

/// The crate's own decode of the same response (`pb::decode_discovery_response`), nothing
/// else.
fn wire_decode_cds(work: bool) {
    let wire = cds_response();
    if work {
        for _ in 0..3 {
            black_box(decode_discovery_response(wire.clone()).unwrap_or_default());
        }
    }
    black_box(wire);
}

/// The same 10 000 clusters as an incremental response: each with its name and version.
fn delta_cds_response() -> Bytes {
    let sotw = DiscoveryResponse::decode(cds_response()).unwrap_or_default();
    let resp = DeltaDiscoveryResponse {
        system_version_info: sotw.version_info,
        resources: (sotw.resources.into_iter().enumerate())
            .map(|(i, any)| Resource {
                name: format!("cluster-{i:05}"),
                version: format!("{i:016x}"),
                resource: Some(any),
                ..Resource::default()
            })
            .collect(),
        type_url: sotw.type_url,
        nonce: sotw.nonce,
        ..DeltaDiscoveryResponse::default()
    };
    Bytes::from(resp.encode_to_vec())
}

/// prost's decode of the delta response (and its drop), nothing else.
fn prost_decode_delta_cds(work: bool) {
    let wire = delta_cds_response();
    if work {
        for _ in 0..3 {
            black_box(DeltaDiscoveryResponse::decode(wire.clone()).unwrap_or_default());
        }
    }
    black_box(wire);
}

/// The crate's own decode of the delta response (`pb::decode_delta_discovery_response`),
/// nothing else.
fn wire_decode_delta_cds(work: bool) {
    let wire = delta_cds_response();
    if work {
        for _ in 0..3 {
            black_box(decode_delta_discovery_response(wire.clone()).unwrap_or_default());
        }
    }
    black_box(wire);
}

/// How a workload turns the wire bytes into the client's events: prost's decode or ours.
type Ingest = fn(&mut Client, &Bytes);

/// First load with batched events, every change read from the cache.
fn client_sotw_first_load_batched(work: bool) {
    first_load_batched(work, ingest_sotw)
}

/// [`client_sotw_first_load_batched`] from the wire bytes by the crate's own decode.
fn client_sotw_first_load_batched_wire(work: bool) {
    first_load_batched(work, ingest_sotw_wire)
}

fn first_load_batched(work: bool, ingest: Ingest) {
    let wire = cds_response();
    let mut clients: Vec<Client> = (0..3)
        .map(|_| sotw_client_with(EventShape::Batched))
        .collect();
    if work {
        for c in &mut clients {
            ingest(c, &wire);
        }
    }
    black_box(clients);
}

/// A second full state after a first load: at generation `second` (1: unchanged).
fn full_state_again(work: bool, shape: EventShape, second: u8, ingest: Ingest) {
    let (first, second) = (cds_response_at(1), cds_response_at(second));
    let mut clients: Vec<Client> = (0..3).map(|_| sotw_client_with(shape)).collect();
    for c in &mut clients {
        ingest(c, &first);
    }
    if work {
        for c in &mut clients {
            ingest(c, &second);
        }
    }
    black_box(clients);
}

/// [`client_sotw_all_changed_batched`] from the wire bytes by the crate's own decode.
fn client_sotw_all_changed_batched_wire(work: bool) {
    full_state_again(work, EventShape::Batched, 2, ingest_sotw_wire)
}

/// [`client_sotw_unchanged_batched`] from the wire bytes by the crate's own decode.
fn client_sotw_unchanged_batched_wire(work: bool) {
    full_state_again(work, EventShape::Batched, 1, ingest_sotw_wire)
}

/// The full state again with every body changed (owned events).
fn client_sotw_all_changed(work: bool) {
    full_state_again(work, EventShape::PerResource, 2, ingest_sotw)
}

/// The full state again with every body changed (batched, every change read).
fn client_sotw_all_changed_batched(work: bool) {
    full_state_again(work, EventShape::Batched, 2, ingest_sotw)
}

/// The same full state again, every body unchanged (batched): what a client pays for a
/// server's resend (a reconnect, or a SotW server that answers every change with the
/// whole type).
fn client_sotw_unchanged_batched(work: bool) {
    full_state_again(work, EventShape::Batched, 1, ingest_sotw)
}

/// Decode, handle and ACK a 10k-cluster response on a fresh client (first load).
fn client_sotw_first_load(work: bool) {
    let wire = cds_response();
    let mut clients: Vec<Client> = (0..3).map(|_| sotw_client()).collect();
    if work {
        for c in &mut clients {
            let resp = DiscoveryResponse::decode(wire.clone()).unwrap_or_default();
            c.handle_response(Instant::ZERO, Response::Sotw(resp));
            black_box(c.poll_request(Instant::ZERO));
            while let Some(e) = c.poll_event() {
                black_box(e);
            }
        }
    }
    black_box(clients);
}

fn delta_update(i: u64) -> Bytes {
    let name = format!("r{}", i % 1000);
    Bytes::from(
        DeltaDiscoveryResponse {
            system_version_info: format!("s{i}"),
            resources: vec![Resource {
                name: name.clone(),
                version: format!("v{i}"),
                resource: Some(Any {
                    type_url: EDS.into(),
                    value: eds_body(&name, (i % 251) as u8),
                }),
                ..Resource::default()
            }],
            type_url: EDS.into(),
            nonce: format!("n{i}"),
            ..DeltaDiscoveryResponse::default()
        }
        .encode_to_vec(),
    )
}

/// One changed resource at a time on a delta client holding 1 000.
fn client_delta_update(work: bool) {
    let mut c = Client::new(ClientConfig::new(
        Variant::Delta,
        Transport::Aggregated,
        Node::default(),
    ));
    c.subscribe(EDS, &["*"]).unwrap_or_default();
    c.connected(Instant::ZERO);
    while c.poll_request(Instant::ZERO).is_some() {}
    let first = DeltaDiscoveryResponse {
        resources: (0..1000)
            .map(|r| Resource {
                name: format!("r{r}"),
                version: "0".into(),
                resource: Some(Any {
                    type_url: EDS.into(),
                    value: eds_body(&format!("r{r}"), 0),
                }),
                ..Resource::default()
            })
            .collect(),
        type_url: EDS.into(),
        nonce: "n0".into(),
        ..DeltaDiscoveryResponse::default()
    };
    c.handle_response(Instant::ZERO, Response::Delta(first));
    while c.poll_request(Instant::ZERO).is_some() {}
    while c.poll_event().is_some() {}
    let updates: Vec<Bytes> = (1..=1000).map(delta_update).collect();
    if work {
        for wire in &updates {
            let resp = DeltaDiscoveryResponse::decode(wire.clone()).unwrap_or_default();
            c.handle_response(Instant::ZERO, Response::Delta(resp));
            black_box(c.poll_request(Instant::ZERO));
            while let Some(e) = c.poll_event() {
                black_box(e);
            }
        }
    }
    black_box(c);
}

/// The encoded wildcard CDS response of a 10k-cluster store, on fresh streams.
fn cds_store_10k() -> ResourceStore {
    let mut store = ResourceStore::new();
    for i in 0..10_000 {
        let name = format!("cluster-{i:05}");
        store
            .set(CDS, &name, cluster_body(&name, 150))
            .unwrap_or_default();
    }
    store
}

/// Each of 5 streams answered at a new revision (one cluster changed before each): every
/// response builds the full state, as the first stream after a change does.
fn server_build_encoded(work: bool) {
    let mut store = cds_store_10k();
    let bodies = [
        cluster_body("cluster-00000", 151),
        cluster_body("cluster-00000", 150),
    ];
    let mut streams: Vec<_> = (0..5).map(|_| cds_wildcard_stream()).collect();
    for (k, s) in streams.iter_mut().enumerate() {
        store
            .set(CDS, "cluster-00000", bodies[k % 2].clone())
            .unwrap_or_default();
        if work {
            black_box(s.poll_response_encoded(Instant::ZERO, &store));
        }
    }
    black_box(streams);
}

/// 100 streams answered at one revision whose full state another stream already built:
/// what each further stream of a reconnect storm or a fan-out costs.
fn server_build_encoded_shared(work: bool) {
    let store = cds_store_10k();
    black_box(cds_wildcard_stream().poll_response_encoded(Instant::ZERO, &store));
    let mut streams: Vec<_> = (0..100).map(|_| cds_wildcard_stream()).collect();
    if work {
        for s in &mut streams {
            black_box(s.poll_response_encoded(Instant::ZERO, &store));
        }
    }
    black_box(streams);
}

/// One resource changes; 100 streams of 1 000 subscribe to it.
fn server_fanout(work: bool) {
    let (mut store, mut set) = fanout_setup(1000, 3000, 100);
    let bodies = [eds_body("target", 2), eds_body("target", 3)];
    if work {
        for k in 0..200 {
            store
                .set(EDS, "target", bodies[k % 2].clone())
                .unwrap_or_default();
            set.sync(&store);
            while let Some(id) = set.poll_ready() {
                while let Some(r) = set.poll_response_encoded(id, Instant::ZERO, &store) {
                    black_box(r);
                }
            }
        }
    }
    black_box((store, set));
}

// ---------------------------------------------------------------- the runner

/// Total instructions of this binary running `name` (phase `work` or not) under callgrind.
fn callgrind(name: &str, work: bool) -> Result<u64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = std::env::temp_dir().join(format!(
        "xds-instructions-{}-{name}-{work}.out",
        std::process::id()
    ));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe)
        .env(
            CHILD,
            format!("{name}:{}", if work { "work" } else { "setup" }),
        )
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    if !status.status.success() {
        return Err(format!(
            "{name}: valgrind failed: {}",
            String::from_utf8_lossy(&status.stderr)
        ));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("{name}: no instruction total in callgrind's output"))
}

fn read_baseline() -> BTreeMap<String, u64> {
    std::fs::read_to_string(BASELINE)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((parts.next()?.to_string(), parts.next()?.parse().ok()?))
        })
        .collect()
}

fn main() -> ExitCode {
    if let Ok(spec) = std::env::var(CHILD) {
        let (name, phase) = spec.split_once(':').unwrap_or((&spec, "setup"));
        if let Some(w) = WORKLOADS.iter().find(|w| w.name == name) {
            (w.run)(phase == "work");
        }
        return ExitCode::SUCCESS;
    }
    let update = std::env::args().any(|a| a == "--update");
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("!!! valgrind not found: instruction counts NOT measured !!!");
        return if std::env::var("XDS_INSTRUCTIONS_REQUIRED").is_ok_and(|v| v == "1") {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        };
    }
    let kept = read_baseline();
    let mut measured = BTreeMap::new();
    let mut failed = false;
    for w in WORKLOADS {
        let figure = match (callgrind(w.name, false), callgrind(w.name, true)) {
            (Ok(setup), Ok(total)) => total.saturating_sub(setup) / w.iterations,
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        };
        measured.insert(w.name.to_string(), figure);
        match kept.get(w.name) {
            Some(&old) => {
                let ratio = figure as f64 / old as f64;
                let verdict = if ratio > 1.0 + TOLERANCE {
                    failed = true;
                    "REGRESSION"
                } else {
                    "ok"
                };
                println!(
                    "{:<40} {figure:>12} instructions per iteration (kept {old}, ratio {ratio:.3}) {verdict}",
                    w.name
                );
            }
            None => println!(
                "{:<40} {figure:>12} instructions per iteration (no kept figure)",
                w.name
            ),
        }
    }
    if update {
        let mut text = String::from(
            "# Instructions per iteration of each workload of benches/instructions.rs\n\
             # (callgrind, release build). `cargo bench --bench instructions -- --update`\n\
             # rewrites this file; CI fails on a figure more than 10 % above it.\n",
        );
        for (name, figure) in &measured {
            text.push_str(&format!("{name} {figure}\n"));
        }
        if let Err(e) = std::fs::write(BASELINE, text) {
            eprintln!("cannot write {BASELINE}: {e}");
            return ExitCode::FAILURE;
        }
        println!("wrote {BASELINE}");
        return ExitCode::SUCCESS;
    }
    if failed {
        eprintln!(
            "instruction counts regressed more than {:.0} %",
            TOLERANCE * 100.0
        );
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
