//! The client's fail-static cache on disk ([`CacheDir`]): what its watchers were served,
//! one file per authority and type, read back at the next start so that an application
//! whose management servers are all unreachable starts with its last configuration (the
//! rule of when it is served is the core's: `client::session::fail_static`).
//!
//! # Decisions
//!
//! - **The crate's file format**: each file is an encoded `DiscoveryResponse` whose
//!   resources are `Resource` wrappers (name, version, body), as `xds-sansio` reads a
//!   SotW response or a `.pb` file; its `type_url` says the type. The directory is
//!   `DIR/top/` for the top-level servers and `DIR/a-<hex of the authority>/` for a
//!   federation authority; a file is named after the type's message name.
//! - **Atomic**: a file is written beside its final name and renamed over it, so a crash
//!   leaves the old file or the new one, never half of one.
//! - **Bounded**: a set of resources larger than `max_bytes` (bodies and names) is not
//!   written (a warning says so); the files of the last set that fitted stay.
//! - **Never a crash on what it reads**: a file that does not decode, names another type,
//!   or sits in a directory that is not an authority's is skipped with a warning.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;
use xds_sansio::client::session::{RestoredResource, Session};
use xds_sansio::client::SharedStr;
use xds_sansio::pb::discovery::{DiscoveryResponse, Resource};
use xds_sansio::pb::google::protobuf::Any;
use xds_sansio::types::RESOURCE_WRAPPER_TYPE_URL;

/// The default bound of a cache: 64 MiB of bodies and names.
pub const DEFAULT_MAX_BYTES: u64 = 64 << 20;

/// A directory holding the fail-static cache. See the [module docs](self).
#[derive(Clone, Debug)]
pub struct CacheDir {
    dir: PathBuf,
    max_bytes: u64,
}

impl CacheDir {
    /// The cache in `dir` (created when first written), bounded by [`DEFAULT_MAX_BYTES`].
    pub fn new(dir: impl Into<PathBuf>) -> CacheDir {
        CacheDir {
            dir: dir.into(),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Bounds what is written to `max_bytes` of bodies and names.
    pub fn max_bytes(mut self, max_bytes: u64) -> CacheDir {
        self.max_bytes = max_bytes;
        self
    }

    /// Everything the cache holds; what cannot be read is skipped with a warning.
    pub fn load(&self) -> Vec<RestoredResource> {
        let mut out = Vec::new();
        let Ok(authorities) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        for entry in authorities.flatten() {
            let path = entry.path();
            let Some(authority) = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(authority_of_dir)
            else {
                tracing::warn!(path = %path.display(), "fail-static cache: not an authority's directory; skipped");
                continue;
            };
            let Ok(files) = std::fs::read_dir(&path) else {
                continue;
            };
            for file in files.flatten() {
                let file = file.path();
                if file.extension().and_then(|e| e.to_str()) != Some("pb") {
                    continue;
                }
                match read_file(&file, &authority) {
                    Ok(resources) => out.extend(resources),
                    Err(why) => {
                        tracing::warn!(path = %file.display(), %why, "fail-static cache: unreadable file; skipped")
                    }
                }
            }
        }
        out
    }

    /// Makes the cache hold exactly `resources` (per authority and type, each file
    /// written atomically), unless they exceed the bound.
    pub fn store(&self, resources: &[RestoredResource]) -> io::Result<()> {
        let size: u64 = resources
            .iter()
            .map(|r| (r.body.len() + r.name.len() + r.version.len()) as u64)
            .sum();
        if size > self.max_bytes {
            tracing::warn!(
                size,
                max = self.max_bytes,
                "fail-static cache: the resources in use exceed the bound; not written"
            );
            return Ok(());
        }
        let mut files: BTreeMap<(PathBuf, &str), Vec<&RestoredResource>> = BTreeMap::new();
        for r in resources {
            let dir = self.dir.join(dir_of_authority(&r.authority));
            files.entry((dir, r.type_url.as_str())).or_default().push(r);
        }
        let mut written: Vec<PathBuf> = Vec::new();
        for ((dir, type_url), group) in &files {
            std::fs::create_dir_all(dir)?;
            let path = dir.join(file_of_type(type_url));
            let tmp = path.with_extension("pb.tmp");
            std::fs::write(&tmp, encode(type_url, group))?;
            std::fs::rename(&tmp, &path)?;
            written.push(path);
        }
        // Types and authorities no longer in use leave the cache.
        if let Ok(dirs) = std::fs::read_dir(&self.dir) {
            for dir in dirs.flatten() {
                for file in std::fs::read_dir(dir.path())
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let file = file.path();
                    let ours = file.extension().and_then(|e| e.to_str()) == Some("pb");
                    if ours && !written.contains(&file) {
                        std::fs::remove_file(&file)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The client driver's side of the cache: what was last written, and when to write again.
pub(crate) struct Persist {
    pub(crate) cache: Option<CacheDir>,
    written: Vec<(String, SharedStr, SharedStr, SharedStr)>,
    /// The write under way: the next waits for it, so an older set never lands last.
    writing: Option<tokio::task::JoinHandle<()>>,
}

impl Persist {
    /// Offers `session` what `cache` holds (read off the runtime's threads).
    pub(crate) async fn restore(session: &mut Session, cache: Option<CacheDir>) -> Persist {
        if let Some(cache) = cache.clone() {
            let restored = tokio::task::spawn_blocking(move || cache.load()).await;
            session.restore(restored.unwrap_or_default());
        }
        Persist {
            cache,
            written: Vec::new(),
            writing: None,
        }
    }

    /// Writes what the watchers are served, when it changed since the last write.
    pub(crate) fn tick(&mut self, session: &Session) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        if self.writing.as_ref().is_some_and(|w| !w.is_finished()) {
            return;
        }
        let served = session.served();
        let now: Vec<_> = served
            .iter()
            .map(|r| {
                (
                    r.authority.clone(),
                    r.type_url.clone(),
                    r.name.clone(),
                    r.version.clone(),
                )
            })
            .collect();
        if now != self.written {
            self.written = now;
            self.writing = Some(tokio::task::spawn_blocking(move || {
                if let Err(e) = cache.store(&served) {
                    tracing::warn!(error = %e, "fail-static cache not written");
                }
            }));
        }
    }
}

fn encode(type_url: &str, resources: &[&RestoredResource]) -> Vec<u8> {
    DiscoveryResponse {
        type_url: type_url.into(),
        resources: resources
            .iter()
            .map(|r| Any {
                type_url: RESOURCE_WRAPPER_TYPE_URL.into(),
                value: Resource {
                    name: r.name.to_string(),
                    version: r.version.to_string(),
                    resource: Some(Any {
                        type_url: type_url.into(),
                        value: r.body.clone(),
                    }),
                    ..Resource::default()
                }
                .encode_to_vec()
                .into(),
            })
            .collect(),
        ..DiscoveryResponse::default()
    }
    .encode_to_vec()
}

fn read_file(path: &Path, authority: &str) -> Result<Vec<RestoredResource>, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let response = DiscoveryResponse::decode(Bytes::from(bytes)).map_err(|e| e.to_string())?;
    let type_url = response.type_url.clone();
    if path.file_name().and_then(|n| n.to_str()) != Some(file_of_type(&type_url).as_str()) {
        return Err(format!("holds {type_url:?}, not the type of its name"));
    }
    let mut out = Vec::with_capacity(response.resources.len());
    for any in response.resources {
        if any.type_url != RESOURCE_WRAPPER_TYPE_URL {
            return Err(format!(
                "a resource of type {:?}, not a Resource wrapper",
                any.type_url
            ));
        }
        let wrapper = Resource::decode(any.value).map_err(|e| e.to_string())?;
        let body = match wrapper.resource {
            Some(inner) if inner.type_url == type_url => inner.value,
            _ => return Err(format!("{:?} has no body of the file's type", wrapper.name)),
        };
        if wrapper.name.is_empty() {
            return Err("a resource without a name".into());
        }
        out.push(RestoredResource {
            authority: authority.to_string(),
            type_url: SharedStr::from(type_url.as_str()),
            name: SharedStr::from(wrapper.name),
            version: SharedStr::from(wrapper.version),
            body,
        });
    }
    Ok(out)
}

/// `top` for the top-level servers, `a-<hex>` for an authority.
fn dir_of_authority(authority: &str) -> String {
    if authority.is_empty() {
        return "top".into();
    }
    let hex: String = authority.bytes().map(|b| format!("{b:02x}")).collect();
    format!("a-{hex}")
}

fn authority_of_dir(dir: &str) -> Option<String> {
    if dir == "top" {
        return Some(String::new());
    }
    let hex = dir.strip_prefix("a-")?;
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The type's message name (`envoy.config.cluster.v3.Cluster.pb`), other characters `_`.
fn file_of_type(type_url: &str) -> String {
    let name = type_url.rsplit('/').next().unwrap_or(type_url);
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}.pb")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(authority: &str, type_url: &'static str, name: &str) -> RestoredResource {
        RestoredResource {
            authority: authority.into(),
            type_url: SharedStr::from_static(type_url),
            name: SharedStr::from(name),
            version: SharedStr::from("v1"),
            body: Bytes::from(format!("body of {name}")),
        }
    }

    #[test]
    fn what_is_stored_is_loaded_and_what_is_broken_is_skipped() {
        let dir = std::env::temp_dir().join(format!("xds-fail-static-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = CacheDir::new(&dir);
        let cds = xds_sansio::types::CLUSTER.type_url;
        let lds = xds_sansio::types::LISTENER.type_url;
        let mut all = vec![
            resource("", cds, "c1"),
            resource("", lds, "l1"),
            resource(
                "fed.example",
                cds,
                "xdstp://fed.example/envoy.config.cluster.v3.Cluster/c2",
            ),
        ];
        cache.store(&all).unwrap();
        let key = |r: &RestoredResource| (r.authority.clone(), r.type_url.clone(), r.name.clone());
        let mut loaded = cache.load();
        loaded.sort_by_key(key);
        all.sort_by_key(key);
        assert_eq!(loaded, all);
        // A type no longer in use leaves the cache.
        cache.store(&all[..1]).unwrap();
        assert_eq!(cache.load().len(), 1);
        // Garbage, a foreign directory and a file named for another type are skipped.
        std::fs::write(
            dir.join("top").join("envoy.config.listener.v3.Listener.pb"),
            b"\xff\xff",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("not-an-authority")).unwrap();
        let cds_file = dir.join("top").join(file_of_type(cds));
        std::fs::copy(
            &cds_file,
            dir.join("top")
                .join("envoy.config.route.v3.RouteConfiguration.pb"),
        )
        .unwrap();
        assert_eq!(cache.load(), all[..1].to_vec());
        // Over the bound: nothing is written, the last set stays.
        CacheDir::new(&dir).max_bytes(4).store(&all).unwrap();
        assert_eq!(cache.load(), all[..1].to_vec());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
