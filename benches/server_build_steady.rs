//! The 10 000-cluster SotW CDS build of `server_build`, measured the long way: the minimum
//! and the median of 300 runs each of the build, of a plain clone of the `Vec<Any>` it
//! returns (the floor: one `String` and one `Bytes` clone per resource), and of the prost
//! encode of the response. Prints the ratios.
//!
//! `cargo bench --bench server_build_steady`

mod support;

use prost::Message;
use std::hint::black_box;
use std::time::Instant as StdInstant;
use support::{cds_wildcard_stream as stream, cluster_body, CDS};
use xds_sansio::server::ResourceStore;
use xds_sansio::{Instant, Response};

const RUNS: usize = 300;

/// (min, median) microseconds of `f`, its output dropped outside the timing.
fn measure<T>(mut f: impl FnMut() -> T) -> (f64, f64) {
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t = StdInstant::now();
        let out = f();
        samples.push(t.elapsed().as_secs_f64() * 1e6);
        drop(black_box(out));
    }
    samples.sort_by(f64::total_cmp);
    (samples[0], samples[RUNS / 2])
}

fn main() {
    for filler in [150usize, 512] {
        let mut store = ResourceStore::new();
        for i in 0..10_000 {
            let name = format!("cluster-{i:05}");
            store.set(CDS, &name, cluster_body(&name, filler)).unwrap();
        }
        let Some(Response::Sotw(response)) = stream().poll_response(Instant::ZERO, &store) else {
            panic!("no response");
        };
        let encoded = stream()
            .poll_response_encoded(Instant::ZERO, &store)
            .unwrap();
        assert_eq!(encoded.bytes, response.encode_to_vec(), "the same bytes");
        // Warm the allocator up once.
        let _ = measure(|| response.encode_to_vec());
        let (b_min, b_med) = measure(|| {
            let mut s = stream();
            s.poll_response(Instant::ZERO, &store)
        });
        let (w_min, w_med) = measure(|| {
            let mut s = stream();
            s.poll_response_encoded(Instant::ZERO, &store)
        });
        let (c_min, c_med) = measure(|| response.resources.clone());
        let (e_min, e_med) = measure(|| response.encode_to_vec());
        println!(
            "{filler} B bodies: build min {b_min:.0} us median {b_med:.0} us; Vec<Any> clone \
             median {c_med:.0} us (min {c_min:.0}); encode min {e_min:.0} us median {e_med:.0} us; \
             ratio build/encode min {:.2} median {:.2}",
            b_min / e_min,
            b_med / e_med
        );
        println!(
            "{filler} B bodies: build_encoded (the wire bytes) min {w_min:.0} us median \
             {w_med:.0} us; ratio build_encoded/encode min {:.2} median {:.2}",
            w_min / e_min,
            w_med / e_med
        );
    }
}
