//! An xDS management server on the adapter, serving the resources of a JSON file; the
//! server side of the interop suite (`tests/interop/run.sh`).
//!
//! It answers the ADS service and every per-type discovery service, SotW and delta, on
//! one port, from one node group. The file is reloaded when it changes (checked every
//! 200 ms) or on SIGHUP; only what changed is pushed. SIGUSR1 ends every open stream with
//! `UNAVAILABLE` (clients reconnect and resume with the versions they hold).
//!
//! The file holds canonical proto3 JSON of the resources, each an `Any`:
//!
//! ```json
//! {"resources": [
//!   {"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "name": "c1", ...},
//!   {"ttl": "30s", "resource": {"@type": "...", ...}}
//! ]}
//! ```
//!
//! Resource schemas come from `--descriptors` (an encoded `FileDescriptorSet` with its
//! dependencies, e.g. written by `tests/interop/grpc_python/descriptors.py` from PyPI
//! `xds-protos`); a resource of a type without a schema is written
//! `{"@type": URL, "value": "<base64 of the message>"}`.
//!
//! Run: `cargo run -p xds-sansio-tonic --example ads_server --features record --
//! --resources examples/data/resources.json --descriptors examples/data/envoy.desc`
//!
//! Options: `--listen ADDR` (default `127.0.0.1:18000`; port 0 picks one, the first stdout
//! line says which), `--record FILE` (every message as JSON lines for `xds-sansio check`),
//! `--verbose` (every event and message on stderr), `--compress gzip` (accept gzip-compressed
//! requests and compress responses with gzip; needs the `gzip` feature, refused without).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage};
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::server::{EncodedResponse, ResourceEntry, ServerEvent};
use xds_sansio::{Request, Response};
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::{Callbacks, StreamInfo, XdsServer, DEFAULT_GROUP};

struct Args {
    listen: String,
    resources: PathBuf,
    descriptors: Vec<PathBuf>,
    record: Option<PathBuf>,
    verbose: bool,
    #[cfg_attr(not(feature = "gzip"), allow(dead_code))]
    gzip: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        listen: "127.0.0.1:18000".into(),
        resources: PathBuf::new(),
        descriptors: Vec::new(),
        record: None,
        verbose: false,
        gzip: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => args.listen = value()?,
            "--resources" => args.resources = value()?.into(),
            "--descriptors" => args.descriptors.push(value()?.into()),
            "--record" => args.record = Some(value()?.into()),
            "--verbose" => args.verbose = true,
            "--compress" => match value()?.as_str() {
                "gzip" if cfg!(feature = "gzip") => args.gzip = true,
                "gzip" => return Err(
                    "--compress gzip needs the gzip feature (build with --features record,gzip)"
                        .into(),
                ),
                other => return Err(format!("--compress {other:?}: only gzip is offered")),
            },
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.resources.as_os_str().is_empty() {
        return Err("--resources FILE is required".into());
    }
    Ok(args)
}

/// One resource in canonical JSON (an `Any`: `@type` plus the message's fields) to its
/// type URL and binary body.
fn encode_any(pool: &DescriptorPool, mut value: serde_json::Value) -> Result<Any, String> {
    let object = value.as_object_mut().ok_or("a resource is a JSON object")?;
    let type_url = match object.remove("@type") {
        Some(serde_json::Value::String(url)) => url,
        _ => return Err("a resource needs \"@type\"".into()),
    };
    let full_name = type_url.rsplit('/').next().unwrap_or_default();
    let body = match pool.get_message_by_name(full_name) {
        Some(desc) => DynamicMessage::deserialize(desc, value)
            .map_err(|e| format!("{type_url}: {e}"))?
            .encode_to_vec(),
        None => match object.get("value") {
            Some(serde_json::Value::String(b64)) if object.len() == 1 => {
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("{type_url}: value: {e}"))?
            }
            _ => return Err(format!("{type_url}: no schema (give --descriptors)")),
        },
    };
    Ok(Any {
        type_url: type_url.into(),
        value: body.into(),
    })
}

/// Reads the file into `type URL -> entries`.
fn load(
    pool: &DescriptorPool,
    path: &Path,
) -> Result<BTreeMap<String, Vec<ResourceEntry>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let items = match value {
        serde_json::Value::Array(items) => items,
        serde_json::Value::Object(mut o) => match o.remove("resources") {
            Some(serde_json::Value::Array(items)) => items,
            _ => return Err("expected {\"resources\": [...]}".into()),
        },
        _ => return Err("expected an array or {\"resources\": [...]}".into()),
    };
    let mut types: BTreeMap<String, Vec<ResourceEntry>> = BTreeMap::new();
    for (i, mut item) in items.into_iter().enumerate() {
        let ttl = match item.get("ttl").and_then(|t| t.as_str()) {
            Some(ttl) => Some(parse_duration(ttl).ok_or(format!("resource {i}: bad ttl"))?),
            None => None,
        };
        if let Some(inner) = item.get_mut("resource") {
            item = inner.take();
        }
        let any = encode_any(pool, item).map_err(|e| format!("resource {i}: {e}"))?;
        let name = xds_sansio::resource::name_of(&any.value)
            .map_err(|e| format!("resource {i}: no name: {e:?}"))?
            .to_string();
        let mut entry = ResourceEntry::new(name, any.value);
        if let Some(ttl) = ttl {
            entry = entry.with_ttl(ttl);
        }
        types
            .entry(String::from(any.type_url))
            .or_default()
            .push(entry);
    }
    Ok(types)
}

fn parse_duration(text: &str) -> Option<Duration> {
    text.strip_suffix('s')?
        .parse::<f64>()
        .ok()
        .map(Duration::from_secs_f64)
}

/// Makes the store hold exactly what the file says, as one revision; types no longer in
/// the file (`seen` holds every type loaded so far) are emptied.
fn apply(
    server: &XdsServer,
    mut types: BTreeMap<String, Vec<ResourceEntry>>,
    seen: &mut BTreeSet<String>,
) {
    seen.extend(types.keys().cloned());
    seen.extend(xds_sansio::types::CATALOG.iter().map(|t| t.type_url.into()));
    for type_url in seen.iter() {
        types.entry(type_url.clone()).or_default();
    }
    if let Err(e) = server.publish_snapshot(DEFAULT_GROUP, types) {
        eprintln!("ads_server: {e} (store left unchanged)");
    }
}

/// `--verbose`: every event and a summary of every message on stderr.
struct Verbose;

impl Callbacks for Verbose {
    fn stream_closed(&self, stream: &StreamInfo, status: Option<&tonic::Status>) {
        eprintln!("[server stream {}] closed: {status:?}", stream.id);
    }
    fn request(&self, stream: &StreamInfo, request: &Request) {
        eprintln!(
            "[server stream {}] <- {}",
            stream.id,
            request_summary(request)
        );
    }
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        let line = match response.decode() {
            Ok(response) => summary(&response),
            Err(e) => format!("undecodable response: {e}"),
        };
        eprintln!("[server stream {}] -> {line}", stream.id);
    }
    fn event(&self, stream: &StreamInfo, event: &ServerEvent) {
        eprintln!("[server stream {}] {event:?}", stream.id);
    }
}

/// One line about a response: type, version, nonce, names.
fn summary(response: &Response) -> String {
    match response {
        Response::Sotw(r) => format!(
            "{} V={} N={} ({} resources)",
            short(&r.type_url),
            r.version_info,
            r.nonce,
            r.resources.len()
        ),
        Response::Delta(r) => format!(
            "{} N={} +{:?} -{:?}",
            short(&r.type_url),
            r.nonce,
            r.resources
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>(),
            r.removed_resources
        ),
    }
}

/// One line about a request: type, version, nonce, names, error.
fn request_summary(request: &Request) -> String {
    let nack = |e: Option<&xds_sansio::pb::google::rpc::Status>| {
        e.map(|e| format!(" NACK: {}", e.message))
            .unwrap_or_default()
    };
    match request {
        Request::Sotw(r) => format!(
            "{} V={} N={} R={:?}{}",
            short(&r.type_url),
            r.version_info,
            r.response_nonce,
            r.resource_names,
            nack(r.error_detail.as_ref())
        ),
        Request::Delta(r) => format!(
            "{} N={} +{:?} -{:?} initial={:?}{}",
            short(&r.type_url),
            r.response_nonce,
            r.resource_names_subscribe,
            r.resource_names_unsubscribe,
            r.initial_resource_versions,
            nack(r.error_detail.as_ref())
        ),
    }
}

fn short(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[tokio::main]
async fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("ads_server: {e}");
        std::process::exit(2);
    });
    let mut pool = DescriptorPool::new();
    for path in &args.descriptors {
        let bytes = std::fs::read(path).expect("read --descriptors");
        pool.decode_file_descriptor_set(bytes.as_slice())
            .expect("an encoded FileDescriptorSet");
    }
    let recorder = args.record.as_ref().map(|path| {
        Arc::new(Recorder::new(Some(
            std::fs::File::create(path).expect("create --record file"),
        )))
    });
    // CSDS on the same port: what each connected node applied (the interop suite reads a
    // grpcio client's NACK through it).
    let builder = XdsServer::builder()
        .callbacks((recorder, args.verbose.then_some(Verbose)))
        .csds(true);
    #[cfg(feature = "gzip")]
    let builder = if args.gzip {
        builder
            .accept_compressed(tonic::codec::CompressionEncoding::Gzip)
            .send_compressed(tonic::codec::CompressionEncoding::Gzip)
    } else {
        builder
    };
    let server = builder.build();
    let mut stamp = modified(&args.resources);
    let mut seen = BTreeSet::new();
    match load(&pool, &args.resources) {
        Ok(types) => apply(&server, types, &mut seen),
        Err(e) => {
            eprintln!("ads_server: {e}");
            std::process::exit(1);
        }
    }
    // Handlers first: a SIGHUP that arrives before them would end the process.
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .expect("SIGHUP handler");
    let mut usr1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        .expect("SIGUSR1 handler");
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .expect("bind --listen");
    println!("listening on {}", listener.local_addr().expect("bound"));
    let serving = tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );

    let mut tick = tokio::time::interval(Duration::from_millis(200));
    loop {
        let forced = tokio::select! {
            _ = hup.recv() => true,
            _ = tick.tick() => false,
            _ = usr1.recv() => {
                eprintln!("ads_server: SIGUSR1, ending every stream");
                server.end_streams();
                continue;
            }
            _ = tokio::signal::ctrl_c() => break,
        };
        let now = modified(&args.resources);
        if !forced && now == stamp {
            continue;
        }
        stamp = now;
        match load(&pool, &args.resources) {
            Ok(types) => {
                apply(&server, types, &mut seen);
                eprintln!(
                    "ads_server: reloaded {} (store revision {})",
                    args.resources.display(),
                    server.read(DEFAULT_GROUP, |s| s.revision().0)
                );
            }
            Err(e) => eprintln!("ads_server: reload failed, keeping the old store: {e}"),
        }
    }
    server.shutdown();
    let _ = serving.await;
}
