//! REST-JSON polling, server side: long polls answered only on change, `304` at the
//! deadline, errors as HTTP answers; then client and server together over simulated time.
#![cfg(feature = "json")]

use std::time::Duration;

use bytes::Bytes;
use xds_sansio::client::ClientEvent;
use xds_sansio::codec::json::JsonCodec;
use xds_sansio::pb::discovery::{DeltaDiscoveryRequest, DiscoveryRequest, DiscoveryResponse};
use xds_sansio::pb::envoy::config::core::v3::Node;
use xds_sansio::pb::google::rpc::Status;
use xds_sansio::rest::{
    HttpResponse, RestClient, RestConfig, RestEvent, RestRequestId, RestServer, RestServerConfig,
    RestServerEvent, CONTENT_TYPE_JSON,
};
use xds_sansio::server::ResourceStore;
use xds_sansio::types::{CLUSTER, ENDPOINT, LISTENER};
use xds_sansio::Instant;

const CDS: &str = CLUSTER.type_url;
const EDS: &str = ENDPOINT.type_url;
const LDS: &str = LISTENER.type_url;
const CDS_PATH: &str = "/v3/discovery:clusters";
const EDS_PATH: &str = "/v3/discovery:endpoints";

fn t(secs: u64) -> Instant {
    Instant::from_secs(secs)
}

fn body(name: &str, content: &str) -> Bytes {
    let mut out = vec![0x0a, name.len() as u8];
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(&[0x12, content.len() as u8]);
    out.extend_from_slice(content.as_bytes());
    Bytes::from(out)
}

fn node() -> Node {
    Node {
        id: "envoy-1".into(),
        ..Default::default()
    }
}

fn request(type_url: &str, version: &str, nonce: &str, names: &[&str]) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.into(),
        response_nonce: nonce.into(),
        type_url: type_url.into(),
        node: Some(node()),
        resource_names: names.iter().map(|n| n.to_string()).collect(),
        ..Default::default()
    }
}

fn json<M: prost::Message + prost::Name>(m: &M) -> Vec<u8> {
    JsonCodec::new().to_string(m).unwrap().into_bytes()
}

/// One codec for the whole test binary (building the descriptor pool is the slow part;
/// clones share it).
fn codec() -> JsonCodec {
    static CODEC: std::sync::OnceLock<JsonCodec> = std::sync::OnceLock::new();
    CODEC.get_or_init(JsonCodec::new).clone()
}

fn server() -> RestServer {
    RestServer::new(RestServerConfig::default(), codec())
}

fn store() -> ResourceStore {
    let mut s = ResourceStore::new();
    s.set(CDS, "a", body("a", "1")).unwrap();
    s.set(EDS, "x", body("x", "1")).unwrap();
    s.set(EDS, "y", body("y", "1")).unwrap();
    s.serve_type("type.googleapis.com/envoy.api.v2.Cluster")
        .unwrap();
    s
}

fn ok_response(answer: &HttpResponse) -> DiscoveryResponse {
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.content_type, Some(CONTENT_TYPE_JSON));
    JsonCodec::new().from_str(&answer.body).unwrap()
}

fn names(r: &DiscoveryResponse) -> Vec<String> {
    r.resources
        .iter()
        .map(|a| String::from_utf8_lossy(&a.value[2..3]).to_string())
        .collect()
}

/// Asks once with an empty version and returns the version the server answers with.
fn current_version(
    srv: &mut RestServer,
    store: &ResourceStore,
    path: &str,
    r: DiscoveryRequest,
) -> String {
    srv.handle_request(t(0), "POST", path, &json(&r), t(0));
    let (_, answer) = srv.poll_response(t(0), store).unwrap();
    ok_response(&answer).version_info
}

#[test]
fn a_client_without_the_version_is_answered_at_once() {
    let store = store();
    let mut srv = server();
    let id = srv.handle_request(
        t(0),
        "POST",
        CDS_PATH,
        &json(&request(CDS, "", "", &[])),
        t(30),
    );
    let (got, answer) = srv.poll_response(t(0), &store).expect("answered at once");
    assert_eq!(got, id);
    let r = ok_response(&answer);
    assert_eq!(r.type_url, CDS);
    assert_eq!(names(&r), vec!["a"]);
    assert!(!r.version_info.is_empty());
    assert_eq!(r.nonce, r.version_info, "the nonce is the version");
    assert_eq!(srv.waiting(), 0);
    let events: Vec<_> = std::iter::from_fn(|| srv.poll_event()).collect();
    assert!(
        matches!(&events[..], [RestServerEvent::Received { id: i, type_url, .. }] if *i == id && type_url == CDS)
    );
}

#[test]
fn a_long_poll_waits_for_a_change_and_gets_it() {
    let mut store = store();
    let mut srv = server();
    let v = current_version(&mut srv, &store, CDS_PATH, request(CDS, "", "", &[]));
    let id = srv.handle_request(
        t(1),
        "POST",
        CDS_PATH,
        &json(&request(CDS, &v, &v, &[])),
        t(31),
    );
    assert_eq!(srv.poll_response(t(1), &store), None, "nothing changed");
    assert_eq!(srv.poll_timeout(), Some(t(31)));
    assert_eq!(srv.poll_response(t(5), &store), None);
    store.set(CDS, "b", body("b", "1")).unwrap();
    let (got, answer) = srv
        .poll_response(t(6), &store)
        .expect("the change is answered");
    assert_eq!(got, id);
    let r = ok_response(&answer);
    assert_ne!(r.version_info, v);
    assert_eq!(names(&r), vec!["a", "b"], "full state for CDS");
}

#[test]
fn the_deadline_brings_304_with_an_empty_body() {
    let store = store();
    let mut srv = server();
    let v = current_version(&mut srv, &store, CDS_PATH, request(CDS, "", "", &[]));
    let id = srv.handle_request(
        t(1),
        "POST",
        CDS_PATH,
        &json(&request(CDS, &v, "", &[])),
        t(31),
    );
    assert_eq!(srv.poll_response(t(1), &store), None);
    srv.handle_timeout(t(30));
    assert_eq!(srv.poll_response(t(30), &store), None);
    srv.handle_timeout(t(31));
    let (got, answer) = srv.poll_response(t(31), &store).unwrap();
    assert_eq!(got, id);
    assert_eq!(
        answer,
        HttpResponse {
            status: 304,
            content_type: None,
            body: String::new()
        }
    );
    assert_eq!(srv.waiting(), 0);
    assert_eq!(srv.poll_timeout(), None);
}

#[test]
fn plain_polling_with_a_deadline_of_now_is_answered_at_once() {
    let store = store();
    let mut srv = server();
    let v = current_version(&mut srv, &store, CDS_PATH, request(CDS, "", "", &[]));
    srv.handle_request(
        t(1),
        "POST",
        CDS_PATH,
        &json(&request(CDS, &v, "", &[])),
        t(1),
    );
    let (_, answer) = srv.poll_response(t(1), &store).unwrap();
    assert_eq!(answer.status, 304);
}

#[test]
fn other_types_wake_only_for_the_names_they_subscribe() {
    let mut store = store();
    let mut srv = server();
    let v = current_version(&mut srv, &store, EDS_PATH, request(EDS, "", "", &["x"]));
    srv.handle_request(
        t(1),
        "POST",
        EDS_PATH,
        &json(&request(EDS, &v, &v, &["x"])),
        t(31),
    );
    assert_eq!(srv.poll_response(t(1), &store), None);
    store.set(EDS, "y", body("y", "2")).unwrap();
    assert_eq!(srv.poll_response(t(2), &store), None, "y is not subscribed");
    store.set(EDS, "x", body("x", "2")).unwrap();
    let (_, answer) = srv.poll_response(t(3), &store).unwrap();
    assert_eq!(names(&ok_response(&answer)), vec!["x"]);
    // A new name is answered at once even if the rest is unchanged.
    let v2 = current_version(&mut srv, &store, EDS_PATH, request(EDS, "", "", &["x"]));
    srv.handle_request(
        t(4),
        "POST",
        EDS_PATH,
        &json(&request(EDS, &v2, &v2, &["x", "y"])),
        t(34),
    );
    let (_, answer) = srv.poll_response(t(4), &store).unwrap();
    assert_eq!(names(&ok_response(&answer)), vec!["x", "y"]);
}

#[test]
fn a_nacked_version_is_not_sent_again() {
    let mut store = store();
    let mut srv = server();
    let old = current_version(&mut srv, &store, CDS_PATH, request(CDS, "", "", &[]));
    store.set(CDS, "a", body("a", "bad")).unwrap();
    let rejected = current_version(&mut srv, &store, CDS_PATH, request(CDS, &old, &old, &[]));
    while srv.poll_event().is_some() {}
    let mut nack = request(CDS, &old, &rejected, &[]);
    nack.error_detail = Some(Status {
        code: 13,
        message: "bad cluster".into(),
        details: vec![],
    });
    let id = srv.handle_request(t(1), "POST", CDS_PATH, &json(&nack), t(31));
    let events: Vec<_> = std::iter::from_fn(|| srv.poll_event()).collect();
    assert!(events.iter().any(
        |e| matches!(e, RestServerEvent::Nacked { id: i, nonce, error, .. }
        if *i == id && *nonce == rejected && error.message == "bad cluster")
    ));
    assert_eq!(srv.poll_response(t(1), &store), None, "the NACK hold");
    // The same poll without error_detail (a repeat) is held too.
    let repeat = request(CDS, &old, &rejected, &[]);
    srv.handle_request(t(1), "POST", CDS_PATH, &json(&repeat), t(31));
    assert_eq!(srv.poll_response(t(1), &store), None);
    // A fix is sent.
    store.set(CDS, "a", body("a", "good")).unwrap();
    let first = srv.poll_response(t(2), &store).unwrap();
    let second = srv.poll_response(t(2), &store).unwrap();
    assert_eq!(first.0, id);
    assert_ne!(ok_response(&first.1).version_info, rejected);
    assert_eq!(
        ok_response(&second.1).version_info,
        ok_response(&first.1).version_info
    );
}

#[test]
fn bad_requests_are_answered_with_errors() {
    let store = store();
    let mut srv = server();
    let good = json(&request(CDS, "", "", &[]));
    let mut cases: Vec<(u16, &str, Vec<u8>, &str, &str)> = vec![
        (405, "GET", good.clone(), CDS_PATH, "POST"),
        (
            404,
            "POST",
            good.clone(),
            "/v3/discovery:nothing",
            "no REST-JSON endpoint",
        ),
        (
            404,
            "POST",
            good.clone(),
            "/v3/discovery:aggregated",
            "ADS is not available",
        ),
        (400, "POST", b"{".to_vec(), CDS_PATH, "line 1"),
        (
            400,
            "POST",
            b"".to_vec(),
            CDS_PATH,
            "not a JSON DiscoveryRequest",
        ),
        (400, "POST", vec![0xff], CDS_PATH, "UTF-8"),
        (
            400,
            "POST",
            json(&DeltaDiscoveryRequest {
                type_url: CDS.into(),
                node: Some(node()),
                resource_names_subscribe: vec!["a".into()],
                ..Default::default()
            }),
            CDS_PATH,
            "incremental xDS is not available",
        ),
        (
            400,
            "POST",
            json(&request(LDS, "", "", &[])),
            CDS_PATH,
            "type",
        ),
    ];
    let mut no_node = request(CDS, "", "", &[]);
    no_node.node = None;
    cases.push((400, "POST", json(&no_node), CDS_PATH, "node"));
    for (status, method, body, path, says) in cases {
        let id = srv.handle_request(t(0), method, path, &body, t(30));
        let (got, answer) = srv.poll_response(t(0), &store).unwrap();
        assert_eq!(got, id);
        assert_eq!(answer.status, status, "{path} {}", answer.body);
        assert!(
            answer.body.contains(says),
            "{:?} lacks {says:?}",
            answer.body
        );
        assert_eq!(srv.waiting(), 0);
    }
    // v2 paths serve v2 types.
    let mut v2 = request("type.googleapis.com/envoy.api.v2.Cluster", "", "", &[]);
    v2.type_url.clear();
    srv.handle_request(t(0), "POST", "/v2/discovery:clusters", &json(&v2), t(0));
    let r = ok_response(&srv.poll_response(t(0), &store).unwrap().1);
    assert_eq!(r.type_url, "type.googleapis.com/envoy.api.v2.Cluster");
    assert!(
        r.resources.is_empty(),
        "a wildcard is answered even when empty"
    );
}

#[test]
fn a_cancelled_request_is_forgotten() {
    let mut store = store();
    let mut srv = server();
    let v = current_version(&mut srv, &store, CDS_PATH, request(CDS, "", "", &[]));
    let id = srv.handle_request(
        t(1),
        "POST",
        CDS_PATH,
        &json(&request(CDS, &v, "", &[])),
        t(31),
    );
    assert_eq!(srv.poll_response(t(1), &store), None);
    assert!(srv.cancel(id));
    assert!(!srv.cancel(id));
    store.set(CDS, "b", body("b", "1")).unwrap();
    assert_eq!(srv.poll_response(t(2), &store), None);
    assert_eq!(srv.poll_timeout(), None);
    assert_eq!(RestRequestId(5), RestRequestId(5));
}

/// Client and server over simulated time: long polls of 30 s, poll period 1 s.
struct World {
    client: RestClient,
    server: RestServer,
    store: ResourceStore,
    now: u64,
    in_flight: Option<(u64, RestRequestId)>,
    answers_200: usize,
    answers_304: usize,
    client_events: Vec<ClientEvent>,
}

impl World {
    fn new(type_url: &str) -> World {
        let mut cfg = RestConfig::new(type_url, node(), Duration::from_secs(1));
        cfg.client.does_not_exist_timeout = None;
        World {
            client: RestClient::new(cfg, JsonCodec::new()).unwrap(),
            server: server(),
            store: ResourceStore::new(),
            now: 0,
            in_flight: None,
            answers_200: 0,
            answers_304: 0,
            client_events: Vec::new(),
        }
    }

    /// Runs one second of the world.
    fn step(&mut self) {
        let now = t(self.now);
        if let Some(req) = self.client.poll_request(now) {
            if let Some((old_client, old_server)) = self.in_flight.take() {
                assert_eq!(req.supersedes, Some(old_client), "one request outstanding");
                assert!(self.server.cancel(old_server));
            }
            let id = self.server.handle_request(
                now,
                req.method,
                &req.path,
                req.body.as_bytes(),
                now.saturating_add(Duration::from_secs(30)),
            );
            self.in_flight = Some((req.id, id));
        }
        self.server.handle_timeout(now);
        while let Some((id, answer)) = self.server.poll_response(now, &self.store) {
            let (client_id, server_id) = self.in_flight.take().expect("an answer to a request");
            assert_eq!(server_id, id);
            match answer.status {
                200 => self.answers_200 += 1,
                304 => self.answers_304 += 1,
                other => panic!("unexpected {other}: {}", answer.body),
            }
            self.client
                .handle_response(now, client_id, answer.status, answer.body.as_bytes());
        }
        while self.server.poll_event().is_some() {}
        self.client.handle_timeout(now);
        while let Some(e) = self.client.poll_event() {
            match e {
                RestEvent::Client(c) => self.client_events.push(c),
                RestEvent::NotModified => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        self.now += 1;
    }

    fn run(&mut self, secs: u64) {
        for _ in 0..secs {
            self.step();
        }
    }

    fn held(&self) -> Vec<String> {
        self.client
            .resource_names()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }
}

#[test]
fn client_and_server_converge_and_idle_polls_carry_nothing() {
    let mut w = World::new(CDS);
    w.store.set(CDS, "a", body("a", "1")).unwrap();
    w.client.subscribe(&[]).unwrap();
    w.run(3);
    assert_eq!(w.held(), vec!["a"]);
    assert_eq!(w.answers_200, 1);
    // A quiet minute: only long polls timing out, no response bodies.
    w.run(60);
    assert_eq!(w.answers_200, 1, "nothing sent when nothing changed");
    assert!(w.answers_304 >= 1);
    // A change reaches the waiting client within the same second.
    w.store.set(CDS, "b", body("b", "1")).unwrap();
    w.run(1);
    assert_eq!(w.held(), vec!["a", "b"]);
    assert_eq!(w.answers_200, 2);
    // Full state: a removal in the store removes it from the client.
    w.store.remove(CDS, "a");
    w.run(2);
    assert_eq!(w.held(), vec!["b"]);
    assert_eq!(
        w.client.version().map(String::from),
        Some(w.store_version())
    );
}

impl World {
    fn store_version(&self) -> String {
        let mut srv = server();
        current_version(&mut srv, &self.store, CDS_PATH, request(CDS, "", "", &[]))
    }
}

#[test]
fn a_rejected_update_is_not_resent_in_a_loop() {
    let mut w = World::new(CDS);
    w.client
        .set_validator(Box::new(|_: &str, _: &str, b: &Bytes| {
            if b.windows(3).any(|x| x == b"bad") {
                Err("bad".to_string())
            } else {
                Ok(())
            }
        }));
    w.store.set(CDS, "a", body("a", "1")).unwrap();
    w.client.subscribe(&[]).unwrap();
    w.run(3);
    w.store.set(CDS, "a", body("a", "bad")).unwrap();
    w.run(1);
    assert_eq!(w.answers_200, 2);
    assert!(w
        .client_events
        .iter()
        .any(|e| matches!(e, ClientEvent::Nacked { .. })));
    w.run(120);
    assert_eq!(w.answers_200, 2, "the NACKed version is held, not resent");
    assert_eq!(*w.client.resource("a").unwrap().body(), body("a", "1"));
    w.store.set(CDS, "a", body("a", "2")).unwrap();
    w.run(2);
    assert_eq!(w.answers_200, 3);
    assert_eq!(*w.client.resource("a").unwrap().body(), body("a", "2"));
}

#[test]
fn an_eds_subscription_change_during_a_long_poll() {
    let mut w = World::new(EDS);
    w.store.set(EDS, "x", body("x", "1")).unwrap();
    w.store.set(EDS, "y", body("y", "1")).unwrap();
    w.client.subscribe(&["x"]).unwrap();
    w.run(5);
    assert_eq!(w.held(), vec!["x"]);
    w.client.subscribe(&["y"]).unwrap();
    w.run(1);
    assert_eq!(w.held(), vec!["x", "y"], "superseded the long poll");
}

/// Whatever arrives (method, path, body), the server answers with a status and never
/// panics; the client takes any status and body the same way.
#[test]
fn arbitrary_requests_and_answers_never_panic() {
    fn prop(path_pick: u8, body: String, raw: Vec<u8>, status: u16) -> bool {
        let store = store();
        let mut srv = server();
        let paths = [CDS_PATH, EDS_PATH, "/v3/discovery:aggregated", "/", ""];
        let path = paths[path_pick as usize % paths.len()];
        let a = srv.handle_request(t(0), "POST", path, body.as_bytes(), t(0));
        let b = srv.handle_request(t(0), "POST", path, &raw, t(0));
        let mut answered = Vec::new();
        while let Some((id, answer)) = srv.poll_response(t(0), &store) {
            if ![200, 304, 400, 404, 405].contains(&answer.status) {
                return false;
            }
            answered.push(id);
        }
        answered.sort();
        if answered != vec![a, b] {
            return false;
        }
        let mut cfg = RestConfig::new(CDS, node(), Duration::from_secs(1));
        cfg.client.does_not_exist_timeout = None;
        let mut client = RestClient::new(cfg, codec()).unwrap();
        client.subscribe(&[]).unwrap();
        for (i, input) in [body.as_bytes(), &raw[..]].into_iter().enumerate() {
            let now = t(100 * (i as u64 + 1));
            let req = client.poll_request(now).unwrap();
            client.handle_response(now, req.id, status, input);
            while client.poll_event().is_some() {}
        }
        true
    }
    quickcheck::QuickCheck::new().quickcheck(prop as fn(u8, String, Vec<u8>, u16) -> bool);
}

#[test]
fn unknown_request_fields_are_400_unless_ignored() {
    let store = store();
    let body = br#"{"typeUrl": "type.googleapis.com/envoy.config.cluster.v3.Cluster",
 "node": {"id": "n"}, "fieldFromTheFuture": 1}"#;
    let mut strict = server();
    strict.handle_request(t(0), "POST", CDS_PATH, body, t(0));
    let (_, answer) = strict.poll_response(t(0), &store).unwrap();
    assert_eq!(answer.status, 400);
    assert!(answer.body.contains("line 2"), "{}", answer.body);
    assert!(
        answer.body.contains("fieldFromTheFuture"),
        "{}",
        answer.body
    );
    let mut lenient = RestServer::new(
        {
            let mut c = RestServerConfig::default();
            c.ignore_unknown_fields = true;
            c
        },
        codec(),
    );
    lenient.handle_request(t(0), "POST", CDS_PATH, body, t(0));
    let (_, answer) = lenient.poll_response(t(0), &store).unwrap();
    assert_eq!(ok_response(&answer).type_url, CDS);
}
