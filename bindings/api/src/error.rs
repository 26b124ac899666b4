//! The one error type of the bindings: what went wrong, and the line when input has lines.

use serde::Serialize;

/// What kind of input or call failed; each language maps it to its own error type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// A recorded conversation does not parse (the line says where).
    Record,
    /// A scenario does not parse (the line says where).
    Scenario,
    /// Resources, descriptors or a message body cannot be read.
    Resources,
    /// An encoded message does not decode.
    Message,
    /// A call the object does not offer, or arguments of the wrong shape.
    Usage,
    /// The operating system refused (a port, a file).
    Io,
    /// The native side failed unexpectedly (a panic caught at the boundary).
    Internal,
}

/// An error for the calling language: never a crash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Error {
    /// What kind of failure.
    pub kind: ErrorKind,
    /// The 1-based line of the input, when the input has lines.
    pub line: Option<usize>,
    /// What was expected, or what went wrong.
    pub message: String,
}

impl Error {
    /// An error without a line.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            line: None,
            message: message.into(),
        }
    }

    /// An error at `line` (0 means the input as a whole, so no line).
    pub fn at(kind: ErrorKind, line: usize, message: impl Into<String>) -> Error {
        Error {
            kind,
            line: (line > 0).then_some(line),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}
