//! `xds-sansio publish --etcd` against a real one-member etcd (installed by
//! `scripts/etcd.sh`, started on a 127.0.0.1 port of its own, bounded): a directory is
//! written in one transaction, an inconsistent one is refused before etcd, `--check-only`
//! writes nothing.

#[path = "../../xds-sansio-tonic/tests/etcd_support/mod.rs"]
mod etcd_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::types::{CLUSTER, ENDPOINT};
use xds_sansio_tonic::etcd::wire::{prefix_end, Member, RangeRequest};

/// An EDS cluster `c1` (its endpoints are `c1`'s `ClusterLoadAssignment`).
const EDS_CLUSTER: &[u8] = b"\x0a\x02c1\x10\x03\x1a\x04\x0a\x02\x1a\x00";
/// `c1`'s endpoints (no endpoint at all).
const ENDPOINTS: &[u8] = b"\x0a\x02c1";

fn write_group(dir: &Path, group: &str, resources: &[(&str, &[u8])]) {
    let response = DiscoveryResponse {
        resources: resources
            .iter()
            .map(|(type_url, body)| Any {
                type_url: (*type_url).into(),
                value: bytes::Bytes::copy_from_slice(body),
            })
            .collect(),
        ..Default::default()
    };
    let text = FileCodec::new().encode(Format::Json, &response).unwrap();
    std::fs::write(dir.join(format!("{group}.json")), text).unwrap();
}

fn publish(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
        .arg("publish")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

async fn keys(endpoint: &str) -> Vec<String> {
    let mut member = Member::connect(endpoint, Duration::from_secs(2))
        .await
        .unwrap();
    let held = member
        .range(RangeRequest {
            key: b"/xds/".to_vec(),
            range_end: prefix_end(b"/xds/"),
            keys_only: true,
            ..Default::default()
        })
        .await
        .unwrap();
    held.kvs
        .iter()
        .map(|kv| String::from_utf8_lossy(&kv.key).into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_writes_a_directory_and_refuses_an_inconsistent_one() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let etcd = etcd_support::EtcdCluster::start(1).await;
        let endpoint = etcd.endpoint(0);
        let dir = std::env::temp_dir().join(format!("xds-publish-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dir_arg = dir.to_string_lossy().into_owned();

        // Consistent: the cluster and its endpoints.
        write_group(
            &dir,
            "edge",
            &[
                (CLUSTER.type_url, EDS_CLUSTER),
                (ENDPOINT.type_url, ENDPOINTS),
            ],
        );
        let (ok, text) = publish(&["--etcd", &endpoint, "--check-only", &dir_arg]);
        assert!(ok, "{text}");
        assert!(
            keys(&endpoint).await.is_empty(),
            "--check-only writes nothing"
        );
        let (ok, text) = publish(&["--etcd", &endpoint, &dir_arg]);
        assert!(ok, "{text}");
        assert!(text.contains("2 keys written"), "{text}");
        assert_eq!(
            keys(&endpoint).await,
            [
                "/xds/edge/envoy.config.cluster.v3.Cluster/c1",
                "/xds/edge/envoy.config.endpoint.v3.ClusterLoadAssignment/c1",
            ]
        );

        // Inconsistent: the endpoints are gone but the cluster still needs them.
        write_group(&dir, "edge", &[(CLUSTER.type_url, EDS_CLUSTER)]);
        let (ok, text) = publish(&["--etcd", &endpoint, &dir_arg]);
        assert!(!ok, "refused: {text}");
        assert!(text.contains("refused"), "{text}");
        assert_eq!(keys(&endpoint).await.len(), 2, "etcd unchanged");

        // The same content again writes nothing.
        write_group(
            &dir,
            "edge",
            &[
                (CLUSTER.type_url, EDS_CLUSTER),
                (ENDPOINT.type_url, ENDPOINTS),
            ],
        );
        let (ok, text) = publish(&["--etcd", &endpoint, &dir_arg]);
        assert!(ok && text.contains("0 keys written, 0 deleted"), "{text}");

        std::fs::remove_dir_all(&dir).unwrap();
    })
    .await
    .expect("bounded");
}
