//! The client driver (`XdsClient`) against the adapter's own server over HTTP/2 on
//! 127.0.0.1, in all four variants (SotW and delta, ADS and per-type streams): watches by
//! name and wildcard, updates, a validator's NACK (the value in use stays), a deletion,
//! does-not-exist, a watch that starts from what is held, the status dump, shutdown. With
//! feature `record`, every stream is recorded and the checker finds no violation of the
//! client's.

mod support;

use std::time::Duration;

use bytes::Bytes;
use support::*;
use xds_sansio::client::ResourceState;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio::Variant;
use xds_sansio_tonic::client::{Bootstrap, WatchError, WatchEvent, XdsClient};

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;

fn reject_bad(_: &str, _: &str, b: &Bytes) -> Result<(), String> {
    if contains(b, b"bad") {
        Err("content is bad".into())
    } else {
        Ok(())
    }
}

async fn story(variant: Variant, per_type: bool) {
    let label = format!("{variant:?} per_type={per_type}");
    let server = Killable::start(|s| {
        s.set(CDS, "c1", body("c1", "a")).unwrap();
        s.set(CDS, "c2", body("c2", "a")).unwrap();
        s.set(EDS, "c1", body("c1", "e1")).unwrap();
    })
    .await;
    let node = Node {
        id: "driver-test".into(),
        ..Node::default()
    };
    #[cfg(feature = "record")]
    let recorder = std::sync::Arc::new(xds_sansio_tonic::record::Recorder::new(None));
    let builder = XdsClient::builder(Bootstrap::single(server.uri(), node));
    #[cfg(feature = "record")]
    let builder = builder.tap(recorder.clone());
    let client = builder
        .variant(variant)
        .per_type_streams(per_type)
        .validator(CDS, reject_bad)
        .client_config(|c| c.does_not_exist_timeout = Some(Duration::from_secs(1)))
        .build()
        .unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    let mut all = client.watch_all(CDS).unwrap();
    let mut e1 = client.watch(EDS, "c1").unwrap();
    let mut missing = client.watch(CDS, "nope").unwrap();
    until(&mut c1, &label, changed_to("c1", "a")).await;
    until(&mut all, &label, changed_to("c1", "a")).await;
    until(&mut all, &label, changed_to("c2", "a")).await;
    until(&mut e1, &label, changed_to("c1", "e1")).await;
    until(&mut missing, &label, is_dne("nope")).await;

    // A second watch of a held name starts from the value held.
    let mut c1_again = client.watch(CDS, "c1").unwrap();
    until_within(
        &mut c1_again,
        &label,
        Duration::from_millis(500),
        changed_to("c1", "a"),
    )
    .await;

    // An update.
    server.update(|s| s.set(CDS, "c1", body("c1", "b")).unwrap());
    until(&mut c1, &label, changed_to("c1", "b")).await;

    // Rejected by the validator: an error, and the value in use stays.
    server.update(|s| s.set(CDS, "c1", body("c1", "bad")).unwrap());
    let (event, before) = until(&mut c1, &label, |e| matches!(e, WatchEvent::Error { .. })).await;
    assert!(
        matches!(&event, WatchEvent::Error { name: Some(n), error: WatchError::Rejected { .. } } if n.as_str() == "c1"),
        "{label}: {event:?}"
    );
    assert!(before.is_empty(), "{label}: {before:?}");
    let dump = client.dump().await;
    let row = dump
        .iter()
        .find(|d| d.status.type_url.as_str() == CDS && d.status.name.as_str() == "c1")
        .unwrap();
    assert_eq!(row.status.status.state, ResourceState::Nacked, "{label}");
    assert!(contains(row.body.as_ref().unwrap(), b"b"), "{label}");
    assert_eq!(row.server, server.uri());

    // Fixed; then c2 deleted: the wildcard watch hears it.
    server.update(|s| s.set(CDS, "c1", body("c1", "c")).unwrap());
    until(&mut c1, &label, changed_to("c1", "c")).await;
    server.update(|s| s.remove(CDS, "c2").unwrap());
    until(&mut all, &label, is_dne("c2")).await;

    // Dropping watches unsubscribes; shutdown ends the rest.
    drop(missing);
    drop(c1_again);
    client.shutdown();
    assert_eq!(tokio::time::timeout(STEP, e1.next()).await.unwrap(), None);
    #[cfg(feature = "record")]
    {
        use xds_sansio_conformance::check::{check, CheckSide};
        let entries = recorder.entries();
        assert!(entries.len() > 10, "{label}: {} entries", entries.len());
        let violations = check(&entries, CheckSide::Client);
        assert!(violations.is_empty(), "{label}: {violations:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_ads() {
    story(Variant::Sotw, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sotw_per_type() {
    story(Variant::Sotw, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_ads() {
    story(Variant::Delta, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_per_type() {
    story(Variant::Delta, true).await;
}

/// The bootstrap's `tls` channel credentials (gRPC A65) end to end: the driver dials the
/// adapter's server over mutual TLS with the files the bootstrap names; a bootstrap without
/// the client certificate is refused by the server, and never reaches the store.
#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_mutual_tls_from_the_bootstrap() {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    use xds_sansio::server::{ResourceEntry, StoreOp};
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/");
    let read = |f: &str| std::fs::read(format!("{data}{f}")).unwrap();
    let server = xds_sansio_tonic::XdsServer::builder()
        // Placeholder bodies: the tests are about the client.
        .body_checks(xds_sansio::server::BodyChecks::Off)
        .tls(
            ServerTlsConfig::new()
                .identity(Identity::from_pem(read("server.pem"), read("server.key")))
                .client_ca_root(Certificate::from_pem(read("ca.pem"))),
        )
        .build();
    server
        .publish(
            xds_sansio_tonic::DEFAULT_GROUP,
            vec![StoreOp::Set {
                type_url: CDS.into(),
                entry: ResourceEntry::new("c1", body("c1", "over-tls")),
            }],
        )
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(
        server
            .clone()
            .serve_with_listener(listener, std::future::pending()),
    );
    // The certificate names `localhost`, so the bootstrap does too.
    let bootstrap = |creds: String| {
        Bootstrap::from_json(&format!(
            r#"{{"xds_servers": [{{"server_uri": "localhost:{port}", "channel_creds": [{{"type": "tls", "config": {creds}}}], "server_features": ["xds_v3"]}}],
                "node": {{"id": "tls-test"}}}}"#
        ))
        .unwrap()
    };
    let mutual = bootstrap(format!(
        r#"{{"ca_certificate_file": "{data}ca.pem", "certificate_file": "{data}tenant-a.pem", "private_key_file": "{data}tenant-a.key"}}"#
    ));
    let client = XdsClient::builder(mutual).build().unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    until(&mut c1, "mutual TLS", changed_to("c1", "over-tls")).await;
    client.shutdown();

    // Without a client certificate the handshake fails: an error, never the resource.
    let one_way = bootstrap(format!(r#"{{"ca_certificate_file": "{data}ca.pem"}}"#));
    let client = XdsClient::builder(one_way).build().unwrap();
    let mut c1 = client.watch(CDS, "c1").unwrap();
    let (event, before) = until(&mut c1, "no client certificate", |e| {
        matches!(e, WatchEvent::Error { .. })
    })
    .await;
    assert!(before.is_empty(), "{before:?}");
    assert!(
        matches!(event, WatchEvent::Error { name: None, .. }),
        "{event:?}"
    );
    client.shutdown();
}
