//! A real etcd cluster for the replica tests: Debian's `etcd` (installed by
//! `scripts/etcd.sh`), members on 127.0.0.1 ports of their own, data in a temporary
//! directory removed on drop, every wait bounded. It fails loudly: a test that needs etcd
//! and cannot have it panics, it is never skipped.
#![allow(dead_code)]

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use xds_sansio_tonic::etcd::wire::{Member, RangeRequest};

/// The etcd binary, installed if missing (panics, with the script's output, if it cannot be).
pub fn etcd_binary() -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/etcd.sh");
    let out = Command::new("bash")
        .arg(script)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("!!! cannot run {script}: {e} !!!"));
    assert!(
        out.status.success(),
        "!!! ETCD COULD NOT BE INSTALLED ({script} failed: {}) !!!",
        out.status
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A port nobody listens on now (bound and released; the kernel does not hand it out
/// again at once).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

struct MemberProcess {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// An etcd cluster of local processes.
pub struct EtcdCluster {
    binary: PathBuf,
    dir: PathBuf,
    token: String,
    members: Vec<MemberProcess>,
}

static CLUSTERS: AtomicUsize = AtomicUsize::new(0);

impl EtcdCluster {
    /// Starts `n` members and waits (bounded) until the cluster answers a read.
    pub async fn start(n: usize) -> EtcdCluster {
        let binary = etcd_binary();
        let unique = format!(
            "xds-etcd-{}-{}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(&unique);
        std::fs::create_dir_all(&dir).unwrap();
        let members = (0..n)
            .map(|i| MemberProcess {
                name: format!("m{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let mut cluster = EtcdCluster {
            binary,
            dir,
            token: unique,
            members,
        };
        for i in 0..n {
            cluster.spawn(i, "new");
        }
        cluster.wait_ready(Duration::from_secs(30)).await;
        cluster
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize, state: &str) {
        let initial = self.initial_cluster();
        let m = &self.members[i];
        let data = self.dir.join(&m.name);
        let log = std::fs::File::create(self.dir.join(format!("{}.log", m.name))).unwrap();
        let client = format!("http://127.0.0.1:{}", m.client_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let child = Command::new(&self.binary)
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&data)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", state])
            // Short timings: a lost leader is noticed within a second.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            // Publications of a whole directory are one transaction.
            .args(["--max-txn-ops", "100000", "--max-request-bytes", "33554432"])
            .args(["--logger", "zap", "--log-level", "warn"])
            // etcd 3.4 refuses to start on arm64 without it (Go's name for the arch).
            .env("ETCD_UNSUPPORTED_ARCH", go_arch())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("!!! cannot start etcd: {e} !!!"));
        self.members[i].child = Some(child);
    }

    /// Waits until a read through any member succeeds (a leader exists).
    pub async fn wait_ready(&self, within: Duration) {
        let deadline = Instant::now() + within;
        loop {
            for endpoint in self.endpoints() {
                if let Ok(mut m) = Member::connect(&endpoint, Duration::from_secs(1)).await {
                    let read = RangeRequest {
                        key: b"/ready".to_vec(),
                        ..Default::default()
                    };
                    if m.range(read).await.is_ok() {
                        return;
                    }
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "!!! THE ETCD CLUSTER DID NOT BECOME READY within {within:?}; logs in {}:\n{} !!!",
                    self.dir.display(),
                    self.logs()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The tail of every member's log.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for m in &self.members {
            let text = std::fs::read_to_string(self.dir.join(format!("{}.log", m.name)))
                .unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(15).collect();
            out.push_str(&format!("--- {}\n", m.name));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
        out
    }

    /// Every member's client endpoint.
    pub fn endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// One member's client endpoint.
    pub fn endpoint(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.members[i].client_port)
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.members[i].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts member `i` again on its data.
    pub fn restart(&mut self, i: usize) {
        assert!(self.members[i].child.is_none(), "member {i} is running");
        self.spawn(i, "existing");
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP proxy on 127.0.0.1 in front of one address that can be cut: cutting closes every
/// connection through it and refuses new ones (the network between a replica and etcd
/// is down); restoring accepts again on the same port.
pub struct CutProxy {
    addr: SocketAddr,
    upstream: String,
    accept: Option<JoinHandle<()>>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl CutProxy {
    /// A proxy to `upstream` (`host:port`), open.
    pub async fn start(upstream: &str) -> CutProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut proxy = CutProxy {
            addr,
            upstream: upstream.to_string(),
            accept: None,
            links: Arc::new(Mutex::new(Vec::new())),
        };
        proxy.accept = Some(proxy.serve(listener));
        proxy
    }

    /// Where to connect.
    pub fn endpoint(&self) -> String {
        self.addr.to_string()
    }

    fn serve(&self, listener: tokio::net::TcpListener) -> JoinHandle<()> {
        let upstream = self.upstream.clone();
        let links = self.links.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let upstream = upstream.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(&upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                links.lock().await.push(link);
            }
        })
    }

    /// Closes every connection and refuses new ones.
    pub async fn cut(&mut self) {
        if let Some(accept) = self.accept.take() {
            accept.abort();
            let _ = accept.await;
        }
        for link in self.links.lock().await.drain(..) {
            link.abort();
        }
    }

    /// Accepts again, on the same port.
    pub async fn restore(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("cannot listen on {} again: {e}", self.addr),
            }
        };
        self.accept = Some(self.serve(listener));
    }
}
