//! The serving side: each `POST` waits, on its own SotW server stream, until the store has
//! something the client does not hold or its deadline passes.

use alloc::boxed::Box;
use alloc::collections::{BTreeMap, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::{type_url_for_path, HttpResponse, CONTENT_TYPE_JSON};
use crate::codec::json::JsonCodec;
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::DiscoveryRequest;
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::google::rpc::Status;
use crate::server::{ResourceStore, ServerConfig, ServerEvent, StreamId, StreamSet};
use crate::time::Instant;

/// Identifies one waiting HTTP request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RestRequestId(pub u64);

/// How a [`RestServer`] treats requests.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RestServerConfig {
    /// Whether every request must carry a node (each REST request stands alone, so this is
    /// checked per request). Default `true`.
    pub require_node: bool,
    /// TTL heartbeats are due `ttl / heartbeat_divisor` after a resource was sent (see
    /// [`ServerConfig::heartbeat_divisor`]).
    pub heartbeat_divisor: u32,
    /// Accept request fields the schema does not know (a newer client) instead of
    /// answering `400`. Default `false`.
    pub ignore_unknown_fields: bool,
}

impl Default for RestServerConfig {
    fn default() -> RestServerConfig {
        RestServerConfig {
            require_node: true,
            heartbeat_divisor: 2,
            ignore_unknown_fields: false,
        }
    }
}

/// What the application should know about the requests.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    stream: StreamId,
    version: String,
    nonce: String,
    deadline: Instant,
    /// The first build has been done (its result is compared with what the client holds).
    checked: bool,
}

/// The server side of REST-JSON polling. See the [module docs](super).
#[derive(Clone, Debug)]
pub struct RestServer {
    config: RestServerConfig,
    /// Reads requests (with the unknown-field setting of the config) and writes responses.
    codec: JsonCodec,
    /// One stream per waiting request; the set's index wakes only the streams a store
    /// change concerns, and reads the change log once for all of them.
    streams: StreamSet,
    by_stream: BTreeMap<StreamId, RestRequestId>,
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
            codec: codec.ignore_unknown_fields(config.ignore_unknown_fields),
            config,
            streams: StreamSet::new(),
            by_stream: BTreeMap::new(),
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
                self.by_stream.insert(waiting.stream, id);
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
        let request: DiscoveryRequest = self.codec.parse_text(body).map_err(|e| {
            let incremental = core::str::from_utf8(body).is_ok_and(looks_incremental);
            if incremental {
                text(
                    400,
                    String::from("incremental xDS is not available over REST-JSON polling"),
                )
            } else {
                text(400, format!("body is not a JSON DiscoveryRequest: {e}"))
            }
        })?;
        let stream = self.streams.insert(ServerConfig {
            require_node: self.config.require_node,
            heartbeat_divisor: self.config.heartbeat_divisor,
            ..ServerConfig::new(Variant::Sotw, Transport::PerType(String::from(type_url)))
        });
        let _ = self
            .streams
            .handle_request(stream, now, Request::Sotw(request.clone()));
        while let Some(event) = self.streams.poll_event(stream) {
            if let ServerEvent::ProtocolError(e) = event {
                self.streams.remove(stream);
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
            version: request.version_info,
            nonce: request.response_nonce,
            deadline,
            checked: false,
        })
    }

    /// The client went away: forget request `id`. Returns whether it was waiting.
    pub fn cancel(&mut self, id: RestRequestId) -> bool {
        self.ready.retain(|(r, _)| *r != id);
        self.forget(id)
    }

    /// Drops a waiting request and its stream.
    fn forget(&mut self, id: RestRequestId) -> bool {
        let Some(w) = self.waiting.remove(&id) else {
            return false;
        };
        self.by_stream.remove(&w.stream);
        self.streams.remove(w.stream);
        true
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
        self.streams.sync(store);
        // Answers go out in request order, whatever order the stream set finds them in.
        let mut answers = Vec::new();
        while let Some(stream) = self.streams.poll_ready() {
            let Some(&id) = self.by_stream.get(&stream) else {
                continue;
            };
            let built = self.streams.poll_response(stream, now, store);
            let Some(w) = self.waiting.get_mut(&id) else {
                continue;
            };
            let first = !w.checked;
            w.checked = true;
            let Some(Response::Sotw(mut response)) = built else {
                continue;
            };
            // The first build sends everything the request covers: hold it back when the
            // client already holds that version or has just rejected it.
            let held = response.version_info == w.version;
            let rejected = !w.nonce.is_empty() && response.version_info == w.nonce;
            if first && (held || rejected) {
                continue;
            }
            response.nonce = response.version_info.clone();
            let answer = match self.codec.to_string(&response) {
                Ok(body) => HttpResponse {
                    status: 200,
                    content_type: Some(CONTENT_TYPE_JSON),
                    body,
                },
                Err(e) => text(500, format!("cannot write the response: {e}")),
            };
            self.forget(id);
            answers.push((id, answer));
        }
        answers.sort_by_key(|(id, _)| *id);
        self.ready.extend(answers);
        if let Some(answer) = self.ready.pop_front() {
            return Some(answer);
        }
        let expired = self
            .waiting
            .iter()
            .find(|(_, w)| w.checked && w.deadline <= now)
            .map(|(id, _)| *id)?;
        self.forget(expired);
        Some((expired, not_modified()))
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
            .map(
                |w| match self.streams.stream(w.stream).and_then(|s| s.poll_timeout()) {
                    Some(t) => t.min(w.deadline),
                    None => w.deadline,
                },
            )
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
            self.forget(id);
            self.ready.push_back((id, not_modified()));
        }
        self.streams.handle_timeout(now);
    }
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
