//! The Rust side of benches/side-by-side/go.sh (issue 25, section 2): xds-sansio on the
//! same Envoy Cluster bytes as the Go side (go-control-plane, grpc-go), printing the
//! machine-readable RESULT and MEMORY lines go.sh pairs with the Go side's.
//!
//! usage: vs_go bodies FILE | vs_go [server|fanout|memory|client]... [--iterations N]
//!        [--fanout-iterations N] [--client-addr HOST:PORT [--typed]]

#[path = "../../common.rs"]
#[allow(dead_code)]
mod common;

mod bodies;
mod client;
mod fanout;
mod memory;
mod out;
mod server;

#[global_allocator]
static ALLOCATOR: memory::Counting = memory::Counting;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut iterations = 21usize;
    let mut fanout_iterations = 21usize;
    let mut client_addr = None;
    let mut typed = false;
    let mut sections = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = || -> usize {
            it.next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{a} N"))
        };
        match a.as_str() {
            "--iterations" => iterations = number(),
            "--fanout-iterations" => fanout_iterations = number(),
            "--client-addr" => client_addr = it.next().cloned(),
            "--typed" => typed = true,
            "bodies" => {
                let path = it.next().expect("bodies FILE");
                bodies::write(path).expect("writing the bodies");
                return;
            }
            _ => sections.push(a.clone()),
        }
    }
    for s in sections {
        match s.as_str() {
            "server" => server::run(iterations),
            "fanout" => fanout::run(fanout_iterations),
            "memory" => memory::run(),
            "client" => client::run(
                client_addr.as_deref().expect("--client-addr HOST:PORT"),
                typed,
            ),
            other => panic!("unknown section {other}"),
        }
    }
}
