//! Checks of what is published before a client sees it: the type is one the protocol
//! knows, the body is named as its entry, and it can be read where it names other
//! resources. A publication that fails one would reach every client of the group and be
//! NACKed by each (or, for a body named after another resource, silently replace it).
//!
//! Decisions:
//! - **Off in the core, on in the adapter.** The core's store serves whatever bytes it is
//!   given (tests, fuzzers and conformance harnesses publish placeholders); the adapter's
//!   `XdsServer` turns the checks on for every group unless told otherwise, since its
//!   users publish real Envoy resources.
//! - **What "decodes as its type" means here**: field 1 is the name (every resource of the
//!   catalog keeps it there), and for the types that name other resources (LDS, RDS,
//!   SRDS, VHDS, CDS, ECDS) the references reader reads the body through the fields that
//!   carry names ([`crate::refs::references`]); the rest of a body is the client's to
//!   validate. It costs one pass over those fields, no full decode.
//! - **Unknown type URLs are refused**: a client asks for the catalog's types; a type no
//!   client can ask for is a typo more often than an extension. v2 type URLs are known.

use alloc::string::{String, ToString};

use super::publication::{ResourceEntry, StoreError};
use crate::types::TypeInfo;

/// Whether a store checks the bodies it is given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BodyChecks {
    /// Bodies are served as given (the core's default).
    #[default]
    Off,
    /// A body of an unknown type, named otherwise than its entry, or unreadable where it
    /// names other resources is refused with a [`StoreError`] that says which and why.
    Enforce,
}

/// Checks one entry about to be set.
pub(crate) fn check_body(type_url: &str, entry: &ResourceEntry) -> Result<(), StoreError> {
    if TypeInfo::of(type_url).known.is_none() {
        return Err(StoreError::UnknownType(type_url.to_string()));
    }
    let named = crate::resource::name_of(&entry.body).map_err(|e| StoreError::BadBody {
        name: entry.name.clone(),
        field: String::from("name (field 1)"),
        why: e.to_string(),
    })?;
    let named = crate::name::comparable(named).into_owned();
    if named != entry.name {
        return Err(StoreError::NameMismatch {
            name: entry.name.clone(),
            body_name: named,
        });
    }
    crate::refs::references(type_url, &entry.body).map_err(|e| StoreError::BadBody {
        name: entry.name.clone(),
        field: match &e {
            crate::refs::RefError::Malformed { field, .. } if !field.is_empty() => field.clone(),
            crate::refs::RefError::MalformedXdstpName { field, .. } => field.to_string(),
            _ => String::from("body"),
        },
        why: e.to_string(),
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::{ResourceStore, StoreOp};
    use crate::types::{CLUSTER, ENDPOINT};
    use alloc::vec;
    use bytes::Bytes;

    fn checked() -> ResourceStore {
        let mut store = ResourceStore::new();
        store.set_body_checks(BodyChecks::Enforce);
        store
    }

    /// `name` in field 1, then `rest`.
    fn body(name: &str, rest: &[u8]) -> Bytes {
        let mut out = vec![0x0a, u8::try_from(name.len()).unwrap()];
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(rest);
        Bytes::from(out)
    }

    #[test]
    fn a_well_formed_body_named_as_its_entry_is_published() {
        let mut store = checked();
        // Cluster { name: "c1", type: EDS (3) }
        store
            .set(CLUSTER.type_url, "c1", body("c1", &[0x10, 3]))
            .unwrap();
        store.set(ENDPOINT.type_url, "c1", body("c1", &[])).unwrap();
        assert!(store.get(CLUSTER.type_url, "c1").is_some());
    }

    #[test]
    fn each_bad_publication_is_refused_and_says_why() {
        let mut store = checked();
        assert_eq!(
            store.set("type.googleapis.com/acme.Thing", "t", body("t", &[])),
            Err(StoreError::UnknownType(
                "type.googleapis.com/acme.Thing".into()
            ))
        );
        assert_eq!(
            store.serve_type("type.googleapis.com/acme.Thing"),
            Err(StoreError::UnknownType(
                "type.googleapis.com/acme.Thing".into()
            ))
        );
        assert_eq!(
            store.set(CLUSTER.type_url, "c1", body("c2", &[])),
            Err(StoreError::NameMismatch {
                name: "c1".into(),
                body_name: "c2".into()
            })
        );
        // Cluster.type (field 2) as a string: not a Cluster.
        let err = store
            .set(CLUSTER.type_url, "c1", body("c1", &[0x12, 1, b'x']))
            .unwrap_err();
        assert!(
            matches!(&err, StoreError::BadBody { name, field, .. } if name == "c1" && field == "Cluster.type"),
            "{err:?}"
        );
        assert!(err.to_string().contains("Cluster.type"), "{err}");
        // No name at all.
        let err = store
            .set(ENDPOINT.type_url, "e", Bytes::from_static(b"\xff"))
            .unwrap_err();
        assert!(matches!(err, StoreError::BadBody { .. }), "{err:?}");
        // In one publication: nothing of it is applied.
        let ops = vec![
            StoreOp::Set {
                type_url: ENDPOINT.type_url.into(),
                entry: crate::server::ResourceEntry::new("e1", body("e1", &[])),
            },
            StoreOp::Set {
                type_url: ENDPOINT.type_url.into(),
                entry: crate::server::ResourceEntry::new("e2", body("oops", &[])),
            },
        ];
        assert!(store.apply(ops).is_err());
        assert!(store.get(ENDPOINT.type_url, "e1").is_none());
        assert!(!store.is_served(CLUSTER.type_url));
    }

    #[test]
    fn xdstp_names_compare_canonically() {
        let mut store = checked();
        let name = "xdstp://a/envoy.config.cluster.v3.Cluster/c?b=2&a=1";
        store.set(CLUSTER.type_url, name, body(name, &[])).unwrap();
    }

    #[test]
    fn checks_are_off_by_default() {
        let mut store = ResourceStore::new();
        store
            .set(
                "type.googleapis.com/acme.Thing",
                "t",
                Bytes::from_static(b"x"),
            )
            .unwrap();
    }
}
