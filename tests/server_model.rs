//! A hand-rolled model client (not the crate's client) driven against the server through
//! random store changes and subscription changes: after every step, once the responses are
//! applied and ACKed, the client's cache must equal the store on what it subscribes to.

mod server_common;

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use server_common::*;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::server::{ResourceStore, ServerConfig, ServerStream};
use xds_sansio::{Request, Response, Transport, Variant};

const NAMES: [&str; 5] = ["a", "b", "c", "d", "e"];

fn store_view(store: &ResourceStore, t: &str) -> BTreeMap<String, Bytes> {
    store
        .iter(t)
        .map(|r| (r.name().to_string(), r.body().clone()))
        .collect()
}

/// Delta: EDS by name, CDS by wildcard plus names, on one ADS stream.
fn delta_conversation(ops: &[(u8, u8, u8)]) -> bool {
    let mut store = ResourceStore::new();
    let mut s = ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated));
    let mut eds_subs: BTreeSet<String> = BTreeSet::new();
    let mut cache: BTreeMap<(String, String), (String, Bytes)> = BTreeMap::new();
    let mut first = true;
    let send = |s: &mut ServerStream, r: DeltaDiscoveryRequest| {
        s.handle_request(T0, Request::Delta(r));
    };
    // CDS wildcard from the start.
    send(&mut s, delta(CDS, &["*"], &[], ""));
    for &(op, x, y) in ops {
        let name = NAMES[x as usize % NAMES.len()];
        let t = if y % 2 == 0 { EDS } else { CDS };
        match op % 5 {
            0 | 1 => {
                store.set(t, name, body(name, &y.to_string())).unwrap();
            }
            2 => {
                store.remove(t, name);
            }
            3 => {
                let mut r = delta(EDS, &[name], &[], "");
                if !first {
                    r.node = None;
                }
                first = false;
                eds_subs.insert(name.to_string());
                send(&mut s, r);
            }
            4 if y % 4 == 1 => {
                // Reconnect: a new stream; the client tells what it holds, per type.
                s = ServerStream::new(ServerConfig::new(Variant::Delta, Transport::Aggregated));
                for t in [CDS, EDS] {
                    let subs: Vec<&str> = if t == CDS {
                        vec!["*"]
                    } else {
                        eds_subs.iter().map(String::as_str).collect()
                    };
                    let mut r = delta(t, &subs, &[], "");
                    r.initial_resource_versions = cache
                        .iter()
                        .filter(|((ct, _), _)| ct == t)
                        .map(|((_, n), (v, _))| (n.clone(), v.clone()))
                        .collect();
                    send(&mut s, r);
                }
                first = false;
            }
            _ => {
                if eds_subs.remove(name) {
                    cache.remove(&(EDS.to_string(), name.to_string()));
                }
                send(&mut s, delta(EDS, &[], &[name], ""));
            }
        }
        let mut guard = 0;
        while let Some(resp) = s.poll_response(T0, &store) {
            guard += 1;
            assert!(guard < 20);
            let Response::Delta(d) = resp else {
                return false;
            };
            for r in &d.resources {
                let key = (d.type_url.clone(), r.name.clone());
                match &r.resource {
                    Some(any) => {
                        assert_eq!(any.type_url, d.type_url);
                        cache.insert(key, (r.version.clone(), any.value.clone()));
                    }
                    None if r.version.is_empty() => {
                        cache.remove(&key);
                    }
                    None => assert_eq!(cache.get(&key).map(|c| &c.0), Some(&r.version)),
                }
            }
            for name in &d.removed_resources {
                cache.remove(&(d.type_url.clone(), name.clone()));
            }
            let mut ack = delta(&d.type_url, &[], &[], &d.nonce);
            ack.node = None;
            send(&mut s, ack);
        }
        // CDS: everything; EDS: the subscribed names.
        let cds_cache: BTreeMap<String, Bytes> = cache
            .iter()
            .filter(|((t, _), _)| t == CDS)
            .map(|((_, n), (_, b))| (n.clone(), b.clone()))
            .collect();
        if cds_cache != store_view(&store, CDS) {
            return false;
        }
        let eds_cache: BTreeMap<String, Bytes> = cache
            .iter()
            .filter(|((t, _), _)| t == EDS)
            .map(|((_, n), (_, b))| (n.clone(), b.clone()))
            .collect();
        let eds_store: BTreeMap<String, Bytes> = store_view(&store, EDS)
            .into_iter()
            .filter(|(n, _)| eds_subs.contains(n))
            .collect();
        if eds_cache != eds_store {
            return false;
        }
    }
    true
}

/// SotW: CDS wildcard (full state: the cache is exactly the store) and EDS by name
/// (changes only: every subscribed resource that exists is current).
fn sotw_conversation(ops: &[(u8, u8, u8)]) -> bool {
    let mut store = ResourceStore::new();
    let mut s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
    let mut eds_subs: BTreeSet<String> = BTreeSet::new();
    let mut cds: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut eds: BTreeMap<String, Bytes> = BTreeMap::new();
    let mut versions: BTreeMap<String, (String, String)> = BTreeMap::new(); // type -> (version, nonce)
    s.handle_request(T0, Request::Sotw(sotw(CDS, "", &[], "")));
    let eds_request = |subs: &BTreeSet<String>, versions: &BTreeMap<String, (String, String)>| {
        let (v, n) = versions.get(EDS).cloned().unwrap_or_default();
        let names: Vec<&str> = subs.iter().map(String::as_str).collect();
        DiscoveryRequest {
            node: None,
            ..sotw(EDS, &v, &names, &n)
        }
    };
    for &(op, x, y) in ops {
        let name = NAMES[x as usize % NAMES.len()];
        let t = if y % 2 == 0 { EDS } else { CDS };
        match op % 5 {
            0 | 1 => {
                store.set(t, name, body(name, &y.to_string())).unwrap();
            }
            2 => {
                store.remove(t, name);
            }
            3 => {
                eds_subs.insert(name.to_string());
                s.handle_request(T0, Request::Sotw(eds_request(&eds_subs, &versions)));
            }
            4 if y % 4 == 1 => {
                // Reconnect: a new stream; the first requests carry the versions held.
                s = ServerStream::new(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
                let cds_version = versions.get(CDS).map(|v| v.0.clone()).unwrap_or_default();
                s.handle_request(T0, Request::Sotw(sotw(CDS, &cds_version, &[], "")));
                for v in versions.values_mut() {
                    v.1.clear();
                }
                if !eds_subs.is_empty() {
                    s.handle_request(T0, Request::Sotw(eds_request(&eds_subs, &versions)));
                }
            }
            _ => {
                if eds_subs.remove(name) {
                    eds.remove(name);
                }
                s.handle_request(T0, Request::Sotw(eds_request(&eds_subs, &versions)));
            }
        }
        let mut guard = 0;
        while let Some(resp) = s.poll_response(T0, &store) {
            guard += 1;
            assert!(guard < 20);
            let Response::Sotw(r) = resp else {
                return false;
            };
            let names = sotw_names(&r);
            if r.type_url == CDS {
                cds = names
                    .into_iter()
                    .zip(r.resources.iter().map(|a| a.value.clone()))
                    .collect();
            } else {
                for (n, a) in names.into_iter().zip(&r.resources) {
                    if eds_subs.contains(&n) {
                        eds.insert(n, a.value.clone());
                    }
                }
            }
            versions.insert(
                r.type_url.clone(),
                (r.version_info.clone(), r.nonce.clone()),
            );
            let ack = if r.type_url == CDS {
                DiscoveryRequest {
                    node: None,
                    ..sotw(CDS, &r.version_info, &[], &r.nonce)
                }
            } else {
                eds_request(&eds_subs, &versions)
            };
            s.handle_request(T0, Request::Sotw(ack));
        }
        if cds != store_view(&store, CDS) {
            return false;
        }
        for n in &eds_subs {
            if let Some(r) = store.get(EDS, n) {
                if eds.get(n) != Some(r.body()) {
                    return false;
                }
            }
        }
    }
    true
}

#[test]
fn delta_client_cache_equals_the_store() {
    fn prop(ops: Vec<(u8, u8, u8)>) -> bool {
        delta_conversation(&ops)
    }
    quickcheck::QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<(u8, u8, u8)>) -> bool);
}

#[test]
fn sotw_client_cache_equals_the_store() {
    fn prop(ops: Vec<(u8, u8, u8)>) -> bool {
        sotw_conversation(&ops)
    }
    quickcheck::QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<(u8, u8, u8)>) -> bool);
}
