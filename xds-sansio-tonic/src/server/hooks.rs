//! What the application plugs in: which node group a node reads, whether a peer may read
//! it, and callbacks on what happens on each stream (go-control-plane's callbacks).

use std::net::SocketAddr;
use std::sync::Arc;

use tonic::metadata::MetadataMap;
use tonic::Status;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status as RpcStatus;
use xds_sansio::server::{EncodedResponse, ResourceStore, Revision, ServerEvent};

use super::applied::NodeApplied;
use xds_sansio::{Request, Transport, Variant};

/// The group every node reads when no [`XdsServerBuilder::node_group`](super::XdsServerBuilder::node_group)
/// function is set.
pub const DEFAULT_GROUP: &str = "default";

/// Who is on the other end of a stream, as the transport knows it (never what the client
/// claims in its requests).
#[derive(Clone, Debug, Default)]
pub struct Peer {
    /// The remote address (none for a connection that is not TCP).
    pub remote_addr: Option<SocketAddr>,
    /// The call's metadata (headers): a bearer token, an identity a proxy in front added.
    pub metadata: MetadataMap,
    /// The certificate chain the client presented (mutual TLS), leaf first; DER.
    #[cfg(feature = "tls")]
    pub certificates: Option<Arc<Vec<tonic::transport::CertificateDer<'static>>>>,
}

impl Peer {
    /// The peer of an incoming call.
    pub(crate) fn of<T>(request: &tonic::Request<T>) -> Peer {
        Peer {
            remote_addr: request.remote_addr(),
            metadata: request.metadata().clone(),
            #[cfg(feature = "tls")]
            certificates: request.peer_certs(),
        }
    }

    /// The DNS names among the client certificate's subject alternative names (mutual
    /// TLS; the leaf certificate, which the TLS handshake verified), empty without a client
    /// certificate or when it cannot be read.
    #[cfg(feature = "tls")]
    pub fn dns_names(&self) -> Vec<String> {
        self.leaf(|cert| cert.valid_dns_names().map(String::from).collect())
    }

    /// The URIs among the client certificate's subject alternative names (a SPIFFE ID:
    /// `spiffe://trust-domain/path`), empty without one.
    #[cfg(feature = "tls")]
    pub fn uri_names(&self) -> Vec<String> {
        self.leaf(|cert| cert.valid_uri_names().map(String::from).collect())
    }

    #[cfg(feature = "tls")]
    fn leaf(&self, read: impl FnOnce(&webpki::EndEntityCert<'_>) -> Vec<String>) -> Vec<String> {
        let Some(leaf) = self.certificates.as_ref().and_then(|c| c.first()) else {
            return Vec::new();
        };
        match webpki::EndEntityCert::try_from(leaf) {
            Ok(cert) => read(&cert),
            Err(_) => Vec::new(),
        }
    }
}

/// One stream as the hooks see it.
#[derive(Clone, Debug)]
pub struct StreamInfo {
    /// Unique for the server's life, from 1.
    pub id: u64,
    /// The gRPC method path.
    pub method: &'static str,
    /// SotW or delta.
    pub variant: Variant,
    /// ADS or one type.
    pub transport: Transport,
    /// Who is on the other end.
    pub peer: Arc<Peer>,
    /// The node the stream's first request claimed, once it arrived.
    pub node: Option<Node>,
    /// The node group the stream reads, once authorized.
    pub group: Option<Arc<str>>,
}

/// Decides whether a stream may read a node group: it sees the peer's identity (address,
/// metadata, with feature `tls` the certificate chain) and the node the stream claims.
/// A refusal ends the stream with `PERMISSION_DENIED` before it reads anything.
///
/// Any `Fn(&Peer, &Node, &str) -> Result<(), String>` is one:
///
/// ```
/// # use xds_sansio_tonic::{Peer, XdsServer};
/// # use xds_sansio::pb::envoy::config::core::v3::Node;
/// let server = XdsServer::builder()
///     .node_group(|node: &Node| node.cluster.clone())
///     .authorize(|peer: &Peer, _node: &Node, group: &str| {
///         let token = peer.metadata.get("x-tenant").and_then(|v| v.to_str().ok());
///         if token == Some(group) { Ok(()) } else { Err(format!("may not read {group}")) }
///     })
///     .build();
/// # drop(server);
/// ```
pub trait Authorize: Send + Sync + 'static {
    /// `Ok` lets the stream read `group`; `Err` refuses it, with the reason for the status.
    fn authorize(&self, peer: &Peer, node: &Node, group: &str) -> Result<(), String>;
}

impl<F> Authorize for F
where
    F: Fn(&Peer, &Node, &str) -> Result<(), String> + Send + Sync + 'static,
{
    fn authorize(&self, peer: &Peer, node: &Node, group: &str) -> Result<(), String> {
        self(peer, node, group)
    }
}

/// Lets every stream read the group of its node.
pub(crate) struct AllowAll;

impl Authorize for AllowAll {
    fn authorize(&self, _: &Peer, _: &Node, _: &str) -> Result<(), String> {
        Ok(())
    }
}

/// Callbacks on what happens on each stream, every method a no-op by default (as
/// go-control-plane's `server.Callbacks`). They run on the stream's task: keep them quick
/// and never block in them. A pair `(A, B)` of callbacks calls both.
#[allow(unused_variables)]
pub trait Callbacks: Send + Sync + 'static {
    /// A stream opened (before its first request).
    fn stream_opened(&self, stream: &StreamInfo) {}
    /// A stream ended; `status` is what the server ended it with (`None`: the client ended
    /// it or went away).
    fn stream_closed(&self, stream: &StreamInfo, status: Option<&Status>) {}
    /// A request arrived (before the core handles it).
    fn request(&self, stream: &StreamInfo, request: &Request) {}
    /// A response is handed to the transport.
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {}
    /// The client ACKed the response `nonce` of `type_url` at `version`.
    fn acked(&self, stream: &StreamInfo, type_url: &str, version: &str, nonce: &str) {}
    /// The client NACKed the response `nonce`; `error` is its `error_detail`. The node is
    /// `stream.node`.
    fn nacked(
        &self,
        stream: &StreamInfo,
        type_url: &str,
        version: &str,
        nonce: &str,
        error: &RpcStatus,
    ) {
    }
    /// Every event of the core's stream, ACKs and NACKs included.
    fn event(&self, stream: &StreamInfo, event: &ServerEvent) {}
    /// What the stream's client applied changed (an ACK, a NACK, a response sent): its
    /// whole per-type state ([`XdsServer::applied`](super::XdsServer::applied)).
    fn applied(&self, stream: &StreamInfo, state: &NodeApplied) {}
    /// A group's store changed: the changes after `since` are in
    /// `store.changes_since(since)`. Called with the store locked for writing: quick.
    fn published(&self, group: &str, store: &ResourceStore, since: Revision) {}
}

/// No callbacks.
impl Callbacks for () {}

impl<A: Callbacks, B: Callbacks> Callbacks for (A, B) {
    fn stream_opened(&self, stream: &StreamInfo) {
        self.0.stream_opened(stream);
        self.1.stream_opened(stream);
    }
    fn stream_closed(&self, stream: &StreamInfo, status: Option<&Status>) {
        self.0.stream_closed(stream, status);
        self.1.stream_closed(stream, status);
    }
    fn request(&self, stream: &StreamInfo, request: &Request) {
        self.0.request(stream, request);
        self.1.request(stream, request);
    }
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        self.0.response(stream, response);
        self.1.response(stream, response);
    }
    fn acked(&self, stream: &StreamInfo, type_url: &str, version: &str, nonce: &str) {
        self.0.acked(stream, type_url, version, nonce);
        self.1.acked(stream, type_url, version, nonce);
    }
    fn nacked(
        &self,
        stream: &StreamInfo,
        type_url: &str,
        version: &str,
        nonce: &str,
        error: &RpcStatus,
    ) {
        self.0.nacked(stream, type_url, version, nonce, error);
        self.1.nacked(stream, type_url, version, nonce, error);
    }
    fn event(&self, stream: &StreamInfo, event: &ServerEvent) {
        self.0.event(stream, event);
        self.1.event(stream, event);
    }
    fn applied(&self, stream: &StreamInfo, state: &NodeApplied) {
        self.0.applied(stream, state);
        self.1.applied(stream, state);
    }
    fn published(&self, group: &str, store: &ResourceStore, since: Revision) {
        self.0.published(group, store, since);
        self.1.published(group, store, since);
    }
}

impl<C: Callbacks + ?Sized> Callbacks for Arc<C> {
    fn stream_opened(&self, stream: &StreamInfo) {
        (**self).stream_opened(stream);
    }
    fn stream_closed(&self, stream: &StreamInfo, status: Option<&Status>) {
        (**self).stream_closed(stream, status);
    }
    fn request(&self, stream: &StreamInfo, request: &Request) {
        (**self).request(stream, request);
    }
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        (**self).response(stream, response);
    }
    fn acked(&self, stream: &StreamInfo, type_url: &str, version: &str, nonce: &str) {
        (**self).acked(stream, type_url, version, nonce);
    }
    fn nacked(
        &self,
        stream: &StreamInfo,
        type_url: &str,
        version: &str,
        nonce: &str,
        error: &RpcStatus,
    ) {
        (**self).nacked(stream, type_url, version, nonce, error);
    }
    fn event(&self, stream: &StreamInfo, event: &ServerEvent) {
        (**self).event(stream, event);
    }
    fn applied(&self, stream: &StreamInfo, state: &NodeApplied) {
        (**self).applied(stream, state);
    }
    fn published(&self, group: &str, store: &ResourceStore, since: Revision) {
        (**self).published(group, store, since);
    }
}

/// Callbacks that may be absent.
impl<C: Callbacks> Callbacks for Option<C> {
    fn stream_opened(&self, stream: &StreamInfo) {
        if let Some(c) = self {
            c.stream_opened(stream);
        }
    }
    fn stream_closed(&self, stream: &StreamInfo, status: Option<&Status>) {
        if let Some(c) = self {
            c.stream_closed(stream, status);
        }
    }
    fn request(&self, stream: &StreamInfo, request: &Request) {
        if let Some(c) = self {
            c.request(stream, request);
        }
    }
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        if let Some(c) = self {
            c.response(stream, response);
        }
    }
    fn acked(&self, stream: &StreamInfo, type_url: &str, version: &str, nonce: &str) {
        if let Some(c) = self {
            c.acked(stream, type_url, version, nonce);
        }
    }
    fn nacked(
        &self,
        stream: &StreamInfo,
        type_url: &str,
        version: &str,
        nonce: &str,
        error: &RpcStatus,
    ) {
        if let Some(c) = self {
            c.nacked(stream, type_url, version, nonce, error);
        }
    }
    fn applied(&self, stream: &StreamInfo, state: &NodeApplied) {
        if let Some(c) = self {
            c.applied(stream, state);
        }
    }
    fn event(&self, stream: &StreamInfo, event: &ServerEvent) {
        if let Some(c) = self {
            c.event(stream, event);
        }
    }
    fn published(&self, group: &str, store: &ResourceStore, since: Revision) {
        if let Some(c) = self {
            c.published(group, store, since);
        }
    }
}
