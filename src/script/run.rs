//! Replaying a scenario through the model: the client state machine, the server state
//! machine, or both, with the scenario's lines as inputs and expectations.

use alloc::collections::{BTreeMap, BTreeSet, VecDeque};
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::time::Duration;

use super::ast::*;
use super::render;
use crate::client::{Client, ClientConfig, ClientEvent, NackPolicy, RemovalReason, VerdictTicket};
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
    ResourceError, ResourceName,
};
use crate::pb::envoy::config::core::v3::Node;
use crate::pb::google::protobuf::{Any, Duration as PbDuration};
use crate::pb::google::rpc::Status;
use crate::server::{
    NotFoundReporting, ResourceEntry, ResourceStore, ServerConfig, ServerEvent, ServerStream,
};
use crate::time::Instant;
use crate::transcript::Entry;
use crate::types::RESOURCE_WRAPPER_TYPE_URL;
use prost::Message;

/// What happened on one line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineReport {
    /// The 1-based line number.
    pub line: usize,
    /// The line as written.
    pub source: String,
    /// What kind of step it was.
    pub kind: LineKind,
    /// The message that actually passed, in the notation (message lines only).
    pub actual: Option<String>,
    /// `Err` with what differed, when the line failed.
    pub result: Result<(), String>,
}

/// The kinds of line, for drawing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineKind {
    /// `C->S`.
    Request,
    /// `S->C`.
    Response,
    /// A client command or a client expectation.
    Client,
    /// A server command or a server expectation.
    Server,
    /// Time or the stream.
    Both,
}

/// The outcome of a scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The scenario's title.
    pub title: String,
    /// The lines that ran, in order; the last one failed if any did.
    pub lines: Vec<LineReport>,
    /// A failure that is not any line's: messages left over at the end, or a bad option.
    pub trailing: Option<String>,
    /// The conversation as the client saw it (requests when sent, responses when
    /// received): check the client's side on it.
    pub client_view: Vec<Entry>,
    /// The conversation as the server saw it (requests when received, responses when sent,
    /// store changes): check the server's side on it.
    pub server_view: Vec<Entry>,
}

impl Report {
    /// Whether every line passed and nothing was left over.
    pub fn passed(&self) -> bool {
        self.trailing.is_none() && self.lines.iter().all(|l| l.result.is_ok())
    }
}

/// Symbols bound to values, one namespace each for versions and nonces.
#[derive(Default)]
struct Symbols {
    forward: BTreeMap<String, String>,
    backward: BTreeMap<String, String>,
}

impl Symbols {
    /// The value of a symbol written by the scenario side: its binding, or itself.
    fn input(&mut self, symbol: &str) -> String {
        if let Some(value) = self.forward.get(symbol) {
            return value.clone();
        }
        if !symbol.is_empty() && !self.backward.contains_key(symbol) {
            self.forward.insert(symbol.into(), symbol.into());
            self.backward.insert(symbol.into(), symbol.into());
        }
        symbol.into()
    }

    /// Checks a value the model produced against a symbol, binding it the first time.
    fn check(&mut self, what: &str, symbol: &str, value: &str) -> Result<(), String> {
        if symbol.is_empty() || value.is_empty() {
            return if symbol == value {
                Ok(())
            } else {
                Err(format!("{what}: expected {symbol:?}, got {value:?}"))
            };
        }
        match (self.forward.get(symbol), self.backward.get(value)) {
            (Some(bound), _) if bound == value => Ok(()),
            (Some(bound), _) => Err(format!("{what}: {symbol} is {bound:?}, got {value:?}")),
            (None, Some(other)) => Err(format!(
                "{what}: {value:?} is already {other}, not {symbol}"
            )),
            (None, None) => {
                self.forward.insert(symbol.into(), value.into());
                self.backward.insert(value.into(), symbol.into());
                Ok(())
            }
        }
    }
}

/// Replaces the values after `V=`, `N=` and `@` by the symbols they are bound to, so
/// diagrams read like the seeds' (`V=X`, not a digest).
fn symbolize(text: &str, versions: Option<&Symbols>, nonces: &Symbols) -> String {
    let empty = Symbols::default();
    let versions = versions.unwrap_or(&empty);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['=', '@']) {
        let (head, tail) = rest.split_at(at + 1);
        out.push_str(head);
        let end = tail
            .find([',', ')', '}', ']', '[', ':'])
            .unwrap_or(tail.len());
        let (value, after) = tail.split_at(end);
        let table = if head.ends_with("N=") {
            &nonces.backward
        } else {
            &versions.backward
        };
        let symbolic = head.ends_with("V=") || head.ends_with("N=") || head.ends_with('@');
        match table.get(value) {
            Some(symbol) if symbolic => out.push_str(symbol),
            _ => out.push_str(value),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

struct Runner {
    variant: Variant,
    transport: Transport,
    now: Instant,
    client: Option<Client>,
    server: Option<ServerStream>,
    server_modeled: bool,
    /// Drain the server with `poll_response_encoded` and decode what it sends (option
    /// `server-encoded=true`): every server scenario can run through the encoded path.
    server_encoded: bool,
    server_config: ServerConfig,
    store: ResourceStore,
    to_server: VecDeque<Request>,
    to_client: VecDeque<Response>,
    client_events: Vec<ClientEvent>,
    server_events: Vec<ServerEvent>,
    tickets: BTreeMap<String, (VerdictTicket, Vec<String>)>,
    /// Version symbols, one namespace per type URL (versions are per type).
    versions: BTreeMap<String, Symbols>,
    nonces: Symbols,
    /// Whether the scenario side has sent the stream's first request (for the node).
    first_request_sent: bool,
    /// Which stream is up (counts connects).
    stream: u64,
    client_view: Vec<Entry>,
    server_view: Vec<Entry>,
}

fn record(view: &mut Vec<Entry>, entry: impl FnOnce(usize) -> Entry) {
    let line = view.len() + 1;
    view.push(entry(line));
}

fn sorted(names: impl IntoIterator<Item = String>) -> Vec<String> {
    let set: BTreeSet<String> = names.into_iter().collect();
    set.into_iter().collect()
}

fn status(error: &ErrorPattern) -> Option<Status> {
    match error {
        ErrorPattern::Absent => None,
        ErrorPattern::Any => Some(Status {
            code: 13,
            message: "rejected".into(),
            details: Vec::new(),
        }),
        ErrorPattern::Contains(text) => Some(Status {
            code: 13,
            message: text.clone(),
            details: Vec::new(),
        }),
    }
}

fn check_error(pattern: &ErrorPattern, actual: &Option<Status>) -> Result<(), String> {
    match (pattern, actual) {
        (ErrorPattern::Absent, None) | (ErrorPattern::Any, Some(_)) => Ok(()),
        (ErrorPattern::Contains(text), Some(s)) if s.message.contains(text.as_str()) => Ok(()),
        (ErrorPattern::Absent, Some(s)) => Err(format!("unexpected error_detail {:?}", s.message)),
        (_, None) => Err("expected error_detail (a NACK), got none".into()),
        (ErrorPattern::Contains(text), Some(s)) => Err(format!(
            "error_detail {:?} does not contain {text:?}",
            s.message
        )),
    }
}

fn check_set(what: &str, expected: &Option<Vec<String>>, actual: &[String]) -> Result<(), String> {
    let Some(expected) = expected else {
        return Ok(());
    };
    let (want, have) = (
        sorted(expected.iter().cloned()),
        sorted(actual.iter().cloned()),
    );
    if want == have {
        Ok(())
    } else {
        Err(format!(
            "{what}: expected {{{}}}, got {{{}}}",
            want.join(","),
            have.join(",")
        ))
    }
}

fn ttl_of(duration: Duration) -> PbDuration {
    PbDuration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    }
}

/// A resource the model sent, reduced to what items describe.
struct Seen {
    version: Option<String>,
    body: Option<bytes::Bytes>,
    ttl: Option<PbDuration>,
    aliases: Vec<String>,
}

fn seen_sotw(any: &Any) -> (String, Seen) {
    if any.type_url == RESOURCE_WRAPPER_TYPE_URL {
        if let Ok(wrapper) = Resource::decode(any.value.clone()) {
            return seen_delta(&wrapper);
        }
    }
    let name = crate::resource::name_of(&any.value)
        .unwrap_or("")
        .to_string();
    (
        name,
        Seen {
            version: None,
            body: Some(any.value.clone()),
            ttl: None,
            aliases: Vec::new(),
        },
    )
}

fn seen_delta(r: &Resource) -> (String, Seen) {
    (
        r.name.clone(),
        Seen {
            version: (!r.version.is_empty()).then(|| r.version.clone()),
            body: r.resource.as_ref().map(|b| b.value.clone()),
            ttl: r.ttl,
            aliases: r.aliases.clone(),
        },
    )
}

impl Runner {
    fn new(scenario: &Scenario) -> Result<Runner, String> {
        let transport = match &scenario.transport {
            TransportSpec::Ads => Transport::Aggregated,
            TransportSpec::PerType(url) => Transport::PerType(url.clone()),
        };
        let node = Node {
            id: "client".into(),
            ..Node::default()
        };
        let mut client_config = ClientConfig::new(scenario.variant, transport.clone(), node);
        let mut server_config = ServerConfig::new(scenario.variant, transport.clone());
        let mut server_encoded = false;
        for (key, value, line) in &scenario.options {
            let bad = || format!("line {line}: bad value {value:?} for option {key}");
            match key.as_str() {
                "dne-timeout" => {
                    client_config.does_not_exist_timeout = match value.as_str() {
                        "off" => None,
                        v => Some(super::parse_duration(v).ok_or_else(bad)?),
                    }
                }
                "nack-policy" => {
                    client_config.nack_policy = match value.as_str() {
                        "reject-all" => NackPolicy::RejectAll,
                        "keep-valid" => NackPolicy::KeepValid,
                        _ => return Err(bad()),
                    }
                }
                "node-on-every-request" => client_config.node_on_every_request = value == "true",
                "sticky-legacy-wildcard" => server_config.sticky_legacy_wildcard = value == "true",
                "sotw-not-found-errors" => server_config.sotw_not_found_errors = value == "true",
                "server-encoded" => server_encoded = value == "true",
                "not-found" => {
                    server_config.not_found = match value.as_str() {
                        "removed" => NotFoundReporting::RemovedResources,
                        "bodyless" => NotFoundReporting::BodylessResource,
                        _ => return Err(bad()),
                    }
                }
                other => return Err(format!("line {line}: unknown option {other:?}")),
            }
        }
        let client_modeled = matches!(scenario.model, Model::Client | Model::Both);
        let server_modeled = matches!(scenario.model, Model::Server | Model::Both);
        let mut runner = Runner {
            variant: scenario.variant,
            transport,
            now: Instant::ZERO,
            client: client_modeled.then(|| Client::new(client_config)),
            server: server_modeled.then(|| ServerStream::new(server_config.clone())),
            server_modeled,
            server_encoded,
            server_config,
            store: ResourceStore::new(),
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            client_events: Vec::new(),
            server_events: Vec::new(),
            tickets: BTreeMap::new(),
            versions: BTreeMap::new(),
            nonces: Symbols::default(),
            first_request_sent: false,
            stream: 1,
            client_view: Vec::new(),
            server_view: Vec::new(),
        };
        if let Some(client) = runner.client.as_mut() {
            client.connected(Instant::ZERO);
        }
        runner.pump();
        Ok(runner)
    }

    /// The version symbols of a type.
    fn vs(&mut self, type_url: &str) -> &mut Symbols {
        self.versions.entry(type_url.into()).or_default()
    }

    /// Drains every output of the modeled sides into the wire queues and event logs.
    fn pump(&mut self) {
        let now = self.now;
        if let Some(client) = self.client.as_mut() {
            while let Some(request) = client.poll_request(now) {
                let stream = self.stream;
                record(&mut self.client_view, |line| Entry::Request {
                    line,
                    stream,
                    request: request.clone(),
                });
                self.to_server.push_back(request);
            }
            while let Some(event) = client.poll_event() {
                if let ClientEvent::ValidationNeeded {
                    ticket,
                    type_url,
                    resources,
                    ..
                } = &event
                {
                    let names = resources
                        .iter()
                        .map(|r| r.name.as_str().to_string())
                        .collect();
                    self.tickets
                        .insert(type_url.as_str().into(), (*ticket, names));
                }
                self.client_events.push(event);
            }
        }
        if let Some(server) = self.server.as_mut() {
            while let Some(event) = server.poll_event() {
                self.server_events.push(event);
            }
            let encoded = self.server_encoded;
            // An encoded response that does not decode ends the drain: the scenario then
            // misses the response it expects and fails there.
            while let Some(response) = if encoded {
                server
                    .poll_response_encoded(now, &self.store)
                    .and_then(|e| e.decode().ok())
            } else {
                server.poll_response(now, &self.store)
            } {
                let stream = self.stream;
                record(&mut self.server_view, |line| Entry::Response {
                    line,
                    stream,
                    response: response.clone(),
                });
                self.to_client.push_back(response);
            }
            while let Some(event) = server.poll_event() {
                self.server_events.push(event);
            }
        }
    }

    fn deliver_request(&mut self, request: Request) {
        let stream = self.stream;
        record(&mut self.server_view, |line| Entry::Request {
            line,
            stream,
            request: request.clone(),
        });
        if self.client.is_none() {
            record(&mut self.client_view, |line| Entry::Request {
                line,
                stream,
                request: request.clone(),
            });
        }
        if let Some(server) = self.server.as_mut() {
            server.handle_request(self.now, request);
        }
        self.pump();
    }

    fn deliver_response(&mut self, response: Response) {
        let stream = self.stream;
        record(&mut self.client_view, |line| Entry::Response {
            line,
            stream,
            response: response.clone(),
        });
        if !self.server_modeled {
            record(&mut self.server_view, |line| Entry::Response {
                line,
                stream,
                response: response.clone(),
            });
        }
        if let Some(client) = self.client.as_mut() {
            client.handle_response(self.now, response);
        }
        self.pump();
    }

    fn message(
        &mut self,
        direction: Direction,
        pattern: &MessagePattern,
        tags: &[String],
    ) -> (Option<String>, Result<(), String>) {
        match direction {
            Direction::ClientToServer => {
                let events_before = self.server_events.len();
                let request = if self.client.is_some() {
                    let Some(request) = self.to_server.pop_front() else {
                        return (
                            None,
                            Err("expected the client to send this, it sent nothing".into()),
                        );
                    };
                    let rendered = self.show(render::request(&request), request.type_url());
                    if let Err(e) = self.match_request(pattern, &request) {
                        return (Some(rendered), Err(e));
                    }
                    request
                } else {
                    self.build_request(pattern)
                };
                let rendered = self.show(render::request(&request), request.type_url());
                self.deliver_request(request);
                let result = self.check_tags(pattern.type_url(), tags, events_before);
                (Some(rendered), result)
            }
            Direction::ServerToClient => {
                let response = if self.server_modeled {
                    let Some(response) = self.to_client.pop_front() else {
                        return (
                            None,
                            Err("expected the server to send this, it sent nothing".into()),
                        );
                    };
                    let rendered = self.show(render::response(&response), response.type_url());
                    if let Err(e) = self.match_response(pattern, &response) {
                        return (Some(rendered), Err(e));
                    }
                    response
                } else {
                    self.build_response(pattern)
                };
                let rendered = self.show(render::response(&response), response.type_url());
                self.deliver_response(response);
                (Some(rendered), Ok(()))
            }
        }
    }

    /// A rendered message with the symbols bound so far in place of values.
    fn show(&self, rendered: String, type_url: &str) -> String {
        symbolize(&rendered, self.versions.get(type_url), &self.nonces)
    }

    fn check_tags(&mut self, type_url: &str, tags: &[String], from: usize) -> Result<(), String> {
        if !self.server_modeled {
            return Ok(());
        }
        for tag in tags {
            let found = self
                .server_events
                .iter()
                .skip(from)
                .any(|e| match (tag.as_str(), e) {
                    ("stale", ServerEvent::StaleRequest { type_url: t, .. })
                    | ("ack", ServerEvent::Acked { type_url: t, .. })
                    | ("nack", ServerEvent::Nacked { type_url: t, .. }) => t == type_url,
                    _ => false,
                });
            if !found {
                return Err(format!(
                    "the server did not classify this request as [{tag}]"
                ));
            }
        }
        Ok(())
    }

    fn node_for(&mut self, node: &Option<String>) -> Option<Node> {
        let first = !self.first_request_sent;
        self.first_request_sent = true;
        match node {
            // `node=-`: a request without a node, even the first.
            Some(id) if id == "-" => None,
            Some(id) => Some(Node {
                id: id.clone(),
                ..Node::default()
            }),
            None if first => Some(Node {
                id: "client".into(),
                ..Node::default()
            }),
            None => None,
        }
    }

    fn build_request(&mut self, pattern: &MessagePattern) -> Request {
        match pattern {
            MessagePattern::SotwRequest {
                version,
                names,
                nonce,
                type_url,
                error,
                node,
            } => Request::Sotw(DiscoveryRequest {
                version_info: self.vs(type_url).input(version.as_deref().unwrap_or("")),
                node: self.node_for(node),
                resource_names: names.clone().unwrap_or_default(),
                type_url: type_url.clone(),
                response_nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                error_detail: status(error),
                ..Default::default()
            }),
            MessagePattern::DeltaRequest {
                type_url,
                subscribe,
                unsubscribe,
                initial,
                nonce,
                error,
                node,
            } => {
                let initial_resource_versions = initial
                    .iter()
                    .flatten()
                    .map(|i| {
                        (
                            i.name.clone(),
                            self.vs(type_url).input(i.version.as_deref().unwrap_or("")),
                        )
                    })
                    .collect();
                Request::Delta(DeltaDiscoveryRequest {
                    node: self.node_for(node),
                    type_url: type_url.clone(),
                    resource_names_subscribe: subscribe.clone().unwrap_or_default(),
                    resource_names_unsubscribe: unsubscribe.clone().unwrap_or_default(),
                    initial_resource_versions,
                    response_nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                    error_detail: status(error),
                    ..Default::default()
                })
            }
            // Responses never reach here: the parser gives C->S lines request patterns.
            MessagePattern::SotwResponse { type_url, .. }
            | MessagePattern::DeltaResponse { type_url, .. } => Request::Sotw(DiscoveryRequest {
                type_url: type_url.clone(),
                ..Default::default()
            }),
        }
    }

    fn body_of(item: &Item, fallback_tag: &str) -> bytes::Bytes {
        let tag = item
            .tag
            .as_deref()
            .or(item.version.as_deref())
            .unwrap_or(fallback_tag);
        render::body(&item.name, tag)
    }

    fn build_resource(&mut self, item: &Item, type_url: &str, fallback_tag: &str) -> Resource {
        Resource {
            name: item.name.clone(),
            aliases: item.aliases.clone(),
            version: self
                .vs(type_url)
                .input(item.version.as_deref().unwrap_or("")),
            resource: (!item.no_body).then(|| Any {
                type_url: item
                    .any_type
                    .clone()
                    .unwrap_or_else(|| type_url.into())
                    .into(),
                value: Self::body_of(item, fallback_tag),
            }),
            ttl: item.ttl.map(ttl_of),
            ..Default::default()
        }
    }

    fn build_response(&mut self, pattern: &MessagePattern) -> Response {
        match pattern {
            MessagePattern::SotwResponse {
                version,
                resources,
                nonce,
                type_url,
                errors,
            } => {
                let version_info = self.vs(type_url).input(version.as_deref().unwrap_or(""));
                let resources = resources
                    .iter()
                    .flatten()
                    .map(|item| {
                        if item.wrapped || item.no_body {
                            let wrapper = self.build_resource(item, type_url, &version_info);
                            Any {
                                type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
                                value: wrapper.encode_to_vec().into(),
                            }
                        } else {
                            Any {
                                type_url: item
                                    .any_type
                                    .clone()
                                    .unwrap_or_else(|| type_url.clone())
                                    .into(),
                                value: Self::body_of(item, &version_info),
                            }
                        }
                    })
                    .collect();
                Response::Sotw(DiscoveryResponse {
                    version_info: version_info.clone(),
                    resources,
                    type_url: type_url.clone(),
                    nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                    resource_errors: resource_errors_of(errors),
                    ..Default::default()
                })
            }
            MessagePattern::DeltaResponse {
                version,
                resources,
                removed,
                nonce,
                type_url,
                errors,
            } => {
                let system_version_info = self.vs(type_url).input(version.as_deref().unwrap_or(""));
                let resources = resources
                    .iter()
                    .flatten()
                    .map(|item| self.build_resource(item, type_url, ""))
                    .collect();
                Response::Delta(DeltaDiscoveryResponse {
                    system_version_info,
                    resources,
                    type_url: type_url.clone(),
                    removed_resources: removed.clone().unwrap_or_default(),
                    nonce: self.nonces.input(nonce.as_deref().unwrap_or("")),
                    resource_errors: resource_errors_of(errors),
                    ..Default::default()
                })
            }
            MessagePattern::SotwRequest { type_url, .. }
            | MessagePattern::DeltaRequest { type_url, .. } => Response::Sotw(DiscoveryResponse {
                type_url: type_url.clone(),
                ..Default::default()
            }),
        }
    }

    fn match_type(expected: &str, actual: &str) -> Result<(), String> {
        if expected == actual {
            Ok(())
        } else {
            Err(format!(
                "type: expected {}, got {}",
                render::type_name(expected),
                render::type_name(actual)
            ))
        }
    }

    fn match_node(expected: &Option<String>, actual: &Option<Node>) -> Result<(), String> {
        match (expected, actual) {
            (None, _) => Ok(()),
            (Some(id), Some(node)) if &node.id == id => Ok(()),
            (Some(id), other) => Err(format!(
                "node: expected {id:?}, got {:?}",
                other.as_ref().map(|n| &n.id)
            )),
        }
    }

    fn match_request(&mut self, pattern: &MessagePattern, request: &Request) -> Result<(), String> {
        match (pattern, request) {
            (
                MessagePattern::SotwRequest {
                    version,
                    names,
                    nonce,
                    type_url,
                    error,
                    node,
                },
                Request::Sotw(r),
            ) => {
                Self::match_type(type_url, &r.type_url)?;
                if let Some(v) = version {
                    self.vs(type_url).check("V", v, &r.version_info)?;
                }
                check_set("R", names, &r.resource_names)?;
                if let Some(n) = nonce {
                    self.nonces.check("N", n, &r.response_nonce)?;
                }
                check_error(error, &r.error_detail)?;
                Self::match_node(node, &r.node)
            }
            (
                MessagePattern::DeltaRequest {
                    type_url,
                    subscribe,
                    unsubscribe,
                    initial,
                    nonce,
                    error,
                    node,
                },
                Request::Delta(r),
            ) => {
                Self::match_type(type_url, &r.type_url)?;
                check_set("S", subscribe, &r.resource_names_subscribe)?;
                check_set("U", unsubscribe, &r.resource_names_unsubscribe)?;
                if let Some(initial) = initial {
                    let names: Vec<String> = r.initial_resource_versions.keys().cloned().collect();
                    check_set(
                        "I",
                        &Some(initial.iter().map(|i| i.name.clone()).collect()),
                        &names,
                    )?;
                    for item in initial {
                        if let (Some(v), Some(actual)) =
                            (&item.version, r.initial_resource_versions.get(&item.name))
                        {
                            self.vs(type_url)
                                .check(&format!("I {}", item.name), v, actual)?;
                        }
                    }
                }
                if let Some(n) = nonce {
                    self.nonces.check("N", n, &r.response_nonce)?;
                }
                check_error(error, &r.error_detail)?;
                Self::match_node(node, &r.node)
            }
            _ => Err("the request is of the other variant".into()),
        }
    }

    fn match_items(
        &mut self,
        type_url: &str,
        expected: &[Item],
        seen: Vec<(String, Seen)>,
        type_version: &str,
    ) -> Result<(), String> {
        let names: Vec<String> = seen.iter().map(|(n, _)| n.clone()).collect();
        check_set(
            "R",
            &Some(expected.iter().map(|i| i.name.clone()).collect()),
            &names,
        )?;
        for item in expected {
            let Some((_, seen)) = seen.iter().find(|(n, _)| *n == item.name) else {
                continue;
            };
            if let Some(v) = &item.version {
                let actual = seen.version.as_deref().unwrap_or(type_version);
                self.vs(type_url)
                    .check(&format!("version of {}", item.name), v, actual)?;
            }
            if let Some(tag) = &item.tag {
                if seen.body.as_ref() != Some(&render::body(&item.name, tag)) {
                    return Err(format!("body of {}: expected tag {tag}", item.name));
                }
            }
            if item.no_body && seen.body.is_some() {
                return Err(format!("{}: expected no body", item.name));
            }
            if let Some(ttl) = item.ttl {
                if seen.ttl != Some(ttl_of(ttl)) {
                    return Err(format!("{}: expected TTL {ttl:?}", item.name));
                }
            }
            if !item.aliases.is_empty()
                && sorted(item.aliases.iter().cloned()) != sorted(seen.aliases.iter().cloned())
            {
                return Err(format!(
                    "{}: expected aliases {:?}",
                    item.name, item.aliases
                ));
            }
        }
        Ok(())
    }

    fn match_response(
        &mut self,
        pattern: &MessagePattern,
        response: &Response,
    ) -> Result<(), String> {
        match (pattern, response) {
            (
                MessagePattern::SotwResponse {
                    version,
                    resources,
                    nonce,
                    type_url,
                    errors,
                },
                Response::Sotw(r),
            ) => {
                Self::match_type(type_url, &r.type_url)?;
                check_errors(errors, &r.resource_errors)?;
                if let Some(v) = version {
                    self.vs(type_url).check("V", v, &r.version_info)?;
                }
                if let Some(n) = nonce {
                    self.nonces.check("N", n, &r.nonce)?;
                }
                if let Some(items) = resources {
                    let seen = r.resources.iter().map(seen_sotw).collect();
                    self.match_items(type_url, items, seen, &r.version_info)?;
                }
                Ok(())
            }
            (
                MessagePattern::DeltaResponse {
                    version,
                    resources,
                    removed,
                    nonce,
                    type_url,
                    errors,
                },
                Response::Delta(r),
            ) => {
                Self::match_type(type_url, &r.type_url)?;
                check_errors(errors, &r.resource_errors)?;
                if let Some(v) = version {
                    self.vs(type_url).check("V", v, &r.system_version_info)?;
                }
                if let Some(n) = nonce {
                    self.nonces.check("N", n, &r.nonce)?;
                }
                check_set("X", removed, &r.removed_resources)?;
                if let Some(items) = resources {
                    let seen = r.resources.iter().map(seen_delta).collect();
                    self.match_items(type_url, items, seen, "")?;
                }
                Ok(())
            }
            _ => Err("the response is of the other variant".into()),
        }
    }

    fn client_command(&mut self, command: &ClientCommand) -> Result<(), String> {
        let client = self
            .client
            .as_mut()
            .ok_or("the model does not play the client")?;
        let result = match command {
            ClientCommand::Subscribe(t, names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.subscribe(t, &names).map_err(|e| e.to_string())
            }
            ClientCommand::Unsubscribe(t, names) => {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                client.unsubscribe(t, &names).map_err(|e| e.to_string())
            }
            ClientCommand::Defer(t) => {
                client.set_deferred_validation(t, true);
                Ok(())
            }
            ClientCommand::Accept(t) => {
                let (ticket, _) = self
                    .tickets
                    .remove(t.as_str())
                    .ok_or("no response of that type awaits a verdict")?;
                client.verdict(ticket, &[]).map_err(|e| e.to_string())
            }
            ClientCommand::Reject(t, names, reason) => {
                let (ticket, pending) = self
                    .tickets
                    .remove(t.as_str())
                    .ok_or("no response of that type awaits a verdict")?;
                let names = if names.is_empty() { &pending } else { names };
                let rejections: Vec<(&str, &str)> = names
                    .iter()
                    .map(|n| (n.as_str(), reason.as_str()))
                    .collect();
                client
                    .verdict(ticket, &rejections)
                    .map_err(|e| e.to_string())
            }
        };
        result
    }

    fn server_command(&mut self, command: &ServerCommand) -> Result<(), String> {
        if !self.server_modeled {
            return Err("the model does not play the server".into());
        }
        match command {
            ServerCommand::Set(t, items) => {
                for item in items {
                    let mut entry = ResourceEntry::new(item.name.clone(), Self::body_of(item, ""));
                    if let Some(v) = &item.version {
                        entry = entry.with_version(self.vs(t).input(v));
                    }
                    if let Some(ttl) = item.ttl {
                        entry = entry.with_ttl(ttl);
                    }
                    if !item.aliases.is_empty() {
                        entry = entry.with_aliases(item.aliases.clone());
                    }
                    self.store
                        .set_entry(t, entry)
                        .map_err(|e| format!("{e:?}"))?;
                    let version = self.store.get(t, &item.name).map(|r| r.version().into());
                    record(&mut self.server_view, |line| Entry::Store {
                        line,
                        type_url: t.clone(),
                        name: item.name.clone(),
                        version,
                    });
                }
            }
            ServerCommand::Remove(t, names) => {
                for name in names {
                    self.store.remove(t, name);
                    record(&mut self.server_view, |line| Entry::Store {
                        line,
                        type_url: t.clone(),
                        name: name.clone(),
                        version: None,
                    });
                }
            }
        }
        Ok(())
    }

    /// Advances time by `duration`, firing every deadline at its own time.
    fn wait(&mut self, duration: Duration) -> Result<(), String> {
        let target = self.now + duration;
        for _ in 0..100_000 {
            let next = [
                self.client.as_ref().and_then(Client::poll_timeout),
                self.server.as_ref().and_then(ServerStream::poll_timeout),
            ]
            .into_iter()
            .flatten()
            .filter(|deadline| *deadline <= target)
            .min();
            let Some(deadline) = next else {
                self.now = target;
                return Ok(());
            };
            self.now = self.now.max(deadline);
            let now = self.now;
            if let Some(client) = self.client.as_mut() {
                client.handle_timeout(now);
            }
            if let Some(server) = self.server.as_mut() {
                server.handle_timeout(now);
            }
            self.pump();
        }
        Err("timers keep firing without time passing (a timer livelock)".into())
    }

    fn disconnect(&mut self) {
        if let Some(client) = self.client.as_mut() {
            client.disconnected(self.now);
        }
        self.server = None;
        self.to_server.clear();
        self.to_client.clear();
        self.pump();
    }

    fn connect(&mut self) {
        if self.server_modeled {
            self.server = Some(ServerStream::new(self.server_config.clone()));
        }
        self.first_request_sent = false;
        self.stream += 1;
        // Nonces belong to one stream: the new stream's may repeat the old one's values.
        self.nonces = Symbols::default();
        if let Some(client) = self.client.as_mut() {
            client.connected(self.now);
        }
        self.pump();
    }

    fn expect(&mut self, side: Side, expectation: &Expectation) -> Result<(), String> {
        self.pump();
        match (side, expectation) {
            (Side::Client, Expectation::Quiet) => match self.to_server.front() {
                None => Ok(()),
                Some(r) => Err(format!(
                    "the client still has {} to send",
                    render::request(r)
                )),
            },
            (Side::Server, Expectation::Quiet) => match self.to_client.front() {
                None => Ok(()),
                Some(r) => Err(format!(
                    "the server still has {} to send",
                    render::response(r)
                )),
            },
            (
                Side::Client,
                Expectation::Event {
                    kind,
                    type_url,
                    name,
                    details,
                },
            ) => {
                let at = (0..self.client_events.len()).find(|&i| {
                    let mut versions = core::mem::take(self.vs(type_url));
                    let mut nonces = core::mem::take(&mut self.nonces);
                    let ok = self.client_events.get(i).is_some_and(|e| {
                        client_event_matches(
                            e,
                            kind,
                            type_url,
                            name,
                            details,
                            &mut versions,
                            &mut nonces,
                            true,
                        )
                    });
                    *self.vs(type_url) = versions;
                    self.nonces = nonces;
                    ok
                });
                match at {
                    Some(i) => {
                        let event = self.client_events.remove(i);
                        let mut versions = core::mem::take(self.vs(type_url));
                        client_event_matches(
                            &event,
                            kind,
                            type_url,
                            name,
                            details,
                            &mut versions,
                            &mut self.nonces,
                            false,
                        );
                        *self.vs(type_url) = versions;
                        Ok(())
                    }
                    None => Err(format!(
                        "no such client event; pending: [{}]",
                        self.client_events
                            .iter()
                            .map(describe_client_event)
                            .collect::<Vec<_>>()
                            .join("; ")
                    )),
                }
            }
            (
                Side::Client,
                Expectation::NoEvent {
                    kind,
                    type_url,
                    name,
                },
            ) => {
                let mut versions = Symbols::default();
                let mut nonces = Symbols::default();
                match self.client_events.iter().find(|e| {
                    client_event_matches(
                        e,
                        kind,
                        type_url,
                        name,
                        &[],
                        &mut versions,
                        &mut nonces,
                        true,
                    )
                }) {
                    None => Ok(()),
                    Some(e) => Err(format!(
                        "unexpected client event {}",
                        describe_client_event(e)
                    )),
                }
            }
            (
                Side::Server,
                Expectation::Event {
                    kind,
                    type_url,
                    name,
                    details,
                },
            ) => {
                match self
                    .server_events
                    .iter()
                    .position(|e| server_event_matches(e, kind, type_url, name, details))
                {
                    Some(i) => {
                        self.server_events.remove(i);
                        Ok(())
                    }
                    None => Err(format!(
                        "no such server event; pending: {:?}",
                        self.server_events
                    )),
                }
            }
            (
                Side::Server,
                Expectation::NoEvent {
                    kind,
                    type_url,
                    name,
                },
            ) => {
                match self
                    .server_events
                    .iter()
                    .find(|e| server_event_matches(e, kind, type_url, name, &[]))
                {
                    None => Ok(()),
                    Some(e) => Err(format!("unexpected server event {e:?}")),
                }
            }
            (Side::Client, Expectation::Cache(type_url, items)) => {
                let client = self
                    .client
                    .as_ref()
                    .ok_or("the model does not play the client")?;
                let seen: Vec<(String, Seen)> = client
                    .resource_names(type_url)
                    .into_iter()
                    .filter_map(|name| {
                        let cached = client.resource(type_url, name.as_str())?;
                        Some((
                            name.as_str().to_string(),
                            Seen {
                                version: Some(cached.version.as_str().to_string()),
                                body: Some(cached.body.clone()),
                                ttl: None,
                                aliases: cached
                                    .aliases
                                    .iter()
                                    .map(|a| a.as_str().to_string())
                                    .collect(),
                            },
                        ))
                    })
                    .collect();
                self.match_items(type_url, items, seen, "")
            }
            (Side::Server, Expectation::Cache(type_url, items)) => {
                let seen: Vec<(String, Seen)> = self
                    .store
                    .iter(type_url)
                    .map(|r| {
                        (
                            r.name().to_string(),
                            Seen {
                                version: Some(r.version().to_string()),
                                body: Some(r.body().clone()),
                                ttl: None,
                                aliases: r.aliases().to_vec(),
                            },
                        )
                    })
                    .collect();
                self.match_items(type_url, items, seen, "")
            }
            (Side::Client, Expectation::Status(type_url, name, expected)) => {
                let client = self
                    .client
                    .as_ref()
                    .ok_or("the model does not play the client")?;
                let actual = match client.status(type_url, name).map(|s| s.state) {
                    None => "none",
                    Some(crate::client::ResourceState::Requested) => "requested",
                    Some(crate::client::ResourceState::DoesNotExist) => "does-not-exist",
                    Some(crate::client::ResourceState::Acked) => "acked",
                    Some(crate::client::ResourceState::Nacked) => "nacked",
                    Some(crate::client::ResourceState::Expired) => "expired",
                    Some(crate::client::ResourceState::ReceivedError) => "received-error",
                };
                if actual == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "status of {name}: expected {expected}, got {actual}"
                    ))
                }
            }
            (Side::Server, Expectation::Status(..)) => Err("status is a client expectation".into()),
        }
    }

    fn leftovers(&mut self) -> Option<String> {
        self.pump();
        let mut left: Vec<String> = Vec::new();
        if self.client.is_some() {
            left.extend(
                self.to_server
                    .iter()
                    .map(|r| format!("C->S {}", render::request(r))),
            );
        }
        if self.server_modeled {
            left.extend(
                self.to_client
                    .iter()
                    .map(|r| format!("S->C {}", render::response(r))),
            );
        }
        (!left.is_empty()).then(|| {
            format!(
                "messages the scenario does not account for: {}",
                left.join("; ")
            )
        })
    }
}

fn reason_name(reason: RemovalReason) -> &'static str {
    match reason {
        RemovalReason::ServerRemoved => "server-removed",
        RemovalReason::AbsentFromResponse => "absent",
        RemovalReason::Unsubscribed => "unsubscribed",
        RemovalReason::Expired => "expired",
    }
}

/// `F={name@CODE,..}` as `resource_errors` (the message is the code's name).
fn resource_errors_of(items: &Option<Vec<Item>>) -> Vec<ResourceError> {
    items
        .iter()
        .flatten()
        .map(|item| {
            let code = item
                .version
                .as_deref()
                .and_then(render::code_of)
                .unwrap_or(2);
            ResourceError {
                resource_name: Some(ResourceName {
                    name: item.name.clone(),
                    ..Default::default()
                }),
                error_detail: Some(Status {
                    code,
                    message: render::code_name(code),
                    details: Vec::new(),
                }),
            }
        })
        .collect()
}

/// An `F=` set against the response's `resource_errors` (no `F=`: not checked).
fn check_errors(expected: &Option<Vec<Item>>, actual: &[ResourceError]) -> Result<(), String> {
    if expected.is_none() {
        return Ok(());
    }
    let mut want: Vec<String> = resource_errors_of(expected)
        .iter()
        .map(render::resource_error)
        .collect();
    let mut got: Vec<String> = actual.iter().map(render::resource_error).collect();
    want.sort();
    got.sort();
    if want == got {
        Ok(())
    } else {
        Err(format!("F: expected {want:?}, got {got:?}"))
    }
}

fn describe_client_event(event: &ClientEvent) -> String {
    match event {
        ClientEvent::Upserted {
            type_url,
            name,
            version,
            ..
        } => format!(
            "upserted {} {} version={}",
            render::type_name(type_url.as_str()),
            name.as_str(),
            version.as_str()
        ),
        ClientEvent::Removed {
            type_url,
            name,
            reason,
        } => format!(
            "removed {} {} reason={}",
            render::type_name(type_url.as_str()),
            name.as_str(),
            reason_name(*reason)
        ),
        ClientEvent::DoesNotExist { type_url, name } => format!(
            "does-not-exist {} {}",
            render::type_name(type_url.as_str()),
            name.as_str()
        ),
        ClientEvent::ResourceError {
            type_url,
            name,
            code,
            ..
        } => format!(
            "resource-error {} {} code={code}",
            render::type_name(type_url.as_str()),
            name.as_str()
        ),
        ClientEvent::Acked {
            type_url, version, ..
        } => format!(
            "acked {} version={}",
            render::type_name(type_url.as_str()),
            version.as_str()
        ),
        ClientEvent::Nacked {
            type_url, version, ..
        } => format!(
            "nacked {} version={}",
            render::type_name(type_url.as_str()),
            version.as_str()
        ),
        ClientEvent::Ready { type_url } => {
            format!("ready {}", render::type_name(type_url.as_str()))
        }
        ClientEvent::ValidationNeeded { type_url, .. } => {
            format!("validation-needed {}", render::type_name(type_url.as_str()))
        }
        ClientEvent::Ignored { type_url, .. } => {
            format!("ignored {}", render::type_name(type_url.as_str()))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn client_event_matches(
    event: &ClientEvent,
    kind: &str,
    type_url: &str,
    name: &Option<String>,
    details: &[(String, String)],
    versions: &mut Symbols,
    nonces: &mut Symbols,
    dry_run: bool,
) -> bool {
    let (k, t, n, version, nonce, reason) = match event {
        ClientEvent::Upserted {
            type_url,
            name,
            version,
            ..
        } => ("upserted", type_url, Some(name), Some(version), None, None),
        ClientEvent::Removed {
            type_url,
            name,
            reason,
        } => (
            "removed",
            type_url,
            Some(name),
            None,
            None,
            Some(reason_name(*reason)),
        ),
        ClientEvent::DoesNotExist { type_url, name } => {
            ("does-not-exist", type_url, Some(name), None, None, None)
        }
        ClientEvent::ResourceError { type_url, name, .. } => {
            ("resource-error", type_url, Some(name), None, None, None)
        }
        ClientEvent::Acked {
            type_url,
            version,
            nonce,
        } => ("acked", type_url, None, Some(version), Some(nonce), None),
        ClientEvent::Nacked {
            type_url,
            version,
            nonce,
            ..
        } => ("nacked", type_url, None, Some(version), Some(nonce), None),
        ClientEvent::Ready { type_url } => ("ready", type_url, None, None, None, None),
        ClientEvent::ValidationNeeded {
            type_url, version, ..
        } => (
            "validation-needed",
            type_url,
            None,
            Some(version),
            None,
            None,
        ),
        ClientEvent::Ignored {
            type_url, nonce, ..
        } => ("ignored", type_url, None, None, Some(nonce), None),
    };
    if k != kind || t.as_str() != type_url {
        return false;
    }
    if let Some(expected) = name {
        if n.map(|n| n.as_str()) != Some(expected.as_str()) {
            return false;
        }
    }
    for (key, value) in details {
        let ok = match key.as_str() {
            "version" => version.is_some_and(|v| {
                if dry_run {
                    let mut copy = Symbols {
                        forward: versions.forward.clone(),
                        backward: versions.backward.clone(),
                    };
                    copy.check("version", value, v.as_str()).is_ok()
                } else {
                    versions.check("version", value, v.as_str()).is_ok()
                }
            }),
            "nonce" => nonce.is_some_and(|v| {
                if dry_run {
                    let mut copy = Symbols {
                        forward: nonces.forward.clone(),
                        backward: nonces.backward.clone(),
                    };
                    copy.check("nonce", value, v.as_str()).is_ok()
                } else {
                    nonces.check("nonce", value, v.as_str()).is_ok()
                }
            }),
            "reason" => reason == Some(value.as_str()),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    true
}

fn server_event_matches(
    event: &ServerEvent,
    kind: &str,
    type_url: &str,
    name: &Option<String>,
    details: &[(String, String)],
) -> bool {
    let (k, t, names): (&str, Option<&str>, Vec<&str>) = match event {
        ServerEvent::NodeIdentified(_) => ("node", None, Vec::new()),
        ServerEvent::Subscribed { type_url, names } => (
            "subscribed",
            Some(type_url),
            names.iter().map(String::as_str).collect(),
        ),
        ServerEvent::Unsubscribed { type_url, names } => (
            "unsubscribed",
            Some(type_url),
            names.iter().map(String::as_str).collect(),
        ),
        ServerEvent::Acked { type_url, .. } => ("acked", Some(type_url), Vec::new()),
        ServerEvent::Nacked { type_url, .. } => ("nacked", Some(type_url), Vec::new()),
        ServerEvent::StaleRequest { type_url, .. } => ("stale", Some(type_url), Vec::new()),
        ServerEvent::Ignored { type_url, .. } => ("ignored", Some(type_url), Vec::new()),
        ServerEvent::ProtocolError(_) => ("protocol-error", None, Vec::new()),
    };
    k == kind
        && t.is_none_or(|t| t == type_url)
        && name.as_ref().is_none_or(|n| names.contains(&n.as_str()))
        && details.is_empty()
}

fn kind_of(action: &Action) -> LineKind {
    match action {
        Action::Message {
            direction: Direction::ClientToServer,
            ..
        } => LineKind::Request,
        Action::Message {
            direction: Direction::ServerToClient,
            ..
        } => LineKind::Response,
        Action::ClientBatch(_) | Action::Expect(Side::Client, _) => LineKind::Client,
        Action::ServerBatch(_) | Action::Expect(Side::Server, _) => LineKind::Server,
        Action::Wait(_) | Action::Disconnect | Action::Connect => LineKind::Both,
    }
}

/// Replays `scenario` and reports every line; stops at the first failing line.
pub fn run(scenario: &Scenario) -> Report {
    let mut report = Report {
        title: scenario.title.clone(),
        lines: Vec::new(),
        trailing: None,
        client_view: Vec::new(),
        server_view: Vec::new(),
    };
    let mut runner = match Runner::new(scenario) {
        Ok(runner) => runner,
        Err(e) => {
            report.trailing = Some(e);
            return report;
        }
    };
    let _ = (runner.variant, &runner.transport);
    for step in &scenario.steps {
        let mut actual = None;
        let result = match &step.action {
            Action::Message {
                direction,
                message,
                tags,
            } => {
                let (rendered, result) = runner.message(*direction, message, tags);
                actual = rendered;
                result
            }
            Action::ClientBatch(commands) => {
                let result = commands.iter().try_for_each(|c| runner.client_command(c));
                runner.pump();
                result
            }
            Action::ServerBatch(commands) => {
                let result = commands.iter().try_for_each(|c| runner.server_command(c));
                runner.pump();
                result
            }
            Action::Wait(duration) => runner.wait(*duration),
            Action::Disconnect => {
                runner.disconnect();
                Ok(())
            }
            Action::Connect => {
                runner.connect();
                Ok(())
            }
            Action::Expect(side, expectation) => runner.expect(*side, expectation),
        };
        let failed = result.is_err();
        report.lines.push(LineReport {
            line: step.line,
            source: step.source.clone(),
            kind: kind_of(&step.action),
            actual,
            result,
        });
        if failed {
            report.client_view = core::mem::take(&mut runner.client_view);
            report.server_view = core::mem::take(&mut runner.server_view);
            return report;
        }
    }
    report.trailing = runner.leftovers();
    report.client_view = runner.client_view;
    report.server_view = runner.server_view;
    report
}
