//! The Client Status Discovery Service (`envoy.service.status.v3.ClientStatusDiscoveryService`)
//! of an [`XdsClient`], answered from the core's status dump, so that `grpcdebug`-style
//! tools can read what the client holds (gRPC A40, "xDS Configuration Dump via Client
//! Status Discovery Service in gRPC"; A71 for `client_scope`).
//!
//! ```no_run
//! # async fn run(client: xds_sansio_tonic::client::XdsClient) -> Result<(), Box<dyn std::error::Error>> {
//! use xds_sansio_tonic::csds::CsdsService;
//! tonic::transport::Server::builder()
//!     .add_service(CsdsService::new(client))
//!     .serve("127.0.0.1:18080".parse()?)
//!     .await?;
//! # Ok(()) }
//! ```
//!
//! # Decisions
//!
//! - **`GenericXdsConfig` only** (A40: "PerXdsConfig is now deprecated"): one entry per
//!   resource the watchers are served, sorted by type and name, with the accepted version
//!   and body (`xds_config`, left out when the request sets `exclude_resource_contents`),
//!   the client status (`REQUESTED`, `DOES_NOT_EXIST`, `ACKED`, `NACKED`,
//!   `RECEIVED_ERROR`; an expired resource is `DOES_NOT_EXIST`), and `error_state` for
//!   the last rejected update (its version and message) or the server's reported error.
//! - **One `ClientConfig` per client**, its node as the servers see it, `client_scope` as
//!   given to [`CsdsService::with_client`] (A71); a single client has scope `""`.
//! - **Node matchers are refused** with `INVALID_ARGUMENT` (A40: "return an
//!   INVALID_ARGUMENT if the CSDS implementation observe an non-empty Node Matcher").
//! - **Both methods**: `FetchClientStatus` (unary) and `StreamClientStatus` (one response
//!   per request, as A40 describes: "not a watch-style API").
//! - **Wire types written by hand** ([`pb`]), field numbers from Envoy's
//!   `envoy/service/status/v3/csds.proto` and `envoy/admin/v3/config_dump_shared.proto`;
//!   with feature `envoy-types` a test decodes them with that crate's generated types.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio_stream::StreamExt;
use tonic::body::Body;
use tonic::codegen::{http, Service};
use tonic::server::{Grpc, NamedService, StreamingService, UnaryService};
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;
use xds_sansio::client::ResourceState;

use crate::client::{DumpEntry, XdsClient};
use crate::server::applied::{NodeApplied, Registry};

/// The CSDS wire messages, wire-compatible with `envoy.service.status.v3` and the parts
/// of `envoy.admin.v3` they use.
pub mod pb {
    use xds_sansio::pb::envoy::config::core::v3::Node;

    /// `envoy.service.status.v3.ClientStatusRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClientStatusRequest {
        /// `node_matchers` (`envoy.type.matcher.v3.NodeMatcher`), kept encoded: a client
        /// refuses any.
        #[prost(bytes = "bytes", repeated, tag = "1")]
        pub node_matchers: Vec<bytes::Bytes>,
        /// `node`: the node making the request.
        #[prost(message, optional, tag = "2")]
        pub node: Option<Node>,
        /// `exclude_resource_contents`: leave `xds_config` out.
        #[prost(bool, tag = "3")]
        pub exclude_resource_contents: bool,
    }

    /// `envoy.service.status.v3.ClientStatusResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClientStatusResponse {
        /// `config`: one per client.
        #[prost(message, repeated, tag = "1")]
        pub config: Vec<ClientConfig>,
    }

    /// `envoy.service.status.v3.ClientConfig` (without the deprecated `xds_config`).
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ClientConfig {
        /// `node`.
        #[prost(message, optional, tag = "1")]
        pub node: Option<Node>,
        /// `generic_xds_configs`.
        #[prost(message, repeated, tag = "3")]
        pub generic_xds_configs: Vec<GenericXdsConfig>,
        /// `client_scope` (gRPC A71).
        #[prost(string, tag = "4")]
        pub client_scope: String,
    }

    /// `envoy.service.status.v3.ClientConfig.GenericXdsConfig`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GenericXdsConfig {
        /// `type_url`.
        #[prost(string, tag = "1")]
        pub type_url: String,
        /// `name`.
        #[prost(string, tag = "2")]
        pub name: String,
        /// `version_info`: the accepted version.
        #[prost(string, tag = "3")]
        pub version_info: String,
        /// `xds_config`: the accepted resource.
        #[prost(message, optional, tag = "4")]
        pub xds_config: Option<prost_types::Any>,
        /// `last_updated`.
        #[prost(message, optional, tag = "5")]
        pub last_updated: Option<prost_types::Timestamp>,
        /// `config_status` (`ConfigStatus`, a server's view; unset by clients).
        #[prost(int32, tag = "6")]
        pub config_status: i32,
        /// `client_status` ([`ClientResourceStatus`]).
        #[prost(enumeration = "ClientResourceStatus", tag = "7")]
        pub client_status: i32,
        /// `error_state`.
        #[prost(message, optional, tag = "8")]
        pub error_state: Option<UpdateFailureState>,
        /// `is_static_resource`.
        #[prost(bool, tag = "9")]
        pub is_static_resource: bool,
    }

    /// `envoy.admin.v3.UpdateFailureState`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct UpdateFailureState {
        /// `failed_configuration`.
        #[prost(message, optional, tag = "1")]
        pub failed_configuration: Option<prost_types::Any>,
        /// `last_update_attempt`.
        #[prost(message, optional, tag = "2")]
        pub last_update_attempt: Option<prost_types::Timestamp>,
        /// `details`: why.
        #[prost(string, tag = "3")]
        pub details: String,
        /// `version_info`: the rejected version.
        #[prost(string, tag = "4")]
        pub version_info: String,
    }

    /// `envoy.admin.v3.ClientResourceStatus`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
    #[repr(i32)]
    pub enum ClientResourceStatus {
        /// `UNKNOWN`.
        Unknown = 0,
        /// `REQUESTED`.
        Requested = 1,
        /// `DOES_NOT_EXIST`.
        DoesNotExist = 2,
        /// `ACKED`.
        Acked = 3,
        /// `NACKED`.
        Nacked = 4,
        /// `RECEIVED_ERROR`.
        ReceivedError = 5,
        /// `TIMEOUT`.
        Timeout = 6,
    }
}

/// The service's name.
pub const SERVICE: &str = "envoy.service.status.v3.ClientStatusDiscoveryService";
const FETCH: &str = "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus";
const STREAM: &str = "/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus";

/// The CSDS service of one or more [`XdsClient`]s, or of a management server's
/// connected nodes ([`XdsServer::csds_service`](crate::server::XdsServer::csds_service)). See the [module docs](self).
#[derive(Clone, Debug)]
pub struct CsdsService {
    clients: Vec<(String, XdsClient)>,
    /// A management server's connected nodes.
    nodes: Option<Arc<Registry>>,
}

impl CsdsService {
    /// The service of one client (scope `""`).
    pub fn new(client: XdsClient) -> CsdsService {
        CsdsService {
            clients: vec![(String::new(), client)],
            nodes: None,
        }
    }

    /// Adds a client under `scope` (gRPC A71's `client_scope`, e.g. a data plane target).
    pub fn with_client(mut self, scope: impl Into<String>, client: XdsClient) -> CsdsService {
        self.clients.push((scope.into(), client));
        self
    }

    /// The service of a management server's connected nodes (built by
    /// [`XdsServer::csds_service`](crate::server::XdsServer::csds_service)).
    pub(crate) fn of_nodes(nodes: Arc<Registry>) -> CsdsService {
        CsdsService {
            clients: Vec::new(),
            nodes: Some(nodes),
        }
    }

    /// The answer to `request`, as both methods give it.
    pub async fn status(
        &self,
        request: &pb::ClientStatusRequest,
    ) -> Result<pb::ClientStatusResponse, Status> {
        if !request.node_matchers.is_empty() {
            return Err(Status::invalid_argument(
                "node matchers are not supported by an xDS client's CSDS (gRPC A40)",
            ));
        }
        let mut config = Vec::with_capacity(self.clients.len());
        if let Some(nodes) = &self.nodes {
            config.extend(nodes.all().into_iter().map(node_config));
        }
        for (scope, client) in &self.clients {
            let dump = client.dump().await;
            config.push(pb::ClientConfig {
                node: Some(client.bootstrap().node.clone()),
                generic_xds_configs: dump
                    .into_iter()
                    .map(|e| generic(e, request.exclude_resource_contents))
                    .collect(),
                client_scope: scope.clone(),
            });
        }
        Ok(pb::ClientStatusResponse { config })
    }
}

/// One stream of a management server as CSDS writes it.
fn node_config(node: NodeApplied) -> pb::ClientConfig {
    use pb::ClientResourceStatus as S;
    let stamp = |at: std::time::SystemTime| prost_types::Timestamp::from(at);
    pb::ClientConfig {
        node: node.node,
        generic_xds_configs: node
            .types
            .into_iter()
            .map(|t| {
                let client_status = match (&t.nacked, &t.acked) {
                    (Some(_), _) => S::Nacked,
                    (None, Some(_)) => S::Acked,
                    (None, None) => S::Requested,
                };
                pb::GenericXdsConfig {
                    version_info: t.acked.as_ref().map(|(v, _)| v.clone()).unwrap_or_default(),
                    last_updated: t.acked.as_ref().map(|(_, at)| stamp(*at)),
                    client_status: client_status as i32,
                    error_state: t.nacked.map(|(version, code, message, at)| {
                        pb::UpdateFailureState {
                            failed_configuration: None,
                            last_update_attempt: Some(stamp(at)),
                            details: format!("code {code}: {message}"),
                            version_info: version,
                        }
                    }),
                    type_url: t.type_url,
                    ..Default::default()
                }
            })
            .collect(),
        client_scope: String::new(),
    }
}

/// One dump entry as CSDS writes it.
pub fn generic(entry: DumpEntry, exclude_contents: bool) -> pb::GenericXdsConfig {
    use pb::ClientResourceStatus as S;
    let status = &entry.status.status;
    let client_status = match status.state {
        ResourceState::Requested => S::Requested,
        ResourceState::DoesNotExist | ResourceState::Expired => S::DoesNotExist,
        ResourceState::Acked => S::Acked,
        ResourceState::Nacked => S::Nacked,
        ResourceState::ReceivedError => S::ReceivedError,
        ResourceState::TimedOut => S::Timeout,
    };
    let error_state = match (&status.rejected, &status.server_error) {
        (Some(r), _) => Some(pb::UpdateFailureState {
            details: r.error.clone(),
            version_info: r.version.to_string(),
            ..Default::default()
        }),
        (None, Some(e)) => Some(pb::UpdateFailureState {
            details: format!("server error {}: {}", e.code, e.message),
            ..Default::default()
        }),
        (None, None) => None,
    };
    let type_url = entry.status.type_url.to_string();
    pb::GenericXdsConfig {
        xds_config: entry
            .body
            .filter(|_| !exclude_contents)
            .map(|body| prost_types::Any {
                type_url: type_url.clone(),
                value: body.to_vec(),
            }),
        type_url,
        name: entry.status.name.to_string(),
        version_info: status.version.as_deref().unwrap_or_default().to_string(),
        last_updated: None,
        config_status: 0,
        client_status: client_status as i32,
        error_state,
        // What the fail-static cache serves (a former run's, no server having answered).
        is_static_resource: entry.restored,
    }
}

impl NamedService for CsdsService {
    const NAME: &'static str = SERVICE;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<Body>> for CsdsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let service = self.clone();
        Box::pin(async move {
            let mut grpc = Grpc::new(ProstCodec::<
                pb::ClientStatusResponse,
                pb::ClientStatusRequest,
            >::default());
            Ok(match request.uri().path() {
                FETCH => grpc.unary(Fetch(service), request).await,
                STREAM => grpc.streaming(Stream(service), request).await,
                _ => Status::unimplemented("unknown CSDS method").into_http(),
            })
        })
    }
}

struct Fetch(CsdsService);

impl UnaryService<pb::ClientStatusRequest> for Fetch {
    type Response = pb::ClientStatusResponse;
    type Future = BoxFuture<Result<tonic::Response<pb::ClientStatusResponse>, Status>>;

    fn call(&mut self, request: tonic::Request<pb::ClientStatusRequest>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move {
            service
                .status(request.get_ref())
                .await
                .map(tonic::Response::new)
        })
    }
}

struct Stream(CsdsService);

type Responses =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<pb::ClientStatusResponse, Status>> + Send>>;

impl StreamingService<pb::ClientStatusRequest> for Stream {
    type Response = pb::ClientStatusResponse;
    type ResponseStream = Responses;
    type Future = std::future::Ready<Result<tonic::Response<Responses>, Status>>;

    fn call(
        &mut self,
        request: tonic::Request<Streaming<pb::ClientStatusRequest>>,
    ) -> Self::Future {
        let service = self.0.clone();
        let requests = request.into_inner();
        // One response per request, in order; a refused request ends the stream.
        let responses = requests.then(move |request| {
            let service = service.clone();
            async move {
                match request {
                    Ok(request) => service.status(&request).await,
                    Err(status) => Err(status),
                }
            }
        });
        std::future::ready(Ok(tonic::Response::new(Box::pin(responses) as Responses)))
    }
}
