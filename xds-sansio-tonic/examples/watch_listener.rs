//! Connects with a gRPC bootstrap file, watches a listener and prints the complete
//! configuration it resolves to (the listener, its route configuration, clusters and their
//! endpoints), again at each change; serves CSDS so `grpcdebug`-style tools can read what
//! the client holds.
//!
//! `GRPC_XDS_BOOTSTRAP=bootstrap.json cargo run -p xds-sansio-tonic --example watch_listener -- LISTENER [CSDS_ADDR]`

use xds_sansio_tonic::client::{Bootstrap, ConfigEvent, XdsClient};
use xds_sansio_tonic::csds::CsdsService;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listener = args
        .next()
        .ok_or("usage: watch_listener LISTENER [CSDS_ADDR]")?;
    // The driver: connections, backoff, fallback; nothing connects before the first watch.
    let client = XdsClient::builder(Bootstrap::from_env()?).build()?;
    if let Some(addr) = args.next() {
        let csds =
            tonic::transport::Server::builder().add_service(CsdsService::new(client.clone()));
        tokio::spawn(csds.serve(addr.parse()?));
    }

    // Every resource the listener reaches is subscribed as references lead to it; each
    // configuration arrives complete (gRPC A74), and again whenever it changes.
    let mut watch = client.watch_listener(&listener)?;
    while let Some(event) = watch.next().await {
        match event {
            ConfigEvent::Changed(config) => {
                match &config.status {
                    Ok(()) => println!("listener {}:", config.name),
                    Err(failure) => println!("listener {} cannot serve: {failure}", config.name),
                }
                for held in &config.resources {
                    let (key, version, len) = (&held.key, &held.version, held.body.len());
                    println!("  {key}: version {version}, {len} bytes");
                }
                for cluster in &config.clusters {
                    match &cluster.leaves {
                        Ok(leaves) => println!("  cluster {} -> {leaves:?}", cluster.name),
                        Err(failure) => println!("  cluster {}: {failure}", cluster.name),
                    }
                }
            }
            // The configuration in use stays (a server unreachable, an update rejected).
            ConfigEvent::Error { resource, error } => match resource {
                Some(key) => println!("{key}: {error}"),
                None => println!("every resource: {error}"),
            },
            other => println!("{other:?}"),
        }
    }
    Ok(())
}
