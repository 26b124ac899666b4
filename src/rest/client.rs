//! The polling side: a SotW client for one type behind a single outstanding HTTP request.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::string::{String, ToString};
use core::time::Duration;

use super::{rest_path, HttpRequest, RestError, CONTENT_TYPE_JSON};
use crate::client::{ClientConfig, ClientError, ClientEvent, Validator, VerdictTicket};
use crate::codec::json::JsonCodec;
use crate::codec::FormatError;
use crate::message::{Transport, Variant};
use crate::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use crate::pb::envoy::config::core::v3::Node;
use crate::single_type::{SingleTypeClient, SingleTypeError};
use crate::time::Instant;

/// How a [`RestClient`] polls.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RestConfig {
    /// The SotW client's configuration. Its transport must be
    /// [`Transport::PerType`] (the type polled) and its variant [`Variant::Sotw`];
    /// `node_on_every_request` is forced on.
    pub client: ClientConfig,
    /// The delay between the end of one exchange and the next request (Envoy's
    /// `refresh_delay`); small for long polling.
    pub poll_period: Duration,
    /// An exchange unanswered for this long counts as failed ([`RestFailure::TimedOut`]).
    /// `None`: the caller's HTTP stack decides and reports [`RestClient::handle_failure`].
    pub request_timeout: Option<Duration>,
    /// The path to `POST` to; `None` takes the type's path from the catalog.
    pub path: Option<String>,
    /// Accept response fields the schema does not know (a newer server), instead of
    /// failing the exchange. Default `false`: strict, like [`JsonCodec`].
    pub ignore_unknown_fields: bool,
}

impl RestConfig {
    /// Polls `type_url` for `node` every `poll_period`, with the client defaults.
    pub fn new(type_url: &str, node: Node, poll_period: Duration) -> RestConfig {
        RestConfig {
            client: ClientConfig::new(
                Variant::Sotw,
                Transport::PerType(String::from(type_url)),
                node,
            ),
            poll_period,
            request_timeout: None,
            path: None,
            ignore_unknown_fields: false,
        }
    }
}

/// Why an exchange brought nothing; the state is unchanged and the next poll repeats the
/// same version.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RestFailure {
    /// An HTTP status other than `200` and `304`.
    Status(u16),
    /// A `200` with an empty body.
    EmptyBody,
    /// A body that is not the canonical JSON of a `DiscoveryResponse`, with the position
    /// of the problem (the same reader as JSON files).
    MalformedBody(FormatError),
    /// The caller reported a transport failure (connection refused, reset, its own timeout).
    Transport,
    /// [`RestConfig::request_timeout`] elapsed.
    TimedOut,
    /// The request could not be written as JSON (not expected: our own message and
    /// descriptors); no request left.
    Encode(String),
}

/// What the application should know.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum RestEvent {
    /// An event of the SotW rules: upserts, removals, ACK/NACK verdicts, readiness,
    /// validation requests, ignored responses.
    Client(ClientEvent),
    /// The server answered `304 Not Modified`: nothing changed.
    NotModified,
    /// The exchange failed; nothing changed.
    Failed(RestFailure),
    /// An answer for an exchange that is no longer in flight (superseded or timed out); it
    /// was dropped.
    StaleAnswer {
        /// The id of that exchange.
        id: u64,
    },
}

#[derive(Clone, Debug)]
struct InFlight {
    id: u64,
    sent_at: Instant,
}

/// The client side of REST-JSON polling for one type. See the [module docs](super); the
/// reads are the [`SingleTypeClient`]'s.
pub struct RestClient {
    inner: SingleTypeClient,
    path: String,
    /// Writes requests and reads answers (with the unknown-field setting of the config).
    codec: JsonCodec,
    poll_period: Duration,
    request_timeout: Option<Duration>,
    in_flight: Option<InFlight>,
    /// When the next poll is due; `None` until the first request leaves.
    next_poll: Option<Instant>,
    /// What the SotW client queued since the last request left.
    pending: Option<DiscoveryRequest>,
    /// The last request sent, repeated when nothing is queued.
    last_sent: Option<DiscoveryRequest>,
    events: VecDeque<RestEvent>,
    next_id: u64,
    now: Instant,
}

impl core::fmt::Debug for RestClient {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RestClient")
            .field("type_url", &self.inner.type_url())
            .field("path", &self.path)
            .field("in_flight", &self.in_flight)
            .field("next_poll", &self.next_poll)
            .finish_non_exhaustive()
    }
}

impl core::ops::Deref for RestClient {
    type Target = SingleTypeClient;

    fn deref(&self) -> &SingleTypeClient {
        &self.inner
    }
}

impl From<SingleTypeError> for RestError {
    fn from(e: SingleTypeError) -> RestError {
        match e {
            SingleTypeError::DeltaNotAvailable => RestError::DeltaNotAvailable,
            SingleTypeError::EmptyTypeUrl => RestError::EmptyTypeUrl,
        }
    }
}

impl RestClient {
    /// A client that polls the type of `config.client.transport`. Refuses ADS, incremental
    /// xDS (as [`SingleTypeClient::new`] does), and types without a REST path (unless
    /// [`RestConfig::path`] names one).
    pub fn new(config: RestConfig, codec: JsonCodec) -> Result<RestClient, RestError> {
        let RestConfig {
            client: mut client_config,
            poll_period,
            request_timeout,
            path,
            ignore_unknown_fields,
        } = config;
        let type_url = match &client_config.transport {
            Transport::Aggregated => return Err(RestError::AggregatedNotAvailable),
            Transport::PerType(url) => url.clone(),
        };
        client_config.node_on_every_request = true;
        let inner = SingleTypeClient::new(&type_url, client_config)?;
        let path = match path {
            Some(p) => p,
            None => String::from(
                rest_path(&type_url).ok_or_else(|| RestError::NoRestPath(type_url.clone()))?,
            ),
        };
        Ok(RestClient {
            inner,
            path,
            codec: codec.ignore_unknown_fields(ignore_unknown_fields),
            poll_period,
            request_timeout,
            in_flight: None,
            next_poll: None,
            pending: None,
            last_sent: None,
            events: VecDeque::new(),
            next_id: 0,
            now: Instant::ZERO,
        })
    }

    /// The path requests are `POST`ed to.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether an exchange is in flight.
    pub fn in_flight(&self) -> Option<u64> {
        self.in_flight.as_ref().map(|f| f.id)
    }

    /// Subscribes to `names` (see [`SingleTypeClient::subscribe`]; no names is the legacy
    /// wildcard of LDS/CDS). The change leaves with the next request, at once.
    pub fn subscribe(&mut self, names: &[&str]) -> Result<(), ClientError> {
        self.inner.subscribe(names)
    }

    /// Unsubscribes from `names` (see [`SingleTypeClient::unsubscribe`]).
    pub fn unsubscribe(&mut self, names: &[&str]) -> Result<(), ClientError> {
        self.inner.unsubscribe(names)
    }

    /// Sets the synchronous content validator (see [`SingleTypeClient::set_validator`]).
    pub fn set_validator(&mut self, validator: Box<dyn Validator>) {
        self.inner.set_validator(validator);
    }

    /// Turns deferred validation on or off (see
    /// [`SingleTypeClient::set_deferred_validation`]).
    pub fn set_deferred_validation(&mut self, on: bool) {
        self.inner.set_deferred_validation(on);
    }

    /// Answers a [`ClientEvent::ValidationNeeded`]; the request it lets leave is due at
    /// once (see [`SingleTypeClient::verdict`]).
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.inner.verdict(ticket, rejections)
    }

    fn names_changed(&self) -> bool {
        match (&self.pending, &self.last_sent) {
            (Some(p), Some(l)) => p.resource_names != l.resource_names,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// The next request to send, if one is due at `now`. While one is in flight this is
    /// `None`, unless a subscription change supersedes it ([`HttpRequest::supersedes`]).
    pub fn poll_request(&mut self, now: Instant) -> Option<HttpRequest> {
        self.absorb(now);
        let names_changed = self.names_changed();
        let supersedes = match &self.in_flight {
            Some(f) if names_changed => Some(f.id),
            Some(_) => return None,
            None => {
                let due = names_changed || self.next_poll.is_none_or(|t| now >= t);
                if !due {
                    return None;
                }
                None
            }
        };
        let request = match self.pending.take() {
            Some(r) => r,
            None => {
                let mut r = self.last_sent.clone()?;
                r.error_detail = None;
                r
            }
        };
        let body = match self.codec.to_string(&request) {
            Ok(body) => body,
            Err(e) => {
                // Our own message with our own descriptors: not expected; say it and wait a
                // period rather than spin.
                self.events
                    .push_back(RestEvent::Failed(RestFailure::Encode(e.to_string())));
                self.next_poll = Some(now.saturating_add(self.poll_period));
                return None;
            }
        };
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        self.in_flight = Some(InFlight { id, sent_at: now });
        self.last_sent = Some(request);
        Some(HttpRequest {
            id,
            method: "POST",
            path: self.path.clone(),
            content_type: CONTENT_TYPE_JSON,
            body,
            supersedes,
        })
    }

    /// Takes the answer to exchange `id`: its HTTP status and body. Never fails: whatever
    /// came back becomes state and events.
    pub fn handle_response(&mut self, now: Instant, id: u64, status: u16, body: &[u8]) {
        if !self.complete(now, id) {
            return;
        }
        match status {
            200 => match parse_body(&self.codec, body) {
                Ok(response) => self.inner.handle_response(now, response),
                Err(failure) => self.events.push_back(RestEvent::Failed(failure)),
            },
            304 => self.events.push_back(RestEvent::NotModified),
            other => self
                .events
                .push_back(RestEvent::Failed(RestFailure::Status(other))),
        }
        self.absorb(now);
    }

    /// Exchange `id` failed below HTTP (connection refused or reset, the caller's timeout).
    pub fn handle_failure(&mut self, now: Instant, id: u64) {
        if self.complete(now, id) {
            self.events
                .push_back(RestEvent::Failed(RestFailure::Transport));
        }
        self.absorb(now);
    }

    /// Ends exchange `id` if it is the one in flight; otherwise reports it stale.
    fn complete(&mut self, now: Instant, id: u64) -> bool {
        self.now = now;
        match &self.in_flight {
            Some(f) if f.id == id => {
                self.in_flight = None;
                self.next_poll = Some(now.saturating_add(self.poll_period));
                true
            }
            _ => {
                self.events.push_back(RestEvent::StaleAnswer { id });
                false
            }
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<RestEvent> {
        self.events.pop_front()
    }

    /// When to call [`RestClient::poll_request`] / [`RestClient::handle_timeout`] next: the
    /// last `now` while output is waiting, else the earliest of the next poll, the request
    /// timeout and the client's timers (does-not-exist, TTL).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.events.is_empty() || self.names_changed() {
            return Some(self.now);
        }
        let ours = match &self.in_flight {
            Some(f) => self.request_timeout.map(|d| f.sent_at.saturating_add(d)),
            None if self.pending.is_some() || self.last_sent.is_some() => {
                Some(self.next_poll.unwrap_or(self.now))
            }
            None => None,
        };
        match (ours, self.inner.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Fires what is due at `now`: the client's timers and the request timeout.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
        let timed_out = match (&self.in_flight, self.request_timeout) {
            (Some(f), Some(d)) => now >= f.sent_at.saturating_add(d),
            _ => false,
        };
        if timed_out {
            self.now = now;
            self.in_flight = None;
            self.next_poll = Some(now.saturating_add(self.poll_period));
            self.events
                .push_back(RestEvent::Failed(RestFailure::TimedOut));
        }
        self.absorb(now);
    }

    /// Moves the SotW client's queued requests into `pending` (the last one wins; a NACK's
    /// `error_detail` survives a later request of the same nonce) and its events into ours.
    fn absorb(&mut self, now: Instant) {
        self.now = now;
        while let Some(mut request) = self.inner.poll_request(now) {
            if let Some(previous) = self.pending.take() {
                if request.error_detail.is_none()
                    && previous.response_nonce == request.response_nonce
                {
                    request.error_detail = previous.error_detail;
                }
            }
            self.pending = Some(request);
        }
        while let Some(event) = self.inner.poll_event() {
            self.events.push_back(RestEvent::Client(event));
        }
    }
}

/// Reads a `200` body as a `DiscoveryResponse`.
fn parse_body(codec: &JsonCodec, body: &[u8]) -> Result<DiscoveryResponse, RestFailure> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(RestFailure::EmptyBody);
    }
    codec.parse_text(body).map_err(RestFailure::MalformedBody)
}
