//! Hand-written tonic glue shared by the tokio examples and the loopback interop test
//! (`tests/interop/main.rs`): no generated stubs, no `build.rs`, just tonic's `Grpc`
//! client/server with `tonic_prost::ProstCodec` over the crate's own prost messages.
//!
//! - [`server`]: one tokio task per gRPC stream driving a [`xds_sansio::ServerStream`]
//!   against a shared [`xds_sansio::ResourceStore`], for the ADS and every per-type service,
//!   SotW and delta.
//! - [`client`]: one call driving a [`xds_sansio::Client`] until the stream ends.
//! - [`Recorder`]: every message (and store change) as JSON lines, for the checker.
#![allow(dead_code)]

pub mod client;
pub mod server;

use std::io::Write;
use std::sync::Mutex;

use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::transcript::Entry;
use xds_sansio::types::{self, CATALOG};
use xds_sansio::{Request, Response, Transport, Variant};

/// A request message of one variant, as it travels in a gRPC stream.
pub trait WireRequest: prost::Message + Default + Send + Sync + 'static {
    /// Into the variant-neutral request.
    fn into_request(self) -> Request;
    /// Out of it (`None` for the other variant).
    fn from_request(request: Request) -> Option<Self>;
}

/// A response message of one variant, as it travels in a gRPC stream.
pub trait WireResponse: prost::Message + Default + Send + Sync + 'static {
    /// Into the variant-neutral response.
    fn into_response(self) -> Response;
    /// Out of it (`None` for the other variant).
    fn from_response(response: Response) -> Option<Self>;
}

macro_rules! wire {
    ($trait:ident, $into:ident, $from:ident, $enum:ident, $variant:ident, $ty:ty) => {
        impl $trait for $ty {
            fn $into(self) -> $enum {
                $enum::$variant(self)
            }
            fn $from(message: $enum) -> Option<Self> {
                match message {
                    $enum::$variant(m) => Some(m),
                    _ => None,
                }
            }
        }
    };
}
wire!(
    WireRequest,
    into_request,
    from_request,
    Request,
    Sotw,
    DiscoveryRequest
);
wire!(
    WireRequest,
    into_request,
    from_request,
    Request,
    Delta,
    DeltaDiscoveryRequest
);
wire!(
    WireResponse,
    into_response,
    from_response,
    Response,
    Sotw,
    DiscoveryResponse
);
wire!(
    WireResponse,
    into_response,
    from_response,
    Response,
    Delta,
    DeltaDiscoveryResponse
);

/// The gRPC method path of a stream of this variant and transport (v3).
pub fn method_path(variant: Variant, transport: &Transport) -> Option<&'static str> {
    match (variant, transport) {
        (Variant::Sotw, Transport::Aggregated) => Some(types::ADS_SOTW_METHOD),
        (Variant::Delta, Transport::Aggregated) => Some(types::ADS_DELTA_METHOD),
        (variant, Transport::PerType(url)) => {
            let ty = CATALOG.iter().find(|t| t.type_url == url)?;
            match variant {
                Variant::Sotw => ty.sotw_method,
                Variant::Delta => Some(ty.delta_method),
            }
        }
    }
}

/// The variant and transport a gRPC method path stands for (v3).
pub fn route(path: &str) -> Option<(Variant, Transport)> {
    if path == types::ADS_SOTW_METHOD {
        return Some((Variant::Sotw, Transport::Aggregated));
    }
    if path == types::ADS_DELTA_METHOD {
        return Some((Variant::Delta, Transport::Aggregated));
    }
    CATALOG.iter().find_map(|t| {
        let per_type = Transport::PerType(t.type_url.into());
        if t.sotw_method == Some(path) {
            Some((Variant::Sotw, per_type))
        } else if t.delta_method == path {
            Some((Variant::Delta, per_type))
        } else {
            None
        }
    })
}

/// Records a conversation: every entry in memory and, optionally, as JSON lines in a file
/// (the format `xds-sansio check` and `xds_sansio::check::parse_jsonl` read).
pub struct Recorder {
    inner: Mutex<(Vec<Entry>, Option<std::fs::File>)>,
    #[cfg(feature = "check")]
    codec: xds_sansio::json::JsonCodec,
}

impl Recorder {
    /// A recorder that keeps entries in memory and appends them to `file` if given.
    pub fn new(file: Option<std::fs::File>) -> Recorder {
        Recorder {
            inner: Mutex::new((Vec::new(), file)),
            #[cfg(feature = "check")]
            codec: xds_sansio::json::JsonCodec::new(),
        }
    }

    /// Records one entry; `make` gets the 1-based line number.
    pub fn record(&self, make: impl FnOnce(usize) -> Entry) {
        let mut inner = self.inner.lock().unwrap();
        let entry = make(inner.0.len() + 1);
        #[cfg(feature = "check")]
        if let Some(file) = inner.1.as_mut() {
            match xds_sansio::check::to_jsonl(&entry, &self.codec) {
                Ok(line) => {
                    let _ = writeln!(file, "{line}");
                    let _ = file.flush();
                }
                Err(e) => eprintln!("recorder: {e}"),
            }
        }
        #[cfg(not(feature = "check"))]
        if let Some(file) = inner.1.as_mut() {
            let _ = writeln!(file, "{entry:?}");
        }
        inner.0.push(entry);
    }

    /// Everything recorded so far.
    pub fn entries(&self) -> Vec<Entry> {
        self.inner.lock().unwrap().0.clone()
    }
}
