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
//!   Reading accepts that form also for a type the codec knows (unless the type has a
//!   field named `value` of its own, or is a well-known type, whose canonical form is
//!   `{"@type", "value"}` already), so text written before the schemas were added still
//!   reads as what it says;
//! - an `Any` of an unknown type written canonically (its message's fields beside
//!   `"@type"`) cannot be read without that message's schema, and is an error
//!   ([`JsonError::UnknownAnyType`]), never an `Any` with an empty value: a resource is
//!   never read as empty. `{"@type": URL}` alone is the canonical form of an empty message
//!   and reads as one.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use prost::{Message, Name};
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, Kind, MessageDescriptor, ReflectMessage,
    SerializeOptions, Value as ReflectValue,
};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet};
use serde_json::{Map, Value};

use crate::codec::{Format, FormatError, Position};

/// The message that stands in for an `Any` of an unknown type while prost-reflect does its
/// work; it never reaches the caller.
const OPAQUE_ANY: &str = "xds_sansio.json.OpaqueAny";
const OPAQUE_ANY_URL: &str = "type.googleapis.com/xds_sansio.json.OpaqueAny";
const ANY: &str = "google.protobuf.Any";

/// Why a JSON conversion failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON, or does not match the message's schema.
    Json(String),
    /// The message type is not in the codec's descriptor pool.
    UnknownMessage(String),
    /// A file descriptor set could not be added to the pool.
    Descriptor(String),
    /// The binary encoding inside could not be decoded.
    Decode(String),
    /// An `Any` of this type URL is written in canonical form (the fields of its message),
    /// but the codec has no schema for that message: add its descriptors
    /// ([`JsonCodec::add_file_descriptor_set`]) or write it as
    /// `{"@type": URL, "value": base64}`.
    UnknownAnyType(String),
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JsonError::Json(e) => write!(f, "invalid JSON: {e}"),
            JsonError::UnknownMessage(m) => write!(f, "message type {m} is not known"),
            JsonError::Descriptor(e) => write!(f, "invalid descriptors: {e}"),
            JsonError::Decode(e) => write!(f, "undecodable message: {e}"),
            JsonError::UnknownAnyType(url) => write!(
                f,
                "an Any of type {url} holds the fields of a message whose schema is not known \
                 (add its descriptors, or write it as {{\"@type\", \"value\": base64}})"
            ),
        }
    }
}

impl std::error::Error for JsonError {}

/// Converts messages to and from canonical proto3 JSON.
#[derive(Clone, Debug)]
pub struct JsonCodec {
    pool: DescriptorPool,
    ignore_unknown_fields: bool,
    /// The files of the application's descriptor sets, in the order they were added.
    added: Vec<FileDescriptorProto>,
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

fn descriptor_error(e: &impl fmt::Display) -> JsonError {
    JsonError::Descriptor(e.to_string())
}

/// The crate's files (and the `OpaqueAny` stand-in) with the application's `added` files;
/// an added file replaces the crate's file of the same name if it defines every field the
/// crate's copy has.
fn pool_with(added: &[FileDescriptorProto]) -> Result<DescriptorPool, JsonError> {
    let built_in = FileDescriptorSet::decode(crate::pb::FILE_DESCRIPTOR_SET)
        .map_err(|e| descriptor_error(&e))?;
    let (replaced, kept): (Vec<_>, Vec<_>) = built_in
        .file
        .into_iter()
        .partition(|file| added.iter().any(|a| a.name == file.name));
    let mut pool = DescriptorPool::new();
    pool.add_file_descriptor_protos(
        kept.into_iter()
            .chain(added.iter().cloned())
            .chain(core::iter::once(opaque_any_file())),
    )
    .map_err(|e| descriptor_error(&e))?;
    for file in &replaced {
        let package = file.package.as_deref().unwrap_or("");
        covers(
            &pool,
            file.name.as_deref().unwrap_or(""),
            package,
            &file.message_type,
        )?;
    }
    Ok(pool)
}

/// Whether `pool` defines every field of `messages` (declared in `package`, nested ones
/// included), with the same number and name: the crate's messages read and write through
/// it.
fn covers(
    pool: &DescriptorPool,
    file: &str,
    scope: &str,
    messages: &[DescriptorProto],
) -> Result<(), JsonError> {
    for message in messages {
        let name = message.name.as_deref().unwrap_or("");
        let full = if scope.is_empty() {
            String::from(name)
        } else {
            alloc::format!("{scope}.{name}")
        };
        let theirs = pool.get_message_by_name(&full).ok_or_else(|| {
            JsonError::Descriptor(alloc::format!("{file} in the set lacks message {full}"))
        })?;
        for field in &message.field {
            let number = field.number.unwrap_or(0);
            let same = theirs
                .get_field(u32::try_from(number).unwrap_or(0))
                .is_some_and(|f| Some(f.name()) == field.name.as_deref());
            if !same {
                return Err(JsonError::Descriptor(alloc::format!(
                    "{file} in the set lacks field {} = {number} of {full}",
                    field.name.as_deref().unwrap_or("")
                )));
            }
        }
        covers(pool, file, &full, &message.nested_type)?;
    }
    Ok(())
}

impl JsonCodec {
    /// A codec that knows the messages of this crate and the well-known types.
    pub fn new() -> JsonCodec {
        // The built-in files are tested; failure would be a build defect.
        let pool = pool_with(&[]);
        debug_assert!(pool.is_ok(), "built-in descriptors: {pool:?}");
        JsonCodec {
            pool: pool.unwrap_or_default(),
            ignore_unknown_fields: false,
            added: Vec::new(),
        }
    }

    /// Adds the schemas of resource types (an encoded `FileDescriptorSet`, with its
    /// dependencies as `protoc --include_imports` writes it), so `Any`s of those types are
    /// written and read canonically. On error the codec is unchanged.
    ///
    /// The crate carries some Envoy files trimmed to what the discovery messages need
    /// (`envoy/config/core/v3/base.proto`, ...). A set that holds the full file of the same
    /// name replaces the trimmed one, so the set's own types that depend on the rest of it
    /// resolve; the set's file must still define every field the crate's copy has
    /// ([`JsonError::Descriptor`] names the one missing). A file already added by an
    /// earlier set is kept.
    pub fn add_file_descriptor_set(&mut self, bytes: &[u8]) -> Result<(), JsonError> {
        let set = FileDescriptorSet::decode(bytes).map_err(|e| descriptor_error(&e))?;
        let mut added = self.added.clone();
        for file in set.file {
            if !added.iter().any(|known| known.name == file.name) {
                added.push(file);
            }
        }
        let pool = pool_with(&added)?;
        self.pool = pool;
        self.added = added;
        Ok(())
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

    /// Parses canonical JSON text into `M`, naming where the first problem is
    /// ([`FormatError::Malformed`] with [`Format::Json`]): the line and column of a syntax
    /// error, of a schema error when the schema's own parser stops at it too, and the byte
    /// offset of invalid UTF-8. JSON files and REST-JSON bodies are read this way.
    pub fn parse_text<M: Message + Name + Default>(&self, bytes: &[u8]) -> Result<M, FormatError> {
        let text = utf8(Format::Json, bytes)?;
        let value: Value = serde_json::from_str(text).map_err(|e| {
            let (message, position) = split_json_error(&e);
            FormatError::malformed(Format::Json, position, message)
        })?;
        self.read_located_value(Format::Json, value, |desc, options| {
            let mut de = serde_json::Deserializer::from_str(text);
            let err = DynamicMessage::deserialize_with_options(desc, &mut de, options).err()?;
            let (message, position) = split_json_error(&err);
            Some((message, position?))
        })
    }

    /// `value`, read from text in `format`, into `M`. A schema error has no position in a
    /// value, so `locate` parses the text again straight into the schema (given its
    /// descriptor and this codec's options), whose parser knows where it stopped; its
    /// position is used only when it stopped for the same reason (an `Any` of an unknown
    /// type is handled by the codec but not by that parser).
    pub(crate) fn read_located_value<M: Message + Name + Default>(
        &self,
        format: Format,
        value: Value,
        locate: impl FnOnce(MessageDescriptor, &DeserializeOptions) -> Option<(String, Position)>,
    ) -> Result<M, FormatError> {
        match self.from_value::<M>(value) {
            Ok(m) => Ok(m),
            Err(JsonError::Json(message)) => {
                let position = self
                    .descriptor(&M::full_name())
                    .ok()
                    .and_then(|desc| locate(desc, &self.deserialize_options()))
                    .filter(|(located, _)| located.contains(message.as_str()))
                    .map(|(_, p)| p);
                Err(FormatError::malformed(format, position, message))
            }
            Err(other) => Err(FormatError::malformed(format, None, other.to_string())),
        }
    }

    fn deserialize_options(&self) -> DeserializeOptions {
        DeserializeOptions::new().deny_unknown_fields(!self.ignore_unknown_fields)
    }

    /// Parses canonical JSON of a message of type `full_name` into its binary form.
    pub fn value_to_encoded(
        &self,
        full_name: &str,
        mut value: Value,
    ) -> Result<Vec<u8>, JsonError> {
        let desc = self.descriptor(full_name)?;
        self.walk_json(&desc, &mut value, Mode::HideOpaque)?;
        let mut dynamic =
            DynamicMessage::deserialize_with_options(desc, value, &self.deserialize_options())
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
            Mode::HideOpaque if self.opaque_on_read(&type_url, object)? => {
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

impl JsonCodec {
    /// Whether the JSON object of an `Any` of `type_url` is read as
    /// `{"@type", "value": base64}`: always for an unknown type, which then may hold nothing
    /// else (the fields of a message we have no schema for would be lost, and the resource
    /// read as empty); for a known type only in exactly that form, when the type has no
    /// `value` field and no special JSON form of its own.
    fn opaque_on_read(
        &self,
        type_url: &str,
        object: &Map<String, Value>,
    ) -> Result<bool, JsonError> {
        let relaxed = object.len() <= 2
            && object.keys().all(|k| k == "@type" || k == "value")
            && object.get("value").is_none_or(Value::is_string);
        match self.any_type(type_url) {
            None if relaxed => Ok(true),
            None => Err(JsonError::UnknownAnyType(type_url.into())),
            Some(desc) => Ok(object.contains_key("value")
                && relaxed
                && desc.package_name() != "google.protobuf"
                && desc.get_field_by_json_name("value").is_none()
                && desc.get_field_by_name("value").is_none()),
        }
    }
}

/// The text of a text format, or the byte offset of the first invalid UTF-8 sequence.
pub(crate) fn utf8(format: Format, bytes: &[u8]) -> Result<&str, FormatError> {
    core::str::from_utf8(bytes).map_err(|e| {
        FormatError::malformed(
            format,
            Some(Position::Byte(e.valid_up_to())),
            "invalid UTF-8",
        )
    })
}

/// serde_json's message without its " at line L column C" suffix, and that position.
fn split_json_error(e: &serde_json::Error) -> (String, Option<Position>) {
    let full = e.to_string();
    if e.line() == 0 {
        return (full, None);
    }
    let suffix = alloc::format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(suffix.as_str()).unwrap_or(&full);
    (
        String::from(message),
        Some(Position::LineColumn {
            line: e.line(),
            column: e.column().max(1),
        }),
    )
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
    fn an_unknown_any_in_canonical_form_is_an_error_not_an_empty_resource() {
        let codec = JsonCodec::new();
        let cluster = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
        let canonical = json!({"typeUrl": cluster, "resources": [
            {"@type": cluster, "name": "a", "connectTimeout": "1s"}
        ]});
        assert_eq!(
            codec.from_value::<DiscoveryResponse>(canonical),
            Err(JsonError::UnknownAnyType(cluster.into()))
        );
        // Inside a Resource wrapper too, and whatever the unknown-field setting.
        let wrapped = json!({"resources": [{
            "@type": "type.googleapis.com/envoy.service.discovery.v3.Resource",
            "name": "a",
            "resource": {"@type": cluster, "name": "a"}
        }]});
        let lenient = JsonCodec::new().ignore_unknown_fields(true);
        assert_eq!(
            lenient.from_value::<DiscoveryResponse>(wrapped),
            Err(JsonError::UnknownAnyType(cluster.into()))
        );
        // A value that is not base64 text is not the relaxed form either.
        let odd = json!({"resources": [{"@type": cluster, "value": {"name": "a"}}]});
        assert_eq!(
            codec.from_value::<DiscoveryResponse>(odd),
            Err(JsonError::UnknownAnyType(cluster.into()))
        );
        // `{"@type"}` alone is an empty message, canonically.
        let empty = json!({"resources": [{"@type": cluster}]});
        let response = codec.from_value::<DiscoveryResponse>(empty).unwrap();
        assert_eq!(response.resources[0].type_url, cluster);
        assert!(response.resources[0].value.is_empty());
    }

    #[test]
    fn the_base64_form_reads_also_for_known_types() {
        // ControlPlane is known and has no `value` field: the relaxed form is its bytes.
        let codec = JsonCodec::new();
        let url = "type.googleapis.com/envoy.config.core.v3.ControlPlane";
        let plane = ControlPlane {
            identifier: "cp".into(),
        };
        let value = json!({"resource": {"@type": url, "value": "CgJjcA=="}});
        let read = codec.from_value::<Resource>(value).unwrap();
        let any = read.resource.unwrap();
        assert_eq!(any.value, plane.encode_to_vec());
        // A well-known type keeps its own `value` form.
        let duration = json!({"resource": {
            "@type": "type.googleapis.com/google.protobuf.Duration", "value": "1.5s"
        }});
        let read = codec.from_value::<Resource>(duration).unwrap();
        let inner = Duration::decode(read.resource.unwrap().value).unwrap();
        assert_eq!((inner.seconds, inner.nanos), (1, 500_000_000));
    }

    #[test]
    fn a_set_may_hold_the_full_version_of_a_file_the_crate_trims() {
        let built_in = FileDescriptorSet::decode(crate::pb::FILE_DESCRIPTOR_SET).unwrap();
        let base = built_in
            .file
            .iter()
            .find(|f| f.name.as_deref() == Some("envoy/config/core/v3/base.proto"))
            .unwrap()
            .clone();
        // The "full" base.proto: the crate's plus a message the application's file needs.
        let mut full = base.clone();
        full.message_type.push(DescriptorProto {
            name: Some("HeaderValue".into()),
            ..Default::default()
        });
        let user = FileDescriptorProto {
            name: Some("acme/uses.proto".into()),
            package: Some("acme".into()),
            syntax: Some("proto3".into()),
            dependency: alloc::vec!["envoy/config/core/v3/base.proto".into()],
            message_type: alloc::vec![DescriptorProto {
                name: Some("Uses".into()),
                field: alloc::vec![FieldDescriptorProto {
                    name: Some("header".into()),
                    json_name: Some("header".into()),
                    number: Some(1),
                    label: Some(Label::Optional as i32),
                    r#type: Some(Type::Message as i32),
                    type_name: Some(".envoy.config.core.v3.HeaderValue".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut codec = JsonCodec::new();
        let set = FileDescriptorSet {
            file: alloc::vec![full, user],
        };
        codec.add_file_descriptor_set(&set.encode_to_vec()).unwrap();
        assert!(codec.pool().get_message_by_name("acme.Uses").is_some());
        let request = DiscoveryRequest {
            node: Some(Node {
                id: "n".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let back: DiscoveryRequest = codec.from_value(codec.to_value(&request).unwrap()).unwrap();
        assert_eq!(back, request);

        // A file that lacks a field of the crate's copy is refused, and nothing changes.
        let mut fresh = JsonCodec::new();
        let mut short = base;
        let node = short
            .message_type
            .iter_mut()
            .find(|m| m.name.as_deref() == Some("Node"))
            .unwrap();
        node.field.retain(|f| f.name.as_deref() != Some("cluster"));
        let set = FileDescriptorSet {
            file: alloc::vec![short],
        };
        let err = fresh
            .add_file_descriptor_set(&set.encode_to_vec())
            .unwrap_err();
        assert!(
            matches!(&err, JsonError::Descriptor(m) if m.contains("cluster")),
            "{err}"
        );
        assert!(fresh
            .pool()
            .get_message_by_name("envoy.config.core.v3.Node")
            .and_then(|n| n.get_field_by_name("cluster"))
            .is_some());
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
