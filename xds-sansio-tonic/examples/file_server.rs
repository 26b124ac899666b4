//! A complete management server: node groups from files, reloaded when they change.
//!
//! `DIR/GROUP.json` (or `.yaml`, `.pb`) holds a `DiscoveryResponse` whose resources (of any
//! types) are the whole configuration of node group GROUP; a node reads the group named
//! by its `cluster`. A changed file is published as one revision (only what changed is
//! pushed); a file that does not parse leaves its group as it was. DESCRIPTORS (an encoded
//! `FileDescriptorSet`, e.g. `examples/data/envoy.desc`) lets JSON and YAML name resource
//! fields; without it resources are written `{"@type": URL, "value": "<base64>"}`.
//!
//! Run: `cargo run -p xds-sansio-tonic --example file_server -- DIR [DESCRIPTORS]`
use std::collections::{BTreeMap, HashMap};
use std::{error::Error, path::Path, time::Duration};
use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::{codec::json::JsonCodec, pb::discovery::DiscoveryResponse, server::ResourceEntry};
use xds_sansio_tonic::XdsServer;

type Snapshot = BTreeMap<String, Vec<ResourceEntry>>;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let dir = args.get(1).ok_or("usage: file_server DIR [DESCRIPTORS]")?;
    let mut json = JsonCodec::new();
    if let Some(descriptors) = args.get(2) {
        json.add_file_descriptor_set(&std::fs::read(descriptors)?)?;
    }
    let codec = FileCodec::with_json_codec(json, false);
    let server = XdsServer::builder()
        .node_group(|node| node.cluster.clone())
        .build();
    tokio::spawn(server.clone().serve("127.0.0.1:18000".parse()?));
    let mut seen = HashMap::new();
    loop {
        for path in std::fs::read_dir(dir)?.filter_map(|e| Some(e.ok()?.path())) {
            let modified = std::fs::metadata(&path)?.modified()?;
            if seen.insert(path.clone(), modified) != Some(modified) {
                let published = load(&codec, &path)
                    .and_then(|(group, types)| Ok(server.publish_snapshot(&group, types)?));
                match published {
                    Ok(revision) => eprintln!("{}: revision {}", path.display(), revision.0),
                    Err(e) => eprintln!("{}: {e} (group unchanged)", path.display()),
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `DIR/GROUP.EXT`: the group, and every type of the catalog with its resources.
fn load(codec: &FileCodec, path: &Path) -> Result<(String, Snapshot), Box<dyn Error>> {
    let format = Format::from_path(&path.to_string_lossy()).ok_or("unknown extension")?;
    let response: DiscoveryResponse = codec.decode(format, std::fs::read(path)?.into())?;
    let catalog = xds_sansio::types::CATALOG.iter();
    let mut types: Snapshot = catalog.map(|t| (t.type_url.into(), vec![])).collect();
    for any in response.resources {
        let name = xds_sansio::resource::name_of(&any.value)?.to_string();
        let entry = ResourceEntry::new(name, any.value);
        types.entry(any.type_url.into()).or_default().push(entry);
    }
    let group = path.file_stem().ok_or("no file name")?.to_string_lossy();
    Ok((group.into_owned(), types))
}
