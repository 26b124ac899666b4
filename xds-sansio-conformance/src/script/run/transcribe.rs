//! Writing a scenario while the model plays it: the generator (`script::generate`) gives
//! the lines of the side it plays, and every message the model's side sends in reply
//! becomes a line of its own, matched at once, so the text replays on the model by
//! construction.
//!
//! Decisions:
//! - **A line is kept only if it runs.** [`Transcriber::line`] parses and runs the line
//!   on the model first; a line that does not parse, or fails (a subscription the client
//!   refuses), is left out and reported, so a generator never writes a scenario that fails
//!   on the model.
//! - **What the side under test sends is written as far as the protocol fixes it.** The
//!   client's requests in full (version, names, nonce, and `E=*` for a NACK: the protocol
//!   fixes that there is an error detail, not its words); the server's responses by their
//!   contents (names, bodies, removals, TTLs, aliases, resource errors), not by the version
//!   and nonce strings a server chooses, nor by the per-resource versions of delta, which
//!   need only change when the resource does (xDS protocol, "Incremental xDS").
//! - **The other side's replies are loose.** When both sides are modeled (a conversation
//!   for a real server), the model's client's requests are written by their names, type
//!   and NACK only: the runner builds the real request from the model's client, which has
//!   seen the real server's versions and nonces.

use alloc::collections::BTreeSet;
use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::Runner;
use crate::script::ast::{Model, Options, Scenario, Side, TransportSpec};
use crate::script::parse::parse_step;
use crate::transcript::notation;
use xds_sansio::message::{Request, Response};
use xds_sansio::Variant;

/// A scenario written a line at a time while the model replays it.
pub struct Transcriber {
    runner: Runner<'static>,
    /// The side a real implementation will play: what it sends is written as it must be.
    tested: Side,
    header: Vec<String>,
    lines: Vec<String>,
    variant: Variant,
    /// The types the client requested on the stream that is up.
    requested: BTreeSet<String>,
}

/// Why a line was left out of a transcript.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The line.
    pub line: String,
    /// Why (the parser's or the runner's words).
    pub reason: String,
}

impl Transcriber {
    /// A new transcript (the model with its default options): `tested` is the side a real implementation will play (`Client`:
    /// `model: client`, the scenario plays the server; `Server`: `model: both`, the model's
    /// client talks to the real server).
    pub fn new(
        title: &str,
        tested: Side,
        variant: Variant,
        transport: TransportSpec,
    ) -> Transcriber {
        let model = match tested {
            Side::Client => Model::Client,
            Side::Server => Model::Both,
        };
        let scenario = Scenario {
            title: title.into(),
            model,
            variant,
            transport: transport.clone(),
            options: Options::default(),
            steps: Vec::new(),
            session: Default::default(),
        };
        let mut header = Vec::new();
        header.push(format!("title: {title}"));
        header.push(
            match model {
                Model::Client => "model: client",
                _ => "model: both",
            }
            .into(),
        );
        header.push(
            match variant {
                Variant::Sotw => "variant: sotw",
                Variant::Delta => "variant: delta",
            }
            .into(),
        );
        header.push(match &transport {
            TransportSpec::Ads => "transport: ads".into(),
            TransportSpec::PerType(url) => format!("transport: {}", notation::type_name(url)),
        });
        Transcriber {
            runner: Runner::new(&scenario, None),
            tested,
            header,
            lines: Vec::new(),
            variant,
            requested: BTreeSet::new(),
        }
    }

    /// Runs a line of the side the generator plays and keeps it, then writes what the
    /// model's side sends in reply; a line that does not parse or fails is left out.
    pub fn line(&mut self, text: &str) -> Result<(), Refused> {
        self.run(text)?;
        self.settle();
        Ok(())
    }

    /// Whether the client has requested a type on the stream that is up (a server speaks
    /// of a type only once asked).
    pub fn requested(&self, type_url: &str) -> bool {
        self.requested.contains(type_url)
    }

    /// Whether the model's client holds a resource (a following client subscribes to
    /// what a held resource refers to).
    pub fn client_holds(&self, type_url: &str, name: &str) -> bool {
        self.runner
            .sim
            .client
            .as_ref()
            .is_some_and(|c| c.resource(type_url, name).is_some())
    }

    /// The types whose latest response awaits the application's verdict (`client defer`).
    pub fn awaiting_verdict(&self) -> Vec<String> {
        self.runner.tickets.keys().cloned().collect()
    }

    /// The scenario's text.
    pub fn text(&self) -> String {
        let mut text = self.header.join("\n");
        text.push_str("\n\n");
        for line in &self.lines {
            text.push_str(line);
            text.push('\n');
        }
        text
    }

    fn run(&mut self, text: &str) -> Result<(), Refused> {
        let refused = |reason: String| Refused {
            line: text.into(),
            reason,
        };
        let number = self.header.len() + 2 + self.lines.len();
        let action = parse_step(text, number, self.variant).map_err(|e| refused(e.message))?;
        if let (_, Err(e)) = self.runner.step(&action) {
            return Err(refused(e));
        }
        if matches!(action, crate::script::ast::Action::Connect) {
            self.requested.clear();
        }
        self.lines.push(text.into());
        Ok(())
    }

    /// Writes every message the model's side has in flight as a line, requests first,
    /// until neither side has anything more to say.
    fn settle(&mut self) {
        // Each line consumes one message; a side that answered forever would be a bug of
        // the model, which the bound turns into a scenario that fails instead of a hang.
        for _ in 0..256 {
            self.runner.sim.drain();
            let line = if let Some(request) = self.runner.sim.requests().next() {
                self.requested
                    .insert(self.effective_type(request.type_url()).to_string());
                format!("C->S {}", self.request_line(request))
            } else if let Some(response) = self.runner.sim.responses().next() {
                format!("S->C {}", self.response_line(response))
            } else {
                return;
            };
            if let Err(refused) = self.run(&line) {
                // Kept with the reason: the scenario then fails on the model, and the
                // generator's tests say which line the transcriber could not write.
                self.lines.push(format!("{line}  # {}", refused.reason));
                return;
            }
        }
    }

    fn effective_type<'a>(&'a self, type_url: &'a str) -> &'a str {
        self.runner.effective_type(type_url)
    }

    fn request_line(&self, request: &Request) -> String {
        let nack = match request {
            Request::Sotw(r) => r.error_detail.is_some(),
            Request::Delta(r) => r.error_detail.is_some(),
        };
        let error = if nack { ",E=*" } else { "" };
        if self.tested == Side::Client {
            // Every field but the error's words.
            let mut plain = request.clone();
            match &mut plain {
                Request::Sotw(r) => r.error_detail = None,
                Request::Delta(r) => r.error_detail = None,
            }
            let text = notation::request(&plain);
            let body = text.strip_suffix(')').unwrap_or(&text);
            return format!("{body}{error})");
        }
        let names = |names: &[String]| notation::set(names.iter().map(String::as_str));
        match request {
            Request::Sotw(r) => format!(
                "(R={},T={}{error})",
                names(&r.resource_names),
                notation::type_name(self.effective_type(&r.type_url))
            ),
            Request::Delta(r) => format!(
                "(T={},S={},U={}{error})",
                notation::type_name(self.effective_type(&r.type_url)),
                names(&r.resource_names_subscribe),
                names(&r.resource_names_unsubscribe)
            ),
        }
    }

    fn response_line(&self, response: &Response) -> String {
        if self.tested == Side::Server {
            notation::response_contents(response)
        } else {
            notation::response(response)
        }
    }
}
