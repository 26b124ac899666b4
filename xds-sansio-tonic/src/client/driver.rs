//! The driver task: one tokio task owns the core's [`Session`] and carries out its
//! commands (connections, calls, requests), hands its events to the watches' sinks, and
//! reports every network event back to it through one channel, so the state has a single
//! owner and needs no lock. No protocol rule lives here: which server to use, when to
//! retry and what a watcher is told are the session's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic_prost::ProstCodec;
use xds_sansio::client::deps::DepsStatus;
use xds_sansio::client::session::{
    ServerUse, Session, SessionCommand, SessionEvent, StreamKey as SlotKey,
};
use xds_sansio::client::SharedStr;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::time::StdClock;
use xds_sansio::{Request, Response, Transport, Variant};

use super::bootstrap::{Bootstrap, ChannelCreds, ManagementServer};
use super::watch::{ConfigEvent, Sink, WatchEvent};
use super::DumpEntry;
use super::StreamTap;
use crate::wire::{method_path, WireRequest, WireResponse};

/// What the handles ask of the driver.
pub(crate) enum Op {
    Watch {
        id: u64,
        type_url: SharedStr,
        /// Canonical, or `*`.
        name: SharedStr,
        sink: Arc<Sink<WatchEvent>>,
    },
    WatchConfig {
        id: u64,
        /// The listener (canonical); `None`: every listener.
        listener: Option<SharedStr>,
        sink: Arc<Sink<ConfigEvent>>,
    },
    /// Ends a watch or a configuration watch.
    Unwatch {
        id: u64,
    },
    Dump(oneshot::Sender<Vec<DumpEntry>>),
    Dependencies(oneshot::Sender<Vec<DepsStatus>>),
    Servers(oneshot::Sender<Vec<ServerUse>>),
    Shutdown,
}

/// What the network did.
enum Io {
    Connected {
        key: SlotKey,
        stream: u64,
        channel: Channel,
    },
    Response {
        key: SlotKey,
        stream: u64,
        response: Response,
    },
    Ended {
        key: SlotKey,
        stream: u64,
        error: String,
    },
}

/// How connections are made.
#[derive(Clone)]
pub(crate) struct Connect {
    pub(crate) connect_timeout: Duration,
    pub(crate) keepalive: Option<(Duration, Duration)>,
    pub(crate) tap: Option<Arc<dyn StreamTap>>,
}

enum Outbound {
    Sotw(mpsc::UnboundedSender<DiscoveryRequest>),
    Delta(mpsc::UnboundedSender<DeltaDiscoveryRequest>),
}

impl Outbound {
    fn send(&self, request: Request) {
        // A closed receiver means the call ended; its end is reported separately.
        match (self, request) {
            (Outbound::Sotw(tx), Request::Sotw(r)) => {
                let _ = tx.send(r);
            }
            (Outbound::Delta(tx), Request::Delta(r)) => {
                let _ = tx.send(r);
            }
            _ => {}
        }
    }
}

struct Live {
    stream: u64,
    outbound: Option<Outbound>,
    task: tokio::task::JoinHandle<()>,
}

/// The bootstrap's server of each of the session's servers, by `ServerId`.
pub(crate) fn server_table(bootstrap: &Bootstrap, session: &Session) -> Vec<ManagementServer> {
    let all: Vec<&ManagementServer> = bootstrap
        .servers
        .iter()
        .chain(
            bootstrap
                .authorities
                .values()
                .flat_map(|a| a.servers.iter()),
        )
        .collect();
    session
        .server_ids()
        .filter_map(|id| {
            let model = session.server(id)?;
            all.iter()
                .find(|m| m.model() == *model)
                .map(|m| (*m).clone())
        })
        .collect()
}

/// The watches' sinks, by watch id.
#[derive(Default)]
struct Sinks {
    watches: HashMap<u64, Arc<Sink<WatchEvent>>>,
    configs: HashMap<u64, Arc<Sink<ConfigEvent>>>,
}

impl Sinks {
    fn close(&mut self, id: u64) {
        if let Some(sink) = self.watches.remove(&id) {
            sink.close();
        }
        if let Some(sink) = self.configs.remove(&id) {
            sink.close();
        }
    }

    /// Hands an event of the session to its sink, or to the log.
    fn deliver(&self, event: SessionEvent) {
        match event {
            SessionEvent::Watch { id, event } => {
                if let Some(sink) = self.watches.get(&id) {
                    sink.push(event);
                }
            }
            SessionEvent::Config { id, event } => {
                if let Some(sink) = self.configs.get(&id) {
                    sink.push(event);
                }
            }
            SessionEvent::StreamFailed {
                error, retry_in, ..
            } => {
                tracing::info!(%error, delay = ?retry_in, "xDS stream failed; retrying after backoff")
            }
            SessionEvent::StreamEnded { error, .. } => {
                tracing::info!(%error, "xDS stream ended after responses; reconnecting")
            }
            SessionEvent::FellBack {
                authority, from, ..
            } => {
                tracing::warn!(%authority, server = from.0, "xDS server unreachable with resources missing; falling back to the next server (gRPC A71)")
            }
            SessionEvent::Reverted { authority, to } => {
                tracing::info!(%authority, server = to.0, "a higher-priority server answered; reverting to it")
            }
            SessionEvent::DeletionIgnored { type_url, name } => {
                tracing::warn!(%type_url, %name, "the server deleted a resource in use; kept (ignore_resource_deletion)")
            }
            _ => {}
        }
    }
}

pub(crate) fn spawn(
    mut session: Session,
    servers: Vec<ManagementServer>,
    connect: Connect,
    clock: StdClock,
    ops: mpsc::UnboundedReceiver<Op>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let (io_tx, io_rx) = mpsc::unbounded_channel();
        run(&mut session, &servers, connect, clock, ops, io_tx, io_rx).await;
    })
}

async fn run(
    session: &mut Session,
    servers: &[ManagementServer],
    connect: Connect,
    clock: StdClock,
    mut ops: mpsc::UnboundedReceiver<Op>,
    io_tx: mpsc::UnboundedSender<Io>,
    mut io_rx: mpsc::UnboundedReceiver<Io>,
) {
    let mut live: HashMap<SlotKey, Live> = HashMap::new();
    let mut pending: HashMap<SlotKey, (u64, Variant, Transport)> = HashMap::new();
    let mut sinks = Sinks::default();
    loop {
        while let Some(command) = session.poll_command() {
            match command {
                SessionCommand::Connect {
                    key,
                    stream,
                    variant,
                    transport,
                } => {
                    if let Some(old) = live.remove(&key) {
                        old.task.abort();
                    }
                    let Some(server) = servers.get(key.server.0).cloned() else {
                        continue;
                    };
                    pending.insert(key, (stream, variant, transport));
                    let task =
                        tokio::spawn(open(key, stream, server, connect.clone(), io_tx.clone()));
                    live.insert(
                        key,
                        Live {
                            stream,
                            outbound: None,
                            task,
                        },
                    );
                }
                SessionCommand::Send {
                    key,
                    stream,
                    request,
                } => {
                    if let Some(tap) = &connect.tap {
                        tap.request(stream, &request);
                    }
                    if let Some(l) = live.get(&key).filter(|l| l.stream == stream) {
                        if let Some(out) = &l.outbound {
                            out.send(request);
                        }
                    }
                }
                SessionCommand::Close { key, stream } => {
                    if live.get(&key).is_some_and(|l| l.stream == stream) {
                        if let Some(l) = live.remove(&key) {
                            l.task.abort();
                        }
                    }
                    pending.remove(&key);
                }
                _ => {}
            }
        }
        while let Some(event) = session.poll_event() {
            sinks.deliver(event);
        }
        let deadline = session.poll_timeout().map(|t| clock.to_std(t));
        // The application's commands first: watches made together before a stream is up
        // ride on its first request (some servers do not answer a request that only adds
        // names at an unchanged version), and commands are few next to network events.
        tokio::select! {
            biased;
            op = ops.recv() => match op {
                Some(Op::Watch { id, type_url, name, sink }) => {
                    let name = (name.as_str() != "*").then_some(name.as_str());
                    match session.watch(clock.now(), id, &type_url, name) {
                        Ok(()) => { sinks.watches.insert(id, sink); }
                        Err(_) => sink.close(),
                    }
                }
                Some(Op::WatchConfig { id, listener, sink }) => {
                    match session.watch_config(clock.now(), id, listener.as_deref()) {
                        Ok(()) => { sinks.configs.insert(id, sink); }
                        Err(error) => {
                            tracing::warn!(?listener, %error, "listener refused by the dependency manager");
                            sink.close();
                        }
                    }
                }
                Some(Op::Unwatch { id }) => {
                    sinks.close(id);
                    session.unwatch(clock.now(), id);
                }
                Some(Op::Dump(reply)) => {
                    let _ = reply.send(session.dump());
                }
                Some(Op::Dependencies(reply)) => {
                    let _ = reply.send(session.deps_dump());
                }
                Some(Op::Servers(reply)) => {
                    let _ = reply.send(session.servers());
                }
                Some(Op::Shutdown) | None => {
                    session.close_all();
                    for (_, sink) in sinks.watches.drain() {
                        sink.close();
                    }
                    for (_, sink) in sinks.configs.drain() {
                        sink.close();
                    }
                    for (_, l) in live.drain() {
                        l.task.abort();
                    }
                    return;
                }
            },
            io = io_rx.recv() => match io {
                Some(Io::Connected { key, stream, channel }) => {
                    let Some((s, variant, transport)) = pending.remove(&key) else { continue };
                    if s != stream {
                        continue;
                    }
                    let Some(l) = live.get_mut(&key).filter(|l| l.stream == stream) else { continue };
                    // The first requests are queued before the call starts: they leave with it.
                    let (outbound, task) = call(key, stream, variant, &transport, channel, io_tx.clone());
                    l.outbound = Some(outbound);
                    l.task = task;
                    session.handle_connected(clock.now(), key, stream);
                }
                Some(Io::Response { key, stream, response }) => {
                    if let Some(tap) = &connect.tap {
                        tap.response(stream, &response);
                    }
                    session.handle_response(clock.now(), key, stream, response);
                }
                Some(Io::Ended { key, stream, error }) => {
                    if live.get(&key).is_some_and(|l| l.stream == stream) {
                        live.remove(&key);
                    }
                    session.handle_ended(clock.now(), key, stream, &error);
                }
                None => return,
            },
            () = sleep_until(deadline) => session.handle_timeout(clock.now()),
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Connects to `server`; reports `Connected` or `Ended`.
async fn open(
    key: SlotKey,
    stream: u64,
    server: ManagementServer,
    connect: Connect,
    io: mpsc::UnboundedSender<Io>,
) {
    let result = async {
        let mut endpoint = Endpoint::from_shared(server.endpoint_uri())
            .map_err(|e| format!("bad server_uri {:?}: {e}", server.server_uri))?
            .connect_timeout(connect.connect_timeout)
            .tcp_nodelay(true);
        if let Some((interval, timeout)) = connect.keepalive {
            endpoint = endpoint
                .http2_keep_alive_interval(interval)
                .keep_alive_timeout(timeout)
                .keep_alive_while_idle(true);
        }
        if let ChannelCreds::Tls(files) = &server.channel_creds {
            endpoint = tls(endpoint, files).await?;
        }
        // The connect timeout bounds the TCP connect; the whole attempt (TLS and HTTP/2
        // handshakes too) is bounded here, so a peer that accepts and stalls fails.
        match tokio::time::timeout(connect.connect_timeout, endpoint.connect()).await {
            Ok(Ok(channel)) => Ok(channel),
            Ok(Err(e)) => Err(format!("connect to {}: {}", server.server_uri, chain(&e))),
            Err(_) => Err(format!("connect to {}: timed out", server.server_uri)),
        }
    }
    .await;
    let _ = io.send(match result {
        Ok(channel) => Io::Connected {
            key,
            stream,
            channel,
        },
        Err(error) => Io::Ended { key, stream, error },
    });
}

#[cfg(feature = "tls")]
async fn tls(endpoint: Endpoint, files: &super::bootstrap::TlsFiles) -> Result<Endpoint, String> {
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
async fn tls(_: Endpoint, _: &super::bootstrap::TlsFiles) -> Result<Endpoint, String> {
    Err("TLS credentials need the `tls` feature".into())
}

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

/// Starts the call: returns where its requests go and the task pumping its responses.
fn call(
    key: SlotKey,
    stream: u64,
    variant: Variant,
    transport: &Transport,
    channel: Channel,
    io: mpsc::UnboundedSender<Io>,
) -> (Outbound, tokio::task::JoinHandle<()>) {
    let path = method_path(variant, transport);
    match variant {
        Variant::Sotw => {
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(pump::<DiscoveryRequest, DiscoveryResponse>(
                key, stream, path, channel, rx, io,
            ));
            (Outbound::Sotw(tx), task)
        }
        Variant::Delta => {
            let (tx, rx) = mpsc::unbounded_channel();
            let task = tokio::spawn(pump::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>(
                key, stream, path, channel, rx, io,
            ));
            (Outbound::Delta(tx), task)
        }
    }
}

async fn pump<Req: WireRequest, Resp: WireResponse>(
    key: SlotKey,
    stream: u64,
    path: Option<&'static str>,
    channel: Channel,
    rx: mpsc::UnboundedReceiver<Req>,
    io: mpsc::UnboundedSender<Io>,
) {
    let ended = |error: String| Io::Ended { key, stream, error };
    let Some(path) = path else {
        let _ = io.send(ended("no gRPC method for this transport".into()));
        return;
    };
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Err(e) = grpc.ready().await {
        let _ = io.send(ended(format!("channel not ready: {e}")));
        return;
    }
    let call = grpc.streaming(
        tonic::Request::new(UnboundedReceiverStream::new(rx)),
        PathAndQuery::from_static(path),
        ProstCodec::<Req, Resp>::default(),
    );
    let mut inbound = match call.await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            let _ = io.send(ended(status_text(&status)));
            return;
        }
    };
    loop {
        match inbound.message().await {
            Ok(Some(message)) => {
                let response = message.into_response();
                if io
                    .send(Io::Response {
                        key,
                        stream,
                        response,
                    })
                    .is_err()
                {
                    return;
                }
            }
            Ok(None) => {
                let _ = io.send(ended("the server closed the stream".into()));
                return;
            }
            Err(status) => {
                let _ = io.send(ended(status_text(&status)));
                return;
            }
        }
    }
}

fn status_text(status: &tonic::Status) -> String {
    format!("{:?}: {}", status.code(), status.message())
}

/// Watch ids, unique per process.
pub(crate) fn next_watch_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
