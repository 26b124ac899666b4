//! Connects with a gRPC bootstrap file, watches a listener and prints each update; serves
//! CSDS so `grpcdebug`-style tools can read what the client holds.
//!
//! `GRPC_XDS_BOOTSTRAP=bootstrap.json cargo run -p xds-sansio-tonic --example watch_listener -- LISTENER [CSDS_ADDR]`

use xds_sansio::types::LISTENER;
use xds_sansio_tonic::client::{Bootstrap, WatchEvent, XdsClient};
use xds_sansio_tonic::csds::CsdsService;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let listener = args
        .next()
        .ok_or("usage: watch_listener LISTENER [CSDS_ADDR]")?;
    let bootstrap = Bootstrap::from_env()?;
    println!(
        "node {:?}, servers {:?}",
        bootstrap.node.id, bootstrap.servers
    );

    // The driver: connections, backoff, fallback; nothing connects before the first watch.
    let client = XdsClient::builder(bootstrap).build()?;
    if let Some(addr) = args.next() {
        let csds =
            tonic::transport::Server::builder().add_service(CsdsService::new(client.clone()));
        tokio::spawn(csds.serve(addr.parse()?));
    }

    let mut watch = client.watch(LISTENER.type_url, &listener)?;
    while let Some(event) = watch.next().await {
        match event {
            WatchEvent::Changed {
                name,
                version,
                body,
            } => {
                println!("{name}: version {version}, {} bytes", body.len());
            }
            WatchEvent::DoesNotExist { name } => println!("{name}: does not exist"),
            WatchEvent::Error { name, error } => {
                println!("{}: {error}", name.as_deref().unwrap_or("(all)"));
            }
        }
    }
    Ok(())
}
