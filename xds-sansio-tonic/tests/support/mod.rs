//! Shared by the client driver's tests: a server that can be killed and restarted on the
//! same port, resource bodies, and bounded waits on watches.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use xds_sansio::server::ResourceStore;
use xds_sansio_tonic::client::{Watch, WatchEvent};
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

pub const STEP: Duration = Duration::from_secs(10);

/// A Cluster-shaped body: the name in field 1, opaque content in field 2.
pub fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A management server on a fixed port that can be killed and started again (a new
/// process, as far as clients can tell: a fresh `XdsServer` fed by `fill`).
pub struct Killable {
    pub addr: SocketAddr,
    pub server: Option<XdsServer>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Killable {
    /// Starts on a free port.
    pub async fn start(fill: impl FnOnce(&mut ResourceStore)) -> Killable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut k = Killable {
            addr,
            server: None,
            stop: None,
            task: None,
        };
        k.serve(listener, fill);
        k
    }

    /// A server that is not running yet, on a free port.
    pub async fn reserve() -> Killable {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        Killable {
            addr,
            server: None,
            stop: None,
            task: None,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&mut self, listener: tokio::net::TcpListener, fill: impl FnOnce(&mut ResourceStore)) {
        let server = XdsServer::builder()
            .shutdown_grace(Duration::from_millis(200))
            .build();
        server.update(DEFAULT_GROUP, fill);
        let (tx, rx) = oneshot::channel::<()>();
        let s = server.clone();
        self.task = Some(tokio::spawn(async move {
            let _ = s
                .serve_with_listener(listener, async {
                    let _ = rx.await;
                })
                .await;
        }));
        self.server = Some(server);
        self.stop = Some(tx);
    }

    /// Starts (again) on the same port.
    pub async fn restart(&mut self, fill: impl FnOnce(&mut ResourceStore)) {
        let mut tries = 0;
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if tries < 100 => {
                    tries += 1;
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("cannot bind {} again: {e}", self.addr),
            }
        };
        self.serve(listener, fill);
    }

    /// Kills it: every stream ends, the port closes.
    pub async fn kill(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(STEP, task).await;
        }
        self.server = None;
    }

    pub fn update<R>(&self, change: impl FnOnce(&mut ResourceStore) -> R) -> R {
        self.server.as_ref().unwrap().update(DEFAULT_GROUP, change)
    }
}

/// Waits (bounded) for an event matching `want`, returning it; the events before it are
/// returned too.
pub async fn until(
    watch: &mut Watch,
    what: &str,
    want: impl Fn(&WatchEvent) -> bool,
) -> (WatchEvent, Vec<WatchEvent>) {
    until_within(watch, what, STEP, want).await
}

pub async fn until_within(
    watch: &mut Watch,
    what: &str,
    within: Duration,
    want: impl Fn(&WatchEvent) -> bool,
) -> (WatchEvent, Vec<WatchEvent>) {
    let deadline = tokio::time::Instant::now() + within;
    let mut before = Vec::new();
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Ok(Some(e)) if want(&e) => return (e, before),
            Ok(Some(e)) => before.push(e),
            Ok(None) => panic!("{what}: the watch ended; before: {before:#?}"),
            Err(_) => panic!("{what}: timed out; events before: {before:#?}"),
        }
    }
}

pub fn changed_to(name: &str, content: &str) -> impl Fn(&WatchEvent) -> bool {
    let (name, content) = (name.to_string(), content.to_string());
    move |e| matches!(e, WatchEvent::Changed { name: n, body, .. } if n.as_str() == name && contains(body, content.as_bytes()))
}

pub fn is_dne(name: &str) -> impl Fn(&WatchEvent) -> bool {
    let name = name.to_string();
    move |e| matches!(e, WatchEvent::DoesNotExist { name: n } if n.as_str() == name)
}

/// Nothing arrives for `quiet` (returns what did, for the assertion message).
pub async fn quiet(watch: &mut Watch, quiet: Duration) -> Vec<WatchEvent> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + quiet;
    while let Ok(Some(e)) = tokio::time::timeout_at(deadline, watch.next()).await {
        got.push(e);
    }
    got
}
