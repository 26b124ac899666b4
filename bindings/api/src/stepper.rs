//! A model stepper: the core's client or server state machine, fed encoded messages one at
//! a time on a virtual clock, so a test can put an implementation and the model side by
//! side: give both the same input, compare what each sends.

use bytes::Bytes;
use prost::Message as _;
use serde::{Deserialize, Serialize};
use xds_sansio::pb::decode_discovery_response;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::{
    Client, ClientConfig, Instant, Request, ResourceStore, Response, ServerConfig, ServerStream,
    Transport, Variant,
};

use crate::check::variant;
use crate::error::{Error, ErrorKind};

/// Which side the model plays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The model is the client: feed it responses, it sends requests.
    #[default]
    Client,
    /// The model is the server: feed it requests, it sends responses.
    Server,
}

/// How to build a [`Stepper`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StepperOptions {
    /// The side the model plays.
    pub role: Role,
    /// `sotw` (default) or `delta`.
    pub variant: Option<String>,
    /// A type URL: a per-type stream of that type instead of ADS.
    pub per_type: Option<String>,
    /// The client's node id.
    pub node_id: Option<String>,
}

/// One message the model sends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Message {
    /// The encoded message (a request or a response of the stepper's variant).
    #[serde(serialize_with = "base64_bytes")]
    pub bytes: Vec<u8>,
    /// The same as a readable summary (the message's debug form).
    pub text: String,
}

fn base64_bytes<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use base64::Engine;
    s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// One event of the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The event's name (`Upserted`, `Acked`, `Nacked`, `DoesNotExist`, ...).
    pub kind: String,
    /// The whole event in its debug form.
    pub detail: String,
}

impl Event {
    fn of(event: &impl std::fmt::Debug) -> Event {
        let detail = format!("{event:?}");
        let kind = detail
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .next()
            .unwrap_or_default()
            .to_string();
        Event { kind, detail }
    }
}

/// What the model did after one input: the messages it sends, then its events.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Step {
    /// The messages it sends, in order.
    pub messages: Vec<Message>,
    /// Its events, in order.
    pub events: Vec<Event>,
}

enum Machine {
    Client(Box<Client>),
    Server {
        stream: Box<ServerStream>,
        store: Box<ResourceStore>,
    },
}

/// The model's client or server on one stream, on a virtual clock that starts at zero.
///
/// # Method kinds
/// Inputs ([`Stepper::handle`], [`Stepper::connected`], [`Stepper::advance`]) and commands
/// ([`Stepper::subscribe`] for a client, [`Stepper::set`] / [`Stepper::remove`] for a
/// server) each return the [`Step`] that followed: what the model sends and its events.
pub struct Stepper {
    machine: Machine,
    variant: Variant,
    now: Instant,
}

impl std::fmt::Debug for Stepper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stepper")
            .field("variant", &self.variant)
            .finish_non_exhaustive()
    }
}

fn usage(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::Usage, message)
}

impl Stepper {
    /// A model client (not yet connected) or server (an empty store).
    pub fn new(options: &StepperOptions) -> Result<Stepper, Error> {
        let variant = variant(options.variant.as_deref())?;
        let transport = match &options.per_type {
            Some(type_url) => Transport::PerType(type_url.clone()),
            None => Transport::Aggregated,
        };
        let machine = match options.role {
            Role::Client => {
                let node = Node {
                    id: options.node_id.clone().unwrap_or_default(),
                    ..Node::default()
                };
                Machine::Client(Box::new(Client::new(ClientConfig::new(
                    variant, transport, node,
                ))))
            }
            Role::Server => Machine::Server {
                stream: Box::new(ServerStream::new(ServerConfig::new(variant, transport))),
                store: Box::default(),
            },
        };
        Ok(Stepper {
            machine,
            variant,
            now: Instant::ZERO,
        })
    }

    /// Client: the stream is up (sends the first requests).
    pub fn connected(&mut self) -> Result<Step, Error> {
        match &mut self.machine {
            Machine::Client(client) => client.connected(self.now),
            Machine::Server { .. } => return Err(usage("connected: only a client connects")),
        }
        Ok(self.drain())
    }

    /// Client: the stream broke (what it holds survives for the next `connected`).
    pub fn disconnected(&mut self) -> Result<Step, Error> {
        match &mut self.machine {
            Machine::Client(client) => client.disconnected(self.now),
            Machine::Server { .. } => return Err(usage("disconnected: only for a client")),
        }
        Ok(self.drain())
    }

    /// Client: subscribe to `names` of `type_url` (none: the wildcard).
    pub fn subscribe(&mut self, type_url: &str, names: &[&str]) -> Result<Step, Error> {
        match &mut self.machine {
            Machine::Client(client) => client
                .subscribe(type_url, names)
                .map_err(|e| usage(format!("subscribe: {e}")))?,
            Machine::Server { .. } => return Err(usage("subscribe: only a client subscribes")),
        }
        Ok(self.drain())
    }

    /// Server: add or replace an encoded resource in the store, named as its body says.
    pub fn set(&mut self, type_url: &str, body: Vec<u8>) -> Result<Step, Error> {
        let entry = crate::resources::entry(Bytes::from(body))?;
        match &mut self.machine {
            Machine::Server { store, .. } => store
                .set(type_url, &entry.name, entry.body)
                .map_err(|e| Error::new(ErrorKind::Resources, e.to_string()))?,
            Machine::Client(_) => return Err(usage("set: only a server has a store")),
        };
        Ok(self.drain())
    }

    /// Server: remove a resource from the store.
    pub fn remove(&mut self, type_url: &str, name: &str) -> Result<Step, Error> {
        match &mut self.machine {
            Machine::Server { store, .. } => {
                store.remove(type_url, name);
            }
            Machine::Client(_) => return Err(usage("remove: only a server has a store")),
        }
        Ok(self.drain())
    }

    /// Feeds the peer's encoded message: a response to a client, a request to a server, of
    /// the stepper's variant. Bytes that do not decode are an error; the model is unchanged.
    pub fn handle(&mut self, bytes: &[u8]) -> Result<Step, Error> {
        let bad = |what: &str, e: prost::DecodeError| {
            Error::new(ErrorKind::Message, format!("not a {what}: {e}"))
        };
        match &mut self.machine {
            Machine::Client(client) => {
                let response = match self.variant {
                    // One copy of the frame, whose slices the bodies then are (prost's
                    // decode of a slice copies every body on its own).
                    Variant::Sotw => Response::Sotw(
                        decode_discovery_response(Bytes::copy_from_slice(bytes))
                            .map_err(|e| bad("DiscoveryResponse", e))?,
                    ),
                    Variant::Delta => Response::Delta(
                        DeltaDiscoveryResponse::decode(bytes)
                            .map_err(|e| bad("DeltaDiscoveryResponse", e))?,
                    ),
                };
                client.handle_response(self.now, response);
            }
            Machine::Server { stream, .. } => {
                let request = match self.variant {
                    Variant::Sotw => Request::Sotw(
                        DiscoveryRequest::decode(bytes).map_err(|e| bad("DiscoveryRequest", e))?,
                    ),
                    Variant::Delta => Request::Delta(
                        DeltaDiscoveryRequest::decode(bytes)
                            .map_err(|e| bad("DeltaDiscoveryRequest", e))?,
                    ),
                };
                stream.handle_request(self.now, request);
            }
        }
        Ok(self.drain())
    }

    /// Moves the virtual clock `millis` forward and fires what is due (does-not-exist
    /// timers, TTL expiry).
    pub fn advance(&mut self, millis: u64) -> Step {
        self.now = self
            .now
            .saturating_add(std::time::Duration::from_millis(millis));
        match &mut self.machine {
            Machine::Client(client) => client.handle_timeout(self.now),
            Machine::Server { stream, .. } => stream.handle_timeout(self.now),
        }
        self.drain()
    }

    /// The virtual time, in milliseconds since the stepper began.
    pub fn now_millis(&self) -> u64 {
        self.now.as_nanos() / 1_000_000
    }

    /// Everything the machine has to send, then its events.
    fn drain(&mut self) -> Step {
        let mut step = Step::default();
        match &mut self.machine {
            Machine::Client(client) => {
                while let Some(request) = client.poll_request(self.now) {
                    step.messages.push(match &request {
                        Request::Sotw(r) => message(r),
                        Request::Delta(r) => message(r),
                    });
                }
                while let Some(event) = client.poll_event() {
                    step.events.push(Event::of(&event));
                }
            }
            Machine::Server { stream, store } => {
                while let Some(response) = stream.poll_response(self.now, store) {
                    step.messages.push(match &response {
                        Response::Sotw(r) => message(r),
                        Response::Delta(r) => message(r),
                    });
                }
                while let Some(event) = stream.poll_event() {
                    step.events.push(Event::of(&event));
                }
            }
        }
        step
    }
}

fn message<M: prost::Message + std::fmt::Debug>(m: &M) -> Message {
    Message {
        bytes: m.encode_to_vec(),
        text: format!("{m:?}"),
    }
}
