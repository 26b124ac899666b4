//! Cross-language wire check against the official generated Python classes (PyPI
//! `xds-protos` + `protobuf`), run through `tests/python/wire_check.py`.
//!
//! Each side builds one instance per (message, variant) with every field set, by the same
//! deterministic rule from its own descriptors (`fill` here, `fill` in the script). Then:
//! - Rust decodes Python's bytes into our prost types and must see values equal to its own
//!   instance; Rust re-encodes them, writes them as JSON, and parses Python's JSON; Python
//!   checks each result equals its instance;
//! - Python decodes and parses what Rust built, and checks it equals its instance.
//!
//! Python is found through `XDS_SANSIO_PYTHON` or `.venv/bin/python` (which `.ci/run`
//! creates). Without it the test prints a loud SKIPPED message, except under `CI`, where
//! a missing Python is a failure: CI always runs this check.
#![cfg(feature = "json")]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use prost::{Message, Name};
use prost_reflect::DynamicMessage;
use serde_json::json;
use support::fill::{fill, OUR_PACKAGES, VARIANTS};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn unb64(text: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .expect("base64")
}

/// For each message of ours: decode bytes into the prost type and re-encode, decode and
/// write as JSON, parse JSON and encode. Every generated message must be listed here.
macro_rules! typed {
    ($($t:ty),* $(,)?) => {
        fn typed_names() -> Vec<String> {
            vec![$(<$t as Name>::full_name()),*]
        }

        struct Typed { reencoded: Vec<u8>, json_of_binary: serde_json::Value, binary_of_json: Vec<u8>, same_as_ours: bool }

        fn typed(name: &str, codec: &JsonCodec, binary: &[u8], json: &str, ours: &[u8]) -> Typed {
            $(
                if name == <$t as Name>::full_name() {
                    let decoded = <$t>::decode(binary).expect(name);
                    let from_json: $t = codec.from_str(json).unwrap_or_else(|e| panic!("{name}: {e}"));
                    return Typed {
                        reencoded: decoded.encode_to_vec(),
                        json_of_binary: codec.to_value(&decoded).unwrap_or_else(|e| panic!("{name}: {e}")),
                        binary_of_json: from_json.encode_to_vec(),
                        same_as_ours: decoded == <$t>::decode(ours).expect(name),
                    };
                }
            )*
            panic!("no typed entry for {name}")
        }
    };
}

use pb::discovery as d;
use pb::envoy::config::core::v3 as core;
typed!(
    d::AdsDummy,
    d::ResourceLocator,
    d::ResourceName,
    d::DynamicParameterConstraints,
    d::dynamic_parameter_constraints::SingleConstraint,
    d::dynamic_parameter_constraints::single_constraint::Exists,
    d::dynamic_parameter_constraints::ConstraintList,
    d::ResourceError,
    d::DiscoveryRequest,
    d::DiscoveryResponse,
    d::DeltaDiscoveryRequest,
    d::DeltaDiscoveryResponse,
    d::Resource,
    d::resource::CacheControl,
    core::Locality,
    core::BuildVersion,
    core::Extension,
    core::Metadata,
    core::Node,
    core::ControlPlane,
    core::Pipe,
    core::EnvoyInternalAddress,
    core::SocketAddress,
    core::Address,
    pb::envoy::r#type::v3::SemanticVersion,
    pb::xds::core::v3::ContextParams,
    pb::google::rpc::Status,
);

fn python() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("XDS_SANSIO_PYTHON") {
        return Some(path.into());
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    venv.exists().then_some(venv)
}

fn run_python(python: &Path, args: &[&str]) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/wire_check.py");
    Command::new(python)
        .arg(script)
        .args(args)
        .output()
        .expect("run python")
}

#[test]
fn python_and_rust_agree_on_every_message_binary_and_json() {
    let Some(python) = python() else {
        let message = "python wire check SKIPPED: no .venv/bin/python and no XDS_SANSIO_PYTHON \
                       (run .ci/run, or: python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt)";
        assert!(
            std::env::var_os("CI").is_none(),
            "{message}; CI must run it"
        );
        eprintln!("\n!!! {message} !!!\n");
        return;
    };
    let codec = JsonCodec::new();
    let pool = codec.pool();
    let mut names: Vec<String> = pool
        .all_messages()
        .filter(|m| OUR_PACKAGES.contains(&m.package_name()) && !m.is_map_entry())
        .map(|m| m.full_name().to_string())
        .collect();
    names.sort();
    let mut listed = typed_names();
    listed.sort();
    assert_eq!(
        names, listed,
        "every message of proto/ needs an entry in typed!()"
    );

    let dir = std::env::temp_dir().join(format!("xds-sansio-wire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir_text = dir.to_str().unwrap();

    // Our instances, as binary and JSON, for Python to check.
    let mut ours = std::collections::BTreeMap::new();
    let mut rust_cases = vec![];
    for name in &names {
        let desc = pool.get_message_by_name(name).unwrap();
        for variant in 0..VARIANTS {
            let mut msg = DynamicMessage::new(desc.clone());
            fill(&mut msg, variant, 0);
            let binary = msg.encode_to_vec();
            let json = codec.encoded_to_value(name, &binary).unwrap();
            rust_cases.push(json!({"message": name, "variant": variant, "binary": b64(&binary), "json": json.to_string()}));
            ours.insert((name.clone(), variant), binary);
        }
    }
    std::fs::write(
        dir.join("rust_cases.json"),
        serde_json::to_vec(&rust_cases).unwrap(),
    )
    .unwrap();

    let generated = run_python(&python, &["generate", dir_text, &names.join(",")]);
    assert!(
        generated.status.success(),
        "wire_check.py generate failed (is xds-protos installed?): {}",
        String::from_utf8_lossy(&generated.stderr)
    );
    let python_cases: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(dir.join("python_cases.json")).unwrap()).unwrap();
    assert_eq!(python_cases.len(), names.len() * VARIANTS as usize);

    let mut differing = vec![];
    let mut results = vec![];
    for case in &python_cases {
        let name = case["message"].as_str().unwrap();
        let variant = case["variant"].as_u64().unwrap() as u32;
        let binary = unb64(case["binary"].as_str().unwrap());
        let typed = typed(
            name,
            &codec,
            &binary,
            case["json"].as_str().unwrap(),
            &ours[&(name.to_string(), variant)],
        );
        if !typed.same_as_ours {
            differing.push(format!("{name}#{variant}"));
        }
        results.push(json!({
            "message": name,
            "variant": variant,
            "reencoded": b64(&typed.reencoded),
            "json_of_binary": typed.json_of_binary.to_string(),
            "binary_of_json": b64(&typed.binary_of_json),
        }));
    }
    std::fs::write(
        dir.join("rust_results.json"),
        serde_json::to_vec(&results).unwrap(),
    )
    .unwrap();
    assert!(
        differing.is_empty(),
        "Python's bytes decode to other values than ours: {differing:?}"
    );

    let checked = run_python(&python, &["check", dir_text]);
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{}", String::from_utf8_lossy(&checked.stdout));
    assert!(
        checked.status.success(),
        "Python disagrees:\n{}",
        String::from_utf8_lossy(&checked.stderr)
    );
}
