//! The management server's driver: one tokio task per gRPC stream, each owning a
//! `ServerStream`, all reading one `ResourceStore` behind a lock.
//!
//! Per stream, the loop is the contract of `xds_sansio::server`: after every input (a
//! request, a store change, a deadline) drain `poll_event`, then `poll_response` until
//! `None`, send what came out in order, then sleep until the next request, store change or
//! `poll_timeout`. Responses leave as `poll_response_encoded` builds them: already encoded
//! from the store's per-resource frames, written to the wire as they are by
//! [`EncodedCodec`], so the server never encodes a response message.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tonic::body::Body;
use tonic::codec::{Codec, EncodeBuf, Encoder};
use tonic::codegen::{http, Service};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Status, Streaming};
use tonic_prost::{ProstCodec, ProstDecoder};
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest};
use xds_sansio::server::{EncodedResponse, ServerEvent};
use xds_sansio::time::StdClock;
use xds_sansio::transcript::Entry;
use xds_sansio::{ResourceStore, ServerConfig, ServerStream};

use super::{route, Recorder, WireRequest};

/// Every v3 discovery service this server answers (all their methods).
pub const SERVICES: [&str; 9] = [
    "envoy.service.discovery.v3.AggregatedDiscoveryService",
    "envoy.service.listener.v3.ListenerDiscoveryService",
    "envoy.service.route.v3.RouteDiscoveryService",
    "envoy.service.route.v3.ScopedRoutesDiscoveryService",
    "envoy.service.route.v3.VirtualHostDiscoveryService",
    "envoy.service.cluster.v3.ClusterDiscoveryService",
    "envoy.service.endpoint.v3.EndpointDiscoveryService",
    "envoy.service.secret.v3.SecretDiscoveryService",
    "envoy.service.runtime.v3.RuntimeDiscoveryService",
];

/// The state every stream task shares.
pub struct XdsServer {
    store: RwLock<ResourceStore>,
    /// The store revision, so stream tasks wake up on changes.
    revision: watch::Sender<u64>,
    /// Bumped to end every open stream (the client must reconnect).
    generation: watch::Sender<u64>,
    next_stream: AtomicU64,
    clock: StdClock,
    recorder: Option<Arc<Recorder>>,
    /// Print every event and message summary on stderr.
    pub verbose: bool,
}

impl XdsServer {
    /// A server with an empty store.
    pub fn new(clock: StdClock, recorder: Option<Arc<Recorder>>) -> Arc<XdsServer> {
        Arc::new(XdsServer {
            store: RwLock::new(ResourceStore::new()),
            revision: watch::channel(0).0,
            generation: watch::channel(0).0,
            next_stream: AtomicU64::new(0),
            clock,
            recorder,
            verbose: false,
        })
    }

    /// Changes the store, records what changed and wakes up every stream.
    pub fn update<R>(&self, change: impl FnOnce(&mut ResourceStore) -> R) -> R {
        let mut store = self.store.write().unwrap();
        let before = store.revision();
        let result = change(&mut store);
        if let (Some(recorder), Ok(changes)) = (&self.recorder, store.changes_since(before)) {
            for c in changes {
                let version = store.get(&c.type_url, &c.name).map(|r| r.version().into());
                recorder.record(|line| Entry::Store {
                    line,
                    type_url: c.type_url.clone(),
                    name: c.name.clone(),
                    version,
                });
            }
        }
        self.revision.send_replace(store.revision().0);
        result
    }

    /// Reads the store.
    pub fn with_store<R>(&self, read: impl FnOnce(&ResourceStore) -> R) -> R {
        read(&self.store.read().unwrap())
    }

    /// Ends every open stream with `UNAVAILABLE`; clients are expected to reconnect.
    pub fn end_streams(&self) {
        self.generation.send_modify(|g| *g += 1);
    }

    /// Serves every discovery service on `listener` until the future is dropped.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
    ) -> Result<(), tonic::transport::Error> {
        tonic::transport::Server::builder()
            .add_service(Svc::<0>(self.clone()))
            .add_service(Svc::<1>(self.clone()))
            .add_service(Svc::<2>(self.clone()))
            .add_service(Svc::<3>(self.clone()))
            .add_service(Svc::<4>(self.clone()))
            .add_service(Svc::<5>(self.clone()))
            .add_service(Svc::<6>(self.clone()))
            .add_service(Svc::<7>(self.clone()))
            .add_service(Svc::<8>(self))
            .serve_with_incoming(TcpListenerStream::new(listener))
            .await
    }

    fn log(&self, stream: u64, what: impl FnOnce() -> String) {
        if self.verbose {
            eprintln!("[server stream {stream}] {}", what());
        }
    }
}

/// One discovery service (`SERVICES[I]`); every method is routed by its path.
#[derive(Clone)]
struct Svc<const I: usize>(Arc<XdsServer>);

impl<const I: usize> NamedService for Svc<I> {
    const NAME: &'static str = SERVICES[I];
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<const I: usize> Service<http::Request<Body>> for Svc<I> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let server = self.0.clone();
        Box::pin(async move {
            let Some((variant, transport)) = route(request.uri().path()) else {
                return Ok(Status::unimplemented(request.uri().path().to_string()).into_http());
            };
            let config = ServerConfig::new(variant, transport);
            let handler = Handler { server, config };
            Ok(match variant {
                xds_sansio::Variant::Sotw => {
                    let codec = EncodedCodec::<DiscoveryRequest>::default();
                    Grpc::new(codec).streaming(handler, request).await
                }
                xds_sansio::Variant::Delta => {
                    let codec = EncodedCodec::<DeltaDiscoveryRequest>::default();
                    Grpc::new(codec).streaming(handler, request).await
                }
            })
        })
    }
}

/// Decodes requests with prost; writes responses that are already encoded as they are.
struct EncodedCodec<Req>(ProstCodec<Req, Req>);

impl<Req> Default for EncodedCodec<Req> {
    fn default() -> Self {
        EncodedCodec(ProstCodec::default())
    }
}

impl<Req: prost::Message + Default + Send + 'static> Codec for EncodedCodec<Req> {
    type Encode = Bytes;
    type Decode = Req;
    type Encoder = RawEncoder;
    type Decoder = ProstDecoder<Req>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> ProstDecoder<Req> {
        self.0.decoder()
    }
}

/// Copies an encoded message into the gRPC frame.
struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

struct Handler {
    server: Arc<XdsServer>,
    config: ServerConfig,
}

impl<Req: WireRequest> StreamingService<Req> for Handler {
    type Response = Bytes;
    type ResponseStream = ReceiverStream<Result<Bytes, Status>>;
    type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: tonic::Request<Streaming<Req>>) -> Self::Future {
        // Answer with the response headers at once (some clients, junction-core among them,
        // send their first request only after the headers) and run the stream in its task.
        let (tx, rx) = mpsc::channel(64);
        let server = self.server.clone();
        let config = self.config.clone();
        tokio::spawn(run_stream(server, config, request.into_inner(), tx));
        std::future::ready(Ok(tonic::Response::new(ReceiverStream::new(rx))))
    }
}

/// Drives one stream until the client or the server ends it.
async fn run_stream<Req: WireRequest>(
    server: Arc<XdsServer>,
    config: ServerConfig,
    mut inbound: Streaming<Req>,
    tx: mpsc::Sender<Result<Bytes, Status>>,
) {
    let id = server.next_stream.fetch_add(1, Ordering::Relaxed) + 1;
    let mut stream = ServerStream::new(config);
    let mut revision = server.revision.subscribe();
    let mut generation = server.generation.subscribe();
    generation.mark_unchanged();
    let mut protocol_error = None;
    loop {
        let now = server.clock.now();
        while let Some(event) = stream.poll_event() {
            server.log(id, || format!("{event:?}"));
            if let ServerEvent::ProtocolError(e) = event {
                protocol_error = Some(e.to_string());
            }
        }
        let responses: Vec<EncodedResponse> = server.with_store(|store| {
            revision.mark_unchanged();
            std::iter::from_fn(|| stream.poll_response_encoded(now, store)).collect()
        });
        for encoded in responses {
            // Only the recording and the log need the message back.
            if let (Some(recorder), Ok(response)) = (&server.recorder, encoded.decode()) {
                recorder.record(|line| Entry::Response {
                    line,
                    stream: id,
                    response,
                });
            }
            server.log(id, || match encoded.decode() {
                Ok(response) => format!("-> {}", summary(&response)),
                Err(e) => format!("-> undecodable response: {e}"),
            });
            if tx.send(Ok(encoded.bytes)).await.is_err() {
                return;
            }
        }
        if stream.is_closed() {
            let message = protocol_error.unwrap_or_else(|| "protocol error".into());
            let _ = tx.send(Err(Status::invalid_argument(message))).await;
            return;
        }
        let deadline = stream.poll_timeout().map(|t| server.clock.to_std(t));
        tokio::select! {
            message = inbound.message() => match message {
                Ok(Some(message)) => {
                    let request = message.into_request();
                    if let Some(recorder) = &server.recorder {
                        let request = request.clone();
                        recorder.record(|line| Entry::Request { line, stream: id, request });
                    }
                    server.log(id, || format!("<- {}", request_summary(&request)));
                    stream.handle_request(server.clock.now(), request);
                }
                Ok(None) => {
                    server.log(id, || "client closed the stream".into());
                    return;
                }
                Err(status) => {
                    server.log(id, || format!("stream broke: {status}"));
                    return;
                }
            },
            Ok(()) = revision.changed() => {}
            Ok(()) = generation.changed() => {
                server.log(id, || "ending the stream (UNAVAILABLE)".into());
                let _ = tx.send(Err(Status::unavailable("the server ended the stream"))).await;
                return;
            }
            () = sleep_until(deadline) => stream.handle_timeout(server.clock.now()),
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// One line about a response: type, version, nonce, names.
pub fn summary(response: &xds_sansio::Response) -> String {
    match response {
        xds_sansio::Response::Sotw(r) => format!(
            "{} V={} N={} ({} resources)",
            short(&r.type_url),
            r.version_info,
            r.nonce,
            r.resources.len()
        ),
        xds_sansio::Response::Delta(r) => format!(
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
pub fn request_summary(request: &xds_sansio::Request) -> String {
    match request {
        xds_sansio::Request::Sotw(r) => format!(
            "{} V={} N={} R={:?}{}",
            short(&r.type_url),
            r.version_info,
            r.response_nonce,
            r.resource_names,
            r.error_detail
                .as_ref()
                .map(|e| format!(" NACK: {}", e.message))
                .unwrap_or_default()
        ),
        xds_sansio::Request::Delta(r) => format!(
            "{} N={} +{:?} -{:?} initial={:?}{}",
            short(&r.type_url),
            r.response_nonce,
            r.resource_names_subscribe,
            r.resource_names_unsubscribe,
            r.initial_resource_versions,
            r.error_detail
                .as_ref()
                .map(|e| format!(" NACK: {}", e.message))
                .unwrap_or_default()
        ),
    }
}

fn short(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}
