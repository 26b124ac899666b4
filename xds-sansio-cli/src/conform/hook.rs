//! The implementer's hook: how `conform` tells a real implementation what its application
//! does (start fresh, subscribe, publish a snapshot, stop). One JSON object per event,
//! delivered either to a command or as a line on a control socket (docs/conform.md).
//!
//! Decisions:
//! - **One message shape for both mechanisms.** A command gets the event as JSON on its
//!   standard input, and the words of it as arguments (`subscribe TYPE_URL NAME...`), so a
//!   shell script can ignore the JSON; a control socket gets the same JSON on one line and
//!   answers one line, `ok` or the reason it failed.
//! - **Bodies travel as base64.** A publication gives each resource's encoded body (the
//!   scenario's body for its tag), version, TTL and aliases, as the store operations of one
//!   `server` line: a server loads them as one snapshot.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use xds_sansio::server::StoreOp;
use xds_sansio::Variant;
use xds_sansio_conformance::script::{ClientCommand, Scenario, ServerCommand, TransportSpec};

/// Where hook events go.
pub enum Hook {
    /// No hook: a scenario that needs one fails at the line that does.
    None,
    /// A command run once per event (`sh -c`), the JSON on stdin.
    Command(String),
    /// A TCP control socket; connected on first use.
    Socket {
        /// `host:port`.
        addr: String,
        /// The connection, once made.
        conn: Option<BufReader<TcpStream>>,
    },
}

impl Hook {
    /// Delivers one event; `Err` with the reason the hook gives.
    pub fn send(&mut self, event: &Value) -> Result<(), String> {
        match self {
            Hook::None => Err(format!(
                "this line needs the implementer's hook (--hook or --hook-socket): {event}"
            )),
            Hook::Command(command) => run_command(command, event),
            Hook::Socket { addr, conn } => {
                if conn.is_none() {
                    *conn = Some(BufReader::new(connect(addr)?));
                }
                let Some(reader) = conn.as_mut() else {
                    return Err("hook socket: not connected".into());
                };
                let mut line = event.to_string();
                line.push('\n');
                if let Err(e) = reader.get_mut().write_all(line.as_bytes()) {
                    *conn = None;
                    return Err(format!("hook socket {addr}: {e}"));
                }
                let mut answer = String::new();
                match reader.read_line(&mut answer) {
                    Ok(0) | Err(_) => {
                        *conn = None;
                        Err(format!("hook socket {addr}: closed without an answer"))
                    }
                    Ok(_) if answer.trim() == "ok" => Ok(()),
                    Ok(_) => Err(format!("hook: {}", answer.trim())),
                }
            }
        }
    }
}

/// Connects to a control socket, retrying for a while (the implementation may still be
/// starting).
fn connect(addr: &str) -> Result<TcpStream, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect(addr) {
            Ok(stream) => {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
                return Ok(stream);
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("hook socket {addr}: {e}"));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The words of an event, as command arguments.
fn words(event: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["hook", "type_url"] {
        if let Some(text) = event.get(key).and_then(Value::as_str) {
            out.push(text.to_string());
        }
    }
    if let Some(names) = event.get("names").and_then(Value::as_array) {
        out.extend(names.iter().filter_map(Value::as_str).map(String::from));
    }
    out
}

fn run_command(command: &str, event: &Value) -> Result<(), String> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("{command} \"$@\""))
        .arg("xds-sansio-hook")
        .args(words(event))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("hook {command:?}: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = writeln!(stdin, "{event}");
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("hook {command:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "hook {command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `start`: a scenario begins; the implementation starts fresh. `address` is where a real
/// client connects (ours) or the real server (`--target`); `variant` and `transport` say
/// which stream the scenario uses (`sotw`/`delta`; `ads` or the type URL).
pub fn start(side: &str, scenario: &Scenario, file: &str, address: &str) -> Value {
    let variant = match scenario.variant {
        Variant::Sotw => "sotw",
        Variant::Delta => "delta",
    };
    let transport = match &scenario.transport {
        TransportSpec::Ads => "ads",
        TransportSpec::PerType(url) => url.as_str(),
    };
    json!({"hook": "start", "side": side, "title": scenario.title, "file": file,
        "address": address, "variant": variant, "transport": transport})
}

/// `stop`: the scenario ended; the implementation drops its state.
pub fn stop() -> Value {
    json!({"hook": "stop"})
}

/// A command of the client application.
pub fn client_command(command: &ClientCommand) -> Value {
    match command {
        ClientCommand::Subscribe(type_url, names) => {
            json!({"hook": "subscribe", "type_url": type_url, "names": names})
        }
        ClientCommand::Unsubscribe(type_url, names) => {
            json!({"hook": "unsubscribe", "type_url": type_url, "names": names})
        }
        ClientCommand::Defer(type_url) => json!({"hook": "defer", "type_url": type_url}),
        ClientCommand::Accept(type_url) => json!({"hook": "accept", "type_url": type_url}),
        ClientCommand::Reject(type_url, names, reason) => {
            json!({"hook": "reject", "type_url": type_url, "names": names, "reason": reason})
        }
    }
}

/// A publication: the store operations of one `server` line, then its resource errors
/// (`{"op":"error","type_url","name","code","message"}`; `{"op":"clear-error","type_url",
/// "name"}`; `name` `*` is the type's error).
pub fn publish(ops: &[StoreOp], errors: &[&ServerCommand]) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD;
    let ops: Vec<Value> = ops
        .iter()
        .map(|op| match op {
            StoreOp::Set { type_url, entry } => {
                let mut value = json!({
                    "op": "set",
                    "type_url": type_url,
                    "name": entry.name,
                    "body": b64.encode(&entry.body),
                });
                if let Some(version) = &entry.version {
                    value["version"] = json!(version);
                }
                if let Some(ttl) = entry.ttl {
                    value["ttl_ms"] = json!(ttl.as_millis() as u64);
                }
                if !entry.aliases.is_empty() {
                    value["aliases"] = json!(entry.aliases);
                }
                value
            }
            StoreOp::Remove { type_url, name } => {
                json!({"op": "remove", "type_url": type_url, "name": name})
            }
            StoreOp::ServeType { type_url } => json!({"op": "publish", "type_url": type_url}),
            StoreOp::SetError {
                type_url,
                name,
                status,
            } => json!({
                "op": "error",
                "type_url": type_url,
                "name": name,
                "code": status.code,
                "message": status.message,
            }),
            StoreOp::ClearError { type_url, name } => {
                json!({"op": "clear-error", "type_url": type_url, "name": name})
            }
        })
        .chain(errors.iter().filter_map(|command| match command {
            ServerCommand::Error {
                type_url,
                name,
                code,
                message,
            } => Some(json!({
                "op": "error",
                "type_url": type_url,
                "name": name,
                "code": code,
                "message": message,
            })),
            ServerCommand::ClearError(type_url, name) => {
                Some(json!({"op": "clear-error", "type_url": type_url, "name": name}))
            }
            _ => None,
        }))
        .collect();
    json!({"hook": "publish", "ops": ops})
}
