//! The worked example of `xds-sansio conform`'s hook (docs/conform.md): the adapter's
//! client or server, driven by a control socket.
//!
//! ```sh
//! # A real client under test: conform is its management server.
//! cargo run -p xds-sansio-cli --example conform_peer -- client --control 127.0.0.1:7001 &
//! xds-sansio conform client --listen 127.0.0.1:0 --hook-socket 127.0.0.1:7001 scenarios/
//!
//! # A real server under test: conform is its client.
//! cargo run -p xds-sansio-cli --example conform_peer -- server --control 127.0.0.1:7002 --listen 127.0.0.1:18000 &
//! xds-sansio conform server --target 127.0.0.1:18000 --hook-socket 127.0.0.1:7002 scenarios/
//! ```
//!
//! Every line on the control socket is one JSON event; the answer is one line, `ok` or the
//! reason it failed. `start` begins a scenario from nothing (a client: a new
//! `xds_sansio::Client` dialing `address` with the scenario's variant and transport, node
//! `client`; a server: an empty store, here a fresh node group); `subscribe` and
//! `unsubscribe` are the client application's; `publish` loads store operations (bodies
//! in base64, resource errors as `StoreOp::SetError`/`ClearError`) as one revision; `stop`
//! ends the scenario.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::server::{ResourceEntry, StoreOp};
use xds_sansio::time::StdClock;
use xds_sansio::{Client, ClientConfig, ClientEvent, Transport, Variant};
use xds_sansio_tonic::call::run_until_stopped;
use xds_sansio_tonic::client::{ManagementServer, StreamCommand};
use xds_sansio_tonic::XdsServer;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn text<'a>(event: &'a Value, key: &str) -> &'a str {
    event.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn names(event: &Value) -> Vec<String> {
    event
        .get("names")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// The client under test: one `xds_sansio::Client` per scenario, reconnecting until stopped.
#[derive(Default)]
struct ClientPeer {
    commands: Option<mpsc::UnboundedSender<StreamCommand>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ClientPeer {
    async fn handle(&mut self, event: &Value) -> Result<(), String> {
        match text(event, "hook") {
            "start" => {
                self.stop().await;
                let variant = match text(event, "variant") {
                    "delta" => Variant::Delta,
                    _ => Variant::Sotw,
                };
                let transport = match text(event, "transport") {
                    "ads" | "" => Transport::Aggregated,
                    url => Transport::PerType(url.into()),
                };
                let node = Node {
                    id: "client".into(),
                    ..Node::default()
                };
                let client = Client::new(ClientConfig::new(variant, transport, node));
                let uri = format!("http://{}", text(event, "address"));
                let (tx, rx) = mpsc::unbounded_channel();
                self.commands = Some(tx);
                self.task = Some(tokio::spawn(drive(client, uri, rx)));
                Ok(())
            }
            hook @ ("subscribe" | "unsubscribe") => {
                let type_url = text(event, "type_url").to_string();
                let names = names(event);
                let subscribe = hook == "subscribe";
                let apply = StreamCommand::Apply(Box::new(move |client: &mut Client| {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    let result = if subscribe {
                        client.subscribe(&type_url, &names)
                    } else {
                        client.unsubscribe(&type_url, &names)
                    };
                    if let Err(e) = result {
                        eprintln!("conform_peer: {e}");
                    }
                }));
                self.commands
                    .as_ref()
                    .ok_or("no scenario started")?
                    .send(apply)
                    .map_err(|_| "the client is gone".to_string())
            }
            "stop" => {
                self.stop().await;
                Ok(())
            }
            other => Err(format!("this peer does not do {other:?}")),
        }
    }

    async fn stop(&mut self) {
        if let Some(commands) = self.commands.take() {
            let _ = commands.send(StreamCommand::Stop);
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
        }
    }
}

/// The application's loop: one call after another (50 ms apart) until `Stop`.
async fn drive(
    mut client: Client,
    uri: String,
    mut commands: mpsc::UnboundedReceiver<StreamCommand>,
) {
    let server = ManagementServer::insecure(uri);
    let mut on_event = |_: &Client, _: ClientEvent| {};
    let clock = StdClock::new();
    run_until_stopped(&mut client, &server, &clock, &mut commands, &mut on_event).await;
}

/// The server under test: one `XdsServer`; each scenario reads a fresh node group.
struct ServerPeer {
    server: XdsServer,
    epoch: Arc<AtomicU64>,
}

impl ServerPeer {
    fn group(&self) -> String {
        format!("scenario-{}", self.epoch.load(Ordering::SeqCst))
    }

    fn handle(&mut self, event: &Value) -> Result<(), String> {
        match text(event, "hook") {
            "start" => {
                self.epoch.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
            "publish" => {
                let b64 = base64::engine::general_purpose::STANDARD;
                let mut ops = Vec::new();
                for op in event
                    .get("ops")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let type_url = text(op, "type_url").to_string();
                    let name = text(op, "name").to_string();
                    ops.push(match text(op, "op") {
                        "set" => {
                            let body = b64
                                .decode(text(op, "body"))
                                .map_err(|e| format!("{name}: {e}"))?;
                            let mut entry = ResourceEntry::new(name, body.into());
                            if let Some(version) = op.get("version").and_then(Value::as_str) {
                                entry = entry.with_version(version);
                            }
                            if let Some(ms) = op.get("ttl_ms").and_then(Value::as_u64) {
                                entry = entry.with_ttl(Duration::from_millis(ms));
                            }
                            let aliases = names(&serde_json::json!({"names": op.get("aliases")}));
                            if !aliases.is_empty() {
                                entry = entry.with_aliases(aliases);
                            }
                            StoreOp::Set { type_url, entry }
                        }
                        "remove" => StoreOp::Remove { type_url, name },
                        "publish" => StoreOp::ServeType { type_url },
                        "error" => StoreOp::SetError {
                            type_url,
                            name,
                            status: Status {
                                code: op.get("code").and_then(Value::as_i64).unwrap_or(0) as i32,
                                message: text(op, "message").to_string(),
                                details: Vec::new(),
                            },
                        },
                        "clear-error" => StoreOp::ClearError { type_url, name },
                        other => return Err(format!("this peer does not do the op {other:?}")),
                    });
                }
                self.server
                    .publish(&self.group(), ops)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            "stop" => Ok(()),
            other => Err(format!("this peer does not do {other:?}")),
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let control = arg(&args, "--control").unwrap_or_else(|| "127.0.0.1:7001".into());
    let role = args.get(1).cloned().unwrap_or_default();
    let listen = arg(&args, "--listen").unwrap_or_else(|| "127.0.0.1:18000".into());
    let control = tokio::net::TcpListener::bind(&control).await?;
    println!(
        "conform_peer {role}: control socket on {}",
        control.local_addr()?
    );
    let xds = tokio::net::TcpListener::bind(&listen).await?;
    run(&role, control, xds).await
}

/// Plays `role` (`client` or `server`, the latter serving xDS on `xds`) for one conform
/// run on the control socket; returns when the run closes the socket.
pub async fn run(
    role: &str,
    control: tokio::net::TcpListener,
    xds: tokio::net::TcpListener,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut client = ClientPeer::default();
    let mut server = None;
    if role == "server" {
        let epoch = Arc::new(AtomicU64::new(0));
        let groups = epoch.clone();
        let server_xds = XdsServer::builder()
            // A conformance harness serves the scenarios' placeholder bodies.
            .body_checks(xds_sansio::server::BodyChecks::Off)
            .node_group(move |_| format!("scenario-{}", groups.load(Ordering::SeqCst)))
            .build();
        tokio::spawn(
            server_xds
                .clone()
                .serve_with_listener(xds, std::future::pending()),
        );
        server = Some(ServerPeer {
            server: server_xds,
            epoch,
        });
    } else if role == "client" {
        drop(xds);
    } else {
        return Err("usage: conform_peer client|server --control ADDR [--listen ADDR]".into());
    }
    // One conform run at a time; the peer ends when the run closes the socket.
    let (socket, _) = control.accept().await?;
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        if std::env::var_os("CONFORM_PEER_DEBUG").is_some() {
            eprintln!("conform_peer: {line}");
        }
        let answer = match serde_json::from_str::<Value>(&line) {
            Err(e) => Err(e.to_string()),
            Ok(event) => match server.as_mut() {
                Some(server) => server.handle(&event),
                None => client.handle(&event).await,
            },
        };
        let reply = match answer {
            Ok(()) => "ok\n".to_string(),
            Err(e) => format!("{}\n", e.replace('\n', " ")),
        };
        write.write_all(reply.as_bytes()).await?;
    }
    client.stop().await;
    Ok(())
}
