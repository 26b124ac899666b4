//! go-control-plane as the storm's server (mode `go`): the same storm against the
//! management server the field runs most, in the same run as ours, so the figures of one
//! day's machine have a baseline beside them. The server is
//! `benches/side-by-side/go/storm` (go-control-plane v0.14.0's `serverv3` and
//! `SnapshotCache` on grpc-go v1.85.0, every node on one snapshot), built with `go build`
//! when the mode starts unless `XDS_STORM_GO_SERVER` names a built one; it serves the
//! same 1 000 clusters of 150 bytes and publishes an update when told `tick N` on its
//! standard input (a whole new snapshot, as `SnapshotCache` takes them).

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// A built server binary to use instead of building one.
const BINARY: &str = "XDS_STORM_GO_SERVER";

/// The go-control-plane server process.
pub struct GoServer {
    child: Child,
    stdin: Mutex<Option<ChildStdin>>,
    /// Where it listens, as the clients dial it.
    pub uri: String,
}

impl GoServer {
    /// Builds (unless given) and starts the server; panics, saying why, when Go or the
    /// module cannot be had.
    pub fn start() -> GoServer {
        let binary = std::env::var(BINARY)
            .map(PathBuf::from)
            .unwrap_or_else(|_| build());
        let mut child = Command::new(&binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("the go-control-plane server {binary:?}: {e}"));
        let stdout = child.stdout.take().expect("its standard output");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the go-control-plane server's first line");
        let address = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("the go-control-plane server said {line:?}"));
        GoServer {
            uri: format!("http://{address}"),
            stdin: Mutex::new(child.stdin.take()),
            child,
        }
    }

    /// Publishes update `tick` (cluster 0 carries it).
    pub fn publish(&self, tick: u64) {
        let mut stdin = self.stdin.lock().unwrap();
        let stdin = stdin.as_mut().expect("the server is running");
        writeln!(stdin, "tick {tick}")
            .and_then(|()| stdin.flush())
            .expect("the go-control-plane server takes the update");
    }

    /// Its resident set, in MiB.
    pub fn rss_mib(&self) -> u64 {
        crate::processes::rss_mib_of(&format!("/proc/{}/status", self.child.id()))
    }

    /// Ends it (its standard input closes) and checks it ended well.
    pub fn shutdown(mut self) {
        drop(self.stdin.lock().unwrap().take());
        let status = self.child.wait().expect("the go-control-plane server ends");
        assert!(status.success(), "the go-control-plane server: {status}");
    }
}

/// `go build` of the server into the target directory; the module's dependencies come
/// from its `go.sum` (through the module proxy the first time).
fn build() -> PathBuf {
    let module = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benches/side-by-side/go");
    let out = std::env::current_exe()
        .expect("the bench's own path")
        .with_file_name("storm-go-control-plane");
    let status = Command::new("go")
        .args(["build", "-o"])
        .arg(&out)
        .arg("./storm")
        .current_dir(&module)
        .status()
        .unwrap_or_else(|e| panic!("mode go needs Go on the PATH (`go build` in {module:?}): {e}"));
    assert!(
        status.success(),
        "`go build ./storm` in {module:?}: {status}"
    );
    out
}
