//! Typed publication: a prost message's type URL comes from its type and its name from its
//! body, for every catalog type as `envoy-types` generates it (issue 29, item 1).

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::TypedExtensionConfig;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{
    RouteConfiguration, ScopedRouteConfiguration, VirtualHost,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
use envoy_types::pb::envoy::service::runtime::v3::Runtime;
use xds_sansio::resource::NameError;
use xds_sansio::server::{ResourceEntry, ResourceSet, ResourceStore, StoreError, StoreOp};
use xds_sansio::types::{self, type_url_of};

#[test]
fn every_catalog_type_url_comes_from_the_message_type() {
    let urls = [
        type_url_of::<Listener>(),
        type_url_of::<RouteConfiguration>(),
        type_url_of::<ScopedRouteConfiguration>(),
        type_url_of::<VirtualHost>(),
        type_url_of::<Cluster>(),
        type_url_of::<ClusterLoadAssignment>(),
        type_url_of::<Secret>(),
        type_url_of::<Runtime>(),
        type_url_of::<TypedExtensionConfig>(),
    ];
    let catalog: Vec<&str> = types::CATALOG.iter().map(|t| t.type_url).collect();
    for url in &urls {
        assert!(
            catalog.contains(&url.as_str()),
            "{url} is not a catalog type URL"
        );
    }
    assert_eq!(urls.len(), catalog.len());
}

#[test]
fn the_name_is_read_from_the_body() {
    let endpoints = ClusterLoadAssignment {
        cluster_name: "c1".into(),
        ..Default::default()
    };
    let entry = ResourceEntry::of(&endpoints).unwrap();
    assert_eq!(entry.name, "c1");
    let StoreOp::Set { type_url, entry } = StoreOp::set(&endpoints).unwrap() else {
        panic!("a set");
    };
    assert_eq!(type_url, types::ENDPOINT.type_url);
    assert_eq!(entry.name, "c1");
    // A message without a name is refused, naming why.
    assert_eq!(
        ResourceEntry::of(&Cluster::default()),
        Err(StoreError::Name(NameError::Missing))
    );
}

#[test]
fn a_resource_set_is_a_snapshot() {
    let cluster = |name: &str| Cluster {
        name: name.into(),
        ..Default::default()
    };
    let mut set = ResourceSet::new()
        .with(&cluster("a"))
        .unwrap()
        .with(&cluster("b"))
        .unwrap();
    set.serve_type(types::LISTENER.type_url);
    let mut store = ResourceStore::new();
    store.replace_types(set.into()).unwrap();
    assert!(store.get(types::CLUSTER.type_url, "a").is_some());
    assert!(store.get(types::CLUSTER.type_url, "b").is_some());
    assert!(store.is_served(types::LISTENER.type_url));
}
