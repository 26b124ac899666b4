//! One gRPC call driving one [`xds_sansio::Client`] until the stream ends: the building
//! block under [`XdsClient`](super::XdsClient), for programs that own their loop.
//!
//! The loop is the contract of `xds_sansio::client`: `connected(now)`, then after every
//! input (a response, a deadline, an application command) drain `poll_request` into the
//! call and `poll_event` to the application, then sleep until the next response, command
//! or `poll_timeout`; `disconnected(now)` when the call ends. The `Client` outlives the
//! call, so the caller reconnects by calling [`run_stream`] again with the same client.

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::Status;
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::time::StdClock;
use xds_sansio::{Client, ClientEvent, Request, Response, Variant};

use crate::wire::{method_path, WireRequest, WireResponse};

/// Sees every message of a client's call (to record the conversation, log it, ...).
pub trait Tap: Send + Sync {
    /// A request is about to be sent.
    fn request(&self, request: &Request);
    /// A response arrived (before the client handles it).
    fn response(&self, response: &Response);
}

/// What the application can ask of a running stream.
pub enum Command {
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
    /// Whether a `Command::Stop` (or a dropped command sender) ended it.
    pub stopped: bool,
}

/// Everything a call needs besides the client.
pub struct Io<'a> {
    /// The connected channel.
    pub channel: Channel,
    /// The clock that maps tokio's time onto the crate's `Instant`.
    pub clock: &'a StdClock,
    /// Commands from the application.
    pub commands: &'a mut mpsc::UnboundedReceiver<Command>,
    /// Gets every event, with the client to look things up in.
    pub on_event: &'a mut (dyn FnMut(&Client, ClientEvent) + Send),
    /// Sees every message.
    pub tap: Option<&'a dyn Tap>,
}

/// Runs one gRPC call for `client` (its variant and transport choose the method; a
/// transport with no method in the catalog ends at once with `UNIMPLEMENTED`).
pub async fn run_stream(client: &mut Client, io: Io<'_>) -> StreamEnd {
    let Some(path) = method_path(client.config().variant, &client.config().transport) else {
        return StreamEnd {
            got_response: false,
            status: Some(Status::unimplemented("no gRPC method for this transport")),
            stopped: false,
        };
    };
    match client.config().variant {
        Variant::Sotw => run::<DiscoveryRequest, DiscoveryResponse>(client, io, path).await,
        Variant::Delta => {
            run::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>(client, io, path).await
        }
    }
}

async fn run<Req: WireRequest, Resp: WireResponse>(
    client: &mut Client,
    io: Io<'_>,
    path: &'static str,
) -> StreamEnd {
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
    let (tx, rx) = mpsc::unbounded_channel::<Req>();
    let mut grpc = tonic::client::Grpc::new(channel);
    if let Err(e) = grpc.ready().await {
        end.status = Some(Status::unavailable(e.to_string()));
        return end;
    }
    client.connected(clock.now());
    // The first requests are queued before the call starts: they leave with it.
    flush(client, clock, &tx, on_event, tap);
    let call = grpc.streaming(
        tonic::Request::new(UnboundedReceiverStream::new(rx)),
        PathAndQuery::from_static(path),
        ProstCodec::<Req, Resp>::default(),
    );
    let mut inbound = match call.await {
        Ok(response) => response.into_inner(),
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
                Ok(Some(message)) => {
                    end.got_response = true;
                    let response = message.into_response();
                    if let Some(tap) = tap {
                        tap.response(&response);
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
                Some(Command::Apply(f)) => f(client),
                Some(Command::Stop) | None => {
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
fn flush<Req: WireRequest>(
    client: &mut Client,
    clock: &StdClock,
    tx: &mpsc::UnboundedSender<Req>,
    on_event: &mut (dyn FnMut(&Client, ClientEvent) + Send),
    tap: Option<&dyn Tap>,
) {
    let now = clock.now();
    while let Some(request) = client.poll_request(now) {
        if let Some(tap) = tap {
            tap.request(&request);
        }
        if let Some(message) = Req::from_request(request) {
            // The receiver lives as long as the call; a closed call ends the loop anyway.
            let _ = tx.send(message);
        }
    }
    while let Some(event) = client.poll_event() {
        on_event(client, event);
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}
