//! What travels in a gRPC stream: the discovery messages of each variant, the method paths
//! and services of the catalog (v3 and v2), the codec that writes a response the core
//! already encoded as it is, and the client's codec that reads a response with the core's
//! decode.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use tonic::body::Body;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, Service};
use tonic::server::NamedService;
use tonic::Status;
use tonic_prost::{ProstCodec, ProstDecoder, ProstEncoder};
use xds_sansio::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use xds_sansio::server::EncodedBytes;
use xds_sansio::types::{self, ApiVersion, TypeInfo, CATALOG};
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
    /// One decoded from its wire bytes (by the client's codec): the core's decode, which
    /// has prost's outcome at a fraction of its cost
    /// ([`xds_sansio::pb::decode_discovery_response`],
    /// [`xds_sansio::pb::decode_delta_discovery_response`]).
    fn decode_wire(wire: Bytes) -> Result<Self, prost::DecodeError> {
        Self::decode(wire)
    }
}

macro_rules! wire {
    ($trait:ident, $into:ident, $from:ident, $enum:ident, $variant:ident, $ty:ty $(, $extra:item)*) => {
        impl $trait for $ty {
            $($extra)*
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
    DiscoveryResponse,
    fn decode_wire(wire: Bytes) -> Result<Self, prost::DecodeError> {
        xds_sansio::pb::decode_discovery_response(wire)
    }
);
wire!(
    WireResponse,
    into_response,
    from_response,
    Response,
    Delta,
    DeltaDiscoveryResponse,
    fn decode_wire(wire: Bytes) -> Result<Self, prost::DecodeError> {
        xds_sansio::pb::decode_delta_discovery_response(wire)
    }
);

/// Every discovery service the server answers (all methods of each): the aggregated and
/// the per-type services of the catalog, v3 then v2. `tests` checks that every method path
/// of [`xds_sansio::types::CATALOG`] belongs to one of them.
pub const SERVICES: [&str; 19] = [
    "envoy.service.discovery.v3.AggregatedDiscoveryService",
    "envoy.service.listener.v3.ListenerDiscoveryService",
    "envoy.service.route.v3.RouteDiscoveryService",
    "envoy.service.route.v3.ScopedRoutesDiscoveryService",
    "envoy.service.route.v3.VirtualHostDiscoveryService",
    "envoy.service.cluster.v3.ClusterDiscoveryService",
    "envoy.service.endpoint.v3.EndpointDiscoveryService",
    "envoy.service.secret.v3.SecretDiscoveryService",
    "envoy.service.runtime.v3.RuntimeDiscoveryService",
    "envoy.service.extension.v3.ExtensionConfigDiscoveryService",
    "envoy.service.discovery.v2.AggregatedDiscoveryService",
    "envoy.api.v2.ListenerDiscoveryService",
    "envoy.api.v2.RouteDiscoveryService",
    "envoy.api.v2.ScopedRoutesDiscoveryService",
    "envoy.api.v2.VirtualHostDiscoveryService",
    "envoy.api.v2.ClusterDiscoveryService",
    "envoy.api.v2.EndpointDiscoveryService",
    "envoy.service.discovery.v2.SecretDiscoveryService",
    "envoy.service.discovery.v2.RuntimeDiscoveryService",
];

/// The gRPC method path of a stream of this variant and transport: v3, or v2 for a
/// per-type stream of a v2 type URL.
pub fn method_path(variant: Variant, transport: &Transport) -> Option<&'static str> {
    match (variant, transport) {
        (Variant::Sotw, Transport::Aggregated) => Some(types::ADS_SOTW_METHOD),
        (Variant::Delta, Transport::Aggregated) => Some(types::ADS_DELTA_METHOD),
        (variant, Transport::PerType(url)) => {
            let (ty, version) = TypeInfo::of(url).known?;
            match (variant, version) {
                (Variant::Sotw, ApiVersion::V3) => ty.sotw_method,
                (Variant::Delta, ApiVersion::V3) => Some(ty.delta_method),
                (Variant::Sotw, ApiVersion::V2) => ty.sotw_method_v2,
                (Variant::Delta, ApiVersion::V2) => ty.delta_method_v2,
            }
        }
    }
}

/// The variant and transport a gRPC method path stands for (v3 and v2), with the path as
/// the catalog spells it; a v2 per-type stream carries the v2 type URL.
pub fn route(path: &str) -> Option<(&'static str, Variant, Transport)> {
    for (ads, variant) in [
        (types::ADS_SOTW_METHOD, Variant::Sotw),
        (types::ADS_DELTA_METHOD, Variant::Delta),
        (types::ADS_SOTW_METHOD_V2, Variant::Sotw),
        (types::ADS_DELTA_METHOD_V2, Variant::Delta),
    ] {
        if path == ads {
            return Some((ads, variant, Transport::Aggregated));
        }
    }
    CATALOG.iter().find_map(|t| {
        let methods = [
            (t.sotw_method, Variant::Sotw, Some(t.type_url)),
            (Some(t.delta_method), Variant::Delta, Some(t.type_url)),
            (t.sotw_method_v2, Variant::Sotw, t.type_url_v2),
            (t.delta_method_v2, Variant::Delta, t.type_url_v2),
        ];
        methods.into_iter().find_map(|(method, variant, type_url)| {
            let method = method.filter(|m| *m == path)?;
            let type_url = type_url?;
            Some((method, variant, Transport::PerType(type_url.into())))
        })
    })
}

/// Decodes requests with prost; writes responses that are already encoded as they are
/// (the bytes of [`xds_sansio::server::EncodedResponse`]), so no response is encoded twice.
pub(crate) struct EncodedCodec<Req>(ProstCodec<Req, Req>);

impl<Req> Default for EncodedCodec<Req> {
    fn default() -> Self {
        EncodedCodec(ProstCodec::default())
    }
}

impl<Req: prost::Message + Default + Send + 'static> Codec for EncodedCodec<Req> {
    type Encode = EncodedBytes;
    type Decode = Req;
    type Encoder = RawEncoder;
    type Decoder = ProstDecoder<Req>;

    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> ProstDecoder<Req> {
        self.0.decoder()
    }
}

/// The client's codec: requests encoded by prost, responses decoded by
/// [`WireResponse::decode_wire`] from the frame's bytes (taken without a copy).
pub(crate) struct ResponseCodec<Req, Resp>(PhantomData<(Req, Resp)>);

impl<Req, Resp> Default for ResponseCodec<Req, Resp> {
    fn default() -> Self {
        ResponseCodec(PhantomData)
    }
}

impl<Req: prost::Message + Send + 'static, Resp: WireResponse> Codec for ResponseCodec<Req, Resp> {
    type Encode = Req;
    type Decode = Resp;
    type Encoder = ProstEncoder<Req>;
    type Decoder = ResponseDecoder<Resp>;

    fn encoder(&mut self) -> ProstEncoder<Req> {
        ProstEncoder::new(BufferSettings::default())
    }
    fn decoder(&mut self) -> ResponseDecoder<Resp> {
        ResponseDecoder(PhantomData)
    }
}

/// Decodes one response of a frame (see [`ResponseCodec`]).
pub(crate) struct ResponseDecoder<Resp>(PhantomData<Resp>);

impl<Resp: WireResponse> Decoder for ResponseDecoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Resp>, Status> {
        let wire = src.copy_to_bytes(src.remaining());
        // As tonic-prost reports a message it cannot decode.
        Resp::decode_wire(wire)
            .map(Some)
            .map_err(|e| Status::internal(e.to_string()))
    }
}

/// Copies an encoded message into the gRPC frame, chunk by chunk: the way of a server that
/// compresses (the message is compressed whole). An uncompressed stream writes its
/// responses' own buffers instead (`server/framing.rs`).
pub(crate) struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = EncodedBytes;
    type Error = Status;

    fn encode(&mut self, item: EncodedBytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service_of(path: &str) -> &str {
        path.trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
    }

    #[test]
    fn every_catalog_method_is_served_and_routed_back() {
        let mut paths = vec![
            types::ADS_SOTW_METHOD,
            types::ADS_DELTA_METHOD,
            types::ADS_SOTW_METHOD_V2,
            types::ADS_DELTA_METHOD_V2,
        ];
        for t in CATALOG {
            paths.extend(t.sotw_method);
            paths.extend(t.sotw_method_v2);
            paths.push(t.delta_method);
            paths.extend(t.delta_method_v2);
        }
        for path in paths {
            assert!(SERVICES.contains(&service_of(path)), "{path} is not served");
            let (method, variant, transport) = route(path).expect(path);
            assert_eq!(method, path);
            if transport != Transport::Aggregated {
                assert_eq!(method_path(variant, &transport), Some(path));
            }
        }
        for service in SERVICES {
            assert!(
                CATALOG.iter().any(|t| [
                    t.sotw_method,
                    t.sotw_method_v2,
                    Some(t.delta_method),
                    t.delta_method_v2
                ]
                .into_iter()
                .flatten()
                .any(|p| service_of(p) == service))
                    || service.ends_with("AggregatedDiscoveryService"),
                "{service} serves no method of the catalog"
            );
        }
        assert_eq!(route("/unknown.Service/Method"), None);
    }
}

/// Serves every discovery service of [`SERVICES`] on `routes`, each handing its calls to
/// `handler`; the method path of a call says which RPC it is ([`route`]). The one home of
/// "answer every xDS service by path" for the adapter's server, a proxy in front of one
/// (the CLI's `tap`) and a test peer (`conform`).
pub fn add_every_service<H, F>(routes: &mut tonic::service::RoutesBuilder, handler: H)
where
    H: Fn(http::Request<Body>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = http::Response<Body>> + Send + 'static,
{
    macro_rules! each {
        ($($i:literal)*) => {
            $(routes.add_service(ServiceOf::<$i, H>(handler.clone()));)*
        };
    }
    each!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18);
}

/// One discovery service (`SERVICES[I]`), every call handed to the handler.
#[derive(Clone)]
struct ServiceOf<const I: usize, H>(H);

impl<const I: usize, H> NamedService for ServiceOf<I, H> {
    // Evaluated at compile time: an index out of range is a build error, not a panic.
    #[allow(clippy::indexing_slicing)]
    const NAME: &'static str = SERVICES[I];
}

impl<const I: usize, H, F> Service<http::Request<Body>> for ServiceOf<I, H>
where
    H: Fn(http::Request<Body>) -> F,
    F: Future<Output = http::Response<Body>> + Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let answer = (self.0)(request);
        Box::pin(async move { Ok(answer.await) })
    }
}
