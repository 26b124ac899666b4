//! The bench's other processes: the new clients' load process and the connected
//! clients' process, each this bench started again with a variable naming its role, its
//! server and what it reports on its standard output; and the clock and memory figures
//! the processes share.

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clients::{connected_clients, new_clients};
use crate::updates::{monotonic_ns, Receipt, Receipts};
use crate::{env, Load};

/// The load process's allocator, when not the server's (`XDS_STORM_ALLOCATOR`'s values).
pub const LOAD_ALLOCATOR: &str = "XDS_STORM_LOAD_ALLOCATOR";
/// The load process's nice value (0: the server's share of the cores).
pub const LOAD_NICE: &str = "XDS_STORM_LOAD_NICE";
/// The variables that make this bench the load process of another.
pub const LOAD_URI: &str = "XDS_STORM_LOAD_URI";
pub const LOAD_STARTED: &str = "XDS_STORM_LOAD_STARTED_NS";

/// The process's resident set, in MiB.
pub fn rss_mib() -> u64 {
    rss_mib_of("/proc/self/status")
}

/// The resident set a `/proc/PID/status` file gives, in MiB (0 when unread).
pub fn rss_mib_of(status: &str) -> u64 {
    std::fs::read_to_string(status)
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// The connected clients' process's role: the server it connects to.
pub const CONNECTED_URI: &str = "XDS_STORM_CONNECTED_URI";

/// Where the connected clients run: in the server's process, or in one of their own
/// (`XDS_STORM_SPLIT`), which tells as it happens when all of them hold an update and
/// reports their receipts once its standard input closes.
pub enum Connected {
    Here {
        receipts: Arc<Receipts>,
        count: usize,
    },
    Apart(ConnectedApart),
}

impl Connected {
    /// Opens the connected clients' streams to the server at `uri`.
    pub async fn start(uri: &str, load: &Load) -> Connected {
        if load.split {
            return Connected::Apart(ConnectedApart::spawn(uri));
        }
        let receipts = Arc::new(Receipts::default());
        connected_clients(uri, load, receipts.clone()).await;
        Connected::Here {
            receipts,
            count: load.connected,
        }
    }

    /// Waits until every connected client holds update `tick` (0: the first full state);
    /// panics past `limit`, or when the connected clients' process ended.
    pub async fn until_all_hold(&self, tick: u64, limit: Duration) {
        let start = Instant::now();
        loop {
            let all = match self {
                Connected::Here { receipts, count } => receipts.holders(tick) >= *count,
                Connected::Apart(apart) => {
                    assert!(
                        !apart.reader.is_finished(),
                        "the connected clients' process ended early"
                    );
                    apart.all_hold.load(Ordering::Acquire) > tick
                }
            };
            if all {
                return;
            }
            assert!(
                start.elapsed() < limit,
                "the connected clients did not all hold update {tick} within {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Every receipt, and the connected clients' process's RSS when apart.
    pub async fn finish(self) -> (Vec<Receipt>, Option<u64>) {
        match self {
            Connected::Here { receipts, .. } => (receipts.take(), None),
            Connected::Apart(apart) => tokio::task::spawn_blocking(move || apart.finish())
                .await
                .unwrap(),
        }
    }
}

/// The connected clients' process, seen from the bench.
pub struct ConnectedApart {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    /// One past the newest update every connected client holds.
    all_hold: Arc<AtomicU64>,
    /// Reads the process's report: every line but the `holds` ones.
    reader: std::thread::JoinHandle<Vec<String>>,
}

impl ConnectedApart {
    fn spawn(uri: &str) -> ConnectedApart {
        let mut child = role(CONNECTED_URI, uri)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("the connected clients' process");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let all_hold = Arc::new(AtomicU64::new(0));
        let reader = {
            let all_hold = all_hold.clone();
            std::thread::spawn(move || {
                let mut report = Vec::new();
                for line in std::io::BufReader::new(stdout).lines() {
                    let line = line.expect("the connected clients' report");
                    match line.strip_prefix("holds ").map(str::parse::<u64>) {
                        Some(Ok(tick)) => all_hold.store(tick + 1, Ordering::Release),
                        _ => report.push(line),
                    }
                }
                report
            })
        };
        ConnectedApart {
            child,
            stdin,
            all_hold,
            reader,
        }
    }

    fn finish(mut self) -> (Vec<Receipt>, Option<u64>) {
        drop(self.stdin.take());
        let report = self.reader.join().unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the connected clients' process: {status}");
        let (mut receipts, mut rss) = (Vec::new(), None);
        for line in &report {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["receipt", rest @ ..] => {
                    receipts.push(Receipt::from_fields(rest).expect("a receipt line"))
                }
                ["rss", mib] => rss = Some(mib.parse().unwrap()),
                _ => {}
            }
        }
        (receipts, rss)
    }
}

/// The connected clients' process's side: opens the connected clients' streams, prints
/// `holds N` once every one of them holds update N, and when its standard input closes,
/// prints every receipt and its RSS, then ends.
pub fn connected_process(load: &Load, uri: &str) {
    let runtime = runtime();
    let ended = Arc::new(AtomicBool::new(false));
    {
        let ended = ended.clone();
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
            ended.store(true, Ordering::Release);
        });
    }
    let receipts = Arc::new(Receipts::default());
    runtime.block_on(async {
        connected_clients(uri, load, receipts.clone()).await;
        let mut next = 0;
        while !ended.load(Ordering::Acquire) {
            while receipts.holders(next) >= load.connected {
                println!("holds {next}");
                next += 1;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    });
    let mut out = String::new();
    for receipt in receipts.take() {
        out.push_str(&receipt.to_line());
        out.push('\n');
    }
    report_and_exit(out)
}

/// Runs the new clients in a child process of this bench (`XDS_STORM_SPLIT=1`), which
/// reports each client's serving time on `CLOCK_MONOTONIC` (shared by the two processes),
/// its sheds and its RSS; the storm's time starts before the child is spawned.
pub async fn new_clients_in_a_child(uri: &str) -> (Vec<(Duration, bool)>, usize, Option<u64>) {
    let started = monotonic_ns();
    let mut command = role(LOAD_URI, uri);
    command.env(LOAD_STARTED, started.to_string());
    let output = tokio::task::spawn_blocking(move || command.output().expect("the load process"))
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "the load process: {}",
        output.status
    );
    let (mut served, mut sheds, mut rss) = (Vec::new(), 0, None);
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            ["served", at, resumed] => {
                served.push((Duration::from_nanos(at.parse().unwrap()), *resumed == "1"))
            }
            ["sheds", n] => sheds = n.parse().unwrap(),
            ["rss", mib] => rss = Some(mib.parse().unwrap()),
            _ => {}
        }
    }
    (served, sheds, rss)
}

/// The load process's side: the new clients against the server at `uri`, each client's
/// serving time counted from `started` (the parent's `CLOCK_MONOTONIC`), printed.
pub fn load_process(load: &Load, uri: &str, started: u64) {
    let nice = env(LOAD_NICE, 0) as i32;
    if nice != 0 {
        // SAFETY: plain syscall; Linux keeps a nice value per thread, and the runtime's
        // threads, spawned below, inherit this one's.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    }
    let runtime = runtime();
    let already = Duration::from_nanos(monotonic_ns().saturating_sub(started));
    let start = Instant::now() - already;
    let (served, sheds) = runtime.block_on(new_clients(uri, load, start));
    let mut out = String::new();
    for (at, resumed) in served {
        out.push_str(&format!("served {} {}\n", at.as_nanos(), u8::from(resumed)));
    }
    out.push_str(&format!("sheds {sheds}\n"));
    report_and_exit(out)
}

/// This bench started again in the role `variable` names, against the server at `uri`,
/// on the clients' allocator (`XDS_STORM_LOAD_ALLOCATOR`, else the server's).
fn role(variable: &str, uri: &str) -> std::process::Command {
    let mut command =
        std::process::Command::new(std::env::current_exe().expect("the bench's own path"));
    command
        .arg("--bench")
        .env(variable, uri)
        .stderr(std::process::Stdio::inherit());
    if let Ok(allocator) = std::env::var(LOAD_ALLOCATOR) {
        command.env("XDS_STORM_ALLOCATOR", allocator);
    }
    command
}

/// The runtime of each of the bench's processes: two workers, one a core.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Prints a role's report, its RSS last, and ends the process: the clients' tasks hold
/// their streams open, so it does not wait for them.
fn report_and_exit(mut out: String) -> ! {
    out.push_str(&format!("rss {}\n", rss_mib()));
    print!("{out}");
    std::io::stdout()
        .flush()
        .expect("the report reaches the bench");
    std::process::exit(0);
}
