//! Shared by the client driver's tests: a server that can be killed and restarted on the
//! same port, resource bodies, and bounded waits on watches.
#![allow(dead_code)]

pub mod counting_recorder;
pub mod loopback;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::oneshot;
use xds_sansio::server::ResourceStore;
use xds_sansio_tonic::client::{Watch, WatchEvent};
use xds_sansio_tonic::{Callbacks, XdsServer, DEFAULT_GROUP};

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
    callbacks: Option<Arc<dyn Callbacks>>,
}

impl Killable {
    /// Starts on a free port.
    pub async fn start(fill: impl FnOnce(&mut ResourceStore)) -> Killable {
        Killable::start_with(None, fill).await
    }

    /// Starts on a free port with these callbacks (kept across restarts).
    pub async fn start_with(
        callbacks: Option<Arc<dyn Callbacks>>,
        fill: impl FnOnce(&mut ResourceStore),
    ) -> Killable {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut k = Killable {
            addr,
            server: None,
            stop: None,
            task: None,
            callbacks,
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
            callbacks: None,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn serve(&mut self, listener: tokio::net::TcpListener, fill: impl FnOnce(&mut ResourceStore)) {
        let mut builder = XdsServer::builder()
            .shutdown_grace(Duration::from_millis(200))
            // Placeholder bodies (`body`): the tests are about the client.
            .body_checks(xds_sansio::server::BodyChecks::Off);
        if let Some(callbacks) = &self.callbacks {
            builder = builder.callbacks(callbacks.clone());
        }
        let server = builder.build();
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

    /// Callbacks for the next start.
    pub fn callbacks_for_restart(&mut self, callbacks: Arc<dyn Callbacks>) {
        self.callbacks = Some(callbacks);
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

/// A TCP proxy on 127.0.0.1 in front of `upstream` that can stall: while stalled it
/// forwards nothing in either direction (a frozen server, as far as the client can tell),
/// and new connections are accepted but never forwarded.
pub struct StallProxy {
    pub addr: SocketAddr,
    pub stalled: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl StallProxy {
    pub async fn start(upstream: SocketAddr) -> StallProxy {
        use std::sync::atomic::{AtomicBool, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let stalled = Arc::new(AtomicBool::new(false));
        let flag = stalled.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else {
                    return;
                };
                let flag = flag.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = tokio::net::TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (ri, wi) = inbound.into_split();
                    let (ro, wo) = outbound.into_split();
                    let pipe = |flag: Arc<AtomicBool>| {
                        move |mut r: tokio::net::tcp::OwnedReadHalf,
                              mut w: tokio::net::tcp::OwnedWriteHalf| async move {
                            let mut buf = vec![0u8; 16 * 1024];
                            loop {
                                while flag.load(Ordering::Relaxed) {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                let n = match r.read(&mut buf).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(n) => n,
                                };
                                while flag.load(Ordering::Relaxed) {
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                                if w.write_all(&buf[..n]).await.is_err() {
                                    return;
                                }
                            }
                        }
                    };
                    let a = tokio::spawn(pipe(flag.clone())(ri, wo));
                    let b = tokio::spawn(pipe(flag)(ro, wi));
                    let _ = tokio::join!(a, b);
                });
            }
        });
        StallProxy {
            addr,
            stalled,
            task,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stall(&self, on: bool) {
        self.stalled.store(on, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A listener that accepts connections and never says a word (a server that stalls
/// before HTTP/2 starts), or answers every connection with `garbage` bytes.
pub struct Mute {
    pub addr: SocketAddr,
    pub accepted: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Mute {
    pub async fn start(garbage: Option<Vec<u8>>) -> Mute {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                count.fetch_add(1, Ordering::Relaxed);
                if let Some(bytes) = &garbage {
                    let _ = socket.write_all(bytes).await;
                }
                held.push(socket);
            }
        });
        Mute {
            addr,
            accepted,
            task,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Mute {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A gRPC server whose ADS answers every stream with one message of `garbage` bytes (not
/// a `DiscoveryResponse`), on 127.0.0.1.
pub struct GarbageServer {
    pub addr: SocketAddr,
    pub streams: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

mod garbage {
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    use bytes::{BufMut, Bytes};
    use tonic::body::Body;
    use tonic::codec::{Codec, EncodeBuf, Encoder};
    use tonic::codegen::{http, Service};
    use tonic::server::{Grpc, NamedService, StreamingService};
    use tonic::{Status, Streaming};
    use tonic_prost::{ProstCodec, ProstDecoder};
    use xds_sansio::pb::discovery::DiscoveryRequest;

    #[derive(Default)]
    pub struct RawCodec(ProstCodec<DiscoveryRequest, DiscoveryRequest>);
    pub struct RawEncoder;
    impl Encoder for RawEncoder {
        type Item = Bytes;
        type Error = Status;
        fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            dst.put(item);
            Ok(())
        }
    }
    impl Codec for RawCodec {
        type Encode = Bytes;
        type Decode = DiscoveryRequest;
        type Encoder = RawEncoder;
        type Decoder = ProstDecoder<DiscoveryRequest>;
        fn encoder(&mut self) -> RawEncoder {
            RawEncoder
        }
        fn decoder(&mut self) -> Self::Decoder {
            self.0.decoder()
        }
    }

    #[derive(Clone)]
    pub struct Ads {
        pub garbage: Bytes,
        pub streams: Arc<AtomicUsize>,
    }
    impl NamedService for Ads {
        const NAME: &'static str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
    }
    struct Handler(Bytes);
    impl StreamingService<DiscoveryRequest> for Handler {
        type Response = Bytes;
        type ResponseStream = tokio_stream::Once<Result<Bytes, Status>>;
        type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, Status>>;
        fn call(&mut self, _: tonic::Request<Streaming<DiscoveryRequest>>) -> Self::Future {
            std::future::ready(Ok(tonic::Response::new(tokio_stream::once(Ok(self
                .0
                .clone())))))
        }
    }
    impl Service<http::Request<Body>> for Ads {
        type Response = http::Response<Body>;
        type Error = Infallible;
        type Future = std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Self::Response, Infallible>> + Send>,
        >;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, request: http::Request<Body>) -> Self::Future {
            self.streams.fetch_add(1, Ordering::Relaxed);
            let garbage = self.garbage.clone();
            Box::pin(async move {
                let mut grpc = Grpc::new(RawCodec::default());
                Ok(grpc.streaming(Handler(garbage), request).await)
            })
        }
    }
}

impl GarbageServer {
    pub async fn start(garbage: Bytes) -> GarbageServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let streams = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let ads = garbage::Ads {
            garbage,
            streams: streams.clone(),
        };
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let task = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(ads)
                .serve_with_incoming(incoming)
                .await;
        });
        GarbageServer {
            addr,
            streams,
            task,
        }
    }

    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for GarbageServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
