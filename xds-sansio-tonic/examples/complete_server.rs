//! A complete management server in the lines a new user writes: two node groups (by the
//! node's `cluster`), each its own listener -> route -> cluster -> endpoints chain,
//! authorization (a bearer token per group), health (`grpc.health.v1`, on by default),
//! Prometheus metrics on `127.0.0.1:9000/metrics`, logs through `tracing` (`RUST_LOG`), and
//! a graceful shutdown on Ctrl-C. Sixteen lines name this crate's API; the resources are
//! `examples/chain/`'s, none of which does.
//!
//! Run: `RUST_LOG=info cargo run -p xds-sansio-tonic --example complete_server`. A client
//! whose node says `cluster: "blue"` and whose calls carry `authorization: Bearer
//! blue-token` gets the blue chain for `xds:///hello`, to `127.0.0.1:50051`; green, to
//! `:50052`.
mod chain;

use chain::{eds_cluster, endpoints, listener, route_to};
use metrics_exporter_prometheus::PrometheusBuilder;
use tracing_subscriber::EnvFilter;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::ResourceSet;
use xds_sansio_tonic::{Peer, XdsServer};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::from_default_env())
        .init();
    PrometheusBuilder::new()
        .with_http_listener(([127, 0, 0, 1], 9000))
        .install()?;
    let server = XdsServer::builder()
        .node_group(|node| node.cluster.clone())
        .authorize(|peer: &Peer, _: &Node, group: &str| {
            let token = peer.metadata.get("authorization");
            match token.and_then(|t| t.to_str().ok()) {
                Some(t) if t == format!("Bearer {group}-token") => Ok(()),
                _ => Err(format!("no token for group {group:?}")),
            }
        })
        .build();
    for (group, backend) in [("blue", "127.0.0.1:50051"), ("green", "127.0.0.1:50052")] {
        let resources = ResourceSet::new()
            .with(&listener("hello", "hello-route"))?
            .with(&route_to("hello-route", "hello-cluster"))?
            .with(&eds_cluster("hello-cluster"))?
            .with(&endpoints("hello-cluster", backend.parse()?))?;
        server.publish_snapshot(group, resources)?;
    }
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server
        .serve_with_shutdown("127.0.0.1:18000".parse()?, ctrl_c)
        .await?;
    Ok(())
}
