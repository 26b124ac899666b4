//! CSDS: a client's status read through the real RPC (`FetchClientStatus` and
//! `StreamClientStatus` over HTTP/2 on 127.0.0.1): held, rejected and missing resources,
//! `exclude_resource_contents`, node matchers refused; with feature `envoy-types`, the
//! same answer decoded by that crate's generated CSDS client.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::*;
use tonic::codegen::http::uri::PathAndQuery;
use tonic_prost::ProstCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::CLUSTER;
use xds_sansio_tonic::client::{Bootstrap, WatchEvent, XdsClient};
use xds_sansio_tonic::csds::pb::{ClientResourceStatus, ClientStatusRequest, ClientStatusResponse};
use xds_sansio_tonic::csds::CsdsService;

const CDS: &str = CLUSTER.type_url;
const FETCH: &str = "/envoy.service.status.v3.ClientStatusDiscoveryService/FetchClientStatus";
const STREAM: &str = "/envoy.service.status.v3.ClientStatusDiscoveryService/StreamClientStatus";

async fn fetch(
    channel: tonic::transport::Channel,
    request: ClientStatusRequest,
) -> Result<ClientStatusResponse, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(request),
        PathAndQuery::from_static(FETCH),
        ProstCodec::<ClientStatusRequest, ClientStatusResponse>::default(),
    )
    .await
    .map(|r| r.into_inner())
}

/// A client of node `id` whose validator rejects CDS bodies that contain "bad".
fn rejecting_bad(uri: &str, id: &str) -> xds_sansio_tonic::client::XdsClientBuilder {
    let node = Node {
        id: id.into(),
        ..Node::default()
    };
    XdsClient::builder(Bootstrap::single(uri, node)).validator(
        CDS,
        |_: &str, _: &str, b: &Bytes| {
            if contains(b, b"bad") {
                Err("bad content".to_string())
            } else {
                Ok(())
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_through_the_csds_rpc() {
    let server = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
        s.set(CDS, "c2", body("c2", "a")).unwrap();
    })
    .await;
    let client = rejecting_bad(&server.uri(), "csds-node")
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    let mut c2 = client.watch(CDS, "c2").unwrap();
    let mut c3 = client.watch(CDS, "c3").unwrap();
    until(&mut c1, "c1", changed_to("c1", "a")).await;
    until(&mut c2, "c2", changed_to("c2", "a")).await;
    until(&mut c3, "c3", is_dne("c3")).await;
    server.update(|s| s.set(CDS, "c2", body("c2", "bad")).unwrap());
    until(&mut c2, "c2 rejected", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;

    // Serve CSDS.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let csds = CsdsService::new(client.clone());
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(csds)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();

    let response = fetch(channel.clone(), ClientStatusRequest::default())
        .await
        .unwrap();
    assert_eq!(response.config.len(), 1);
    let config = &response.config[0];
    let node = config.node.as_ref().unwrap();
    assert_eq!(node.id, "csds-node");
    assert_eq!(node.user_agent_name, "xds-sansio-tonic");
    let rows: Vec<(&str, i32)> = config
        .generic_xds_configs
        .iter()
        .map(|g| (g.name.as_str(), g.client_status))
        .collect();
    assert_eq!(
        rows,
        [
            ("c1", ClientResourceStatus::Acked as i32),
            ("c2", ClientResourceStatus::Nacked as i32),
            ("c3", ClientResourceStatus::DoesNotExist as i32),
        ]
    );
    let c1row = &config.generic_xds_configs[0];
    assert_eq!(c1row.type_url, CDS);
    assert!(!c1row.version_info.is_empty());
    assert_eq!(c1row.xds_config.as_ref().unwrap().value, body("c1", "a"));
    let c2row = &config.generic_xds_configs[1];
    assert_eq!(
        c2row.xds_config.as_ref().unwrap().value,
        body("c2", "a"),
        "the accepted body, not the rejected one"
    );
    let error = c2row.error_state.as_ref().unwrap();
    assert!(error.details.contains("bad content"), "{error:?}");
    assert!(!error.version_info.is_empty());

    // Without contents.
    let bare = fetch(
        channel.clone(),
        ClientStatusRequest {
            exclude_resource_contents: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(bare.config[0]
        .generic_xds_configs
        .iter()
        .all(|g| g.xds_config.is_none()));

    // Node matchers are refused (gRPC A40).
    let refused = fetch(
        channel.clone(),
        ClientStatusRequest {
            node_matchers: vec![Bytes::from_static(b"\x0a\x00")],
            ..Default::default()
        },
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);

    // The streaming method answers each request.
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let requests = tokio_stream::iter(vec![
        ClientStatusRequest::default(),
        ClientStatusRequest::default(),
    ]);
    let mut answers = grpc
        .streaming(
            tonic::Request::new(requests),
            PathAndQuery::from_static(STREAM),
            ProstCodec::<ClientStatusRequest, ClientStatusResponse>::default(),
        )
        .await
        .unwrap()
        .into_inner();
    for _ in 0..2 {
        let answer = tokio::time::timeout(STEP, answers.message())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(answer, response);
    }

    #[cfg(feature = "envoy-types")]
    {
        use envoy_types::pb::envoy::admin::v3::ClientResourceStatus as Status;
        use envoy_types::pb::envoy::service::status::v3::client_status_discovery_service_client::ClientStatusDiscoveryServiceClient;
        let mut theirs = ClientStatusDiscoveryServiceClient::new(channel.clone());
        let answer = theirs
            .fetch_client_status(
                envoy_types::pb::envoy::service::status::v3::ClientStatusRequest::default(),
            )
            .await
            .unwrap()
            .into_inner();
        let generic = &answer.config[0].generic_xds_configs;
        assert_eq!(generic.len(), 3);
        assert_eq!(generic[1].client_status, Status::Nacked as i32);
        assert_eq!(answer.config[0].node.as_ref().unwrap().id, "csds-node");
    }
    client.shutdown();
}

/// Records every applied-state report.
#[derive(Default)]
struct AppliedReports(std::sync::Mutex<Vec<xds_sansio_tonic::server::NodeApplied>>);

impl xds_sansio_tonic::Callbacks for AppliedReports {
    fn applied(
        &self,
        _: &xds_sansio_tonic::StreamInfo,
        state: &xds_sansio_tonic::server::NodeApplied,
    ) {
        self.0.lock().unwrap().push(state.clone());
    }
}

/// Polls (bounded) until the server's applied state of CDS satisfies `want`.
async fn applied_until(
    server: &xds_sansio_tonic::XdsServer,
    what: &str,
    want: impl Fn(&xds_sansio_tonic::server::TypeApplied) -> bool,
) -> xds_sansio_tonic::server::TypeApplied {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let found = server
            .applied()
            .into_iter()
            .flat_map(|n| n.types)
            .find(|t| t.type_url == CDS && want(t));
        if let Some(t) = found {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never: {what}: {:?}",
            server.applied()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The management server's per-node applied state: a client that ACKs, then NACKs a bad
/// update, then ACKs the fix; read through `XdsServer::applied`, its JSON, the callback,
/// and CSDS served by the management server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_reports_what_each_node_applied() {
    let reports = std::sync::Arc::new(AppliedReports::default());
    let server = Killable::start_with(Some(reports.clone()), |s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
    })
    .await;
    let xds = server.server.clone().unwrap();
    let client = rejecting_bad(&server.uri(), "applied-node")
        .build()
        .unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    until(&mut c1, "c1", changed_to("c1", "a")).await;
    let first = applied_until(&xds, "the first ACK", |t| t.acked.is_some()).await;
    assert!(first.nacked.is_none());

    server.update(|s| s.set(CDS, "c1", body("c1", "bad")).unwrap());
    let nacked = applied_until(&xds, "the NACK", |t| t.nacked.is_some()).await;
    let (_, code, message, _) = nacked.nacked.clone().unwrap();
    assert!(message.contains("bad content"), "{message}");
    assert_eq!(code, 13);
    assert_eq!(
        nacked.acked, first.acked,
        "the last ACK is still what is applied"
    );

    // Served as CSDS by the management server: the node, NACKED with the error.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(xds.csds_service())
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let response = fetch(channel, ClientStatusRequest::default())
        .await
        .unwrap();
    assert_eq!(response.config.len(), 1);
    let config = &response.config[0];
    assert_eq!(config.node.as_ref().unwrap().id, "applied-node");
    let row = &config.generic_xds_configs[0];
    assert_eq!(row.type_url, CDS);
    assert_eq!(row.client_status, ClientResourceStatus::Nacked as i32);
    assert_eq!(row.version_info, first.acked.as_ref().unwrap().0);
    let error = row.error_state.as_ref().unwrap();
    assert!(error.details.contains("bad content"), "{error:?}");
    assert_eq!(error.version_info, nacked.nacked.as_ref().unwrap().0);

    let json = xds.applied_json();
    assert_eq!(json[0]["node"], "applied-node");
    assert_eq!(
        json[0]["types"][0]["nacked"]["message"].as_str().unwrap(),
        message
    );

    // The fix goes out and is ACKed: the NACK is cleared.
    server.update(|s| s.set(CDS, "c1", body("c1", "good")).unwrap());
    until(&mut c1, "c1 fixed", changed_to("c1", "good")).await;
    let fixed = applied_until(&xds, "the ACK of the fix", |t| {
        t.nacked.is_none() && t.acked != first.acked
    })
    .await;
    assert!(fixed.in_flight.is_none());
    let seen = reports.0.lock().unwrap();
    assert!(
        seen.iter()
            .any(|n| n.types.iter().any(|t| t.nacked.is_some())),
        "the callback saw the NACK"
    );
    drop(seen);
    client.shutdown();
}

/// `GET /debug/applied` over HTTP/1.1 on the server's own port (issue 29, item 6): the
/// JSON of what each node applied; any other path is not found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_debug_page_serves_what_each_node_applied() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = xds_sansio_tonic::XdsServer::builder()
        .body_checks(xds_sansio::server::BodyChecks::Off)
        .debug(true)
        .build();
    server
        .update(xds_sansio_tonic::DEFAULT_GROUP, |s| {
            s.set(CDS, "c1", body("c1", "a"))
        })
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let serving = tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    let client = rejecting_bad(&addr.to_string(), "debug-node")
        .build()
        .unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    until(&mut c1, "c1", changed_to("c1", "a")).await;
    applied_until(&server, "the ACK", |t| t.acked.is_some()).await;

    let get = |path: &'static str| async move {
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        tokio::time::timeout(STEP, tcp.read_to_string(&mut answer))
            .await
            .expect("the page answers")
            .unwrap();
        answer
    };
    let page = get("/debug/applied").await;
    assert!(page.starts_with("HTTP/1.1 200"), "{page}");
    assert!(page.contains("application/json"), "{page}");
    let json_start = page.find('[').expect("a JSON array");
    let body = page[json_start..].trim_end();
    // The body may be chunked: its first chunk is the whole array here.
    let json: serde_json::Value = serde_json::from_str(body.lines().next().unwrap()).expect("JSON");
    assert_eq!(json[0]["node"], "debug-node", "{json}");
    let other = get("/debug/other").await;
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    client.shutdown();
    server.shutdown();
    let _ = serving.await;
}
