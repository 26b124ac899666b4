//! Replays the committed fuzz corpus (fuzz/corpus/<target>/*) through the fuzz target
//! bodies on stable, so every seed and every input that ever found a bug stays a test.
//!
//! `XDS_SANSIO_WRITE_CORPUS=1 cargo test --all-features --test fuzz_corpus` rewrites the
//! seeds made from the scenarios (files named `scenario-*`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use prost::Message;
use xds_sansio::message::{Request, Response, Transport, Variant};
use xds_sansio_conformance::fuzzing::{self, encode, Op, NAMES, TYPES};
use xds_sansio_conformance::script::{self, Model, TransportSpec};
use xds_sansio_conformance::transcript::Entry;

/// A fuzz target body.
type Body = fn(&[u8]);

const TARGETS: [(&str, Body); 6] = [
    ("names", fuzzing::names),
    ("decode", fuzzing::decode),
    ("client_session", fuzzing::client_session),
    ("server_session", fuzzing::server_session),
    ("pair", fuzzing::pair),
    ("refs", fuzzing::refs),
];

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

#[test]
fn every_corpus_input_passes_its_target() {
    for (target, body) in TARGETS {
        let mut count = 0;
        for entry in std::fs::read_dir(corpus_dir(target)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                body(&std::fs::read(&path).unwrap());
                count += 1;
            }
        }
        assert!(count > 0, "empty corpus for {target}");
    }
}

fn index(table: &[&str], name: &str) -> Option<u8> {
    table.iter().position(|n| *n == name).map(|i| i as u8)
}

fn encoded_request(r: &Request) -> Vec<u8> {
    match r {
        Request::Sotw(r) => r.encode_to_vec(),
        Request::Delta(r) => r.encode_to_vec(),
    }
}

fn encoded_response(r: &Response) -> Vec<u8> {
    match r {
        Response::Sotw(r) => r.encode_to_vec(),
        Response::Delta(r) => r.encode_to_vec(),
    }
}

fn names_of(r: &Request) -> Vec<String> {
    match r {
        Request::Sotw(r) => r.resource_names.clone(),
        Request::Delta(r) => r.resource_names_subscribe.clone(),
    }
}

/// The config byte of the session targets for a scenario.
fn config(variant: Variant, transport: &TransportSpec) -> u8 {
    let mut byte = if variant == Variant::Delta { 1 } else { 0 };
    if let TransportSpec::PerType(url) = transport {
        if let Some(i) = index(&TYPES, url) {
            byte |= 2 | (i << 4);
        }
    }
    byte
}

fn seed(target: &str, name: &str, bytes: Vec<u8>) {
    std::fs::write(corpus_dir(target).join(format!("scenario-{name}")), bytes).unwrap();
}

#[test]
fn write_seeds_from_scenarios() {
    if std::env::var_os("XDS_SANSIO_WRITE_CORPUS").is_none() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files = vec![];
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "xds") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut messages = BTreeSet::new();
    for path in files {
        let name = path
            .strip_prefix(&root)
            .unwrap()
            .display()
            .to_string()
            .replace(['/', '.'], "_");
        let scenario = script::parse(&std::fs::read_to_string(&path).unwrap(), &name).unwrap();
        let report = script::run(&scenario);
        let config = config(scenario.variant, &scenario.transport);
        let _ = Transport::Aggregated;
        for entry in report.client_view.iter().chain(&report.server_view) {
            match entry {
                Entry::Request { request, .. } => messages.insert(encoded_request(request)),
                Entry::Response { response, .. } => messages.insert(encoded_response(response)),
                Entry::Store { .. } => false,
            };
        }
        if matches!(scenario.model, Model::Client | Model::Both) {
            let mut ops = vec![];
            for entry in &report.client_view {
                match entry {
                    Entry::Request { request, .. } => {
                        let t = index(&TYPES, request.type_url()).unwrap_or(0);
                        for n in names_of(request).iter().filter_map(|n| index(&NAMES, n)) {
                            ops.push(Op::Subscribe(t, n));
                        }
                    }
                    Entry::Response { response, .. } => {
                        ops.push(Op::Message(encoded_response(response)))
                    }
                    Entry::Store { .. } => {}
                }
            }
            let mut bytes = vec![config];
            bytes.extend(encode(&ops));
            seed("client_session", &name, bytes);
        }
        if matches!(scenario.model, Model::Server | Model::Both) {
            let mut ops = vec![];
            let mut pair_ops = vec![];
            for entry in &report.server_view {
                match entry {
                    Entry::Request { request, .. } => {
                        ops.push(Op::Message(encoded_request(request)));
                        let t = index(&TYPES, request.type_url()).unwrap_or(0);
                        for n in names_of(request).iter().filter_map(|n| index(&NAMES, n)) {
                            pair_ops.push(Op::Subscribe(t, n));
                        }
                    }
                    Entry::Store {
                        type_url,
                        name,
                        version,
                        ..
                    } => {
                        if let (Some(t), Some(n)) = (index(&TYPES, type_url), index(&NAMES, name)) {
                            let op = if version.is_some() {
                                Op::Set(t, n, 1)
                            } else {
                                Op::Unsubscribe(t, n)
                            };
                            ops.push(op.clone());
                            pair_ops.push(op);
                        }
                    }
                    Entry::Response { .. } => pair_ops.push(Op::Message(vec![0; 4])),
                }
            }
            let mut bytes = vec![config];
            bytes.extend(encode(&ops));
            seed("server_session", &name, bytes);
            let mut bytes = vec![config];
            pair_ops.push(Op::Wait(100));
            bytes.extend(encode(&pair_ops));
            seed("pair", &name, bytes);
        }
    }
    for (i, message) in messages.into_iter().enumerate() {
        seed("decode", &format!("message-{i:03}"), message);
    }
}
