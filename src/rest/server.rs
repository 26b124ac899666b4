//! The serving side: each `POST` waits, on its own SotW server stream, until the store has
//! something the client does not hold or its deadline passes.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::{type_url_for_path, HttpResponse, CONTENT_TYPE_JSON};
use crate::json::JsonCodec;
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::DiscoveryRequest;
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::google::rpc::Status;
use crate::server::{ResourceStore, Revision, ServerConfig, ServerEvent, ServerStream};
use crate::time::Instant;

/// Identifies one waiting HTTP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RestRequestId(pub u64);

/// How a [`RestServer`] treats requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestServerConfig {
    /// Whether every request must carry a node (each REST request stands alone, so this is
    /// checked per request). Default `true`.
    pub require_node: bool,
    /// TTL heartbeats are due `ttl / heartbeat_divisor` after a resource was sent (see
    /// [`ServerConfig::heartbeat_divisor`]).
    pub heartbeat_divisor: u32,
}

impl Default for RestServerConfig {
    fn default() -> RestServerConfig {
        RestServerConfig {
            require_node: true,
            heartbeat_divisor: 2,
        }
    }
}

/// What the application should know about the requests.
#[derive(Clone, Debug, PartialEq)]
pub enum RestServerEvent {
    /// A request was read and now waits for its answer.
    Received {
        /// Its id.
        id: RestRequestId,
        /// The type it polls.
        type_url: String,
        /// Its node (boxed: it is large and the other event is not).
        node: Option<Box<Node>>,
        /// The version the client holds.
        version_info: String,
        /// The names it subscribes to (empty for the legacy wildcard).
        resource_names: Vec<String>,
    },
    /// The request NACKs a response (it carries `error_detail`).
    Nacked {
        /// Its id.
        id: RestRequestId,
        /// The type.
        type_url: String,
        /// The nonce it answers: the rejected `version_info` for responses of this
        /// server; may be empty (nonce optional).
        nonce: String,
        /// The client's error.
        error: Status,
    },
}

#[derive(Clone, Debug)]
struct Waiting {
    stream: ServerStream,
    type_url: String,
    version: String,
    nonce: String,
    deadline: Instant,
    /// The first build has been done (its result is compared with what the client holds).
    checked: bool,
    /// The store revision of the type at the last build.
    revision: Revision,
}

/// The server side of REST-JSON polling. See the [module docs](super).
#[derive(Clone, Debug)]
pub struct RestServer {
    config: RestServerConfig,
    codec: JsonCodec,
    waiting: BTreeMap<RestRequestId, Waiting>,
    ready: VecDeque<(RestRequestId, HttpResponse)>,
    events: VecDeque<RestServerEvent>,
    next_id: u64,
    now: Instant,
}

fn text(status: u16, body: String) -> HttpResponse {
    HttpResponse {
        status,
        content_type: Some("text/plain"),
        body,
    }
}

/// The documented not-modified answer: `304` and an empty body.
fn not_modified() -> HttpResponse {
    HttpResponse {
        status: 304,
        content_type: None,
        body: String::new(),
    }
}

impl RestServer {
    /// A server with nothing waiting; `codec` writes the responses (add resource schemas to
    /// it for canonical `Any`s).
    pub fn new(config: RestServerConfig, codec: JsonCodec) -> RestServer {
        RestServer {
            config,
            codec,
            waiting: BTreeMap::new(),
            ready: VecDeque::new(),
            events: VecDeque::new(),
            next_id: 0,
            now: Instant::ZERO,
        }
    }

    /// How many requests wait for an answer.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Takes one HTTP request; its answer comes from [`RestServer::poll_response`] (at the
    /// latest at `deadline`; pass `now` for plain polling). Never fails: a bad request is
    /// answered with an error status.
    pub fn handle_request(
        &mut self,
        now: Instant,
        method: &str,
        path: &str,
        body: &[u8],
        deadline: Instant,
    ) -> RestRequestId {
        self.now = now;
        self.next_id = self.next_id.wrapping_add(1);
        let id = RestRequestId(self.next_id);
        match self.admit(now, id, method, path, body, deadline) {
            Ok(waiting) => {
                self.waiting.insert(id, waiting);
            }
            Err(answer) => self.ready.push_back((id, answer)),
        }
        id
    }

    fn admit(
        &mut self,
        now: Instant,
        id: RestRequestId,
        method: &str,
        path: &str,
        body: &[u8],
        deadline: Instant,
    ) -> Result<Waiting, HttpResponse> {
        if method != "POST" {
            return Err(text(405, format!("method {method} not allowed; use POST")));
        }
        let Some(type_url) = type_url_for_path(path) else {
            let why = if path.contains("aggregated") {
                "ADS is not available for REST-JSON polling"
            } else {
                "no REST-JSON endpoint here"
            };
            return Err(text(404, format!("{path}: {why}")));
        };
        let body = core::str::from_utf8(body).map_err(|e| {
            text(
                400,
                format!("body: invalid UTF-8 at byte offset {}", e.valid_up_to()),
            )
        })?;
        let request: DiscoveryRequest = self.codec.from_str(body).map_err(|e| {
            if looks_incremental(body) {
                text(
                    400,
                    String::from("incremental xDS is not available over REST-JSON polling"),
                )
            } else {
                text(400, format!("body is not a JSON DiscoveryRequest: {e}"))
            }
        })?;
        let mut stream = ServerStream::new(ServerConfig {
            require_node: self.config.require_node,
            heartbeat_divisor: self.config.heartbeat_divisor,
            ..ServerConfig::new(Variant::Sotw, Transport::PerType(String::from(type_url)))
        });
        stream.handle_request(now, Request::Sotw(request.clone()));
        while let Some(event) = stream.poll_event() {
            if let ServerEvent::ProtocolError(e) = event {
                return Err(text(400, e.to_string()));
            }
        }
        self.events.push_back(RestServerEvent::Received {
            id,
            type_url: String::from(type_url),
            node: request.node.clone().map(Box::new),
            version_info: request.version_info.clone(),
            resource_names: request.resource_names.clone(),
        });
        if let Some(error) = request.error_detail {
            self.events.push_back(RestServerEvent::Nacked {
                id,
                type_url: String::from(type_url),
                nonce: request.response_nonce.clone(),
                error,
            });
        }
        Ok(Waiting {
            stream,
            type_url: String::from(type_url),
            version: request.version_info,
            nonce: request.response_nonce,
            deadline,
            checked: false,
            revision: Revision(0),
        })
    }

    /// The client went away: forget request `id`. Returns whether it was waiting.
    pub fn cancel(&mut self, id: RestRequestId) -> bool {
        self.ready.retain(|(r, _)| *r != id);
        self.waiting.remove(&id).is_some()
    }

    /// The next answer to send, if any: call after every `handle_request`, every store
    /// change and every `handle_timeout`, until `None`. Waiting requests are looked at in
    /// the order they came.
    pub fn poll_response(
        &mut self,
        now: Instant,
        store: &ResourceStore,
    ) -> Option<(RestRequestId, HttpResponse)> {
        self.now = now;
        if let Some(answer) = self.ready.pop_front() {
            return Some(answer);
        }
        let ids: Vec<RestRequestId> = self.waiting.keys().copied().collect();
        for id in ids {
            let answer = match self.waiting.get_mut(&id) {
                Some(w) => check(w, now, store, &self.codec),
                None => None,
            };
            if let Some(answer) = answer {
                self.waiting.remove(&id);
                return Some((id, answer));
            }
        }
        None
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<RestServerEvent> {
        self.events.pop_front()
    }

    /// When to call [`RestServer::handle_timeout`]: the last `now` while answers are ready
    /// or a request was not looked at yet, else the earliest deadline or TTL heartbeat.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.ready.is_empty() || self.waiting.values().any(|w| !w.checked) {
            return Some(self.now);
        }
        self.waiting
            .values()
            .map(|w| match w.stream.poll_timeout() {
                Some(t) => t.min(w.deadline),
                None => w.deadline,
            })
            .min()
    }

    /// Fires deadlines (the request is answered `304`) and heartbeats due at `now`; then
    /// call [`RestServer::poll_response`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let expired: Vec<RestRequestId> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.checked && w.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.waiting.remove(&id);
            self.ready.push_back((id, not_modified()));
        }
        for w in self.waiting.values_mut() {
            w.stream.handle_timeout(now);
        }
    }
}

/// Looks at one waiting request: its answer if the store has something the client does not
/// hold (or a heartbeat is due), `304` if its deadline has passed, else `None`.
fn check(
    w: &mut Waiting,
    now: Instant,
    store: &ResourceStore,
    codec: &JsonCodec,
) -> Option<HttpResponse> {
    let revision = store.type_revision(&w.type_url);
    let heartbeat = w.stream.poll_timeout().is_some_and(|t| t <= now);
    if !w.checked || revision != w.revision || heartbeat {
        if heartbeat {
            w.stream.handle_timeout(now);
        }
        let first = !w.checked;
        w.checked = true;
        w.revision = revision;
        if let Some(Response::Sotw(mut response)) = w.stream.poll_response(now, store) {
            let held = response.version_info == w.version;
            let rejected = !w.nonce.is_empty() && response.version_info == w.nonce;
            if !(first && (held || rejected)) {
                response.nonce = response.version_info.clone();
                return Some(match codec.to_string(&response) {
                    Ok(body) => HttpResponse {
                        status: 200,
                        content_type: Some(CONTENT_TYPE_JSON),
                        body,
                    },
                    Err(e) => text(500, format!("cannot write the response: {e}")),
                });
            }
        }
    }
    (w.deadline <= now).then(not_modified)
}

/// Whether a body that failed as a `DiscoveryRequest` has the fields of a
/// `DeltaDiscoveryRequest`.
fn looks_incremental(body: &str) -> bool {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(body)
    else {
        return false;
    };
    [
        "resourceNamesSubscribe",
        "resource_names_subscribe",
        "resourceNamesUnsubscribe",
        "resource_names_unsubscribe",
        "initialResourceVersions",
        "initial_resource_versions",
    ]
    .iter()
    .any(|k| fields.contains_key(*k))
}
