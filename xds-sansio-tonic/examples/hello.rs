//! The smallest useful management server: one listener -> route -> cluster -> endpoints
//! chain that a gRPC client with `xds:///hello` as its target follows to a backend, on
//! every discovery service (ADS and per type, SotW and delta).
//!
//! Run: `cargo run -p xds-sansio-tonic --example hello -- [LISTEN] [BACKEND]` (defaults
//! `127.0.0.1:18000` and `127.0.0.1:50051`). `tests/interop/grpc_python/hello.py` points
//! a real gRPC client (PyPI grpcio) at it and calls a backend through it.
//!
//! The messages are `envoy-types`' own (built in `examples/chain/`): the server reads each
//! one's type URL from its type and its name from its body, so neither is written twice.
// The same file from here and from the crate docs that include this example.
#[path = "../examples/chain/mod.rs"]
mod chain;

use chain::{eds_cluster, endpoints, listener, route_to};
use xds_sansio::server::ResourceSet;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:18000".into());
    let backend: std::net::SocketAddr = args
        .next()
        .as_deref()
        .unwrap_or("127.0.0.1:50051")
        .parse()?;
    let resources = ResourceSet::new()
        .with(&listener("hello", "hello-route"))?
        .with(&route_to("hello-route", "hello-cluster"))?
        .with(&eds_cluster("hello-cluster"))?
        .with(&endpoints("hello-cluster", backend))?;
    let server = XdsServer::builder().build();
    server.publish_snapshot(DEFAULT_GROUP, resources)?;
    server.serve(listen.parse()?).await?;
    Ok(())
}
