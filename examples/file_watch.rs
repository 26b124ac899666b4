//! Watches a real file holding a `DiscoveryResponse` and feeds its bytes to a
//! `FileSubscription`, printing what each version of the file does: resources upserted and
//! removed, the file accepted, rejected (the last valid configuration stays) or malformed
//! (with the position of the problem).
//!
//! The crate does no I/O: this example owns the file watching. To stay dependency-free it
//! polls the file's modification time and length every 200 ms; a real program would use
//! inotify/kqueue (e.g. the `notify` crate) the way Envoy does.
//!
//! Run (formats by extension: .pb, .json, .yaml, .textproto, ...; the text formats need
//! their features):
//!
//! ```sh
//! cargo run --example file_watch --features yaml,textproto -- cds.yaml CDS
//! cargo run --example file_watch -- cds.pb CDS --once
//! ```
//!
//! Arguments: `<path> [<type: LDS|RDS|CDS|EDS|SDS|RTDS|SRDS> [--format binary|json|yaml|text]
//! [--once]]`. `--once` reads the file once and exits (non-zero if it was not accepted).

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use xds_sansio::client::{ClientConfig, ClientEvent};
use xds_sansio::codec::Format;
use xds_sansio::file::{FileEvent, FileSubscription};
use xds_sansio::time::StdClock;
use xds_sansio::types::ResourceType;

fn usage() -> ExitCode {
    eprintln!(
        "usage: file_watch <path> [<type: LDS|RDS|CDS|EDS|SDS|RTDS|SRDS>] \
         [--format binary|json|yaml|text] [--once]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first().cloned() else {
        return usage();
    };
    let mut type_name = "CDS".to_string();
    let mut format = Format::from_path(&path);
    let mut once = false;
    let mut rest = args.iter().skip(1);
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--once" => once = true,
            "--format" => {
                format = match rest.next().map(String::as_str) {
                    Some("binary") => Some(Format::Binary),
                    Some("json") => Some(Format::Json),
                    Some("yaml") => Some(Format::Yaml),
                    Some("text") => Some(Format::Text),
                    _ => return usage(),
                }
            }
            other => type_name = other.to_string(),
        }
    }
    let Some(format) = format else {
        eprintln!("cannot tell the format of {path} from its extension; pass --format");
        return usage();
    };
    if !format.is_enabled() {
        eprintln!("the {format} format needs its cargo feature (json, yaml or textproto)");
        return ExitCode::from(2);
    }
    let Some(resource_type) = ResourceType::by_short_name(&type_name) else {
        eprintln!("unknown type {type_name}");
        return usage();
    };
    let mut sub = match FileSubscription::new(resource_type.type_url, ClientConfig::default()) {
        Ok(sub) => sub,
        Err(e) => {
            eprintln!("cannot subscribe: {e}");
            return ExitCode::FAILURE;
        }
    };
    let clock = StdClock::new();
    println!("watching {path} ({format}) for {type_name}");
    let mut seen: Option<(SystemTime, u64)> = None;
    loop {
        let stamp = std::fs::metadata(&path)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()));
        if stamp.is_some() && stamp != seen {
            seen = stamp;
            match std::fs::read(&path) {
                Ok(bytes) => sub.handle_bytes(clock.now(), format, Bytes::from(bytes)),
                Err(e) => eprintln!("cannot read {path}: {e}"),
            }
        }
        let now = clock.now();
        if sub.poll_timeout().is_some_and(|t| t <= now) {
            sub.handle_timeout(now);
        }
        let mut accepted = false;
        while let Some(event) = sub.poll_event() {
            match event {
                FileEvent::Client(ClientEvent::Upserted { name, version, .. }) => {
                    println!("  upserted {name} (version {version})")
                }
                FileEvent::Client(ClientEvent::Removed { name, reason, .. }) => {
                    println!("  removed {name} ({reason:?})")
                }
                FileEvent::Client(other) => println!("  {other:?}"),
                FileEvent::Accepted { version } => {
                    accepted = true;
                    println!("accepted version {version}; holding {:?}", names(&sub));
                }
                FileEvent::Rejected { version, error, .. } => {
                    println!(
                        "REJECTED version {version}: {error}; still holding {:?}",
                        names(&sub)
                    )
                }
                FileEvent::Malformed(e) => {
                    println!("MALFORMED: {e}; still holding {:?}", names(&sub))
                }
                other => println!("  {other:?}"),
            }
        }
        if once {
            return if accepted {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            };
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn names(sub: &FileSubscription) -> Vec<String> {
    sub.resource_names().iter().map(|n| n.to_string()).collect()
}
