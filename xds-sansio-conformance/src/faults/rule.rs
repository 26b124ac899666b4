//! The rules of a fault plan and their text form, one rule per line:
//!
//! ```text
//! # comment
//! drop type=cds nth=1            # the first CDS response of every stream is lost
//! delay ms=500 type=eds p=0.5    # half of the EDS responses arrive 500 ms late
//! duplicate every=3              # every third response arrives twice
//! reorder type=lds within_ms=1000
//! wrong-nonce type=rds nth=1
//! stale-nonce nth=2
//! resend-nacked type=cds
//! close after=3 status=UNAVAILABLE message="going away" stream=1
//! refuse status=PERMISSION_DENIED stream=1
//! ```
//!
//! Selectors: `type=` (a short name such as `cds`, or a type URL), `nth=K` (only the
//! K-th match on a stream, from 1), `every=K` (the K-th, 2K-th, ...), `p=` (each match
//! with this probability, drawn from the plan's seed), `stream=K` (only the K-th stream
//! the server opens, from 1). Every selector given must hold; none given matches all.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;
use core::time::Duration;

use xds_sansio::types::ResourceType;

/// The gRPC status a fault ends or refuses a stream with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultStatus {
    /// The gRPC status code (0 ends the stream with OK).
    pub code: i32,
    /// The status message.
    pub message: String,
}

/// What a rule does to the responses (or the stream) it selects.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// The response never leaves: the client waits, as after a lost message.
    Drop,
    /// The response leaves this much later; later responses queue behind it (a slow link,
    /// not a reordering).
    Delay(Duration),
    /// The response leaves twice, with the same nonce.
    Duplicate,
    /// The response is held until a response of another type has left (then it follows
    /// that one), or until `within` has passed.
    Reorder {
        /// The longest hold.
        within: Duration,
    },
    /// The response carries a nonce the server never sent.
    WrongNonce,
    /// The response carries the nonce of the response sent before it on the stream (a
    /// rule that finds no earlier response does not fire).
    StaleNonce,
    /// When the client NACKs a selected response, the same response is sent again, with a
    /// fresh nonce (a server that does not learn from a NACK).
    ResendNacked,
    /// After this many responses have left, the stream ends with `status`.
    CloseAfter {
        /// Responses sent before the end.
        responses: u32,
        /// How the stream ends.
        status: FaultStatus,
    },
    /// The stream is refused as it opens, with `status`.
    Refuse(FaultStatus),
}

impl FaultKind {
    /// The rule's name in the text form.
    pub fn name(&self) -> &'static str {
        match self {
            FaultKind::Drop => "drop",
            FaultKind::Delay(_) => "delay",
            FaultKind::Duplicate => "duplicate",
            FaultKind::Reorder { .. } => "reorder",
            FaultKind::WrongNonce => "wrong-nonce",
            FaultKind::StaleNonce => "stale-nonce",
            FaultKind::ResendNacked => "resend-nacked",
            FaultKind::CloseAfter { .. } => "close",
            FaultKind::Refuse(_) => "refuse",
        }
    }
}

/// Which responses or streams a rule applies to.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector {
    /// Only responses of this type URL.
    pub type_url: Option<String>,
    /// Only the K-th match on a stream (from 1).
    pub nth: Option<u32>,
    /// Only every K-th match on a stream.
    pub every: Option<u32>,
    /// Each match with this probability (seeded).
    pub probability: Option<f64>,
    /// Only the K-th stream the server opens (from 1).
    pub stream: Option<u32>,
}

/// One rule: a fault and where it applies.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRule {
    /// What it does.
    pub kind: FaultKind,
    /// Where.
    pub selector: Selector,
}

/// A plan that does not parse: the line (from 1) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultParseError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FaultParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fault plan, line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FaultParseError {}

/// Parses the rules of a plan, one per line (`#` starts a comment).
pub fn parse_rules(text: &str) -> Result<Vec<FaultRule>, FaultParseError> {
    let mut rules = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let error = |message: String| FaultParseError {
            line: index + 1,
            message,
        };
        let words = split_words(line).map_err(error)?;
        let Some((kind, settings)) = words.split_first() else {
            continue;
        };
        rules.push(parse_rule(kind, settings).map_err(error)?);
    }
    Ok(rules)
}

/// Splits a line into words, honouring double quotes and stopping at an unquoted `#`.
fn split_words(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut in_word = false;
    for c in line.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                in_word = true;
            }
            '#' if !quoted => break,
            c if c.is_whitespace() && !quoted => {
                if in_word {
                    words.push(core::mem::take(&mut word));
                    in_word = false;
                }
            }
            c => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quoted {
        return Err("a quote is not closed".to_string());
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

fn parse_rule(kind: &str, settings: &[String]) -> Result<FaultRule, String> {
    let mut selector = Selector::default();
    let mut ms: Option<u64> = None;
    let mut within_ms: Option<u64> = None;
    let mut after: Option<u32> = None;
    let mut code: Option<i32> = None;
    let mut message: Option<String> = None;
    for setting in settings {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("`{setting}` is not key=value"))?;
        match key {
            "type" => selector.type_url = Some(type_url(value)?),
            "nth" => selector.nth = Some(positive(key, value)?),
            "every" => selector.every = Some(positive(key, value)?),
            "stream" => selector.stream = Some(positive(key, value)?),
            "p" => {
                let p: f64 = value
                    .parse()
                    .map_err(|_| format!("p={value} is not a number"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("p={value} is not between 0 and 1"));
                }
                selector.probability = Some(p);
            }
            "ms" => ms = Some(number(key, value)?),
            "within_ms" => within_ms = Some(number(key, value)?),
            "after" => after = Some(positive(key, value)?),
            "status" => code = Some(status_code(value)?),
            "message" => message = Some(value.to_string()),
            _ => return Err(format!("`{key}` is not a setting of a fault rule")),
        }
    }
    let status = |default: i32| FaultStatus {
        code: code.unwrap_or(default),
        message: message
            .clone()
            .unwrap_or_else(|| "injected fault".to_string()),
    };
    let only = |allowed: &[&str]| -> Result<(), String> {
        let given = [
            ("ms", ms.is_some()),
            ("within_ms", within_ms.is_some()),
            ("after", after.is_some()),
            ("status", code.is_some()),
            ("message", message.is_some()),
        ];
        match given
            .iter()
            .find(|(name, set)| *set && !allowed.contains(name))
        {
            Some((name, _)) => Err(format!("`{name}` is not a setting of `{kind}`")),
            None => Ok(()),
        }
    };
    let kind = match kind {
        "drop" => only(&[]).map(|()| FaultKind::Drop)?,
        "delay" => {
            only(&["ms"])?;
            let ms = ms.ok_or("`delay` needs ms=")?;
            FaultKind::Delay(Duration::from_millis(ms))
        }
        "duplicate" => only(&[]).map(|()| FaultKind::Duplicate)?,
        "reorder" => {
            only(&["within_ms"])?;
            FaultKind::Reorder {
                within: Duration::from_millis(within_ms.unwrap_or(1_000)),
            }
        }
        "wrong-nonce" => only(&[]).map(|()| FaultKind::WrongNonce)?,
        "stale-nonce" => only(&[]).map(|()| FaultKind::StaleNonce)?,
        "resend-nacked" => only(&[]).map(|()| FaultKind::ResendNacked)?,
        "close" => {
            only(&["after", "status", "message"])?;
            FaultKind::CloseAfter {
                responses: after.ok_or("`close` needs after=")?,
                status: status(14),
            }
        }
        "refuse" => {
            only(&["status", "message"])?;
            FaultKind::Refuse(status(code.ok_or("`refuse` needs status=")?))
        }
        other => {
            return Err(format!(
                "`{other}` is not a fault (drop, delay, duplicate, reorder, wrong-nonce, \
                 stale-nonce, resend-nacked, close, refuse)"
            ))
        }
    };
    if matches!(kind, FaultKind::Refuse(_) | FaultKind::CloseAfter { .. })
        && (selector.type_url.is_some() || selector.nth.is_some() || selector.every.is_some())
    {
        return Err(format!(
            "`{}` applies to streams: only stream= and p= select them",
            kind.name()
        ));
    }
    Ok(FaultRule { kind, selector })
}

fn number(key: &str, value: &str) -> Result<u64, String> {
    value
        .parse()
        .map_err(|_| format!("{key}={value} is not a whole number"))
}

fn positive(key: &str, value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{key}={value} is not a whole number from 1")),
    }
}

/// A short name (`cds`) or a type URL.
fn type_url(value: &str) -> Result<String, String> {
    if value.contains('/') {
        return Ok(value.to_string());
    }
    ResourceType::by_short_name(value)
        .map(|t| t.type_url.to_string())
        .ok_or_else(|| format!("type={value} is neither a known short name nor a type URL"))
}

/// The gRPC status codes by name (grpc/doc/statuscodes.md).
const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

fn status_code(value: &str) -> Result<i32, String> {
    if let Ok(code) = value.parse::<i32>() {
        if (0..STATUS_NAMES.len() as i32).contains(&code) {
            return Ok(code);
        }
    }
    STATUS_NAMES
        .iter()
        .position(|name| name.eq_ignore_ascii_case(value))
        .map(|code| code as i32)
        .ok_or_else(|| format!("status={value} is not a gRPC status (0-16 or a name)"))
}
