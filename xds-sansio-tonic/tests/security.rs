//! Secrets never reach a peer outside its node group.
//!
//! Two groups, `tenant-a` and `tenant-b`, each hold a Secret with the same name and
//! different material. A node reads the group named by its `cluster`; the authorization
//! hook lets a peer read only the group its identity names (the `x-tenant` metadata here,
//! the client certificate's SPIFFE ID with mutual TLS). Clients that tell the truth get
//! their own secret; a client that lies about its node is refused with `PERMISSION_DENIED`
//! on every method (ADS and SDS, SotW and delta) before anything is sent, one that changes
//! its node mid-stream is closed by the core, and an audit of every response the server
//! sent finds no secret of a group in a stream of another.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::server::{EncodedResponse, ResourceEntry, StoreOp};
use xds_sansio::types::{ADS_DELTA_METHOD, ADS_SOTW_METHOD, SECRET};
use xds_sansio_tonic::{Callbacks, Peer, StreamInfo, XdsServer};

const SDS: &str = SECRET.type_url;
const WAIT: Duration = Duration::from_secs(3);

fn secret(material: &str) -> Bytes {
    let name = b"server-cert";
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name);
    out.extend_from_slice(&[0x12, material.len() as u8]);
    out.extend_from_slice(material.as_bytes());
    Bytes::from(out)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Every response the server sent, with the group of the stream it went to.
#[derive(Default)]
struct Audit(Mutex<Vec<(Option<String>, Bytes)>>);

impl Callbacks for Audit {
    fn response(&self, stream: &StreamInfo, response: &EncodedResponse) {
        let group = stream.group.as_deref().map(String::from);
        self.0
            .lock()
            .unwrap()
            .push((group, response.bytes.to_bytes()));
    }
}

impl Audit {
    fn check(&self) {
        let sent = self.0.lock().unwrap();
        assert!(!sent.is_empty(), "the honest clients got their secrets");
        for (group, bytes) in sent.iter() {
            for (tenant, material) in [("tenant-a", "A-MATERIAL"), ("tenant-b", "B-MATERIAL")] {
                if contains(bytes, material) {
                    assert_eq!(group.as_deref(), Some(tenant), "{material} leaked");
                }
            }
        }
    }
}

/// Who a peer is: its certificate's SPIFFE ID with mutual TLS, else its metadata.
fn identity(peer: &Peer) -> Option<String> {
    #[cfg(feature = "tls")]
    if let Some(uri) = peer.uri_names().first() {
        return uri.strip_prefix("spiffe://test/").map(String::from);
    }
    let tenant = peer.metadata.get("x-tenant")?.to_str().ok()?;
    Some(tenant.to_string())
}

async fn start(
    #[cfg(feature = "tls")] tls: Option<tonic::transport::ServerTlsConfig>,
) -> (XdsServer, String, Arc<Audit>) {
    let audit = Arc::new(Audit::default());
    let builder = XdsServer::builder()
        .body_checks(xds_sansio::server::BodyChecks::Off) // placeholder bodies
        .node_group(|node: &Node| node.cluster.clone())
        .authorize(|peer: &Peer, _: &Node, group: &str| match identity(peer) {
            Some(who) if who == group => Ok(()),
            who => Err(format!("{who:?} may not read group {group:?}")),
        })
        .callbacks(audit.clone());
    #[cfg(feature = "tls")]
    let builder = match tls {
        Some(tls) => builder.tls(tls),
        None => builder,
    };
    let server = builder.build();
    for (group, material) in [("tenant-a", "A-MATERIAL"), ("tenant-b", "B-MATERIAL")] {
        server
            .publish(
                group,
                vec![StoreOp::Set {
                    type_url: SDS.into(),
                    entry: ResourceEntry::new("server-cert", secret(material)),
                }],
            )
            .unwrap();
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    (server, format!("127.0.0.1:{port}"), audit)
}

fn node(cluster: &str) -> Node {
    Node {
        id: format!("{cluster}-proxy"),
        cluster: cluster.into(),
        ..Node::default()
    }
}

/// What one call got: the secrets' material it saw, and how it ended.
#[derive(Debug)]
struct Outcome {
    material: Vec<String>,
    status: Option<Status>,
}

impl Outcome {
    fn saw(&self, material: &str) -> bool {
        self.material.iter().any(|m| m == material)
    }
}

fn found(bytes: &[u8]) -> Vec<String> {
    ["A-MATERIAL", "B-MATERIAL"]
        .into_iter()
        .filter(|m| contains(bytes, m))
        .map(String::from)
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Method {
    AdsSotw,
    AdsDelta,
    SdsSotw,
    SdsDelta,
}

const METHODS: [Method; 4] = [
    Method::AdsSotw,
    Method::AdsDelta,
    Method::SdsSotw,
    Method::SdsDelta,
];

/// Opens a call as `tenant` (metadata; `None`: no metadata) claiming `nodes` in turn, one
/// request each, and reads until the call ends or nothing more comes.
async fn call(channel: Channel, method: Method, tenant: Option<&str>, nodes: &[Node]) -> Outcome {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut outcome = Outcome {
        material: Vec::new(),
        status: None,
    };
    let delta = matches!(method, Method::AdsDelta | Method::SdsDelta);
    let path = match method {
        Method::AdsSotw => ADS_SOTW_METHOD,
        Method::AdsDelta => ADS_DELTA_METHOD,
        Method::SdsSotw => SECRET.sotw_method.unwrap(),
        Method::SdsDelta => SECRET.delta_method,
    };
    let path = PathAndQuery::from_static(path);
    fn tag<T>(request: &mut tonic::Request<T>, tenant: Option<&str>) {
        if let Some(tenant) = tenant {
            request
                .metadata_mut()
                .insert("x-tenant", tenant.parse().unwrap());
        }
    }
    if delta {
        let (tx, rx) = mpsc::channel(8);
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        tag(&mut request, tenant);
        let codec = ProstCodec::<DeltaDiscoveryRequest, DeltaDiscoveryResponse>::default();
        let mut inbound = match grpc.streaming(request, path, codec).await {
            Ok(r) => r.into_inner(),
            Err(status) => {
                outcome.status = Some(status);
                return outcome;
            }
        };
        for node in nodes {
            let request = DeltaDiscoveryRequest {
                node: Some(node.clone()),
                type_url: SDS.into(),
                resource_names_subscribe: vec!["server-cert".into()],
                ..Default::default()
            };
            let _ = tx.send(request).await;
            match tokio::time::timeout(WAIT, inbound.message()).await {
                Ok(Ok(Some(response))) => {
                    for r in &response.resources {
                        let body = r.resource.as_ref().map(|a| a.value.clone());
                        outcome.material.extend(found(&body.unwrap_or_default()));
                    }
                }
                Ok(Ok(None)) => break,
                Ok(Err(status)) => {
                    outcome.status = Some(status);
                    break;
                }
                Err(_) => {}
            }
        }
    } else {
        let (tx, rx) = mpsc::channel(8);
        let mut request = tonic::Request::new(ReceiverStream::new(rx));
        tag(&mut request, tenant);
        let codec = ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default();
        let mut inbound = match grpc.streaming(request, path, codec).await {
            Ok(r) => r.into_inner(),
            Err(status) => {
                outcome.status = Some(status);
                return outcome;
            }
        };
        for node in nodes {
            let request = DiscoveryRequest {
                node: Some(node.clone()),
                type_url: SDS.into(),
                resource_names: vec!["server-cert".into()],
                ..Default::default()
            };
            let _ = tx.send(request).await;
            match tokio::time::timeout(WAIT, inbound.message()).await {
                Ok(Ok(Some(response))) => {
                    for any in &response.resources {
                        outcome.material.extend(found(&any.value));
                    }
                }
                Ok(Ok(None)) => break,
                Ok(Err(status)) => {
                    outcome.status = Some(status);
                    break;
                }
                Err(_) => {}
            }
        }
    }
    outcome
}

async fn plain_channel(addr: &str) -> Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_lies_about_its_node_never_gets_another_groups_secret() {
    let (server, addr, audit) = start(
        #[cfg(feature = "tls")]
        None,
    )
    .await;
    let channel = plain_channel(&addr).await;
    for method in METHODS {
        // Honest: each tenant gets its own material, and only it.
        for (tenant, mine, theirs) in [
            ("tenant-a", "A-MATERIAL", "B-MATERIAL"),
            ("tenant-b", "B-MATERIAL", "A-MATERIAL"),
        ] {
            let got = call(channel.clone(), method, Some(tenant), &[node(tenant)]).await;
            assert!(
                got.saw(mine) && !got.saw(theirs),
                "{method:?} {tenant}: {got:?}"
            );
        }
        // A liar: identity tenant-a, node of tenant-b. Refused before anything is sent.
        let got = call(
            channel.clone(),
            method,
            Some("tenant-a"),
            &[node("tenant-b")],
        )
        .await;
        assert!(got.material.is_empty(), "{method:?}: {got:?}");
        assert_eq!(
            got.status.as_ref().map(Status::code),
            Some(Code::PermissionDenied),
            "{method:?}: {got:?}"
        );
        // No identity at all.
        let got = call(channel.clone(), method, None, &[node("tenant-b")]).await;
        assert!(got.material.is_empty(), "{method:?}: {got:?}");
        assert_eq!(
            got.status.as_ref().map(Status::code),
            Some(Code::PermissionDenied),
            "{method:?}: {got:?}"
        );
        // Honest first, then claims the other node on the same stream: the core closes it.
        let got = call(
            channel.clone(),
            method,
            Some("tenant-a"),
            &[node("tenant-a"), node("tenant-b")],
        )
        .await;
        assert!(
            got.saw("A-MATERIAL") && !got.saw("B-MATERIAL"),
            "{method:?}: {got:?}"
        );
        assert_eq!(
            got.status.as_ref().map(Status::code),
            Some(Code::InvalidArgument),
            "{method:?}: {got:?}"
        );
    }
    // A change to tenant-b's secret wakes no stream of tenant-a and reaches none.
    server
        .publish(
            "tenant-b",
            vec![StoreOp::Set {
                type_url: SDS.into(),
                entry: ResourceEntry::new("server-cert", secret("B-MATERIAL-2")),
            }],
        )
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    audit.check();
}

#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_mutual_tls_the_certificate_decides() {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let read = |f: &str| std::fs::read(format!("{data}{f}")).unwrap();
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(read("server.pem"), read("server.key")))
        .client_ca_root(Certificate::from_pem(read("ca.pem")));
    let (_server, addr, audit) = start(Some(tls)).await;
    let channel = |tenant: &'static str| {
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read("ca.pem")))
            .domain_name("localhost")
            .identity(Identity::from_pem(
                read(&format!("{tenant}.pem")),
                read(&format!("{tenant}.key")),
            ));
        let endpoint = tonic::transport::Endpoint::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .unwrap();
        async move { endpoint.connect().await.unwrap() }
    };
    let a = channel("tenant-a").await;
    let b = channel("tenant-b").await;
    for method in METHODS {
        let got = call(b.clone(), method, None, &[node("tenant-b")]).await;
        assert!(got.saw("B-MATERIAL") && !got.saw("A-MATERIAL"), "{got:?}");
        // tenant-a's certificate, tenant-b's node, and a forged header: refused.
        let got = call(a.clone(), method, Some("tenant-b"), &[node("tenant-b")]).await;
        assert!(got.material.is_empty(), "{method:?}: {got:?}");
        assert_eq!(
            got.status.as_ref().map(Status::code),
            Some(Code::PermissionDenied),
            "{method:?}: {got:?}"
        );
    }
    audit.check();
}
