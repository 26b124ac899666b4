//! Many streams on one store: a store update touches only the streams it concerns; and the
//! stream never panics or loses state whatever the client sends.

mod server_common;

use server_common::*;
use xds_sansio::server::{
    ResourceStore, ServerConfig, ServerEvent, ServerStream, StreamId, StreamSet, UnknownStream,
};
use xds_sansio::{Request, Response, Transport, Variant};

fn cfg(v: Variant) -> ServerConfig {
    ServerConfig::new(v, Transport::Aggregated)
}

fn drain_set(set: &mut StreamSet, store: &ResourceStore) -> Vec<(StreamId, Response)> {
    let mut out = Vec::new();
    while let Some(id) = set.poll_ready() {
        while let Some(r) = set.poll_response(id, T0, store) {
            out.push((id, r));
        }
    }
    out
}

#[test]
fn a_store_update_touches_only_affected_streams() {
    let mut store = ResourceStore::new();
    store.set(EDS, "a", body("a", "1")).unwrap();
    store.set(EDS, "b", body("b", "1")).unwrap();
    store.serve_type(CDS).unwrap();
    let mut set = StreamSet::new();
    let sa = set.insert(cfg(Variant::Sotw));
    let sb = set.insert(cfg(Variant::Delta));
    let sw = set.insert(cfg(Variant::Delta));
    let sc = set.insert(cfg(Variant::Sotw));
    set.handle_request(sa, T0, req(sotw(EDS, "", &["a"], "")))
        .unwrap();
    set.handle_request(sb, T0, dreq(delta(EDS, &["b"], &[], "")))
        .unwrap();
    set.handle_request(sw, T0, dreq(delta(EDS, &["*"], &[], "")))
        .unwrap();
    set.handle_request(sc, T0, req(sotw(CDS, "", &[], "")))
        .unwrap();
    let first = drain_set(&mut set, &store);
    assert_eq!(first.len(), 4);
    assert_eq!(set.sync(&store), 0);

    store.set(EDS, "a", body("a", "2")).unwrap();
    assert_eq!(
        set.sync(&store),
        2,
        "the subscriber of a and the wildcard stream"
    );
    let out = drain_set(&mut set, &store);
    let ids: Vec<_> = out.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [sa, sw]);

    store.set(EDS, "b", body("b", "2")).unwrap();
    store.set(EDS, "unwatched", body("unwatched", "1")).unwrap();
    set.sync(&store);
    let ids: Vec<_> = drain_set(&mut set, &store)
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(
        ids,
        [sb, sw],
        "b's subscriber, and wildcard (b and unwatched in one)"
    );

    // Unsubscribing drops the stream from the index.
    set.handle_request(sa, T0, req(sotw(EDS, "", &[], "")))
        .unwrap();
    drain_set(&mut set, &store);
    store.set(EDS, "a", body("a", "3")).unwrap();
    set.sync(&store);
    let ids: Vec<_> = drain_set(&mut set, &store)
        .iter()
        .map(|(id, _)| *id)
        .collect();
    assert_eq!(ids, [sw]);
}

#[test]
fn closed_and_removed_streams_leave_the_index() {
    let mut store = ResourceStore::new();
    let mut set = StreamSet::new();
    let s1 = set.insert(cfg(Variant::Sotw));
    let s2 = set.insert(cfg(Variant::Sotw));
    set.handle_request(s1, T0, req(sotw(EDS, "", &["a"], "")))
        .unwrap();
    set.handle_request(s2, T0, req(sotw(EDS, "", &["a"], "")))
        .unwrap();
    drain_set(&mut set, &store);
    // s1 breaks the protocol: closed and unindexed.
    set.handle_request(s1, T0, req(sotw("", "", &["a"], "")))
        .unwrap();
    assert!(set.stream(s1).unwrap().is_closed());
    assert!(matches!(
        std::iter::from_fn(|| set.poll_event(s1)).last(),
        Some(ServerEvent::ProtocolError(_))
    ));
    assert!(set.remove(s2).is_some());
    store.set(EDS, "a", body("a", "1")).unwrap();
    assert_eq!(set.sync(&store), 0);
    assert_eq!(
        set.handle_request(s2, T0, req(sotw(EDS, "", &["a"], ""))),
        Err(UnknownStream(s2))
    );
}

#[test]
fn a_lost_change_log_resyncs_every_stream_correctly() {
    let mut store = ResourceStore::with_log_capacity(2);
    let mut set = StreamSet::new();
    let s1 = set.insert(cfg(Variant::Delta));
    set.handle_request(s1, T0, dreq(delta(EDS, &["a", "b"], &[], "")))
        .unwrap();
    drain_set(&mut set, &store);
    for i in 0..5 {
        store.set(EDS, "a", body("a", &i.to_string())).unwrap();
    }
    store.set(EDS, "b", body("b", "1")).unwrap();
    store.set(EDS, "z", body("z", "1")).unwrap();
    set.sync(&store);
    let out = drain_set(&mut set, &store);
    assert_eq!(out.len(), 1);
    match &out[0].1 {
        Response::Delta(d) => assert_eq!(delta_names(d), ["a", "b"]),
        _ => unreachable!(),
    }
}

/// A standalone stream whose store log is lost resyncs too.
#[test]
fn standalone_stream_resyncs_after_a_lost_log() {
    let mut store = ResourceStore::with_log_capacity(1);
    let mut s = ServerStream::new(cfg(Variant::Sotw));
    s.handle_request(T0, req(sotw(EDS, "", &["a", "b"], "")));
    assert!(drain(&mut s, T0, &store).is_empty());
    store.set(EDS, "a", body("a", "1")).unwrap();
    store.set(EDS, "b", body("b", "1")).unwrap();
    let r = one_sotw(drain(&mut s, T0, &store));
    assert_eq!(sotw_names(&r), ["a", "b"]);
}

/// A named SotW subscription's first answer reads the store as its build finds it (a set
/// made after a store whose log no longer reaches back, changes between the request and
/// the build), and every change after that build reaches it, in a set and on its own: the
/// first build takes its names from the request alone, without a resync (issue 28).
#[test]
fn a_named_subscription_answers_the_store_as_found_then_hears_every_change() {
    let mut store = ResourceStore::with_log_capacity(2);
    for i in 0..5 {
        store.set(EDS, "a", body("a", &i.to_string())).unwrap();
    }
    store.set(EDS, "b", body("b", "1")).unwrap();
    let mut set = StreamSet::new();
    let id = set.insert(cfg(Variant::Sotw));
    let mut alone = ServerStream::new(cfg(Variant::Sotw));
    set.handle_request(id, T0, req(sotw(EDS, "", &["a", "b", "c"], "")))
        .unwrap();
    alone.handle_request(T0, req(sotw(EDS, "", &["a", "b", "c"], "")));
    // Changed after the request, before the first build.
    store.set(EDS, "a", body("a", "latest")).unwrap();
    store.set(EDS, "unwatched", body("unwatched", "1")).unwrap();

    let set_responses = |set: &mut StreamSet, store: &ResourceStore| {
        set.sync(store);
        drain_set(set, store)
            .into_iter()
            .map(|(_, r)| match r {
                Response::Sotw(r) => r,
                Response::Delta(_) => unreachable!(),
            })
            .collect::<Vec<_>>()
    };
    let bodies = |r: &xds_sansio::pb::discovery::DiscoveryResponse| {
        r.resources
            .iter()
            .map(|a| a.value.clone())
            .collect::<Vec<_>>()
    };
    let first = set_responses(&mut set, &store);
    assert_eq!(first.len(), 1);
    assert_eq!(sotw_names(&first[0]), ["a", "b"]);
    assert_eq!(bodies(&first[0]), [body("a", "latest"), body("b", "1")]);
    let first_alone = one_sotw(drain(&mut alone, T0, &store));
    assert_eq!(sotw_names(&first_alone), ["a", "b"]);
    assert_eq!(bodies(&first_alone), bodies(&first[0]));

    // After the first build: a name that appears, then a change, each heard (EDS is
    // incremental in SotW: what changed).
    store.set(EDS, "c", body("c", "1")).unwrap();
    let next = set_responses(&mut set, &store);
    assert_eq!(next.len(), 1);
    assert_eq!(sotw_names(&next[0]), ["c"]);
    assert_eq!(sotw_names(&one_sotw(drain(&mut alone, T0, &store))), ["c"]);
    store.set(EDS, "b", body("b", "2")).unwrap();
    let next = set_responses(&mut set, &store);
    assert_eq!(next.len(), 1);
    assert_eq!(bodies(&next[0]), [body("b", "2")]);
    assert_eq!(
        bodies(&one_sotw(drain(&mut alone, T0, &store))),
        [body("b", "2")]
    );
    // Nothing more is owed.
    assert!(set_responses(&mut set, &store).is_empty());
    assert!(drain(&mut alone, T0, &store).is_empty());
}

/// The peer cannot crash the stream: random requests of both variants, random nonces,
/// names, types, nodes and errors, interleaved with store changes and timeouts.
#[test]
fn random_conversations_never_panic_and_stay_deterministic() {
    fn run(ops: &[(u8, u8, u8, u8)], variant: Variant) -> Vec<Vec<u8>> {
        use prost::Message;
        let types = [CDS, EDS, LDS, "", "type.googleapis.com/x"];
        let names = ["a", "b", "*", "c", ""];
        let mut store = ResourceStore::new();
        let mut s = ServerStream::new(ServerConfig::new(variant, Transport::Aggregated));
        let mut out = Vec::new();
        let mut now = T0;
        for &(op, x, y, z) in ops {
            let t = types[x as usize % types.len()];
            let n = names[y as usize % names.len()];
            let nonce = (z % 6).to_string();
            match op % 6 {
                0 => {
                    let mut r = sotw(t, "v", &[n], if z % 2 == 0 { "" } else { &nonce });
                    if z % 3 == 0 {
                        r.error_detail = Some(nack_status());
                    }
                    if z % 7 == 0 {
                        r.node = None;
                    }
                    s.handle_request(now, Request::Sotw(r));
                }
                1 => {
                    let mut r = delta(t, &[n], &[names[z as usize % names.len()]], &nonce);
                    if z % 5 == 0 {
                        r.initial_resource_versions.insert(n.into(), "v".into());
                    }
                    if z % 3 == 0 {
                        r.error_detail = Some(nack_status());
                    }
                    s.handle_request(now, Request::Delta(r));
                }
                2 if !t.is_empty() && !n.is_empty() && n != "*" => {
                    let entry = xds_sansio::server::ResourceEntry::new(n, body(n, &nonce));
                    let entry = if z % 2 == 0 {
                        entry.with_ttl(core::time::Duration::from_secs(u64::from(z % 4 + 1)))
                    } else {
                        entry
                    };
                    store.set_entry(t, entry).unwrap();
                }
                3 => {
                    store.remove(t, n);
                }
                4 => {
                    now = now + core::time::Duration::from_secs(u64::from(z % 3));
                    s.handle_timeout(now);
                }
                _ => {}
            }
            while let Some(e) = s.poll_event() {
                out.push(format!("{e:?}").into_bytes());
            }
            let mut guard = 0;
            while let Some(r) = s.poll_response(now, &store) {
                let bytes = match r {
                    Response::Sotw(r) => r.encode_to_vec(),
                    Response::Delta(r) => r.encode_to_vec(),
                };
                out.push(bytes);
                guard += 1;
                assert!(guard < 50, "poll_response never settles");
            }
        }
        out
    }
    fn prop(ops: Vec<(u8, u8, u8, u8)>) -> bool {
        [Variant::Sotw, Variant::Delta]
            .into_iter()
            .all(|v| run(&ops, v) == run(&ops, v))
    }
    quickcheck::QuickCheck::new()
        .tests(300)
        .quickcheck(prop as fn(Vec<(u8, u8, u8, u8)>) -> bool);
}

#[test]
fn set_level_timers_fire_only_due_streams() {
    use core::time::Duration;
    use xds_sansio::server::ResourceEntry;
    use xds_sansio::Instant;
    let mut store = ResourceStore::new();
    store
        .set_entry(
            EDS,
            ResourceEntry::new("t", body("t", "1")).with_ttl(Duration::from_secs(10)),
        )
        .unwrap();
    store.set(EDS, "plain", body("plain", "1")).unwrap();
    let mut set = StreamSet::new();
    let a = set.insert(cfg(Variant::Delta));
    let b = set.insert(cfg(Variant::Delta));
    set.handle_request(a, T0, dreq(delta(EDS, &["t"], &[], "")))
        .unwrap();
    set.handle_request(b, T0, dreq(delta(EDS, &["plain"], &[], "")))
        .unwrap();
    assert_eq!(drain_set(&mut set, &store).len(), 2);
    assert_eq!(set.poll_timeout(), Some(Instant::from_secs(5)));
    set.handle_timeout(Instant::from_secs(4));
    assert_eq!(set.poll_ready(), None);
    let now = Instant::from_secs(5);
    set.handle_timeout(now);
    assert_eq!(set.poll_ready(), Some(a));
    let hb = set.poll_response(a, now, &store).unwrap();
    match hb {
        Response::Delta(d) => assert!(d.resources[0].resource.is_none()),
        _ => unreachable!(),
    }
    assert_eq!(set.poll_timeout(), Some(Instant::from_secs(10)));
    set.remove(a);
    assert_eq!(set.poll_timeout(), None);
}

/// Seed "Multiple EDS requests on the same stream / on distinct streams": both deliver
/// {foo, bar}.
#[test]
fn eds_on_one_stream_and_on_distinct_streams() {
    let mut store = ResourceStore::new();
    store.set(EDS, "foo", body("foo", "1")).unwrap();
    store.set(EDS, "bar", body("bar", "1")).unwrap();
    let per_type = || {
        ServerStream::new(ServerConfig::new(
            Variant::Sotw,
            Transport::PerType(EDS.into()),
        ))
    };
    let mut one = per_type();
    one.handle_request(T0, req(sotw(EDS, "", &["foo", "bar"], "")));
    assert_eq!(
        sotw_names(&one_sotw(drain(&mut one, T0, &store))),
        ["bar", "foo"]
    );
    let mut s1 = per_type();
    let mut s2 = per_type();
    s1.handle_request(T0, req(sotw(EDS, "", &["foo"], "")));
    s2.handle_request(T0, req(sotw(EDS, "", &["bar"], "")));
    assert_eq!(sotw_names(&one_sotw(drain(&mut s1, T0, &store))), ["foo"]);
    assert_eq!(sotw_names(&one_sotw(drain(&mut s2, T0, &store))), ["bar"]);
}

#[test]
fn delta_on_a_single_type_stream() {
    let mut store = ResourceStore::new();
    store.set(CDS, "a", body("a", "1")).unwrap();
    let mut s = ServerStream::new(ServerConfig::new(
        Variant::Delta,
        Transport::PerType(CDS.into()),
    ));
    let mut r = delta("", &[], &[], "");
    r.type_url.clear();
    s.handle_request(T0, dreq(r));
    assert!(
        s.is_wildcard(CDS),
        "legacy wildcard, type implied by the stream"
    );
    let resp = one_delta(drain(&mut s, T0, &store));
    assert_eq!(resp.type_url, CDS);
    assert_eq!(delta_names(&resp), ["a"]);
    store.remove(CDS, "a");
    assert_eq!(
        one_delta(drain(&mut s, T0, &store)).removed_resources,
        ["a"]
    );
    s.handle_request(T0, dreq(delta(EDS, &["x"], &[], "")));
    assert!(s.is_closed(), "another type on a CDS stream");
}

/// The index finds subscribers by alias too (VHDS subscribes by alias).
#[test]
fn index_finds_alias_subscribers() {
    use xds_sansio::server::ResourceEntry;
    let vh = "type.googleapis.com/envoy.config.route.v3.VirtualHost";
    let mut store = ResourceStore::new();
    let entry =
        |d: &str| ResourceEntry::new("vh", body("vh", d)).with_aliases(vec!["route/host".into()]);
    store.set_entry(vh, entry("1")).unwrap();
    let mut set = StreamSet::new();
    let s = set.insert(cfg(Variant::Delta));
    let other = set.insert(cfg(Variant::Delta));
    set.handle_request(s, T0, dreq(delta(vh, &["route/host"], &[], "")))
        .unwrap();
    set.handle_request(other, T0, dreq(delta(vh, &["unrelated"], &[], "")))
        .unwrap();
    drain_set(&mut set, &store);
    store.set_entry(vh, entry("2")).unwrap();
    assert_eq!(set.sync(&store), 1);
    let out = drain_set(&mut set, &store);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, s);
    store.remove(vh, "vh");
    set.sync(&store);
    let out = drain_set(&mut set, &store);
    match &out[..] {
        [(id, Response::Delta(d))] => {
            assert_eq!(*id, s);
            assert_eq!(d.removed_resources, ["vh"]);
        }
        other => panic!("{other:?}"),
    }
}

/// Where each stream keeps the one name it subscribes to for `type_url`.
fn kept_name(stream: &ServerStream, type_url: &str) -> *const u8 {
    let names = stream.subscribed_names(type_url);
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].as_ptr()
}

#[test]
fn streams_of_a_set_keep_one_copy_of_a_name_they_all_subscribe_to() {
    for (variant, request) in [
        (Variant::Sotw, req(sotw(EDS, "", &["a"], ""))),
        (Variant::Delta, dreq(delta(EDS, &["a"], &[], ""))),
    ] {
        let mut set = StreamSet::new();
        let ids: Vec<StreamId> = (0..3).map(|_| set.insert(cfg(variant))).collect();
        for &id in &ids {
            set.handle_request(id, T0, request.clone()).unwrap();
        }
        let kept: Vec<*const u8> = ids
            .iter()
            .map(|&id| kept_name(set.stream(id).unwrap(), EDS))
            .collect();
        // The first stream copied the name before the index knew it, and the index keeps
        // that copy (from the stream's event); every later one shares it.
        assert_eq!(kept[0], kept[1], "{variant:?}");
        assert_eq!(kept[1], kept[2], "{variant:?}");
        // A stream on its own copies the name, with the same state and events.
        let mut alone = ServerStream::new(cfg(variant));
        alone.handle_request(T0, request.clone());
        assert_ne!(kept_name(&alone, EDS), kept[1], "{variant:?}");
        let mut in_set = Vec::new();
        while let Some(event) = set.poll_event(ids[2]) {
            in_set.push(event);
        }
        let mut on_its_own = Vec::new();
        while let Some(event) = alone.poll_event() {
            on_its_own.push(event);
        }
        assert_eq!(in_set, on_its_own, "{variant:?}");
    }
}

#[test]
fn an_embedding_with_its_own_index_shares_names_the_same_way() {
    use xds_sansio::server::SubscriptionIndex;
    let mut index: SubscriptionIndex<u64> = SubscriptionIndex::new();
    let request = req(sotw(EDS, "", &["a"], ""));
    let mut streams: Vec<ServerStream> = (0..3)
        .map(|_| ServerStream::new(cfg(Variant::Sotw)))
        .collect();
    for (key, stream) in (0u64..).zip(streams.iter_mut()) {
        stream.handle_request_sharing(T0, request.clone(), &index);
        while let Some(event) = stream.poll_event() {
            index.follow(key, &event);
        }
    }
    let kept: Vec<*const u8> = streams.iter().map(|s| kept_name(s, EDS)).collect();
    assert_eq!(kept[0], kept[1]);
    assert_eq!(kept[1], kept[2]);
    // Once every stream has left, the index holds nothing; the streams keep their names.
    for (key, stream) in (0u64..).zip(streams.iter()) {
        index.remove(key, &stream.subscriptions());
    }
    assert!(index.is_empty());
    assert_eq!(streams[2].subscribed_names(EDS), ["a"]);
}
