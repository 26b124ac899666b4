use super::*;
use alloc::format;

fn replays(text: &str) {
    let scenario = crate::script::parse(text, "fuzz").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let report = crate::script::run(&scenario);
    let failed = report.lines.iter().find(|l| l.result.is_err());
    assert!(
        report.passed(),
        "{text}\nfailed: {failed:?}\n{:?}",
        report.trailing
    );
}

/// Every generated case replays on the model, and together they cover what the profile
/// offers: both variants, both transports, every type, wildcards, removals, TTLs,
/// aliases, NACKs and reconnects.
#[test]
fn generated_client_scenarios_replay_on_the_model_and_cover_the_profile() {
    let profile = Profile::default();
    let mut all = String::new();
    for seed in 0..300u64 {
        let (shape, ops) = client_case(&profile, seed, 14).unwrap();
        let text = client_scenario(&format!("seed {seed}"), &shape, &ops);
        replays(&text);
        all.push_str(&text);
    }
    for needle in [
        "variant: sotw",
        "variant: delta",
        "transport: ads",
        "transport: CDS",
        "transport: SDS",
        "transport: ECDS",
        "T=VHDS",
        "T=SRDS",
        "T=RTDS",
        "T=LDS",
        "T=RDS",
        "T=EDS",
        "[ttl=3s]",
        "[nobody]",
        "[alias=",
        ",E=*)",
        "disconnect",
        "wait ",
        "client subscribe LDS\n",
        " *\n",
        "client unsubscribe",
        "N=)",
        "R={*}",
    ] {
        assert!(
            all.contains(needle),
            "no generated client scenario has {needle:?}"
        );
    }
    assert!(
        all.lines()
            .any(|l| l.starts_with("S->C") && l.contains(",X={") && !l.contains(",X={}")),
        "no delta removal"
    );
}

#[test]
fn generated_server_scenarios_replay_on_the_model_and_cover_the_profile() {
    let profile = Profile::default();
    let mut all = String::new();
    for seed in 0..300u64 {
        let (shape, ops) = server_case(&profile, seed, 14).unwrap();
        let text = server_scenario(&format!("seed {seed}"), &shape, &ops);
        replays(&text);
        all.push_str(&text);
    }
    for needle in [
        "model: both",
        "variant: sotw",
        "variant: delta",
        "transport: ads",
        "transport: LDS",
        "server remove",
        "[ttl=3s]",
        "[alias=",
        "client reject",
        ",E=*)",
        "disconnect",
        "S->C (R={",
    ] {
        assert!(
            all.contains(needle),
            "no generated server scenario has {needle:?}"
        );
    }
    assert!(
        all.lines()
            .any(|l| l.starts_with("S->C") && l.contains(",X={") && !l.contains(",X={}")),
        "no delta removal"
    );
    // A server's choices are never in a line the real server must match.
    assert!(!all
        .lines()
        .any(|l| l.starts_with("S->C") && l.contains("N=")));
}

/// A profile narrowed to what a peer does gives only cases of that shape.
#[test]
fn a_narrow_profile_gives_narrow_cases() {
    let profile = Profile {
        variants: alloc::vec![Variant::Sotw],
        ads: true,
        per_type: false,
        types: alloc::vec![
            xds_sansio::types::CLUSTER.type_url.into(),
            xds_sansio::types::ENDPOINT.type_url.into(),
            xds_sansio::types::VIRTUAL_HOST.type_url.into(),
        ],
        wildcard: false,
        ttl: false,
        aliases: false,
        follows: Vec::new(),
    };
    for seed in 0..100 {
        let (shape, ops) = client_case(&profile, seed, 12).unwrap();
        assert_eq!(shape.variant, Variant::Sotw);
        assert_eq!(shape.transport, TransportSpec::Ads);
        // VHDS has no SotW method.
        assert!(!shape.types.iter().any(|t| t.contains("VirtualHost")));
        let text = client_scenario("narrow", &shape, &ops);
        assert!(!text.contains("[ttl=") && !text.contains(" *\n"), "{text}");
        replays(&text);
    }
    let nothing = Profile {
        variants: Vec::new(),
        ..Profile::default()
    };
    assert!(client_case(&nothing, 1, 5).is_none());
}

/// What another crate's `cargo fuzz` target does with its input: operations taken from
/// the bytes one after another, each conversation passes on the model.
#[cfg(feature = "arbitrary")]
#[test]
fn arbitrary_input_makes_conversations_that_replay_on_the_model() {
    use arbitrary::{Arbitrary, Unstructured};
    let mut total = 0;
    for seed in 0..200u64 {
        let mut rng = SplitMix(seed);
        let (shape, _) = client_case(&Profile::default(), seed, 0).unwrap();
        let bytes: Vec<u8> = (0..256).map(|_| rng.below(256)).collect();
        let mut u = Unstructured::new(&bytes);
        let mut client_ops = Vec::new();
        while !u.is_empty() && client_ops.len() < 24 {
            let Ok(op) = ClientOp::arbitrary(&mut u) else {
                break;
            };
            client_ops.push(op);
        }
        let mut u = Unstructured::new(&bytes);
        let mut server_ops = Vec::new();
        while !u.is_empty() && server_ops.len() < 24 {
            let Ok(op) = ServerOp::arbitrary(&mut u) else {
                break;
            };
            server_ops.push(op);
        }
        total += client_ops.len() + server_ops.len();
        replays(&client_scenario("arbitrary", &shape, &client_ops));
        replays(&server_scenario("arbitrary", &shape, &server_ops));
    }
    assert!(total > 1000, "{total} operations");
}

#[test]
fn the_same_seed_is_the_same_case() {
    let profile = Profile::default();
    assert_eq!(client_case(&profile, 7, 20), client_case(&profile, 7, 20));
    assert_ne!(client_case(&profile, 7, 20), client_case(&profile, 8, 20));
    assert_eq!(server_case(&profile, 7, 20), server_case(&profile, 7, 20));
}

#[test]
fn shrinking_keeps_what_fails_and_drops_the_rest() {
    let (_, ops) = client_case(&Profile::default(), 3, 30).unwrap();
    let needle = ops[17].clone();
    let shrunk = shrink(&ops, 500, |candidate| candidate.contains(&needle));
    assert_eq!(shrunk, [needle]);
}

/// A client that follows references (gRPC): the application watches the chain's first
/// name; every later link is subscribed while the one before it is held, and the
/// responses use only the chain's names and tags.
#[test]
fn a_following_client_subscribes_down_the_chain() {
    let chain = parse_chain(
        "LDS echo.test l1; RDS route-1 r1; CDS cluster-1 c1 c2 other:c1; EDS cluster-1 e1 e2",
    )
    .unwrap();
    assert_eq!(chain.len(), 4);
    assert_eq!(chain[2].extras, [("other".to_string(), "c1".to_string())]);
    let profile = Profile {
        variants: alloc::vec![Variant::Sotw],
        per_type: false,
        wildcard: false,
        ttl: false,
        aliases: false,
        follows: chain,
        ..Profile::default()
    };
    let mut all = String::new();
    for seed in 0..200u64 {
        let (shape, ops) = client_case(&profile, seed, 14).unwrap();
        let text = client_scenario(&format!("seed {seed}"), &shape, &ops);
        replays(&text);
        for line in text.lines().filter(|l| l.starts_with("S->C")) {
            for name in ["a:", "b:", "c:", "zz:"] {
                assert!(!line.contains(&format!("{{{name}")), "{line}");
            }
        }
        all.push_str(&text);
    }
    for needle in [
        "client subscribe LDS echo.test",
        "client subscribe RDS route-1",
        "client subscribe CDS cluster-1",
        "client subscribe EDS cluster-1",
        "client unsubscribe RDS route-1",
        "other:c1",
        "cluster-1:c2",
        "[type=",
        ",E=*)",
        "disconnect",
    ] {
        assert!(
            all.contains(needle),
            "no following case has {needle:?}\n{}",
            &all[..6000.min(all.len())]
        );
    }
    assert!(parse_chain("LDS echo.test").is_err());
    assert!(parse_chain("XDS a t").is_err());
}
