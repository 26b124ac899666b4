//! The codec: the four file formats of a `DiscoveryResponse` (xDS protocol, "Filesystem
//! subscriptions": "Binary protobufs, JSON, YAML and proto text are supported formats"), with
//! errors that name the position of the first problem, and canonical proto3 JSON for every
//! message ([`json`], feature `json`), which REST-JSON and the record format also speak.
//!
//! One folder for every encoding, below its users: [`file`](mod@crate::file), `rest` and the
//! record format import it, and it imports none of them.

#[cfg(feature = "json")]
pub mod json;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use bytes::Bytes;
use core::fmt;
use prost::{Message, Name};

#[cfg(any(feature = "yaml", feature = "textproto"))]
use self::json::utf8;
#[cfg(feature = "json")]
use self::json::JsonCodec;

/// How the bytes of a file are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Format {
    /// Binary protobuf (`.pb`, `.bin`, `.binpb`).
    Binary,
    /// Canonical proto3 JSON (`.json`; feature `json`).
    Json,
    /// YAML read as the JSON value it denotes (`.yaml`, `.yml`; feature `yaml`).
    Yaml,
    /// Protobuf text format (`.textproto`, `.txtpb`, `.pb.txt`, `.pbtxt`, `.prototxt`,
    /// `.pb_text`; feature `textproto`).
    Text,
}

/// File name endings and the format each means, longest first so `.pb.txt` wins over `.txt`
/// and `.pb_text` over `.pb`.
const EXTENSIONS: [(&str, Format); 13] = [
    (".prototxt", Format::Text),
    (".textproto", Format::Text),
    (".pb_text", Format::Text),
    (".pb.txt", Format::Text),
    (".textpb", Format::Text),
    (".pbtxt", Format::Text),
    (".txtpb", Format::Text),
    (".binpb", Format::Binary),
    (".json", Format::Json),
    (".yaml", Format::Yaml),
    (".yml", Format::Yaml),
    (".bin", Format::Binary),
    (".pb", Format::Binary),
];

impl Format {
    /// The format a file name's extension announces (ASCII case-insensitive), or `None`
    /// when the extension is not one of the known ones: then the caller must choose.
    pub fn from_path(path: &str) -> Option<Format> {
        let lower = path.to_ascii_lowercase();
        EXTENSIONS
            .iter()
            .find(|(ext, _)| lower.ends_with(ext))
            .map(|(_, f)| *f)
    }

    /// A short lowercase name: `binary`, `json`, `yaml`, `text`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Binary => "binary",
            Format::Json => "json",
            Format::Yaml => "yaml",
            Format::Text => "text",
        }
    }

    /// Whether this build can read and write the format (its feature is on).
    pub fn is_enabled(self) -> bool {
        match self {
            Format::Binary => true,
            Format::Json => cfg!(feature = "json"),
            Format::Yaml => cfg!(feature = "yaml"),
            Format::Text => cfg!(feature = "textproto"),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where in the input a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// A byte offset from the start (binary protobuf, invalid UTF-8).
    Byte(usize),
    /// A 1-based line and column (the text formats).
    LineColumn {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Byte(offset) => write!(f, "byte offset {offset}"),
            Position::LineColumn { line, column } => write!(f, "line {line}, column {column}"),
        }
    }
}

/// Why bytes could not be read or a message could not be written in a format.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The input is malformed.
    Malformed {
        /// The format it was read as.
        format: Format,
        /// Where the first problem is, when the parser says (it does for syntax errors in
        /// every format and for schema errors in JSON and YAML unless an `Any` of a type
        /// without schema comes first).
        position: Option<Position>,
        /// What is wrong.
        message: String,
    },
    /// The feature that reads this format is off in this build.
    NotEnabled(Format),
    /// A message could not be written (e.g. a body that does not decode as its declared
    /// type when writing the JSON of an `Any` whose schema is known).
    Encode {
        /// The format it was written as.
        format: Format,
        /// What went wrong.
        message: String,
    },
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FormatError::Malformed {
                format,
                position: Some(position),
                message,
            } => write!(f, "malformed {format} at {position}: {message}"),
            FormatError::Malformed {
                format,
                position: None,
                message,
            } => write!(f, "malformed {format}: {message}"),
            FormatError::NotEnabled(format) => {
                write!(f, "the {format} format is not enabled in this build")
            }
            FormatError::Encode { format, message } => {
                write!(f, "cannot write {format}: {message}")
            }
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for FormatError {}

fn malformed(
    format: Format,
    position: Option<Position>,
    message: impl Into<String>,
) -> FormatError {
    FormatError::malformed(format, position, message)
}

impl FormatError {
    /// [`FormatError::Malformed`], for every reader of the crate (the JSON one too).
    pub(crate) fn malformed(
        format: Format,
        position: Option<Position>,
        message: impl Into<String>,
    ) -> FormatError {
        FormatError::Malformed {
            format,
            position,
            message: message.into(),
        }
    }
}

/// Reads and writes messages in the four formats. The text formats go through the
#[cfg_attr(
    feature = "json",
    doc = "canonical JSON layer ([`JsonCodec`]), so resource schemas added there make `Any`s"
)]
#[cfg_attr(
    not(feature = "json"),
    doc = "canonical JSON layer (`JsonCodec`), so resource schemas added there make `Any`s"
)]
/// readable by name in JSON, YAML and text alike.
#[derive(Clone, Debug, Default)]
pub struct FileCodec {
    #[cfg(feature = "json")]
    codec: JsonCodec,
}

impl FileCodec {
    /// A codec that knows the discovery messages (and, with `json`, the well-known types).
    pub fn new() -> FileCodec {
        FileCodec::default()
    }

    /// A codec over `codec` (with the application's resource schemas). With
    /// `ignore_unknown_fields`, JSON and YAML fields the schema lacks are skipped instead of
    /// rejected; `codec` should be configured the same way.
    #[cfg(feature = "json")]
    pub fn with_json_codec(codec: JsonCodec, ignore_unknown_fields: bool) -> FileCodec {
        FileCodec {
            codec: codec.ignore_unknown_fields(ignore_unknown_fields),
        }
    }

    /// Decodes a message from `bytes` in `format`. Binary bodies stay zero-copy slices of
    /// `bytes`; the text formats necessarily build new buffers.
    pub fn decode<M: Message + Name + Default>(
        &self,
        format: Format,
        bytes: Bytes,
    ) -> Result<M, FormatError> {
        match format {
            Format::Binary => decode_binary(bytes),
            #[cfg(feature = "json")]
            Format::Json => self.decode_json(&bytes),
            #[cfg(feature = "yaml")]
            Format::Yaml => self.decode_yaml(&bytes),
            #[cfg(feature = "textproto")]
            Format::Text => self.decode_text(&bytes),
            #[allow(unreachable_patterns)]
            other => Err(FormatError::NotEnabled(other)),
        }
    }

    /// Writes `message` in `format`: JSON pretty-printed, text format pretty with `Any`s
    /// expanded when their schema is known.
    pub fn encode<M: Message + Name>(
        &self,
        format: Format,
        message: &M,
    ) -> Result<Vec<u8>, FormatError> {
        match format {
            Format::Binary => Ok(message.encode_to_vec()),
            #[cfg(feature = "json")]
            Format::Json => {
                let value = self.json_value(format, message)?;
                serde_json::to_vec_pretty(&value).map_err(|e| FormatError::Encode {
                    format,
                    message: e.to_string(),
                })
            }
            #[cfg(feature = "yaml")]
            Format::Yaml => {
                let value = self.json_value(format, message)?;
                serde_norway::to_string(&value)
                    .map(String::into_bytes)
                    .map_err(|e| FormatError::Encode {
                        format,
                        message: e.to_string(),
                    })
            }
            #[cfg(feature = "textproto")]
            Format::Text => {
                let desc = self.descriptor::<M>(format)?;
                let dynamic =
                    prost_reflect::DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
                        .map_err(|e| FormatError::Encode {
                            format,
                            message: e.to_string(),
                        })?;
                let options = prost_reflect::text_format::FormatOptions::new()
                    .pretty(true)
                    .expand_any(true);
                let mut text = dynamic.to_text_format_with_options(&options);
                text.push('\n');
                Ok(text.into_bytes())
            }
            #[allow(unreachable_patterns)]
            other => Err(FormatError::NotEnabled(other)),
        }
    }

    #[cfg(feature = "json")]
    fn json_value<M: Message + Name>(
        &self,
        format: Format,
        message: &M,
    ) -> Result<serde_json::Value, FormatError> {
        self.codec
            .to_value(message)
            .map_err(|e| FormatError::Encode {
                format,
                message: e.to_string(),
            })
    }

    #[cfg(feature = "textproto")]
    fn descriptor<M: Name>(
        &self,
        format: Format,
    ) -> Result<prost_reflect::MessageDescriptor, FormatError> {
        let name = M::full_name();
        self.codec
            .pool()
            .get_message_by_name(&name)
            .ok_or_else(|| malformed(format, None, format!("message type {name} is not known")))
    }

    #[cfg(feature = "json")]
    fn decode_json<M: Message + Name + Default>(&self, bytes: &[u8]) -> Result<M, FormatError> {
        self.codec.parse_text(bytes)
    }

    /// YAML is read into the JSON value it denotes, then goes the way of JSON; a schema
    /// error is placed by parsing the YAML again straight into the schema.
    #[cfg(feature = "yaml")]
    fn decode_yaml<M: Message + Name + Default>(&self, bytes: &[u8]) -> Result<M, FormatError> {
        let text = utf8(Format::Yaml, bytes)?;
        let value: serde_json::Value = serde_norway::from_str(text).map_err(|e| {
            let (message, position) = split_yaml_error(&e);
            malformed(Format::Yaml, position, message)
        })?;
        self.codec
            .read_located_value(Format::Yaml, value, |desc, options| {
                let de = serde_norway::Deserializer::from_str(text);
                let err =
                    prost_reflect::DynamicMessage::deserialize_with_options(desc, de, options)
                        .err()?;
                let (message, position) = split_yaml_error(&err);
                Some((message, position?))
            })
    }

    #[cfg(feature = "textproto")]
    fn decode_text<M: Message + Name + Default>(&self, bytes: &[u8]) -> Result<M, FormatError> {
        use miette::Diagnostic;
        let text = utf8(Format::Text, bytes)?;
        let desc = self.descriptor::<M>(Format::Text)?;
        let dynamic =
            prost_reflect::DynamicMessage::parse_text_format(desc, text).map_err(|e| {
                let offset = e
                    .labels()
                    .and_then(|mut labels| labels.next())
                    .map_or(text.len(), |label| label.offset());
                malformed(Format::Text, Some(line_column(text, offset)), e.to_string())
            })?;
        M::decode(dynamic.encode_to_vec().as_slice())
            .map_err(|e| malformed(Format::Text, None, e.to_string()))
    }
}

/// 1-based line and column (in characters) of a byte offset of `text`.
#[cfg(feature = "textproto")]
fn line_column(text: &str, offset: usize) -> Position {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count().saturating_add(1);
    let line_start = before.rfind('\n').map_or(0, |i| i.saturating_add(1));
    let column = before
        .get(line_start..)
        .map_or(0, |s| s.chars().count())
        .saturating_add(1);
    Position::LineColumn { line, column }
}

/// serde_norway's message without its position suffix, and that position.
#[cfg(feature = "yaml")]
fn split_yaml_error(e: &serde_norway::Error) -> (String, Option<Position>) {
    let full = e.to_string();
    let Some(location) = e.location() else {
        return (full, None);
    };
    let suffix = format!(" at line {} column {}", location.line(), location.column());
    let message = full
        .find(suffix.as_str())
        .and_then(|i| full.get(..i))
        .unwrap_or(&full);
    (
        String::from(message),
        Some(Position::LineColumn {
            line: location.line(),
            column: location.column(),
        }),
    )
}

/// Decodes binary protobuf; on failure, finds the field record where decoding breaks.
fn decode_binary<M: Message + Default>(bytes: Bytes) -> Result<M, FormatError> {
    match M::decode(bytes.clone()) {
        Ok(m) => Ok(m),
        Err(e) => Err(locate_binary::<M>(&bytes, &e.to_string())),
    }
}

/// Walks the top-level field records and merges them one by one (protobuf decoding is a
/// merge of records, so this is the same decoding): the first record that is cut short,
/// has a bad key or wire type, or does not merge is where the input is malformed.
fn locate_binary<M: Message + Default>(bytes: &Bytes, whole: &str) -> FormatError {
    let at = |offset: usize, message: String| {
        malformed(Format::Binary, Some(Position::Byte(offset)), message)
    };
    let mut scratch = M::default();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let start = pos;
        let Some((key, n)) = read_varint(bytes.get(pos..).unwrap_or_default()) else {
            return at(start, String::from("truncated or overlong field key"));
        };
        pos = pos.saturating_add(n);
        let field = key >> 3;
        if field == 0 || field > u64::from(u32::MAX >> 3) {
            return at(start, format!("invalid field number {field}"));
        }
        let end = match key & 7 {
            0 => match read_varint(bytes.get(pos..).unwrap_or_default()) {
                Some((_, n)) => pos.saturating_add(n),
                None => return at(pos, format!("field {field}: truncated varint")),
            },
            1 => pos.saturating_add(8),
            5 => pos.saturating_add(4),
            2 => match read_varint(bytes.get(pos..).unwrap_or_default()) {
                Some((len, n)) => {
                    let body = pos.saturating_add(n);
                    let len = usize::try_from(len).unwrap_or(usize::MAX);
                    if len > bytes.len().saturating_sub(body) {
                        return at(
                            start,
                            format!(
                                "field {field}: length {len} runs past the end ({} bytes left)",
                                bytes.len().saturating_sub(body)
                            ),
                        );
                    }
                    body.saturating_add(len)
                }
                None => return at(pos, format!("field {field}: truncated length")),
            },
            3 | 4 => return at(start, format!("field {field}: groups are not supported")),
            wire => return at(start, format!("field {field}: invalid wire type {wire}")),
        };
        if end > bytes.len() {
            return at(start, format!("field {field}: truncated fixed-width value"));
        }
        if let Err(e) = scratch.merge(bytes.slice(start..end)) {
            return at(start, format!("field {field}: {e}"));
        }
        pos = end;
    }
    malformed(Format::Binary, None, whole)
}

/// A base-128 varint at the start of `bytes` and its length.
fn read_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, b) in bytes.iter().take(10).enumerate() {
        value |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((value, i.saturating_add(1)));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extensions() {
        assert_eq!(Format::from_path("a/b/lds.PB"), Some(Format::Binary));
        assert_eq!(Format::from_path("x.pb.txt"), Some(Format::Text));
        assert_eq!(Format::from_path("x.pb_text"), Some(Format::Text));
        assert_eq!(Format::from_path("x.yml"), Some(Format::Yaml));
        assert_eq!(Format::from_path("x.txt"), None);
    }

    #[test]
    fn varints() {
        assert_eq!(read_varint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(read_varint(&[0x96]), None);
        assert_eq!(read_varint(&[0xff; 11]), None);
    }
}
