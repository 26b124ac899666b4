//! Client (the child the Go side's ADS server starts): xds-sansio's core `Client` (SotW,
//! ADS, wildcard CDS, the default per-resource events) behind a tonic 0.14 stream of our
//! `pb` types, on a 2-worker tokio runtime. Each response: `handle_response`, every event
//! drained, then the ACK from `poll_request` sent; the Go server times from its send to
//! that ACK (so our event delivery is inside the span; grpc-go's client sends its ACK once
//! it has decoded and cached the resources, its watchers notified asynchronously). With
//! `typed`, a validator decodes every body into an envoy-types `Cluster`, as grpc-go's
//! client decodes and validates every Cluster.

use crate::common::CDS;
use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use prost::Message;
use std::hint::black_box;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use xds_sansio::client::{Client, ClientConfig};
use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::{Instant, Request, Response, Transport, Variant};

const MAX: usize = 64 << 20;
const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

fn client(typed: bool) -> Client {
    let node = Node {
        id: "xds-sansio-bench".into(),
        ..Node::default()
    };
    let mut c = Client::new(ClientConfig::new(
        Variant::Sotw,
        Transport::Aggregated,
        node,
    ));
    if typed {
        c.set_validator(
            CDS,
            Box::new(|_name: &str, _version: &str, body: &Bytes| {
                Cluster::decode(&body[..])
                    .map(|c| {
                        black_box(c);
                    })
                    .map_err(|e| e.to_string())
            }),
        );
    }
    c.subscribe(CDS, &[]).expect("subscribe");
    c.connected(Instant::ZERO);
    c
}

pub fn run(addr: &str, typed: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
            .expect("uri")
            .connect()
            .await
            .expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel)
            .max_decoding_message_size(MAX)
            .max_encoding_message_size(MAX);
        grpc.ready().await.expect("ready");
        let mut c = client(typed);
        let (tx, rx) = mpsc::channel::<DiscoveryRequest>(16);
        while let Some(r) = c.poll_request(Instant::ZERO) {
            let Request::Sotw(r) = r else {
                panic!("a SotW request")
            };
            tx.send(r).await.expect("send");
        }
        let codec = tonic_prost::ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default();
        let mut responses = grpc
            .streaming(
                tonic::Request::new(ReceiverStream::new(rx)),
                tonic::codegen::http::uri::PathAndQuery::from_static(ADS_PATH),
                codec,
            )
            .await
            .expect("stream")
            .into_inner();
        while let Ok(Some(resp)) = responses.message().await {
            c.handle_response(Instant::ZERO, Response::Sotw(resp));
            while let Some(e) = c.poll_event() {
                black_box(e);
            }
            while let Some(r) = c.poll_request(Instant::ZERO) {
                let Request::Sotw(r) = r else {
                    panic!("a SotW request")
                };
                if tx.send(r).await.is_err() {
                    return;
                }
            }
        }
    });
}
