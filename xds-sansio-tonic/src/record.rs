//! Records conversations as JSON lines, the format `xds-sansio check` and
//! `xds_sansio::check::parse_jsonl` read (feature `record`).
//!
//! On the server, a [`Recorder`] is [`Callbacks`]: every request, every response (decoded
//! back from the bytes sent) and every store change of every group. On the client, a
//! [`Recorder::client`] tap records one call under a stream id, and a `Recorder` given to
//! [`Builder::tap`](crate::client::Builder::tap) records every stream of an
//! [`XdsClient`](crate::client::XdsClient) under its stream number.

use std::io::Write;
use std::sync::{Mutex, PoisonError};

use xds_sansio::json::JsonCodec;
use xds_sansio::server::{EncodedResponse, ResourceStore, Revision};
use xds_sansio::transcript::Entry;
use xds_sansio::{Request, Response};

use crate::client::{StreamTap, Tap};
use crate::server::{Callbacks, StreamInfo};

/// Keeps every entry in memory and, optionally, appends it to a file as a JSON line.
pub struct Recorder {
    inner: Mutex<(Vec<Entry>, Option<std::fs::File>)>,
    codec: JsonCodec,
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
    /// ([`xds_sansio::check::header_jsonl`]), so entries are numbered from line 2, in the
    /// file and in memory alike.
    pub fn with_codec(mut file: Option<std::fs::File>, codec: JsonCodec) -> Recorder {
        if let Some(file) = file.as_mut() {
            let _ = writeln!(file, "{}", xds_sansio::check::header_jsonl(None));
        }
        Recorder {
            inner: Mutex::new((Vec::new(), file)),
            codec,
        }
    }

    /// Records one entry; `make` gets its line number in the recording (the header is
    /// line 1).
    pub fn record(&self, make: impl FnOnce(usize) -> Entry) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = make(inner.0.len() + 2);
        if let Some(file) = inner.1.as_mut() {
            match xds_sansio::check::to_jsonl(&entry, &self.codec) {
                Ok(line) => {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
                Err(e) => tracing::warn!(error = %e, "recorder: entry not written"),
            }
        }
        inner.0.push(entry);
    }

    /// Everything recorded so far.
    pub fn entries(&self) -> Vec<Entry> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// A tap that records a client's call as stream `stream`.
    pub fn client(&self, stream: u64) -> ClientRecording<'_> {
        ClientRecording {
            recorder: self,
            stream,
        }
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
                .get(&change.type_url, &change.name)
                .map(|r| r.version().to_string());
            self.record(|line| Entry::Store {
                line,
                type_url: change.type_url.clone(),
                name: change.name.clone(),
                version,
            });
        }
    }
}

/// Records one client call (see [`Recorder::client`]).
#[derive(Debug)]
pub struct ClientRecording<'a> {
    recorder: &'a Recorder,
    stream: u64,
}

impl Tap for ClientRecording<'_> {
    fn request(&self, request: &Request) {
        let request = request.clone();
        self.recorder.record(|line| Entry::Request {
            line,
            stream: self.stream,
            request,
        });
    }

    fn response(&self, response: &Response) {
        let response = response.clone();
        self.recorder.record(|line| Entry::Response {
            line,
            stream: self.stream,
            response,
        });
    }
}

impl StreamTap for Recorder {
    fn request(&self, stream: u64, request: &Request) {
        self.client(stream).request(request);
    }

    fn response(&self, stream: u64, response: &Response) {
        self.client(stream).response(response);
    }
}
