//! The command-line tool: replay scenario files through the model, and check recorded
//! conversations of other implementations.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod output;
mod replay;

use clap::{Parser, Subcommand, ValueEnum};
use xds_sansio::check::{self, CheckSide, Entry, ALL_RULES};
use xds_sansio::json::JsonCodec;
use xds_sansio::message::Variant;

use output::{complain, say};

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
