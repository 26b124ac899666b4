//! Filesystem subscriptions: a `DiscoveryResponse` read from a file, applied with the SotW
//! rules but without ACK/NACK.
//!
//! xDS protocol, "Filesystem subscriptions": Envoy watches a path "and parse\[s\] the
//! DiscoveryResponse proto in the file on update. Binary protobufs, JSON, YAML and proto
//! text are supported formats"; "There is no mechanism available for filesystem
//! subscriptions to ACK/NACK updates beyond stats counters and logs. The last valid
//! configuration for an xDS API will continue to apply if an configuration update
//! rejection occurs."
//!
//! # Call order
//!
//! ```text
//! let mut sub = FileSubscription::new(CDS, ClientConfig::default())?;   // wildcard
//! sub.set_validator(...);                               // optional
//! on file changed: sub.handle_bytes(now, Format::from_path(path)?, bytes);
//! while let Some(ev) = sub.poll_event() { apply(ev) }
//! at sub.poll_timeout(): sub.handle_timeout(now)        // TTLs of wrapped resources
//! ```
//!
//! No file I/O happens here: the caller watches the file (inotify, kqueue, polling the
//! modification time; see `examples/file_watch.rs`) and hands in its bytes.
//!
//! # Decisions
//!
//! * **One home for the rules.** A [`FileSubscription`] holds a [`SingleTypeClient`]: the
//!   SotW [`Client`](crate::Client) of its one type, connected for its lifetime, as
//!   `rest::RestClient` (feature `json`) does. A decoded file is handed to it like a
//!   response on a stream, so version tracking, content validation (synchronous or
//!   deferred), duplicate names, `Any` type mismatch, deletion of what a full-state
//!   (LDS/CDS) file omits, TTLs of wrapped resources and the cache are the client's rules,
//!   not copies of them. The ACK or NACK the client queues is drained and dropped: nothing
//!   goes on any wire. The reads (`resource`, `resource_names`, `version`, `status`,
//!   `dump`, `type_url`) are the [`SingleTypeClient`]'s, through `Deref`.
//! * **Configuration.** From the [`ClientConfig`] only the NACK policy and the limits
//!   matter; the transport is the file's type. A configuration for incremental xDS is
//!   refused ([`FileError::Config`]), as REST-JSON polling refuses it: a file holds a
//!   `DiscoveryResponse`. The does-not-exist timer is off: there is no server to wait for.
//! * **Rejection keeps the last valid configuration.** A file the client NACKs changes
//!   nothing (Envoy's `RejectAll` policy is the default; [`NackPolicy::KeepValid`] applies
//!   the valid resources of a partly rejected file, as the client documents) and is
//!   reported as [`FileEvent::Rejected`]. A file that does not decode is
//!   [`FileEvent::Malformed`], with the position of the problem, and changes nothing. A
//!   file whose `type_url` is another type's is [`FileEvent::Rejected`] too (the client
//!   ignores a response its stream does not carry; here that is the rejection of the
//!   update). An empty `type_url` means the subscription's type, as for singleton APIs.
//! * **What is subscribed.** Everything in the file: the wildcard (for LDS/CDS the legacy
//!   form, otherwise `*`), as Envoy applies every resource of the file.
//! * **Formats** ([`Format`]): chosen explicitly or by extension ([`Format::from_path`]:
//!   Envoy's `.pb`, `.pb_text`, `.json`, `.yaml`/`.yml`, plus the common `.bin`, `.binpb`,
//!   `.textproto`, `.txtpb`, `.pbtxt`, `.pb.txt`, `.prototxt`). JSON is the canonical
#![cfg_attr(
    feature = "json",
    doc = "  proto3 mapping of [`crate::codec::json`]; YAML is read into the JSON value it denotes and then"
)]
#![cfg_attr(
    not(feature = "json"),
    doc = "  proto3 mapping of `codec::json`; YAML is read into the JSON value it denotes and then"
)]
//!   goes the same way (as Envoy converts YAML to JSON); the text format is prost-reflect's.
//!   Binary needs nothing beyond the `no_std` core; the others need features `json`,
//!   `yaml`, `textproto` (each implies `std`).
//! * **Resource schemas.** The crate knows only the discovery messages, so without help a
//!   resource in a JSON/YAML/text file is `{"@type": URL, "value": base64}` (JSON/YAML) or
//!   `type_url`/`value` (text). Add the resource schemas to a
#![cfg_attr(
    feature = "json",
    doc = "  [`JsonCodec`](crate::codec::json::JsonCodec) and build the subscription with"
)]
#![cfg_attr(
    not(feature = "json"),
    doc = "  `JsonCodec` (feature `json`) and build the subscription with"
)]
//!   [`FileSubscription::with_codec`]: then resources are written by their fields
//!   (`"@type": ...Cluster`, `name: foo`, ...; text: `[type.googleapis.com/...] { ... }`),
//!   as in Envoy's own files.
//! * **Positions** ([`Position`](crate::codec::Position)): binary errors name the byte offset of the top-level
//!   field record where decoding breaks; text formats name a 1-based line and column
//!   (syntax errors always; schema errors in JSON/YAML when the schema parser agrees, see
//!   [`FormatError::Malformed`]); invalid UTF-8 names its byte offset.
//! * **Zero-copy** holds for binary files: cached bodies are slices of the bytes handed in.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use bytes::Bytes;
use core::ops::Deref;

#[cfg(doc)]
use crate::client::NackPolicy;
use crate::client::{
    ClientConfig, ClientError, ClientEvent, IgnoreReason, SharedStr, Validator, VerdictTicket,
    WILDCARD,
};
use crate::codec::{FileCodec, Format, FormatError};
use crate::pb::discovery::DiscoveryResponse;
use crate::single_type::{SingleTypeClient, SingleTypeError};
use crate::time::Instant;
use crate::types::TypeInfo;

/// What a file update did, for the application.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum FileEvent {
    /// A cache change or readiness from the SotW rules: `Upserted`, `Removed`,
    /// `DoesNotExist`, `Ready` or `ValidationNeeded` (answer it with
    /// [`FileSubscription::verdict`]).
    Client(ClientEvent),
    /// The file's content was applied; `version` is its `version_info`.
    Accepted {
        /// The file's `version_info`.
        version: SharedStr,
    },
    /// The file was rejected; the last valid configuration stays in place (under
    /// [`NackPolicy::KeepValid`] the valid resources were applied).
    Rejected {
        /// The file's `version_info`.
        version: SharedStr,
        /// Why (the message a NACK would carry).
        error: String,
        /// The names whose content the validator rejected; empty when the file as a
        /// whole broke a protocol rule.
        rejected: Vec<SharedStr>,
    },
    /// The bytes did not decode as a `DiscoveryResponse`; nothing changed.
    Malformed(FormatError),
}

/// Why a [`FileSubscription`] cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileError {
    /// The configuration is refused, as REST-JSON polling refuses it (incremental xDS, an
    /// empty type URL).
    Config(SingleTypeError),
    /// The client refused the subscription to everything in the file (its limits).
    Subscribe(ClientError),
}

impl core::fmt::Display for FileError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            FileError::Config(e) => write!(f, "{e}"),
            FileError::Subscribe(e) => write!(f, "cannot subscribe to the file's resources: {e}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for FileError {}

/// The subscription to one type's file. See the [module docs](self); the reads are the
/// [`SingleTypeClient`]'s.
pub struct FileSubscription {
    inner: SingleTypeClient,
    codec: FileCodec,
    events: VecDeque<FileEvent>,
    now: Instant,
    /// The `version_info` of the file being applied, for rejections the client reports
    /// without one.
    version: SharedStr,
}

impl core::fmt::Debug for FileSubscription {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FileSubscription")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl Deref for FileSubscription {
    type Target = SingleTypeClient;

    fn deref(&self) -> &SingleTypeClient {
        &self.inner
    }
}

impl FileSubscription {
    /// A subscription to every resource of `type_url` found in the file. From `config`
    /// only the NACK policy and the limits matter (see the [module docs](self) for what is
    /// refused); the does-not-exist timer is turned off.
    pub fn new(type_url: &str, config: ClientConfig) -> Result<FileSubscription, FileError> {
        FileSubscription::with_codec(type_url, config, FileCodec::new())
    }

    /// Like [`FileSubscription::new`], reading the text formats with `codec` (e.g. one
    /// that knows the application's resource schemas).
    pub fn with_codec(
        type_url: &str,
        mut config: ClientConfig,
        codec: FileCodec,
    ) -> Result<FileSubscription, FileError> {
        config.does_not_exist_timeout = None;
        let mut inner = SingleTypeClient::new(type_url, config).map_err(FileError::Config)?;
        let names: &[&str] = if TypeInfo::of(type_url).legacy_wildcard() {
            &[]
        } else {
            &[WILDCARD]
        };
        inner.subscribe(names).map_err(FileError::Subscribe)?;
        let mut sub = FileSubscription {
            inner,
            codec,
            events: VecDeque::new(),
            now: Instant::ZERO,
            version: SharedStr::from(""),
        };
        sub.absorb(Instant::ZERO);
        Ok(sub)
    }

    /// Decodes the file's bytes in `format` and applies them. Never fails: the outcome is
    /// an event ([`FileEvent::Accepted`], [`FileEvent::Rejected`], [`FileEvent::Malformed`]).
    pub fn handle_bytes(&mut self, now: Instant, format: Format, bytes: Bytes) {
        match self.codec.decode::<DiscoveryResponse>(format, bytes) {
            Ok(response) => self.handle_response(now, response),
            Err(e) => {
                self.now = now;
                self.events.push_back(FileEvent::Malformed(e));
            }
        }
    }

    /// Applies an already decoded `DiscoveryResponse` (e.g. from another source of files).
    pub fn handle_response(&mut self, now: Instant, response: DiscoveryResponse) {
        self.version = SharedStr::from(response.version_info.as_str());
        self.inner.handle_response(now, response);
        self.absorb(now);
    }

    /// Fires the TTL timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.inner.handle_timeout(now);
        self.absorb(now);
    }

    /// Answers a [`ClientEvent::ValidationNeeded`]; its outcome is an event at once.
    pub fn verdict(
        &mut self,
        ticket: VerdictTicket,
        rejections: &[(&str, &str)],
    ) -> Result<(), ClientError> {
        self.inner.verdict(ticket, rejections)?;
        self.absorb(self.now);
        Ok(())
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

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<FileEvent> {
        self.events.pop_front()
    }

    /// When to call [`FileSubscription::handle_timeout`] (TTL expiry of wrapped resources).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.events.is_empty() {
            return Some(self.now);
        }
        self.inner.poll_timeout()
    }

    /// Drops the ACK/NACK the client queued and turns its events into ours.
    fn absorb(&mut self, now: Instant) {
        self.now = now;
        while self.inner.poll_request(now).is_some() {}
        while let Some(event) = self.inner.poll_event() {
            let event = match event {
                ClientEvent::Acked { version, .. } => FileEvent::Accepted { version },
                ClientEvent::Nacked {
                    version,
                    error,
                    rejected,
                    ..
                } => FileEvent::Rejected {
                    version,
                    error,
                    rejected,
                },
                ClientEvent::Ignored {
                    type_url, reason, ..
                } => FileEvent::Rejected {
                    version: self.version.clone(),
                    error: match reason {
                        IgnoreReason::NotCarried => {
                            format!(
                                "the file is for type {type_url}, not {}",
                                self.inner.type_url()
                            )
                        }
                        other => format!("the file was ignored: {other:?}"),
                    },
                    rejected: Vec::new(),
                },
                other => FileEvent::Client(other),
            };
            self.events.push_back(event);
        }
    }
}
