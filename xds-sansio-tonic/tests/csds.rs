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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_through_the_csds_rpc() {
    let server = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
        s.set(CDS, "c2", body("c2", "a")).unwrap();
    })
    .await;
    let node = Node {
        id: "csds-node".into(),
        ..Node::default()
    };
    let client = XdsClient::builder(Bootstrap::single(server.uri(), node))
        .validator(CDS, |_: &str, _: &str, b: &Bytes| {
            if contains(b, b"bad") {
                Err("bad content".to_string())
            } else {
                Ok(())
            }
        })
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
