//! The scenario language: the protocol text's sequence-diagram notation, made executable.
//!
//! A scenario file (`*.xds`) is one step per line: headers (`model:` says which side the
//! crate's state machines play), messages in the notation of the xDS protocol text,
//! application commands, time, stream breaks and expectations:
//!
//! ```text
//! title: Simple ACK
//! model: both
//! variant: sotw
//!
//! client subscribe EDS foo bar
//! server set EDS foo:a bar:b
//! C->S (V=,R={foo,bar},N=,T=EDS)
//! S->C (V=X,R={foo:a,bar:b},N=A,T=EDS)
//! C->S (V=X,R={foo,bar},N=A,T=EDS) [ack]
//! expect client cache EDS {foo@X:a,bar@X:b}
//! ```
//!
//! [`parse`] reads a file into a [`Scenario`] (errors name the line); [`run`] replays it
//! through the model on a simulated stream and reports every line ([`Report`], with each
//! side's view of the conversation for the checker); [`diagram`] draws a report.
//!
//! The language is documented once, for implementers of any language, in the reference
//! page `docs/scenario-language.md` of the repository: every header, step, message field,
//! command, expectation and option, each with an example that `tests/docs_examples.rs`
//! replays, and how to write a scenario for one's own implementation.

mod ast;
mod diagram;
pub mod generate;
mod parse;
mod run;

/// The notation the runner draws with; it lives in [`crate::transcript::notation`], where the
/// test harnesses use it without the scenario language.
pub use crate::transcript::notation as render;

pub use ast::*;
pub use diagram::diagram;
pub use parse::{parse, parse_duration, resolve_type, ScriptError};
pub use run::{
    run, run_against, server_timeline, ErrorOp, LineKind, LineReport, Refused, Remote, Report,
    ServerStep, Transcriber, Wire,
};

#[cfg(test)]
mod tests;
