//! Why the client NACKed a response as a whole for a protocol reason: a value the
//! application and tests can match. Its `Display` is the `error_detail` message sent.

use alloc::string::String;
use core::fmt;

use crate::name::NameParseError;
use crate::resource::NameError;
use crate::text::SharedStr;

/// Which resource of a response a defect concerns: its position (SotW, where the name may
/// be what is wrong) or its name (incremental).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The resource at this index of `resources`.
    Index(usize),
    /// The resource with this name.
    Name(SharedStr),
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Index(i) => write!(f, "{i}"),
            At::Name(name) => write!(f, "{:?}", name.as_str()),
        }
    }
}

/// A response broke a protocol rule (or a configured [`Limits`](super::Limits) bound): it
/// is NACKed whole and changes no state, whatever the NACK policy.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseDefect {
    /// More resources (or removals, or errors) than
    /// [`Limits::max_resources_per_response`](super::Limits).
    TooManyResources {
        /// What was counted: "resources", "resources and removals", "resource errors".
        what: &'static str,
        /// How many the response carries.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// Holding the response would take the type over
    /// [`Limits::max_names_per_type`](super::Limits).
    TooManyHeld {
        /// How many the type would hold.
        count: usize,
        /// The limit.
        limit: usize,
    },
    /// A name (of a resource, an alias, a removal or a resource error) longer than
    /// [`Limits::max_name_len`](super::Limits).
    NameTooLong {
        /// Which name: "name", "name or alias", "removed name", "resource error name".
        what: &'static str,
        /// The resource or entry, if the name belongs to one.
        at: Option<At>,
        /// Its length in bytes.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// The same name twice in one response ("Clients should NACK responses that contain
    /// multiple instances of the same resource name", xDS protocol, "Duplicate Resource
    /// Names"): in `resources`, in the removed lists, or in both.
    DuplicateName(SharedStr),
    /// An `Any` (or the `Any` inside a `Resource` wrapper) of another type than the
    /// response (`discovery.proto`, `DiscoveryResponse.type_url`: "Must be consistent with
    /// the type_url in the 'resources' repeated Any").
    TypeMismatch {
        /// The resource.
        at: At,
        /// The type it has.
        found: String,
        /// The response's type.
        expected: String,
        /// The type was the one inside a `Resource` wrapper.
        wrapped: bool,
    },
    /// A `Resource` wrapper that does not decode.
    UndecodableWrapper {
        /// The resource.
        at: usize,
        /// The decoder's message.
        error: String,
    },
    /// The resource's name cannot be read from its body.
    UnreadableName {
        /// The resource.
        at: usize,
        /// Why.
        error: NameError,
    },
    /// The name read from the body is not UTF-8.
    NameNotUtf8 {
        /// The resource.
        at: usize,
    },
    /// An `xdstp://` name that is not well formed (xDS TP1).
    MalformedXdstpName {
        /// The name as received.
        name: String,
        /// What is wrong with it.
        error: NameParseError,
    },
    /// A body-less wrapper without a name.
    NamelessHeartbeat {
        /// The resource.
        at: usize,
    },
    /// An incremental `Resource` without a name.
    Nameless {
        /// The resource.
        at: usize,
    },
    /// A body-less SotW `Resource` at a version other than the one accepted: neither a
    /// heartbeat ("a response that doesn't change the resource version", `discovery.proto`,
    /// `Resource.resource`) nor a resource.
    BodylessAtOtherVersion {
        /// The resource.
        name: SharedStr,
        /// The version it came with.
        version: SharedStr,
    },
    /// A negative or out-of-range TTL.
    InvalidTtl {
        /// The resource.
        at: At,
        /// `Duration.seconds`.
        seconds: i64,
        /// `Duration.nanos`.
        nanos: i32,
    },
    /// More responses arrived while a verdict was pending than
    /// [`Limits::max_held_responses`](super::Limits).
    TooManyHeldResponses,
}

impl fmt::Display for ResponseDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResponseDefect::TooManyResources { what, count, limit } => {
                write!(
                    f,
                    "response carries {count} {what}, over the limit of {limit}"
                )
            }
            ResponseDefect::TooManyHeld { count, limit } => write!(
                f,
                "would hold {count} resources of this type, over the limit of {limit}"
            ),
            ResponseDefect::NameTooLong {
                what,
                at,
                len,
                limit,
            } => match at {
                Some(At::Index(i)) if *what == "resource error name" => write!(
                    f,
                    "resource error {i}: name of {len} bytes, over the limit of {limit}"
                ),
                Some(at) => write!(
                    f,
                    "resource {at}: {what} of {len} bytes, over the limit of {limit}"
                ),
                None => write!(f, "{what} of {len} bytes, over the limit of {limit}"),
            },
            ResponseDefect::DuplicateName(name) => {
                write!(f, "duplicate resource name {:?}", name.as_str())
            }
            ResponseDefect::TypeMismatch {
                at,
                found,
                expected,
                wrapped,
            } => {
                let inside = if *wrapped { " inside its wrapper" } else { "" };
                write!(
                    f,
                    "resource {at} has type {found}{inside}, but the response is of type {expected}"
                )
            }
            ResponseDefect::UndecodableWrapper { at, error } => {
                write!(f, "resource {at}: undecodable Resource wrapper: {error}")
            }
            ResponseDefect::UnreadableName { at, error } => {
                write!(f, "resource {at}: cannot read its name: {error}")
            }
            ResponseDefect::NameNotUtf8 { at } => write!(f, "resource {at}: name is not UTF-8"),
            ResponseDefect::MalformedXdstpName { name, error } => {
                write!(f, "malformed xdstp name {name:?}: {error}")
            }
            ResponseDefect::NamelessHeartbeat { at } => {
                write!(f, "resource {at}: heartbeat wrapper without a name")
            }
            ResponseDefect::Nameless { at } => write!(f, "resource {at} has no name"),
            ResponseDefect::BodylessAtOtherVersion { name, version } => write!(
                f,
                "resource {:?} has no body at version {:?}, which is not the version held: \
                 neither a heartbeat nor a resource",
                name.as_str(),
                version.as_str()
            ),
            ResponseDefect::InvalidTtl { at, seconds, nanos } => write!(
                f,
                "resource {at}: invalid ttl {seconds}s {nanos}ns (negative or out of range)"
            ),
            ResponseDefect::TooManyHeldResponses => {
                f.write_str("too many responses held while a verdict was pending")
            }
        }
    }
}
