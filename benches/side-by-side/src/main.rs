//! Side by side with the Rust peers (issue 19, section 1): the same bytes through
//! xds-sansio and through each peer, in process where the peer allows it, contenders
//! alternated within every iteration, medians reported with ratios.
//!
//! usage: side-by-side [client|server|fanout]... [--iterations N] [--no-loopback]

mod client;
mod common;
mod fanout;
mod server;
mod xds_client_peer;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut iterations = 31usize;
    let mut sections = Vec::new();
    let mut loopback = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--no-loopback" {
            loopback = false;
        } else if a == "--iterations" {
            iterations = it
                .next()
                .and_then(|n| n.parse().ok())
                .expect("--iterations N");
        } else {
            sections.push(a.as_str());
        }
    }
    if sections.is_empty() {
        sections = vec!["client", "server", "fanout"];
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!("iterations per contender: {iterations} (medians)");
    for s in sections {
        match s {
            "client" => {
                let peer = loopback.then(xds_client_peer::Peer::start);
                client::run(iterations, peer.as_ref());
            }
            "server" => server::run(iterations, &rt),
            "fanout" => fanout::run(iterations, &rt),
            other => panic!("unknown section {other}"),
        }
    }
}
