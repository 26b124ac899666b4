//! An xDS client on tokio + tonic: subscribes to the names given on the command line,
//! prints every event, and reconnects with jittered exponential backoff.
//!
//! Run (with `ads_server` listening on 127.0.0.1:18000):
//! `cargo run -p xds-sansio-tonic --example ads_client -- --server http://127.0.0.1:18000 CDS=c1,c2 LDS`
//!
//! With `--listener NAME`, the client watches that listener through the dependency manager
//! (`client::deps`, gRPC A74's shape): every route configuration, cluster, endpoint set and
//! secret it reaches is subscribed as references lead to it, and each complete
//! configuration is printed (`cargo run --example ads_client -- --listener l1`).
//!
//! Each subscription is `TYPE=name,name,...` (`TYPE` alone: wildcard); `TYPE` is a short
//! name (`LDS`, `RDS`, `CDS`, `EDS`, `SDS`, ...) or a type URL. Options: `--delta`
//! (incremental instead of SotW), `--per-type` (one stream per type instead of ADS; then
//! exactly one subscription type), `--seed N` (fixed jitter seed, for tests; by default
//! the seed comes from the OS, so a fleet restarted together does not reconnect in
//! lockstep), `--node ID`,
//! `--exit-after-acks N` (stop after N ACKs, for scripts), `--max-time SECS`.
//!
//! The backoff is the adapter's (`client::Backoff`, gRPC's connection backoff: 1 s, ×1.6,
//! ±20 % jitter, 120 s at most), reset once a stream has delivered a response. This
//! example owns its loop on `run_stream` to print every core event; `watch_listener` shows
//! the driver (`XdsClient`) that does all of this for you.

use std::time::Duration;

use tokio::sync::mpsc;
use xds_sansio::client::deps::{DependencyManager, DepsConfig};
use xds_sansio::client::{ClientEvent, WILDCARD};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::time::StdClock;
use xds_sansio::types::ResourceType;
use xds_sansio::{Client, ClientConfig, Transport, Variant};
use xds_sansio_tonic::client::{os_seed, run_stream, Backoff, BackoffConfig, Io, StreamCommand};

fn type_url(short: &str) -> String {
    ResourceType::by_short_name(short)
        .map(|t| t.type_url.to_string())
        .unwrap_or_else(|| short.to_string())
}

fn usage(e: &str) -> ! {
    eprintln!("ads_client: {e}");
    eprintln!("usage: ads_client --server URI [--delta] [--per-type] [--seed N] [--node ID] [--exit-after-acks N] [--max-time SECS] [--listener NAME] TYPE[=name,...]...");
    std::process::exit(2);
}

/// A complete configuration, as the dependency manager resolved it.
fn print_config(generation: u64, deps: &DependencyManager, listener: &str) {
    let Some(config) = deps.config(listener) else {
        return;
    };
    println!("configuration {generation} of listener {listener}:");
    match &config.status {
        Ok(()) => println!("  usable"),
        Err(failure) => println!("  NOT usable: {failure}"),
    }
    for resource in &config.resources {
        println!(
            "  {} (version {}, {} bytes)",
            resource.key,
            resource.version,
            resource.body.len()
        );
    }
    for cluster in &config.clusters {
        match &cluster.leaves {
            Ok(leaves) => println!("  cluster {} -> {}", cluster.name, leaves.join(", ")),
            Err(failure) => println!("  cluster {}: {failure}", cluster.name),
        }
    }
    for failure in &config.failed {
        println!("  failed: {failure}");
    }
}

#[tokio::main]
async fn main() {
    let (mut server, mut delta, mut per_type, mut seed, mut node_id) = (
        String::from("http://127.0.0.1:18000"),
        false,
        false,
        None::<u64>,
        String::from("ads_client"),
    );
    let (mut exit_after_acks, mut max_time) = (None::<usize>, None::<f64>);
    let mut subscriptions: Vec<(String, Vec<String>)> = Vec::new();
    let mut listener: Option<String> = None;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--server" => server = value(),
            "--delta" => delta = true,
            "--per-type" => per_type = true,
            "--seed" => seed = Some(value().parse().unwrap_or_else(|_| usage("bad --seed"))),
            "--node" => node_id = value(),
            "--exit-after-acks" => exit_after_acks = value().parse().ok(),
            "--max-time" => max_time = value().parse().ok(),
            "--listener" => listener = Some(value()),
            s if s.starts_with("--") => usage(&format!("unknown option {s}")),
            s => {
                let (ty, names) = s.split_once('=').unwrap_or((s, ""));
                let names = names.split(',').filter(|n| !n.is_empty()).map(String::from);
                subscriptions.push((type_url(ty), names.collect()));
            }
        }
    }
    if listener.is_some() && per_type {
        usage("--listener follows references across types: it needs ADS");
    }
    if (subscriptions.is_empty() && listener.is_none()) || (per_type && subscriptions.len() != 1) {
        usage("give one subscription (--per-type) or at least one (ADS), or --listener");
    }
    let variant = if delta { Variant::Delta } else { Variant::Sotw };
    let transport = if per_type {
        Transport::PerType(subscriptions[0].0.clone())
    } else {
        Transport::Aggregated
    };
    let node = Node {
        id: node_id,
        cluster: "ads_client".into(),
        ..Node::default()
    };
    let mut client = Client::new(ClientConfig::new(variant, transport, node));
    for (ty, names) in &subscriptions {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        // LDS/CDS with no names is the legacy wildcard; other types need an explicit `*`.
        let names = if names.is_empty() && !xds_sansio::types::TypeInfo::of(ty).legacy_wildcard() {
            vec![WILDCARD]
        } else {
            names
        };
        client
            .subscribe(ty, &names)
            .unwrap_or_else(|e| usage(&format!("{ty}: {e}")));
    }

    let clock = StdClock::new();
    // The dependency manager: its commands go to the client, its snapshots are printed.
    let mut deps = listener.as_ref().map(|name| {
        let mut deps = DependencyManager::new(DepsConfig::default());
        deps.watch_listener(clock.now(), name)
            .unwrap_or_else(|e| usage(&format!("--listener: {e}")));
        while let Some(command) = deps.poll_command() {
            command
                .apply_to(&mut client)
                .unwrap_or_else(|e| usage(&format!("--listener: {e}")));
        }
        (deps, name.clone(), StdClock::new())
    });
    let deadline = max_time.map(|s| clock.now().saturating_add(Duration::from_secs_f64(s)));
    let (commands_tx, mut commands) = mpsc::unbounded_channel();
    let mut acks = 0usize;
    let deps_tx = commands_tx.clone();
    let mut on_event = move |_: &Client, event: ClientEvent| {
        if let Some((deps, listener, clock)) = deps.as_mut() {
            let now = clock.now();
            deps.handle_timeout(now);
            deps.handle_event(now, &event);
            while let Some(command) = deps.poll_command() {
                let _ = deps_tx.send(StreamCommand::Apply(Box::new(move |client| {
                    if let Err(e) = command.apply_to(client) {
                        eprintln!("subscription refused: {e}");
                    }
                })));
            }
            while let Some(snapshot) = deps.poll_snapshot() {
                print_config(snapshot.generation, deps, listener);
            }
        } else {
            println!("{event:?}");
        }
        if matches!(event, ClientEvent::Acked { .. }) {
            acks += 1;
            if exit_after_acks.is_some_and(|n| acks >= n) {
                let _ = commands_tx.send(StreamCommand::Stop);
            }
        }
    };
    let mut backoff = match seed {
        Some(seed) => Backoff::with_seed(BackoffConfig::default(), seed),
        None => Backoff::with_seed(BackoffConfig::default(), os_seed()),
    };
    loop {
        let endpoint = tonic::transport::Endpoint::from_shared(server.clone())
            .unwrap_or_else(|e| usage(&format!("--server: {e}")))
            .connect_timeout(Duration::from_secs(5));
        let end = match endpoint.connect().await {
            Ok(channel) => {
                let io = Io::new(channel, &clock, &mut commands, &mut on_event);
                let run = run_stream(&mut client, io);
                match deadline {
                    Some(at) => tokio::time::timeout_at(clock.to_std(at).into(), run)
                        .await
                        .ok(),
                    None => Some(run.await),
                }
            }
            Err(e) => Some(xds_sansio_tonic::client::StreamEnd {
                got_response: false,
                status: Some(tonic::Status::unavailable(format!("connect failed: {e}"))),
                stopped: false,
            }),
        };
        let Some(end) = end else {
            eprintln!("--max-time reached");
            return;
        };
        if end.stopped {
            return;
        }
        if end.got_response {
            backoff.reset();
        }
        let delay = backoff.next_delay();
        eprintln!(
            "stream ended ({}); reconnecting in {delay:?}",
            end.status.map_or("closed".into(), |s| s.to_string())
        );
        let wake = clock.now().saturating_add(delay);
        if deadline.is_some_and(|d| d <= wake) {
            eprintln!("--max-time reached");
            return;
        }
        tokio::time::sleep_until(clock.to_std(wake).into()).await;
    }
}
