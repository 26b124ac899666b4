//! One task per gRPC stream, driving one `ServerStream` exactly as the core's contract
//! says: after every input (a request, a store change that concerns the stream, a
//! deadline) drain `poll_event`, then `poll_response_encoded` until `None`, then sleep until
//! the next input or `poll_timeout`.
//!
//! Flow control ("latest state wins"): the task builds the next response only when the
//! one before it has left for the transport (a channel of one slot between the task and
//! tonic, which takes from it only as fast as HTTP/2 flow control lets it write). Until
//! then the core keeps what changed as state, not as queued responses, so a burst of store
//! changes while the peer is slow becomes one response with the newest state. A stalled
//! peer holds at most one built response in the slot and one in the transport; it never
//! blocks the publisher (which only wakes the task) nor any other stream.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::{mpsc, watch, Notify};
use tonic::{Status, Streaming};
use tracing::Instrument;
use xds_sansio::server::{EncodedBytes, EncodedResponse, ServerEvent};
use xds_sansio::time::Instant;
use xds_sansio::{Request, ServerConfig, ServerStream};

use super::admission::{Arrival, Decision, ShedReason};
use super::admitting::{Admitting, Queued};
use super::applied::NodeApplied;
use super::ending::Ending;
use super::faults::{Out, StreamFaults};
use super::group::Group;
use super::hooks::{Peer, StreamInfo};
use super::{metrics, Shared};
use crate::call::sleep_until;
use crate::wire::WireRequest;

/// The sending half of a stream: what tonic writes, in order.
pub(crate) type Outbound = mpsc::Sender<Result<EncodedBytes, Status>>;

/// Counts the stream as open while it lives.
pub(crate) struct OpenSlot(pub(crate) Arc<Shared>);

impl Drop for OpenSlot {
    fn drop(&mut self) {
        self.0.release_stream();
    }
}

/// Holds the stream's place with storm protection while it lives.
struct AdmissionSlot(Arc<Shared>);

impl Drop for AdmissionSlot {
    fn drop(&mut self) {
        self.0.release_admission();
    }
}

/// Holds a new stream's place in storm protection's window until it settles: its first
/// response acknowledged, its `window_timeout` passed, or the stream ended.
struct WarmingSlot {
    shared: Arc<Shared>,
    /// When it began to warm (how long streams take is one measure of the window's pace).
    since: Instant,
    /// `None`: a timeout too long to fall due.
    until: Option<tokio::time::Instant>,
}

impl WarmingSlot {
    fn new(shared: Arc<Shared>, timeout: std::time::Duration) -> WarmingSlot {
        metrics::warming(1.0);
        WarmingSlot {
            since: shared.clock.now(),
            shared,
            until: tokio::time::Instant::now().checked_add(timeout),
        }
    }
}

impl Drop for WarmingSlot {
    fn drop(&mut self) {
        metrics::warming(-1.0);
        self.shared.settle_warming(self.since);
    }
}

/// How a queued stream's wait for its place in the window ended.
enum QueueWait {
    Granted,
    GaveUp,
    Shutdown,
}

/// Waits for a queued stream's place in storm protection's window: `Ok(shutting_down)`
/// once it holds one (granted before it gave up, or as a shutdown began), `Err` with the
/// stream's ending when it gave up first (shed, or shut down).
async fn wait_for_place(
    shared: &Shared,
    admitting: &Admitting,
    queued: Queued,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<bool, Ending> {
    metrics::waiting(1.0);
    let at = shared.clock.to_std(queued.until);
    let wait = tokio::select! {
        granted = queued.granted => match granted {
            Ok(()) => QueueWait::Granted,
            Err(_) => QueueWait::GaveUp,
        },
        () = tokio::time::sleep_until(at.into()) => QueueWait::GaveUp,
        _ = shutdown.changed() => QueueWait::Shutdown,
    };
    metrics::waiting(-1.0);
    if matches!(wait, QueueWait::Granted) {
        return Ok(false);
    }
    // Unless its place was granted meanwhile (then it is warming).
    match admitting.abandon(shared.clock.now(), queued.ticket) {
        None => Ok(matches!(wait, QueueWait::Shutdown)),
        Some(_) if matches!(wait, QueueWait::Shutdown) => Err(Ending::Shutdown),
        Some(retry_after) => {
            metrics::shed(ShedReason::Window);
            Err(Ending::Shed {
                reason: ShedReason::Window,
                retry_after,
            })
        }
    }
}

/// Everything the task holds besides the core's stream.
struct Driver {
    shared: Arc<Shared>,
    info: StreamInfo,
    group: Option<Arc<Group>>,
    waker: Arc<Notify>,
    /// The store change the next responses carry, for the push latency metric.
    pending_push: Option<std::time::Instant>,
    /// Per type, the last response built for a store change: its nonce and that change.
    pushes: HashMap<String, (String, std::time::Instant)>,
    /// Between the core and the wire: what leaves, when (a fault plan's machine, if any).
    faults: StreamFaults,
    /// Whether storm protection has yet to decide (at the first request).
    admission_pending: bool,
    /// The place storm protection gave the stream.
    admission: Option<AdmissionSlot>,
    /// Its place in storm protection's window, while it warms.
    warming: Option<WarmingSlot>,
    /// Its applied state, once anything was sent: refreshed in place on every response
    /// and every answer, then copied to the server's registry.
    applied: Option<NodeApplied>,
}

/// Spawns the task for a new stream.
pub(crate) fn spawn<Req: WireRequest>(
    shared: Arc<Shared>,
    slot: OpenSlot,
    info: StreamInfo,
    config: ServerConfig,
    inbound: Streaming<Req>,
    tx: Outbound,
) {
    let span = tracing::info_span!(
        "xds_stream",
        id = info.id,
        method = info.method,
        peer = ?info.peer.remote_addr,
        node = tracing::field::Empty,
        group = tracing::field::Empty,
    );
    tokio::spawn(
        async move {
            let _slot = slot;
            #[cfg(feature = "faults")]
            let faults = StreamFaults::of(shared.options.faults.as_deref(), info.id);
            #[cfg(not(feature = "faults"))]
            let faults = StreamFaults::default();
            let driver = Driver {
                admission_pending: shared.admission.is_some(),
                admission: None,
                warming: None,
                applied: None,
                shared,
                info,
                group: None,
                waker: Arc::new(Notify::new()),
                pending_push: None,
                pushes: HashMap::new(),
                faults,
            };
            driver.run(config, inbound, tx).await;
        }
        .instrument(span),
    );
}

impl Driver {
    async fn run<Req: WireRequest>(
        mut self,
        config: ServerConfig,
        mut inbound: Streaming<Req>,
        tx: Outbound,
    ) {
        metrics::stream_opened(self.info.variant, &self.info.transport);
        self.shared.callbacks.stream_opened(&self.info);
        tracing::debug!("stream opened");
        let mut stream = ServerStream::new(config);
        let ending = self.drive(&mut stream, &mut inbound, &tx).await;
        let status = ending.status();
        ending.trace();
        metrics::stream_closed(ending.label());
        if let Some(status) = &status {
            // After the response in flight, if the transport takes it in time.
            let grace = self.shared.options.shutdown_grace;
            let _ = tokio::time::timeout(grace, tx.send(Err(status.clone()))).await;
        }
        self.shared.applied.remove(self.info.id);
        if let Some(group) = self.group.take() {
            group.leave(self.info.id, &stream.subscriptions());
            self.shared.forget_if_unused(&group);
        }
        self.shared
            .callbacks
            .stream_closed(&self.info, status.as_ref());
    }

    /// Runs the stream until it ends; returns why.
    async fn drive<Req: WireRequest>(
        &mut self,
        stream: &mut ServerStream,
        inbound: &mut Streaming<Req>,
        tx: &Outbound,
    ) -> Ending {
        let shared = self.shared.clone();
        let mut shutdown = shared.shutdown.subscribe();
        let mut generation = shared.generation.subscribe();
        generation.mark_unchanged();
        if *shutdown.borrow_and_update() {
            return Ending::Shutdown;
        }
        if let Some(refused) = self.faults.open() {
            return refused;
        }
        let first_deadline = shared
            .options
            .first_request_timeout
            .map(|t| tokio::time::Instant::now() + t);
        // Whether the core may have a response to build (after an input).
        let mut want_send = false;
        // The time of the last poll that built nothing: a deadline not after it is spent.
        let mut quiet_at: Option<Instant> = None;
        loop {
            if let Some(ending) = self.drain_events(stream) {
                return ending;
            }
            if let Some(error) = stream.closed_by() {
                return Ending::Protocol(error.clone());
            }
            let deadline = if want_send {
                None
            } else {
                stream
                    .poll_timeout()
                    .filter(|t| quiet_at.is_none_or(|quiet| *t > quiet))
                    .map(|t| shared.clock.to_std(t))
            };
            let waiting_for_node = self.group.is_none();
            let warm_until = self.warming.as_ref().and_then(|w| w.until);
            let due = self.faults.is_due(|| shared.clock.now());
            // Armed only while nothing is due, so a full slot never makes the loop spin.
            let held_until = match due {
                true => None,
                false => self.faults.timeout().map(|t| shared.clock.to_std(t)),
            };
            // No `biased`: a peer that floods requests must not starve its responses, nor
            // a busy store its requests.
            tokio::select! {
                _ = shutdown.changed() => return Ending::Shutdown,
                _ = generation.changed() => return Ending::Ended,
                message = inbound.message() => match message {
                    Ok(Some(message)) => {
                        let request = message.into_request();
                        metrics::request(request.type_url());
                        shared.callbacks.request(&self.info, &request);
                        if self.admission_pending {
                            if let Some(ending) = self.admit(&request, &mut shutdown).await {
                                return ending;
                            }
                        }
                        let now = shared.clock.now();
                        self.faults.request(now, &request);
                        match &self.group {
                            Some(group) => group.handle_request(stream, now, request),
                            None => stream.handle_request(now, request),
                        }
                        want_send = true;
                    }
                    Ok(None) => return Ending::ClientClosed,
                    Err(status) => return Ending::Broken(status),
                },
                permit = tx.reserve(), if due || (want_send && self.group.is_some()) => {
                    let Ok(permit) = permit else { return Ending::Gone };
                    let now = shared.clock.now();
                    if !due {
                        stream.handle_timeout(now);
                        match self.build(stream, now) {
                            Some(response) => {
                                if let Some(limit) = shared.options.max_encoding_message_size {
                                    if response.bytes.len() > limit {
                                        return Ending::ResponseTooLarge {
                                            bytes: response.bytes.len(),
                                            limit,
                                        };
                                    }
                                }
                                self.faults.response(now, response);
                            }
                            None => {
                                want_send = false;
                                quiet_at = Some(now);
                                self.pending_push = None;
                            }
                        }
                    }
                    match self.faults.poll(now) {
                        Some(Out::Send(response)) => {
                            self.sent(&response);
                            permit.send(Ok(response.bytes));
                            self.note_applied(stream);
                        }
                        Some(Out::End(ending)) => return ending,
                        None => {}
                    }
                }
                _ = self.waker.notified() => {
                    want_send = true;
                    if self.pending_push.is_none() {
                        self.pending_push = self.group.as_ref().and_then(|g| g.last_publish());
                    }
                }
                _ = sleep_until(deadline) => want_send = true,
                // Never acknowledged in time: the window's place goes to the next stream.
                _ = sleep_until(warm_until) => self.warming = None,
                // A delayed or held response becomes due: the loop sees it.
                _ = sleep_until(held_until) => {}
                _ = sleep_until(first_deadline), if waiting_for_node => {
                    return Ending::NoFirstRequest;
                }
            }
        }
    }

    /// Applies storm protection's decision at the first request: serve now, wait for the
    /// token (shutdown still ends the stream at once), or end the stream (`Some`).
    async fn admit(
        &mut self,
        request: &Request,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Ending> {
        self.admission_pending = false;
        let shared = self.shared.clone();
        let admitting = shared.admission.as_ref()?;
        let arrival = if presents_versions(request) {
            Arrival::Resuming
        } else {
            Arrival::New
        };
        let (decision, queued) = admitting.admit(shared.clock.now(), arrival);
        let until = match decision {
            Decision::Admit | Decision::Queue { .. } => None,
            Decision::Wait { until } => Some(until),
            Decision::Shed {
                reason,
                retry_after,
            } => {
                metrics::shed(reason);
                return Some(Ending::Shed {
                    reason,
                    retry_after,
                });
            }
        };
        self.admission = Some(AdmissionSlot(self.shared.clone()));
        if let Some(until) = until {
            metrics::waiting(1.0);
            let at = self.shared.clock.to_std(until);
            let ended = tokio::select! {
                () = tokio::time::sleep_until(at.into()) => false,
                _ = shutdown.changed() => true,
            };
            metrics::waiting(-1.0);
            if ended {
                return Some(Ending::Shutdown);
            }
        }
        let waited = until.is_some() || queued.is_some();
        let shutting_down = match queued {
            Some(queued) => match wait_for_place(&shared, admitting, queued, shutdown).await {
                Ok(shutting_down) => shutting_down,
                Err(ending) => return Some(ending),
            },
            None => false,
        };
        if admitting.windowed(arrival) {
            // Held from here: dropped (settled) on the first acknowledgement, the timeout
            // or the end of the stream, a shutdown now included.
            self.warming = Some(WarmingSlot::new(shared.clone(), admitting.window_timeout()));
        }
        if shutting_down {
            return Some(Ending::Shutdown);
        }
        metrics::admitted(arrival, waited);
        None
    }

    /// The next response, built from the group's store (read-locked for the build only).
    fn build(&mut self, stream: &mut ServerStream, now: Instant) -> Option<EncodedResponse> {
        let group = self.group.as_ref()?;
        let store = group.read();
        stream.poll_response_encoded(now, &store)
    }

    /// Keeps the server's per-node applied state current and tells the callbacks.
    fn note_applied(&mut self, stream: &ServerStream) {
        let info = &self.info;
        let entry = self
            .applied
            .get_or_insert_with(|| NodeApplied::new(info.id));
        entry.learn(&info.node, &info.group);
        self.shared
            .applied
            .update(entry, stream.applied(), &self.shared.clock);
        self.shared.callbacks.applied(info, entry);
    }

    /// Hooks, metrics and the push clock for a response about to leave.
    fn sent(&mut self, response: &EncodedResponse) {
        metrics::response(&response.type_url, response.bytes.len());
        tracing::trace!(
            type_url = %response.type_url,
            nonce = %response.nonce,
            version = %response.version,
            bytes = response.bytes.len(),
            "response"
        );
        if let Some(published) = self.pending_push {
            self.pushes.insert(
                response.type_url.clone(),
                (response.nonce.clone(), published),
            );
        }
        self.shared.callbacks.response(&self.info, response);
    }

    /// Handles every event the core has; `Some` when the stream must end.
    fn drain_events(&mut self, stream: &mut ServerStream) -> Option<Ending> {
        let mut answered = false;
        while let Some(event) = stream.poll_event() {
            answered |= matches!(
                event,
                ServerEvent::Acked { .. } | ServerEvent::Nacked { .. }
            );
            self.shared.callbacks.event(&self.info, &event);
            if let Some(group) = &self.group {
                group.follow(self.info.id, &event);
            }
            match event {
                ServerEvent::NodeIdentified(node) => {
                    if let Some(ending) = self.attach(*node, &stream.subscriptions()) {
                        return Some(ending);
                    }
                }
                ServerEvent::Subscribed { type_url, names } => {
                    tracing::debug!(%type_url, ?names, "subscribed");
                }
                ServerEvent::Unsubscribed { type_url, names } => {
                    tracing::debug!(%type_url, ?names, "unsubscribed");
                }
                ServerEvent::Acked {
                    type_url,
                    nonce,
                    version,
                } => {
                    tracing::debug!(%type_url, %nonce, %version, "ACK");
                    metrics::ack(&type_url);
                    if let Some((sent, published)) = self.pushes.get(&*type_url) {
                        if *sent == nonce {
                            let latency = published.elapsed().as_secs_f64();
                            metrics::push_latency(&type_url, latency);
                            self.pushes.remove(&*type_url);
                        }
                    }
                    self.shared
                        .callbacks
                        .acked(&self.info, &type_url, &version, &nonce);
                }
                ServerEvent::Nacked {
                    type_url,
                    nonce,
                    version,
                    error,
                } => {
                    let group = self.info.group.as_deref().unwrap_or_default();
                    tracing::warn!(
                        %type_url, %nonce, %version, group,
                        node = self.info.node.as_ref().map(|n| n.id.as_str()),
                        error = %error.message,
                        "NACK"
                    );
                    metrics::nack(&type_url, group);
                    self.pushes.remove(&*type_url);
                    self.shared
                        .callbacks
                        .nacked(&self.info, &type_url, &version, &nonce, &error);
                }
                ServerEvent::StaleRequest { type_url, nonce } => {
                    tracing::debug!(%type_url, %nonce, "stale request");
                }
                ServerEvent::Held { type_url } => {
                    tracing::info!(
                        %type_url,
                        node = self.info.node.as_ref().map(|n| n.id.as_str()),
                        "held: the node's group has not published this type; nothing is sent until it does"
                    );
                    metrics::held(&type_url);
                }
                ServerEvent::Ignored { type_url, what } => {
                    tracing::debug!(%type_url, ?what, "part of a request ignored");
                }
                // The stream says it closed (`closed_by`); the caller ends the call.
                ServerEvent::ProtocolError(_) => {}
                // An event of a newer core: the callbacks saw it above.
                _ => {}
            }
        }
        if answered {
            self.note_applied(stream);
            // The client has its first response: the window lets the next stream in.
            self.warming = None;
        }
        // A first request without a node, on a server that does not require one.
        if self.group.is_none() && stream.node().is_none() && stream.type_urls().next().is_some() {
            return self.attach(Default::default(), &stream.subscriptions());
        }
        None
    }

    /// The stream's node is known: pick its group, ask whether the peer may read it, and
    /// join it.
    fn attach(
        &mut self,
        node: xds_sansio::pb::envoy::config::core::v3::Node,
        subscriptions: &[(String, String)],
    ) -> Option<Ending> {
        let key = (self.shared.node_group)(&node);
        let span = tracing::Span::current();
        span.record("node", node.id.as_str());
        span.record("group", key.as_str());
        if let Err(why) = self
            .shared
            .authorize
            .authorize(&self.info.peer, &node, &key)
        {
            self.info.node = Some(node);
            return Some(Ending::Denied(why));
        }
        let group = self.shared.group(&key);
        group.join(self.info.id, self.waker.clone(), subscriptions);
        self.info.node = Some(node);
        self.info.group = Some(group.key.clone());
        self.group = Some(group);
        None
    }
}

/// Whether a first request resumes: it presents the versions its client holds (SotW
/// `version_info`, delta `initial_resource_versions`).
fn presents_versions(request: &Request) -> bool {
    match request {
        Request::Sotw(r) => !r.version_info.is_empty(),
        Request::Delta(r) => !r.initial_resource_versions.is_empty(),
    }
}

/// A new stream's identity, from the call.
pub(crate) fn info_of<T>(
    shared: &Shared,
    method: &'static str,
    config: &ServerConfig,
    request: &tonic::Request<T>,
) -> StreamInfo {
    StreamInfo {
        id: shared.next_stream_id(),
        method,
        variant: config.variant,
        transport: config.transport.clone(),
        peer: Arc::new(Peer::of(request)),
        node: None,
        group: None,
    }
}
