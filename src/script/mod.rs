//! The scenario language: the protocol text's sequence-diagram notation, made executable.
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
//! S->C (V=3,R={a},N=D,T=EDS,CP=cp1)           # CP = control_plane.identifier (CP=-: none)
//! S->C (V=4,R={a:x},N=E,T=EDS) ; S->C (V=5,R={a:y},N=F,T=EDS)  # both reach the client
//!                                             # before it is polled: one ACK may answer both
//! client subscribe EDS foo bar                # no names: legacy wildcard (LDS, CDS)
//! client unsubscribe EDS bar                  # also: defer, accept, reject
//! client subscribe CDS b ; unsubscribe CDS b   # one line: runs before the client is polled
//! server set EDS foo:a bar@7:b                # also: remove EDS foo
//! server publish CDS                          # the type exists, even with no resources
//! server set EDS a:x ; remove EDS b ; publish LDS  # one line: one store revision
//! wait 15s
//! disconnect
//! connect
//! expect client event upserted EDS foo version=X
//! expect client cache EDS {foo@X,bar@X}
//! expect client status EDS baz does-not-exist
//! expect client control-plane EDS cp-1         # control_plane.identifier kept (- : none)
//! expect server quiet
//! ```
//!
//! Types are short names (LDS, RDS, SRDS, VHDS, CDS, EDS, SDS, RTDS, ECDS), `v2:CDS`, or a full
//! type URL; `T=-` is an empty `type_url`, which a per-type stream allows (it stands for
//! the stream's type: `C->S (V=,R={a},N=,T=-)` on `transport: EDS`). `node=ID` on a request
//! gives its node (`node=-`: none; by default the first request of a stream the scenario
//! writes carries node `client`); on a request the model sends, `node=ID` checks the node
//! and `node=-` checks that there is none.
//!
//! Names with `@ : [ ] , { } ( ) = & ;`, spaces or `#` are written in quotes, in messages,
//! commands, expectations and store commands alike; in quotes a backslash takes the next
//! character as it is (`\"`, `\\`). A quoted word is always a name, never a `key=value`
//! detail:
//!
//! ```text
//! client subscribe CDS "xdstp://auth/envoy.config.cluster.v3.Cluster/a?k=v&j=w"
//! server set CDS "xdstp://auth/envoy.config.cluster.v3.Cluster/a?k=v&j=w"@1:x
//! expect client event upserted CDS "xdstp://auth/envoy.config.cluster.v3.Cluster/a?k=v&j=w" version=1
//! ```
//!
//! Resource attributes: `[ttl=30s]`, `[alias=a]`, `[type=CDS]` (the body's `Any` type, for
//! mismatches), `[ref=RDS:r1]` (repeatable: the body is a real message of its type that
//! names `r1`, see below), `[nobody]` (no body: a heartbeat or a does-not-exist marker), `[wrapped]`
//! (SotW: wrapped in `Resource`), `[unwrapped]` (SotW: not wrapped). A SotW resource the
//! scenario builds is wrapped when it says `[wrapped]`, a TTL or `[nobody]`; in a SotW
//! response the model sends, `[wrapped]` (or a TTL) and `[unwrapped]` are checked. A tag
//! stands for a body: the same tag is the same body, so "unchanged" and "changed" are
//! expressible.
//!
//! `F=` codes are `UNKNOWN`, `NOT_FOUND`, `PERMISSION_DENIED`, `INTERNAL`, `UNAVAILABLE` or
//! a number; an `F=` left out of a response the model sends is not checked, like any field.
//! `E="text"` matches an `error_detail` whose message contains the text, `E=="text"` one
//! whose message is exactly the text, `E=*` any; without `E=` a request must carry none.
//!
//! Options: `dne-timeout=15s|off`, `nack-policy=reject-all|keep-valid`,
//! `node-on-every-request`, `sotw-refetch-on-ttl-expiry`, `sticky-legacy-wildcard`,
//! `sotw-not-found-errors` (booleans, `true` or `false`; see [`Options`]),
//! `not-found=removed|bodyless`, `deps-grace=30s` (the dependency manager's grace), and
//! `server-encoded=true`, which drains the server with `poll_response_encoded` and decodes
//! what it sends (the test suite runs every server scenario both ways). An unknown option or
//! a bad value is an error of its line.
//!
//! Scalars in messages (versions, nonces) are symbols. When the model produces a value, a
//! symbol seen for the first time is bound to it and must match it from then on, so
//! `N=A` means "the nonce the server chose, the first time", and the same `A` later means
//! that same nonce. A field left out is not checked; `V=` checks for empty. `N=^` on a
//! request is the nonce of the latest response of its type the client received on this
//! stream, without naming it: built, the request echoes it; sent by the model, the request
//! must echo it.
//!
//! Expectations on events:
//!
//! ```text
//! expect client event acked EDS version=X nonce=A   # consumes the first matching event
//! expect server event acked CDS version=X nonce=A   # also nacked; stale takes nonce=
//! expect server event subscribed CDS a
//! expect server event protocol-error node-changed   # node-missing, type-url-missing,
//!                                                   # wrong-type-url, wrong-variant,
//!                                                   # limit-exceeded; the name may be left out
//! expect server event ignored CDS late-initial-resource-versions  # or error-without-response
//! expect client no-event upserted EDS a             # among events no line consumed, however old
//! expect client no-new-event upserted EDS a         # among every event since the client's
//!                                                   # last input, consumed or not
//! ```
//!
//! A side's inputs are, for the client, responses and client commands; for the server,
//! requests and store commands; for both, `wait`, `disconnect`, `connect` and `sends`. A
//! `C->S` line of a model client only checks what it sent, so after
//! `S->C (..)` and the client's `C->S (..)` answer, `no-new-event` still looks at what the
//! response did.
//!
//! The dependency manager ([`crate::client::deps`]) follows the references in resource
//! bodies. A body names what its `[ref=TYPE:name]` attributes say: a listener its route
//! configurations (RDS), a route configuration its clusters (CDS), a cluster its endpoints
//! (EDS: the service name), its aggregate members (CDS) and its secrets (SDS). In a
//! scenario with `deps` steps, every listener, route configuration and cluster body is such
//! a message (with or without references). The first `deps` step creates the manager,
//! which from then on takes every client event and gives the client its subscriptions, so
//! they are the next `C->S` lines; `option: deps-grace=10s` sets how long a name no longer
//! referenced stays subscribed.
//!
//! ```text
//! server set LDS l[ref=RDS:r] ; set RDS r[ref=CDS:a][ref=CDS:b] ; set CDS a[ref=EDS:a]
//! deps watch l                        # gRPC's shape (deps unwatch l); deps watch-all: Envoy's
//! expect deps waiting {CDS:b,EDS:a}   # exactly what the configuration waits for ({}: nothing)
//! expect deps snapshot                # consumes the oldest complete configuration not consumed
//! expect deps no-snapshot             # none left to consume
//! expect deps listener l ok           # or: error "text" (the failure's message contains it)
//! expect deps cluster l agg {b,c}     # the leaf clusters, in order; or: error "reaches itself"
//! ```
//!
//! What a server may send at any time (TTL heartbeats before expiry) is expected over a
//! period: time passes by the period, every response the server sends meanwhile must match
//! the message (at least one must come), and each is delivered to the client as it is sent.
//! Leave out what changes from one to the next (the nonce), and answer the latest with
//! `N=^`:
//!
//! ```text
//! expect server sends (R={a@1[nobody][ttl=10s]},T=CDS) within 12s
//! C->S (T=CDS,N=^) [ack]
//! ```

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
