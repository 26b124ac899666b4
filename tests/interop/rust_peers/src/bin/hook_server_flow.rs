//! Interop: our client (`XdsClient`, recorder on every stream) <-> any management server
//! behind a `conform server` hook (docs/conform.md, "The hook": the control socket), e.g.
//! go-control-plane (tests/interop/go/cmd/gcp_hook) or java-control-plane. The hook is
//! started here; the resources are published through its control socket as real Envoy
//! Clusters and ClusterLoadAssignments (envoy-types), for node `client`.
//!
//! The story per run (SotW and delta, over ADS and on the per-type services):
//! - watch: c1, c2 and c3 (which does not exist) and the endpoints of c1 arrive, ACKed;
//! - update: a changed c1 is pushed and applied;
//! - NACK: a c2 our validator rejects is NACKed, the last good c2 stays in use, and the
//!   server does not resend the rejected one in a loop; then a good c2 is applied;
//! - restart: the hook's `stop` and `start` with the same resources: the client
//!   reconnects, resubscribes with the versions it holds and keeps its state.
//!
//! The conversation is recorded on our side; the checker must find no violation of ours;
//! what the peer breaks is listed in the report.
//!
//! usage: hook_server_flow --hook-cmd "CMD ARGS" --control ADDR --target ADDR
//!        [--peer NAME] [--runs sotw-ads,delta-ads,sotw-per-type,delta-per-type] WORKDIR

#[path = "../common.rs"]
mod common;
#[path = "../hook.rs"]
mod hook;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{Report, Result, STEP};
use hook::{Hook, Key};
use serde_json::json;
use xds_sansio_conformance::check::{check, to_jsonl, CheckSide};
use xds_sansio::client::ResourceState;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio_conformance::transcript::Entry;
use xds_sansio::{Request, Response, Variant};
use xds_sansio_tonic::client::{
    BackoffConfig, Bootstrap, Watch, WatchError, WatchEvent, XdsClient,
};
use xds_sansio_tonic::record::Recorder;

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// The node conform's requests name, which the hooks serve.
const NODE: &str = "client";
/// The note of a Cluster our validator rejects.
const BAD: &str = "bad";
/// More responses than this to one NACK within [`LOOP_WINDOW`] is a resend loop.
const LOOP_LIMIT: usize = 3;
const LOOP_WINDOW: Duration = Duration::from_secs(2);

/// Our watch's validator: a Cluster whose alt_stat_name is [`BAD`] is rejected.
fn validate_cluster(_name: &str, _version: &str, body: &Bytes) -> std::result::Result<(), String> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use prost::Message;
    let c = Cluster::decode(body.clone()).map_err(|e| format!("not a Cluster: {e}"))?;
    if c.alt_stat_name == BAD {
        return Err(format!("cluster {} is marked {BAD}", c.name));
    }
    Ok(())
}

fn key(type_url: &str, name: &str) -> Key {
    (type_url.to_string(), name.to_string())
}

/// What a phase tolerates besides the bodies it waits for.
#[derive(Clone, Copy, PartialEq)]
enum Tolerate {
    Nothing,
    /// Our validator's rejection of c2.
    Rejection,
    /// The server unreachable for a while (a restart).
    Unreachable,
}

/// Waits until every `want`ed body has been delivered to its watch.
async fn wait_for(
    label: &str,
    watches: &mut [(Key, Watch)],
    mut want: BTreeMap<Key, Vec<u8>>,
    tolerate: Tolerate,
) -> Result<Vec<String>> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + STEP;
    while !want.is_empty() {
        let Some(((type_url, _), e)) = common::next_watch_event(watches, deadline).await else {
            return Err(format!(
                "{label}: timed out; missing {:?}; events {seen:#?}",
                want.keys().collect::<Vec<_>>()
            ));
        };
        judge(label, &type_url, &e, tolerate)?;
        if let WatchEvent::Changed { name, body, .. } = &e {
            let k = key(&type_url, name);
            if want.get(&k).is_some_and(|b| b[..] == body[..]) {
                want.remove(&k);
            }
        }
        seen.push(format!("{e:?}"));
    }
    Ok(seen)
}

/// An event that must not happen in the phase is an error.
fn judge(label: &str, type_url: &str, e: &WatchEvent, tolerate: Tolerate) -> Result<()> {
    match e {
        WatchEvent::Changed { body, name, .. } => {
            if type_url == CDS && validate_cluster(name, "", body).is_err() {
                return Err(format!("{label}: a rejected body was delivered: {e:?}"));
            }
            Ok(())
        }
        WatchEvent::DoesNotExist { name } if name.as_str() == "c3" => Ok(()),
        WatchEvent::DoesNotExist { .. } => Err(format!("{label}: {e:?}")),
        WatchEvent::Error {
            name: Some(name),
            error: WatchError::Rejected { .. },
        } if tolerate == Tolerate::Rejection && name.as_str() == "c2" => Ok(()),
        WatchEvent::Error {
            error: WatchError::Unreachable { .. },
            ..
        } if tolerate == Tolerate::Unreachable => Ok(()),
        // The end of that outage, told when the restarted server answers.
        WatchEvent::Reachable { .. } if tolerate == Tolerate::Unreachable => Ok(()),
        WatchEvent::Error { .. } => Err(format!("{label}: our client reported {e:?}")),
        _ => Err(format!("{label}: an event this driver does not know: {e:?}")),
    }
}

/// Drains the events the watches hold now, judging each.
fn drain(label: &str, watches: &mut [(Key, Watch)], tolerate: Tolerate) -> Result<Vec<WatchEvent>> {
    let mut out = Vec::new();
    for ((type_url, _), w) in watches.iter_mut() {
        while let Some(e) = w.try_next() {
            judge(label, type_url, &e, tolerate)?;
            out.push(e);
        }
    }
    Ok(out)
}

fn stream_of(e: &Entry) -> Option<u64> {
    match e {
        Entry::Request { stream, .. } | Entry::Response { stream, .. } => Some(*stream),
        Entry::Store { .. } => None,
    }
}

fn is_nack_of_cds(e: &Entry) -> bool {
    match e {
        Entry::Request {
            request: Request::Sotw(r),
            ..
        } => r.type_url == CDS && r.error_detail.is_some(),
        Entry::Request {
            request: Request::Delta(r),
            ..
        } => r.type_url == CDS && r.error_detail.is_some(),
        _ => false,
    }
}

fn is_cds_response(e: &Entry) -> bool {
    match e {
        Entry::Response {
            response: Response::Sotw(r),
            ..
        } => r.type_url == CDS,
        Entry::Response {
            response: Response::Delta(r),
            ..
        } => r.type_url == CDS,
        _ => false,
    }
}

/// The versions a request resubscribes with (SotW: version_info; delta:
/// initial_resource_versions), or `None` for another kind of entry.
fn resubscribed_versions(e: &Entry) -> Option<(String, String)> {
    match e {
        Entry::Request {
            request: Request::Sotw(r),
            ..
        } => Some((r.type_url.clone(), r.version_info.clone())),
        Entry::Request {
            request: Request::Delta(r),
            ..
        } => {
            let mut v: Vec<String> = r
                .initial_resource_versions
                .iter()
                .map(|(n, v)| format!("{n}={v}"))
                .collect();
            v.sort();
            Some((r.type_url.clone(), v.join(",")))
        }
        _ => None,
    }
}

fn save(recorder: &Recorder, path: &Path) {
    let codec = JsonCodec::new();
    let lines: Vec<String> = recorder
        .entries()
        .iter()
        .map(|e| to_jsonl(e, &codec).unwrap())
        .collect();
    let _ = std::fs::write(path, lines.join("\n") + "\n");
}

/// The client holds exactly `want`, ACKed; c3 is not held.
async fn holds(label: &str, client: &XdsClient, want: &BTreeMap<Key, Vec<u8>>) -> Result<()> {
    let dump = client.dump().await;
    for (k, b) in want {
        let Some(entry) = dump
            .iter()
            .find(|d| d.status.type_url.as_str() == k.0 && d.status.name.as_str() == k.1)
        else {
            return Err(format!("{label}: the client does not hold {k:?}"));
        };
        if entry.body.as_deref() != Some(&b[..]) {
            return Err(format!(
                "{label}: {k:?} held is not the last good body: {entry:?}"
            ));
        }
    }
    for entry in &dump {
        if entry.status.name.as_str() == "c3" && entry.body.is_some() {
            return Err(format!(
                "{label}: c3 does not exist but the client holds it"
            ));
        }
    }
    Ok(())
}

struct Run<'a> {
    label: &'a str,
    variant: Variant,
    per_type: bool,
}

async fn run(hook: &mut Hook, run: &Run<'_>, report: &mut Report, workdir: &Path) -> Result<()> {
    let label = run.label;
    let mut served: BTreeMap<Key, Vec<u8>> = BTreeMap::new();
    served.insert(key(CDS, "c1"), common::envoy_body(CDS, "c1", "cluster one"));
    served.insert(key(CDS, "c2"), common::envoy_body(CDS, "c2", "cluster two"));
    served.insert(
        key(EDS, "c1"),
        common::envoy_body(EDS, "c1", "endpoints one"),
    );
    hook.start_server(label, run.variant, run.per_type).await?;
    hook.publish(&served).await?;

    let recorder = Arc::new(Recorder::new(None));
    let node = Node {
        id: NODE.into(),
        ..Node::default()
    };
    let client = XdsClient::builder(Bootstrap::single(format!("http://{}", hook.target), node))
        .variant(run.variant)
        .per_type_streams(run.per_type)
        .validator(CDS, validate_cluster)
        .backoff({
            let mut c = BackoffConfig::default();
            c.initial = Duration::from_millis(100);
            c.max = Duration::from_secs(1);
            c
        })
        .tap(recorder.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let mut watches: Vec<(Key, Watch)> = Vec::new();
    for (t, n) in [(CDS, "c1"), (CDS, "c2"), (CDS, "c3"), (EDS, "c1")] {
        watches.push((key(t, n), client.watch(t, n).map_err(|e| e.to_string())?));
    }
    let result = story(
        hook,
        run,
        &client,
        &mut watches,
        &mut served,
        &recorder,
        report,
    )
    .await;
    client.shutdown();
    if let Err(e) = result {
        save(&recorder, &workdir.join(format!("{label}-failed.jsonl")));
        return Err(e);
    }
    save(&recorder, &workdir.join(format!("{label}.jsonl")));
    let entries = recorder.entries();
    let ours = check(&entries, CheckSide::Client);
    if !ours.is_empty() {
        return Err(format!(
            "{label}: the checker found violations of our client: {ours:#?}"
        ));
    }
    // The peer's violations, one line per rule (a resend loop makes thousands).
    let mut theirs: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for v in check(&entries, CheckSide::Server) {
        let first = format!("first at line {}: {}", v.line, v.detail);
        theirs
            .entry(v.rule.id().to_string())
            .or_insert((0, first))
            .0 += 1;
    }
    let theirs: Vec<String> = theirs
        .into_iter()
        .map(|(rule, (count, first))| format!("{rule}: {count} times, {first}"))
        .collect();
    for v in &theirs {
        report.deviations.push(format!("{label}: checker: {v}"));
    }
    if run.variant == Variant::Delta {
        let told = entries.iter().any(|e| match e {
            Entry::Response {
                response: Response::Delta(r),
                ..
            } => {
                r.removed_resources.iter().any(|n| n == "c3")
                    || r.resources
                        .iter()
                        .any(|x| x.name == "c3" && x.resource.is_none())
            }
            _ => false,
        });
        if !told {
            report.deviations.push(format!(
                "{label}: the subscribed name c3 does not exist and is never reported as such \
                 (no removed_resources, no body-less Resource); clients fall back on their \
                 does-not-exist timer"
            ));
        }
    }
    report.step(
        label,
        json!({"messages": entries.len(), "peer_violations": theirs}),
    );
    Ok(())
}

async fn story(
    hook: &mut Hook,
    run: &Run<'_>,
    client: &XdsClient,
    watches: &mut [(Key, Watch)],
    served: &mut BTreeMap<Key, Vec<u8>>,
    recorder: &Recorder,
    report: &mut Report,
) -> Result<()> {
    let label = run.label;
    // watch
    wait_for(label, watches, served.clone(), Tolerate::Nothing).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    holds(label, client, served).await?;
    for entry in client.dump().await {
        if entry.body.is_some() && entry.status.status.state != ResourceState::Acked {
            return Err(format!("{label}: not ACKed: {entry:?}"));
        }
    }
    report.step(
        &format!("{label}: watch"),
        json!("c1, c2, endpoints c1 received and ACKed"),
    );

    // update
    let changed = BTreeMap::from([(
        key(CDS, "c1"),
        common::envoy_body(CDS, "c1", "cluster one, changed"),
    )]);
    served.extend(changed.clone());
    hook.publish(&changed).await?;
    wait_for(
        &format!("{label} (update)"),
        watches,
        changed,
        Tolerate::Nothing,
    )
    .await?;
    report.step(
        &format!("{label}: update"),
        json!("the changed c1 pushed and applied"),
    );

    // NACK
    let before = recorder.entries().len();
    let bad = BTreeMap::from([(key(CDS, "c2"), common::envoy_body(CDS, "c2", BAD))]);
    hook.publish(&bad).await?;
    let nacked = common::eventually("our client's NACK of c2", || async {
        recorder.entries()[before..]
            .iter()
            .position(is_nack_of_cds)
            .map(|i| before + i)
    })
    .await?;
    tokio::time::sleep(LOOP_WINDOW).await;
    let entries = recorder.entries();
    let resent = entries[nacked..]
        .iter()
        .filter(|e| is_cds_response(e))
        .count();
    let rejected = drain(label, watches, Tolerate::Rejection)?.iter().any(|e| {
        matches!(
            e,
            WatchEvent::Error {
                error: WatchError::Rejected { .. },
                ..
            }
        )
    });
    if !rejected {
        return Err(format!("{label}: c2's watch was not told of the rejection"));
    }
    holds(&format!("{label} (NACK)"), client, served).await?;
    if resent > LOOP_LIMIT {
        report.deviations.push(format!(
            "{label}: after our NACK of CDS the server sent {resent} CDS responses in {} s \
             (the rejected content again, in a loop)",
            LOOP_WINDOW.as_secs()
        ));
    }
    let fixed = BTreeMap::from([(
        key(CDS, "c2"),
        common::envoy_body(CDS, "c2", "cluster two, fixed"),
    )]);
    served.extend(fixed.clone());
    hook.publish(&fixed).await?;
    wait_for(
        &format!("{label} (after the NACK)"),
        watches,
        fixed,
        Tolerate::Rejection,
    )
    .await?;
    report.step(
        &format!("{label}: NACK"),
        json!({"kept": "the last good c2", "cds_responses_after_the_nack": resent, "then": "a good c2 applied"}),
    );

    // restart
    tokio::time::sleep(Duration::from_millis(300)).await;
    let last_stream = recorder
        .entries()
        .iter()
        .filter_map(stream_of)
        .max()
        .unwrap_or(0);
    hook.send(json!({"hook": "stop"})).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    hook.start_server(label, run.variant, run.per_type).await?;
    hook.publish(served).await?;
    let resubscribed = common::eventually("the client's requests on a new stream", || async {
        let firsts: BTreeMap<String, String> = recorder
            .entries()
            .iter()
            .filter(|e| stream_of(e).is_some_and(|s| s > last_stream))
            .filter_map(resubscribed_versions)
            .fold(BTreeMap::new(), |mut m, (t, v)| {
                m.entry(t).or_insert(v);
                m
            });
        (firsts.len() == 2).then_some(firsts)
    })
    .await?;
    for (t, v) in &resubscribed {
        if v.is_empty() {
            return Err(format!(
                "{label} (restart): the first {} request on the new stream carries no version",
                common::short(t)
            ));
        }
    }
    // Whatever the restarted server sends, the client ends up holding the same state.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drain(
        &format!("{label} (restart)"),
        watches,
        Tolerate::Unreachable,
    )?;
    holds(&format!("{label} (restart)"), client, served).await?;
    report.step(
        &format!("{label}: restart"),
        json!({"resubscribed_with": resubscribed, "state": "kept"}),
    );
    Ok(())
}

async fn all(args: &[String], workdir: &PathBuf, report: &mut Report) -> Result<()> {
    std::fs::create_dir_all(workdir).map_err(|e| e.to_string())?;
    let (Some(cmd), Some(control), Some(target)) = (
        common::arg(args, "--hook-cmd"),
        common::arg(args, "--control"),
        common::arg(args, "--target"),
    ) else {
        return Err("usage: hook_server_flow --hook-cmd \"CMD ARGS\" --control ADDR --target ADDR [--peer NAME] [--runs LIST] WORKDIR".into());
    };
    let wanted = common::arg(args, "--runs")
        .unwrap_or("sotw-ads,delta-ads,sotw-per-type,delta-per-type".into());
    let mut hook = Hook::start(&cmd, &control, &target, workdir, "hook.log").await?;
    let mut failures = Vec::new();
    for label in wanted.split(',') {
        let (variant, per_type) = match label {
            "sotw-ads" => (Variant::Sotw, false),
            "delta-ads" => (Variant::Delta, false),
            "sotw-per-type" => (Variant::Sotw, true),
            "delta-per-type" => (Variant::Delta, true),
            other => return Err(format!("unknown run {other:?}")),
        };
        let r = Run {
            label,
            variant,
            per_type,
        };
        // Every run is tried; the first failure is not the only one worth knowing.
        if let Err(e) = run(&mut hook, &r, report, workdir).await {
            println!("[{label}] FAILED: {e}");
            failures.push(e);
        }
        let _ = hook.send(json!({"hook": "stop"})).await;
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

// One thread: a run's watches are all made before the driver task first runs, so they
// ride on the stream's first request.
#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workdir = PathBuf::from(args.last().cloned().unwrap_or_default());
    let mut report = Report {
        peer: common::arg(&args, "--peer").unwrap_or("hook".into()),
        ..Default::default()
    };
    let result = tokio::time::timeout(Duration::from_secs(240), all(&args, &workdir, &mut report))
        .await
        .unwrap_or_else(|_| Err("the story took more than 240 s".into()));
    report.finish(&workdir, result)
}
