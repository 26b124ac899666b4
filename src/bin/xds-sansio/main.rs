//! The command-line tool: replay scenario files through the model, and check recorded
//! conversations of other implementations.

use std::path::PathBuf;
use std::process::ExitCode;

mod replay;

use clap::{Parser, Subcommand, ValueEnum};
use xds_sansio::check::{self, CheckSide, ALL_RULES};
use xds_sansio::message::Variant;

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
    },
    /// List the rules the checker enforces.
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
        } => run_check(file, side, variant, json),
        Command::Rules => {
            for rule in ALL_RULES {
                println!("{:<28} {:?}  {}", rule.id(), rule.side(), rule.seed());
            }
            ExitCode::SUCCESS
        }
    }
}

fn run_check(file: PathBuf, side: SideArg, variant: VariantArg, json: bool) -> ExitCode {
    let text = match std::fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
    let variant = match variant {
        VariantArg::Sotw => Variant::Sotw,
        VariantArg::Delta => Variant::Delta,
    };
    let entries = match check::parse_jsonl(&text, variant) {
        Ok(entries) => entries,
        Err(e) => {
            eprintln!("{}: {e}", file.display());
            return ExitCode::from(2);
        }
    };
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
                "seed": v.rule.seed(),
            });
            println!("{value}");
        } else {
            println!(
                "{}:{}: {}: {}\n    {}",
                file.display(),
                v.line,
                v.rule.id(),
                v.detail,
                v.rule.seed()
            );
        }
    }
    if !json {
        println!(
            "{} messages checked, {} violations",
            entries.len(),
            violations.len()
        );
    }
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
