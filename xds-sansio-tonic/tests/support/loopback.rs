//! A server on a loopback port and raw SotW or delta calls to it: shared by the adapter's tests and
//! its benches (which include this file by path), so each does not bind, spawn and open
//! calls its own way.
#![allow(dead_code)]

use tokio::sync::mpsc;
use tonic::transport::Channel;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::CLUSTER;
use xds_sansio::{Request, Transport, Variant};
use xds_sansio_tonic::call::{Inbound, Ready};
use xds_sansio_tonic::XdsServer;

/// Serves `server` on a free port of 127.0.0.1 until the runtime ends; its `http://` URI.
pub async fn serve_on_loopback(server: &XdsServer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let uri = format!("http://{}", listener.local_addr().expect("its address"));
    tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    uri
}

/// One raw SotW ADS call whose first request, from node `node_id`, asks wildcard CDS at
/// `version` (empty: a new client; the full state's version: a resuming one).
pub async fn open_cds(
    channel: &Channel,
    node_id: &str,
    version: &str,
) -> Result<(mpsc::UnboundedSender<Request>, Inbound), tonic::Status> {
    let first = Request::Sotw(DiscoveryRequest {
        node: Some(node(node_id)),
        type_url: CLUSTER.type_url.into(),
        version_info: version.into(),
        ..Default::default()
    });
    open_ads(channel, Variant::Sotw, first).await
}

/// One raw delta ADS call whose first request, from node `node_id`, subscribes to the
/// wildcard of CDS presenting `held` as its `initial_resource_versions` (none: a new
/// client; some: a resuming one).
pub async fn open_cds_delta(
    channel: &Channel,
    node_id: &str,
    held: &[(&str, &str)],
) -> Result<(mpsc::UnboundedSender<Request>, Inbound), tonic::Status> {
    let first = Request::Delta(DeltaDiscoveryRequest {
        node: Some(node(node_id)),
        type_url: CLUSTER.type_url.into(),
        resource_names_subscribe: vec!["*".into()],
        initial_resource_versions: held
            .iter()
            .map(|(name, version)| (String::from(*name), String::from(*version)))
            .collect(),
        ..Default::default()
    });
    open_ads(channel, Variant::Delta, first).await
}

fn node(id: &str) -> Node {
    Node {
        id: id.into(),
        ..Node::default()
    }
}

/// One raw ADS call of `variant` that sends `first`: the sender of its later requests
/// and what it receives.
async fn open_ads(
    channel: &Channel,
    variant: Variant,
    first: Request,
) -> Result<(mpsc::UnboundedSender<Request>, Inbound), tonic::Status> {
    let ready = Ready::new(channel.clone(), variant, &Transport::Aggregated).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let _ = tx.send(first);
    let inbound = ready.start(rx).await?;
    Ok((tx, inbound))
}
