//! One gRPC xDS call, the plumbing every part of the adapter and the CLI shares: connect
//! to a management server ([`connect`]), start the call of a variant and transport once
//! the channel is ready ([`Ready`]), read its responses ([`Inbound`]) or pump them all
//! ([`pump`]), see every message ([`Tap`]), and sleep until a machine's next deadline
//! ([`sleep_until`]). [`run_stream`] drives one core [`Client`](xds_sansio::Client) over
//! one call, [`run_until_stopped`] over one call after another. No protocol rule lives
//! here: the core's machines say what to send and when.
//!
//! # Decisions
//!
//! - **Requests are `xds_sansio::Request`s on an unbounded channel**: what the caller
//!   queues before the call starts leaves with it (some servers do not answer a request
//!   that only adds names at an unchanged version, so the first request must carry every
//!   name); a request of the other variant is dropped (the core never makes one).
//! - **The channel is ready before the call starts** ([`Ready::new`]), so a caller can tell
//!   its machine it is connected between the two (gRPC A57: no does-not-exist timer runs
//!   while connecting).
//! - **A connection attempt is bounded as a whole** ([`ConnectOptions::timeout`]): the TCP
//!   connect, and the TLS and HTTP/2 handshakes, so a peer that accepts and stalls fails.

mod stream;

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::{Request, Response, Transport, Variant};

use crate::client::bootstrap::{ChannelCreds, ManagementServer, TlsFiles};
use crate::wire::{method_path, ResponseCodec, WireRequest, WireResponse};

pub use stream::{run_stream, run_until_stopped, Io, StreamCommand, StreamEnd, RETRY_PAUSE};

/// Sees every message of every call it is given (to record conversations for the checker,
/// or log them); `stream` numbers the calls.
pub trait Tap: Send + Sync {
    /// A request is about to be sent on `stream`.
    fn request(&self, stream: u64, request: &Request);
    /// A response arrived on `stream` (before the machine handles it).
    fn response(&self, stream: u64, response: &Response);
}

/// How connections are made.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// The longest a whole connection attempt may take.
    pub timeout: Duration,
    /// HTTP/2 keepalive: a PING every `.0`, the connection dropped when one is not
    /// answered within `.1`; `None`: off.
    pub keepalive: Option<(Duration, Duration)>,
}

impl ConnectOptions {
    /// A connection attempt bounded by `timeout`, without keepalive.
    pub fn new(timeout: Duration) -> ConnectOptions {
        ConnectOptions {
            timeout,
            keepalive: None,
        }
    }
}

/// Connects to `server` with its credentials (TLS needs the crate's `tls` feature); the
/// error says what failed, for a log or a stream's end.
pub async fn connect(
    server: &ManagementServer,
    options: &ConnectOptions,
) -> Result<Channel, String> {
    let mut endpoint = Endpoint::from_shared(server.endpoint_uri())
        .map_err(|e| format!("bad server_uri {:?}: {e}", server.server_uri))?
        .connect_timeout(options.timeout)
        .tcp_nodelay(true);
    if let Some((interval, timeout)) = options.keepalive {
        endpoint = endpoint
            .http2_keep_alive_interval(interval)
            .keep_alive_timeout(timeout)
            .keep_alive_while_idle(true);
    }
    if let ChannelCreds::Tls(files) = &server.channel_creds {
        endpoint = tls(endpoint, files).await?;
    }
    // The connect timeout bounds the TCP connect; the whole attempt is bounded here.
    match tokio::time::timeout(options.timeout, endpoint.connect()).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => Err(format!("connect to {}: {}", server.server_uri, chain(&e))),
        Err(_) => Err(format!("connect to {}: timed out", server.server_uri)),
    }
}

#[cfg(feature = "tls")]
async fn tls(endpoint: Endpoint, files: &TlsFiles) -> Result<Endpoint, String> {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};
    // Small files, read once per connection attempt.
    let read = |path: &std::path::PathBuf| {
        std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let mut config = ClientTlsConfig::new();
    if let Some(ca) = &files.ca_certificate_file {
        config = config.ca_certificate(Certificate::from_pem(read(ca)?));
    }
    if let (Some(cert), Some(key)) = (&files.certificate_file, &files.private_key_file) {
        config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
    }
    endpoint.tls_config(config).map_err(|e| format!("TLS: {e}"))
}

#[cfg(not(feature = "tls"))]
async fn tls(_: Endpoint, _: &TlsFiles) -> Result<Endpoint, String> {
    Err("TLS credentials need the `tls` feature".into())
}

/// An error and its sources, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

/// A call whose channel is ready, not started yet.
#[derive(Debug)]
pub struct Ready {
    grpc: Grpc<Channel>,
    path: &'static str,
    variant: Variant,
}

impl Ready {
    /// Waits for `channel` to be ready for a call of `variant` and `transport`:
    /// `UNIMPLEMENTED` for a transport with no method in the catalog, `UNAVAILABLE` for a
    /// channel that is not ready.
    pub async fn new(
        channel: Channel,
        variant: Variant,
        transport: &Transport,
    ) -> Result<Ready, Status> {
        let path = method_path(variant, transport)
            .ok_or_else(|| Status::unimplemented("no gRPC method for this transport"))?;
        let mut grpc = Grpc::new(channel);
        grpc.ready()
            .await
            .map_err(|e| Status::unavailable(format!("channel not ready: {e}")))?;
        Ok(Ready {
            grpc,
            path,
            variant,
        })
    }

    /// Starts the call: `requests` leave as they are queued (those queued already leave
    /// with the call); its responses are read from the [`Inbound`].
    pub async fn start(
        mut self,
        requests: mpsc::UnboundedReceiver<Request>,
    ) -> Result<Inbound, Status> {
        Ok(match self.variant {
            Variant::Sotw => Inbound::Sotw(
                start::<DiscoveryRequest, DiscoveryResponse>(&mut self.grpc, self.path, requests)
                    .await?,
            ),
            Variant::Delta => Inbound::Delta(
                start::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>(
                    &mut self.grpc,
                    self.path,
                    requests,
                )
                .await?,
            ),
        })
    }
}

async fn start<Req: WireRequest, Resp: WireResponse>(
    grpc: &mut Grpc<Channel>,
    path: &'static str,
    requests: mpsc::UnboundedReceiver<Request>,
) -> Result<Streaming<Resp>, Status> {
    let outbound = UnboundedReceiverStream::new(requests).filter_map(Req::from_request);
    let call = grpc.streaming(
        tonic::Request::new(outbound),
        PathAndQuery::from_static(path),
        ResponseCodec::<Req, Resp>::default(),
    );
    Ok(call.await?.into_inner())
}

/// The responses of a started call.
#[derive(Debug)]
pub enum Inbound {
    /// A SotW call's.
    Sotw(Streaming<DiscoveryResponse>),
    /// An incremental call's.
    Delta(Streaming<DeltaDiscoveryResponse>),
}

impl Inbound {
    /// The next response; `Ok(None)` once the server closed the call cleanly, `Err` when it
    /// ended with a status. Cancel-safe, as tonic's `Streaming::message`.
    pub async fn message(&mut self) -> Result<Option<Response>, Status> {
        Ok(match self {
            Inbound::Sotw(s) => s.message().await?.map(WireResponse::into_response),
            Inbound::Delta(s) => s.message().await?.map(WireResponse::into_response),
        })
    }
}

/// Runs a call to its end, handing every response to `on_response` (which returns
/// `false` to stop reading). `Ok` once the server closed the call cleanly or
/// `on_response` stopped; `Err` when it could not start or ended with a status.
pub async fn pump(
    channel: Channel,
    variant: Variant,
    transport: &Transport,
    requests: mpsc::UnboundedReceiver<Request>,
    mut on_response: impl FnMut(Response) -> bool,
) -> Result<(), Status> {
    let mut inbound = Ready::new(channel, variant, transport)
        .await?
        .start(requests)
        .await?;
    while let Some(response) = inbound.message().await? {
        if !on_response(response) {
            break;
        }
    }
    Ok(())
}

/// How a call [`pump`]ed to its end ended, as the core's session takes it: the gRPC status
/// (`OK` when the server closed the call), with the server's retry hint when its trailers
/// carry one (gRFC A6's `grpc-retry-pushback-ms`, a non-negative integer of milliseconds;
/// anything else is no hint).
pub fn ended(end: Result<(), Status>) -> xds_sansio::client::session::StreamEnd {
    use xds_sansio::client::session::StreamEnd;
    match end {
        Ok(()) => StreamEnd::status(0, "the server closed the stream"),
        Err(status) => {
            let end = StreamEnd::status(status.code() as i32, status.message());
            let hint = status
                .metadata()
                .get("grpc-retry-pushback-ms")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
            match hint {
                Some(millis) => end.with_retry_after(Duration::from_millis(millis)),
                None => end,
            }
        }
    }
}

/// Sleeps until `deadline`, forever without one: a machine's `poll_timeout` as a branch of
/// `tokio::select!`.
pub async fn sleep_until(deadline: Option<impl Into<tokio::time::Instant>>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ended_reads_the_retry_hint_of_the_trailers() {
        let mut shed = Status::unavailable("come back later");
        shed.metadata_mut()
            .insert("grpc-retry-pushback-ms", "1500".parse().unwrap());
        assert_eq!(
            ended(Err(shed)).retry_after(),
            Some(Duration::from_millis(1500))
        );
        // Not a non-negative integer: no hint (gRFC A6 lets a negative one forbid retries;
        // the session retries on its backoff regardless, as gRPC A57 asks of xDS clients).
        let mut odd = Status::unavailable("odd");
        odd.metadata_mut()
            .insert("grpc-retry-pushback-ms", "-1".parse().unwrap());
        assert_eq!(ended(Err(odd)).retry_after(), None);
        assert_eq!(ended(Err(Status::unavailable("plain"))).retry_after(), None);
        assert_eq!(ended(Ok(())).retry_after(), None);
    }
}
