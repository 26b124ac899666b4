//! The fan-out of `server_fanout`, measured the long way: 200 000 iterations per case,
//! reporting the minimum and the median per iteration, which shrug off the preemptions
//! that move criterion's mean on a shared machine. Prints the ratios.
//!
//! `cargo bench --bench server_fanout_steady`

mod support;

use std::time::Instant as StdInstant;
use support::{eds_body, fanout_setup, EDS};
use xds_sansio::server::{ResourceStore, StreamSet};
use xds_sansio::Instant;

const ITERATIONS: usize = 200_000;

fn setup(streams: usize, resources: usize) -> (ResourceStore, StreamSet) {
    fanout_setup(streams, resources, 10)
}

/// (min, median) nanoseconds per iteration.
fn measure(streams: usize, resources: usize) -> (u128, u128) {
    let (mut store, mut set) = setup(streams, resources);
    let bodies = [eds_body("target", 2), eds_body("target", 3)];
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
