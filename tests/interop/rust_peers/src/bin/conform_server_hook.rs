//! `xds-sansio conform server`'s hook for the Rust management servers (docs/conform.md,
//! "The hook"): a control socket in front of xds-server 0.1.0 (xds-cache's `ShardedCache`)
//! or rust-control-plane 0.1.2 (its `Cache`, feature `rust-control-plane`).
//!
//! - `start`: a fresh server on `--listen` (the previous one is shut down): an empty cache.
//! - `publish`: the operations change the hook's store (type -> name -> body), and the whole
//!   store becomes one new snapshot of node `client` (the node conform's requests name),
//!   which is what an application of these crates does: build a snapshot, `set_snapshot`.
//!   xds-server's snapshot has one version for every type (the revision); rust-control-plane's
//!   has one per type, advanced for the types the publication touched.
//! - Per-resource versions, TTLs and aliases of `set` have no place in either snapshot: a
//!   TTL or an alias is answered with the reason; a version is left to the server.
//! - rust-control-plane stores typed resources: a body that does not decode as its type's
//!   message is answered with the reason (give real bodies with `--bodies`).
//!
//! usage: conform_server_hook xds-server|rust-control-plane --control ADDR --listen ADDR

#[path = "../common.rs"]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const NODE: &str = "client";

/// A resource as xds-server stores it (its own `AnyResource` is not exported).
#[derive(Debug)]
struct Raw {
    name: String,
    any: prost_types::Any,
}

impl xds_core::Resource for Raw {
    fn type_url(&self) -> &str {
        &self.any.type_url
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn encode(
        &self,
    ) -> std::result::Result<prost_types::Any, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.any.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Peer {
    XdsServer,
    #[cfg(feature = "rust-control-plane")]
    RustControlPlane,
}

/// The hook's store: what the scenario has published so far.
#[derive(Default)]
struct Store {
    resources: BTreeMap<String, BTreeMap<String, Vec<u8>>>,
    published: BTreeSet<String>,
    revision: u64,
    type_versions: BTreeMap<String, u64>,
}

enum Cache {
    XdsServer(Arc<xds_cache::ShardedCache>),
    #[cfg(feature = "rust-control-plane")]
    RustControlPlane(Arc<rust_control_plane::cache::Cache>),
}

struct Running {
    cache: Cache,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

struct Hook {
    peer: Peer,
    listen: SocketAddr,
    store: Store,
    running: Option<Running>,
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

impl Hook {
    async fn handle(&mut self, event: &Value) -> Result<(), String> {
        match text(event, "hook") {
            "start" => {
                self.stop().await;
                self.store = Store::default();
                self.running = Some(self.serve().await?);
                Ok(())
            }
            "publish" => self.publish(event).await,
            "stop" => {
                self.stop().await;
                Ok(())
            }
            other => Err(format!("this peer does not do {other:?}")),
        }
    }

    async fn stop(&mut self) {
        if let Some(mut running) = self.running.take() {
            if let Some(stop) = running.stop.take() {
                let _ = stop.send(());
            }
            if tokio::time::timeout(Duration::from_secs(3), &mut running.task)
                .await
                .is_err()
            {
                running.task.abort();
                let _ = running.task.await;
            }
        }
    }

    async fn serve(&self) -> Result<Running, String> {
        let addr = self.listen;
        let running = match self.peer {
            Peer::XdsServer => {
                let cache = Arc::new(xds_cache::ShardedCache::new());
                let server = xds_server::XdsServerBuilder::new()
                    .cache(cache.clone())
                    .enable_sotw()
                    .enable_delta()
                    .build()
                    .map_err(|e| format!("xds-server: {e}"))?;
                let (stop, stopped) = oneshot::channel();
                let task = tokio::spawn(async move {
                    if let Err(e) = server.serve_with_shutdown(addr, stopped).await {
                        eprintln!("xds-server: {e}");
                    }
                });
                Running {
                    cache: Cache::XdsServer(cache),
                    stop: Some(stop),
                    task,
                }
            }
            #[cfg(feature = "rust-control-plane")]
            Peer::RustControlPlane => {
                use data_plane_api::envoy::service::discovery::v3::aggregated_discovery_service_server::AggregatedDiscoveryServiceServer;
                use data_plane_api::envoy::service::cluster::v3::cluster_discovery_service_server::ClusterDiscoveryServiceServer;
                use data_plane_api::envoy::service::endpoint::v3::endpoint_discovery_service_server::EndpointDiscoveryServiceServer;
                use data_plane_api::envoy::service::listener::v3::listener_discovery_service_server::ListenerDiscoveryServiceServer;
                use data_plane_api::envoy::service::route::v3::route_discovery_service_server::RouteDiscoveryServiceServer;
                use rust_control_plane::service::common::Service;
                // `ads = false` even for ADS: with `true`, 0.1.2's ADS consistency check
                // is inverted and holds back every answer (docs/conform.md).
                let cache = Arc::new(rust_control_plane::cache::Cache::new(false));
                let (stop, stopped) = oneshot::channel::<()>();
                let server = tonic08::transport::Server::builder()
                    .add_service(AggregatedDiscoveryServiceServer::new(Service::new(
                        cache.clone(),
                    )))
                    .add_service(ClusterDiscoveryServiceServer::new(Service::new(
                        cache.clone(),
                    )))
                    .add_service(EndpointDiscoveryServiceServer::new(Service::new(
                        cache.clone(),
                    )))
                    .add_service(ListenerDiscoveryServiceServer::new(Service::new(
                        cache.clone(),
                    )))
                    .add_service(RouteDiscoveryServiceServer::new(Service::new(
                        cache.clone(),
                    )))
                    .serve_with_shutdown(addr, async {
                        let _ = stopped.await;
                    });
                let task = tokio::spawn(async move {
                    if let Err(e) = server.await {
                        eprintln!("rust-control-plane: {e}");
                    }
                });
                Running {
                    cache: Cache::RustControlPlane(cache),
                    stop: Some(stop),
                    task,
                }
            }
        };
        // Ready when it accepts connections.
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(running);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(format!("the server did not listen on {addr}"))
    }

    async fn publish(&mut self, event: &Value) -> Result<(), String> {
        let running = self.running.as_ref().ok_or("no scenario started")?;
        let ops = event
            .get("ops")
            .and_then(Value::as_array)
            .ok_or("publish without ops")?;
        let mut touched = BTreeSet::new();
        for op in ops {
            let type_url = text(op, "type_url").to_string();
            match text(op, "op") {
                "set" => {
                    if op.get("ttl_ms").is_some_and(|v| !v.is_null()) {
                        return Err("this peer's snapshots have no TTLs".into());
                    }
                    if op
                        .get("aliases")
                        .and_then(Value::as_array)
                        .is_some_and(|a| !a.is_empty())
                    {
                        return Err("this peer's snapshots have no aliases".into());
                    }
                    let body = base64::engine::general_purpose::STANDARD
                        .decode(text(op, "body"))
                        .map_err(|e| format!("body: {e}"))?;
                    self.store
                        .resources
                        .entry(type_url.clone())
                        .or_default()
                        .insert(text(op, "name").into(), body);
                }
                "remove" => {
                    if let Some(of_type) = self.store.resources.get_mut(&type_url) {
                        of_type.remove(text(op, "name"));
                    }
                }
                "publish" => {}
                other => return Err(format!("unknown op {other:?}")),
            }
            self.store.published.insert(type_url.clone());
            touched.insert(type_url);
        }
        self.store.revision += 1;
        for type_url in &touched {
            *self
                .store
                .type_versions
                .entry(type_url.clone())
                .or_default() += 1;
        }
        match &running.cache {
            Cache::XdsServer(cache) => {
                use xds_cache::Cache as _;
                let mut builder =
                    xds_cache::Snapshot::builder().version(self.store.revision.to_string());
                for (type_url, of_type) in &self.store.resources {
                    for (name, body) in of_type {
                        builder = builder.resource(
                            xds_core::TypeUrl::new(type_url.clone()),
                            Arc::new(Raw {
                                name: name.clone(),
                                any: prost_types::Any {
                                    type_url: type_url.clone(),
                                    value: body.clone(),
                                },
                            }),
                        );
                    }
                }
                cache.set_snapshot(xds_core::NodeHash::from_id(NODE), builder.build());
            }
            #[cfg(feature = "rust-control-plane")]
            Cache::RustControlPlane(cache) => {
                let snapshot = rcp::snapshot(&self.store)?;
                cache.set_snapshot(NODE, snapshot).await;
            }
        }
        Ok(())
    }
}

#[cfg(feature = "rust-control-plane")]
mod rcp {
    use super::Store;
    use data_plane_api::envoy::config::cluster::v3::Cluster;
    use data_plane_api::envoy::config::core::v3::TypedExtensionConfig;
    use data_plane_api::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use data_plane_api::envoy::config::listener::v3::Listener;
    use data_plane_api::envoy::config::route::v3::{RouteConfiguration, ScopedRouteConfiguration};
    use data_plane_api::envoy::extensions::transport_sockets::tls::v3::Secret;
    use data_plane_api::envoy::service::runtime::v3::Runtime;
    use prost011::Message;
    use rust_control_plane::snapshot::{type_url, Resource, Resources, Snapshot};

    fn decode<M: Message + Default>(body: &[u8], what: &str) -> Result<M, String> {
        M::decode(body).map_err(|e| {
            format!("this peer stores typed resources: the body is not a {what} ({e}); give real bodies with --bodies")
        })
    }

    fn resource(type_url_: &str, body: &[u8]) -> Result<Resource, String> {
        Ok(match type_url_ {
            type_url::CLUSTER => Resource::Cluster(decode::<Cluster>(body, "Cluster")?),
            type_url::ENDPOINT => Resource::Endpoint(decode::<ClusterLoadAssignment>(
                body,
                "ClusterLoadAssignment",
            )?),
            type_url::ROUTE => {
                Resource::Route(decode::<RouteConfiguration>(body, "RouteConfiguration")?)
            }
            type_url::LISTENER => Resource::Listener(decode::<Listener>(body, "Listener")?),
            type_url::SECRET => Resource::Secret(decode::<Secret>(body, "Secret")?),
            type_url::RUNTIME => Resource::Runtime(decode::<Runtime>(body, "Runtime")?),
            type_url::SCOPED_ROUTE => Resource::ScopedRoute(decode::<ScopedRouteConfiguration>(
                body,
                "ScopedRouteConfiguration",
            )?),
            type_url::EXTENSION_CONFIG => Resource::ExtensionConfig(
                decode::<TypedExtensionConfig>(body, "TypedExtensionConfig")?,
            ),
            other => return Err(format!("this peer does not serve {other}")),
        })
    }

    pub(super) fn snapshot(store: &Store) -> Result<Snapshot, String> {
        let mut snapshot = Snapshot::new();
        for type_url_ in &store.published {
            let version = store.type_versions.get(type_url_).copied().unwrap_or(0);
            let mut resources = Resources::new(version.to_string());
            if let Some(of_type) = store.resources.get(type_url_) {
                for (name, body) in of_type {
                    let r = resource(type_url_, body)?;
                    // It re-encodes what it stores: the bytes must survive the trip.
                    if r.into_any().value != *body {
                        return Err(format!(
                            "this peer stores typed resources: {name}'s body does not survive decoding and encoding; give real bodies with --bodies"
                        ));
                    }
                    resources.items.insert(name.clone(), r);
                }
            }
            snapshot.insert(type_url_.clone(), resources);
        }
        Ok(snapshot)
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        "usage: conform_server_hook xds-server|rust-control-plane --control ADDR --listen ADDR";
    let peer = match args.get(1).map(String::as_str) {
        Some("xds-server") => Peer::XdsServer,
        #[cfg(feature = "rust-control-plane")]
        Some("rust-control-plane") => Peer::RustControlPlane,
        _ => {
            eprintln!("{usage} (rust-control-plane needs the feature rust-control-plane)");
            std::process::exit(2);
        }
    };
    let (Some(control), Some(listen)) = (
        common::arg(&args, "--control"),
        common::arg(&args, "--listen"),
    ) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let listen: SocketAddr = listen.parse().expect("--listen HOST:PORT");
    let control = TcpListener::bind(&control).await.expect("--control");
    println!(
        "hook listening on {}, the server on {listen}",
        control.local_addr().unwrap()
    );
    let mut hook = Hook {
        peer,
        listen,
        store: Store::default(),
        running: None,
    };
    loop {
        let Ok((socket, _)) = control.accept().await else {
            continue;
        };
        let (read, mut write) = socket.into_split();
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.trim().is_empty() {
                continue;
            }
            let answer = match serde_json::from_str::<Value>(&line) {
                Ok(event) => match hook.handle(&event).await {
                    Ok(()) => "ok".to_string(),
                    Err(e) => e.replace('\n', " "),
                },
                Err(e) => format!("not JSON: {e}"),
            };
            let hook_name = serde_json::from_str::<Value>(&line)
                .ok()
                .map(|v| text(&v, "hook").to_string())
                .unwrap_or_default();
            println!("{hook_name} -> {answer}");
            if write
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
        hook.stop().await;
    }
}
