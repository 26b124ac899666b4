//! The debug page on the server's own port ([`XdsServerBuilder::debug`]): `GET
//! /debug/applied` answers what each connected node applied
//! ([`XdsServer::applied_json`]) as JSON, over HTTP/1.1 or HTTP/2, so `curl` reads it.
//!
//! [`XdsServerBuilder::debug`]: super::XdsServerBuilder::debug
//! [`XdsServer::applied_json`]: super::XdsServer::applied_json

use std::convert::Infallible;
use std::future::{ready, Ready};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tonic::body::Body;
use tonic::codegen::{http, Service};
use tonic::server::NamedService;

use super::applied::{to_json, Registry};

/// The page's path.
pub const APPLIED_PATH: &str = "/debug/applied";

/// The debug page's service (routed by its name, `debug`, as a gRPC service would be).
#[derive(Clone, Debug)]
pub(crate) struct DebugService {
    pub(crate) applied: Arc<Registry>,
}

impl NamedService for DebugService {
    const NAME: &'static str = "debug";
}

impl Service<http::Request<Body>> for DebugService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let get = request.method() == http::Method::GET;
        let (status, content_type, body) = if get && request.uri().path() == APPLIED_PATH {
            let json = to_json(&self.applied.all()).to_string();
            (http::StatusCode::OK, "application/json", json)
        } else {
            let text = format!("only GET {APPLIED_PATH} is served here\n");
            (http::StatusCode::NOT_FOUND, "text/plain", text)
        };
        let body = Body::new(http_body_util::Full::new(Bytes::from(body)));
        let mut response = http::Response::new(body);
        *response.status_mut() = status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
        ready(Ok(response))
    }
}
