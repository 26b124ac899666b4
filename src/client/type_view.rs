//! What the variant rules read of one type ([`TypeView`]): lent by the type state, so the
//! SotW and incremental rules see its parts without reaching back into it.

use super::cache::TypeCache;
use super::subscription::Subscription;
use super::turn::StreamTurn;
use crate::text::SharedStr;
use crate::types::TypeInfo;

/// One type's parts as the variant rules read them: which type, what is wanted, what is
/// held, this stream's turn, and whether a verdict of the application is awaited.
#[derive(Clone, Copy)]
pub(crate) struct TypeView<'a> {
    pub(crate) url: &'a SharedStr,
    pub(crate) info: TypeInfo,
    pub(crate) sub: &'a Subscription,
    pub(crate) cache: &'a TypeCache,
    pub(crate) turn: &'a StreamTurn,
    pub(crate) waits_for_verdict: bool,
}

/// One type's parts as building a request changes them: what is wanted (what was sent of
/// it) and the stream's turn, beside what is held and which type.
pub(crate) struct TypeParts<'a> {
    pub(crate) url: &'a SharedStr,
    pub(crate) info: TypeInfo,
    pub(crate) sub: &'a mut Subscription,
    pub(crate) cache: &'a TypeCache,
    pub(crate) turn: &'a mut StreamTurn,
    pub(crate) waits_for_verdict: bool,
}

impl TypeParts<'_> {
    /// The same parts, read only.
    pub(crate) fn view(&self) -> TypeView<'_> {
        TypeView {
            url: self.url,
            info: self.info,
            sub: self.sub,
            cache: self.cache,
            turn: self.turn,
            waits_for_verdict: self.waits_for_verdict,
        }
    }
}
