//! A scripted control plane in-process: the adapter's management server on a loopback
//! port, serving the resources it is given, recording every stream with the adapter's
//! recorder; its findings are the toolkit checker's on that recording. A test starts it,
//! points the implementation under test at `127.0.0.1:port()`, changes resources as its
//! story goes, and asserts on `findings()`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::server::{BodyChecks, StoreOp};
use xds_sansio_conformance::check::{self as checker, CheckSide};
use xds_sansio_conformance::faults::FaultPlan;
use xds_sansio_conformance::script;
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::{XdsServer, DEFAULT_GROUP};

use crate::check::{codec, findings, sides, Finding};
use crate::error::{Error, ErrorKind};
use crate::resources::{entry, Resources};

/// How to start a [`ControlPlane`].
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ControlPlaneOptions {
    /// Where to listen; `127.0.0.1:0` (a free loopback port) when absent.
    pub listen: Option<String>,
    /// The resources to serve first, as text: `{"resources": [Any, ...]}`
    /// ([`Resources::from_json`]).
    pub resources: Option<String>,
    /// The resources to serve first, from a file or a directory ([`Resources::from_path`]).
    pub resources_path: Option<String>,
    /// `FileDescriptorSet` files with the resource schemas, for canonical JSON resources
    /// (and for the recording's JSON).
    pub descriptors: Vec<String>,
    /// Fault rules, one per line (`drop type=cds nth=1`, `close after=3`, ...;
    /// docs/test-control-plane.md): every stream's responses go through them.
    pub faults: Option<String>,
    /// The seed of the faults' random draws (`p=`): the same seed, the same faults.
    pub seed: u64,
    /// A scenario whose server lines are played in time from the start (`wait` lines
    /// move time), after the resources above; its bodies are the replay's placeholders.
    pub scenario: Option<String>,
}

/// The adapter's management server, running on its own tokio runtime until [`stop`].
///
/// [`stop`]: ControlPlane::stop
pub struct ControlPlane {
    runtime: tokio::runtime::Runtime,
    server: XdsServer,
    recorder: Arc<Recorder>,
    codec: JsonCodec,
    address: SocketAddr,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// How long [`ControlPlane::stop`] waits for connections to close before dropping them (a
/// client whose host is blocked in `stop`, as node's event loop is, never answers).
const STOP_WAIT: Duration = Duration::from_secs(1);

impl ControlPlane {
    /// Starts serving (ADS and every per-type service, SotW and delta) with the resources
    /// of `options`, if any.
    pub fn start(options: &ControlPlaneOptions) -> Result<ControlPlane, Error> {
        let codec = codec(&options.descriptors)?;
        let mut initial = Resources::default();
        if let Some(text) = &options.resources {
            initial = Resources::from_json(text, &codec)?;
        }
        if let Some(path) = &options.resources_path {
            let more = Resources::from_path(std::path::Path::new(path), &codec)?;
            for (type_url, entries) in more.types {
                initial.types.entry(type_url).or_default().extend(entries);
            }
        }
        let listen = options.listen.as_deref().unwrap_or("127.0.0.1:0");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("xds-sansio-control-plane")
            .on_thread_start(crate::sigpipe::block_in_this_thread)
            .enable_all()
            .build()
            .map_err(|e| Error::new(ErrorKind::Io, format!("tokio runtime: {e}")))?;
        let io = |e: std::io::Error| Error::new(ErrorKind::Io, format!("listen on {listen}: {e}"));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind(listen))
            .map_err(io)?;
        let address = listener.local_addr().map_err(io)?;
        let recorder = Arc::new(Recorder::with_codec(None, codec.clone()));
        let plan = match &options.faults {
            Some(text) => FaultPlan::parse(text, options.seed).map_err(|e| {
                Error::at(ErrorKind::Usage, e.line, format!("faults: {}", e.message))
            })?,
            None => FaultPlan::default(),
        };
        let timeline = match &options.scenario {
            Some(text) => Some(script::server_timeline(
                &script::parse(text, "scenario").map_err(|e| {
                    Error::at(
                        ErrorKind::Scenario,
                        e.line,
                        format!("scenario: {}", e.message),
                    )
                })?,
            )),
            None => None,
        };
        let mut builder = XdsServer::builder()
            .callbacks(recorder.clone())
            .faults(plan);
        if timeline.is_some() {
            // A scenario's bodies stand for resources; they are not Envoy messages.
            builder = builder.body_checks(BodyChecks::Off);
        }
        let server = builder.build();
        let mut plane = ControlPlane {
            runtime,
            server,
            recorder,
            codec,
            address,
            serving: None,
        };
        // Published before serving: the first client sees the whole configuration.
        plane.replace(initial)?;
        if let Some(steps) = timeline {
            let server = plane.server.clone();
            // A line the store refuses is skipped: the recording and the findings show
            // what the client got.
            plane
                .runtime
                .spawn(async move { server.play(DEFAULT_GROUP, steps, |_, _| {}).await });
        }
        let server = plane.server.clone();
        plane.serving = Some(plane.runtime.spawn(async move {
            let _ = server
                .serve_with_listener(listener, std::future::pending())
                .await;
        }));
        Ok(plane)
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Makes the served configuration exactly `resources` (every type of the catalog not
    /// in it is emptied), as one publication: only what changed is pushed.
    pub fn replace(&self, resources: Resources) -> Result<(), Error> {
        let mut types = resources.types;
        for resource_type in xds_sansio::types::CATALOG {
            types.entry(resource_type.type_url.to_string()).or_default();
        }
        self.publish_snapshot(types)
    }

    /// Makes the served configuration exactly the resources in `text`
    /// ([`Resources::from_json`]).
    pub fn replace_json(&self, text: &str) -> Result<(), Error> {
        self.replace(Resources::from_json(text, &self.codec)?)
    }

    /// Adds or replaces one encoded resource of `type_url`, named as its body says.
    pub fn set(&self, type_url: &str, body: Bytes) -> Result<(), Error> {
        let entry = entry(body)?;
        self.publish(vec![StoreOp::Set {
            type_url: type_url.to_string(),
            entry,
        }])
    }

    /// Removes a resource (nothing happens when it is not served).
    pub fn remove(&self, type_url: &str, name: &str) -> Result<(), Error> {
        self.publish(vec![StoreOp::Remove {
            type_url: type_url.to_string(),
            name: name.to_string(),
        }])
    }

    /// Ends every open stream (clients reconnect and resume).
    pub fn end_streams(&self) {
        self.server.end_streams();
    }

    /// How many streams are open now.
    pub fn stream_count(&self) -> usize {
        self.server.stream_count()
    }

    /// How many lines the recording holds so far (requests, responses, store changes).
    pub fn recorded(&self) -> usize {
        self.recorder.recorded()
    }

    /// The recording so far, in the record format (JSON lines behind the header line), as
    /// the server saw it.
    pub fn records(&self) -> Result<String, Error> {
        checker::write_jsonl(
            &self.recorder.entries(),
            Some(CheckSide::Server),
            &self.codec,
        )
        .map_err(|e| Error::new(ErrorKind::Resources, format!("recording: {e}")))
    }

    /// The checker's findings on the recording so far: the client's (what the
    /// implementation under test did) and the server's (ours), or only `side`'s.
    pub fn findings(&self, side: Option<&str>) -> Result<Vec<Finding>, Error> {
        let sides = sides(side)?;
        Ok(findings(&self.recorder.entries(), &sides))
    }

    /// Stops serving: every stream ends, the port is released. Reads still work after.
    pub fn stop(&mut self) {
        self.server.shutdown();
        if let Some(mut serving) = self.serving.take() {
            let closed = self
                .runtime
                .block_on(async { tokio::time::timeout(STOP_WAIT, &mut serving).await.is_ok() });
            if !closed {
                serving.abort();
            }
        }
    }

    fn publish(&self, ops: Vec<StoreOp>) -> Result<(), Error> {
        let _guard = self.runtime.enter();
        self.server
            .publish(DEFAULT_GROUP, ops)
            .map(|_| ())
            .map_err(|e| Error::new(ErrorKind::Resources, e.to_string()))
    }

    fn publish_snapshot(
        &self,
        types: BTreeMap<String, Vec<xds_sansio::server::ResourceEntry>>,
    ) -> Result<(), Error> {
        let _guard = self.runtime.enter();
        self.server
            .publish_snapshot(DEFAULT_GROUP, types)
            .map(|_| ())
            .map_err(|e| Error::new(ErrorKind::Resources, e.to_string()))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
