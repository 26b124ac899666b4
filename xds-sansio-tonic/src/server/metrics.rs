//! Metrics through the `metrics` facade: install any recorder (Prometheus exporter, ...)
//! and these appear; without one they cost an atomic load each.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `xds_streams_open` | gauge | |
//! | `xds_streams_opened_total` | counter | `variant` (`sotw`, `delta`), `transport` (`ads`, `per_type`) |
//! | `xds_streams_closed_total` | counter | `reason` |
//! | `xds_streams_refused_total` | counter | `reason` |
//! | `xds_requests_total` | counter | `type_url` |
//! | `xds_acks_total` | counter | `type_url` |
//! | `xds_nacks_total` | counter | `type_url` |
//! | `xds_responses_total` | counter | `type_url` |
//! | `xds_response_bytes_total` | counter | `type_url` |
//! | `xds_push_latency_seconds` | histogram | `type_url`: from the store change to the ACK of the response that carried it |
//! | `xds_publishes_total` | counter | |
//! | `xds_streams_woken_total` | counter | streams a publish woke |
//! | `xds_admission_admitted_total` | counter | `arrival` (`new`, `resuming`), `waited` (`yes`, `no`) |
//! | `xds_admission_shed_total` | counter | `reason` (`rate`, `cap`, `window`) |
//! | `xds_admission_waiting` | gauge | streams waiting for their token or their place in the window |
//! | `xds_admission_warming` | gauge | new streams in the window: admitted, first response not yet acknowledged |

use xds_sansio::{Transport, Variant};

use super::admission::{Arrival, ShedReason};

/// Metric names, for dashboards and tests.
pub mod names {
    /// Streams open now.
    pub const STREAMS_OPEN: &str = "xds_streams_open";
    /// Streams opened.
    pub const STREAMS_OPENED: &str = "xds_streams_opened_total";
    /// Streams closed, by reason.
    pub const STREAMS_CLOSED: &str = "xds_streams_closed_total";
    /// Calls refused before they became streams, by reason.
    pub const STREAMS_REFUSED: &str = "xds_streams_refused_total";
    /// Requests received, by type URL.
    pub const REQUESTS: &str = "xds_requests_total";
    /// ACKs, by type URL.
    pub const ACKS: &str = "xds_acks_total";
    /// NACKs, by type URL and node group (which publication the nodes refused).
    pub const NACKS: &str = "xds_nacks_total";
    /// Streams that subscribed to a type their group had not published (held, nothing
    /// sent until it is), by type URL.
    pub const HOLDS: &str = "xds_holds_total";
    /// Faults a fault plan injected (feature `faults`), by fault (`drop`, `delay`, ...).
    pub const FAULTS: &str = "xds_faults_injected_total";
    /// Responses sent, by type URL.
    pub const RESPONSES: &str = "xds_responses_total";
    /// Encoded bytes of the responses sent, by type URL.
    pub const RESPONSE_BYTES: &str = "xds_response_bytes_total";
    /// Seconds from a store change to the ACK of the response that carried it.
    pub const PUSH_LATENCY: &str = "xds_push_latency_seconds";
    /// Store changes published.
    pub const PUBLISHES: &str = "xds_publishes_total";
    /// Streams woken by publishes.
    pub const STREAMS_WOKEN: &str = "xds_streams_woken_total";
    /// Streams storm protection admitted, by `arrival` (`new`, `resuming`) and whether
    /// they `waited` for their token (`yes`, `no`).
    pub const ADMITTED: &str = "xds_admission_admitted_total";
    /// Streams storm protection shed, by `reason` (`rate`, `cap`, `window`).
    pub const SHED: &str = "xds_admission_shed_total";
    /// Streams waiting for their token, or their place in the window, now.
    pub const WAITING: &str = "xds_admission_waiting";
    /// New streams in storm protection's window now (admitted, first response not yet
    /// acknowledged).
    pub const WARMING: &str = "xds_admission_warming";
}

pub(crate) fn admitted(arrival: Arrival, waited: bool) {
    let arrival = match arrival {
        Arrival::New => "new",
        Arrival::Resuming => "resuming",
    };
    let waited = if waited { "yes" } else { "no" };
    metrics::counter!(names::ADMITTED, "arrival" => arrival, "waited" => waited).increment(1);
}

pub(crate) fn shed(reason: ShedReason) {
    metrics::counter!(names::SHED, "reason" => reason.label()).increment(1);
}

pub(crate) fn waiting(delta: f64) {
    metrics::gauge!(names::WAITING).increment(delta);
}

pub(crate) fn warming(delta: f64) {
    metrics::gauge!(names::WARMING).increment(delta);
}

pub(crate) fn stream_opened(variant: Variant, transport: &Transport) {
    let variant = match variant {
        Variant::Sotw => "sotw",
        Variant::Delta => "delta",
    };
    let transport = match transport {
        Transport::Aggregated => "ads",
        Transport::PerType(_) => "per_type",
    };
    metrics::counter!(names::STREAMS_OPENED, "variant" => variant, "transport" => transport)
        .increment(1);
    metrics::gauge!(names::STREAMS_OPEN).increment(1.0);
}

pub(crate) fn stream_closed(reason: &'static str) {
    metrics::counter!(names::STREAMS_CLOSED, "reason" => reason).increment(1);
    metrics::gauge!(names::STREAMS_OPEN).decrement(1.0);
}

pub(crate) fn refused(reason: &'static str) {
    metrics::counter!(names::STREAMS_REFUSED, "reason" => reason).increment(1);
}

pub(crate) fn request(type_url: &str) {
    metrics::counter!(names::REQUESTS, "type_url" => type_url.to_owned()).increment(1);
}

pub(crate) fn ack(type_url: &str) {
    metrics::counter!(names::ACKS, "type_url" => type_url.to_owned()).increment(1);
}

pub(crate) fn held(type_url: &str) {
    metrics::counter!(names::HOLDS, "type_url" => type_url.to_owned()).increment(1);
}

#[cfg(feature = "faults")]
pub(crate) fn fault(fault: &'static str) {
    metrics::counter!(names::FAULTS, "fault" => fault).increment(1);
}

pub(crate) fn nack(type_url: &str, group: &str) {
    metrics::counter!(names::NACKS, "type_url" => type_url.to_owned(), "group" => group.to_owned())
        .increment(1);
}

pub(crate) fn response(type_url: &str, bytes: usize) {
    metrics::counter!(names::RESPONSES, "type_url" => type_url.to_owned()).increment(1);
    metrics::counter!(names::RESPONSE_BYTES, "type_url" => type_url.to_owned())
        .increment(bytes as u64);
}

pub(crate) fn push_latency(type_url: &str, seconds: f64) {
    metrics::histogram!(names::PUSH_LATENCY, "type_url" => type_url.to_owned()).record(seconds);
}

pub(crate) fn published(woken: usize) {
    metrics::counter!(names::PUBLISHES).increment(1);
    metrics::counter!(names::STREAMS_WOKEN).increment(woken as u64);
}
