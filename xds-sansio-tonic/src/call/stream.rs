//! One gRPC call driving one [`xds_sansio::Client`] until the stream ends, for programs
//! that own their loop (re-exported as `client::run_stream`).
//!
//! The loop is the contract of `xds_sansio::client`: `connected(now)`, then after every
//! input (a response, a deadline, an application command) drain `poll_request` into the
//! call and `poll_event` to the application, then sleep until the next response, command
//! or `poll_timeout`; `disconnected(now)` when the call ends. The `Client` outlives the
//! call, so the caller reconnects by calling [`run_stream`] again with the same client.

use std::time::Duration;

use tokio::sync::mpsc;
use tonic::transport::Channel;
use tonic::Status;
use xds_sansio::time::StdClock;
use xds_sansio::{Client, ClientEvent, Request};

use super::{connect, sleep_until, ConnectOptions, Ready, Tap};
use crate::client::bootstrap::ManagementServer;

/// What the application can ask of a running stream.
pub enum StreamCommand {
    /// Run this on the client (subscribe, unsubscribe, verdict, ...).
    Apply(Box<dyn FnOnce(&mut Client) + Send>),
    /// End the call (the client is left disconnected).
    Stop,
}

/// How a call ended.
#[derive(Debug)]
pub struct StreamEnd {
    /// Whether at least one response arrived (a reconnect backoff may reset).
    pub got_response: bool,
    /// The status the call ended with (`None`: the server closed it cleanly, or `Stop`).
    pub status: Option<Status>,
    /// Whether a `StreamCommand::Stop` (or a dropped command sender) ended it.
    pub stopped: bool,
}

/// Everything a call needs besides the client.
pub struct Io<'a> {
    /// The connected channel.
    pub channel: Channel,
    /// The clock that maps tokio's time onto the crate's `Instant`.
    pub clock: &'a StdClock,
    /// Commands from the application.
    pub commands: &'a mut mpsc::UnboundedReceiver<StreamCommand>,
    /// Gets every event, with the client to look things up in.
    pub on_event: &'a mut (dyn FnMut(&Client, ClientEvent) + Send),
    /// Sees every message, and the number it sees this call under.
    pub tap: Option<(&'a dyn Tap, u64)>,
}

impl<'a> Io<'a> {
    /// A call on `channel` with no tap.
    pub fn new(
        channel: Channel,
        clock: &'a StdClock,
        commands: &'a mut mpsc::UnboundedReceiver<StreamCommand>,
        on_event: &'a mut (dyn FnMut(&Client, ClientEvent) + Send),
    ) -> Io<'a> {
        Io {
            channel,
            clock,
            commands,
            on_event,
            tap: None,
        }
    }
}

/// How long [`run_until_stopped`] waits after a call ends or a connection fails.
pub const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Runs `client` over one call after another to `server` until the application stops it
/// (a [`StreamCommand::Stop`] or a dropped command sender), [`RETRY_PAUSE`] after each call or
/// failed connection, with no backoff: the plain loop of tests, examples and test peers
/// (the [`XdsClient`](crate::client::XdsClient) has gRPC's backoff).
pub async fn run_until_stopped(
    client: &mut Client,
    server: &ManagementServer,
    clock: &StdClock,
    commands: &mut mpsc::UnboundedReceiver<StreamCommand>,
    on_event: &mut (dyn FnMut(&Client, ClientEvent) + Send),
) {
    let options = ConnectOptions {
        timeout: Duration::from_secs(5),
        keepalive: None,
    };
    loop {
        if let Ok(channel) = connect(server, &options).await {
            let io = Io::new(channel, clock, &mut *commands, &mut *on_event);
            if run_stream(client, io).await.stopped {
                return;
            }
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// Runs one gRPC call for `client` (its variant and transport choose the method; a
/// transport with no method in the catalog ends at once with `UNIMPLEMENTED`).
pub async fn run_stream(client: &mut Client, io: Io<'_>) -> StreamEnd {
    let Io {
        channel,
        clock,
        commands,
        on_event,
        tap,
    } = io;
    let mut end = StreamEnd {
        got_response: false,
        status: None,
        stopped: false,
    };
    let (variant, transport) = (client.config().variant, client.config().transport.clone());
    let ready = match Ready::new(channel, variant, &transport).await {
        Ok(ready) => ready,
        Err(status) => {
            end.status = Some(status);
            return end;
        }
    };
    let (tx, rx) = mpsc::unbounded_channel();
    client.connected(clock.now());
    // The first requests are queued before the call starts: they leave with it.
    flush(client, clock, &tx, on_event, tap);
    let mut inbound = match ready.start(rx).await {
        Ok(inbound) => inbound,
        Err(status) => {
            end.status = Some(status);
            client.disconnected(clock.now());
            flush(client, clock, &tx, on_event, tap);
            return end;
        }
    };
    loop {
        flush(client, clock, &tx, on_event, tap);
        let deadline = client.poll_timeout().map(|t| clock.to_std(t));
        tokio::select! {
            message = inbound.message() => match message {
                Ok(Some(response)) => {
                    end.got_response = true;
                    if let Some((tap, stream)) = tap {
                        tap.response(stream, &response);
                    }
                    client.handle_response(clock.now(), response);
                }
                Ok(None) => break,
                Err(status) => {
                    end.status = Some(status);
                    break;
                }
            },
            command = commands.recv() => match command {
                Some(StreamCommand::Apply(f)) => f(client),
                Some(StreamCommand::Stop) | None => {
                    end.stopped = true;
                    break;
                }
            },
            () = sleep_until(deadline) => client.handle_timeout(clock.now()),
        }
    }
    client.disconnected(clock.now());
    flush(client, clock, &tx, on_event, tap);
    end
}

/// Drains requests into the call and events to the application.
fn flush(
    client: &mut Client,
    clock: &StdClock,
    tx: &mpsc::UnboundedSender<Request>,
    on_event: &mut (dyn FnMut(&Client, ClientEvent) + Send),
    tap: Option<(&dyn Tap, u64)>,
) {
    let now = clock.now();
    while let Some(request) = client.poll_request(now) {
        if let Some((tap, stream)) = tap {
            tap.request(stream, &request);
        }
        // The receiver lives as long as the call; a closed call ends the loop anyway.
        let _ = tx.send(request);
    }
    while let Some(event) = client.poll_event() {
        on_event(client, event);
    }
}
