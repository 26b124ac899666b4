//! Recorded conversations: JSON lines, one message (or store change) per line.
//!
//! ```text
//! {"dir":"C->S","stream":1,"time":0.5,"variant":"sotw","message":{...canonical JSON...}}
//! {"dir":"S->C","stream":1,"message":{...}}
//! {"dir":"S->C","stream":1,"binary":"<base64 of the encoded message>"}
//! {"store":"set","type_url":"type.googleapis.com/...","name":"a","version":"1"}
//! {"store":"remove","type_url":"type.googleapis.com/...","name":"a"}
//! ```
//!
//! `dir` is `C->S` (a `DiscoveryRequest` or `DeltaDiscoveryRequest`) or `S->C`. `variant`
//! (`sotw` or `delta`) defaults to the checker's; `stream` (default 0) tells streams apart:
//! a new id is a new stream; `time` is informational. A message is canonical proto3 JSON
//! (an `Any` of a type without schema may use `{"@type", "value": base64}`), or base64 of
//! its binary encoding in `binary`. An `Any` written canonically (its message's fields)
//! needs that message's schema: [`parse_jsonl_with`] takes a codec that has it, and
//! without it the line is an error naming the type, never a resource read as empty.
//! Store lines are optional knowledge of what the server holds; with them, full-state
//! omissions are checked exactly.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine;
use prost::Message;
use serde_json::Value;

use crate::json::JsonCodec;
use crate::message::{Request, Response, Variant};
use crate::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use crate::script::ScriptError;
pub use crate::transcript::Entry;

fn error(line: usize, message: impl Into<String>) -> ScriptError {
    ScriptError {
        line,
        message: message.into(),
    }
}

fn decode<M: Message + prost::Name + Default>(
    codec: &JsonCodec,
    object: &serde_json::Map<String, Value>,
    line: usize,
) -> Result<M, ScriptError> {
    if let Some(message) = object.get("message") {
        return codec
            .from_value(message.clone())
            .map_err(|e| error(line, format!("{}: {e}", M::NAME)));
    }
    if let Some(Value::String(text)) = object.get("binary") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| error(line, format!("binary is not base64: {e}")))?;
        return M::decode(bytes.as_slice()).map_err(|e| error(line, format!("{}: {e}", M::NAME)));
    }
    Err(error(
        line,
        "a message line needs \"message\" (JSON) or \"binary\" (base64)",
    ))
}

fn text_field(
    object: &serde_json::Map<String, Value>,
    key: &str,
    line: usize,
) -> Result<String, ScriptError> {
    match object.get(key) {
        Some(Value::String(text)) => Ok(text.clone()),
        _ => Err(error(line, format!("expected a string field {key:?}"))),
    }
}

/// Parses a recorded conversation. `variant` applies to lines that do not say theirs.
/// Resources must be binary, `{"@type", "value": base64}`, or of the discovery types the
/// crate knows; see [`parse_jsonl_with`] for recordings that write resources canonically.
pub fn parse_jsonl(text: &str, variant: Variant) -> Result<Vec<Entry>, ScriptError> {
    parse_jsonl_with(text, variant, &JsonCodec::new())
}

/// Parses a recorded conversation, reading the messages inside `Any`s with the schemas
/// `codec` knows (e.g. after [`JsonCodec::add_file_descriptor_set`] with the Envoy resource
/// types, as recordings of Go's `protojson` or Java's `JsonFormat` need). Fields no schema
/// knows are skipped (newer peers), whatever `codec` says; an `Any` of a type `codec` has
/// no schema for, written canonically, is an error naming the line and the type.
pub fn parse_jsonl_with(
    text: &str,
    variant: Variant,
    codec: &JsonCodec,
) -> Result<Vec<Entry>, ScriptError> {
    let codec = codec.clone().ignore_unknown_fields(true);
    let mut entries = Vec::new();
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
        if let Some(store) = object.get("store") {
            let type_url = text_field(&object, "type_url", line)?;
            let name = text_field(&object, "name", line)?;
            let version = match store.as_str() {
                Some("set") => Some(
                    object
                        .get("version")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                ),
                Some("remove") => None,
                _ => return Err(error(line, "store must be \"set\" or \"remove\"")),
            };
            entries.push(Entry::Store {
                line,
                type_url,
                name,
                version,
            });
            continue;
        }
        let stream = object.get("stream").and_then(Value::as_u64).unwrap_or(0);
        let variant = match object.get("variant").and_then(Value::as_str) {
            None => variant,
            Some("sotw") => Variant::Sotw,
            Some("delta") => Variant::Delta,
            Some(other) => {
                return Err(error(
                    line,
                    format!("variant must be sotw or delta, not {other:?}"),
                ))
            }
        };
        let direction = text_field(&object, "dir", line)?;
        let entry = match (direction.as_str(), variant) {
            ("C->S", Variant::Sotw) => Entry::Request {
                line,
                stream,
                request: Request::Sotw(decode::<DiscoveryRequest>(&codec, &object, line)?),
            },
            ("C->S", Variant::Delta) => Entry::Request {
                line,
                stream,
                request: Request::Delta(decode::<DeltaDiscoveryRequest>(&codec, &object, line)?),
            },
            ("S->C", Variant::Sotw) => Entry::Response {
                line,
                stream,
                response: Response::Sotw(decode::<DiscoveryResponse>(&codec, &object, line)?),
            },
            ("S->C", Variant::Delta) => Entry::Response {
                line,
                stream,
                response: Response::Delta(decode::<DeltaDiscoveryResponse>(&codec, &object, line)?),
            },
            (other, _) => {
                return Err(error(
                    line,
                    format!("dir must be \"C->S\" or \"S->C\", not {other:?}"),
                ))
            }
        };
        entries.push(entry);
    }
    Ok(entries)
}

/// Writes one entry as a JSON line (messages as canonical JSON).
pub fn to_jsonl(entry: &Entry, codec: &JsonCodec) -> Result<String, crate::json::JsonError> {
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
