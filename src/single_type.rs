//! One resource type behind a SotW [`Client`] with no stream: the machine that REST-JSON
//! polling (`rest::RestClient`, feature `json`) and filesystem subscriptions
//! ([`crate::file::FileSubscription`]) both hold.
//!
//! Both deliver `DiscoveryResponse`s of one type ("xDS REST and gRPC protocol",
//! "REST-JSON polling subscriptions" and "Filesystem subscriptions"), so both apply them
//! with the SotW client's rules: versions, ACK/NACK by version, validation, the cache,
//! deletion for full-state types, duplicate names, type mismatch and timers. This type is
//! the one place that turns a [`ClientConfig`] into that client; the wrappers add only what
//! their transport has (the HTTP exchange, the file's bytes).
//!
//! # Method kinds
//!
//! As [`Client`], for its one type: reads (`resource`, `resource_names`, `version`,
//! `status`, `dump`), inputs (`handle_response`, `handle_timeout`), commands (`subscribe`,
//! `unsubscribe`, validators, `verdict`) and outputs (`poll_request`, `poll_event`,
//! `poll_timeout`). After every input or command, drain `poll_request`, then `poll_event`,
//! then read `poll_timeout`. The wrappers expose the reads through `Deref`.
//!
//! # Decisions
//!
//! * **SotW only.** A [`ClientConfig`] for incremental xDS is refused
//!   ([`SingleTypeError::DeltaNotAvailable`]): files hold and REST-JSON carries
//!   `DiscoveryResponse`s ("There is no REST version of Incremental xDS yet", xDS protocol,
//!   Incremental xDS).
//! * **One type.** The transport becomes [`Transport::PerType`] for the type given: there
//!   is no stream, so the configuration's transport says nothing (REST-JSON polling takes
//!   its type from it and refuses ADS itself).
//! * **Always connected.** There is no stream to break: the client is connected at
//!   [`Instant::ZERO`] for its lifetime, so versions and the cache persist.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use crate::client::{
    CachedResource, Client, ClientConfig, ClientError, ClientEvent, ResourceStatus, SharedStr,
    StatusEntry, Validator, VerdictTicket,
};
use crate::message::{Request, Response, Transport, Variant};
use crate::pb::discovery::{DiscoveryRequest, DiscoveryResponse};
use crate::time::Instant;

/// Why a [`SingleTypeClient`] cannot be built from a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SingleTypeError {
    /// The configuration is for incremental xDS; files and REST-JSON carry SotW
    /// `DiscoveryResponse`s only.
    DeltaNotAvailable,
    /// The type URL is empty.
    EmptyTypeUrl,
}

impl fmt::Display for SingleTypeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SingleTypeError::DeltaNotAvailable => {
                f.write_str("incremental xDS is not available for files and REST-JSON polling")
            }
            SingleTypeError::EmptyTypeUrl => f.write_str("empty type URL"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SingleTypeError {}

/// The SotW client of one type, without a stream. See the [module docs](self).
pub struct SingleTypeClient {
    client: Client,
    type_url: SharedStr,
}

impl fmt::Debug for SingleTypeClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleTypeClient")
            .field("type_url", &self.type_url)
            .field("client", &self.client)
            .finish()
    }
}

impl SingleTypeClient {
    /// The SotW client of `type_url` with `config` (its variant must be SotW; its
    /// transport becomes per-type for `type_url`), connected. Nothing is subscribed yet.
    /// On error, nothing is built.
    pub fn new(type_url: &str, mut config: ClientConfig) -> Result<Self, SingleTypeError> {
        if config.variant == Variant::Delta {
            return Err(SingleTypeError::DeltaNotAvailable);
        }
        if type_url.is_empty() {
            return Err(SingleTypeError::EmptyTypeUrl);
        }
        config.transport = Transport::PerType(String::from(type_url));
        let mut client = Client::new(config);
        client.connected(Instant::ZERO);
        Ok(SingleTypeClient {
            client,
            type_url: SharedStr::from(type_url),
        })
    }

    /// The type URL.
    pub fn type_url(&self) -> &str {
        self.type_url.as_str()
    }

    /// The accepted resource `name`, if held.
    pub fn resource(&self, name: &str) -> Option<CachedResource<'_>> {
        self.client.resource(self.type_url.as_str(), name)
    }

    /// The names of the resources held, sorted.
    pub fn resource_names(&self) -> Vec<SharedStr> {
        self.client.resource_names(self.type_url.as_str())
    }

    /// The last accepted `version_info`.
    pub fn version(&self) -> Option<&str> {
        self.client.version(self.type_url.as_str())
    }

    /// The status of `name` (see [`Client::status`]).
    pub fn status(&self, name: &str) -> Option<ResourceStatus> {
        self.client.status(self.type_url.as_str(), name)
    }

    /// Every status, sorted (see [`Client::dump`]).
    pub fn dump(&self) -> Vec<StatusEntry> {
        self.client.dump()
    }

    /// Applies a `DiscoveryResponse` with the SotW rules (see [`Client::handle_response`]).
    pub fn handle_response(&mut self, now: Instant, response: DiscoveryResponse) {
        self.client.handle_response(now, Response::Sotw(response));
    }

    /// Fires the timers due at `now` (does-not-exist, TTL).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.client.handle_timeout(now);
    }

    /// Subscribes to `names` (see [`Client::subscribe`]; no names is the legacy wildcard
    /// of LDS/CDS).
    pub fn subscribe(&mut self, names: &[&str]) -> Result<(), ClientError> {
        self.client.subscribe(self.type_url.as_str(), names)
    }

    /// Unsubscribes from `names` (see [`Client::unsubscribe`]).
    pub fn unsubscribe(&mut self, names: &[&str]) -> Result<(), ClientError> {
        self.client.unsubscribe(self.type_url.as_str(), names)
    }

    /// Sets the synchronous content validator (see [`Client::set_validator`]).
    pub fn set_validator(&mut self, validator: Box<dyn Validator>) {
        self.client.set_validator(self.type_url.as_str(), validator);
    }

    /// Turns deferred validation on or off (see [`Client::set_deferred_validation`]).
    pub fn set_deferred_validation(&mut self, on: bool) {
        self.client
            .set_deferred_validation(self.type_url.as_str(), on);
    }

    /// Answers a [`ClientEvent::ValidationNeeded`] (see [`Client::verdict`]).
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.client.verdict(ticket, rejections)
    }

    /// The next request the SotW rules want sent (a first request, an ACK, a NACK, a
    /// subscription change); it counts as sent at `now`.
    /// Call after: any input or command.
    pub fn poll_request(&mut self, now: Instant) -> Option<DiscoveryRequest> {
        // The client is SotW (checked in `new`): every request it makes is a SotW one.
        while let Some(request) = self.client.poll_request(now) {
            if let Request::Sotw(request) = request {
                return Some(request);
            }
        }
        None
    }

    /// The next event, if any. Call after draining [`SingleTypeClient::poll_request`].
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.client.poll_event()
    }

    /// When to call [`SingleTypeClient::handle_timeout`] (see [`Client::poll_timeout`]).
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.client.poll_timeout()
    }
}
