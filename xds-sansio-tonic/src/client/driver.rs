//! The driver task: one tokio task owns the core's [`Session`] and carries out its
//! commands (connections, calls, requests), hands its events to the watches' sinks, and
//! reports every network event back to it through one channel, so the state has a single
//! owner and needs no lock. No protocol rule lives here: which server to use, when to
//! retry and what a watcher is told are the session's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tonic::transport::Channel;
use xds_sansio::client::session::{
    Session, SessionCommand, SessionEvent, StreamEnd, StreamKey as SlotKey,
};
use xds_sansio::client::SharedStr;
use xds_sansio::time::StdClock;
use xds_sansio::{Request, Response, Transport, Variant};

use super::bootstrap::ManagementServer;
use super::watch::{ConfigEvent, Sink, Unwatch, WatchEvent};
use crate::call::{self, sleep_until, ConnectOptions, Tap};
use crate::fail_static::{CacheDir, Persist};

/// What the handles ask of the driver.
pub(crate) enum Op {
    Watch {
        id: u64,
        type_url: SharedStr,
        /// Canonical; `None`: every resource of the type.
        name: Option<SharedStr>,
        sink: Arc<Sink<WatchEvent>>,
    },
    WatchConfig {
        id: u64,
        /// The listener (canonical); `None`: every listener.
        listener: Option<SharedStr>,
        sink: Arc<Sink<ConfigEvent>>,
    },
    /// Ends a watch or a configuration watch (its id).
    Unwatch(u64),
    /// Reads the session (a dump, the dependencies, the servers) for a handle.
    Read(Box<dyn FnOnce(&Session) + Send>),
    Shutdown,
}

impl Unwatch for mpsc::UnboundedSender<Op> {
    fn unwatch(&self, id: u64) {
        let _ = self.send(Op::Unwatch(id));
    }
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
        end: StreamEnd,
    },
}

/// How connections are made.
#[derive(Clone)]
pub(crate) struct Connect {
    pub(crate) options: ConnectOptions,
    pub(crate) tap: Option<Arc<dyn Tap>>,
}

struct Live {
    stream: u64,
    /// What the call speaks, until it is started.
    call: Option<(Variant, Transport)>,
    /// Where the call's requests go, once it is started.
    outbound: Option<mpsc::UnboundedSender<Request>>,
    task: tokio::task::JoinHandle<()>,
}

/// The watches' sinks, by watch id.
#[derive(Default)]
struct Sinks {
    watches: HashMap<u64, Arc<Sink<WatchEvent>>>,
    configs: HashMap<u64, Arc<Sink<ConfigEvent>>>,
}

impl Sinks {
    fn close(&mut self, id: u64) {
        self.watches.remove(&id).inspect(|sink| sink.close());
        self.configs.remove(&id).inspect(|sink| sink.close());
    }

    /// Hands an event of the session to its sink, or to the log.
    fn deliver(&self, event: SessionEvent) {
        match event {
            SessionEvent::Watch { id, event } => {
                self.watches.get(&id).inspect(|sink| sink.push(event));
            }
            SessionEvent::Config { id, event } => {
                self.configs.get(&id).inspect(|sink| sink.push(event));
            }
            SessionEvent::StreamFailed { end, retry_in, .. } => {
                tracing::info!(%end, delay = ?retry_in, "xDS stream failed; retrying after backoff")
            }
            SessionEvent::StreamEnded { end, .. } => {
                tracing::info!(%end, "xDS stream ended after responses; reconnecting")
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
    cache: Option<CacheDir>,
    ops: mpsc::UnboundedReceiver<Op>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let persist = Persist::restore(&mut session, cache).await;
        run(&mut session, &servers, connect, persist, ops).await
    })
}

async fn run(
    session: &mut Session,
    servers: &[ManagementServer],
    connect: Connect,
    mut persist: Persist,
    mut ops: mpsc::UnboundedReceiver<Op>,
) {
    let clock = StdClock::new();
    let mut persist_tick = tokio::time::interval(std::time::Duration::from_secs(1));
    let (io_tx, mut io_rx) = mpsc::unbounded_channel();
    let mut live: HashMap<SlotKey, Live> = HashMap::new();
    let mut sinks = Sinks::default();
    loop {
        while let Some(command) = session.poll_command() {
            match command {
                SessionCommand::Connect {
                    key,
                    stream,
                    variant,
                    transport,
                    address,
                } => {
                    if let Some(old) = live.remove(&key) {
                        old.task.abort();
                    }
                    let Some(mut server) = servers.get(key.server.0).cloned() else {
                        continue;
                    };
                    // The replica the session chose (its `server_uri` when it has none).
                    server.server_uri = address;
                    let task =
                        tokio::spawn(open(key, stream, server, connect.options, io_tx.clone()));
                    let call = Some((variant, transport));
                    let outbound = None;
                    live.insert(
                        key,
                        Live {
                            stream,
                            call,
                            outbound,
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
                            // A closed receiver means the call ended; its end is reported
                            // separately.
                            let _ = out.send(request);
                        }
                    }
                }
                SessionCommand::Close { key, stream }
                    if live.get(&key).is_some_and(|l| l.stream == stream) =>
                {
                    if let Some(l) = live.remove(&key) {
                        l.task.abort();
                    }
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
                    match session.watch(clock.now(), id, &type_url, name.as_deref()) {
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
                Some(Op::Unwatch(id)) => {
                    sinks.close(id);
                    session.unwatch(clock.now(), id);
                }
                Some(Op::Read(read)) => read(session),
                Some(Op::Shutdown) | None => {
                    session.close_all();
                    sinks.watches.drain().for_each(|(_, sink)| sink.close());
                    sinks.configs.drain().for_each(|(_, sink)| sink.close());
                    for (_, l) in live.drain() {
                        l.task.abort();
                    }
                    return;
                }
            },
            io = io_rx.recv() => match io {
                Some(Io::Connected { key, stream, channel }) => {
                    let Some(l) = live.get_mut(&key).filter(|l| l.stream == stream) else { continue };
                    let Some((variant, transport)) = l.call.take() else { continue };
                    // The first requests are queued before the call starts: they leave with it.
                    let (outbound, requests) = mpsc::unbounded_channel();
                    l.outbound = Some(outbound);
                    l.task = tokio::spawn(pump(key, stream, variant, transport, channel, requests, io_tx.clone()));
                    session.handle_connected(clock.now(), key, stream);
                }
                Some(Io::Response { key, stream, response }) => {
                    if let Some(tap) = &connect.tap {
                        tap.response(stream, &response);
                    }
                    session.handle_response(clock.now(), key, stream, response);
                }
                Some(Io::Ended { key, stream, end }) => {
                    if live.get(&key).is_some_and(|l| l.stream == stream) {
                        live.remove(&key);
                    }
                    session.handle_ended(clock.now(), key, stream, &end);
                }
                None => return,
            },
            () = sleep_until(deadline) => session.handle_timeout(clock.now()),
            _ = persist_tick.tick(), if persist.cache.is_some() => persist.tick(session),
        }
    }
}

/// Connects to `server`; reports `Connected` or `Ended`.
async fn open(
    key: SlotKey,
    stream: u64,
    server: ManagementServer,
    options: ConnectOptions,
    io: mpsc::UnboundedSender<Io>,
) {
    let _ = io.send(match call::connect(&server, &options).await {
        Ok(channel) => Io::Connected {
            key,
            stream,
            channel,
        },
        Err(error) => Io::Ended {
            key,
            stream,
            end: StreamEnd::transport(error),
        },
    });
}

/// Runs the call of a connected stream; reports each response, then how it ended.
async fn pump(
    key: SlotKey,
    stream: u64,
    variant: Variant,
    transport: Transport,
    channel: Channel,
    requests: mpsc::UnboundedReceiver<Request>,
    io: mpsc::UnboundedSender<Io>,
) {
    let end = call::pump(channel, variant, &transport, requests, |response| {
        io.send(Io::Response {
            key,
            stream,
            response,
        })
        .is_ok()
    })
    .await;
    let _ = io.send(Io::Ended {
        key,
        stream,
        end: call::ended(end),
    });
}

/// Watch ids, unique per process.
pub(crate) fn next_watch_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
