//! One Rust xDS client for `tests/interop/grpc_hook/hook.py` (`--peer junction` or
//! `--peer xds-client`), a process per scenario so that nothing of a client outlives its
//! scenario: reads `ready`, `watch TYPE_URL NAME`, `unwatch TYPE_URL NAME` on stdin and
//! answers `ok` (or the reason) to each.
//!
//! - junction-core 0.3.2 (delta ADS): `Client::build` dials the address; `watch LDS NAME`
//!   is what its application does, a resolve of `http://NAME/` (junction watches the
//!   Listener named after the authority and follows its references); the resolve runs in
//!   the background, so its outcome does not matter. Unwatching is not in its API.
//! - hyperium xds-client 0.1.0-alpha.4 (SotW ADS): `watch TYPE NAME` is
//!   `XdsClient::watch::<T>(NAME)` with a resource type that reads the name in field 1
//!   (every Envoy resource of these types, and the scenarios' placeholder bodies, have it
//!   there) and accepts every body; `unwatch` drops the watcher. `watch TYPE_URL` without
//!   a name is the (legacy) wildcard, an empty name in its API; several names on one
//!   line are watched before the client runs again, so they ride on one request.
//!
//! `conform_client_child junction-bodies` prints the `--bodies` of junction's peer
//! scenarios (tests/interop/scenarios/junction): the Listener, RouteConfiguration, Cluster
//! and ClusterLoadAssignment of a Kubernetes Service `echo.default` port 8080, built with
//! junction-api's own conversions (as `junction_flow` does), so they are what junction
//! expects.
//!
//! usage: conform_client_child junction|xds-client ADDRESS | junction-bodies

use std::collections::BTreeMap;

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use xds_client::resource::TypeUrl;
use xds_client::{
    ClientConfig, Node, ProstCodec, Resource, TokioRuntime, TonicTransportBuilder, XdsClient,
};

const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// Field 1 of a resource: its name (cluster_name for a ClusterLoadAssignment).
#[derive(Clone, PartialEq, prost::Message)]
struct Named {
    #[prost(string, tag = "1")]
    name: String,
}

macro_rules! raw_resource {
    ($t:ident, $url:expr, $all:expr) => {
        #[derive(Debug)]
        struct $t;
        impl Resource for $t {
            type Message = Named;
            const TYPE_URL: TypeUrl = TypeUrl::new($url);
            const ALL_RESOURCES_REQUIRED_IN_SOTW: bool = $all;
            fn deserialize(bytes: Bytes) -> xds_client::Result<Named> {
                <Named as prost::Message>::decode(bytes).map_err(Into::into)
            }
            fn name(m: &Named) -> &str {
                &m.name
            }
            fn validate(_: Named) -> xds_client::Result<Self> {
                Ok($t)
            }
        }
    };
}

raw_resource!(RawListener, LDS, true);
raw_resource!(RawRoute, RDS, false);
raw_resource!(RawCluster, CDS, true);
raw_resource!(RawEndpoints, EDS, false);

enum Peer {
    Junction(junction_core::Client),
    XdsClient {
        client: XdsClient,
        watchers: BTreeMap<(String, String), tokio::task::JoinHandle<()>>,
    },
}

fn drain<T: Resource + Send + 'static>(
    mut watcher: xds_client::ResourceWatcher<T>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move { while watcher.next().await.is_some() {} })
}

impl Peer {
    async fn command(&mut self, line: &str) -> Result<(), String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        match (self, words.as_slice()) {
            (_, ["ready"]) => Ok(()),
            (Peer::Junction(client), ["watch", type_url, name]) => {
                if *type_url != LDS {
                    return Err(format!("junction watches listeners, not {type_url}"));
                }
                let url = junction_core::Url::from_str(&format!("http://{name}/"))
                    .map_err(|e| format!("{name}: {e}"))?;
                let client = client.clone();
                tokio::spawn(async move {
                    let _ = client
                        .resolve_http(&http::Method::GET, &url, &http::HeaderMap::new())
                        .await;
                });
                Ok(())
            }
            (Peer::Junction(_), ["unwatch", ..]) => {
                Err("junction-core has no way to stop watching".into())
            }
            (Peer::XdsClient { client, watchers }, ["watch", type_url, names @ ..]) => {
                // No names: the (legacy) wildcard, an empty name in its API. Every watch of
                // the line is made before the worker runs (one thread), so they ride on one
                // request, as one application call would.
                let names: Vec<&str> = if names.is_empty() {
                    vec![""]
                } else {
                    names.to_vec()
                };
                for name in names {
                    let task = match *type_url {
                        LDS => drain(client.watch::<RawListener>(name).await),
                        RDS => drain(client.watch::<RawRoute>(name).await),
                        CDS => drain(client.watch::<RawCluster>(name).await),
                        EDS => drain(client.watch::<RawEndpoints>(name).await),
                        other => return Err(format!("the hook does not watch {other}")),
                    };
                    if let Some(old) =
                        watchers.insert((type_url.to_string(), name.to_string()), task)
                    {
                        old.abort();
                    }
                }
                Ok(())
            }
            (Peer::XdsClient { watchers, .. }, ["unwatch", type_url, names @ ..]) => {
                let names: Vec<&str> = if names.is_empty() {
                    vec![""]
                } else {
                    names.to_vec()
                };
                for name in names {
                    // Dropping the watcher is how its application unwatches; a name not
                    // watched is nothing to drop (the model's unsubscribe of it is a no-op).
                    if let Some(task) = watchers.remove(&(type_url.to_string(), name.to_string())) {
                        task.abort();
                    }
                }
                Ok(())
            }
            (_, other) => Err(format!("unknown command {other:?}")),
        }
    }
}

use std::str::FromStr;

/// junction's resources, as `junction_flow` builds them: `{"LDS": {"name:tag": Any}}`.
fn junction_bodies() -> serde_json::Value {
    use base64::Engine;
    use junction_api::backend::{Backend, BackendId, LbPolicy};
    use junction_api::http::Route;
    use junction_api::{Name, Service};
    use prost013::Message;
    use xds_api::pb::envoy::config::core::v3 as core;
    use xds_api::pb::envoy::config::endpoint::v3 as endpoint;
    use xds_api::pb::envoy::config::listener::v3 as listener;
    use xds_api::pb::envoy::extensions::filters::network::http_connection_manager::v3 as hcm;
    use xds_api::pb::google::protobuf::Any;
    const HCM: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
    let service = Service::kube("default", "echo").expect("a service");
    let backend = Backend {
        id: BackendId {
            service: service.clone(),
            port: 8080,
        },
        lb: LbPolicy::RoundRobin,
    };
    let route = Route::passthrough_route(Name::from_static("echo-route"), service);
    let ads = core::ConfigSource {
        config_source_specifier: Some(core::config_source::ConfigSourceSpecifier::Ads(
            core::AggregatedConfigSource {},
        )),
        resource_api_version: core::ApiVersion::V3 as i32,
        ..Default::default()
    };
    let listener = |stat_prefix: &str| listener::Listener {
        name: "echo.default.svc.cluster.local:8080".into(),
        api_listener: Some(listener::ApiListener {
            api_listener: Some(Any {
                type_url: HCM.into(),
                value: hcm::HttpConnectionManager {
                    stat_prefix: stat_prefix.into(),
                    route_specifier: Some(hcm::http_connection_manager::RouteSpecifier::Rds(
                        hcm::Rds {
                            config_source: Some(ads.clone()),
                            route_config_name: route.to_xds().name,
                        },
                    )),
                    ..Default::default()
                }
                .encode_to_vec(),
            }),
        }),
        ..Default::default()
    };
    let endpoints = |port: u32| endpoint::ClusterLoadAssignment {
        cluster_name: backend.id.name(),
        endpoints: vec![endpoint::LocalityLbEndpoints {
            lb_endpoints: vec![endpoint::LbEndpoint {
                host_identifier: Some(endpoint::lb_endpoint::HostIdentifier::Endpoint(
                    endpoint::Endpoint {
                        address: Some(core::Address {
                            address: Some(core::address::Address::SocketAddress(
                                core::SocketAddress {
                                    address: "127.0.0.1".into(),
                                    port_specifier: Some(
                                        core::socket_address::PortSpecifier::PortValue(port),
                                    ),
                                    ..Default::default()
                                },
                            )),
                        }),
                        ..Default::default()
                    },
                )),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let any = |type_url: &str, body: Vec<u8>| {
        serde_json::json!({
            "@type": type_url,
            "value": base64::engine::general_purpose::STANDARD.encode(body),
        })
    };
    let route_xds = route.to_xds();
    let cluster = backend.to_xds();
    // Invalid for junction: the EDS service name is not the cluster's (junction_flow).
    let mut bad_cluster = cluster.clone();
    if let Some(eds) = bad_cluster.eds_cluster_config.as_mut() {
        eds.service_name = "not-the-cluster-name".into();
    }
    serde_json::json!({
        "LDS": {
            format!("{}:l1", listener("echo").name): any(LDS, listener("echo").encode_to_vec()),
            format!("{}:l2", listener("echo2").name): any(LDS, listener("echo2").encode_to_vec()),
        },
        "RDS": { format!("{}:r1", route_xds.name): any(RDS, route_xds.encode_to_vec()) },
        "CDS": {
            format!("{}:c1", cluster.name): any(CDS, cluster.encode_to_vec()),
            format!("{}:bad", cluster.name): any(CDS, bad_cluster.encode_to_vec()),
        },
        "EDS": {
            format!("{}:e1", backend.id.name()): any(EDS, endpoints(9001).encode_to_vec()),
            format!("{}:e2", backend.id.name()): any(EDS, endpoints(9002).encode_to_vec()),
        },
    })
}

// One thread: the watches of one command are all made before the client's worker runs.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("junction-bodies") {
        println!("{:#}", junction_bodies());
        return;
    }
    let (Some(peer), Some(address)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: conform_client_child junction|xds-client ADDRESS");
        std::process::exit(2);
    };
    let mut peer = match peer.as_str() {
        "junction" => {
            match junction_core::Client::build(
                format!("http://{address}"),
                "client".into(),
                "conform".into(),
            )
            .await
            {
                Ok(client) => Peer::Junction(client),
                Err(e) => {
                    eprintln!("junction: {e}");
                    std::process::exit(1);
                }
            }
        }
        "xds-client" => {
            let node = Node::new("xds-sansio-conform", "0").with_id("client");
            let config = ClientConfig::new(node, format!("http://{address}"));
            let client = XdsClient::builder(
                config,
                TonicTransportBuilder::new(),
                ProstCodec,
                TokioRuntime,
            )
            .build();
            Peer::XdsClient {
                client,
                watchers: BTreeMap::new(),
            }
        }
        other => {
            eprintln!("unknown peer {other}");
            std::process::exit(2);
        }
    };
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match peer.command(line.trim()).await {
            Ok(()) => "ok".to_string(),
            Err(e) => e.replace('\n', " "),
        };
        if out
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .is_err()
        {
            break;
        }
        let _ = out.flush().await;
    }
}
