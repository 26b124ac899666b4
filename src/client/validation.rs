//! Content validation (the application's) and the NACK message (ours).
//!
//! The protocol checks (duplicate names, type mismatch, undecodable wrappers, limits) live
//! in the SotW and incremental parsers; what a valid Cluster is, only the application knows,
//! through a synchronous [`Validator`] or a deferred verdict.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use hashbrown::{HashMap, HashSet};

use crate::resource::NameExtractor;
use crate::text::SharedStr;

use crate::pb::google::rpc::Status;

/// Judges the content of one resource. Returning `Err(reason)` rejects it; the reason ends
/// up in the NACK's `error_detail`.
pub trait Validator: Send + Sync {
    /// Judges `body`, the resource `name` at `version`.
    fn validate(&self, name: &str, version: &str, body: &Bytes) -> Result<(), String>;
}

impl<F> Validator for F
where
    F: Fn(&str, &str, &Bytes) -> Result<(), String> + Send + Sync,
{
    fn validate(&self, name: &str, version: &str, body: &Bytes) -> Result<(), String> {
        self(name, version, body)
    }
}

/// Who judges the resources of each type: the application's validators (synchronous, or
/// deferred to a verdict) and the name extractors of unknown types.
#[derive(Clone, Default)]
pub(crate) struct Judges {
    /// Shared so that a `Client` can be cloned (model checking explores from copies).
    pub(crate) validators: HashMap<SharedStr, Arc<dyn Validator>>,
    pub(crate) deferred: HashSet<SharedStr>,
    pub(crate) extractors: HashMap<SharedStr, NameExtractor>,
    pub(crate) next_ticket: u64,
}

impl fmt::Debug for Judges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Validators by type only: they are code.
        let validators: Vec<&SharedStr> = self.validators.keys().collect();
        let extractors: Vec<&SharedStr> = self.extractors.keys().collect();
        f.debug_struct("Judges")
            .field("validators", &validators)
            .field("deferred", &self.deferred)
            .field("extractors", &extractors)
            .field("next_ticket", &self.next_ticket)
            .finish()
    }
}

/// The largest `error_detail.message` sent, in bytes, before [`TRUNCATION_MARKER`]. Envoy
/// caps its NACK message at 4096 bytes.
pub const MAX_ERROR_MESSAGE: usize = 4096;

/// Appended to a NACK message that was cut at [`MAX_ERROR_MESSAGE`] bytes.
pub const TRUNCATION_MARKER: &str = "...(truncated)";

/// The `google.rpc.Code` of a NACK: INTERNAL, as Envoy sends.
pub const NACK_CODE: i32 = 13;

/// `message` cut at a character boundary to at most [`MAX_ERROR_MESSAGE`] bytes, plus the
/// marker when cut.
pub fn cap_message(message: &str) -> String {
    if message.len() <= MAX_ERROR_MESSAGE {
        return String::from(message);
    }
    let mut end = MAX_ERROR_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + TRUNCATION_MARKER.len());
    out.push_str(message.get(..end).unwrap_or(""));
    out.push_str(TRUNCATION_MARKER);
    out
}

/// The `error_detail` of a NACK.
pub(crate) fn nack_status(message: &str) -> Status {
    Status {
        code: NACK_CODE,
        message: cap_message(message),
        details: alloc::vec::Vec::new(),
    }
}

/// One line per rejected resource, in response order.
pub(crate) fn rejection_message(rejections: &[(SharedStr, String)]) -> String {
    let mut out = String::new();
    for (i, (name, error)) in rejections.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("resource {name:?} rejected: {error}"));
        if out.len() > MAX_ERROR_MESSAGE {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_at_a_char_boundary_with_marker() {
        let long = "é".repeat(3000);
        let capped = cap_message(&long);
        assert!(capped.ends_with(TRUNCATION_MARKER));
        assert!(capped.len() <= MAX_ERROR_MESSAGE + TRUNCATION_MARKER.len());
        assert_eq!(cap_message("short"), "short");
    }
}
