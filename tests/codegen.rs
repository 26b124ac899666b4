//! The checked-in prost code under `src/pb/generated/` must be exactly what protox +
//! prost-build make of `proto/`. Rewrite it with:
//!
//! ```sh
//! XDS_SANSIO_REGENERATE=1 cargo test --test codegen
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use prost::Message;

/// The .proto files we own, relative to `proto/`.
const PROTO_FILES: &[&str] = &[
    "envoy/service/discovery/v3/discovery.proto",
    "envoy/service/discovery/v3/ads.proto",
    "envoy/config/core/v3/base.proto",
    "envoy/config/core/v3/address.proto",
    "envoy/type/v3/semantic_version.proto",
    "xds/core/v3/context_params.proto",
    "google/rpc/status.proto",
];

/// The descriptor set embedded for the JSON layer.
const DESCRIPTOR_FILE: &str = "descriptor.bin";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Generates the Rust code and the descriptor set into `out`.
fn generate(out: &Path) {
    let mut fds = protox::Compiler::new([root().join("proto")])
        .expect("proto include path")
        .include_imports(true)
        .include_source_info(true)
        .open_files(PROTO_FILES)
        .expect("the .proto files compile")
        .file_descriptor_set();
    fds.file.sort_by(|a, b| a.name().cmp(b.name()));

    let mut config = prost_build::Config::new();
    config
        .out_dir(out)
        .bytes(["."])
        .btree_map(["."])
        .extern_path(".google.protobuf.Any", "crate::pb::google::protobuf::Any")
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");
    config.compile_fds(fds.clone()).expect("prost-build");

    // The embedded descriptor set needs no comments: drop them to keep it small.
    for file in &mut fds.file {
        file.source_code_info = None;
    }
    fs::write(out.join(DESCRIPTOR_FILE), fds.encode_to_vec()).expect("write descriptor set");
}

fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .expect("read generated dir")
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, fs::read(&path).expect("read generated file"))
        })
        .collect();
    files.sort();
    files
}

#[test]
fn checked_in_code_matches_the_protos() {
    let checked_in = root().join("src/pb/generated");
    if std::env::var_os("XDS_SANSIO_REGENERATE").is_some() {
        for (name, _) in listing(&checked_in) {
            fs::remove_file(checked_in.join(name)).expect("remove stale file");
        }
        generate(&checked_in);
        eprintln!("regenerated {}", checked_in.display());
        return;
    }
    let fresh = std::env::temp_dir().join(format!("xds-sansio-codegen-{}", std::process::id()));
    let _ = fs::remove_dir_all(&fresh);
    fs::create_dir_all(&fresh).expect("temp dir");
    generate(&fresh);
    let (want, have) = (listing(&fresh), listing(&checked_in));
    let _ = fs::remove_dir_all(&fresh);
    let names = |l: &[(String, Vec<u8>)]| l.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&want),
        names(&have),
        "generated file set differs; run XDS_SANSIO_REGENERATE=1 cargo test --test codegen"
    );
    for ((name, want), (_, have)) in want.iter().zip(&have) {
        assert!(
            want == have,
            "src/pb/generated/{name} is stale; run XDS_SANSIO_REGENERATE=1 cargo test --test codegen"
        );
    }
}
