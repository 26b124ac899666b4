//! `xds-sansio serve PATH`: a test control plane. Serves a directory of node groups, one
//! file, or a scenario's server lines played in time, through a fault plan (`--fault`,
//! `--faults`, deterministic from `--seed`), recording every stream; `--check` judges the
//! clients that came by the checker's rules (docs/test-control-plane.md).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::server::{BodyChecks, ResourceEntry};
use xds_sansio_conformance::check::{self, CheckSide};
use xds_sansio_conformance::faults::{parse_rules, FaultPlan};
use xds_sansio_conformance::script;
use xds_sansio_tonic::etcd::Publication;
use xds_sansio_tonic::record::Recorder;
use xds_sansio_tonic::{Callbacks, StreamInfo, XdsServer, DEFAULT_GROUP};

use crate::output::{complain, say};

/// The arguments of `serve`.
#[derive(clap::Args)]
pub struct Args {
    /// What to serve: a directory of node groups (`GROUP.json`, `.yaml`, `.pb`: a node
    /// reads the group named by its `cluster`, `default` when it has none), one such file
    /// (every node's), or a scenario (`.xds`) whose server lines run at their time.
    path: PathBuf,
    /// Where clients connect (`127.0.0.1:0`: any free port; the address is printed first).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:18000")]
    listen: std::net::SocketAddr,
    /// A fault rule (`drop type=cds nth=1`, `delay ms=500 p=0.5`, `close after=3`, ...;
    /// docs/test-control-plane.md); repeatable, applied in order.
    #[arg(long, value_name = "RULE")]
    fault: Vec<String>,
    /// A file of fault rules, one per line (after the `--fault` ones).
    #[arg(long, value_name = "FILE")]
    faults: Option<PathBuf>,
    /// The seed of every random draw (`p=` rules): the same seed, the same faults.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write every stream, as the server saw it, in the record format.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// At the end, check what the clients sent (the checker's client rules) and exit 1 on
    /// a violation.
    #[arg(long)]
    check: bool,
    /// Stop after this many seconds (else after `--exit-after-streams`, Ctrl-C or SIGTERM).
    #[arg(long = "for", value_name = "SECONDS")]
    duration: Option<u64>,
    /// Stop once this many streams have ended.
    #[arg(long, value_name = "N")]
    exit_after_streams: Option<u64>,
    /// Resource schemas (a FileDescriptorSet) for JSON and YAML files that write resources
    /// by field, and for the recording; repeatable.
    #[arg(long, value_name = "FILE")]
    descriptors: Vec<PathBuf>,
}

/// What the server plays.
enum Story {
    /// Node groups, published once.
    Groups(Publication),
    /// A scenario's server lines.
    Scenario(Vec<script::ServerStep>),
}

/// Runs `serve`: 0 when it ran (and `--check` found nothing), 1 on a violation, 2 on a
/// usage error.
pub fn run(args: Args) -> ExitCode {
    match prepare(&args) {
        Ok((plan, story, codec)) => match super::runtime() {
            Ok(runtime) => runtime.block_on(serve(&args, plan, story, codec)),
            Err(e) => {
                complain!("{e}");
                ExitCode::from(2)
            }
        },
        Err(e) => {
            complain!("{e}");
            ExitCode::from(2)
        }
    }
}

fn prepare(args: &Args) -> Result<(FaultPlan, Story, xds_sansio::codec::json::JsonCodec), String> {
    let mut rules = Vec::new();
    for rule in &args.fault {
        let parsed = parse_rules(rule).map_err(|e| format!("--fault {rule:?}: {}", e.message))?;
        rules.extend(parsed);
    }
    if let Some(file) = &args.faults {
        let shown = file.display();
        let text = std::fs::read_to_string(file).map_err(|e| format!("{shown}: {e}"))?;
        let parsed =
            parse_rules(&text).map_err(|e| format!("{shown}, line {}: {}", e.line, e.message))?;
        rules.extend(parsed);
    }
    let plan = FaultPlan {
        rules,
        seed: args.seed,
    };
    let json = super::codec_with(&args.descriptors)?;
    let files = FileCodec::with_json_codec(json.clone(), false);
    let story = story(&args.path, &files)?;
    Ok((plan, story, json))
}

fn story(path: &Path, codec: &FileCodec) -> Result<Story, String> {
    let shown = path.display().to_string();
    if path.is_dir() {
        return Publication::from_dir(path, codec)
            .map(Story::Groups)
            .map_err(|e| e.to_string());
    }
    if shown.ends_with(".xds") {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{shown}: {e}"))?;
        let scenario = script::parse(&text, &shown).map_err(|e| format!("{shown}: {e}"))?;
        return Ok(Story::Scenario(script::server_timeline(&scenario)));
    }
    let format = Format::from_path(&shown).ok_or_else(|| {
        format!("{shown}: neither a directory, a scenario (.xds) nor a resource file")
    })?;
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    let response: xds_sansio::pb::discovery::DiscoveryResponse = codec
        .decode(format, bytes.into())
        .map_err(|e| format!("{shown}: {e}"))?;
    let mut types: BTreeMap<String, Vec<ResourceEntry>> = BTreeMap::new();
    for (index, any) in response.resources.into_iter().enumerate() {
        let name = xds_sansio::resource::name_of(&any.value)
            .map_err(|e| format!("{shown}: resource {index}: {e}"))?
            .to_string();
        types
            .entry(any.type_url.to_string())
            .or_default()
            .push(ResourceEntry::new(name, any.value));
    }
    let mut publication = Publication::new();
    publication
        .set_group(DEFAULT_GROUP, types)
        .map_err(|e| e.to_string())?;
    Ok(Story::Groups(publication))
}

async fn serve(
    args: &Args,
    plan: FaultPlan,
    story: Story,
    codec: xds_sansio::codec::json::JsonCodec,
) -> ExitCode {
    let file = match &args.record {
        Some(path) => match std::fs::File::create(path) {
            Ok(f) => Some(f),
            Err(e) => {
                complain!("{}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let recorder = Arc::new(Recorder::with_codec(file, codec));
    let ended = Arc::new(EndedStreams::default());
    let mut builder = XdsServer::builder()
        .node_group(|node| match node.cluster.as_str() {
            "" => DEFAULT_GROUP.to_string(),
            cluster => cluster.to_string(),
        })
        .callbacks((recorder.clone(), ended.clone()))
        .faults(plan.clone());
    if matches!(story, Story::Scenario(_)) {
        // A scenario's bodies stand for resources; they are not Envoy messages.
        builder = builder.body_checks(BodyChecks::Off);
    }
    let server = builder.build();
    let listener = match tokio::net::TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            complain!("listen on {}: {e}", args.listen);
            return ExitCode::from(2);
        }
    };
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let timeline = match story {
        Story::Groups(publication) => {
            for group in publication.groups() {
                let types = publication.group(group).cloned().unwrap_or_default();
                if let Err(e) = server.publish_snapshot(group, types) {
                    complain!("group {group}: {e}");
                    return ExitCode::from(1);
                }
            }
            None
        }
        Story::Scenario(steps) => Some(tokio::spawn(play(server.clone(), steps))),
    };
    say!(
        "serving on {address} ({} fault rule{}, seed {})",
        plan.rules.len(),
        if plan.rules.len() == 1 { "" } else { "s" },
        plan.seed
    );
    let stop = stop_signal(args.duration, args.exit_after_streams, ended);
    let _ = server.clone().serve_with_listener(listener, stop).await;
    if let Some(timeline) = timeline {
        timeline.abort();
    }
    let entries = recorder.entries();
    say!("served {} message(s)", entries.len());
    if !args.check {
        return ExitCode::SUCCESS;
    }
    let violations = check::check(&entries, CheckSide::Client);
    for v in &violations {
        say!(
            "line {}: client broke {}: {} ({})",
            v.line,
            v.rule.id(),
            v.detail,
            v.rule.passage()
        );
    }
    say!("client: {} violation(s)", violations.len());
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Plays a scenario's server lines at their times (every node's group).
async fn play(server: XdsServer, steps: Vec<script::ServerStep>) {
    server
        .play(DEFAULT_GROUP, steps, |line, outcome| match outcome {
            Ok(()) => say!("scenario line {line} published"),
            Err(e) => complain!("scenario line {line}: {e}"),
        })
        .await;
}

/// Resolves when the run should stop: after `duration`, after `streams` streams ended,
/// or on Ctrl-C / SIGTERM.
async fn stop_signal(duration: Option<u64>, streams: Option<u64>, ended: Arc<EndedStreams>) {
    let timer = async {
        match duration {
            Some(secs) => tokio::time::sleep(Duration::from_secs(secs)).await,
            None => std::future::pending().await,
        }
    };
    let ended = async {
        match streams {
            Some(n) => loop {
                tokio::time::sleep(Duration::from_millis(50)).await;
                if ended.0.load(Ordering::Relaxed) >= n {
                    break;
                }
            },
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = timer => {}
        _ = ended => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = crate::tap::terminated() => {}
    }
}

/// Counts the streams that ended, for `--exit-after-streams`.
#[derive(Default)]
struct EndedStreams(AtomicU64);

impl Callbacks for EndedStreams {
    fn stream_closed(&self, _: &StreamInfo, _: Option<&tonic::Status>) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}
