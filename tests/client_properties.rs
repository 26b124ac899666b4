//! quickcheck properties of the client (issues 3 and 4).

mod client_support;

use bytes::Bytes;
use client_support::*;
use quickcheck::{Arbitrary, Gen, QuickCheck};
use std::collections::{BTreeMap, BTreeSet};
use xds_sansio::client::{Client, ClientEvent};
use xds_sansio::pb::discovery::{DeltaDiscoveryResponse, DiscoveryResponse};
use xds_sansio::{Request, Response};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];
const TYPES: [&str; 2] = [EDS, CDS];

fn validator() -> Box<dyn xds_sansio::client::Validator> {
    Box::new(|_: &str, _: &str, body: &Bytes| {
        if body.ends_with(b"bad") {
            Err("bad".into())
        } else {
            Ok(())
        }
    })
}

fn payload(p: u8) -> String {
    if p % 4 == 0 {
        "bad".into()
    } else {
        format!("p{p}")
    }
}

// ---------------------------------------------------------------- SotW

#[derive(Clone, Debug)]
enum SotwOp {
    Subscribe(usize, usize),
    Unsubscribe(usize, usize),
    Respond {
        ty: usize,
        version: u8,
        resources: Vec<(usize, u8)>,
    },
    Poll,
    Reconnect,
    Tick(u8),
}

impl Arbitrary for SotwOp {
    fn arbitrary(g: &mut Gen) -> SotwOp {
        let ty = usize::arbitrary(g) % 2;
        let name = usize::arbitrary(g) % 4;
        match u8::arbitrary(g) % 10 {
            0 | 1 => SotwOp::Subscribe(ty, name),
            2 => SotwOp::Unsubscribe(ty, name),
            3..=5 => {
                let n = usize::arbitrary(g) % 4;
                SotwOp::Respond {
                    ty,
                    version: u8::arbitrary(g) % 8,
                    resources: (0..n)
                        .map(|_| (usize::arbitrary(g) % 4, u8::arbitrary(g)))
                        .collect(),
                }
            }
            6 | 7 => SotwOp::Poll,
            8 => SotwOp::Reconnect,
            _ => SotwOp::Tick(u8::arbitrary(g) % 20),
        }
    }
}

#[derive(Default)]
struct SotwModel {
    ever: BTreeSet<usize>,
    names: BTreeMap<usize, BTreeSet<usize>>,
    version: BTreeMap<usize, String>,
    nonce: BTreeMap<usize, String>,
    last_rejected: BTreeMap<usize, bool>,
    acks: std::collections::VecDeque<String>,
}

/// Runs `ops`, checking every request against the model; returns every output as text.
fn run_sotw(ops: &[SotwOp]) -> Result<Vec<String>, String> {
    let mut c = sotw_ads();
    for ty in TYPES {
        c.set_validator(ty, validator());
    }
    let mut m = SotwModel::default();
    let mut now = 0u64;
    let mut nonce_counter = 0u32;
    let mut out = Vec::new();
    c.connected(t(now));
    let drain = |c: &mut Client,
                 m: &mut SotwModel,
                 now: u64,
                 out: &mut Vec<String>|
     -> Result<(), String> {
        while let Some(req) = c.poll_request(t(now)) {
            out.push(format!("{req:?}"));
            let Request::Sotw(req) = req else {
                return Err("delta request".into());
            };
            let ty = TYPES
                .iter()
                .position(|u| *u == req.type_url)
                .ok_or("unknown type")?;
            let version = m.version.get(&ty).cloned().unwrap_or_default();
            let nonce = m.nonce.get(&ty).cloned().unwrap_or_default();
            // ACK carries the version just applied; NACK the previous good one; a change
            // request the current one: all equal the model's accepted version.
            if req.version_info != version {
                return Err(format!(
                    "version {:?} != model {version:?}",
                    req.version_info
                ));
            }
            // Every request's nonce is the latest response nonce of its type on the stream.
            if req.response_nonce != nonce {
                return Err(format!(
                    "nonce {:?} != latest {nonce:?}",
                    req.response_nonce
                ));
            }
            // A NACK answers a rejected response, with that response's nonce.
            if req.error_detail.is_some() && !m.last_rejected.get(&ty).copied().unwrap_or(false) {
                return Err("NACK of an accepted response".into());
            }
        }
        while let Some(ev) = c.poll_event() {
            if let ClientEvent::Acked { version, .. } = &ev {
                if m.acks.pop_front().as_deref() != Some(version.as_str()) {
                    return Err("Acked event version differs from the applied one".into());
                }
            }
            out.push(format!("{ev:?}"));
        }
        Ok(())
    };
    for op in ops {
        match op {
            SotwOp::Subscribe(ty, n) => {
                c.subscribe(TYPES[*ty], &[NAMES[*n]])
                    .map_err(|e| e.to_string())?;
                m.ever.insert(*ty);
                m.names.entry(*ty).or_default().insert(*n);
            }
            SotwOp::Unsubscribe(ty, n) => {
                c.unsubscribe(TYPES[*ty], &[NAMES[*n]])
                    .map_err(|e| e.to_string())?;
                m.names.entry(*ty).or_default().remove(n);
            }
            SotwOp::Respond {
                ty,
                version,
                resources,
            } => {
                nonce_counter += 1;
                let nonce = format!("n{nonce_counter}");
                let version = format!("v{version}");
                let res: Vec<(&str, String)> = resources
                    .iter()
                    .map(|(n, p)| (NAMES[*n], payload(*p)))
                    .collect();
                let res_ref: Vec<(&str, &str)> =
                    res.iter().map(|(n, p)| (*n, p.as_str())).collect();
                c.handle_response(t(now), sotw(TYPES[*ty], &version, &nonce, &res_ref));
                if m.ever.contains(ty) {
                    let wanted = m.names.get(ty).cloned().unwrap_or_default();
                    let names: Vec<usize> = resources.iter().map(|(n, _)| *n).collect();
                    let dup = names.iter().collect::<BTreeSet<_>>().len() != names.len();
                    let bad = resources
                        .iter()
                        .any(|(n, p)| wanted.contains(n) && payload(*p) == "bad");
                    let rejected = dup || bad;
                    if !rejected {
                        m.acks.push_back(version.clone());
                        m.version.insert(*ty, version);
                    }
                    m.last_rejected.insert(*ty, rejected);
                    m.nonce.insert(*ty, nonce);
                }
            }
            SotwOp::Poll => drain(&mut c, &mut m, now, &mut out)?,
            SotwOp::Reconnect => {
                drain(&mut c, &mut m, now, &mut out)?;
                c.disconnected(t(now));
                c.connected(t(now));
                m.nonce.clear();
                m.last_rejected.clear();
            }
            SotwOp::Tick(s) => {
                now += u64::from(*s);
                c.handle_timeout(t(now));
            }
        }
    }
    drain(&mut c, &mut m, now, &mut out)?;
    Ok(out)
}

#[test]
fn prop_sotw_versions_nonces_and_determinism() {
    fn prop(ops: Vec<SotwOp>) -> bool {
        match (run_sotw(&ops), run_sotw(&ops)) {
            (Ok(a), Ok(b)) => a == b,
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{e}");
                false
            }
        }
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<SotwOp>) -> bool);
}

// ---------------------------------------------------------------- delta

#[derive(Clone, Debug)]
enum DeltaOp {
    Subscribe(usize),
    Unsubscribe(usize),
    /// (name, version, payload, ttl seconds or 0, body-less)
    Respond {
        resources: Vec<(usize, u8, u8, u8, bool)>,
        removed: Vec<usize>,
    },
    Poll,
    Reconnect,
    Tick(u8),
}

impl Arbitrary for DeltaOp {
    fn arbitrary(g: &mut Gen) -> DeltaOp {
        match u8::arbitrary(g) % 10 {
            0 | 1 => DeltaOp::Subscribe(usize::arbitrary(g) % 4),
            2 => DeltaOp::Unsubscribe(usize::arbitrary(g) % 4),
            3..=5 => {
                let n = usize::arbitrary(g) % 4;
                let resources = (0..n)
                    .map(|_| {
                        (
                            usize::arbitrary(g) % 4,
                            u8::arbitrary(g) % 3,
                            u8::arbitrary(g),
                            u8::arbitrary(g) % 6,
                            u8::arbitrary(g) % 5 == 0,
                        )
                    })
                    .collect();
                let removed = (0..usize::arbitrary(g) % 2)
                    .map(|_| usize::arbitrary(g) % 4)
                    .collect();
                DeltaOp::Respond { resources, removed }
            }
            6 | 7 => DeltaOp::Poll,
            8 => DeltaOp::Reconnect,
            _ => DeltaOp::Tick(u8::arbitrary(g) % 8),
        }
    }
}

#[derive(Default)]
struct DeltaModel {
    desired: BTreeSet<usize>,
    /// name -> (version, ttl deadline)
    held: BTreeMap<usize, (String, Option<u64>)>,
    /// What the server tracks, from the requests it received.
    server: BTreeSet<String>,
    /// Names unsubscribed then subscribed again since the last request.
    readded: BTreeSet<String>,
}

fn run_delta(ops: &[DeltaOp]) -> Result<Vec<String>, String> {
    let mut c = delta_ads();
    c.set_validator(EDS, validator());
    let mut m = DeltaModel::default();
    let mut now = 0u64;
    let mut counter = 0u32;
    let mut out = Vec::new();
    let mut first_of_stream = true;
    c.connected(t(0));
    let drain = |c: &mut Client,
                 m: &mut DeltaModel,
                 now: u64,
                 first: &mut bool,
                 out: &mut Vec<String>|
     -> Result<(), String> {
        while let Some(req) = c.poll_request(t(now)) {
            out.push(format!("{req:?}"));
            let Request::Delta(req) = req else {
                return Err("sotw request".into());
            };
            if *first {
                *first = false;
                // initial_resource_versions = exactly the held, accepted, unexpired ones.
                let expect: BTreeMap<String, String> = m
                    .held
                    .iter()
                    .map(|(n, (v, _))| (NAMES[*n].to_string(), v.clone()))
                    .collect();
                if req.initial_resource_versions != expect {
                    return Err(format!(
                        "initial_resource_versions {:?} != {expect:?}",
                        req.initial_resource_versions
                    ));
                }
                m.server.clear();
            }
            for n in &m.readded {
                if m.desired
                    .contains(&NAMES.iter().position(|x| x == n).unwrap_or(9))
                    && !req.resource_names_subscribe.contains(n)
                {
                    return Err(format!("re-added {n} not re-subscribed"));
                }
            }
            m.readded.clear();
            for n in &req.resource_names_subscribe {
                m.server.insert(n.clone());
            }
            for n in &req.resource_names_unsubscribe {
                m.server.remove(n);
            }
        }
        while let Some(ev) = c.poll_event() {
            out.push(format!("{ev:?}"));
        }
        Ok(())
    };
    for op in ops {
        match op {
            DeltaOp::Subscribe(n) => {
                c.subscribe(EDS, &[NAMES[*n]]).map_err(|e| e.to_string())?;
                if m.desired.insert(*n) && m.server.contains(NAMES[*n]) {
                    m.readded.insert(NAMES[*n].to_string());
                }
            }
            DeltaOp::Unsubscribe(n) => {
                c.unsubscribe(EDS, &[NAMES[*n]])
                    .map_err(|e| e.to_string())?;
                m.desired.remove(n);
                m.held.remove(n);
            }
            DeltaOp::Respond { resources, removed } => {
                counter += 1;
                let nonce = format!("n{counter}");
                let rs = resources
                    .iter()
                    .map(|(n, v, p, ttl, bodyless)| {
                        let mut r = res(
                            EDS,
                            NAMES[*n],
                            &format!("v{v}"),
                            (!bodyless).then(|| payload(*p)).as_deref(),
                        );
                        if *ttl > 0 {
                            r.ttl = Some(prost_types::Duration {
                                seconds: i64::from(*ttl),
                                nanos: 0,
                            });
                        }
                        r
                    })
                    .collect();
                let removed_names: Vec<&str> = removed.iter().map(|n| NAMES[*n]).collect();
                c.handle_response(t(now), delta_raw(EDS, &nonce, rs, &removed_names));
                // A name twice, in the resources, the removals or both: NACKed whole.
                let mut seen = BTreeSet::new();
                let dup = resources
                    .iter()
                    .map(|r| r.0)
                    .chain(removed.iter().copied())
                    .any(|n| !seen.insert(n));
                let wanted: Vec<_> = resources
                    .iter()
                    .filter(|r| m.desired.contains(&r.0))
                    .collect();
                let bad = wanted.iter().any(|r| !r.4 && payload(r.2) == "bad");
                if !dup && !bad {
                    for (n, v, _, ttl, bodyless) in wanted {
                        let v = format!("v{v}");
                        let deadline = (*ttl > 0).then(|| now + u64::from(*ttl));
                        match (bodyless, m.held.get(n)) {
                            (false, _) => {
                                m.held.insert(*n, (v, deadline));
                            }
                            (true, Some((hv, _))) if *hv == v => {
                                m.held.insert(*n, (v, deadline));
                            }
                            (true, _) => {
                                m.held.remove(n);
                            }
                        }
                    }
                    for n in removed {
                        m.held.remove(n);
                    }
                }
            }
            DeltaOp::Poll => drain(&mut c, &mut m, now, &mut first_of_stream, &mut out)?,
            DeltaOp::Reconnect => {
                drain(&mut c, &mut m, now, &mut first_of_stream, &mut out)?;
                c.disconnected(t(now));
                c.connected(t(now));
                first_of_stream = true;
                m.readded.clear();
            }
            DeltaOp::Tick(s) => {
                now += u64::from(*s);
                c.handle_timeout(t(now));
                m.held.retain(|_, (_, d)| d.is_none_or(|d| d > now));
            }
        }
    }
    drain(&mut c, &mut m, now, &mut first_of_stream, &mut out)?;
    // Merging never loses the latest intent: the server tracks exactly what is wanted.
    let want: BTreeSet<String> = m.desired.iter().map(|n| NAMES[*n].to_string()).collect();
    if m.server != want && !(first_of_stream && want.is_empty()) {
        return Err(format!(
            "server tracks {:?}, client wants {want:?}",
            m.server
        ));
    }
    Ok(out)
}

#[test]
fn prop_delta_initial_versions_merging_and_determinism() {
    fn prop(ops: Vec<DeltaOp>) -> bool {
        match (run_delta(&ops), run_delta(&ops)) {
            (Ok(a), Ok(b)) => a == b,
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("{e}");
                false
            }
        }
    }
    QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<DeltaOp>) -> bool);
}

#[test]
fn responses_are_never_a_panic() {
    // Arbitrary bytes decoded as responses (where they decode) never panic the client.
    fn prop(bytes: Vec<u8>, delta_variant: bool) -> bool {
        use prost::Message;
        let mut c = if delta_variant {
            delta_ads()
        } else {
            sotw_ads()
        };
        c.subscribe(CDS, &[]).unwrap();
        c.subscribe(EDS, &["a"]).unwrap();
        c.connected(t(0));
        let buf = Bytes::from(bytes);
        let resp = if delta_variant {
            DeltaDiscoveryResponse::decode(buf)
                .ok()
                .map(Response::Delta)
        } else {
            DiscoveryResponse::decode(buf).ok().map(Response::Sotw)
        };
        if let Some(r) = resp {
            c.handle_response(t(1), r);
        }
        while c.poll_request(t(1)).is_some() {}
        while c.poll_event().is_some() {}
        c.handle_timeout(t(100));
        true
    }
    QuickCheck::new()
        .tests(500)
        .quickcheck(prop as fn(Vec<u8>, bool) -> bool);
}
