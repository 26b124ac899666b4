//! Envoy resource bodies shared by the adapter's tests that need real messages: the
//! examples' own builders (`examples/chain/`), so the tests serve what the examples do.

use bytes::Bytes;
use prost::Message;

#[allow(dead_code)] // the tests use some of the chain's builders
#[path = "../../examples/chain/mod.rs"]
mod chain;

/// One endpoint, 127.0.0.1:`port`.
pub fn endpoints_body(name: &str, port: u32) -> Bytes {
    let port = u16::try_from(port).expect("a port");
    let backend = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    Bytes::from(chain::endpoints(name, backend).encode_to_vec())
}
