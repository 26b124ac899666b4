//! The field's servers as the storm's server (modes `go` and `java`): the same storm
//! against go-control-plane and java-control-plane, in the same run as ours, so the
//! figures of one day's machine have baselines beside them. Each is a small program of the
//! side-by-side benches on the peer's real server and cache (every node on one snapshot):
//! `benches/side-by-side/go/storm` (go-control-plane v0.14.0's `serverv3` and
//! `SnapshotCache` on grpc-go v1.85.0) and `benches/side-by-side/java`'s `StormServer`
//! (java-control-plane 1.0.49's `V3DiscoveryServer` and `SimpleCache` on grpc-java 1.62.2
//! over Netty). Built when the mode starts; both serve the same 1 000 clusters of 150
//! bytes, print `listening ADDRESS` once they serve, and publish an update when told
//! `tick N` on their standard input (a whole new snapshot, as their caches take them).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;

/// A peer whose server the storm can run against.
#[derive(Clone, Copy, Debug)]
pub enum Peer {
    GoControlPlane,
    JavaControlPlane,
}

impl Peer {
    /// How the results name it.
    pub fn label(self) -> &'static str {
        match self {
            Peer::GoControlPlane => "go-control-plane v0.14.0",
            Peer::JavaControlPlane => "java-control-plane 1.0.49",
        }
    }

    /// Builds the peer's server; the command that starts it. Panics, saying why, when the
    /// toolchain or the module cannot be had.
    fn build(self) -> Command {
        let side_by_side =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../benches/side-by-side");
        match self {
            Peer::GoControlPlane => {
                let module = side_by_side.join("go");
                let out = std::env::current_exe()
                    .expect("the bench's own path")
                    .with_file_name("storm-go-control-plane");
                run(
                    Command::new("go")
                        .args(["build", "-o"])
                        .arg(&out)
                        .arg("./storm"),
                    &module,
                );
                Command::new(out)
            }
            Peer::JavaControlPlane => {
                let module = side_by_side.join("java");
                // Offline from the local repository once it holds every artifact, else
                // resolved from Maven Central.
                let offline = Command::new("mvn")
                    .args(["-q", "-B", "-o", "-DskipTests", "package"])
                    .current_dir(&module)
                    .status()
                    .is_ok_and(|s| s.success());
                if !offline {
                    run(
                        Command::new("mvn").args(["-q", "-B", "-DskipTests", "package"]),
                        &module,
                    );
                }
                let target = module.join("target");
                let classpath = std::fs::read_to_string(target.join("classpath.txt"))
                    .expect("the Maven build's target/classpath.txt");
                let mut java = Command::new("java");
                java.arg("-cp")
                    .arg(format!(
                        "{}:{}",
                        target.join("classes").display(),
                        classpath.trim()
                    ))
                    .arg("io.github.xdssansio.bench.StormServer");
                java
            }
        }
    }
}

/// Runs a build step in `dir`; panics when it cannot run or fails.
fn run(command: &mut Command, dir: &Path) {
    let status = command
        .current_dir(dir)
        .status()
        .unwrap_or_else(|e| panic!("{command:?} in {dir:?}: {e}"));
    assert!(status.success(), "{command:?} in {dir:?}: {status}");
}

/// A peer's server process.
pub struct PeerServer {
    child: Child,
    stdin: Mutex<Option<ChildStdin>>,
    /// Where it listens, as the clients dial it.
    pub uri: String,
}

impl PeerServer {
    /// Builds and starts `peer`'s server, once it says where it listens.
    pub fn start(peer: Peer) -> PeerServer {
        let mut command = peer.build();
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("{}'s server {command:?}: {e}", peer.label()));
        let stdout = child.stdout.take().expect("its standard output");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the peer server's first line");
        let address = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("{}'s server said {line:?}", peer.label()));
        PeerServer {
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
            .expect("the peer server takes the update");
    }

    /// Its resident set, in MiB.
    pub fn rss_mib(&self) -> u64 {
        crate::processes::rss_mib_of(&format!("/proc/{}/status", self.child.id()))
    }

    /// Ends it (its standard input closes) and checks it ended well.
    pub fn shutdown(mut self) {
        drop(self.stdin.lock().unwrap().take());
        let status = self.child.wait().expect("the peer server ends");
        assert!(status.success(), "the peer server: {status}");
    }
}
