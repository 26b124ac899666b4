//! The network half of `conform`: a gRPC server a real client connects to, and a gRPC
//! client that dials a real server. Both hand messages to the scenario runner through
//! channels; the runner blocks on them with the patience and quiet period it was given.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::{Grpc, StreamingService};
use tonic::service::Routes;
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::{Request, Response, Transport, Variant};
use xds_sansio_tonic::call::{self, ConnectOptions};
use xds_sansio_tonic::client::ManagementServer;
use xds_sansio_tonic::wire::{add_every_service, method_path, route, WireRequest, WireResponse};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type BoxStream<T> = Pin<Box<dyn Stream<Item = T> + Send>>;

/// A call a real client opened to us.
pub struct Incoming {
    /// The method path.
    pub method: &'static str,
    /// Its variant and transport, from the path.
    pub variant: Variant,
    /// ADS or per-type.
    pub transport: Transport,
    /// Its requests, as they arrive; closed when the client half ends.
    pub requests: mpsc::UnboundedReceiver<Request>,
    /// Our responses; `Err` ends the call with that status.
    pub responses: mpsc::UnboundedSender<Result<Response, Status>>,
}

#[derive(Clone)]
struct Accept(mpsc::UnboundedSender<Incoming>);

struct Handler {
    accept: Accept,
    method: &'static str,
    variant: Variant,
    transport: Transport,
}

impl<Req: WireRequest, Resp: WireResponse> StreamingService<Req> for TypedHandler<Req, Resp> {
    type Response = Resp;
    type ResponseStream = BoxStream<Result<Resp, Status>>;
    type Future = BoxFuture<Result<tonic::Response<Self::ResponseStream>, Status>>;

    fn call(&mut self, request: tonic::Request<Streaming<Req>>) -> Self::Future {
        let (requests_tx, requests) = mpsc::unbounded_channel();
        let (responses, responses_rx) = mpsc::unbounded_channel::<Result<Response, Status>>();
        let mut inbound = request.into_inner();
        tokio::spawn(async move {
            while let Ok(Some(message)) = inbound.message().await {
                if requests_tx.send(message.into_request()).is_err() {
                    return;
                }
            }
        });
        let handler = &self.0;
        let incoming = Incoming {
            method: handler.method,
            variant: handler.variant,
            transport: handler.transport.clone(),
            requests,
            responses,
        };
        let accepted = handler.accept.0.send(incoming).is_ok();
        Box::pin(async move {
            if !accepted {
                return Err(Status::unavailable("conform: not accepting streams"));
            }
            let stream = UnboundedReceiverStream::new(responses_rx).map(|item| {
                item.and_then(|response| {
                    Resp::from_response(response)
                        .ok_or_else(|| Status::internal("conform: a response of the other variant"))
                })
            });
            Ok(tonic::Response::new(Box::pin(stream) as BoxStream<_>))
        })
    }
}

struct TypedHandler<Req, Resp>(Handler, std::marker::PhantomData<fn(Req) -> Resp>);

/// Hands one call of a real client to the scenario that accepts it.
async fn serve_call(accept: Accept, request: http::Request<Body>) -> http::Response<Body> {
    let path = request.uri().path().to_string();
    let Some((method, variant, transport)) = route(&path) else {
        return Status::unimplemented(format!("{path} is not an xDS method")).into_http();
    };
    let handler = Handler {
        accept,
        method,
        variant,
        transport,
    };
    match variant {
        Variant::Sotw => {
            let typed: TypedHandler<DiscoveryRequest, DiscoveryResponse> =
                TypedHandler(handler, std::marker::PhantomData);
            Grpc::new(ProstCodec::<DiscoveryResponse, DiscoveryRequest>::default())
                .streaming(typed, request)
                .await
        }
        Variant::Delta => {
            let typed: TypedHandler<DeltaDiscoveryRequest, DeltaDiscoveryResponse> =
                TypedHandler(handler, std::marker::PhantomData);
            Grpc::new(ProstCodec::<DeltaDiscoveryResponse, DeltaDiscoveryRequest>::default())
                .streaming(typed, request)
                .await
        }
    }
}

fn routes(accept: Accept) -> Routes {
    let mut routes = Routes::builder();
    add_every_service(&mut routes, move |request| {
        serve_call(accept.clone(), request)
    });
    routes.routes()
}

/// Serves every discovery service on `listen`; each call a real client opens arrives on
/// the returned channel. Returns the bound address.
pub fn serve(
    rt: &Runtime,
    listen: std::net::SocketAddr,
) -> Result<(std::net::SocketAddr, mpsc::UnboundedReceiver<Incoming>), String> {
    let (tx, rx) = mpsc::unbounded_channel();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind(listen))
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let server = tonic::transport::Server::builder()
        .add_routes(routes(Accept(tx)))
        .serve_with_incoming(incoming);
    rt.spawn(server);
    Ok((local, rx))
}

/// A call we opened to a real server.
pub struct Outgoing {
    /// Our requests.
    pub requests: mpsc::UnboundedSender<Request>,
    /// Its responses; `Err` once, when the call ends with a status other than OK.
    pub responses: mpsc::UnboundedReceiver<Result<Response, Status>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens a call of `variant` and `transport` to `target` (requests queued before the call
/// starts leave with it).
pub fn dial(
    rt: &Runtime,
    target: &str,
    variant: Variant,
    transport: &Transport,
    patience: Duration,
) -> Result<Outgoing, String> {
    method_path(variant, transport)
        .ok_or_else(|| format!("no gRPC method for {variant:?} {transport:?}"))?;
    let options = ConnectOptions::new(patience);
    let channel = rt
        .block_on(call::connect(&ManagementServer::insecure(target), &options))
        .map_err(|e| format!("--target {target}: {e}"))?;
    let (requests, requests_rx) = mpsc::unbounded_channel();
    let (responses_tx, responses) = mpsc::unbounded_channel();
    let transport = transport.clone();
    let task = rt.spawn(async move {
        let end = call::pump(channel, variant, &transport, requests_rx, |response| {
            responses_tx.send(Ok(response)).is_ok()
        })
        .await;
        if let Err(status) = end {
            let _ = responses_tx.send(Err(status));
        }
    });
    Ok(Outgoing {
        requests,
        responses,
        task,
    })
}

/// Waits at most `within` for the next item of `rx`: `Ok(None)` on time-out, `Err(())`
/// when the channel is closed.
pub fn recv_within<T>(
    rt: &Runtime,
    rx: &mut mpsc::UnboundedReceiver<T>,
    within: Duration,
) -> Result<Option<T>, ()> {
    rt.block_on(async {
        match tokio::time::timeout(within, rx.recv()).await {
            Ok(Some(item)) => Ok(Some(item)),
            Ok(None) => Err(()),
            Err(_) => Ok(None),
        }
    })
}
