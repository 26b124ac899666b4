//! The resources a [`ControlPlane`](crate::ControlPlane) serves, read by the core's file
//! codec: a `DiscoveryResponse` whose `resources` are the resources (canonical JSON,
//! YAML or binary), from text, a file, or a directory of such files.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::codec::{FileCodec, Format};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::server::ResourceEntry;

use crate::error::{Error, ErrorKind};

/// Resources by type URL, each with the name read from its body.
#[derive(Clone, Debug, Default)]
pub struct Resources {
    pub(crate) types: BTreeMap<String, Vec<ResourceEntry>>,
}

impl Resources {
    /// Reads `{"resources": [Any, ...]}`, canonical JSON of a `DiscoveryResponse`: each
    /// resource either with its fields (its schema must be in `codec`) or as
    /// `{"@type": URL, "value": "<base64 of the message>"}`.
    pub fn from_json(text: &str, codec: &JsonCodec) -> Result<Resources, Error> {
        let mut resources = Resources::default();
        resources.read(
            Format::Json,
            Bytes::from(text.to_owned()),
            codec,
            "resources",
        )?;
        Ok(resources)
    }

    /// Reads a file in one of the core's formats (by its extension), or every such file of
    /// a directory (sorted by name; later files win for the same name).
    pub fn from_path(path: &Path, codec: &JsonCodec) -> Result<Resources, Error> {
        let mut resources = Resources::default();
        let mut files = Vec::new();
        if path.is_dir() {
            let read = std::fs::read_dir(path)
                .map_err(|e| Error::new(ErrorKind::Io, format!("{}: {e}", path.display())))?;
            files.extend(
                read.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && Format::from_path(&p.to_string_lossy()).is_some()),
            );
            files.sort();
        } else {
            files.push(path.to_path_buf());
        }
        for file in files {
            let shown = file.display().to_string();
            let format = Format::from_path(&shown).ok_or_else(|| {
                Error::new(
                    ErrorKind::Resources,
                    format!("{shown}: unknown file extension"),
                )
            })?;
            let bytes = std::fs::read(&file)
                .map_err(|e| Error::new(ErrorKind::Io, format!("{shown}: {e}")))?;
            resources.read(format, Bytes::from(bytes), codec, &shown)?;
        }
        Ok(resources)
    }

    /// Adds an encoded resource of `type_url`, its name read from the body.
    pub fn add(&mut self, type_url: &str, body: Bytes) -> Result<(), Error> {
        let entry = entry(body)?;
        let list = self.types.entry(type_url.to_string()).or_default();
        list.retain(|e| e.name != entry.name);
        list.push(entry);
        Ok(())
    }

    fn read(
        &mut self,
        format: Format,
        bytes: Bytes,
        codec: &JsonCodec,
        what: &str,
    ) -> Result<(), Error> {
        let file_codec = FileCodec::with_json_codec(codec.clone(), false);
        let response: DiscoveryResponse = file_codec
            .decode(format, bytes)
            .map_err(|e| Error::new(ErrorKind::Resources, format!("{what}: {e}")))?;
        for (index, any) in response.resources.into_iter().enumerate() {
            self.add(&any.type_url, any.value)
                .map_err(|e| Error::new(e.kind, format!("{what}: resource {index}: {e}")))?;
        }
        Ok(())
    }
}

/// A store entry for `body`, named as the body says.
pub(crate) fn entry(body: Bytes) -> Result<ResourceEntry, Error> {
    let name = xds_sansio::resource::name_of(&body)
        .map_err(|e| Error::new(ErrorKind::Resources, format!("no name in the body: {e}")))?
        .to_string();
    Ok(ResourceEntry::new(name, body))
}
