//! Canonical proto3 JSON for every message of the crate (feature `json`).
//!
//! The mapping is prost-reflect's implementation of the canonical proto3 JSON mapping over
//! the descriptors of `proto/` (embedded as [`crate::pb::FILE_DESCRIPTOR_SET`]): field
//! names in lowerCamelCase, 64-bit integers as strings, `Duration` as `"1.5s"`, bytes as
//! base64, default values omitted, and an `Any` written as the JSON of the message inside it
//! plus `"@type"`.
//!
//! That last rule needs the schema of the message inside the `Any`, and the crate only
//! knows the discovery messages. So, as DESIGN.md decides:
//! - the application may add its resource schemas ([`JsonCodec::add_file_descriptor_set`],
//!   e.g. the descriptors of `envoy.config.cluster.v3.Cluster`), after which those `Any`s
//!   are canonical too;
//! - an `Any` of a type the codec does not know is written and read as
//!   `{"@type": URL, "value": "<base64 of the message>"}`. This is a documented
//!   relaxation: canonical JSON has no form for it (other implementations fail instead).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use prost::{Message, Name};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, ReflectMessage,
    SerializeOptions, Value as ReflectValue,
};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};
use serde_json::{Map, Value};

/// The message that stands in for an `Any` of an unknown type while prost-reflect does its
/// work; it never reaches the caller.
const OPAQUE_ANY: &str = "xds_sansio.json.OpaqueAny";
const OPAQUE_ANY_URL: &str = "type.googleapis.com/xds_sansio.json.OpaqueAny";
const ANY: &str = "google.protobuf.Any";

/// Why a JSON conversion failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsonError {
    /// The text is not JSON, or does not match the message's schema.
    Json(String),
    /// The message type is not in the codec's descriptor pool.
    UnknownMessage(String),
    /// A file descriptor set could not be added to the pool.
    Descriptor(String),
    /// The binary encoding inside could not be decoded.
    Decode(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Json(e) => write!(f, "invalid JSON: {e}"),
            JsonError::UnknownMessage(m) => write!(f, "message type {m} is not known"),
            JsonError::Descriptor(e) => write!(f, "invalid descriptors: {e}"),
            JsonError::Decode(e) => write!(f, "undecodable message: {e}"),
        }
    }
}

impl std::error::Error for JsonError {}

/// Converts messages to and from canonical proto3 JSON.
#[derive(Clone, Debug)]
pub struct JsonCodec {
    pool: DescriptorPool,
    ignore_unknown_fields: bool,
}

impl Default for JsonCodec {
    fn default() -> Self {
        JsonCodec::new()
    }
}

fn opaque_any_file() -> FileDescriptorProto {
    let field = |name: &str, json: &str, number: i32, ty: Type| FieldDescriptorProto {
        name: Some(name.into()),
        json_name: Some(json.into()),
        number: Some(number),
        label: Some(Label::Optional as i32),
        r#type: Some(ty as i32),
        ..Default::default()
    };
    FileDescriptorProto {
        name: Some("xds_sansio/json/opaque_any.proto".into()),
        package: Some("xds_sansio.json".into()),
        syntax: Some("proto3".into()),
        message_type: alloc::vec![DescriptorProto {
            name: Some("OpaqueAny".into()),
            field: alloc::vec![
                field("type_url", "typeUrl", 1, Type::String),
                field("value", "value", 2, Type::Bytes),
            ],
            ..Default::default()
        }],
        ..Default::default()
    }
}

impl JsonCodec {
    /// A codec that knows the messages of this crate and the well-known types.
    pub fn new() -> JsonCodec {
        let mut pool = DescriptorPool::new();
        // Both sets are built into the crate and tested; failure would be a build defect.
        let built_in = pool
            .decode_file_descriptor_set(crate::pb::FILE_DESCRIPTOR_SET)
            .and_then(|()| pool.add_file_descriptor_proto(opaque_any_file()));
        debug_assert!(built_in.is_ok(), "built-in descriptors: {built_in:?}");
        JsonCodec {
            pool,
            ignore_unknown_fields: false,
        }
    }

    /// Adds the schemas of resource types (an encoded `FileDescriptorSet`), so `Any`s of
    /// those types are written canonically.
    pub fn add_file_descriptor_set(&mut self, bytes: &[u8]) -> Result<(), JsonError> {
        self.pool
            .decode_file_descriptor_set(bytes)
            .map_err(|e| JsonError::Descriptor(e.to_string()))
    }

    /// Accept JSON with fields the schema does not know (newer peers), instead of failing.
    pub fn ignore_unknown_fields(mut self, ignore: bool) -> JsonCodec {
        self.ignore_unknown_fields = ignore;
        self
    }

    /// The descriptor pool in use.
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }

    fn descriptor(&self, name: &str) -> Result<MessageDescriptor, JsonError> {
        self.pool
            .get_message_by_name(name)
            .ok_or_else(|| JsonError::UnknownMessage(name.into()))
    }

    /// The canonical JSON of `message`, as a value.
    pub fn to_value<M: Message + Name>(&self, message: &M) -> Result<Value, JsonError> {
        self.encoded_to_value(&M::full_name(), &message.encode_to_vec())
    }

    /// The canonical JSON of `message`, as text.
    pub fn to_string<M: Message + Name>(&self, message: &M) -> Result<String, JsonError> {
        self.to_value(message).map(|v| v.to_string())
    }

    /// The canonical JSON of a message of type `full_name` given in binary form.
    pub fn encoded_to_value(&self, full_name: &str, encoded: &[u8]) -> Result<Value, JsonError> {
        let desc = self.descriptor(full_name)?;
        let mut dynamic = DynamicMessage::decode(desc.clone(), encoded)
            .map_err(|e| JsonError::Decode(e.to_string()))?;
        self.hide_unknown_anys(&mut dynamic)?;
        let options = SerializeOptions::new();
        let mut value = dynamic
            .serialize_with_options(serde_json::value::Serializer, &options)
            .map_err(|e| JsonError::Json(e.to_string()))?;
        self.walk_json(&desc, &mut value, Mode::RevealOpaque)?;
        Ok(value)
    }

    /// Parses canonical JSON into `M`.
    pub fn from_value<M: Message + Name + Default>(&self, value: Value) -> Result<M, JsonError> {
        let encoded = self.value_to_encoded(&M::full_name(), value)?;
        M::decode(encoded.as_slice()).map_err(|e| JsonError::Decode(e.to_string()))
    }

    /// Parses canonical JSON text into `M`.
    pub fn from_str<M: Message + Name + Default>(&self, text: &str) -> Result<M, JsonError> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| JsonError::Json(e.to_string()))?;
        self.from_value(value)
    }

    /// Parses canonical JSON of a message of type `full_name` into its binary form.
    pub fn value_to_encoded(
        &self,
        full_name: &str,
        mut value: Value,
    ) -> Result<Vec<u8>, JsonError> {
        let desc = self.descriptor(full_name)?;
        self.walk_json(&desc, &mut value, Mode::HideOpaque)?;
        let options = DeserializeOptions::new().deny_unknown_fields(!self.ignore_unknown_fields);
        let mut dynamic = DynamicMessage::deserialize_with_options(desc, value, &options)
            .map_err(|e| JsonError::Json(e.to_string()))?;
        self.reveal_opaque_anys(&mut dynamic)?;
        Ok(dynamic.encode_to_vec())
    }

    /// Replaces every `Any` of an unknown type by an `OpaqueAny` placeholder, recursing
    /// into the known ones.
    fn hide_unknown_anys(&self, message: &mut DynamicMessage) -> Result<(), JsonError> {
        self.rewrite_anys(message, &mut |codec, type_url, value| {
            if codec.any_type(type_url).is_some() {
                return Ok(None);
            }
            let mut opaque = DynamicMessage::new(codec.descriptor(OPAQUE_ANY)?);
            opaque.set_field_by_number(1, ReflectValue::String(type_url.into()));
            opaque.set_field_by_number(2, ReflectValue::Bytes(value.clone()));
            Ok(Some((OPAQUE_ANY_URL.into(), opaque.encode_to_vec().into())))
        })
    }

    /// Turns `OpaqueAny` placeholders back into the `Any`s they stand for.
    fn reveal_opaque_anys(&self, message: &mut DynamicMessage) -> Result<(), JsonError> {
        self.rewrite_anys(message, &mut |codec, type_url, value| {
            if type_url != OPAQUE_ANY_URL {
                return Ok(None);
            }
            let opaque = DynamicMessage::decode(codec.descriptor(OPAQUE_ANY)?, value.clone())
                .map_err(|e| JsonError::Decode(e.to_string()))?;
            let url = opaque
                .get_field_by_number(1)
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let bytes = opaque
                .get_field_by_number(2)
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            Ok(Some((url, bytes)))
        })
    }

    /// The descriptor of the message an `Any` type URL names, if the pool knows it.
    fn any_type(&self, type_url: &str) -> Option<MessageDescriptor> {
        let name = type_url.rsplit('/').next().unwrap_or(type_url);
        self.pool.get_message_by_name(name)
    }

    /// Applies `rewrite` to every `Any` in `message` (recursively, also inside the
    /// messages of known `Any`s); `Some((url, value))` replaces that `Any`'s contents.
    fn rewrite_anys(
        &self,
        message: &mut DynamicMessage,
        rewrite: &mut AnyRewrite<'_>,
    ) -> Result<(), JsonError> {
        if message.descriptor().full_name() == ANY {
            let type_url = message
                .get_field_by_number(1)
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            let value = message
                .get_field_by_number(2)
                .and_then(|v| v.as_bytes().cloned())
                .unwrap_or_default();
            if let Some((url, bytes)) = rewrite(self, &type_url, &value)? {
                message.set_field_by_number(1, ReflectValue::String(url));
                message.set_field_by_number(2, ReflectValue::Bytes(bytes));
            } else if let Some(desc) = self.any_type(&type_url) {
                let mut inner = DynamicMessage::decode(desc, value)
                    .map_err(|e| JsonError::Decode(e.to_string()))?;
                self.rewrite_anys(&mut inner, rewrite)?;
                message.set_field_by_number(2, ReflectValue::Bytes(inner.encode_to_vec().into()));
            }
            return Ok(());
        }
        for (_, value) in message.fields_mut() {
            self.rewrite_value(value, rewrite)?;
        }
        Ok(())
    }

    fn rewrite_value(
        &self,
        value: &mut ReflectValue,
        rewrite: &mut AnyRewrite<'_>,
    ) -> Result<(), JsonError> {
        match value {
            ReflectValue::Message(inner) => self.rewrite_anys(inner, rewrite),
            ReflectValue::List(items) => items
                .iter_mut()
                .try_for_each(|item| self.rewrite_value(item, rewrite)),
            ReflectValue::Map(entries) => entries
                .values_mut()
                .try_for_each(|item| self.rewrite_value(item, rewrite)),
            _ => Ok(()),
        }
    }

    /// Walks JSON along the schema of `desc` and rewrites the objects of `Any` fields
    /// (`mode` says which way); schema-guided so a `Struct` that happens to hold an
    /// `"@type"` key is never touched.
    fn walk_json(
        &self,
        desc: &MessageDescriptor,
        json: &mut Value,
        mode: Mode,
    ) -> Result<(), JsonError> {
        let Value::Object(object) = json else {
            return Ok(());
        };
        if desc.full_name() == ANY {
            return self.walk_any(object, mode);
        }
        if desc.package_name() == "google.protobuf" {
            // Well-known types with special JSON forms hold no Any.
            return Ok(());
        }
        for (key, value) in object.iter_mut() {
            let Some(field) = desc
                .get_field_by_json_name(key)
                .or_else(|| desc.get_field_by_name(key))
            else {
                continue;
            };
            let Kind::Message(inner) = field.kind() else {
                continue;
            };
            if field.is_map() {
                let Kind::Message(value_desc) = inner.map_entry_value_field().kind() else {
                    continue;
                };
                if let Value::Object(entries) = value {
                    for entry in entries.values_mut() {
                        self.walk_json(&value_desc, entry, mode)?;
                    }
                }
            } else if let Value::Array(items) = value {
                for item in items {
                    self.walk_json(&inner, item, mode)?;
                }
            } else {
                self.walk_json(&inner, value, mode)?;
            }
        }
        Ok(())
    }

    fn walk_any(&self, object: &mut Map<String, Value>, mode: Mode) -> Result<(), JsonError> {
        let type_url = match object.get("@type") {
            Some(Value::String(url)) => url.clone(),
            _ => return Ok(()),
        };
        match mode {
            Mode::RevealOpaque if type_url == OPAQUE_ANY_URL => {
                let url = object
                    .remove("typeUrl")
                    .unwrap_or(Value::String(String::new()));
                let value = object
                    .remove("value")
                    .unwrap_or(Value::String(String::new()));
                object.clear();
                object.insert("@type".into(), url);
                object.insert("value".into(), value);
                return Ok(());
            }
            Mode::HideOpaque if self.any_type(&type_url).is_none() => {
                let value = object.remove("value");
                object.clear();
                object.insert("@type".into(), Value::String(OPAQUE_ANY_URL.into()));
                object.insert("typeUrl".into(), Value::String(type_url));
                if let Some(value) = value {
                    object.insert("value".into(), value);
                }
                return Ok(());
            }
            _ => {}
        }
        let Some(desc) = self.any_type(&type_url) else {
            return Ok(());
        };
        if desc.full_name() == ANY {
            if let Some(inner) = object.get_mut("value") {
                self.walk_json(&desc, inner, mode)?;
            }
            return Ok(());
        }
        let mut fields = Value::Object(core::mem::take(object));
        self.walk_json(&desc, &mut fields, mode)?;
        if let Value::Object(fields) = fields {
            *object = fields;
        }
        Ok(())
    }
}

/// A rewrite of one `Any`: given its type URL and value, `Some` replaces them.
type AnyRewrite<'a> = dyn FnMut(&JsonCodec, &str, &bytes::Bytes) -> Result<Option<(String, bytes::Bytes)>, JsonError>
    + 'a;

/// Which way [`JsonCodec::walk_json`] rewrites `Any` objects.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Serializing: placeholders become `{"@type": URL, "value": base64}`.
    RevealOpaque,
    /// Parsing: `Any`s of unknown types become placeholders.
    HideOpaque,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::discovery::{DiscoveryRequest, DiscoveryResponse, Resource};
    use crate::pb::envoy::config::core::v3::{ControlPlane, Node};
    use crate::pb::google::protobuf::{Any, Duration};
    use crate::pb::google::rpc::Status;
    use serde_json::json;

    #[test]
    fn canonical_forms() {
        let codec = JsonCodec::new();
        let resource = Resource {
            name: "a".into(),
            version: "1".into(),
            ttl: Some(Duration {
                seconds: 1,
                nanos: 500_000_000,
            }),
            resource: Some(Any::from_msg(&ControlPlane {
                identifier: "cp".into(),
            })),
            ..Default::default()
        };
        let value = codec.to_value(&resource).unwrap();
        assert_eq!(
            value,
            json!({
                "name": "a",
                "version": "1",
                "ttl": "1.500s",
                "resource": {
                    "@type": "type.googleapis.com/envoy.config.core.v3.ControlPlane",
                    "identifier": "cp"
                }
            })
        );
        assert_eq!(codec.from_value::<Resource>(value).unwrap(), resource);
    }

    #[test]
    fn unknown_any_types_use_base64_relaxation_and_round_trip() {
        let codec = JsonCodec::new();
        let response = DiscoveryResponse {
            version_info: "7".into(),
            type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
            resources: alloc::vec![Any {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".into(),
                value: bytes::Bytes::from_static(b"\x0a\x01c"),
            }],
            ..Default::default()
        };
        let value = codec.to_value(&response).unwrap();
        assert_eq!(
            value["resources"][0],
            json!({"@type": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "value": "CgFj"})
        );
        assert_eq!(
            codec.from_value::<DiscoveryResponse>(value).unwrap(),
            response
        );
    }

    #[test]
    fn nested_unknown_any_inside_known_any() {
        let codec = JsonCodec::new();
        let status = Status {
            code: 13,
            message: "bad".into(),
            details: alloc::vec![Any {
                type_url: "type.googleapis.com/acme.Detail".into(),
                value: bytes::Bytes::from_static(b"\x01")
            }],
        };
        let wrapped = Resource {
            resource: Some(Any::from_msg(&status)),
            ..Default::default()
        };
        let value = codec.to_value(&wrapped).unwrap();
        assert_eq!(
            value["resource"]["details"][0],
            json!({"@type": "type.googleapis.com/acme.Detail", "value": "AQ=="})
        );
        assert_eq!(codec.from_value::<Resource>(value).unwrap(), wrapped);
    }

    #[test]
    fn struct_keys_named_at_type_are_left_alone() {
        let codec = JsonCodec::new();
        let text = r#"{"node":{"id":"n","metadata":{"@type":"type.googleapis.com/acme.X","value":"AQ=="}}}"#;
        let request: DiscoveryRequest = codec.from_str(text).unwrap();
        let node = request.node.clone().unwrap();
        assert_eq!(node.metadata.unwrap().fields.len(), 2);
        let back = codec.to_value(&request).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
        let _ = Node::default();
    }

    #[test]
    fn unknown_fields_are_errors_unless_ignored() {
        let text = r#"{"versionInfo":"1","futureField":3}"#;
        assert!(matches!(
            JsonCodec::new().from_str::<DiscoveryRequest>(text),
            Err(JsonError::Json(_))
        ));
        let lenient = JsonCodec::new().ignore_unknown_fields(true);
        assert_eq!(
            lenient
                .from_str::<DiscoveryRequest>(text)
                .unwrap()
                .version_info,
            "1"
        );
        assert!(matches!(
            JsonCodec::new().from_str::<DiscoveryRequest>("{"),
            Err(JsonError::Json(_))
        ));
    }
}
