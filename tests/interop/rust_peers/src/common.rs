//! What every Rust peer driver shares: our `ads_server` example as a child process (its
//! resources file, SIGHUP to reload, SIGUSR1 to end every stream, its JSON-lines record),
//! bounded waits, and the JSON report.
#![allow(dead_code)]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

/// Every wait in a story is bounded by this.
pub const STEP: Duration = Duration::from_secs(20);

pub type Result<T> = std::result::Result<T, String>;

/// Our management server, started by the test on 127.0.0.1.
pub struct AdsServer {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    resources: PathBuf,
    /// The recorded conversation (JSON lines).
    pub record: PathBuf,
}

impl AdsServer {
    /// Starts `binary` serving `resources` (written first), recording into `workdir`.
    pub fn start(binary: &str, workdir: &Path, resources: &[(String, Vec<u8>)]) -> Result<Self> {
        std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
        let file = workdir.join("resources.json");
        write_resources(&file, resources)?;
        let record = workdir.join("record.jsonl");
        let log =
            std::fs::File::create(workdir.join("ads_server.log")).map_err(|e| e.to_string())?;
        let mut child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0", "--verbose", "--resources"])
            .arg(&file)
            .arg("--record")
            .arg(&record)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("{binary}: {e}"))?;
        let addr = listening_address(&mut child, "ads_server")?;
        Ok(AdsServer {
            addr,
            child,
            resources: file,
            record,
        })
    }

    /// Replaces what the server serves and tells it to reload.
    pub fn publish(&self, resources: &[(String, Vec<u8>)]) -> Result<()> {
        write_resources(&self.resources, resources)?;
        self.signal("HUP")
    }

    /// Ends every open stream (the client must reconnect).
    pub fn end_streams(&self) -> Result<()> {
        self.signal("USR1")
    }

    fn signal(&self, name: &str) -> Result<()> {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .map_err(|e| e.to_string())?;
        status
            .success()
            .then_some(())
            .ok_or(format!("kill -{name} failed"))
    }

    /// The message lines recorded so far.
    pub fn messages(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v.get("dir").is_some())
            .collect()
    }

    /// Waits for a recorded message; returns its index and the line.
    pub async fn wait_record(
        &self,
        what: &str,
        mut predicate: impl FnMut(usize, &Value) -> bool,
    ) -> Result<(usize, Value)> {
        let deadline = tokio::time::Instant::now() + STEP;
        while tokio::time::Instant::now() < deadline {
            if let Some((i, l)) = self
                .messages()
                .into_iter()
                .enumerate()
                .find(|(i, l)| predicate(*i, l))
            {
                return Ok((i, l));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(format!("timed out waiting in the record for: {what}"))
    }
}

impl AdsServer {
    /// Waits until the client has answered (ACK or NACK) the last response of every type.
    pub async fn settled(&self) -> Result<()> {
        eventually("every response answered", || async {
            let mut open = std::collections::BTreeMap::new();
            for l in self.messages() {
                let m = &l["message"];
                let key = (
                    l["stream"].as_u64(),
                    m["typeUrl"].as_str().map(String::from),
                );
                if l["dir"] == "S->C" {
                    open.insert(key, m["nonce"].clone());
                } else if open.get(&key) == Some(&m["responseNonce"]) {
                    open.remove(&key);
                }
            }
            open.is_empty().then_some(())
        })
        .await
    }
}

impl Drop for AdsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `{"resources": [{"@type", "value": base64}]}` atomically.
fn write_resources(path: &Path, resources: &[(String, Vec<u8>)]) -> Result<()> {
    let items: Vec<Value> = resources
        .iter()
        .map(|(type_url, body)| {
            json!({"@type": type_url, "value": base64::engine::general_purpose::STANDARD.encode(body)})
        })
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, json!({ "resources": items }).to_string()).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())
}

/// Polls `f` until it returns `Some`, at most [`STEP`].
pub async fn eventually<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("timed out waiting for: {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The report a driver writes (steps, deviations, result).
#[derive(Default)]
pub struct Report {
    pub peer: String,
    pub steps: Vec<Value>,
    pub deviations: Vec<String>,
}

impl Report {
    pub fn step(&mut self, step: &str, detail: Value) {
        println!("[{}] {step}: {detail}", self.peer);
        self.steps.push(json!({"step": step, "detail": detail}));
    }

    /// Writes `workdir/report.json` and exits non-zero on failure.
    pub fn finish(self, workdir: &Path, result: Result<()>) -> ! {
        let (text, code) = match &result {
            Ok(()) => ("passed".to_string(), 0),
            Err(e) => (format!("FAILED: {e}"), 1),
        };
        let report = json!({
            "peer": self.peer, "steps": self.steps, "deviations": self.deviations, "result": text
        });
        let pretty = serde_json::to_string_pretty(&report).unwrap();
        let _ = std::fs::create_dir_all(workdir);
        let _ = std::fs::write(workdir.join("report.json"), &pretty);
        println!("{pretty}");
        std::process::exit(code)
    }
}

/// The short name of a type URL.
pub fn short(type_url: &str) -> &str {
    type_url.rsplit('.').next().unwrap_or(type_url)
}

/// `xds-sansio tap` between a client and the server, when `XDS_TAP` names the binary: it
/// records into `WORKDIR/tap.jsonl`, prints into `WORKDIR/tap.txt`, and is ended with
/// SIGTERM (its closing line) when dropped.
pub struct Tap {
    child: Child,
    /// The address the client dials instead of the server's.
    pub addr: String,
}

impl Tap {
    /// Starts the tap in front of `upstream` if `XDS_TAP` is set.
    #[allow(dead_code)]
    pub fn start(upstream: &str, workdir: &Path) -> Result<Option<Tap>> {
        let Ok(binary) = std::env::var("XDS_TAP") else {
            return Ok(None);
        };
        let out_path = workdir.join("tap.txt");
        let out = std::fs::File::create(&out_path).map_err(|e| e.to_string())?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = std::process::Command::new(binary)
            .args([
                "tap",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                upstream,
                "--record",
            ])
            .arg(workdir.join("tap.jsonl"))
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("xds-sansio tap: {e}"))?;
        let mut tap = Tap {
            child,
            addr: String::new(),
        };
        for _ in 0..200 {
            let text = std::fs::read_to_string(&out_path).unwrap_or_default();
            if let Some(rest) = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("tap listening on "))
            {
                tap.addr = rest
                    .split([',', ' '])
                    .next()
                    .unwrap_or_default()
                    .to_string();
                return Ok(Some(tap));
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        Err("the tap did not start".into())
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Real resources (envoy-types): a Cluster or a ClusterLoadAssignment named `name`.
pub fn envoy_body(type_url: &str, name: &str, note: &str) -> Vec<u8> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::core::v3::Locality;
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, LocalityLbEndpoints,
    };
    use prost::Message;
    if type_url == "type.googleapis.com/envoy.config.cluster.v3.Cluster" {
        Cluster {
            name: name.into(),
            alt_stat_name: note.into(),
            ..Default::default()
        }
        .encode_to_vec()
    } else {
        ClusterLoadAssignment {
            cluster_name: name.into(),
            endpoints: vec![LocalityLbEndpoints {
                locality: Some(Locality {
                    region: note.into(),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
    }
}

/// The value after `--name` on the command line.
pub fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Reads the `listening on ADDR` line a server child prints first (bounded by [`STEP`]);
/// kills the child when it does not come.
pub fn listening_address(child: &mut Child, what: &str) -> Result<String> {
    let Some(stdout) = child.stdout.take() else {
        return Err(format!("{what}: its stdout is not piped"));
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(STEP).unwrap_or_default();
    match line.trim().strip_prefix("listening on ") {
        Some(addr) => Ok(addr.to_string()),
        None => {
            let _ = child.kill();
            Err(format!("{what} did not start: {line:?}"))
        }
    }
}

/// The next event of any of `watches`, with the key it is watched under, before
/// `deadline` (`None` past it).
pub async fn next_watch_event<K: Clone>(
    watches: &mut [(K, xds_sansio_tonic::client::Watch)],
    deadline: tokio::time::Instant,
) -> Option<(K, xds_sansio_tonic::client::WatchEvent)> {
    let poll = async {
        loop {
            for (key, w) in watches.iter_mut() {
                if let Some(e) = w.try_next() {
                    return (key.clone(), e);
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout_at(deadline, poll).await.ok()
}
