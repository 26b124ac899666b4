//! The wire types: prost code generated from `proto/` and checked in, so no user needs
//! protoc.
//!
//! Every `bytes` field is [`bytes::Bytes`], including [`google::protobuf::Any::value`]:
//! decode a message from a `Bytes` buffer and every resource body is a slice of that
//! buffer, never a copy. Maps are `BTreeMap` so encoding is deterministic and the core
//! builds without std. Every message implements [`prost::Name`], so it knows its type URL.
//! Well-known types other than `Any` (Duration, Struct, ...) come from `prost_types`.
//!
//! `tests/codegen.rs` regenerates this code with protox + prost-build and fails when the
//! checked-in copy differs; `XDS_SANSIO_REGENERATE=1 cargo test --test codegen` rewrites it.

#![allow(missing_docs, clippy::all, clippy::pedantic, rustdoc::all)]

/// `envoy.*` packages.
pub mod envoy {
    /// `envoy.service.*` packages.
    pub mod service {
        /// `envoy.service.discovery.*` packages.
        pub mod discovery {
            /// `envoy.service.discovery.v3`: the discovery messages.
            pub mod v3 {
                include!("generated/envoy.service.discovery.v3.rs");
            }
        }
    }
    /// `envoy.config.*` packages.
    pub mod config {
        /// `envoy.config.core.*` packages.
        pub mod core {
            /// `envoy.config.core.v3`: node identity and control plane.
            pub mod v3 {
                include!("generated/envoy.config.core.v3.rs");
            }
        }
    }
    /// `envoy.type.*` packages.
    pub mod r#type {
        /// `envoy.type.v3`: semantic version.
        pub mod v3 {
            include!("generated/envoy.r#type.v3.rs");
        }
    }
}

/// `xds.*` packages.
pub mod xds {
    /// `xds.core.*` packages.
    pub mod core {
        /// `xds.core.v3`: context parameters of xdstp:// names.
        pub mod v3 {
            include!("generated/xds.core.v3.rs");
        }
    }
}

/// `google.*` packages.
pub mod google {
    /// `google.rpc`: the status that carries a NACK.
    pub mod rpc {
        include!("generated/google.rpc.rs");
    }
    /// `google.protobuf`: our own `Any`, whose value is `Bytes`; the other well-known
    /// types are re-exported from `prost_types`.
    pub mod protobuf {
        pub use prost_types::{Duration, ListValue, NullValue, Struct, Timestamp, Value};

        /// `google.protobuf.Any` with a zero-copy `Bytes` value (prost-types' `Any` holds a
        /// `Vec<u8>`, which would copy every resource body).
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
        pub struct Any {
            /// The type URL of the message in `value`.
            #[prost(string, tag = "1")]
            pub type_url: ::prost::alloc::string::String,
            /// The encoded message.
            #[prost(bytes = "bytes", tag = "2")]
            pub value: ::bytes::Bytes,
        }

        impl ::prost::Name for Any {
            const NAME: &'static str = "Any";
            const PACKAGE: &'static str = "google.protobuf";
            fn full_name() -> ::prost::alloc::string::String {
                "google.protobuf.Any".into()
            }
            fn type_url() -> ::prost::alloc::string::String {
                "type.googleapis.com/google.protobuf.Any".into()
            }
        }

        impl Any {
            /// Wraps `message` with its type URL.
            pub fn from_msg<M: ::prost::Message + ::prost::Name>(message: &M) -> Self {
                Any {
                    type_url: M::type_url(),
                    value: message.encode_to_vec().into(),
                }
            }

            /// Decodes the value as `M`; `None` when the type URL is not `M`'s.
            pub fn to_msg<M: ::prost::Message + ::prost::Name + Default>(
                &self,
            ) -> Option<Result<M, ::prost::DecodeError>> {
                (self.type_url == M::type_url()).then(|| M::decode(self.value.clone()))
            }
        }
    }
}

/// The encoded `FileDescriptorSet` of every message above (with the well-known types
/// they import), for reflection: the JSON layer reads it.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("generated/descriptor.bin");

pub use envoy::service::discovery::v3 as discovery;
