//! The wire types: prost code generated from `proto/` and checked in, so no user needs
//! protoc.
//!
//! Every `bytes` field is [`bytes::Bytes`], including [`google::protobuf::Any::value`]:
//! decode a message from a `Bytes` buffer and every resource body is a slice of that
//! buffer, never a copy. `Any::type_url` is a [`google::protobuf::TypeUrl`], UTF-8 kept
//! in `Bytes` too, so building a response of 10 000 resources clones reference counts
//! instead of allocating 10 000 strings (`benches/README.md`, server (b)). Maps are `BTreeMap` so encoding is deterministic and the core
//! builds without std. Every message implements [`prost::Name`], so it knows its type URL.
//! [`decode_discovery_response`] reads a SotW response from its wire bytes with prost's
//! outcome at about half its cost (what the adapter's client does).
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

        /// `google.protobuf.Any` with zero-copy `Bytes` for both fields: decoding slices the
        /// type URL and the value out of the message buffer, and cloning an `Any` (every
        /// response a server builds) is two reference-count increments, where prost-types'
        /// `Any` copies the value and allocates a `String` for the type URL.
        #[derive(Clone, PartialEq, Eq, Hash, Default, Debug)]
        pub struct Any {
            /// The type URL of the message in `value`.
            pub type_url: TypeUrl,
            /// The encoded message.
            pub value: ::bytes::Bytes,
        }

        impl ::prost::Message for Any {
            fn encode_raw(&self, buf: &mut impl ::bytes::BufMut) {
                // Written straight from the slices: prost's `bytes::encode` clones a `Bytes`
                // (two atomic operations) per field, which doubled the encode of 10k Anys.
                fn field(tag: u32, data: &[u8], buf: &mut impl ::bytes::BufMut) {
                    if !data.is_empty() {
                        ::prost::encoding::encode_key(
                            tag,
                            ::prost::encoding::WireType::LengthDelimited,
                            buf,
                        );
                        ::prost::encoding::encode_varint(data.len() as u64, buf);
                        buf.put_slice(data);
                    }
                }
                field(1, &self.type_url.0, buf);
                field(2, &self.value, buf);
            }

            fn merge_field(
                &mut self,
                tag: u32,
                wire_type: ::prost::encoding::WireType,
                buf: &mut impl ::bytes::Buf,
                ctx: ::prost::encoding::DecodeContext,
            ) -> Result<(), ::prost::DecodeError> {
                match tag {
                    1 => {
                        let mut raw = ::bytes::Bytes::new();
                        ::prost::encoding::bytes::merge(wire_type, &mut raw, buf, ctx.clone())
                            .map_err(|mut e| {
                                e.push("Any", "type_url");
                                e
                            })?;
                        // Type URLs are ASCII in practice: the cheap check first.
                        if !raw.is_ascii() && core::str::from_utf8(&raw).is_err() {
                            // prost's own error for a string that is not UTF-8.
                            let mut encoded = ::prost::alloc::vec::Vec::new();
                            ::prost::encoding::bytes::encode(1, &raw, &mut encoded);
                            let mut slice = encoded.get(1..).unwrap_or(&[]);
                            let mut text = ::prost::alloc::string::String::new();
                            let err = ::prost::encoding::string::merge(
                                ::prost::encoding::WireType::LengthDelimited,
                                &mut text,
                                &mut slice,
                                ctx,
                            )
                            .err();
                            if let Some(mut e) = err {
                                e.push("Any", "type_url");
                                return Err(e);
                            }
                        }
                        self.type_url = TypeUrl(raw);
                        Ok(())
                    }
                    2 => ::prost::encoding::bytes::merge(wire_type, &mut self.value, buf, ctx)
                        .map_err(|mut e| {
                            e.push("Any", "value");
                            e
                        }),
                    _ => ::prost::encoding::skip_field(wire_type, tag, buf, ctx),
                }
            }

            fn encoded_len(&self) -> usize {
                let mut len = 0;
                if !self.type_url.is_empty() {
                    len += ::prost::encoding::bytes::encoded_len(1, &self.type_url.0);
                }
                if !self.value.is_empty() {
                    len += ::prost::encoding::bytes::encoded_len(2, &self.value);
                }
                len
            }

            fn clear(&mut self) {
                self.type_url = TypeUrl::default();
                self.value.clear();
            }
        }

        /// A type URL kept as shared UTF-8 bytes (see [`Any`]). Reads as a `&str`, compares
        /// with strings, and converts from them.
        #[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct TypeUrl(::bytes::Bytes);

        impl TypeUrl {
            /// A type URL from a `'static` string, without allocating.
            pub const fn from_static(url: &'static str) -> TypeUrl {
                TypeUrl(::bytes::Bytes::from_static(url.as_bytes()))
            }

            /// A type URL from bytes the caller checked are UTF-8.
            pub(crate) fn from_checked_bytes(utf8: ::bytes::Bytes) -> TypeUrl {
                debug_assert!(core::str::from_utf8(&utf8).is_ok());
                TypeUrl(utf8)
            }

            /// The type URL.
            pub fn as_str(&self) -> &str {
                debug_assert!(core::str::from_utf8(&self.0).is_ok());
                // SAFETY: the field is private and every constructor starts from a `str`
                // (`from_static`, the `From` impls, `Default`) or checks UTF-8 first
                // (`merge_field`, the callers of `from_checked_bytes`). Checking again on
                // every read cost as much as a third of a client's work per resource
                // (callgrind, benches/instructions.rs).
                unsafe { core::str::from_utf8_unchecked(&self.0) }
            }
        }

        impl core::ops::Deref for TypeUrl {
            type Target = str;
            fn deref(&self) -> &str {
                self.as_str()
            }
        }

        impl AsRef<str> for TypeUrl {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl core::borrow::Borrow<str> for TypeUrl {
            fn borrow(&self) -> &str {
                self.as_str()
            }
        }

        impl core::fmt::Debug for TypeUrl {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                core::fmt::Debug::fmt(self.as_str(), f)
            }
        }

        impl core::fmt::Display for TypeUrl {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl From<&str> for TypeUrl {
            fn from(url: &str) -> TypeUrl {
                TypeUrl(::bytes::Bytes::copy_from_slice(url.as_bytes()))
            }
        }

        impl From<::prost::alloc::string::String> for TypeUrl {
            fn from(url: ::prost::alloc::string::String) -> TypeUrl {
                TypeUrl(::bytes::Bytes::from(url))
            }
        }

        impl From<&::prost::alloc::string::String> for TypeUrl {
            fn from(url: &::prost::alloc::string::String) -> TypeUrl {
                TypeUrl::from(url.as_str())
            }
        }

        impl From<TypeUrl> for ::prost::alloc::string::String {
            fn from(url: TypeUrl) -> ::prost::alloc::string::String {
                ::prost::alloc::string::String::from(url.as_str())
            }
        }

        impl PartialEq<str> for TypeUrl {
            /// The same `'static` string (a catalogued type's URL, which both the decode and
            /// the client's types use) is recognised without reading it.
            #[inline]
            fn eq(&self, other: &str) -> bool {
                let (ours, theirs) = (self.0.as_ref(), other.as_bytes());
                ours.len() == theirs.len()
                    && (core::ptr::eq(ours.as_ptr(), theirs.as_ptr()) || ours == theirs)
            }
        }

        impl PartialEq<&str> for TypeUrl {
            #[inline]
            fn eq(&self, other: &&str) -> bool {
                *self == **other
            }
        }

        impl PartialEq<::prost::alloc::string::String> for TypeUrl {
            fn eq(&self, other: &::prost::alloc::string::String) -> bool {
                self.as_str() == other.as_str()
            }
        }

        impl PartialEq<TypeUrl> for str {
            fn eq(&self, other: &TypeUrl) -> bool {
                self == other.as_str()
            }
        }

        impl PartialEq<TypeUrl> for &str {
            fn eq(&self, other: &TypeUrl) -> bool {
                *self == other.as_str()
            }
        }

        impl PartialEq<TypeUrl> for ::prost::alloc::string::String {
            fn eq(&self, other: &TypeUrl) -> bool {
                self.as_str() == other.as_str()
            }
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
                    type_url: M::type_url().into(),
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

pub(crate) mod plain_fields;
mod response_decode;
pub use response_decode::{decode_delta_discovery_response, decode_discovery_response};
