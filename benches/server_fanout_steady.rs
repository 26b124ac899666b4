//! The fan-out of `server_fanout`, measured the long way: 200 000 iterations per case,
//! reporting the minimum and the median per iteration, which shrug off the preemptions
//! that move criterion's mean on a shared machine. Prints the ratios.
//!
//! `cargo bench --bench server_fanout_steady`

use bytes::Bytes;
use std::time::Instant as StdInstant;
use xds_sansio::pb::discovery::DiscoveryRequest;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceStore, ServerConfig, StreamSet};
use xds_sansio::types::ENDPOINT;
use xds_sansio::{Instant, Request, Transport, Variant};

const EDS: &str = ENDPOINT.type_url;
const ITERATIONS: usize = 200_000;

fn body(name: &str, data: u8) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, 64]);
    out.extend(std::iter::repeat_n(data, 64));
    Bytes::from(out)
}

fn setup(streams: usize, resources: usize) -> (ResourceStore, StreamSet) {
    let mut store = ResourceStore::new();
    store.set(EDS, "target", body("target", 0)).unwrap();
    for r in 0..resources {
        let name = format!("r{r}");
        store.set(EDS, &name, body(&name, 1)).unwrap();
    }
    let mut set = StreamSet::new();
    for i in 0..streams {
        let mut names: Vec<String> = (0..3)
            .map(|k| format!("r{}", (i * 3 + k) % resources))
            .collect();
        if i < 10 {
            names.push("target".into());
        }
        let id = set.insert(ServerConfig::new(Variant::Sotw, Transport::Aggregated));
        let request = DiscoveryRequest {
            node: Some(Node {
                id: format!("node-{i}"),
                ..Node::default()
            }),
            resource_names: names,
            type_url: EDS.into(),
            ..DiscoveryRequest::default()
        };
        set.handle_request(id, Instant::ZERO, Request::Sotw(request))
            .unwrap();
    }
    while let Some(id) = set.poll_ready() {
        while set.poll_response(id, Instant::ZERO, &store).is_some() {}
        while set.poll_event(id).is_some() {}
    }
    (store, set)
}

/// (min, median) nanoseconds per iteration.
fn measure(streams: usize, resources: usize) -> (u128, u128) {
    let (mut store, mut set) = setup(streams, resources);
    let bodies = [body("target", 2), body("target", 3)];
    let mut samples = Vec::with_capacity(ITERATIONS);
    for k in 0..ITERATIONS {
        let t = StdInstant::now();
        store.set(EDS, "target", bodies[k % 2].clone()).unwrap();
        set.sync(&store);
        let mut sent = 0;
        while let Some(id) = set.poll_ready() {
            while let Some(r) = set.poll_response(id, Instant::ZERO, &store) {
                std::hint::black_box(&r);
                sent += 1;
            }
        }
        samples.push(t.elapsed().as_nanos());
        assert_eq!(sent, 10);
    }
    samples.sort_unstable();
    (samples[0], samples[samples.len() / 2])
}

fn main() {
    for (kind, small, large) in [
        ("same_store", (100, 30_000), (10_000, 30_000)),
        ("growing_store", (100, 300), (10_000, 30_000)),
    ] {
        let (s_min, s_med) = measure(small.0, small.1);
        let (l_min, l_med) = measure(large.0, large.1);
        println!(
            "{kind}: 100 streams min {s_min} ns median {s_med} ns; 10000 streams min {l_min} ns \
             median {l_med} ns; ratio min {:.2} median {:.2}",
            l_min as f64 / s_min as f64,
            l_med as f64 / s_med as f64
        );
    }
}
