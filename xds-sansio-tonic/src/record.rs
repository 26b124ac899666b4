//! Records conversations as JSON lines, the format `xds-sansio check` and
//! `xds_sansio_conformance::check::parse_jsonl` read (feature `record`): the one recorder of the
//! adapter and the CLI.
//!
//! On the server, a [`Recorder`] is [`Callbacks`]: every request, every response (decoded
//! back from the bytes sent) and every store change of every group. On the client, it is
//! a [`Tap`]: given to [`XdsClientBuilder::tap`](crate::client::XdsClientBuilder::tap) it records every
//! stream of an [`XdsClient`](crate::client::XdsClient) under its stream number, and to
//! [`run_stream`](crate::call::run_stream) one call under the number given with it. The
//! CLI's `tap` proxy records with it too, a live checker following
//! ([`Recorder::followed_by`]).

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use xds_sansio::codec::json::JsonCodec;
use xds_sansio::server::{EncodedResponse, ResourceStore, Revision};
use xds_sansio::{Request, Response};
use xds_sansio_conformance::transcript::Entry;

use crate::call::Tap;
use crate::server::{Callbacks, StreamInfo};

/// Sees each entry as it is recorded, and why it is not in the file if it is not.
type Follower = Box<dyn FnMut(&Entry, Option<&str>) + Send>;

/// Writes every entry to a file as a JSON line, if given one, and keeps it in memory
/// unless told not to ([`Recorder::without_memory`]).
pub struct Recorder {
    inner: Mutex<Inner>,
    codec: JsonCodec,
}

struct Inner {
    entries: Vec<Entry>,
    keep: bool,
    /// The next entry's line (the header is line 1).
    next_line: usize,
    file: Option<std::fs::File>,
    follower: Option<Follower>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder").finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder that keeps entries in memory and appends them to `file` if given.
    pub fn new(file: Option<std::fs::File>) -> Recorder {
        Recorder::with_codec(file, JsonCodec::new())
    }

    /// The same, writing resources with `codec`'s schemas (canonical JSON of known types).
    /// The file begins with the record format's header line
    /// ([`xds_sansio_conformance::check::header_jsonl`]), so entries are numbered from line 2, in the
    /// file and in memory alike.
    pub fn with_codec(mut file: Option<std::fs::File>, codec: JsonCodec) -> Recorder {
        if let Some(file) = file.as_mut() {
            let _ = writeln!(
                file,
                "{}",
                xds_sansio_conformance::check::header_jsonl(None)
            );
        }
        Recorder {
            inner: Mutex::new(Inner {
                entries: Vec::new(),
                keep: true,
                next_line: 2,
                file,
                follower: None,
            }),
            codec,
        }
    }

    /// The same, keeping nothing in memory ([`Recorder::entries`] is then empty): for a
    /// recorder that runs for long and only writes its file.
    pub fn without_memory(self) -> Recorder {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keep = false;
        self
    }

    /// The same, with `follower` seeing each entry as it is recorded, in the recording's
    /// order (no other entry is recorded meanwhile; it must not record itself), with why
    /// the entry is not in the file if it is not: a live checker follows it so.
    pub fn followed_by(
        self,
        follower: impl FnMut(&Entry, Option<&str>) + Send + 'static,
    ) -> Recorder {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .follower = Some(Box::new(follower));
        self
    }

    /// Records one entry; `make` gets its line number in the recording (the header is
    /// line 1).
    pub fn record(&self, make: impl FnOnce(usize) -> Entry) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let inner = &mut *inner;
        let entry = make(inner.next_line);
        inner.next_line += 1;
        let mut unwritten = None;
        if let Some(file) = inner.file.as_mut() {
            match xds_sansio_conformance::check::to_jsonl(&entry, &self.codec) {
                Ok(mut line) => {
                    // One write of the whole line with its newline: a reader following the
                    // file sees no line cut between the text and its end.
                    line.push('\n');
                    let _ = file.write_all(line.as_bytes());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "recorder: entry not written");
                    unwritten = Some(e.to_string());
                }
            }
        }
        if let Some(follower) = inner.follower.as_mut() {
            follower(&entry, unwritten.as_deref());
        }
        if inner.keep {
            inner.entries.push(entry);
        }
    }

    /// Everything recorded so far (nothing [`Recorder::without_memory`]).
    pub fn entries(&self) -> Vec<Entry> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entries
            .clone()
    }

    /// How many entries were recorded, kept in memory or not.
    pub fn recorded(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.next_line - 2
    }
}

impl Callbacks for Recorder {
    fn request(&self, stream: &StreamInfo, request: &Request) {
        let request = request.clone();
        self.record(|line| Entry::Request {
            line,
            stream: stream.id,
            request,
        });
    }

    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        match response.decode() {
            Ok(response) => self.record(|line| Entry::Response {
                line,
                stream: stream.id,
                response,
            }),
            Err(e) => tracing::warn!(error = %e, "recorder: a response does not decode"),
        }
    }

    fn published(&self, _group: &str, store: &ResourceStore, since: Revision) {
        let Ok(changes) = store.changes_since(since) else {
            return;
        };
        for change in changes {
            if change.name.is_empty() {
                continue;
            }
            let version = store
                .get(change.type_url, change.name)
                .map(|r| r.version().to_string());
            self.record(|line| Entry::Store {
                line,
                type_url: String::from(change.type_url),
                name: String::from(change.name),
                version,
            });
        }
    }
}

impl Tap for Recorder {
    fn request(&self, stream: u64, request: &Request) {
        let request = request.clone();
        self.record(|line| Entry::Request {
            line,
            stream,
            request,
        });
    }

    fn response(&self, stream: u64, response: &Response) {
        let response = response.clone();
        self.record(|line| Entry::Response {
            line,
            stream,
            response,
        });
    }
}
