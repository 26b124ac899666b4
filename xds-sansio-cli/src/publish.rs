//! `xds-sansio publish --etcd ENDPOINTS DIR`: writes a directory of node groups into etcd
//! in one transaction, for replicas fed by the adapter's `etcd::EtcdSource`
//! (`docs/deployment.md`).
//!
//! `DIR/GROUP.EXT` holds a `DiscoveryResponse` (`.pb`, `.json`, `.yaml`) whose resources
//! are the whole configuration of node group GROUP. Every group is checked as the servers
//! check it (bodies, and references: a cluster with no endpoints, a route to a missing
//! cluster) before anything is written; a refused publication leaves etcd as it was and
//! exits with 1.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use xds_sansio::codec::FileCodec;
use xds_sansio_tonic::etcd::{self, Publication, DEFAULT_PREFIX};

use crate::output::{complain, say};

/// The arguments of `publish`.
#[derive(clap::Args)]
pub struct Args {
    /// etcd members (`host:port`, comma-separated or repeated); the first that answers is
    /// used.
    #[arg(long, value_name = "ENDPOINTS", required = true, value_delimiter = ',')]
    etcd: Vec<String>,
    /// The key prefix the replicas read.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// Resource schemas (a FileDescriptorSet) for JSON and YAML files that write resources
    /// by field; repeatable. Without them a resource is `{"@type", "value": base64}`.
    #[arg(long, value_name = "FILE")]
    descriptors: Vec<PathBuf>,
    /// How long to wait for etcd (seconds).
    #[arg(long, default_value_t = 10)]
    timeout: u64,
    /// Check the directory and write nothing.
    #[arg(long)]
    check_only: bool,
    /// The directory of group files.
    dir: PathBuf,
}

/// Runs `publish`: 0 when written (or checked), 1 when refused, 2 on a usage error.
pub fn run(args: Args) -> ExitCode {
    let codec = match super::codec_with(&args.descriptors) {
        Ok(json) => FileCodec::with_json_codec(json, false),
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let publication = match Publication::from_dir(&args.dir, &codec) {
        Ok(p) => p,
        Err(e) => {
            complain!("{e}");
            return ExitCode::from(2);
        }
    };
    let groups: Vec<&str> = publication.groups().collect();
    if let Err(e) = publication.check() {
        complain!("{e}");
        return ExitCode::FAILURE;
    }
    if args.check_only {
        say!("{} groups checked: {}", groups.len(), groups.join(", "));
        return ExitCode::SUCCESS;
    }
    let timeout = Duration::from_secs(args.timeout);
    let written = super::runtime().and_then(|rt| {
        rt.block_on(etcd::publish(
            &args.etcd,
            &args.prefix,
            &publication,
            timeout,
        ))
        .map_err(|e| e.to_string())
    });
    match written {
        Ok(p) => {
            say!(
                "etcd revision {}: {} keys written, {} deleted ({})",
                p.revision,
                p.puts,
                p.deletes,
                groups.join(", ")
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            complain!("{e}");
            ExitCode::FAILURE
        }
    }
}
