//! What every section shares: the Cluster bodies (real envoy-types `Cluster`s), the
//! interleaved timing loop and its report.

use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig,
};
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::{
    config_source::ConfigSourceSpecifier, AggregatedConfigSource, ApiVersion, ConfigSource,
};
use envoy_types::pb::google::protobuf::{Duration as PbDuration, UInt32Value};
use prost::Message;
use std::time::{Duration, Instant};

pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// Cluster `i`, an EDS cluster over ADS; `generation` changes `alt_stat_name` (a real
/// change of the body). About 110 bytes encoded.
pub fn cluster(i: usize, generation: u32) -> Cluster {
    let name = format!("cluster-{i:05}");
    Cluster {
        alt_stat_name: format!("{name}-g{generation}"),
        connect_timeout: Some(PbDuration {
            seconds: 1,
            nanos: 250_000_000,
        }),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ConfigSource {
                resource_api_version: ApiVersion::V3 as i32,
                config_source_specifier: Some(ConfigSourceSpecifier::Ads(
                    AggregatedConfigSource {},
                )),
                ..Default::default()
            }),
            service_name: format!("{name}.svc.cluster.local"),
        }),
        per_connection_buffer_limit_bytes: Some(UInt32Value { value: 32_768 }),
        name,
        ..Default::default()
    }
}

pub fn cluster_bytes(i: usize, generation: u32) -> Bytes {
    Bytes::from(cluster(i, generation).encode_to_vec())
}

/// One contender of an interleaved comparison: runs its setup untimed and returns the
/// time of the span it measures.
pub type Contender<'a> = (&'a str, Box<dyn FnMut() -> Duration + 'a>);

/// Label, median, first and third quartiles (seconds).
pub type Timing = (String, f64, f64, f64);

/// The median of the contender labelled `label` in `results`, NaN when there is none.
pub fn median_of(results: &[Timing], label: &str) -> f64 {
    results
        .iter()
        .find(|(l, ..)| l == label)
        .map_or(f64::NAN, |(_, t, ..)| *t)
}

/// Runs every contender once per iteration, the order rotated each iteration, `iterations`
/// times; returns the median and quartiles of each, in the order given.
pub fn interleave(iterations: usize, contenders: &mut [Contender<'_>]) -> Vec<Timing> {
    let n = contenders.len();
    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(iterations); n];
    // One untimed warm-up round.
    for (_, run) in contenders.iter_mut() {
        let _ = run();
    }
    for it in 0..iterations {
        for k in 0..n {
            let idx = (it + k) % n;
            let d = (contenders[idx].1)();
            samples[idx].push(d.as_secs_f64());
        }
    }
    contenders
        .iter()
        .zip(samples)
        .map(|((label, _), mut v)| {
            v.sort_by(f64::total_cmp);
            (
                label.to_string(),
                v[v.len() / 2],
                v[v.len() / 4],
                v[v.len() * 3 / 4],
            )
        })
        .collect()
}

/// Prints the medians with the ratio of each to `base` (a label of the list).
pub fn report(title: &str, results: &[Timing], base: &str) {
    let b = results
        .iter()
        .find(|(l, ..)| l == base)
        .map(|(_, t, ..)| *t)
        .unwrap_or(f64::NAN);
    println!("\n## {title}\n");
    println!("| contender | median | quartiles | ratio to `{base}` |");
    println!("|---|---|---|---|");
    for (label, t, q1, q3) in results {
        println!(
            "| {label} | {} | {} – {} | {:.2} |",
            human(*t),
            human(*q1),
            human(*q3),
            t / b
        );
    }
}

pub fn human(secs: f64) -> String {
    if secs >= 1e-3 {
        format!("{:.2} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

/// Times `f`.
pub fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = f();
    (start.elapsed(), out)
}
