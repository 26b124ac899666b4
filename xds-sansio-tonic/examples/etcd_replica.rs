//! A management-server replica fed from etcd (feature `etcd`): every node group under the
//! prefix (a node reads the group its `cluster` names), served on LISTEN, with the consistency check on. Run several behind one name
//! (or list them in the clients' bootstrap); publish with `xds-sansio publish --etcd`.
//! `docs/deployment.md` describes a deployment and what happens on each failure.
//!
//! Run: `cargo run -p xds-sansio-tonic --features etcd --example etcd_replica -- \
//!       127.0.0.1:18000 127.0.0.1:2379,127.0.0.1:22379,127.0.0.1:32379 [/xds/]`
use std::error::Error;
use xds_sansio::server::Consistency;
use xds_sansio_tonic::etcd::{EtcdSource, SourceConfig, DEFAULT_PREFIX};
use xds_sansio_tonic::XdsServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: etcd_replica LISTEN ENDPOINTS [PREFIX]";
    let listen: std::net::SocketAddr = args.get(1).ok_or(usage)?.parse()?;
    let endpoints = args.get(2).ok_or(usage)?.split(',').map(String::from);
    let mut config = SourceConfig::new(endpoints);
    config.prefix = args
        .get(3)
        .cloned()
        .unwrap_or_else(|| DEFAULT_PREFIX.into());
    let server = XdsServer::builder()
        // A node reads the group named by its `cluster` (`default` when it has none).
        .node_group(|node| match node.cluster.as_str() {
            "" => xds_sansio_tonic::DEFAULT_GROUP.to_string(),
            cluster => cluster.to_string(),
        })
        .consistency(Consistency::Enforce)
        .build();
    // Streams are held until the prefix is loaded (the restart hazard), so serving at once
    // is safe; the health service `xds_sansio.etcd` says when the replica is fed.
    let _source = EtcdSource::start(server.clone(), config)?;
    println!("listening on {listen}");
    server.serve(listen).await?;
    Ok(())
}
