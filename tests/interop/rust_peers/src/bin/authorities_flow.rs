//! Interop: our client (`XdsClient`) with a multi-authority bootstrap (gRFC A47) against two
//! real management servers, each behind a `conform server` hook (docs/conform.md, "The
//! hook"), e.g. two go-control-plane processes (tests/interop/go/cmd/gcp_hook).
//!
//! The bootstrap names server A as the default and for authority `a.test`, server B for
//! authority `b.test`. The story per run (SotW and delta over ADS):
//! - federation: `c0` (an old-style name: the default servers), `xdstp://a.test/.../c1`
//!   (only A has it) and `xdstp://b.test/.../c2` (only B has it) all arrive, so each name
//!   went to its authority's server;
//! - one authority down: B stops; c2's watch is told B is unreachable, while c0 and c1
//!   hear nothing of it and A's next change to c1 still arrives;
//! - back: B serves again with a changed c2, which the client fetches on its own.
//!
//! The conversation is recorded on our side (both servers' streams); the checker must find
//! no violation of ours.
//!
//! usage: authorities_flow --hook-a "CMD ARGS" --control-a ADDR --target-a ADDR
//!        --hook-b "CMD ARGS" --control-b ADDR --target-b ADDR
//!        [--peer NAME] [--runs sotw-ads,delta-ads] WORKDIR

#[path = "../common.rs"]
mod common;
#[path = "../hook.rs"]
mod hook;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use common::{Report, Result, STEP};
use hook::{Hook, Key};
use serde_json::json;
use xds_sansio_conformance::check::{check, CheckSide};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::Variant;
use xds_sansio_tonic::client::bootstrap::Authority;
use xds_sansio_tonic::client::{
    BackoffConfig, Bootstrap, ManagementServer, Watch, WatchError, WatchEvent, XdsClient,
};
use xds_sansio_tonic::record::Recorder;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const NODE: &str = "client";
const C0: &str = "c0";
const C1: &str = "xdstp://a.test/envoy.config.cluster.v3.Cluster/c1";
const C2: &str = "xdstp://b.test/envoy.config.cluster.v3.Cluster/c2";
/// How long c0 and c1 are watched for a stray error while B is down.
const QUIET: Duration = Duration::from_secs(2);

fn cluster(name: &str, note: &str) -> Vec<u8> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;
    Cluster {
        name: name.into(),
        alt_stat_name: note.into(),
        ..Default::default()
    }
    .encode_to_vec()
}

fn one(name: &str, note: &str) -> BTreeMap<Key, Vec<u8>> {
    BTreeMap::from([((CDS.to_string(), name.to_string()), cluster(name, note))])
}

/// The next event of any watch, with the name it watches, within `within`.
async fn next_event(
    watches: &mut [(&'static str, Watch)],
    within: Duration,
) -> Option<(&'static str, WatchEvent)> {
    common::next_watch_event(watches, tokio::time::Instant::now() + within).await
}

/// Waits for each `(watched name, body)`; any error or does-not-exist meanwhile fails,
/// except an unreachable error on a name of `may_fail`.
async fn expect_bodies(
    label: &str,
    watches: &mut [(&'static str, Watch)],
    mut want: BTreeMap<&'static str, Vec<u8>>,
    may_fail: &[&str],
) -> Result<()> {
    let deadline = tokio::time::Instant::now() + STEP;
    while !want.is_empty() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some((name, e)) = next_event(watches, left).await else {
            return Err(format!(
                "{label}: timed out waiting for {:?}",
                want.keys().collect::<Vec<_>>()
            ));
        };
        match &e {
            WatchEvent::Changed { body, .. } => {
                if want.get(name).is_some_and(|b| b[..] == body[..]) {
                    want.remove(name);
                }
            }
            WatchEvent::Error {
                error: WatchError::Unreachable { .. },
                ..
            } if may_fail.contains(&name) => {}
            // The end of that outage, told when its server answers again.
            WatchEvent::Reachable { .. } if may_fail.contains(&name) => {}
            other => return Err(format!("{label}: the watch of {name} saw {other:?}")),
        }
    }
    Ok(())
}

fn bootstrap(target_a: &str, target_b: &str) -> Bootstrap {
    let node = Node {
        id: NODE.into(),
        ..Node::default()
    };
    let mut b = Bootstrap::single(format!("http://{target_a}"), node);
    for (authority, target) in [("a.test", target_a), ("b.test", target_b)] {
        b.authorities.insert(
            authority.into(),
            Authority {
                client_listener_resource_name_template: format!(
                    "xdstp://{authority}/envoy.config.listener.v3.Listener/%s"
                ),
                servers: vec![ManagementServer::insecure(format!("http://{target}"))],
            },
        );
    }
    b
}

async fn run(
    a: &mut Hook,
    b: &mut Hook,
    label: &str,
    variant: Variant,
    report: &mut Report,
) -> Result<()> {
    a.start_server(label, variant, false).await?;
    b.start_server(label, variant, false).await?;
    let mut on_a = one(C0, "default authority");
    on_a.extend(one(C1, "authority a"));
    a.publish(&on_a).await?;
    b.publish(&one(C2, "authority b")).await?;

    let recorder = Arc::new(Recorder::new(None));
    let client = XdsClient::builder(bootstrap(&a.target, &b.target))
        .variant(variant)
        .backoff({
            let mut c = BackoffConfig::default();
            c.initial = Duration::from_millis(100);
            c.max = Duration::from_millis(500);
            c
        })
        .tap(recorder.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let mut watches: Vec<(&'static str, Watch)> = Vec::new();
    for name in [C0, C1, C2] {
        watches.push((name, client.watch(CDS, name).map_err(|e| e.to_string())?));
    }
    let result = story(a, b, label, variant, &mut watches, report).await;
    client.shutdown();
    result?;
    let entries = recorder.entries();
    let ours = check(&entries, CheckSide::Client);
    if !ours.is_empty() {
        return Err(format!(
            "{label}: the checker found violations of our client: {ours:#?}"
        ));
    }
    let streams: std::collections::BTreeSet<u64> = entries
        .iter()
        .filter_map(|e| match e {
            xds_sansio_conformance::transcript::Entry::Request { stream, .. }
            | xds_sansio_conformance::transcript::Entry::Response { stream, .. } => Some(*stream),
            _ => None,
        })
        .collect();
    report.step(
        label,
        json!({"messages": entries.len(), "streams": streams.len(), "our_violations": 0}),
    );
    Ok(())
}

async fn story(
    a: &mut Hook,
    b: &mut Hook,
    label: &str,
    variant: Variant,
    watches: &mut [(&'static str, Watch)],
    report: &mut Report,
) -> Result<()> {
    // Federation: every name from its authority's server (only that server has it).
    expect_bodies(
        &format!("{label} (federation)"),
        watches,
        BTreeMap::from([
            (C0, cluster(C0, "default authority")),
            (C1, cluster(C1, "authority a")),
            (C2, cluster(C2, "authority b")),
        ]),
        &[],
    )
    .await?;
    report.step(
        &format!("{label}: federation"),
        json!("c0 (default servers) and c1 from A, c2 from B"),
    );

    // One authority down: only its watches hear of it.
    b.send(json!({"hook": "stop"})).await?;
    let mut told = false;
    let deadline = tokio::time::Instant::now() + STEP;
    while !told {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match next_event(watches, left).await {
            Some((
                C2,
                WatchEvent::Error {
                    error: WatchError::Unreachable { .. },
                    ..
                },
            )) => told = true,
            Some((name, e)) => {
                return Err(format!("{label} (B down): the watch of {name} saw {e:?}"))
            }
            None => return Err(format!("{label} (B down): c2's watch was never told")),
        }
    }
    // c0 and c1 hear nothing of B (a repeated error on c2 is fine), and A still serves.
    let quiet_until = tokio::time::Instant::now() + QUIET;
    while let Some((name, e)) = next_event(
        watches,
        quiet_until.saturating_duration_since(tokio::time::Instant::now()),
    )
    .await
    {
        let c2_unreachable = name == C2
            && matches!(
                e,
                WatchEvent::Error {
                    error: WatchError::Unreachable { .. },
                    ..
                }
            );
        if !c2_unreachable {
            return Err(format!("{label} (B down): the watch of {name} saw {e:?}"));
        }
    }
    a.publish(&one(C1, "authority a, changed")).await?;
    expect_bodies(
        &format!("{label} (B down, A changes c1)"),
        watches,
        BTreeMap::from([(C1, cluster(C1, "authority a, changed"))]),
        &[C2],
    )
    .await?;
    report.step(
        &format!("{label}: one authority down"),
        json!("c2 told unreachable; c0 and c1 untouched; A's change to c1 applied"),
    );

    // B is back with a changed c2.
    b.start_server(label, variant, false).await?;
    b.publish(&one(C2, "authority b, changed")).await?;
    expect_bodies(
        &format!("{label} (B back)"),
        watches,
        BTreeMap::from([(C2, cluster(C2, "authority b, changed"))]),
        &[C2],
    )
    .await?;
    report.step(
        &format!("{label}: back"),
        json!("the client reconnected to B on its own and applied the changed c2"),
    );
    Ok(())
}

async fn all(args: &[String], workdir: &Path, report: &mut Report) -> Result<()> {
    std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
    let need =
        |name: &str| common::arg(args, name).ok_or(format!("{name} is missing (see the usage)"));
    let mut a = Hook::start(
        &need("--hook-a")?,
        &need("--control-a")?,
        &need("--target-a")?,
        workdir,
        "hook-a.log",
    )
    .await?;
    let mut b = Hook::start(
        &need("--hook-b")?,
        &need("--control-b")?,
        &need("--target-b")?,
        workdir,
        "hook-b.log",
    )
    .await?;
    let wanted = common::arg(args, "--runs").unwrap_or("sotw-ads,delta-ads".into());
    let mut failures = Vec::new();
    for label in wanted.split(',') {
        let variant = match label {
            "sotw-ads" => Variant::Sotw,
            "delta-ads" => Variant::Delta,
            other => return Err(format!("unknown run {other:?}")),
        };
        if let Err(e) = run(&mut a, &mut b, label, variant, report).await {
            println!("[{label}] FAILED: {e}");
            failures.push(e);
        }
        let _ = a.send(json!({"hook": "stop"})).await;
        let _ = b.send(json!({"hook": "stop"})).await;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = PathBuf::from(args.last().cloned().unwrap_or_default());
    let mut report = Report {
        peer: common::arg(&args, "--peer").unwrap_or("two hooks".into()),
        ..Default::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(120), all(&args, &workdir, &mut report))
        .await
        .unwrap_or_else(|_| Err("the story took more than 120 s".into()));
    report.finish(&workdir, result)
}
