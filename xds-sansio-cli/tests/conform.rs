//! `xds-sansio conform` against the adapter's client and server (the worked example of
//! docs/conform.md, `examples/conform_peer.rs`, run in this process): scenarios pass over
//! real gRPC, the diagrams and the closing line are `replay`'s, unobservable expectations
//! are marked, a wrong scenario fails at its line, and `--junit` writes the verdicts.

#[allow(dead_code)]
#[path = "../examples/conform_peer.rs"]
mod peer;

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> &'static Path {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.parent().unwrap_or(cli)
}

/// Starts the peer in its own runtime; returns its control address.
fn start_peer(role: &'static str) -> (String, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let control = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let xds = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send((
                control.local_addr().unwrap().to_string(),
                xds.local_addr().unwrap().to_string(),
            ))
            .unwrap();
            peer::run(role, control, xds).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("xds-sansio-conform-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn conform(args: &[&str], files: &[PathBuf]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xds-sansio"))
        .arg("conform")
        .args(args)
        .args(files)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn conform_client_plays_the_server_for_the_adapters_client() {
    let (control, _) = start_peer("client");
    let dir = scratch("client");
    // A scenario that must fail: the client sent version X, the line says Y.
    let simple = std::fs::read_to_string(root().join("scenarios/seed/simple_ack.xds")).unwrap();
    let wrong = dir.join("wrong.xds");
    std::fs::write(
        &wrong,
        simple.replace(
            "C->S (V=X,R={foo,bar},N=A,T=EDS) [ack]",
            "C->S (V=Y,R={foo,bar},N=A,T=EDS) [ack]",
        ),
    )
    .unwrap();
    let junit = dir.join("junit.xml");
    let files = [
        root().join("scenarios/seed/simple_ack.xds"),
        root().join("scenarios/seed/ads_multiplexing.xds"),
        root().join("scenarios/seed/eds_one_stream.xds"),
        root().join("scenarios/client/delta/removed_resources.xds"),
        root().join("scenarios/seed/requests_become_stale.xds"),
        wrong,
    ];
    let (code, text) = conform(
        &[
            "client",
            "--listen",
            "127.0.0.1:0",
            "--hook-socket",
            &control,
            "--patience-ms",
            "3000",
            "--junit",
            junit.to_str().unwrap(),
        ],
        &files,
    );
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("◀") && text.contains("▶") && text.contains("✓"),
        "{text}"
    );
    // Expectations on the real client's state are marked, not guessed.
    assert!(
        text.contains("not checked: the real client's state cannot be observed"),
        "{text}"
    );
    assert!(text.contains("– skipped: not a client scenario"), "{text}");
    assert!(
        text.contains("expected: C->S (V=Y,R={foo,bar},N=A,T=EDS)"),
        "{text}"
    );
    let last = text.lines().rev().find(|l| !l.is_empty()).unwrap();
    assert_eq!(last, "4 passed, 1 failed, 1 skipped", "{text}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("tests=\"6\" failures=\"1\" skipped=\"1\""),
        "{xml}"
    );
    assert!(xml.contains("<failure message=\"line 11:"), "{xml}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conform_server_plays_the_client_for_the_adapters_server() {
    let (control, xds) = start_peer("server");
    let files = [
        root().join("scenarios/seed/simple_ack.xds"),
        root().join("scenarios/seed/simple_nack.xds"),
        root().join("scenarios/server/delta"),
    ];
    let (code, text) = conform(
        &[
            "server",
            "--target",
            &xds,
            "--hook-socket",
            &control,
            "--patience-ms",
            "3000",
            "--variant",
            "sotw",
        ],
        &files,
    );
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.contains("– skipped: a Delta scenario (--variant)"),
        "{text}"
    );
    let last = text.lines().rev().find(|l| !l.is_empty()).unwrap();
    assert!(last.starts_with("2 passed, 0 failed, "), "{text}");
}

#[test]
fn fuzzing_plays_generated_conversations_to_the_adapters_client() {
    let (control, _) = start_peer("client");
    let dir = scratch("fuzz");
    let (code, text) = conform(
        &[
            "client",
            "--listen",
            "127.0.0.1:0",
            "--hook-socket",
            &control,
            "--patience-ms",
            "2000",
            "--fuzz",
            "3",
            "--seed",
            "40",
            "--fuzz-out",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    // The adapter's client is the model's: no divergence, nothing written.
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("fuzz seed 40: PASS"), "{text}");
    assert!(text.ends_with("3 passed, 0 failed, 0 kinds\n"), "{text}");
    assert!(std::fs::read_dir(&dir).unwrap().next().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fuzzing_plays_generated_cases_to_the_adapters_server() {
    let (control, xds) = start_peer("server");
    let known = scratch("known");
    std::fs::create_dir_all(&known).unwrap();
    let list = known.join("known.txt");
    std::fs::write(&list, "# none\nother-peer: Response R  # not this peer's\n").unwrap();
    let (code, text) = conform(
        &[
            "server",
            "--target",
            &xds,
            "--hook-socket",
            &control,
            "--patience-ms",
            "2000",
            "--fuzz",
            "3",
            "--seed",
            "7",
            "--known-divergences",
            list.to_str().unwrap(),
            "--fuzz-label",
            "adapter",
            // TTL heartbeats race real time against the model's virtual time.
            "--fuzz-without",
            "ttl",
        ],
        &[],
    );
    // The adapter's server is the model's: every case passes, with messages checked.
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("fuzz seed 7: PASS"), "{text}");
    assert!(text.ends_with("3 passed, 0 failed, 0 kinds\n"), "{text}");
    let _ = std::fs::remove_dir_all(&known);
}
