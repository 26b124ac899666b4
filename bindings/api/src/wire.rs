//! The API as JSON text in and out: the one form the C ABI (Go, Java), Python and
//! JavaScript packages share, so each is a thin layer that raises its language's error.
//!
//! Every answer is an object: `{"ok": VALUE}` or `{"error": {"kind", "line", "message"}}`
//! ([`Error`]). Bytes travel as standard base64. Objects (a control plane, a stepper) take
//! calls by method name with an object of arguments:
//!
//! | object | method | arguments | `ok` |
//! |---|---|---|---|
//! | control plane | `port` | | the port |
//! | | `set` | `type_url`, `body` (base64) | `null` |
//! | | `remove` | `type_url`, `name` | `null` |
//! | | `replace` | `resources` (`{"resources": [Any, ...]}` text) | `null` |
//! | | `end_streams` | | `null` |
//! | | `stream_count`, `recorded` | | a number |
//! | | `records` | | the recording (JSON lines) |
//! | | `findings` | `side` (optional) | findings |
//! | | `stop` | | `null` |
//! | stepper | `connected`, `disconnected` | | a step |
//! | | `subscribe` | `type_url`, `names` (none: wildcard) | a step |
//! | | `set` | `type_url`, `body` (base64) | a step |
//! | | `remove` | `type_url`, `name` | a step |
//! | | `handle` | `bytes` (base64) | a step |
//! | | `advance` | `millis` | a step |
//!
//! Every function here catches a panic of the native side and answers it as an error of
//! kind `internal`: a binding built on this layer never crashes its host.

use std::panic::{catch_unwind, AssertUnwindSafe};

use base64::Engine;
use serde::Serialize;
use serde_json::{json, Map, Value};

use crate::error::{Error, ErrorKind};
use crate::{CheckOptions, ControlPlane, ControlPlaneOptions, Stepper, StepperOptions};

/// `{"ok": value}` or `{"error": ...}` as text.
pub fn answer<T: Serialize>(result: Result<T, Error>) -> String {
    let value = match result.and_then(|v| {
        serde_json::to_value(v).map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))
    }) {
        Ok(value) => json!({ "ok": value }),
        Err(error) => json!({ "error": error }),
    };
    value.to_string()
}

/// Runs `body`, a panic becoming an `internal` error.
fn guarded<T>(body: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|_| {
        Err(Error::new(
            ErrorKind::Internal,
            "the native library panicked (a bug of xds-sansio: please report it)",
        ))
    })
}

/// The error answer for a failure outside the API (a caught panic, bad UTF-8).
pub fn failure(kind: ErrorKind, message: &str) -> String {
    answer::<()>(Err(Error::new(kind, message)))
}

fn options<T: serde::de::DeserializeOwned + Default>(text: &str) -> Result<T, Error> {
    if text.trim().is_empty() {
        return Ok(T::default());
    }
    serde_json::from_str(text).map_err(|e| Error::new(ErrorKind::Usage, format!("options: {e}")))
}

fn args(text: &str) -> Result<Map<String, Value>, Error> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Error::new(
            ErrorKind::Usage,
            "arguments must be a JSON object",
        )),
        Err(e) => Err(Error::new(ErrorKind::Usage, format!("arguments: {e}"))),
    }
}

fn text<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, Error> {
    args.get(key).and_then(Value::as_str).ok_or_else(|| {
        Error::new(
            ErrorKind::Usage,
            format!("argument {key:?} (a string) is required"),
        )
    })
}

fn bytes(args: &Map<String, Value>, key: &str) -> Result<Vec<u8>, Error> {
    base64::engine::general_purpose::STANDARD
        .decode(text(args, key)?)
        .map_err(|e| {
            Error::new(
                ErrorKind::Usage,
                format!("argument {key:?} is not base64: {e}"),
            )
        })
}

/// [`crate::check()`]: `options` is [`CheckOptions`] as JSON (empty: the defaults).
pub fn check(records: &str, options_json: &str) -> String {
    answer(guarded(|| {
        options::<CheckOptions>(options_json).and_then(|o| crate::check(records, &o))
    }))
}

/// [`crate::replay()`].
pub fn replay(scenario: &str, name: &str) -> String {
    answer(guarded(|| crate::replay(scenario, name)))
}

/// [`ControlPlane::start`] with [`ControlPlaneOptions`] as JSON.
pub fn control_plane(options_json: &str) -> Result<ControlPlane, Error> {
    guarded(|| ControlPlane::start(&options::<ControlPlaneOptions>(options_json)?))
}

/// A control plane's method by name (the table above).
pub fn control_plane_call(plane: &mut ControlPlane, method: &str, args_json: &str) -> String {
    let result = guarded(|| -> Result<Value, Error> {
        let a = args(args_json)?;
        Ok(match method {
            "port" => json!(plane.port()),
            "set" => {
                plane.set(text(&a, "type_url")?, bytes(&a, "body")?.into())?;
                Value::Null
            }
            "remove" => {
                plane.remove(text(&a, "type_url")?, text(&a, "name")?)?;
                Value::Null
            }
            "replace" => {
                plane.replace_json(text(&a, "resources")?)?;
                Value::Null
            }
            "end_streams" => {
                plane.end_streams();
                Value::Null
            }
            "stream_count" => json!(plane.stream_count()),
            "recorded" => json!(plane.recorded()),
            "records" => json!(plane.records()?),
            "findings" => {
                let side = a.get("side").and_then(Value::as_str);
                serde_json::to_value(plane.findings(side)?)
                    .map_err(|e| Error::new(ErrorKind::Internal, e.to_string()))?
            }
            "stop" => {
                plane.stop();
                Value::Null
            }
            other => return Err(unknown("control plane", other)),
        })
    });
    answer(result)
}

/// [`Stepper::new`] with [`StepperOptions`] as JSON.
pub fn stepper(options_json: &str) -> Result<Stepper, Error> {
    guarded(|| Stepper::new(&options::<StepperOptions>(options_json)?))
}

/// A stepper's method by name (the table above).
pub fn stepper_call(stepper: &mut Stepper, method: &str, args_json: &str) -> String {
    let result = guarded(|| {
        let a = args(args_json)?;
        match method {
            "connected" => stepper.connected(),
            "disconnected" => stepper.disconnected(),
            "subscribe" => {
                let names: Vec<&str> = match a.get("names") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
                    Some(_) => {
                        return Err(Error::new(
                            ErrorKind::Usage,
                            "argument \"names\" must be a list of strings",
                        ))
                    }
                };
                stepper.subscribe(text(&a, "type_url")?, &names)
            }
            "set" => stepper.set(text(&a, "type_url")?, bytes(&a, "body")?),
            "remove" => stepper.remove(text(&a, "type_url")?, text(&a, "name")?),
            "handle" => stepper.handle(&bytes(&a, "bytes")?),
            "advance" => {
                let millis = a.get("millis").and_then(Value::as_u64).ok_or_else(|| {
                    Error::new(
                        ErrorKind::Usage,
                        "argument \"millis\" (a whole number) is required",
                    )
                })?;
                Ok(stepper.advance(millis))
            }
            other => Err(unknown("stepper", other)),
        }
    });
    answer(result)
}

fn unknown(object: &str, method: &str) -> Error {
    Error::new(
        ErrorKind::Usage,
        format!("a {object} has no method {method:?}"),
    )
}
