//! hyperium's xds-client over loopback gRPC. Its `Transport` traits are public but
//! `TransportStream` is sealed (a private supertrait), so no in-memory transport can be
//! written outside that crate: it is driven through its own `TonicTransportBuilder` against
//! a tonic ADS server on 127.0.0.1, and so are two more clients of the same server, for
//! reference: a bare tonic client (receive, decode the outer message, ACK: the loopback
//! floor) and xds-sansio's `Client` behind the same tonic client.
//!
//! The timed span is the server's: from handing the response to tonic to receiving the ACK
//! (the server encodes the response, HTTP/2 carries it both ways, the client decodes and
//! answers). The connection and the first request happen before, untimed.

use crate::common::CDS;
use bytes::Bytes;
use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest as EDeltaReq, DeltaDiscoveryResponse as EDeltaResp,
    DiscoveryRequest as EReq, DiscoveryResponse as EResp,
};
use prost::Message;
use std::hint::black_box;
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream, UnboundedReceiverStream};
use tonic::{Request, Response, Status, Streaming};

/// A stream opened by a client, handed to the harness after its first request.
struct Opened {
    first: EReq,
    responses: mpsc::UnboundedSender<Result<EResp, Status>>,
    requests: Streaming<EReq>,
}

struct Ads {
    opened: mpsc::UnboundedSender<Opened>,
}

type DeltaStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<EDeltaResp, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = UnboundedReceiverStream<Result<EResp, Status>>;
    type DeltaAggregatedResourcesStream = DeltaStream;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<EReq>>,
    ) -> Result<Response<Self::StreamAggregatedResourcesStream>, Status> {
        let mut requests = request.into_inner();
        let (tx, rx) = mpsc::unbounded_channel();
        let opened = self.opened.clone();
        tokio::spawn(async move {
            if let Ok(Some(first)) = requests.message().await {
                let _ = opened.send(Opened {
                    first,
                    responses: tx,
                    requests,
                });
            }
        });
        Ok(Response::new(UnboundedReceiverStream::new(rx)))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<EDeltaReq>>,
    ) -> Result<Response<Self::DeltaAggregatedResourcesStream>, Status> {
        Err(Status::unimplemented("delta"))
    }
}

/// xds-client's view of a Cluster: decoded into envoy-types' `Cluster`, accepted as is.
#[derive(Debug)]
struct XCluster(#[allow(dead_code)] Cluster);

impl xds_client::Resource for XCluster {
    type Message = Cluster;
    const TYPE_URL: xds_client::resource::TypeUrl = xds_client::resource::TypeUrl::new(CDS);
    fn deserialize(bytes: Bytes) -> xds_client::Result<Cluster> {
        Cluster::decode(bytes).map_err(Into::into)
    }
    fn name(m: &Cluster) -> &str {
        &m.name
    }
    fn validate(m: Cluster) -> xds_client::Result<Self> {
        Ok(XCluster(m))
    }
}

pub struct Peer {
    rt: tokio::runtime::Runtime,
    next_id: std::sync::atomic::AtomicU64,
    uri: String,
    opened: tokio::sync::Mutex<mpsc::UnboundedReceiver<Opened>>,
}

const MAX: usize = 64 << 20;
const ADS_PATH: &str =
    "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

impl Peer {
    /// The ADS server on 127.0.0.1 (an ephemeral port), on a 2-worker runtime shared by the
    /// server and the clients.
    pub fn start() -> Peer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (tx, opened) = mpsc::unbounded_channel();
        let uri = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let service = AggregatedDiscoveryServiceServer::new(Ads { opened: tx })
                .max_decoding_message_size(MAX)
                .max_encoding_message_size(MAX);
            tokio::spawn(
                tonic::transport::Server::builder()
                    .add_service(service)
                    .serve_with_incoming(TcpListenerStream::new(listener)),
            );
            format!("http://{addr}")
        });
        Peer {
            rt,
            next_id: std::sync::atomic::AtomicU64::new(0),
            uri,
            opened: tokio::sync::Mutex::new(opened),
        }
    }

    fn id(&self, who: &str) -> String {
        let n = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("{who}-{n}")
    }

    /// The stream whose first request comes from node `id` (streams a client opened
    /// earlier, e.g. a reconnection of a dropped client, are closed and skipped).
    async fn stream_of(opened: &mut mpsc::UnboundedReceiver<Opened>, id: &str) -> Opened {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(30), opened.recv())
                .await
                .expect("a stream within 30 s")
                .expect("server running");
            if next.first.node.as_ref().map(|n| n.id.as_str()) == Some(id) {
                return next;
            }
        }
    }

    /// Server side of one timed exchange: send `response`, wait for the ACK.
    async fn exchange(opened: &mut Opened, response: EResp) -> (Duration, EReq) {
        let start = std::time::Instant::now();
        opened.responses.send(Ok(response)).expect("stream open");
        let ack = tokio::time::timeout(Duration::from_secs(30), opened.requests.message())
            .await
            .expect("an ACK within 30 s")
            .expect("ack")
            .expect("stream open");
        (start.elapsed(), ack)
    }

    fn check_ack(who: &str, ack: &EReq) {
        assert!(
            ack.error_detail.is_none() && ack.version_info == "v1" && ack.response_nonce == "n1",
            "{who}: not an ACK of v1/n1: {ack:?}"
        );
    }

    /// xds-client: a new client per iteration (first load), wildcard CDS watch.
    pub fn contender<'a>(&'a self, wire: &'a Bytes) -> Box<dyn FnMut() -> Duration + 'a> {
        let response = EResp::decode(&wire[..]).expect("response");
        Box::new(move || {
            let response = response.clone();
            let uri = self.uri.clone();
            let id = self.id("xds-client");
            let opened = &self.opened;
            self.rt.block_on(async move {
                let mut opened = opened.lock().await;
                use xds_client::{
                    ClientConfig, Node, ProstCodec, TokioRuntime, TonicTransportBuilder, XdsClient,
                };
                let node = Node::new("side-by-side", "0").with_id(id.clone());
                let client = XdsClient::builder(
                    ClientConfig::new(node, uri),
                    TonicTransportBuilder::new(),
                    ProstCodec,
                    TokioRuntime,
                )
                .build();
                let watcher = client.watch::<XCluster>("").await;
                let mut stream = Self::stream_of(&mut opened, &id).await;
                assert_eq!(stream.first.type_url, CDS);
                let (d, ack) = Self::exchange(&mut stream, response).await;
                Self::check_ack("xds-client", &ack);
                drop(watcher);
                drop(client);
                d
            })
        })
    }

    /// A client of our pb types behind tonic (the same codec for the floor and the crate).
    async fn tonic_client(
        uri: String,
        id: String,
    ) -> (
        mpsc::Sender<xds_sansio::pb::discovery::DiscoveryRequest>,
        Streaming<xds_sansio::pb::discovery::DiscoveryResponse>,
    ) {
        use xds_sansio::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
        let channel = tonic::transport::Endpoint::from_shared(uri)
            .unwrap()
            .connect()
            .await
            .expect("connect");
        let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX);
        grpc.ready().await.expect("ready");
        let (tx, rx) = mpsc::channel(4);
        tx.send(DiscoveryRequest {
            node: Some(xds_sansio::pb::envoy::config::core::v3::Node {
                id,
                ..Default::default()
            }),
            type_url: CDS.into(),
            ..Default::default()
        })
        .await
        .unwrap();
        let codec = tonic_prost::ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default();
        let responses = grpc
            .streaming(
                Request::new(ReceiverStream::new(rx)),
                tonic::codegen::http::uri::PathAndQuery::from_static(ADS_PATH),
                codec,
            )
            .await
            .expect("stream")
            .into_inner();
        (tx, responses)
    }

    /// The loopback floor: receive (tonic decodes the outer message), ACK at once.
    pub fn floor_contender<'a>(&'a self, wire: &'a Bytes) -> Box<dyn FnMut() -> Duration + 'a> {
        self.tonic_contender(wire, false)
    }

    /// xds-sansio's `Client` (opaque, Batched) behind the same tonic client.
    pub fn crate_contender<'a>(&'a self, wire: &'a Bytes) -> Box<dyn FnMut() -> Duration + 'a> {
        self.tonic_contender(wire, true)
    }

    fn tonic_contender<'a>(
        &'a self,
        wire: &'a Bytes,
        with_crate: bool,
    ) -> Box<dyn FnMut() -> Duration + 'a> {
        let response = EResp::decode(&wire[..]).expect("response");
        Box::new(move || {
            let response = response.clone();
            let uri = self.uri.clone();
            let id = self.id("tonic");
            let opened = &self.opened;
            self.rt.block_on(async move {
                let mut opened = opened.lock().await;
                use xds_sansio::client::{Client, ClientConfig, EventShape};
                use xds_sansio::pb::discovery::DiscoveryRequest;
                let (tx, mut responses) = Self::tonic_client(uri, id.clone()).await;
                let mut stream = Self::stream_of(&mut opened, &id).await;
                let client = tokio::spawn(async move {
                    let mut c = if with_crate {
                        let mut config = ClientConfig::new(
                            xds_sansio::Variant::Sotw,
                            xds_sansio::Transport::Aggregated,
                            Default::default(),
                        );
                        config.event_shape = EventShape::Batched;
                        let mut c = Client::new(config);
                        c.subscribe(CDS, &[]).unwrap_or_default();
                        c.connected(xds_sansio::Instant::ZERO);
                        while c.poll_request(xds_sansio::Instant::ZERO).is_some() {}
                        Some(c)
                    } else {
                        None
                    };
                    let resp = responses.message().await.expect("response").expect("open");
                    let ack = match &mut c {
                        Some(c) => {
                            c.handle_response(
                                xds_sansio::Instant::ZERO,
                                xds_sansio::Response::Sotw(resp),
                            );
                            let ack = c.poll_request(xds_sansio::Instant::ZERO);
                            while let Some(e) = c.poll_event() {
                                black_box(e);
                            }
                            match ack {
                                Some(xds_sansio::Request::Sotw(r)) => r,
                                other => panic!("no ACK: {other:?}"),
                            }
                        }
                        None => DiscoveryRequest {
                            type_url: resp.type_url.clone(),
                            version_info: resp.version_info.clone(),
                            response_nonce: resp.nonce.clone(),
                            ..Default::default()
                        },
                    };
                    tx.send(ack).await.expect("send ack");
                    // Keep the stream open until the server has read the ACK.
                    (tx, responses, c)
                });
                let (d, ack) = Self::exchange(&mut stream, response).await;
                Self::check_ack(if with_crate { "xds-sansio" } else { "floor" }, &ack);
                drop(client.await.expect("client task"));
                d
            })
        })
    }
}
