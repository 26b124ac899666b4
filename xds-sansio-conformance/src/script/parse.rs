//! The scenario parser: one step per line, errors name the line and what was expected.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use super::ast::*;
use crate::transcript::notation;
use xds_sansio::client::session::StreamEnd;
use xds_sansio::client::{DataErrors, EventShape, NackPolicy};
use xds_sansio::message::Variant;
use xds_sansio::server::NotFoundReporting;
use xds_sansio::types::{ApiVersion, ResourceType};

/// A scenario that could not be parsed (or run): the line and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    /// The 1-based line number (0 for the file as a whole).
    pub line: usize,
    /// What was expected, or what went wrong.
    pub message: String,
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for ScriptError {}

fn error(line: usize, message: impl Into<String>) -> ScriptError {
    ScriptError {
        line,
        message: message.into(),
    }
}

/// Removes a `#` comment: a `#` at the start or after white space, outside quotes.
fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    let mut previous = ' ';
    for (at, ch) in line.char_indices() {
        match ch {
            // An escaped character in quotes neither ends them nor starts a comment.
            _ if in_quotes && previous == '\\' => {
                previous = ' ';
                continue;
            }
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes && previous.is_whitespace() => return line.get(..at).unwrap_or(line),
            _ => {}
        }
        previous = ch;
    }
    line
}

/// Resolves a type token: a short name (`CDS`), `v2:CDS`, or a full type URL.
pub fn resolve_type(token: &str) -> Option<String> {
    if token.contains('/') {
        return Some(token.into());
    }
    let version = if token.len() > 3
        && token
            .get(..3)
            .is_some_and(|p| p.eq_ignore_ascii_case("v2:"))
    {
        ApiVersion::V2
    } else {
        ApiVersion::V3
    };
    ResourceType::by_short_name(token).map(|t| t.type_url_for(version).into())
}

/// Parses a duration: `15s`, `500ms`, `1.5s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let scale: f64 = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    if !value.is_finite() || value < 0.0 {
        return None;
    }
    let nanos = value * scale * 1e9;
    if nanos > u64::MAX as f64 {
        return None;
    }
    Some(Duration::from_nanos(nanos as u64))
}

/// A cursor over one line.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
    line: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        self.text.get(self.at..).unwrap_or("")
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start().len();
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn eat(&mut self, ch: char) -> bool {
        self.skip_ws();
        if self.peek() == Some(ch) {
            self.at += ch.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, ch: char, context: &str) -> Result<(), ScriptError> {
        if self.eat(ch) {
            Ok(())
        } else {
            Err(self.error(format!("expected '{ch}' {context}")))
        }
    }

    fn error(&self, message: String) -> ScriptError {
        let found = match self.peek() {
            Some(c) => format!("'{c}' (column {})", self.at + 1),
            None => "the end of the line".into(),
        };
        error(self.line, format!("{message}, found {found}"))
    }

    /// A quoted string or a bare token ending at white space or one of `stops`.
    fn token(&mut self, stops: &str) -> Result<String, ScriptError> {
        Ok(self.quoted_token(stops)?.0)
    }

    /// A token, and whether it was quoted (a quoted `a=b` is a name, not a detail). In
    /// quotes, a backslash takes the next character as it is (`\"`, `\\`).
    fn quoted_token(&mut self, stops: &str) -> Result<(String, bool), ScriptError> {
        self.skip_ws();
        if self.peek() == Some('"') {
            self.at += 1;
            let mut value = String::new();
            let mut chars = self.rest().char_indices();
            loop {
                match chars.next() {
                    Some((end, '"')) => {
                        self.at += end + 1;
                        return Ok((value, true));
                    }
                    Some((_, '\\')) => match chars.next() {
                        Some((_, escaped)) => value.push(escaped),
                        None => break,
                    },
                    Some((_, ch)) => value.push(ch),
                    None => break,
                }
            }
            return Err(error(self.line, "unterminated quoted string"));
        }
        let rest = self.rest();
        let end = rest
            .find(|c: char| c.is_whitespace() || stops.contains(c))
            .unwrap_or(rest.len());
        self.at += end;
        Ok((rest.get(..end).unwrap_or("").to_string(), false))
    }

    fn word(&mut self, what: &str) -> Result<String, ScriptError> {
        let word = self.token("")?;
        if word.is_empty() {
            Err(self.error(format!("expected {what}")))
        } else {
            Ok(word)
        }
    }

    fn type_url(&mut self) -> Result<String, ScriptError> {
        let word =
            self.word("a type (LDS, RDS, SRDS, VHDS, CDS, EDS, SDS, RTDS, v2:CDS, or a type URL)")?;
        resolve_type(&word).ok_or_else(|| error(self.line, format!("unknown type {word:?}")))
    }

    /// A type, if the next word is one; otherwise nothing is read.
    fn optional_type_url(&mut self) -> Result<Option<String>, ScriptError> {
        let start = self.at;
        let word = self.token(";")?;
        let type_url = resolve_type(&word);
        if type_url.is_none() {
            self.at = start;
        }
        Ok(type_url)
    }

    /// Words up to the end of the line or a `;` that separates commands.
    fn words(&mut self) -> Result<Vec<String>, ScriptError> {
        Ok(self
            .quoted_words()?
            .into_iter()
            .map(|(word, _)| word)
            .collect())
    }

    /// Words up to the end of the line or a `;`, each with whether it was quoted.
    fn quoted_words(&mut self) -> Result<Vec<(String, bool)>, ScriptError> {
        let mut words = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(';') || self.rest().is_empty() {
                return Ok(words);
            }
            words.push(self.quoted_token(";")?);
        }
    }

    fn end(&mut self) -> Result<(), ScriptError> {
        self.skip_ws();
        if self.rest().is_empty() {
            Ok(())
        } else {
            Err(self.error("expected the end of the line".into()))
        }
    }

    /// `name[@version][:tag][attr]...`
    fn item(&mut self) -> Result<Item, ScriptError> {
        let name = self.token("@:[,};")?;
        if name.is_empty() {
            return Err(self.error("expected a resource name".into()));
        }
        let mut item = Item {
            name,
            ..Item::default()
        };
        if self.peek() == Some('@') {
            self.at += 1;
            item.version = Some(self.token(":[,};")?);
        }
        if self.peek() == Some(':') {
            self.at += 1;
            item.tag = Some(self.token("[,};")?);
        }
        while self.peek() == Some('[') {
            self.at += 1;
            let key = self.token("=]")?;
            let value = if self.peek() == Some('=') {
                self.at += 1;
                Some(self.token("]")?)
            } else {
                None
            };
            self.expect(']', "to close the attribute")?;
            match (key.as_str(), value) {
                ("ttl", Some(v)) => {
                    item.ttl = Some(
                        parse_duration(&v)
                            .ok_or_else(|| error(self.line, format!("bad TTL {v:?}")))?,
                    );
                    item.wrapped = true;
                }
                ("alias", Some(v)) => item.aliases.push(v),
                ("ref", Some(v)) => {
                    let (t, name) = v
                        .split_once(':')
                        .filter(|(_, n)| !n.is_empty())
                        .ok_or_else(|| error(self.line, format!("[ref={v}]: expected TYPE:name")))?;
                    let type_url = resolve_type(t)
                        .ok_or_else(|| error(self.line, format!("unknown type {t:?}")))?;
                    item.refs.push((type_url, name.into()));
                }
                ("nobody", None) => item.no_body = true,
                ("wrapped", None) => item.wrapped = true,
                ("unwrapped", None) => item.unwrapped = true,
                ("type", Some(v)) => {
                    item.any_type = Some(
                        resolve_type(&v)
                            .ok_or_else(|| error(self.line, format!("unknown type {v:?}")))?,
                    )
                }
                (other, _) => {
                    return Err(error(
                        self.line,
                        format!(
                            "unknown attribute [{other}] (expected ttl=, alias=, type=, ref=, nobody, wrapped, unwrapped)"
                        ),
                    ))
                }
            }
        }
        if item.unwrapped && (item.wrapped || item.no_body) {
            return Err(error(
                self.line,
                format!(
                    "{}: [unwrapped] contradicts [wrapped], [ttl=] and [nobody] (SotW needs the wrapper for those)",
                    item.name
                ),
            ));
        }
        Ok(item)
    }

    fn items(&mut self) -> Result<Vec<Item>, ScriptError> {
        self.expect('{', "to open a set")?;
        let mut items = Vec::new();
        if self.eat('}') {
            return Ok(items);
        }
        loop {
            self.skip_ws();
            items.push(self.item()?);
            if self.eat('}') {
                return Ok(items);
            }
            self.expect(',', "or '}' in a set")?;
        }
    }
}

/// The raw `KEY=value` fields of a message, before they are interpreted.
enum Field {
    Scalar(String),
    /// `KEY=="text"`: compared exactly (only `E`).
    Exact(String),
    Set(Vec<Item>),
}

/// Items may say `[unwrapped]` only in a SotW response the model sends.
fn reject_unwrapped(items: &[Item], line: usize) -> Result<(), ScriptError> {
    match items.iter().find(|i| i.unwrapped) {
        Some(item) => Err(error(
            line,
            format!(
                "{}: [unwrapped] describes a resource of a SotW response only",
                item.name
            ),
        )),
        None => Ok(()),
    }
}

fn parse_fields(cursor: &mut Cursor<'_>) -> Result<Vec<(String, Field, usize)>, ScriptError> {
    cursor.expect('(', "to open a message, as in (V=X,R={foo},N=A,T=EDS)")?;
    let mut fields = Vec::new();
    if cursor.eat(')') {
        return Ok(fields);
    }
    loop {
        let key = cursor.token("=,)")?;
        if key.is_empty() {
            return Err(
                cursor.error("expected a field name (V, R, N, T, E, S, U, I, X, node)".into())
            );
        }
        cursor.expect('=', &format!("after {key}"))?;
        cursor.skip_ws();
        let column = cursor.at;
        let value = if cursor.peek() == Some('{') {
            Field::Set(cursor.items()?)
        } else if cursor.peek() == Some('=') {
            cursor.at += 1;
            Field::Exact(cursor.token(",)")?)
        } else {
            Field::Scalar(cursor.token(",)")?)
        };
        fields.push((key, value, column));
        if cursor.eat(')') {
            return Ok(fields);
        }
        cursor.expect(',', "or ')' in a message")?;
    }
}

fn names_of(items: Vec<Item>) -> Vec<String> {
    items.into_iter().map(|i| i.name).collect()
}

fn message(
    cursor: &mut Cursor<'_>,
    direction: Direction,
    variant: Variant,
) -> Result<MessagePattern, ScriptError> {
    let line = cursor.line;
    let fields = parse_fields(cursor)?;
    let allowed: &[&str] = match (direction, variant) {
        (Direction::ClientToServer, Variant::Sotw) => &["V", "R", "N", "T", "E", "node"],
        (Direction::ServerToClient, Variant::Sotw) => &["V", "R", "N", "T", "F", "CP"],
        (Direction::ClientToServer, Variant::Delta) => &["T", "S", "U", "I", "N", "E", "node"],
        (Direction::ServerToClient, Variant::Delta) => &["V", "R", "X", "N", "T", "F", "CP"],
    };
    let mut scalars: Vec<(String, String)> = Vec::new();
    let mut sets: Vec<(String, Vec<Item>)> = Vec::new();
    let mut exact_error = None;
    for (key, value, _) in fields {
        if !allowed.contains(&key.as_str()) {
            return Err(error(
                line,
                format!(
                    "field {key} is not allowed here (allowed: {})",
                    allowed.join(", ")
                ),
            ));
        }
        if scalars.iter().any(|(k, _)| *k == key) || sets.iter().any(|(k, _)| *k == key) {
            return Err(error(line, format!("field {key} appears twice")));
        }
        let wants_set = matches!(key.as_str(), "R" | "S" | "U" | "I" | "X" | "F");
        if exact_error.is_some() && key == "E" {
            return Err(error(line, "field E appears twice"));
        }
        match (value, wants_set) {
            (Field::Exact(text), false) if key == "E" => exact_error = Some(text),
            (Field::Exact(_), _) => {
                return Err(error(
                    line,
                    format!("field {key} takes one =; only E== compares exactly"),
                ))
            }
            (Field::Set(items), true) => sets.push((key, items)),
            (Field::Scalar(text), false) => scalars.push((key, text)),
            (Field::Scalar(_), true) => {
                return Err(error(
                    line,
                    format!("field {key} takes a set, as in {key}={{a,b}}"),
                ))
            }
            (Field::Set(_), false) => {
                return Err(error(
                    line,
                    format!("field {key} takes a single value, not a set"),
                ))
            }
        }
    }
    let mut scalar = |key: &str| {
        scalars
            .iter()
            .position(|(k, _)| k == key)
            .map(|at| scalars.swap_remove(at).1)
    };
    let type_token = scalar("T").ok_or_else(|| error(line, "every message needs T=<type>"))?;
    // `T=-`: an empty type_url, which a per-type stream allows (its type is the stream's).
    let type_url = match type_token.as_str() {
        "-" => String::new(),
        token => {
            resolve_type(token).ok_or_else(|| error(line, format!("unknown type {token:?}")))?
        }
    };
    let version = scalar("V");
    let nonce = scalar("N");
    let node = scalar("node");
    let control_plane = scalar("CP");
    let error_pattern = match (scalar("E"), exact_error) {
        (None, None) => ErrorPattern::Absent,
        (None, Some(text)) => ErrorPattern::Exact(text),
        (Some(text), _) if text == "*" => ErrorPattern::Any,
        (Some(text), _) => ErrorPattern::Contains(text),
    };
    if nonce.as_deref() == Some(LATEST_NONCE) && direction == Direction::ServerToClient {
        return Err(error(
            line,
            format!("N={LATEST_NONCE} (the latest nonce) is for requests"),
        ));
    }
    for (key, items) in &sets {
        if !(key == "R" && direction == Direction::ServerToClient && variant == Variant::Sotw) {
            reject_unwrapped(items, line)?;
        }
    }
    let mut set = |key: &str| {
        sets.iter()
            .position(|(k, _)| k == key)
            .map(|at| sets.swap_remove(at).1)
    };
    Ok(match (direction, variant) {
        (Direction::ClientToServer, Variant::Sotw) => MessagePattern::SotwRequest {
            version,
            names: set("R").map(names_of),
            nonce,
            type_url,
            error: error_pattern,
            node,
        },
        (Direction::ServerToClient, Variant::Sotw) => MessagePattern::SotwResponse {
            version,
            resources: set("R"),
            nonce,
            type_url,
            errors: set("F"),
            control_plane,
        },
        (Direction::ClientToServer, Variant::Delta) => MessagePattern::DeltaRequest {
            type_url,
            subscribe: set("S").map(names_of),
            unsubscribe: set("U").map(names_of),
            initial: set("I"),
            nonce,
            error: error_pattern,
            node,
        },
        (Direction::ServerToClient, Variant::Delta) => MessagePattern::DeltaResponse {
            version,
            resources: set("R"),
            removed: set("X").map(names_of),
            nonce,
            type_url,
            errors: set("F"),
            control_plane,
        },
    })
}

fn tags(cursor: &mut Cursor<'_>) -> Result<Vec<String>, ScriptError> {
    let mut tags = Vec::new();
    while cursor.eat('[') {
        tags.push(cursor.token("]")?);
        cursor.expect(']', "to close the tag")?;
    }
    Ok(tags)
}

fn side(cursor: &mut Cursor<'_>) -> Result<Side, ScriptError> {
    match cursor.word("client or server")?.as_str() {
        "client" => Ok(Side::Client),
        "server" => Ok(Side::Server),
        other => Err(error(
            cursor.line,
            format!("expected client or server, found {other:?}"),
        )),
    }
}

fn expectation(cursor: &mut Cursor<'_>, variant: Variant) -> Result<Action, ScriptError> {
    let side = side(cursor)?;
    let what = cursor.word("event, no-event, no-new-event, cache, status, quiet or sends")?;
    let expectation = match what.as_str() {
        "event" | "no-event" | "no-new-event" => {
            let kind = cursor.word("an event kind")?;
            // A protocol error is about the stream, not a type: the type may be left out,
            // and the error's name takes the place of a resource name
            // (`protocol-error node-changed`).
            let type_url = if kind == "protocol-error" {
                cursor.optional_type_url()?.unwrap_or_default()
            } else {
                cursor.type_url()?
            };
            let mut name = None;
            let mut details = Vec::new();
            for (word, quoted) in cursor.quoted_words()? {
                match word.split_once('=').filter(|_| !quoted) {
                    Some((k, v)) => details.push((k.to_string(), v.to_string())),
                    None if name.is_none() && details.is_empty() => name = Some(word),
                    None => return Err(error(cursor.line, format!("expected key=value, found {word:?}"))),
                }
            }
            if what == "event" {
                Expectation::Event {
                    kind,
                    type_url,
                    name,
                    details,
                }
            } else {
                if !details.is_empty() {
                    return Err(error(cursor.line, format!("{what} takes a kind, a type and a name only")));
                }
                let scope = if what == "no-event" {
                    EventScope::Pending
                } else {
                    EventScope::SinceLastInput
                };
                Expectation::NoEvent {
                    kind,
                    type_url,
                    name,
                    scope,
                }
            }
        }
        "sends" if side == Side::Server => {
            let message = message(cursor, Direction::ServerToClient, variant)?;
            let within = cursor.word("within")?;
            if within != "within" {
                return Err(error(cursor.line, format!("expected within and a period after the message, found {within:?}")));
            }
            let text = cursor.word("a duration such as 10s")?;
            let within = parse_duration(&text)
                .ok_or_else(|| error(cursor.line, format!("bad duration {text:?}")))?;
            Expectation::Sends { message, within }
        }
        "cache" => {
            let type_url = cursor.type_url()?;
            let items = cursor.items()?;
            reject_unwrapped(&items, cursor.line)?;
            Expectation::Cache(type_url, items)
        }
        "status" => {
            let type_url = cursor.type_url()?;
            let name = cursor.word("a resource name")?;
            let status = cursor.word("a status (requested, acked, nacked, does-not-exist, expired, received-error)")?;
            Expectation::Status(type_url, name, status)
        }
        "control-plane" => {
            let type_url = cursor.type_url()?;
            let id = cursor.word("a control plane identifier, or - for none")?;
            Expectation::ControlPlane(type_url, id)
        }
        "quiet" => Expectation::Quiet,
        other => {
            return Err(error(
                cursor.line,
                format!("expected event, no-event, no-new-event, cache, status, control-plane, quiet or (server) sends after expect {side:?}, found {other:?}"),
            ))
        }
    };
    Ok(Action::Expect(side, expectation))
}

fn client_command(cursor: &mut Cursor<'_>) -> Result<ClientCommand, ScriptError> {
    let verb = cursor.word("subscribe, unsubscribe, defer, accept or reject")?;
    let type_url = cursor.type_url()?;
    Ok(match verb.as_str() {
        "subscribe" | "unsubscribe" => {
            // `subscribe LDS` with no names is the legacy wildcard.
            let names = cursor.words()?;
            if names.is_empty() && verb == "unsubscribe" {
                return Err(error(cursor.line, "unsubscribe needs at least one name"));
            }
            if verb == "subscribe" {
                ClientCommand::Subscribe(type_url, names)
            } else {
                ClientCommand::Unsubscribe(type_url, names)
            }
        }
        "defer" => ClientCommand::Defer(type_url),
        "accept" => ClientCommand::Accept(type_url),
        "reject" => {
            let mut words = cursor.words()?;
            let reason = match words.len() {
                0 => "rejected".into(),
                _ => words.remove(words.len() - 1),
            };
            ClientCommand::Reject(type_url, words, reason)
        }
        other => {
            return Err(error(
                cursor.line,
                format!("unknown client command {other:?}"),
            ))
        }
    })
}

fn server_command(cursor: &mut Cursor<'_>) -> Result<ServerCommand, ScriptError> {
    let verb = cursor.word("set, remove, publish, error or clear-error")?;
    let type_url = cursor.type_url()?;
    match verb.as_str() {
        "set" => {
            let mut items = Vec::new();
            loop {
                cursor.skip_ws();
                if cursor.rest().is_empty() || cursor.peek() == Some(';') {
                    break;
                }
                items.push(cursor.item()?);
            }
            if items.is_empty() {
                return Err(error(cursor.line, "set needs at least one resource"));
            }
            reject_unwrapped(&items, cursor.line)?;
            Ok(ServerCommand::Set(type_url, items))
        }
        "remove" => Ok(ServerCommand::Remove(type_url, cursor.words()?)),
        "publish" => Ok(ServerCommand::Publish(type_url)),
        "error" => {
            let name = cursor.word("a resource name or *")?;
            let code_text =
                cursor.word("a status code (NOT_FOUND, UNAVAILABLE, ... or a number)")?;
            let code = notation::code_of(&code_text)
                .ok_or_else(|| error(cursor.line, format!("unknown status code {code_text:?}")))?;
            let mut rest = cursor.words()?;
            if rest.len() > 1 {
                return Err(error(cursor.line, "error takes one message (quote it)"));
            }
            let message = rest.pop().unwrap_or(code_text);
            Ok(ServerCommand::Error {
                type_url,
                name,
                code,
                message,
            })
        }
        "clear-error" => {
            let name = cursor.word("a resource name or *")?;
            if !cursor.words()?.is_empty() {
                return Err(error(cursor.line, "clear-error takes one name"));
            }
            Ok(ServerCommand::ClearError(type_url, name))
        }
        other => Err(error(
            cursor.line,
            format!("unknown server command {other:?}"),
        )),
    }
}

fn deps_command(cursor: &mut Cursor<'_>) -> Result<DepsCommand, ScriptError> {
    let verb = cursor.word("watch, unwatch or watch-all")?;
    match verb.as_str() {
        "watch" | "unwatch" => {
            let names = cursor.words()?;
            if names.is_empty() {
                return Err(error(
                    cursor.line,
                    format!("deps {verb} needs at least one listener"),
                ));
            }
            Ok(if verb == "watch" {
                DepsCommand::Watch(names)
            } else {
                DepsCommand::Unwatch(names)
            })
        }
        "watch-all" => Ok(DepsCommand::WatchAll),
        other => Err(error(
            cursor.line,
            format!("unknown deps command {other:?}"),
        )),
    }
}

/// `ok`, `{a,b}` or `error "text"`.
fn outcome(cursor: &mut Cursor<'_>, listener: bool) -> Result<Outcome, ScriptError> {
    cursor.skip_ws();
    if !listener && cursor.peek() == Some('{') {
        return Ok(Outcome::Ok(names_of(cursor.items()?)));
    }
    let word = cursor.word("ok, {leaves} or error")?;
    match word.as_str() {
        "ok" if listener => Ok(Outcome::Ok(Vec::new())),
        "error" => {
            let (text, _) = cursor.quoted_token("")?;
            Ok(Outcome::Error(text))
        }
        other => Err(error(
            cursor.line,
            format!("expected ok, {{leaves}} or error \"text\", found {other:?}"),
        )),
    }
}

fn deps_expectation(cursor: &mut Cursor<'_>) -> Result<DepsExpectation, ScriptError> {
    let what = cursor.word("snapshot, no-snapshot, waiting, listener or cluster")?;
    Ok(match what.as_str() {
        "snapshot" => DepsExpectation::Snapshot,
        "no-snapshot" => DepsExpectation::NoSnapshot,
        "waiting" => {
            let mut keys = Vec::new();
            for item in cursor.items()? {
                let type_url = resolve_type(&item.name)
                    .ok_or_else(|| error(cursor.line, format!("unknown type {:?}", item.name)))?;
                let name = item
                    .tag
                    .ok_or_else(|| error(cursor.line, "expected TYPE:name in waiting"))?;
                keys.push((type_url, name));
            }
            DepsExpectation::Waiting(keys)
        }
        "listener" => {
            let name = cursor.word("a listener name")?;
            DepsExpectation::Listener(name, outcome(cursor, true)?)
        }
        "cluster" => {
            let listener = cursor.word("a listener name")?;
            let cluster = cursor.word("a cluster name")?;
            DepsExpectation::Cluster(listener, cluster, outcome(cursor, false)?)
        }
        other => {
            return Err(error(
                cursor.line,
                format!("expected snapshot, no-snapshot, waiting, listener or cluster after expect deps, found {other:?}"),
            ))
        }
    })
}

fn watch_id(cursor: &mut Cursor<'_>) -> Result<u64, ScriptError> {
    let word = cursor.word("a watch id")?;
    word.parse()
        .map_err(|_| error(cursor.line, format!("a watch id is a number, not {word:?}")))
}

fn session_command(cursor: &mut Cursor<'_>) -> Result<SessionStep, ScriptError> {
    match cursor.word("watch or unwatch")?.as_str() {
        "watch" => {
            let id = watch_id(cursor)?;
            let type_url = cursor.type_url()?;
            let name = cursor.word("a resource name, or *")?;
            Ok(SessionStep::Watch {
                id,
                type_url,
                name: (name != "*").then_some(name),
            })
        }
        "unwatch" => Ok(SessionStep::Unwatch(watch_id(cursor)?)),
        other => Err(error(
            cursor.line,
            format!("expected watch or unwatch after session, found {other:?}"),
        )),
    }
}

fn session_expectation(cursor: &mut Cursor<'_>) -> Result<SessionExpectation, ScriptError> {
    let what = cursor.word(
        "connect, close, no-connect, event, no-event, watch, no-watch-event, in-use or quiet",
    )?;
    Ok(match what.as_str() {
        "connect" => SessionExpectation::Connect(cursor.word("a server")?),
        "close" => SessionExpectation::Close(cursor.word("a server")?),
        "no-connect" => SessionExpectation::NoConnect,
        "event" => {
            let kind = cursor.word("an event kind")?;
            SessionExpectation::Event(kind, cursor.words()?)
        }
        "no-event" => SessionExpectation::NoEvent(cursor.word("an event kind")?),
        "watch" => {
            let id = watch_id(cursor)?;
            let kind = cursor.word("changed, does-not-exist, unreachable, rejected or server-error")?;
            let mut name = None;
            let mut details = Vec::new();
            for word in cursor.words()? {
                match word.split_once('=') {
                    Some((k, v)) => details.push((k.to_string(), v.to_string())),
                    None if name.is_none() && details.is_empty() => name = Some(word),
                    None => return Err(error(cursor.line, format!("expected key=value, found {word:?}"))),
                }
            }
            SessionExpectation::Watch { id, kind, name, details }
        }
        "no-watch-event" => SessionExpectation::NoWatchEvent(watch_id(cursor)?),
        "in-use" => {
            let authority = cursor.word("an authority, or - for the top-level servers")?;
            let servers = cursor.items()?.into_iter().map(|i| i.name).collect();
            SessionExpectation::InUse(authority, servers)
        }
        "quiet" => SessionExpectation::Quiet,
        other => {
            return Err(error(
                cursor.line,
                format!("expected connect, close, no-connect, event, no-event, watch, no-watch-event, in-use or quiet after expect session, found {other:?}"),
            ))
        }
    })
}

/// `a C->S (..)` or `a S->C (..)` of a `model: session` scenario, `server` read already.
fn server_message(
    cursor: &mut Cursor<'_>,
    server: String,
    variant: Variant,
) -> Result<Action, ScriptError> {
    let direction = match cursor.word("C->S or S->C")?.as_str() {
        "C->S" => Direction::ClientToServer,
        "S->C" => Direction::ServerToClient,
        other => {
            return Err(error(
                cursor.line,
                format!("expected C->S or S->C after server {server:?}, found {other:?}"),
            ))
        }
    };
    let message = message(cursor, direction, variant)?;
    cursor.end()?;
    Ok(Action::Session(SessionStep::Message {
        server,
        direction,
        message,
    }))
}

/// One step line on its own (a comment allowed), for the [`Transcriber`](super::Transcriber),
/// which writes a scenario a line at a time.
pub(crate) fn parse_step(text: &str, line: usize, variant: Variant) -> Result<Action, ScriptError> {
    let mut cursor = Cursor {
        text: strip_comment(text).trim(),
        at: 0,
        line,
    };
    step(&mut cursor, variant)
}

fn step(cursor: &mut Cursor<'_>, variant: Variant) -> Result<Action, ScriptError> {
    let word = cursor.word("a step")?;
    let action = match word.as_str() {
        "C->S" | "S->C" => {
            let direction = if word == "C->S" {
                Direction::ClientToServer
            } else {
                Direction::ServerToClient
            };
            let message = message(cursor, direction, variant)?;
            let tags = tags(cursor)?;
            if direction == Direction::ServerToClient && cursor.eat(';') {
                // Responses that share a line reach the client before it is polled.
                let mut messages = vec![message];
                loop {
                    let next = cursor.word("S->C after ';'")?;
                    if next != "S->C" {
                        return Err(error(
                            cursor.line,
                            format!("only responses share a line: expected S->C after ';', found {next:?}"),
                        ));
                    }
                    messages.push(self::message(cursor, direction, variant)?);
                    self::tags(cursor)?;
                    if !cursor.eat(';') {
                        break;
                    }
                }
                Action::Responses(messages)
            } else {
                Action::Message {
                    direction,
                    message,
                    tags,
                }
            }
        }
        "client" => {
            // Several commands on one line run before the client is polled, so their
            // interest changes merge into one request.
            let mut commands = vec![client_command(cursor)?];
            while cursor.eat(';') {
                commands.push(client_command(cursor)?);
            }
            Action::ClientBatch(commands)
        }
        "server" => {
            let mut commands = vec![server_command(cursor)?];
            while cursor.eat(';') {
                commands.push(server_command(cursor)?);
            }
            Action::ServerBatch(commands)
        }
        "wait" => {
            let text = cursor.word("a duration such as 15s or 500ms")?;
            Action::Wait(
                parse_duration(&text)
                    .ok_or_else(|| error(cursor.line, format!("bad duration {text:?}")))?,
            )
        }
        "disconnect" => Action::Disconnect,
        "connect" => Action::Connect,
        "deps" => Action::Deps(deps_command(cursor)?),
        "expect" if cursor.rest().trim_start().starts_with("deps") => {
            cursor.word("deps")?;
            Action::ExpectDeps(deps_expectation(cursor)?)
        }
        "session" => Action::Session(session_command(cursor)?),
        "up" => Action::Session(SessionStep::Up(cursor.word("a server")?)),
        "down" => {
            let server = cursor.word("a server")?;
            let (first, quoted) = cursor.quoted_token("")?;
            let end = match first.strip_prefix("status=").filter(|_| !quoted) {
                Some(code) => {
                    let code: i32 = code.parse().map_err(|_| {
                        error(cursor.line, format!("bad status {code:?}: a google.rpc.Code number"))
                    })?;
                    let (why, _) = cursor.quoted_token("")?;
                    StreamEnd::status(code, why)
                }
                None => StreamEnd::transport(first),
            };
            Action::Session(SessionStep::Down(server, end))
        }
        "expect" if cursor.rest().trim_start().starts_with("session") => {
            cursor.word("session")?;
            Action::ExpectSession(session_expectation(cursor)?)
        }
        "expect" => expectation(cursor, variant)?,
        other => {
            return Err(error(
                cursor.line,
                format!("unknown step {other:?} (expected C->S, S->C, client, server, deps, session, up, down, wait, disconnect, connect or expect)"),
            ))
        }
    };
    cursor.end()?;
    Ok(action)
}

fn flag(value: &str) -> Option<bool> {
    match value {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Reads one `option: key=value` header into `options`.
fn option(options: &mut Options, key: &str, value: &str) -> Result<(), String> {
    let bad = || format!("bad value {value:?} for option {key}");
    match key {
        "dne-timeout" => {
            options.does_not_exist_timeout = Some(match value {
                "off" => None,
                v => Some(parse_duration(v).ok_or_else(bad)?),
            })
        }
        "nack-policy" => {
            options.nack_policy = Some(match value {
                "reject-all" => NackPolicy::RejectAll,
                "keep-valid" => NackPolicy::KeepValid,
                _ => return Err(bad()),
            })
        }
        "node-on-every-request" => {
            options.node_on_every_request = Some(flag(value).ok_or_else(bad)?)
        }
        "sotw-refetch-on-ttl-expiry" => {
            options.sotw_refetch_on_ttl_expiry = Some(flag(value).ok_or_else(bad)?)
        }
        "ignore-resource-deletion" => {
            options.ignore_resource_deletion = Some(flag(value).ok_or_else(bad)?)
        }
        "data-errors" => {
            options.data_errors = Some(match value {
                "legacy" => DataErrors::Legacy,
                "keep-cached" => DataErrors::KeepCached,
                "fail-on-data-errors" => DataErrors::FailOnDataErrors,
                _ => return Err(bad()),
            })
        }
        "resource-timer-is-transient-error" => {
            options.resource_timer_is_transient_error = Some(flag(value).ok_or_else(bad)?)
        }
        "sticky-legacy-wildcard" => {
            options.sticky_legacy_wildcard = Some(flag(value).ok_or_else(bad)?)
        }
        "sotw-not-found-errors" => {
            options.sotw_not_found_errors = Some(flag(value).ok_or_else(bad)?)
        }
        "client-events" => {
            options.client_event_shape = Some(match value {
                "per-resource" => EventShape::PerResource,
                "batched" => EventShape::Batched,
                _ => return Err(bad()),
            })
        }
        "server-encoded" => options.server_encoded = flag(value).ok_or_else(bad)?,
        "deps-grace" => options.deps_grace = Some(parse_duration(value).ok_or_else(bad)?),
        "backoff-seed" => options.backoff_seed = Some(value.parse().map_err(|_| bad())?),
        "not-found" => {
            options.not_found = Some(match value {
                "removed" => NotFoundReporting::RemovedResources,
                "bodyless" => NotFoundReporting::BodylessResource,
                _ => return Err(bad()),
            })
        }
        other => return Err(format!("unknown option {other:?}")),
    }
    Ok(())
}

/// The servers of a `servers:` or `authority:` header: a line that starts with a server's
/// name is a message on its stream, so no name may be a step's first word.
fn server_names(
    words: impl Iterator<Item = impl Into<String>>,
    line: usize,
) -> Result<Vec<String>, ScriptError> {
    const STEPS: &[&str] = &[
        "C->S",
        "S->C",
        "client",
        "server",
        "deps",
        "session",
        "up",
        "down",
        "wait",
        "disconnect",
        "connect",
        "expect",
    ];
    words
        .map(Into::into)
        .map(|name: String| match STEPS.contains(&name.as_str()) {
            true => Err(error(
                line,
                format!("{name:?} is a step, not a server name"),
            )),
            false => Ok(name),
        })
        .collect()
}

/// Parses a scenario file. `default_title` is used when there is no `title:` header.
pub fn parse(text: &str, default_title: &str) -> Result<Scenario, ScriptError> {
    let mut scenario = Scenario {
        title: default_title.into(),
        model: Model::Client,
        variant: Variant::Sotw,
        transport: TransportSpec::Ads,
        options: Options::default(),
        steps: Vec::new(),
        session: SessionSetup::default(),
    };
    let mut seen_model = false;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        let source = strip_comment(raw).trim();
        if source.is_empty() {
            continue;
        }
        if scenario.steps.is_empty() {
            if let Some((key, value)) = source.split_once(':') {
                let key = key.trim();
                let value = value.trim();
                let header = match key {
                    "title" => {
                        scenario.title = value.into();
                        true
                    }
                    "model" => {
                        scenario.model = match value {
                            "client" => Model::Client,
                            "server" => Model::Server,
                            "both" => Model::Both,
                            "session" => Model::Session,
                            other => {
                                return Err(error(
                                    line,
                                    format!(
                                    "model must be client, server, both or session, not {other:?}"
                                ),
                                ))
                            }
                        };
                        seen_model = true;
                        true
                    }
                    "variant" => {
                        scenario.variant = match value {
                            "sotw" => Variant::Sotw,
                            "delta" => Variant::Delta,
                            other => {
                                return Err(error(
                                    line,
                                    format!("variant must be sotw or delta, not {other:?}"),
                                ))
                            }
                        };
                        true
                    }
                    "transport" => {
                        scenario.transport = if value == "ads" {
                            TransportSpec::Ads
                        } else {
                            TransportSpec::PerType(resolve_type(value).ok_or_else(|| {
                                error(
                                    line,
                                    format!("transport must be ads or a type, not {value:?}"),
                                )
                            })?)
                        };
                        true
                    }
                    "option" => {
                        let (k, v) = value
                            .split_once('=')
                            .ok_or_else(|| error(line, "option takes key=value"))?;
                        option(&mut scenario.options, k.trim(), v.trim())
                            .map_err(|message| error(line, message))?;
                        true
                    }
                    "servers" => {
                        scenario.session.servers = server_names(value.split_whitespace(), line)?;
                        true
                    }
                    "authority" | "server-features" | "server-replicas" => {
                        let mut words = value.split_whitespace().map(String::from);
                        let first = words
                            .next()
                            .ok_or_else(|| error(line, format!("{key} takes a name first")))?;
                        if key == "authority" {
                            let servers = server_names(words, line)?;
                            scenario.session.authorities.push((first, servers));
                        } else if key == "server-replicas" {
                            scenario.session.replicas.push((first, words.collect()));
                        } else {
                            scenario.session.features.push((first, words.collect()));
                        }
                        true
                    }
                    "seed" | "rule" | "see" => true,
                    _ => false,
                };
                if header {
                    continue;
                }
            }
        }
        let mut cursor = Cursor {
            text: source,
            at: 0,
            line,
        };
        // A message on one server's stream of a session scenario starts with its name.
        let first = source.split_whitespace().next().unwrap_or_default();
        let on_server = scenario.model == Model::Session
            && scenario
                .session
                .servers
                .iter()
                .chain(scenario.session.authorities.iter().flat_map(|(_, s)| s))
                .any(|s| s == first);
        let action = if on_server {
            let server = cursor.word("a server")?;
            server_message(&mut cursor, server, scenario.variant)?
        } else {
            step(&mut cursor, scenario.variant)?
        };
        scenario.steps.push(Step {
            line,
            source: source.into(),
            action,
        });
    }
    if !seen_model {
        return Err(error(
            0,
            "a scenario needs a `model: client|server|both` header",
        ));
    }
    Ok(scenario)
}
