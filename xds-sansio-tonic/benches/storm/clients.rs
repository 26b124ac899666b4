//! The clients of the storm: the connected ones, which ACK every update and note when
//! each arrived, and the new ones, which open their streams at once and note when each
//! was served; the bodies they read and the calls they open.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::mpsc;
use tonic::transport::Channel;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse};
use xds_sansio::server::ResourceEntry;
use xds_sansio::server::StoreOp;
use xds_sansio::types::CLUSTER;
use xds_sansio::{Request, Response};
use xds_sansio_tonic::call::{connect, ConnectOptions, Inbound};
use xds_sansio_tonic::client::ManagementServer;

use crate::support;
use crate::updates::{monotonic_ns, Receipt, Receipts};
use crate::{env, Load};

const CDS: &str = CLUSTER.type_url;
/// The clusters of the full state.
pub const CLUSTERS: usize = 1_000;
/// The cluster whose body carries the update's number.
const TICKER: &str = "cluster-0000";

/// A Cluster-shaped body of 150 bytes: the name in field 1, opaque content after it that
/// starts with the update's number.
fn body(i: usize, tick: u64) -> Bytes {
    let name = format!("cluster-{i:04}");
    let mut filler = format!("t{tick:08}-");
    // Field 2's length takes two bytes (a varint over 127).
    filler.push_str(&"x".repeat(150 - 5 - name.len() - filler.len()));
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    let len = filler.len();
    out.extend_from_slice(&[0x12, (len & 0x7f) as u8 | 0x80, (len >> 7) as u8]);
    out.extend_from_slice(filler.as_bytes());
    Bytes::from(out)
}

pub fn set(i: usize, tick: u64) -> StoreOp {
    StoreOp::Set {
        type_url: CDS.into(),
        entry: ResourceEntry::new(format!("cluster-{i:04}"), body(i, tick)),
    }
}

/// The update number a response carries (the ticker's body), if it carries the ticker.
fn tick_of(response: &Response) -> Option<u64> {
    let body = |value: &Bytes| value.get(2..2 + TICKER.len()) == Some(TICKER.as_bytes());
    let ticker = match response {
        Response::Sotw(r) => r.resources.iter().map(|any| &any.value).find(|v| body(v)),
        Response::Delta(r) => r
            .resources
            .iter()
            .filter_map(|resource| resource.resource.as_ref())
            .map(|any| &any.value)
            .find(|v| body(v)),
    }?;
    let content = content_after_name(ticker)?;
    std::str::from_utf8(content.get(1..9)?).ok()?.parse().ok()
}

/// The bytes of the field after a body's name (field 1, first): the update's number, as
/// `t{tick:08}-`, starts them. Ours is field 2 (`body`); the peers' clusters (modes `go`
/// and `java`, `peer_server.rs`) carry it in `alt_stat_name`, field 28, whose tag takes
/// two bytes.
fn content_after_name(body: &[u8]) -> Option<&[u8]> {
    use prost::encoding::decode_varint;
    let mut rest = body.get(2 + usize::from(*body.get(1)?)..)?;
    decode_varint(&mut rest).ok()?; // the field's tag
    let len = usize::try_from(decode_varint(&mut rest).ok()?).ok()?;
    rest.get(..len)
}

/// Whether a response is the whole state (every cluster).
fn whole_state(response: &Response) -> bool {
    match response {
        Response::Sotw(r) => r.resources.len() == CLUSTERS,
        Response::Delta(r) => r.resources.len() == CLUSTERS,
    }
}

/// A raw ADS call asking wildcard CDS, SotW or delta, presenting `version` (none when
/// empty; delta presents it as the version of the ticker's cluster).
async fn open(
    channel: &Channel,
    version: &str,
    delta: bool,
) -> Result<(mpsc::UnboundedSender<Request>, Inbound), tonic::Status> {
    if !delta {
        return support::open_cds(channel, "storm", version).await;
    }
    let held: &[(&str, &str)] = if version.is_empty() {
        &[]
    } else {
        &[(TICKER, version)]
    };
    support::open_cds_delta(channel, "storm", held).await
}

fn ack(tx: &mpsc::UnboundedSender<Request>, response: &Response) {
    let request = match response {
        Response::Sotw(r) => sotw_ack(r),
        Response::Delta(r) => Request::Delta(DeltaDiscoveryRequest {
            type_url: CDS.into(),
            response_nonce: r.nonce.clone(),
            ..Default::default()
        }),
    };
    let _ = tx.send(request);
}

fn sotw_ack(response: &DiscoveryResponse) -> Request {
    Request::Sotw(DiscoveryRequest {
        type_url: CDS.into(),
        version_info: response.version_info.clone(),
        response_nonce: response.nonce.clone(),
        ..Default::default()
    })
}

/// When a shed client is told to come back (1 s without a hint).
fn retry_hint(status: &tonic::Status) -> Duration {
    status
        .metadata()
        .get("grpc-retry-pushback-ms")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .map_or(Duration::from_secs(1), Duration::from_millis)
}

async fn channel(uri: &str) -> Channel {
    connect(
        &ManagementServer::insecure(uri.to_string()),
        &ConnectOptions::new(Duration::from_secs(60)),
    )
    .await
    .expect("connect")
}

/// Opens the connected clients' streams, `per_connection` to a connection: each ACKs
/// every response and notes in `receipts` which update it holds, from when. Returns once
/// every stream is opened; `receipts` tells when each holds its first state.
pub async fn connected_clients(uri: &str, load: &Load, receipts: Arc<Receipts>) {
    let mut channels = Vec::new();
    for _ in 0..load.connected.div_ceil(load.per_connection) {
        channels.push(channel(uri).await);
    }
    for i in 0..load.connected {
        let channel = channels[i % channels.len()].clone();
        let receipts = receipts.clone();
        let delta = load.delta;
        tokio::spawn(async move {
            // Protection may shed a connected client too while they all connect: it comes
            // back when told, as a storm client does.
            let (tx, mut inbound, first) = loop {
                let (tx, mut inbound) = open(&channel, "", delta)
                    .await
                    .expect("a connected client's call");
                match inbound.message().await {
                    Ok(Some(first)) => break (tx, inbound, first),
                    Ok(_) => panic!("a connected client's call ended"),
                    Err(status) => tokio::time::sleep(retry_hint(&status)).await,
                }
            };
            let mut held = None;
            let mut response = first;
            loop {
                let at_ns = monotonic_ns();
                ack(&tx, &response);
                if let Some(tick) = tick_of(&response) {
                    receipts.note(Receipt { held, tick, at_ns });
                    held = Some(tick);
                }
                // Dropped before the next one arrives: freeing the full state's thousand
                // decoded resources when the first update came had cost that update
                // ~200 ms at the 99th percentile, a cost of this loop, not the server's.
                drop(response);
                response = match inbound.message().await {
                    Ok(Some(next)) => next,
                    _ => break,
                };
            }
        });
    }
}

/// Opens every new client's stream at once, each group of `per_connection` on a new
/// connection, and waits until each holds the full state or the limit passes: when each
/// was served (from `start`) and whether it presented a version, and how many times a
/// client was shed.
pub async fn new_clients(uri: &str, load: &Load, start: Instant) -> (Vec<(Duration, bool)>, usize) {
    // When each new client was served, and whether it presented a version.
    let served: Arc<Mutex<Vec<(Duration, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    let sheds = Arc::new(AtomicUsize::new(0));
    for first in (0..load.clients).step_by(load.per_connection) {
        let count = load.per_connection.min(load.clients - first);
        let (uri, served, sheds) = (uri.to_owned(), served.clone(), sheds.clone());
        let (hold, resuming, acks, delta) = (load.hold, load.resuming, load.acks, load.delta);
        tokio::spawn(async move {
            let channel = channel(&uri).await;
            for k in 0..count {
                let (channel, served, sheds) = (channel.clone(), served.clone(), sheds.clone());
                // A stale version: the client resumes, yet is owed the whole state.
                let version = if first + k < resuming {
                    "an-older-version"
                } else {
                    ""
                };
                tokio::spawn(async move {
                    loop {
                        let pause = match open(&channel, version, delta).await {
                            Ok((tx, mut inbound)) => match inbound.message().await {
                                Ok(Some(r)) if whole_state(&r) => {
                                    let resumed = !version.is_empty();
                                    served.lock().unwrap().push((start.elapsed(), resumed));
                                    if acks {
                                        ack(&tx, &r);
                                    }
                                    // Its full state is not kept: the load's memory is
                                    // not the server's figure (a client on a host of its
                                    // own would keep it there).
                                    drop(r);
                                    if hold {
                                        // Hold the stream open, without another ACK,
                                        // reading what comes (unread responses would
                                        // fill the connection's HTTP/2 window and stall
                                        // the other streams on it).
                                        let _tx = tx;
                                        while let Ok(Some(_)) = inbound.message().await {}
                                        std::future::pending::<()>().await;
                                    }
                                    return;
                                }
                                Ok(_) => Duration::from_secs(1),
                                Err(status) => {
                                    sheds.fetch_add(1, Ordering::AcqRel);
                                    retry_hint(&status)
                                }
                            },
                            Err(_) => Duration::from_secs(1),
                        };
                        tokio::time::sleep(pause).await;
                    }
                });
            }
        });
    }
    let limit = Duration::from_secs(env("XDS_STORM_LIMIT_S", 300));
    while served.lock().unwrap().len() < load.clients && start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let served = served.lock().unwrap().clone();
    (served, sheds.load(Ordering::Acquire))
}
