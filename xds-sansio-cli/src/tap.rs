//! `xds-sansio tap`: a gRPC proxy for every xDS RPC that forwards both directions
//! unchanged, records every stream in the record format and checks both sides live.
//!
//! Decisions:
//! - **Forwarded at the HTTP/2 level, byte for byte.** The tap never decodes and
//!   re-encodes what it forwards: each call's headers, data and trailers go to the other
//!   side as they came (tonic's channel sets the upstream's authority). A copy of the data
//!   is cut into gRPC messages (`grpc` length prefixes, "gRPC over HTTP2", Length-Prefixed
//!   Message) and decoded on the side; a message that does not decode, or a compressed one
//!   (the tap does not inflate), is reported and forwarded all the same.
//! - **Every xDS RPC.** The tap answers every service of the catalog (ADS and per-type,
//!   SotW and delta, v3 and v2: [`xds_sansio_tonic::wire::SERVICES`]); the method path
//!   says the variant.
//! - **One recording, streams numbered.** Every stream goes into one recording, behind the
//!   format's header line, each line with its stream number and variant, in the order the
//!   tap saw the messages: the proxy's order, between the client's and the server's.
//!   Messages that cross (a request sent while a response is on its way) may be seen in
//!   either order there, so an order rule may differ from the server's own recording
//!   (docs/conform.md says which); the checker accepts every order the protocol allows.
//! - **Checked live.** A [`LiveCheck`] follows the recording; each violation is printed
//!   when the message that breaks the rule passes, with the stream, the line of the
//!   recording and the rule's passage.

use std::fs::File;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use prost::Message;
use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::codegen::{http, Service};
use tonic::service::Routes;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::decode_discovery_response;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest};
use xds_sansio::{Request, Response, Transport, Variant};
use xds_sansio_conformance::check::{CheckSide, LiveCheck};
use xds_sansio_conformance::transcript::Entry;
use xds_sansio_tonic::call::Tap;
use xds_sansio_tonic::client::ManagementServer;
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::wire::{add_every_service, route};

use crate::output::say;

/// The largest message the tap cuts out of a stream to check; a larger one is forwarded
/// and reported, and the rest of that direction is forwarded unchecked.
const MAX_MESSAGE: usize = 64 << 20;

/// What `tap` was asked to do.
pub struct Options {
    /// Where clients connect.
    pub listen: SocketAddr,
    /// The management server (`host:port` or a URL).
    pub upstream: String,
    /// Where the recording goes.
    pub record: Option<PathBuf>,
    /// Resource schemas for the recording's canonical JSON.
    pub codec: JsonCodec,
    /// Stop after this many streams have ended.
    pub exit_after_streams: Option<u64>,
}

struct Shared {
    upstream: Channel,
    next_stream: AtomicU64,
    /// Records every message, in the order the tap saw them, a live checker following.
    recorder: Recorder,
    /// The violations the checker found.
    violations: Arc<AtomicU64>,
    ended: mpsc::UnboundedSender<u64>,
}

/// Checks each entry as it is recorded and prints what it breaks (and an entry that could
/// not be written).
fn live_check(violations: Arc<AtomicU64>) -> impl FnMut(&Entry, Option<&str>) + Send {
    let mut live = LiveCheck::new();
    move |entry, unwritten| {
        if let Some(e) = unwritten {
            say!("line {}: not recorded: {e}", entry.line());
        }
        let stream = match entry {
            Entry::Request { stream, .. } | Entry::Response { stream, .. } => *stream,
            Entry::Store { .. } => 0,
        };
        live.handle_entry(entry);
        while let Some((side, v)) = live.poll_violation() {
            violations.fetch_add(1, Ordering::Relaxed);
            let side = match side {
                CheckSide::Client => "client",
                CheckSide::Server => "server",
            };
            say!(
                "stream {stream} line {}: {side} broke {}: {}\n    {}",
                v.line,
                v.rule.id(),
                v.detail,
                v.rule.passage()
            );
        }
    }
}

/// One call through the tap.
struct StreamCtx {
    id: u64,
    variant: Variant,
}

/// Which way a body flows.
#[derive(Clone, Copy)]
enum Flow {
    Requests,
    Responses,
}

/// Cuts gRPC length-prefixed messages out of a byte stream.
#[derive(Default)]
struct Frames {
    buf: BytesMut,
    /// A message too large to check passed: the rest is forwarded unchecked.
    gave_up: bool,
}

enum Cut {
    Message(Bytes),
    Compressed,
    TooLarge(usize),
}

impl Frames {
    fn push(&mut self, data: &[u8], out: &mut Vec<Cut>) {
        if self.gave_up {
            return;
        }
        self.buf.extend_from_slice(data);
        loop {
            let Some(header) = self.buf.get(..5) else {
                return;
            };
            let compressed = header.first().copied().unwrap_or(0) != 0;
            let mut len_bytes = [0u8; 4];
            len_bytes.copy_from_slice(header.get(1..5).unwrap_or(&[0; 4]));
            let len = u32::from_be_bytes(len_bytes) as usize;
            if len > MAX_MESSAGE {
                self.gave_up = true;
                self.buf.clear();
                out.push(Cut::TooLarge(len));
                return;
            }
            if self.buf.len() < 5 + len {
                return;
            }
            self.buf.advance(5);
            let message = self.buf.split_to(len).freeze();
            out.push(if compressed {
                Cut::Compressed
            } else {
                Cut::Message(message)
            });
        }
    }
}

/// A body passed on unchanged, with a copy of its data cut into messages and observed.
struct Tee {
    inner: Body,
    flow: Flow,
    ctx: Arc<StreamCtx>,
    shared: Arc<Shared>,
    frames: Frames,
    /// The response side says when the call is over (once).
    done: bool,
}

impl Tee {
    fn data(&mut self, data: &[u8]) {
        let mut cuts = Vec::new();
        self.frames.push(data, &mut cuts);
        for cut in cuts {
            let id = self.ctx.id;
            match cut {
                Cut::Message(bytes) => self.message(bytes),
                Cut::Compressed => {
                    say!("stream {id}: a compressed message passed (forwarded, not checked)")
                }
                Cut::TooLarge(len) => say!(
                    "stream {id}: a message of {len} bytes passed; the rest of this direction \
                     is forwarded unchecked"
                ),
            }
        }
    }

    fn message(&self, bytes: Bytes) {
        let stream = self.ctx.id;
        let tap: &dyn Tap = &self.shared.recorder;
        let decoded = match (self.flow, self.ctx.variant) {
            (Flow::Requests, Variant::Sotw) => {
                DiscoveryRequest::decode(bytes).map(|m| tap.request(stream, &Request::Sotw(m)))
            }
            (Flow::Requests, Variant::Delta) => DeltaDiscoveryRequest::decode(bytes)
                .map(|m| tap.request(stream, &Request::Delta(m))),
            (Flow::Responses, Variant::Sotw) => {
                decode_discovery_response(bytes).map(|m| tap.response(stream, &Response::Sotw(m)))
            }
            (Flow::Responses, Variant::Delta) => DeltaDiscoveryResponse::decode(bytes)
                .map(|m| tap.response(stream, &Response::Delta(m))),
        };
        if let Err(e) = decoded {
            let what = match self.flow {
                Flow::Requests => "a request",
                Flow::Responses => "a response",
            };
            say!("stream {stream}: {what} that does not decode passed (forwarded): {e}");
        }
    }

    fn end(&mut self, how: &str) {
        if matches!(self.flow, Flow::Responses) && !self.done {
            self.done = true;
            say!("stream {} ended: {how}", self.ctx.id);
            let _ = self.shared.ended.send(self.ctx.id);
        }
    }
}

impl Drop for Tee {
    fn drop(&mut self) {
        self.end("cancelled");
    }
}

/// The status a call ended with, read from its trailers (or trailers-only headers).
fn status_of(headers: &http::HeaderMap) -> String {
    let code = headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("?");
    match headers.get("grpc-message").and_then(|v| v.to_str().ok()) {
        Some(message) if !message.is_empty() => {
            format!("grpc-status {code} ({})", percent_decoded(message))
        }
        _ => format!("grpc-status {code}"),
    }
}

/// `grpc-message` is percent-encoded ("gRPC over HTTP2", Responses).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b, hex) {
            (b'%', Some(value)) => {
                out.push(value);
                i += 3;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl HttpBody for Tee {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.data(data);
                } else if let Some(trailers) = frame.trailers_ref() {
                    let status = status_of(trailers);
                    this.end(&status);
                }
            }
            Poll::Ready(Some(Err(status))) => {
                let how = format!("error {status}");
                this.end(&how);
            }
            Poll::Ready(None) => this.end("closed"),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Forwards one call upstream, teeing both bodies.
async fn forward(shared: Arc<Shared>, request: http::Request<Body>) -> http::Response<Body> {
    let path = request.uri().path().to_string();
    let Some((_, variant, transport)) = route(&path) else {
        return Status::unimplemented(format!("tap: {path} is not an xDS method")).into_http();
    };
    let id = shared.next_stream.fetch_add(1, Ordering::Relaxed);
    let peer = request
        .extensions()
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    let shape = match (&transport, variant) {
        (Transport::Aggregated, Variant::Sotw) => "SotW ADS".to_string(),
        (Transport::Aggregated, Variant::Delta) => "delta ADS".to_string(),
        (Transport::PerType(url), Variant::Sotw) => format!("SotW {url}"),
        (Transport::PerType(url), Variant::Delta) => format!("delta {url}"),
    };
    say!("stream {id} opened: {path} ({shape}){peer}");
    let ctx = Arc::new(StreamCtx { id, variant });
    let (parts, body) = request.into_parts();
    let body = Body::new(Tee {
        inner: body,
        flow: Flow::Requests,
        ctx: ctx.clone(),
        shared: shared.clone(),
        frames: Frames::default(),
        done: true,
    });
    let mut upstream = shared.upstream.clone();
    if let Err(e) = std::future::poll_fn(|cx| upstream.poll_ready(cx)).await {
        say!("stream {id} ended: upstream unavailable: {e}");
        let _ = shared.ended.send(id);
        return Status::unavailable(format!("tap: upstream: {e}")).into_http();
    }
    match upstream.call(http::Request::from_parts(parts, body)).await {
        Ok(response) => {
            let (parts, body) = response.into_parts();
            let mut tee = Tee {
                inner: body,
                flow: Flow::Responses,
                ctx,
                shared,
                frames: Frames::default(),
                done: false,
            };
            // A trailers-only answer (an immediate error) has its status in the headers.
            if parts.headers.contains_key("grpc-status") {
                tee.end(&status_of(&parts.headers));
            }
            http::Response::from_parts(parts, Body::new(tee))
        }
        Err(e) => {
            say!("stream {id} ended: upstream unavailable: {e}");
            let _ = shared.ended.send(id);
            Status::unavailable(format!("tap: upstream: {e}")).into_http()
        }
    }
}

fn routes(shared: &Arc<Shared>) -> Routes {
    let mut routes = Routes::builder();
    let shared = shared.clone();
    add_every_service(&mut routes, move |request| forward(shared.clone(), request));
    routes.routes()
}

/// Runs the tap until Ctrl-C, SIGTERM or `exit_after_streams`; returns the number of
/// messages checked and of violations.
pub async fn run(options: Options) -> Result<(u64, u64), String> {
    let uri = ManagementServer::insecure(options.upstream.as_str()).endpoint_uri();
    let upstream = Endpoint::from_shared(uri.clone())
        .map_err(|e| format!("--upstream {}: {e}", options.upstream))?
        .connect_lazy();
    let file = match &options.record {
        Some(path) => Some(File::create(path).map_err(|e| format!("{}: {e}", path.display()))?),
        None => None,
    };
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    let violations = Arc::new(AtomicU64::new(0));
    let recorder = Recorder::with_codec(file, options.codec)
        .without_memory()
        .followed_by(live_check(violations.clone()));
    let shared = Arc::new(Shared {
        upstream,
        next_stream: AtomicU64::new(1),
        recorder,
        violations,
        ended: ended_tx,
    });
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    let local = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {}: {e}", options.listen))?;
    say!("tap listening on {local}, forwarding to {uri}");
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    let limit = options.exit_after_streams;
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let stop = async move {
        let mut count = 0u64;
        let streams_done = async {
            while ended.recv().await.is_some() {
                count += 1;
                if limit.is_some_and(|limit| count >= limit) {
                    return;
                }
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = streams_done => {}
            _ = tokio::signal::ctrl_c() => {}
            () = terminated() => {}
        }
        let _ = stopping.send(());
    };
    let serving = tonic::transport::Server::builder()
        .add_routes(routes(&shared))
        .serve_with_incoming_shutdown(incoming, stop);
    // Once stopped, streams still open (a client that keeps its stream) get a grace of
    // 2 s, then the tap ends anyway: its closing line must not wait for the client.
    let grace = async {
        if stopped.await.is_ok() {
            tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        served = serving => served.map_err(|e| format!("tap: {e}"))?,
        () = grace => {}
    }
    Ok((
        shared.recorder.recorded() as u64,
        shared.violations.load(Ordering::Relaxed),
    ))
}

/// Resolves on SIGTERM (never where there is none).
#[cfg(unix)]
pub(crate) async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}

#[cfg(not(unix))]
pub(crate) async fn terminated() {
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![flag];
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn messages_are_cut_whatever_the_chunking() {
        let mut stream = framed(0, b"hello");
        stream.extend(framed(1, b"zz"));
        stream.extend(framed(0, b""));
        stream.extend(framed(0, b"world!"));
        for chunk in 1..stream.len() {
            let mut frames = Frames::default();
            let mut cuts = Vec::new();
            for piece in stream.chunks(chunk) {
                frames.push(piece, &mut cuts);
            }
            let seen: Vec<String> = cuts
                .iter()
                .map(|c| match c {
                    Cut::Message(b) => String::from_utf8_lossy(b).into_owned(),
                    Cut::Compressed => "<compressed>".into(),
                    Cut::TooLarge(n) => format!("<{n}>"),
                })
                .collect();
            assert_eq!(seen, ["hello", "<compressed>", "", "world!"], "{chunk}");
        }
    }

    #[test]
    fn grpc_messages_are_percent_decoded() {
        assert_eq!(percent_decoded("the%20end%"), "the end%");
        assert_eq!(percent_decoded("caf%C3%A9 %zz"), "café %zz");
    }

    #[test]
    fn a_huge_length_stops_checking_without_buffering() {
        let mut frames = Frames::default();
        let mut cuts = Vec::new();
        frames.push(&[0, 0xff, 0xff, 0xff, 0xff, 1, 2, 3], &mut cuts);
        frames.push(&framed(0, b"later"), &mut cuts);
        assert!(matches!(cuts.as_slice(), [Cut::TooLarge(_)]));
        assert!(frames.buf.is_empty());
    }
}
