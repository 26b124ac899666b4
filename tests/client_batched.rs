//! Batched change events (`EventShape::Batched`): one `Changed` per response, entries that
//! borrow from the cache, the same conversation as the per-resource shape.

mod client_support;

use bytes::Bytes;
use client_support::*;
use prost::Message;
use xds_sansio::client::{
    Change, ChangeBatch, Client, ClientEvent, EventShape, RemovalReason, SharedStr,
};
use xds_sansio::pb::discovery::DiscoveryResponse;
use xds_sansio::{Response, Transport, Variant};

fn batched(variant: Variant) -> Client {
    let mut config = config(variant, Transport::Aggregated);
    config.event_shape = EventShape::Batched;
    Client::new(config)
}

fn drain(c: &mut Client) -> Vec<ClientEvent> {
    while c.poll_request(t(0)).is_some() {}
    std::iter::from_fn(|| c.poll_event()).collect()
}

fn batch_of(events: &[ClientEvent]) -> (SharedStr, ChangeBatch) {
    let batches: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Changed { type_url, changes } => Some((type_url.clone(), changes.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(batches.len(), 1, "one batch per response: {events:?}");
    batches.into_iter().next().unwrap()
}

#[test]
fn a_large_response_is_one_batch_before_its_ack_and_its_buffer_goes_with_it() {
    let mut c = batched(Variant::Sotw);
    c.subscribe(CDS, &[]).unwrap();
    c.connected(t(0));
    drain(&mut c);
    let response = DiscoveryResponse {
        version_info: "1".into(),
        resources: (0..1000).map(|i| any(CDS, &format!("c{i}"), "x")).collect(),
        type_url: CDS.into(),
        nonce: "A".into(),
        ..DiscoveryResponse::default()
    };
    let wire = Bytes::from(response.encode_to_vec());
    c.handle_response(
        t(1),
        Response::Sotw(DiscoveryResponse::decode(wire.clone()).unwrap()),
    );
    let events = drain(&mut c);
    assert!(
        matches!(
            &events[..],
            [
                ClientEvent::Changed { .. },
                ClientEvent::Acked { .. },
                ClientEvent::Ready { .. }
            ]
        ),
        "{events:?}"
    );
    let (type_url, batch) = batch_of(&events);
    assert_eq!(type_url, CDS);
    assert_eq!(batch.len(), 1000);
    let range = wire.as_ptr_range();
    let mut previous_end = None;
    let mut adjacent = 0;
    for (i, view) in c.changes(CDS, &batch).enumerate() {
        assert_eq!(view.name, format!("c{i}").as_str(), "in response order");
        assert_eq!(view.change, Change::Upserted);
        let held = view.resource.expect("held");
        assert_eq!(held.version(), "1");
        // The cache keeps a copy of each body (the response's buffer is not kept alive
        // for it), the bodies one after another in shared chunks.
        let body = held.body().as_ptr_range();
        assert!(!range.contains(&body.start), "the body is the cache's copy");
        adjacent += usize::from(previous_end == Some(body.start));
        previous_end = Some(body.end);
        // The batch's names are slices of the response: nothing copied for them.
        assert!(
            range.contains(&view.name.as_bytes().as_ptr()),
            "the name was copied"
        );
    }
    assert!(
        adjacent > 900,
        "bodies copied into shared chunks: {adjacent} of 999 adjacent"
    );
    // Once the batch is read and dropped, nothing but this test holds the response.
    drop((events, batch));
    assert!(
        wire.is_unique(),
        "the cache keeps nothing of the response's buffer"
    );
}

#[test]
fn removals_and_absence_share_the_batch_of_their_response() {
    let mut c = batched(Variant::Sotw);
    c.subscribe(CDS, &["a", "b", "c"]).unwrap();
    c.connected(t(0));
    drain(&mut c);
    c.handle_response(t(1), sotw(CDS, "1", "A", &[("a", "1"), ("b", "1")]));
    drain(&mut c);
    // b changes, a is left out (removed, and does not exist since it is subscribed by name).
    c.handle_response(t(2), sotw(CDS, "2", "B", &[("b", "2"), ("c", "1")]));
    let events = drain(&mut c);
    let (_, batch) = batch_of(&events);
    let changes: Vec<(String, Change)> = batch
        .iter()
        .map(|(n, change)| (n.to_string(), change))
        .collect();
    assert_eq!(
        changes,
        [
            ("b".into(), Change::Upserted),
            ("c".into(), Change::Upserted),
            (
                "a".into(),
                Change::Removed(RemovalReason::AbsentFromResponse)
            ),
            ("a".into(), Change::DoesNotExist),
        ]
    );
    let views: Vec<_> = c.changes(CDS, &batch).collect();
    assert!(views[0].resource.unwrap().body().ends_with(b"2"));
    assert!(views[2].resource.is_none(), "a is gone");
}

#[test]
fn the_batched_shape_stands_for_the_per_resource_events() {
    let run = |shape: EventShape| {
        let mut config = config(Variant::Delta, Transport::Aggregated);
        config.event_shape = shape;
        let mut c = Client::new(config);
        c.subscribe(EDS, &["a", "b", "gone"]).unwrap();
        c.connected(t(0));
        let mut log = Vec::new();
        let mut requests = Vec::new();
        let mut step = |c: &mut Client, log: &mut Vec<ClientEvent>| {
            while let Some(r) = c.poll_request(t(0)) {
                requests.push(r);
            }
            while let Some(e) = c.poll_event() {
                match e {
                    ClientEvent::Changed { type_url, changes } => {
                        log.extend(c.owned_events(&type_url, &changes))
                    }
                    e => log.push(e),
                }
            }
        };
        step(&mut c, &mut log);
        c.handle_response(
            t(1),
            delta(EDS, "A", &[("a", "1", "x"), ("b", "1", "y")], &["gone"]),
        );
        step(&mut c, &mut log);
        c.handle_response(t(2), delta(EDS, "B", &[("a", "2", "z")], &["b"]));
        step(&mut c, &mut log);
        c.unsubscribe(EDS, &["a"]).unwrap();
        step(&mut c, &mut log);
        (log, requests)
    };
    let (per_resource, requests) = run(EventShape::PerResource);
    let (batched, batched_requests) = run(EventShape::Batched);
    assert_eq!(batched, per_resource);
    assert_eq!(batched_requests, requests);
    assert!(per_resource.len() >= 8, "{per_resource:?}");
}

#[test]
fn another_event_between_changes_splits_the_batch() {
    // A53: a deletion the client ignores is its own event, between two runs of changes.
    let mut config = config(Variant::Delta, Transport::Aggregated);
    config.event_shape = EventShape::Batched;
    config.ignore_resource_deletion = true;
    let mut c = Client::new(config);
    c.subscribe(EDS, &["a", "b", "c"]).unwrap();
    c.connected(t(0));
    drain(&mut c);
    c.handle_response(t(1), delta(EDS, "A", &[("a", "1", "x")], &[]));
    drain(&mut c);
    c.handle_response(t(2), delta(EDS, "B", &[("b", "1", "y")], &["a", "c"]));
    let kinds: Vec<String> = drain(&mut c)
        .iter()
        .map(|e| match e {
            ClientEvent::Changed { changes, .. } => format!("changed:{}", changes.len()),
            ClientEvent::DeletionIgnored { name, .. } => format!("ignored:{name}"),
            ClientEvent::Acked { .. } => "acked".into(),
            other => format!("{other:?}"),
        })
        .collect();
    // b upserted; a kept; c does not exist; then the ACK and readiness.
    assert_eq!(kinds[..4], ["changed:1", "ignored:a", "changed:1", "acked"]);
}
