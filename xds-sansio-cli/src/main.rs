//! The command-line tool: replay scenario files through the model, check recorded
//! conversations of other implementations, tap live conversations between a real client
//! and a real server.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod conform;
mod diagram;
mod output;
mod publish;
mod replay;
mod serve;
mod tap;

use clap::{Parser, Subcommand, ValueEnum};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::message::Variant;
use xds_sansio_conformance::check::{self, CheckSide, Entry, ALL_RULES};
use xds_sansio_conformance::script;

use output::{complain, say};

/// mimalloc, not the system's malloc: `serve` is a management server, and a storm of new
/// clients allocates and frees a ~150 KB state per client across threads. Measured with
/// the same server in `benches/storm/` (`benches/README.md`, runs W14 and W16): at 50 000
/// new clients with a window of 64, 135-188 MiB of RSS against 954-1 001 MiB on glibc's
/// malloc, and 0.69-0.91x the time.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "xds-sansio",
    version,
    about = "The xDS protocol as a model: replay scenarios, check recorded conversations"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Replay scenario files (or directories of them) through the model.
    Replay {
        /// Scenario files or directories (searched for *.xds).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// One JSON object per scenario instead of diagrams.
        #[arg(long)]
        json: bool,
        /// Write each scenario's conversation, as the client and as the server saw it, to
        /// DIR/<scenario>.client.jsonl and .server.jsonl (the `check` format).
        #[arg(long, value_name = "DIR")]
        record: Option<PathBuf>,
    },
    /// Check a recorded conversation (JSON lines) and report every rule one side breaks.
    Check {
        /// The recorded conversation.
        file: PathBuf,
        /// Whose messages to judge.
        #[arg(long, value_enum)]
        side: SideArg,
        /// The variant of lines that do not say theirs.
        #[arg(long, value_enum, default_value = "sotw")]
        variant: VariantArg,
        /// One JSON object per violation instead of text.
        #[arg(long)]
        json: bool,
        /// A FileDescriptorSet (binary) with the schemas of the resource types, for
        /// recordings that write resources as canonical JSON (Go's protojson, Java's
        /// JsonFormat); repeatable. Without it such a resource is an error naming its line.
        #[arg(long, value_name = "FILE")]
        descriptors: Vec<PathBuf>,
    },
    /// List the rules the checker enforces, with the protocol passage each comes from.
    Rules,
    /// Play one side of scenarios for a real implementation over gRPC and check what it
    /// sends (docs/conform.md).
    Conform {
        #[command(subcommand)]
        side: Box<ConformSide>,
    },
    /// Write a directory of node groups (`GROUP.json`, `.yaml`, `.pb`) into etcd in one
    /// transaction, for replicas fed from etcd; refused before etcd if inconsistent.
    Publish(publish::Args),
    /// A test control plane: serve a directory, a file or a scenario's server lines,
    /// injecting faults by rule from a seed, recording every stream
    /// (docs/test-control-plane.md).
    Serve(serve::Args),
    /// A gRPC proxy for every xDS RPC: forwards both directions unchanged, records every
    /// stream and checks both sides live, printing each violation as it passes.
    Tap {
        /// Where clients connect (`127.0.0.1:0`: any free port, printed first).
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// The management server: `host:port` or a URL (`http://host:port`).
        #[arg(long, value_name = "ADDR")]
        upstream: String,
        /// Write every stream, numbered, in the record format (docs/record-format.md).
        #[arg(long, value_name = "FILE")]
        record: Option<PathBuf>,
        /// Resource schemas (a FileDescriptorSet) to write resources as canonical JSON in
        /// the recording; repeatable. Without them a resource is written as base64.
        #[arg(long, value_name = "FILE")]
        descriptors: Vec<PathBuf>,
        /// Stop after this many streams have ended (else Ctrl-C or SIGTERM stops it).
        #[arg(long, value_name = "N")]
        exit_after_streams: Option<u64>,
    },
}

#[derive(Subcommand)]
enum ConformSide {
    /// Be the management server of a real client: send what the scenarios' server says,
    /// check what the client sends.
    Client {
        /// Where the real client connects (`127.0.0.1:0`: any free port, printed first).
        #[arg(long, value_name = "ADDR")]
        listen: std::net::SocketAddr,
        #[command(flatten)]
        common: ConformArgs,
    },
    /// Be the client of a real management server: send what the scenarios' client says,
    /// publish through the hook, check what the server sends.
    Server {
        /// The real management server: `host:port` or a URL.
        #[arg(long, value_name = "ADDR")]
        target: String,
        #[command(flatten)]
        common: ConformArgs,
    },
}

#[derive(clap::Args)]
struct ConformArgs {
    /// Scenario files or directories (searched for *.xds).
    #[arg(required_unless_present = "fuzz")]
    paths: Vec<PathBuf>,
    /// The hook, a command run for every event with the event as JSON on its stdin and
    /// its words as arguments (`start`, `subscribe TYPE_URL NAME...`, `publish`, `stop`).
    #[arg(long, value_name = "COMMAND", conflicts_with = "hook_socket")]
    hook: Option<String>,
    /// The hook, a TCP control socket: one JSON line per event, answered `ok` or with the
    /// reason it failed.
    #[arg(long, value_name = "ADDR")]
    hook_socket: Option<String>,
    /// Real bodies for the scenarios' `name:tag`s: `{"CDS": {"a:x": <Any as JSON>}}`.
    #[arg(long, value_name = "FILE")]
    bodies: Option<PathBuf>,
    /// Resource schemas (FileDescriptorSet) for canonical JSON in --bodies; repeatable.
    #[arg(long, value_name = "FILE")]
    descriptors: Vec<PathBuf>,
    /// Only scenarios of this variant.
    #[arg(long, value_enum)]
    variant: Option<VariantArg>,
    /// Only scenarios of this transport.
    #[arg(long, value_enum)]
    transport: Option<TransportArg>,
    /// The longest wait for a message a line expects, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    patience_ms: u64,
    /// How long a side must stay silent to be quiet, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 300)]
    quiet_ms: u64,
    /// The longest `wait` of a scenario, in real time, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 20000)]
    max_wait_ms: u64,
    /// The pause before each hook event, in milliseconds, so that messages sent to the
    /// real implementation before it are not overtaken by it (the hook is another path).
    #[arg(long, value_name = "MS", default_value_t = 50)]
    settle_ms: u64,
    /// Write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Differential fuzzing: play N cases generated from the model's state space instead
    /// of the scenarios (within --variant, --transport, --fuzz-types and
    /// --fuzz-without); the first case of each kind of divergence is shrunk to a minimal
    /// scenario.
    #[arg(long, value_name = "N")]
    fuzz: Option<u64>,
    /// The seed of the first generated conversation (the next ones count up from it).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Operations per generated conversation.
    #[arg(long, value_name = "N", default_value_t = 12)]
    fuzz_len: usize,
    /// Where the minimal scenarios of divergences are written (fuzz-SEED.xds).
    #[arg(long, value_name = "DIR")]
    fuzz_out: Option<PathBuf>,
    /// The types the cases use, by short name (`CDS,EDS`); every type of the catalog by
    /// default.
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    fuzz_types: Vec<String>,
    /// What the cases leave out: `wildcard`, `ttl`, `aliases`.
    #[arg(long, value_name = "FEATURES", value_delimiter = ',')]
    fuzz_without: Vec<String>,
    /// For a client that follows references by itself (gRPC, junction): the chain it
    /// follows, `TYPE NAME TAG... [NAME:TAG...]` links separated by `;` (`LDS echo.test
    /// l1; RDS route-1 r1; CDS cluster-1 c1 other:c1; EDS cluster-1 e1`); the cases watch
    /// the first name and respond with the chain's names and tags (--bodies).
    #[arg(long, value_name = "CHAIN")]
    fuzz_follows: Option<String>,
    /// At most this many replays to shrink the first case of each divergence kind.
    #[arg(long, value_name = "N", default_value_t = 60)]
    fuzz_shrink: usize,
    /// Divergence kinds already written up (`LABEL: KIND  # why` lines): they do not fail
    /// the run, a kind not listed does.
    #[arg(long, value_name = "FILE")]
    known_divergences: Option<PathBuf>,
    /// The peer's label in --known-divergences.
    #[arg(long, value_name = "LABEL")]
    fuzz_label: Option<String>,
}

#[derive(Clone, Copy, ValueEnum)]
enum TransportArg {
    Ads,
    PerType,
}

#[derive(Clone, Copy, ValueEnum)]
enum SideArg {
    Client,
    Server,
}

#[derive(Clone, Copy, ValueEnum)]
enum VariantArg {
    Sotw,
    Delta,
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Replay {
            paths,
            json,
            record,
        } => replay::run(&paths, json, record.as_deref()),
        Command::Check {
            file,
            side,
            variant,
            json,
            descriptors,
        } => run_check(&file, side, variant, json, &descriptors),
        Command::Conform { side } => run_conform(*side),
        Command::Publish(args) => publish::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Tap {
            listen,
            upstream,
            record,
            descriptors,
            exit_after_streams,
        } => {
            let codec = match codec_with(&descriptors) {
                Ok(codec) => codec,
                Err(e) => {
                    complain!("{e}");
                    return ExitCode::from(2);
                }
            };
            let options = tap::Options {
                listen,
                upstream,
                record,
                codec,
                exit_after_streams,
            };
            match runtime().and_then(|rt| rt.block_on(tap::run(options))) {
                Ok((messages, violations)) => {
                    say!("{messages} messages checked, {violations} violations");
                    if violations == 0 {
                        ExitCode::SUCCESS
                    } else {
                        ExitCode::FAILURE
                    }
                }
                Err(e) => {
                    complain!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Rules => {
            for rule in ALL_RULES {
                say!(
                    "{:<30} {:<6}  {}",
                    rule.id(),
                    format!("{:?}", rule.side()),
                    rule.passage()
                );
            }
            ExitCode::SUCCESS
        }
    }
}

fn run_conform(side: ConformSide) -> ExitCode {
    let (side, listen, target, args) = match side {
        ConformSide::Client { listen, common } => {
            (script::Side::Client, Some(listen), None, common)
        }
        ConformSide::Server { target, common } => {
            (script::Side::Server, None, Some(target), common)
        }
    };
    let codec = match codec_with(&args.descriptors) {
        Ok(codec) => codec,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let hook = match (args.hook, args.hook_socket) {
        (Some(command), _) => conform::Hook::Command(command),
        (None, Some(addr)) => conform::Hook::Socket { addr, conn: None },
        (None, None) => conform::Hook::None,
    };
    conform::run(conform::Options {
        side,
        listen,
        target,
        paths: args.paths,
        hook,
        bodies: args.bodies,
        codec,
        patience: std::time::Duration::from_millis(args.patience_ms),
        quiet: std::time::Duration::from_millis(args.quiet_ms),
        max_wait: std::time::Duration::from_millis(args.max_wait_ms),
        settle: std::time::Duration::from_millis(args.settle_ms),
        variant: args.variant.map(|v| match v {
            VariantArg::Sotw => Variant::Sotw,
            VariantArg::Delta => Variant::Delta,
        }),
        transport: args.transport.map(|t| match t {
            TransportArg::Ads => conform::TransportFilter::Ads,
            TransportArg::PerType => conform::TransportFilter::PerType,
        }),
        junit: args.junit,
        fuzz: match args.fuzz {
            Some(cases) => match fuzz_profile(
                &args.fuzz_types,
                &args.fuzz_without,
                args.fuzz_follows.as_deref(),
            ) {
                Ok(mut profile) => {
                    if let Some(v) = args.variant {
                        profile.variants = vec![match v {
                            VariantArg::Sotw => Variant::Sotw,
                            VariantArg::Delta => Variant::Delta,
                        }];
                    }
                    match args.transport {
                        Some(TransportArg::Ads) => profile.per_type = false,
                        Some(TransportArg::PerType) => profile.ads = false,
                        None => {}
                    }
                    Some(conform::FuzzOptions {
                        cases,
                        seed: args.seed,
                        len: args.fuzz_len,
                        profile,
                        out: args.fuzz_out,
                        shrink_budget: args.fuzz_shrink,
                        known: args.known_divergences,
                        label: args.fuzz_label,
                    })
                }
                Err(e) => {
                    complain!("{e}");
                    return ExitCode::from(2);
                }
            },
            None => None,
        },
    })
}

/// The fuzz profile `--fuzz-types` and `--fuzz-without` ask for.
fn fuzz_profile(
    types: &[String],
    without: &[String],
    follows: Option<&str>,
) -> Result<script::generate::Profile, String> {
    let mut profile = script::generate::Profile::default();
    if let Some(chain) = follows {
        profile.follows =
            script::generate::parse_chain(chain).map_err(|e| format!("--fuzz-follows: {e}"))?;
    }
    if !types.is_empty() {
        profile.types = types
            .iter()
            .map(|t| {
                script::resolve_type(t).ok_or_else(|| format!("--fuzz-types: {t}: not a type"))
            })
            .collect::<Result<_, _>>()?;
    }
    for feature in without {
        match feature.as_str() {
            "wildcard" => profile.wildcard = false,
            "ttl" => profile.ttl = false,
            "aliases" => profile.aliases = false,
            other => {
                return Err(format!(
                    "--fuzz-without: {other}: expected wildcard, ttl or aliases"
                ))
            }
        }
    }
    Ok(profile)
}

/// The runtime of the commands that talk gRPC (two workers: the tool shares machines).
fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))
}

/// A codec that knows the resource schemas of `descriptors`.
fn codec_with(descriptors: &[PathBuf]) -> Result<JsonCodec, String> {
    let mut codec = JsonCodec::new();
    for path in descriptors {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        codec
            .add_file_descriptor_set(&bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(codec)
}

fn run_check(
    file: &Path,
    side: SideArg,
    variant: VariantArg,
    json: bool,
    descriptors: &[PathBuf],
) -> ExitCode {
    let codec = match codec_with(descriptors) {
        Ok(codec) => codec,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let variant = match variant {
        VariantArg::Sotw => Variant::Sotw,
        VariantArg::Delta => Variant::Delta,
    };
    let entries = match check::parse_jsonl_with(&text, variant, &codec) {
        Ok(entries) => entries,
        Err(e) => {
            complain!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let messages = entries
        .iter()
        .filter(|e| !matches!(e, Entry::Store { .. }))
        .count();
    if messages == 0 {
        // Nothing was judged: "0 violations" would pass a recording that holds nothing.
        complain!(
            "{}: the record holds no messages (one request or response per line)",
            file.display()
        );
        return ExitCode::from(2);
    }
    let side = match side {
        SideArg::Client => CheckSide::Client,
        SideArg::Server => CheckSide::Server,
    };
    let violations = check::check(&entries, side);
    for v in &violations {
        if json {
            let value = serde_json::json!({
                "file": file.display().to_string(),
                "line": v.line,
                "rule": v.rule.id(),
                "detail": v.detail,
                "passage": v.rule.passage(),
            });
            say!("{value}");
        } else {
            say!(
                "{}:{}: {}: {}\n    {}",
                file.display(),
                v.line,
                v.rule.id(),
                v.detail,
                v.rule.passage()
            );
        }
    }
    if !json {
        say!(
            "{messages} messages checked, {} violations",
            violations.len()
        );
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
