//! Recorded conversations: JSON lines, one message (or store change) per line, behind an
//! optional header line that names the format and its version.
//!
//! ```text
//! {"record":"xds-sansio","version":1,"view":"client"}
//! {"dir":"C->S","stream":1,"time":0.5,"variant":"sotw","message":{...canonical JSON...}}
//! {"dir":"S->C","stream":1,"binary":"<base64 of the encoded message>"}
//! {"store":"set","type_url":"type.googleapis.com/...","name":"a","version":"1"}
//! {"store":"remove","type_url":"type.googleapis.com/...","name":"a"}
//! ```
//!
//! The format is a public interface, documented with an example of every line kind in
//! `docs/record-format.md`, with a JSON Schema of one line in
//! `docs/record-format.schema.json`. In short: `dir` is `C->S` (a `DiscoveryRequest` or
//! `DeltaDiscoveryRequest`) or `S->C`; `variant` (`sotw` or `delta`) defaults to the
//! reader's; `stream` (default 0) tells streams apart; `time` is informational. A message
//! is canonical proto3 JSON in `message` (as Go's `protojson`, Java's `JsonFormat` and
//! Python's `json_format` write it: either field name form, 64-bit integers as strings or
//! numbers, defaults omitted or written), or base64 of its binary encoding in `binary`.
//! Store lines are optional knowledge of what the server holds.
//!
//! # Decisions
//!
//! * **An `Any` is never read as empty.** An `Any` written canonically (its message's
//!   fields beside `"@type"`) needs that message's schema: [`parse_jsonl_with`] takes a
//!   codec that has it, and without it the line is an error naming the type
//!   ([`JsonError::UnknownAnyType`]).
//! * **Versioned, old recordings stay readable.** A recording without a header is
//!   version 1 (every recording made before the header existed); a header of a newer
//!   version is an error naming its line, never a guess at what the lines mean.
//! * **Fields newer than the reader are skipped; envelope values of the wrong shape are
//!   errors.** A message field no schema knows is skipped (a newer peer), and so is an
//!   envelope key the format does not define. But a `stream` that is not a whole number,
//!   or a `variant` that is not a string, is an error rather than the default: read as
//!   stream 0, two streams would merge and the checker judge a conversation that never
//!   happened.
//! * **Base64 as proto3 JSON reads it.** `binary` takes the standard or the URL-safe
//!   alphabet, with or without padding, as proto3 JSON parsers take `bytes` (protobuf
//!   documentation, "ProtoJSON Format").

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine;
use prost::Message;
use serde_json::{Map, Value};

use super::CheckSide;
use crate::script::ScriptError;
pub use crate::transcript::Entry;
use xds_sansio::codec::json::{JsonCodec, JsonError};
use xds_sansio::message::{Request, Response, Variant};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};

/// The value of `record` in a header line: the name of the format.
pub const RECORD_FORMAT: &str = "xds-sansio";

/// The version of the record format this crate writes, and the newest it reads.
pub const RECORD_VERSION: u64 = 1;

fn error(line: usize, message: impl Into<String>) -> ScriptError {
    ScriptError {
        line,
        message: message.into(),
    }
}

/// Base64 in any of the forms proto3 JSON parsers accept for `bytes`: the standard or the
/// URL-safe alphabet, padded or not.
fn base64_bytes(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let config =
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let alphabet = if text.contains(['-', '_']) {
        &base64::alphabet::URL_SAFE
    } else {
        &base64::alphabet::STANDARD
    };
    GeneralPurpose::new(alphabet, config).decode(text)
}

fn decode<M: Message + prost::Name + Default>(
    codec: &JsonCodec,
    object: &Map<String, Value>,
    line: usize,
) -> Result<M, ScriptError> {
    match (object.get("message"), object.get("binary")) {
        (Some(_), Some(_)) => Err(error(
            line,
            "a message line has \"message\" (JSON) or \"binary\" (base64), not both",
        )),
        (Some(message), None) => codec
            .from_value(message.clone())
            .map_err(|e| error(line, format!("{}: {e}", M::NAME))),
        (None, Some(Value::String(text))) => {
            let bytes = base64_bytes(text)
                .map_err(|e| error(line, format!("binary is not base64: {e}")))?;
            M::decode(bytes.as_slice()).map_err(|e| error(line, format!("{}: {e}", M::NAME)))
        }
        (None, Some(_)) => Err(error(line, "binary must be a string (base64)")),
        (None, None) => Err(error(
            line,
            "a message line needs \"message\" (JSON) or \"binary\" (base64)",
        )),
    }
}

fn text_field(object: &Map<String, Value>, key: &str, line: usize) -> Result<String, ScriptError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(error(line, format!("expected a string field {key:?}"))),
    }
}

/// `stream`: a whole number (or its decimal digits in a string, as proto3 JSON writes
/// 64-bit integers); 0 when absent.
fn stream_of(object: &Map<String, Value>, line: usize) -> Result<u64, ScriptError> {
    let stream = match object.get("stream") {
        None => Some(0),
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(digits)) if digits.bytes().all(|b| b.is_ascii_digit()) => {
            digits.parse().ok()
        }
        Some(_) => None,
    };
    stream.ok_or_else(|| error(line, "stream must be a whole number of at least 0"))
}

fn variant_of(
    object: &Map<String, Value>,
    default: Variant,
    line: usize,
) -> Result<Variant, ScriptError> {
    match object.get("variant") {
        None => Ok(default),
        Some(Value::String(text)) if text == "sotw" => Ok(Variant::Sotw),
        Some(Value::String(text)) if text == "delta" => Ok(Variant::Delta),
        Some(other) => Err(error(
            line,
            format!("variant must be \"sotw\" or \"delta\", not {other}"),
        )),
    }
}

/// A header line: the format's name and a version this reader knows.
fn header(object: &Map<String, Value>, line: usize, first: bool) -> Result<(), ScriptError> {
    if !first {
        return Err(error(
            line,
            "a record header (\"record\") may only be the first line",
        ));
    }
    if object.get("record").and_then(Value::as_str) != Some(RECORD_FORMAT) {
        return Err(error(
            line,
            format!("not a record header: \"record\" must be {RECORD_FORMAT:?}"),
        ));
    }
    match object.get("version").and_then(Value::as_u64) {
        Some(1..=RECORD_VERSION) => {}
        Some(version) if version > RECORD_VERSION => {
            return Err(error(
                line,
                format!(
                    "the record is version {version} of the format, this reader reads up to \
                     version {RECORD_VERSION}: read it with a newer xds-sansio"
                ),
            ))
        }
        _ => {
            return Err(error(
                line,
                "the record header needs \"version\", a whole number from 1",
            ))
        }
    }
    match object.get("view") {
        None => {}
        Some(Value::String(view)) if view == "client" || view == "server" => {}
        Some(other) => {
            return Err(error(
                line,
                format!("view must be \"client\" or \"server\", not {other}"),
            ))
        }
    }
    match object.get("writer") {
        None | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(error(line, "writer must be a string")),
    }
}

fn store_entry(object: &Map<String, Value>, line: usize) -> Result<Entry, ScriptError> {
    if object.contains_key("dir") {
        return Err(error(
            line,
            "a line is a message (\"dir\") or a store change (\"store\"), not both",
        ));
    }
    let type_url = text_field(object, "type_url", line)?;
    let name = text_field(object, "name", line)?;
    let version = match object.get("store").and_then(Value::as_str) {
        Some("set") => Some(match object.get("version") {
            None => String::new(),
            Some(Value::String(version)) => version.clone(),
            Some(_) => return Err(error(line, "version must be a string")),
        }),
        Some("remove") => None,
        _ => return Err(error(line, "store must be \"set\" or \"remove\"")),
    };
    Ok(Entry::Store {
        line,
        type_url,
        name,
        version,
    })
}

fn message_entry(
    object: &Map<String, Value>,
    line: usize,
    variant: Variant,
    codec: &JsonCodec,
) -> Result<Entry, ScriptError> {
    let stream = stream_of(object, line)?;
    let variant = variant_of(object, variant, line)?;
    let direction = text_field(object, "dir", line)?;
    Ok(match (direction.as_str(), variant) {
        ("C->S", Variant::Sotw) => Entry::Request {
            line,
            stream,
            request: Request::Sotw(decode::<DiscoveryRequest>(codec, object, line)?),
        },
        ("C->S", Variant::Delta) => Entry::Request {
            line,
            stream,
            request: Request::Delta(decode::<DeltaDiscoveryRequest>(codec, object, line)?),
        },
        ("S->C", Variant::Sotw) => Entry::Response {
            line,
            stream,
            response: Response::Sotw(decode::<DiscoveryResponse>(codec, object, line)?),
        },
        ("S->C", Variant::Delta) => Entry::Response {
            line,
            stream,
            response: Response::Delta(decode::<DeltaDiscoveryResponse>(codec, object, line)?),
        },
        (other, _) => {
            return Err(error(
                line,
                format!("dir must be \"C->S\" or \"S->C\", not {other:?}"),
            ))
        }
    })
}

/// Parses a recorded conversation. `variant` applies to lines that do not say theirs.
/// Resources must be binary, `{"@type", "value": base64}`, or of the discovery types the
/// crate knows; see [`parse_jsonl_with`] for recordings that write resources canonically.
pub fn parse_jsonl(text: &str, variant: Variant) -> Result<Vec<Entry>, ScriptError> {
    parse_jsonl_with(text, variant, &JsonCodec::new())
}

/// Parses a recorded conversation, reading the messages inside `Any`s with the schemas
/// `codec` knows (e.g. after [`JsonCodec::add_file_descriptor_set`] with the Envoy resource
/// types, as recordings of Go's `protojson`, Java's `JsonFormat` or Python's `json_format`
/// need). Fields no schema knows are skipped (newer peers), whatever `codec` says; an `Any`
/// of a type `codec` has no schema for, written canonically, is an error naming the line
/// and the type. A header line of a newer version of the format is an error naming it.
pub fn parse_jsonl_with(
    text: &str,
    variant: Variant,
    codec: &JsonCodec,
) -> Result<Vec<Entry>, ScriptError> {
    let codec = codec.clone().ignore_unknown_fields(true);
    let mut entries = Vec::new();
    let mut first = true;
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value =
            serde_json::from_str(raw).map_err(|e| error(line, format!("not JSON: {e}")))?;
        let Value::Object(object) = value else {
            return Err(error(line, "expected a JSON object"));
        };
        let was_first = core::mem::replace(&mut first, false);
        if object.contains_key("record") {
            header(&object, line, was_first)?;
            continue;
        }
        if !matches!(
            object.get("time"),
            None | Some(Value::Number(_)) | Some(Value::String(_))
        ) {
            return Err(error(
                line,
                "time must be a number (seconds) or a string (a timestamp)",
            ));
        }
        if object.contains_key("store") {
            entries.push(store_entry(&object, line)?);
        } else {
            entries.push(message_entry(&object, line, variant, &codec)?);
        }
    }
    Ok(entries)
}

/// The header line of a recording: the format's name, its version ([`RECORD_VERSION`]),
/// and whose view of the conversation follows, when known.
pub fn header_jsonl(view: Option<CheckSide>) -> String {
    let mut header = serde_json::json!({"record": RECORD_FORMAT, "version": RECORD_VERSION});
    let view = view.map(|side| match side {
        CheckSide::Client => "client",
        CheckSide::Server => "server",
    });
    if let (Some(view), Value::Object(object)) = (view, &mut header) {
        object.insert("view".into(), Value::String(view.into()));
    }
    header.to_string()
}

/// Writes one entry as a JSON line (messages as canonical JSON). A recording begins with
/// [`header_jsonl`]; [`write_jsonl`] writes both.
pub fn to_jsonl(entry: &Entry, codec: &JsonCodec) -> Result<String, JsonError> {
    let (dir, stream, variant, message) = match entry {
        Entry::Request {
            stream, request, ..
        } => {
            let (variant, message) = match request {
                Request::Sotw(r) => ("sotw", codec.to_value(r)?),
                Request::Delta(r) => ("delta", codec.to_value(r)?),
            };
            ("C->S", stream, variant, message)
        }
        Entry::Response {
            stream, response, ..
        } => {
            let (variant, message) = match response {
                Response::Sotw(r) => ("sotw", codec.to_value(r)?),
                Response::Delta(r) => ("delta", codec.to_value(r)?),
            };
            ("S->C", stream, variant, message)
        }
        Entry::Store {
            type_url,
            name,
            version,
            ..
        } => {
            let value = match version {
                Some(version) => {
                    serde_json::json!({"store": "set", "type_url": type_url, "name": name, "version": version})
                }
                None => serde_json::json!({"store": "remove", "type_url": type_url, "name": name}),
            };
            return Ok(value.to_string());
        }
    };
    Ok(
        serde_json::json!({"dir": dir, "stream": stream, "variant": variant, "message": message})
            .to_string(),
    )
}

/// Writes a whole recording: the header line ([`header_jsonl`]), then one line per entry,
/// each ending in a newline.
pub fn write_jsonl(
    entries: &[Entry],
    view: Option<CheckSide>,
    codec: &JsonCodec,
) -> Result<String, JsonError> {
    let mut text = header_jsonl(view);
    text.push('\n');
    for entry in entries {
        text.push_str(&to_jsonl(entry, codec)?);
        text.push('\n');
    }
    Ok(text)
}
