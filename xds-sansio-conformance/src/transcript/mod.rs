//! A transcript: the messages of a conversation in the order one side saw them, with the
//! server's store changes. The replay runner and the pair harness record them; the
//! checker reads them (and writes and reads them as JSON lines).
//!
//! [`notation`] writes messages back in the scenario notation, for diagrams and
//! transcripts that people read.

use alloc::string::String;

pub mod notation;

use xds_sansio::message::{Request, Response};

/// One line of a recorded conversation.
// Entries are made once per recorded line; boxing the messages would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A request, as recorded.
    Request {
        /// 1-based line number.
        line: usize,
        /// Which stream.
        stream: u64,
        /// The request.
        request: Request,
    },
    /// A response, as recorded.
    Response {
        /// 1-based line number.
        line: usize,
        /// Which stream.
        stream: u64,
        /// The response.
        response: Response,
    },
    /// The server's store changed.
    Store {
        /// 1-based line number.
        line: usize,
        /// The type.
        type_url: String,
        /// The resource.
        name: String,
        /// Its version after a set; `None` for a removal.
        version: Option<String>,
    },
}

impl Entry {
    /// Its 1-based line number.
    pub fn line(&self) -> usize {
        match self {
            Entry::Request { line, .. }
            | Entry::Response { line, .. }
            | Entry::Store { line, .. } => *line,
        }
    }
}
