//! The bodies both sides serve: the 10 000 clusters of `common::cluster` at generation 1,
//! then cluster 0 at generations 2 and 3 (the fan-out's changes), written length-delimited
//! (u32 little-endian length, then the bytes) for the Go side.

use crate::common::cluster_bytes;
use bytes::Bytes;
use std::io::Write;

pub const N: usize = 10_000;

pub fn base() -> Vec<Bytes> {
    (0..N).map(|i| cluster_bytes(i, 1)).collect()
}

/// The body of cluster 0 at fan-out round `k` (never the previous one); the Go side uses
/// the same alternation (generation 2 + k % 2).
pub fn changed(k: usize) -> Bytes {
    cluster_bytes(0, 2 + (k % 2) as u32)
}

pub fn name(i: usize) -> String {
    format!("cluster-{i:05}")
}

pub fn write(path: &str) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    let extra = [cluster_bytes(0, 2), cluster_bytes(0, 3)];
    for b in base().iter().chain(extra.iter()) {
        out.write_all(&(b.len() as u32).to_le_bytes())?;
        out.write_all(b)?;
    }
    out.flush()
}
