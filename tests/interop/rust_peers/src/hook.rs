//! A `conform server` hook driven from a Rust driver (docs/conform.md, "The hook"): the
//! hook process started by the driver, its control socket, and the events `start`,
//! `publish` and `stop`. Shared by `hook_server_flow` and `authorities_flow`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use xds_sansio::Variant;

use crate::common::{self, Result, STEP};

/// `(type URL, name)` of a resource.
pub type Key = (String, String);

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// The hook process and its control socket.
pub struct Hook {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::net::tcp::OwnedReadHalf>>,
    write: tokio::net::tcp::OwnedWriteHalf,
    pub target: String,
}

impl Hook {
    pub async fn start(
        cmd: &str,
        control: &str,
        target: &str,
        workdir: &Path,
        log_name: &str,
    ) -> Result<Hook> {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let (program, args) = words.split_first().ok_or("--hook-cmd is empty")?;
        let log = std::fs::File::create(workdir.join(log_name)).map_err(|e| e.to_string())?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("{program}: {e}"))?;
        let socket = common::eventually("the hook's control socket", || async {
            TcpStream::connect(control).await.ok()
        })
        .await;
        let socket = match socket {
            Ok(s) => s,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        let (read, write) = socket.into_split();
        Ok(Hook {
            child,
            lines: BufReader::new(read).lines(),
            write,
            target: target.into(),
        })
    }

    /// Sends one event; the hook answers `ok` or why not.
    pub async fn send(&mut self, event: Value) -> Result<()> {
        let what = event["hook"].as_str().unwrap_or_default().to_string();
        self.write
            .write_all(format!("{event}\n").as_bytes())
            .await
            .map_err(|e| format!("hook {what}: {e}"))?;
        let answer = tokio::time::timeout(STEP, self.lines.next_line())
            .await
            .map_err(|_| format!("hook {what}: no answer"))?
            .map_err(|e| format!("hook {what}: {e}"))?
            .ok_or(format!("hook {what}: the hook closed its socket"))?;
        if answer.trim() == "ok" {
            Ok(())
        } else {
            Err(format!("hook {what}: {answer}"))
        }
    }

    pub async fn start_server(
        &mut self,
        label: &str,
        variant: Variant,
        per_type: bool,
    ) -> Result<()> {
        let variant = if variant == Variant::Delta {
            "delta"
        } else {
            "sotw"
        };
        // docs/conform.md: `ads` or the type URL; per type, the client opens one stream per
        // type (CDS and EDS): the field names the first.
        let transport = if per_type { CDS } else { "ads" };
        self.send(json!({
            "hook": "start", "side": "server", "title": label, "file": "hook_server_flow",
            "address": self.target, "variant": variant, "transport": transport,
        }))
        .await
    }

    /// One revision: `set` every resource given.
    pub async fn publish(&mut self, resources: &BTreeMap<Key, Vec<u8>>) -> Result<()> {
        let ops: Vec<Value> = resources
            .iter()
            .map(|((t, n), b)| {
                json!({"op": "set", "type_url": t, "name": n,
                       "body": base64::engine::general_purpose::STANDARD.encode(b)})
            })
            .collect();
        self.send(json!({"hook": "publish", "ops": ops})).await
    }
}

impl Drop for Hook {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
