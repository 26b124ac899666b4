//! The part of etcd's v3 gRPC API a replica and a publisher use (`etcdserverpb.KV` Range and
//! Txn, `etcdserverpb.Watch`), declared with prost and called through tonic.
//!
//! # Decisions
//!
//! - **Declared here, not generated at build time.** The `etcd-client` crate speaks the
//!   same API, but it generates its code with `tonic-prost-build`, which runs `protoc` at
//!   build time: every build of the workspace with `--all-features` (CI's clippy before
//!   anything is installed, a developer's machine) would need a hand-installed protobuf
//!   compiler. These few messages are written out with their field numbers from etcd's
//!   `api/etcdserverpb/rpc.proto` and `api/mvccpb/kv.proto` (3.4 and later); fields this
//!   module does not use are left out, which protobuf decoding tolerates.
//! - **Leader required on watches** (etcd's `hasleader` metadata, `clientv3.WithRequireLeader`
//!   in Go): a member that loses its quorum ends the watch with "no leader" instead of
//!   keeping it open and silent, so a replica knows at once that it is no longer fed and
//!   says so in health.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::client::Grpc;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint};
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;

/// `etcdserverpb.ResponseHeader`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    /// The cluster's id.
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    /// The answering member's id.
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// The key-value store's revision when the request was applied.
    #[prost(int64, tag = "3")]
    pub revision: i64,
}

/// `mvccpb.KeyValue`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// The key.
    #[prost(bytes = "bytes", tag = "1")]
    pub key: bytes::Bytes,
    /// The revision of the key's last creation.
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    /// The revision of the key's last change (its deletion, in a DELETE event).
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    /// The value.
    #[prost(bytes = "bytes", tag = "5")]
    pub value: bytes::Bytes,
}

/// `etcdserverpb.RangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// One past the last key (the prefix's end: see [`prefix_end`]).
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// At most this many keys (0: no limit).
    #[prost(int64, tag = "3")]
    pub limit: i64,
    /// Read at this revision (0: the newest).
    #[prost(int64, tag = "4")]
    pub revision: i64,
    /// Keys only, no values.
    #[prost(bool, tag = "8")]
    pub keys_only: bool,
}

/// `etcdserverpb.RangeResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeResponse {
    /// The header (its revision is the one read).
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The keys and values.
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
    /// Whether more keys are in the range than were returned.
    #[prost(bool, tag = "3")]
    pub more: bool,
}

/// `etcdserverpb.PutRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutRequest {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The value.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: bytes::Bytes,
}

/// `etcdserverpb.DeleteRangeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeRequest {
    /// The key (or the first of a range).
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// One past the last key of a range; empty: the key alone.
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
}

/// `etcdserverpb.RequestOp`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestOp {
    /// The operation.
    #[prost(oneof = "request_op::Request", tags = "2, 3")]
    pub request: Option<request_op::Request>,
}

/// The operations of a [`RequestOp`].
pub mod request_op {
    /// `RequestOp.request`.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Request {
        /// `request_put`.
        #[prost(message, tag = "2")]
        Put(super::PutRequest),
        /// `request_delete_range`.
        #[prost(message, tag = "3")]
        DeleteRange(super::DeleteRangeRequest),
    }
}

/// `etcdserverpb.Compare`, for the one comparison a publisher makes: every key of a range
/// last changed before a revision (`target = MOD`, `result = LESS`, with `range_end`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Compare {
    /// `CompareResult`: 2 is `LESS`.
    #[prost(int32, tag = "1")]
    pub result: i32,
    /// `CompareTarget`: 2 is `MOD`.
    #[prost(int32, tag = "2")]
    pub target: i32,
    /// The key (or the first of a range).
    #[prost(bytes = "vec", tag = "3")]
    pub key: Vec<u8>,
    /// `target_union.mod_revision`.
    #[prost(int64, tag = "6")]
    pub mod_revision: i64,
    /// One past the last key of the range compared (etcd 3.3 and later).
    #[prost(bytes = "vec", tag = "64")]
    pub range_end: Vec<u8>,
}

/// `Compare.CompareResult.LESS`.
pub const COMPARE_LESS: i32 = 2;
/// `Compare.CompareTarget.MOD`.
pub const COMPARE_MOD: i32 = 2;

/// `etcdserverpb.TxnRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnRequest {
    /// Conditions, all of which must hold for `success` to run.
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    /// What runs when they hold.
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    /// What runs when they do not.
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

/// `etcdserverpb.TxnResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnResponse {
    /// The header (its revision is the transaction's).
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// Whether the comparisons held (and `success` ran).
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
}

/// `etcdserverpb.WatchRequest` (only `create_request`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchRequest {
    /// `create_request`.
    #[prost(message, optional, tag = "1")]
    pub create_request: Option<WatchCreateRequest>,
}

/// `etcdserverpb.WatchCreateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchCreateRequest {
    /// The first key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// One past the last key.
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// The first revision to report (0: from now).
    #[prost(int64, tag = "3")]
    pub start_revision: i64,
    /// Periodic responses with no events, carrying the current revision.
    #[prost(bool, tag = "4")]
    pub progress_notify: bool,
}

/// `mvccpb.Event`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// `EventType`: 0 PUT, 1 DELETE.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    /// The key after the event (for DELETE: the key, and the deletion's revision).
    #[prost(message, optional, tag = "2")]
    pub kv: Option<KeyValue>,
}

/// `Event.EventType.DELETE`.
pub const EVENT_DELETE: i32 = 1;

/// `etcdserverpb.WatchResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The watch's id.
    #[prost(int64, tag = "2")]
    pub watch_id: i64,
    /// The answer to a create request.
    #[prost(bool, tag = "3")]
    pub created: bool,
    /// The watch ended (compaction, no leader, ...).
    #[prost(bool, tag = "4")]
    pub canceled: bool,
    /// Set when the start revision was compacted away: the oldest revision still held.
    #[prost(int64, tag = "5")]
    pub compact_revision: i64,
    /// Why the watch was cancelled.
    #[prost(string, tag = "6")]
    pub cancel_reason: String,
    /// The events, in revision order; a revision's events are never split across
    /// responses (fragmenting is off).
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
}

/// The key one past every key starting with `prefix` (etcd's `GetPrefixRangeEnd`): the
/// prefix with its last byte below 0xff incremented and what follows dropped; `\0` (every
/// key) when there is none.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// `etcdserverpb.CompactionRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionRequest {
    /// Every revision before this one is forgotten.
    #[prost(int64, tag = "1")]
    pub revision: i64,
    /// Wait until the compaction is applied to the backend.
    #[prost(bool, tag = "2")]
    pub physical: bool,
}

/// `etcdserverpb.CompactionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CompactionResponse {
    /// The header.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

const COMPACT: &str = "/etcdserverpb.KV/Compact";
const RANGE: &str = "/etcdserverpb.KV/Range";
const TXN: &str = "/etcdserverpb.KV/Txn";
const WATCH: &str = "/etcdserverpb.Watch/Watch";

/// A connection to one etcd member.
#[derive(Clone, Debug)]
pub struct Member {
    grpc: Grpc<Channel>,
    timeout: Duration,
}

impl Member {
    /// Connects to `endpoint` (`host:port` or `http://host:port`); each call is bounded by
    /// `timeout`, the connection attempt too.
    pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Member, String> {
        Member::connect_with(endpoint, timeout, None).await
    }

    /// [`Member::connect`] with HTTP/2 keepalive: a PING every `.0`, the connection
    /// dropped when one is not answered within `.1`, so a watch over a network that
    /// silently drops everything ends instead of waiting for ever.
    pub async fn connect_with(
        endpoint: &str,
        timeout: Duration,
        keepalive: Option<(Duration, Duration)>,
    ) -> Result<Member, String> {
        let uri = if endpoint.contains("://") {
            endpoint.to_string()
        } else {
            format!("http://{endpoint}")
        };
        let channel = Endpoint::from_shared(uri)
            .map_err(|e| format!("bad etcd endpoint {endpoint:?}: {e}"))?
            .connect_timeout(timeout)
            .tcp_nodelay(true);
        let channel = match keepalive {
            Some((interval, wait)) => channel
                .http2_keep_alive_interval(interval)
                .keep_alive_timeout(wait)
                .keep_alive_while_idle(true),
            None => channel,
        };
        let channel = match tokio::time::timeout(timeout, channel.connect()).await {
            Ok(Ok(channel)) => channel,
            Ok(Err(e)) => return Err(format!("connect to etcd {endpoint}: {e}")),
            Err(_) => return Err(format!("connect to etcd {endpoint}: timed out")),
        };
        Ok(Member {
            grpc: Grpc::new(channel),
            timeout,
        })
    }

    async fn unary<Req, Resp>(&mut self, path: &'static str, request: Req) -> Result<Resp, Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let call = async {
            self.grpc
                .ready()
                .await
                .map_err(|e| Status::unavailable(format!("etcd not ready: {e}")))?;
            let mut request = tonic::Request::new(request);
            request.set_timeout(self.timeout);
            let codec = ProstCodec::<Req, Resp>::default();
            self.grpc
                .unary(request, PathAndQuery::from_static(path), codec)
                .await
                .map(tonic::Response::into_inner)
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(Status::deadline_exceeded("etcd call timed out")),
        }
    }

    /// `KV.Range`.
    pub async fn range(&mut self, request: RangeRequest) -> Result<RangeResponse, Status> {
        self.unary(RANGE, request).await
    }

    /// `KV.Txn`.
    pub async fn txn(&mut self, request: TxnRequest) -> Result<TxnResponse, Status> {
        self.unary(TXN, request).await
    }

    /// `KV.Compact` (operators and tests: replicas never compact).
    pub async fn compact(
        &mut self,
        request: CompactionRequest,
    ) -> Result<CompactionResponse, Status> {
        self.unary(COMPACT, request).await
    }

    /// Opens `Watch` with one create request (leader required, see the module docs); the
    /// sender keeps the request stream open and must be kept alive as long as the watch.
    pub async fn watch(
        &mut self,
        create: WatchCreateRequest,
    ) -> Result<(mpsc::Sender<WatchRequest>, Streaming<WatchResponse>), Status> {
        let (tx, rx) = mpsc::channel(1);
        tx.send(WatchRequest {
            create_request: Some(create),
        })
        .await
        .map_err(|_| Status::internal("watch request channel closed"))?;
        let call = async {
            self.grpc
                .ready()
                .await
                .map_err(|e| Status::unavailable(format!("etcd not ready: {e}")))?;
            let mut request = tonic::Request::new(ReceiverStream::new(rx));
            request.metadata_mut().insert(
                "hasleader",
                tonic::metadata::MetadataValue::from_static("true"),
            );
            let codec = ProstCodec::<WatchRequest, WatchResponse>::default();
            self.grpc
                .streaming(request, PathAndQuery::from_static(WATCH), codec)
                .await
                .map(tonic::Response::into_inner)
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => Ok((tx, result?)),
            Err(_) => Err(Status::deadline_exceeded(
                "etcd watch did not start in time",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key_after_the_prefix() {
        assert_eq!(prefix_end(b"/xds/"), b"/xds0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }
}
