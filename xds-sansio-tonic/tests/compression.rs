//! Compression end to end (feature `gzip`), against tonic's own client codec: a server
//! built with `send_compressed` answers through tonic's encoder, compressed for a client
//! that accepts it and plain for one that does not; a server without it writes each
//! response's frame itself (`server/framing.rs`), plain whatever the client accepts. Each
//! answer carries the published bodies, a later publication reaches the client the same
//! way, and compressed requests are read. The bytes the client receives (counted by a
//! proxy between the two) tell whether the responses were compressed: gRPC marks each
//! message, so a header alone would not. Bounded waits; nothing is timed.
#![cfg(feature = "gzip")]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codec::{CompressionEncoding, Streaming};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{ResourceEntry, StoreOp};
use xds_sansio::types::{self, CLUSTER};
use xds_sansio_tonic::call::{connect, ConnectOptions};
use xds_sansio_tonic::client::ManagementServer;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

const CDS: &str = CLUSTER.type_url;
const WAIT: Duration = Duration::from_secs(10);
const GZIP: CompressionEncoding = CompressionEncoding::Gzip;

/// A Cluster body of a few KB that compresses well: the name in field 1, `fill` repeated
/// in `alt_stat_name` (field 28).
fn body(name: &str, fill: char) -> Bytes {
    let filler: String = std::iter::repeat_n(fill, 4_000).collect();
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    let len = filler.len();
    out.extend_from_slice(&[0xe2, 0x01, (len & 0x7f) as u8 | 0x80, (len >> 7) as u8]);
    out.extend_from_slice(filler.as_bytes());
    Bytes::from(out)
}

fn node() -> Node {
    Node {
        id: "compressed".into(),
        ..Node::default()
    }
}

fn set(name: &str, fill: char) -> StoreOp {
    StoreOp::Set {
        type_url: CDS.into(),
        entry: ResourceEntry::new(name, body(name, fill)),
    }
}

/// A proxy on a loopback port to `upstream` (an `http://` URI) that counts the bytes it
/// passes from the server to the client: its URI, and that count.
async fn counting_proxy(upstream: String) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let counted = Arc::new(AtomicUsize::new(0));
    let count = counted.clone();
    let address = upstream.trim_start_matches("http://").to_owned();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = TcpStream::connect(&address).await.unwrap();
            let (mut from_client, mut to_client) = client.into_split();
            let (mut from_server, mut to_server) = server.into_split();
            tokio::spawn(async move { tokio::io::copy(&mut from_client, &mut to_server).await });
            let count = count.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n @ 1..) = from_server.read(&mut buf).await {
                    count.fetch_add(n, Ordering::Relaxed);
                    if to_client.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (uri, counted)
}

/// A server that compresses its responses (and reads compressed requests) or not, serving
/// two clusters; a connection to it through a proxy, and the bytes that proxy passed to
/// the client.
async fn serve(compress: bool) -> (XdsServer, Channel, Arc<AtomicUsize>) {
    let mut builder = XdsServer::builder().accept_compressed(GZIP);
    if compress {
        builder = builder.send_compressed(GZIP);
    }
    let server = builder.build();
    server
        .publish(DEFAULT_GROUP, vec![set("c1", 'a'), set("c2", 'b')])
        .unwrap();
    let (uri, received) = counting_proxy(support::loopback::serve_on_loopback(&server).await).await;
    let channel = connect(&ManagementServer::insecure(uri), &ConnectOptions::new(WAIT))
        .await
        .unwrap();
    (server, channel, received)
}

/// A raw ADS call through tonic's client and prost's codec: requests compressed and
/// responses accepted compressed when `gzip`; its sender, its responses, and the
/// response's `grpc-encoding` header.
async fn call<Req, Resp>(
    channel: &Channel,
    path: &'static str,
    gzip: bool,
    first: Req,
) -> (mpsc::UnboundedSender<Req>, Streaming<Resp>, Option<String>)
where
    Req: prost::Message + Send + Sync + 'static,
    Resp: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    if gzip {
        grpc = grpc.send_compressed(GZIP).accept_compressed(GZIP);
    }
    grpc.ready().await.unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tx.send(first).unwrap();
    let response = grpc
        .streaming(
            tonic::Request::new(UnboundedReceiverStream::new(rx)),
            PathAndQuery::from_static(path),
            ProstCodec::<Req, Resp>::default(),
        )
        .await
        .unwrap();
    let encoding = response
        .metadata()
        .get("grpc-encoding")
        .map(|v| v.to_str().unwrap().to_owned());
    (tx, response.into_inner(), encoding)
}

async fn next<T>(responses: &mut Streaming<T>) -> T {
    tokio::time::timeout(WAIT, responses.message())
        .await
        .expect("the server answered in time")
        .expect("no error status")
        .expect("the stream is open")
}

/// A SotW state's bodies by name.
fn sotw_bodies(response: &DiscoveryResponse) -> Vec<(String, Bytes)> {
    let mut bodies: Vec<(String, Bytes)> = response
        .resources
        .iter()
        .map(|any| {
            let name_len = usize::from(any.value[1]);
            let name = std::str::from_utf8(&any.value[2..2 + name_len]).unwrap();
            (name.to_owned(), any.value.clone())
        })
        .collect();
    bodies.sort();
    bodies
}

/// Wildcard SotW CDS with gzip offered by the client (`gzip`) against a server that
/// compresses or not (`compress`): the state, an ACK, then a publication. The response's
/// `grpc-encoding`, and the bytes the client received.
async fn sotw_round_trip(compress: bool, gzip: bool) -> (Option<String>, usize) {
    let (server, channel, received) = serve(compress).await;
    let (tx, mut responses, encoding) = call::<DiscoveryRequest, DiscoveryResponse>(
        &channel,
        types::ADS_SOTW_METHOD,
        gzip,
        DiscoveryRequest {
            node: Some(node()),
            type_url: CDS.into(),
            ..Default::default()
        },
    )
    .await;
    let state = next(&mut responses).await;
    assert_eq!(
        sotw_bodies(&state),
        vec![
            ("c1".into(), body("c1", 'a')),
            ("c2".into(), body("c2", 'b'))
        ]
    );
    tx.send(DiscoveryRequest {
        type_url: CDS.into(),
        version_info: state.version_info.clone(),
        response_nonce: state.nonce.clone(),
        ..Default::default()
    })
    .unwrap();
    server.publish(DEFAULT_GROUP, vec![set("c2", 'z')]).unwrap();
    let update = next(&mut responses).await;
    assert_ne!(update.version_info, state.version_info);
    assert_eq!(
        sotw_bodies(&update),
        vec![
            ("c1".into(), body("c1", 'a')),
            ("c2".into(), body("c2", 'z'))
        ]
    );
    (encoding, received.load(Ordering::Relaxed))
}

/// Two states of two 4 KB bodies each: more than 16 000 bytes plain; the repeated
/// characters compress to a few dozen bytes a body.
const PLAIN: usize = 16_000;
const COMPRESSED: usize = 4_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressing_server_compresses_for_a_client_that_accepts_it() {
    let (encoding, received) = sotw_round_trip(true, true).await;
    assert_eq!(encoding.as_deref(), Some("gzip"));
    assert!(received < COMPRESSED, "{received} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressing_server_answers_plain_to_a_client_that_does_not_accept_it() {
    let (encoding, received) = sotw_round_trip(true, false).await;
    assert_eq!(encoding, None);
    assert!(received > PLAIN, "{received} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_compress_writes_plain_frames_to_a_client_that_accepts_gzip() {
    // Its requests still come compressed, and are read.
    let (encoding, received) = sotw_round_trip(false, true).await;
    assert_eq!(encoding, None);
    assert!(received > PLAIN, "{received} bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delta_stream_is_compressed_too() {
    let (server, channel, received) = serve(true).await;
    let (tx, mut responses, encoding) = call::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>(
        &channel,
        types::ADS_DELTA_METHOD,
        true,
        DeltaDiscoveryRequest {
            node: Some(node()),
            type_url: CDS.into(),
            resource_names_subscribe: vec!["*".into()],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(encoding.as_deref(), Some("gzip"));
    let state = next(&mut responses).await;
    let mut names: Vec<&str> = state.resources.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["c1", "c2"]);
    tx.send(DeltaDiscoveryRequest {
        type_url: CDS.into(),
        response_nonce: state.nonce.clone(),
        ..Default::default()
    })
    .unwrap();
    server.publish(DEFAULT_GROUP, vec![set("c2", 'z')]).unwrap();
    let update = next(&mut responses).await;
    assert_eq!(update.resources.len(), 1);
    assert_eq!(
        update.resources[0].resource.as_ref().unwrap().value,
        body("c2", 'z')
    );
    let received = received.load(Ordering::Relaxed);
    assert!(received < COMPRESSED, "{received} bytes");
}
