//! The scenario language: the seeds' sequence-diagram notation, made executable.
//!
//! A scenario file (`*.xds`) is one step per line; `#` starts a comment. Headers come
//! first:
//!
//! ```text
//! title: Simple ACK
//! model: client          # which side the model plays: client, server or both
//! variant: sotw          # sotw or delta
//! transport: ads         # ads, or one type (EDS) for a per-type stream
//! option: key=value      # settings of the model, e.g. dne-timeout=15s
//! ```
//!
//! Steps:
//!
//! ```text
//! C->S (V=,R={foo,bar},N=,T=EDS)              # SotW request; E="text" or E=* for a NACK
//! S->C (V=X,R={foo:a,bar:b},N=A,T=EDS)        # SotW response; resources name[@version][:tag]
//! C->S (T=CDS,S={foo},U={bar},I={foo@1},N=A)  # delta request
//! S->C (V=1,R={foo@1:a[ttl=30s]},X={bar},N=B,T=CDS)  # delta response, X = removed
//! S->C (V=2,R={a},N=C,T=EDS,F={b@NOT_FOUND})  # F = resource_errors, name@CODE (both variants)
//! client subscribe EDS foo bar                # no names: legacy wildcard (LDS, CDS)
//! client unsubscribe EDS bar                  # also: defer, accept, reject
//! client subscribe CDS b ; unsubscribe CDS b   # one line: runs before the client is polled
//! server set EDS foo:a bar@7:b                # also: remove EDS foo
//! wait 15s
//! disconnect
//! connect
//! expect client event upserted EDS foo version=X
//! expect client cache EDS {foo@X,bar@X}
//! expect client status EDS baz does-not-exist
//! expect server quiet
//! ```
//!
//! Types are short names (LDS, RDS, SRDS, VHDS, CDS, EDS, SDS, RTDS), `v2:CDS`, or a full
//! type URL. `node=ID` on a request gives its node (`node=-`: none; by default the first
//! request of a stream the scenario writes carries node `client`). Names with `@ : [ ] , { } ( )`, spaces or `#` are written in quotes.
//! Resource attributes: `[ttl=30s]`, `[alias=a]`, `[type=CDS]` (the body's `Any` type, for
//! mismatches), `[nobody]` (no body: a heartbeat or a
//! does-not-exist marker), `[wrapped]` (SotW: wrap in `Resource`). A tag stands for a
//! body: the same tag is the same body, so "unchanged" and "changed" are expressible.
//!
//! `F=` codes are `UNKNOWN`, `NOT_FOUND`, `PERMISSION_DENIED`, `INTERNAL`, `UNAVAILABLE` or
//! a number; an `F=` left out of a response the model sends is not checked, like any field.
//! Option `sotw-not-found-errors=true` turns on [`crate::server::ServerConfig::sotw_not_found_errors`];
//! `server-encoded=true` drains the server with `poll_response_encoded` and decodes what it
//! sends (the test suite runs every server scenario both ways).
//!
//! Scalars in messages (versions, nonces) are symbols. When the model produces a value, a
//! symbol seen for the first time is bound to it and must match it from then on, so
//! `N=A` means "the nonce the server chose, the first time", and the same `A` later means
//! that same nonce. A field left out is not checked; `V=` checks for empty.

mod ast;
mod parse;
mod run;

/// The notation the runner draws with; it lives in [`crate::transcript::notation`], where the
/// test harnesses use it without the scenario language.
pub use crate::transcript::notation as render;

pub use ast::*;
pub use parse::{parse, parse_duration, resolve_type, ScriptError};
pub use run::{run, LineKind, LineReport, Report};

#[cfg(test)]
mod tests;
