//! The one place the client dispatches between SotW and incremental: what a type owes, the
//! request it builds, and how a response is checked. Everything around these three is
//! shared.

use alloc::vec::Vec;

use super::context::Ctx;
use super::incoming::{Reject, Update};
use super::turn::DueKind;
use super::type_view::{TypeParts, TypeView};
use super::{delta, sotw};
use crate::message::{Request, Response, Variant};
use crate::pb::envoy::config::core::v3::Node;
use crate::text::SharedStr;

/// The kind of request `ts` owes, if any.
pub(crate) fn due(variant: Variant, ts: TypeView<'_>) -> Option<DueKind> {
    match variant {
        Variant::Sotw => sotw::due(ts),
        Variant::Delta => delta::due(ts),
    }
}

/// Builds the request `ts` owes (if it still owes one) and records it as sent; returns it
/// with the names it asks for, whose does-not-exist timers start now.
pub(crate) fn build(
    variant: Variant,
    ts: TypeParts<'_>,
    node: Option<Node>,
) -> Option<(Request, Vec<SharedStr>)> {
    let kind = due(variant, ts.view())?;
    let due = ts.turn.take_due(kind)?;
    Some(match variant {
        Variant::Sotw => {
            let (request, names) = sotw::build(ts, due, node);
            (Request::Sotw(request), names)
        }
        Variant::Delta => {
            let (request, names) = delta::build(ts, due, node);
            (Request::Delta(request), names)
        }
    })
}

/// Checks a response of `ts`'s type by the rules of its variant. The caller has made sure
/// the response is of the client's variant.
pub(crate) fn parse(response: Response, ts: TypeView<'_>, cx: &Ctx<'_>) -> Result<Update, Reject> {
    let limits = &cx.config.limits;
    match response {
        Response::Sotw(r) => {
            let extractor = cx.judges.extractors.get(ts.url.as_str()).copied();
            sotw::parse(r, ts.url, ts, limits, extractor)
        }
        Response::Delta(r) => delta::parse(r, ts.url, ts, limits),
    }
}
