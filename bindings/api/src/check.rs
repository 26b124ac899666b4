//! `check`: the toolkit's checker over a recorded conversation, findings as plain values.

use serde::{Deserialize, Serialize};
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::Variant;
use xds_sansio_conformance::check::{self as checker, CheckSide, Entry, Violation};

use crate::error::{Error, ErrorKind};

/// One broken rule, as the checker reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's stable id (`nonce-unknown`, ...).
    pub rule: String,
    /// The side that broke it: `client` or `server`.
    pub side: String,
    /// The line of the offending message in the recording.
    pub line: usize,
    /// What exactly was wrong.
    pub detail: String,
    /// The protocol passage the rule comes from.
    pub passage: String,
}

/// How to read and judge a recording.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CheckOptions {
    /// `client` or `server`; both sides when absent.
    pub side: Option<String>,
    /// The variant of lines that do not say theirs: `sotw` (default) or `delta`.
    pub variant: Option<String>,
    /// Paths of `FileDescriptorSet`s with the resource schemas, for recordings that write
    /// resources as canonical JSON (Go's protojson, Java's JsonFormat).
    pub descriptors: Vec<String>,
}

/// The sides `side` names (both when `None`).
pub(crate) fn sides(side: Option<&str>) -> Result<Vec<CheckSide>, Error> {
    match side {
        None => Ok(vec![CheckSide::Client, CheckSide::Server]),
        Some("client") => Ok(vec![CheckSide::Client]),
        Some("server") => Ok(vec![CheckSide::Server]),
        Some(other) => Err(Error::new(
            ErrorKind::Usage,
            format!("side must be \"client\" or \"server\", not {other:?}"),
        )),
    }
}

pub(crate) fn variant(text: Option<&str>) -> Result<Variant, Error> {
    match text {
        None | Some("sotw") => Ok(Variant::Sotw),
        Some("delta") => Ok(Variant::Delta),
        Some(other) => Err(Error::new(
            ErrorKind::Usage,
            format!("variant must be \"sotw\" or \"delta\", not {other:?}"),
        )),
    }
}

/// A JSON codec that knows the schemas in `paths` (each an encoded `FileDescriptorSet`).
pub(crate) fn codec(paths: &[String]) -> Result<JsonCodec, Error> {
    let mut codec = JsonCodec::new();
    for path in paths {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::new(ErrorKind::Io, format!("descriptors {path}: {e}")))?;
        codec
            .add_file_descriptor_set(&bytes)
            .map_err(|e| Error::new(ErrorKind::Resources, format!("descriptors {path}: {e}")))?;
    }
    Ok(codec)
}

/// The checker's findings on `entries` for each of `sides`, in line order.
pub(crate) fn findings(entries: &[Entry], sides: &[CheckSide]) -> Vec<Finding> {
    let mut out: Vec<Finding> = sides
        .iter()
        .flat_map(|&side| {
            checker::check(entries, side)
                .into_iter()
                .map(move |v| finding(side, v))
        })
        .collect();
    out.sort_by_key(|f| f.line);
    out
}

fn finding(side: CheckSide, violation: Violation) -> Finding {
    Finding {
        rule: violation.rule.id().to_string(),
        side: match side {
            CheckSide::Client => "client",
            CheckSide::Server => "server",
        }
        .to_string(),
        line: violation.line,
        detail: violation.detail,
        passage: violation.rule.passage().to_string(),
    }
}

/// Checks a recorded conversation (JSON lines, `docs/record-format.md`) and returns every
/// finding of the sides `options` names. A line that does not parse is an error naming it.
pub fn check(records: &str, options: &CheckOptions) -> Result<Vec<Finding>, Error> {
    let sides = sides(options.side.as_deref())?;
    let variant = variant(options.variant.as_deref())?;
    let codec = codec(&options.descriptors)?;
    let entries = checker::parse_jsonl_with(records, variant, &codec)
        .map_err(|e| Error::at(ErrorKind::Record, e.line, e.message))?;
    Ok(findings(&entries, &sides))
}
