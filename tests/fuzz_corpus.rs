//! Replays the committed fuzz corpus (fuzz/corpus/<target>/*) through the fuzz target
//! bodies on stable, so every input that ever found a bug stays a regression test.
#![cfg(feature = "fuzzing")]

use std::path::Path;

fn replay(target: &str, body: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_file() {
            body(&std::fs::read(&path).unwrap());
            count += 1;
        }
    }
    assert!(count > 0, "empty corpus for {target}");
    count
}

#[test]
fn names_corpus() {
    replay("names", xds_sansio::fuzzing::names);
}

#[test]
fn decode_corpus() {
    replay("decode", xds_sansio::fuzzing::decode);
}
