//! Fuzz target bodies (hidden feature `fuzzing`). They live in the library so they always
//! compile with it; `fuzz/` only wraps them for cargo-fuzz, and `tests/fuzz_corpus.rs`
//! replays the committed corpus through them on stable. Each body checks invariants and
//! panics only when one is broken (a bug of this crate).

use alloc::string::String;
use prost::Message;

use crate::name::{ResourceName, XdstpName};
use crate::pb::discovery::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse, Resource,
};

/// Resource-name parsing: never panics; canonical forms are fixed points.
#[allow(clippy::panic)]
pub fn names(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(ResourceName::Xdstp(name)) = ResourceName::parse(&text) {
        let canonical = name.canonical();
        match XdstpName::parse(&canonical) {
            Ok(again) if again == name && again.canonical() == canonical => {}
            other => {
                panic!("canonical form {canonical:?} of {text:?} does not round-trip: {other:?}")
            }
        }
        if let Some(glob) = name.glob_of() {
            assert!(
                glob.glob_matches(&name),
                "{name} is not matched by its own glob {glob}"
            );
        }
    }
    let _ = crate::resource::name_of(data);
}

/// Decoding every discovery message from arbitrary bytes: never panics, and what decodes
/// re-encodes to something that decodes to the same value.
#[allow(clippy::panic)]
pub fn decode(data: &[u8]) {
    fn round_trip<M: Message + Default + PartialEq + core::fmt::Debug>(data: &[u8]) {
        if let Ok(message) = M::decode(data) {
            let again = M::decode(message.encode_to_vec().as_slice());
            assert!(
                again.as_ref() == Ok(&message),
                "re-encoding changed {message:?}"
            );
        }
    }
    round_trip::<DiscoveryRequest>(data);
    round_trip::<DiscoveryResponse>(data);
    round_trip::<DeltaDiscoveryRequest>(data);
    round_trip::<DeltaDiscoveryResponse>(data);
    round_trip::<Resource>(data);
}
