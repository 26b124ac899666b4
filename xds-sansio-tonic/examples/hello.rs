//! The smallest useful management server: one node group, one Cluster, every discovery
//! service (ADS and per type, SotW and delta) on 127.0.0.1:18000.
//!
//! Run: `cargo run -p xds-sansio-tonic --example hello`
use bytes::Bytes;
use xds_sansio::server::{ResourceEntry, StoreOp};
use xds_sansio::types::CLUSTER;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = XdsServer::builder().build();
    let cluster = Bytes::from_static(b"\x0a\x02c1"); // an encoded Cluster named "c1"
    server.publish(
        DEFAULT_GROUP,
        vec![StoreOp::Set {
            type_url: CLUSTER.type_url.into(),
            entry: ResourceEntry::new("c1", cluster),
        }],
    )?;
    server.serve("127.0.0.1:18000".parse()?).await?;
    Ok(())
}
