use proptest::prelude::*;
use serde_json::json;

use super::to_canonical_yaml;
use crate::config::fixtures::*;
use crate::config::model::*;
use crate::config::parse::{parse, Format};

#[test]
fn seed_example_round_trips_byte_for_byte() {
    let cfg = parse(SEED_EXAMPLE, Format::Yaml).expect("seed example parses");
    assert_eq!(cfg, seed_config());
    assert_eq!(to_canonical_yaml(&cfg), SEED_EXAMPLE);
}

/// Each seed example goes parse → emit → parse unchanged through both emitters: the canonical
/// one (stored versions, diffs) and the YAML crate's own, which the REST `?format=yaml` answers
/// and the CLI's `-o yaml` use.
#[test]
fn seed_examples_round_trip_through_both_emitters() {
    let examples = [("seed example", SEED_EXAMPLE.to_string()), ("initial config", to_canonical_yaml(&SchedulerConfig::initial()))];
    for (name, text) in examples {
        let cfg = parse(&text, Format::Yaml).unwrap_or_else(|p| panic!("{name} parses: {p:?}"));
        let canonical = to_canonical_yaml(&cfg);
        assert_eq!(canonical, text, "{name}: the canonical form is the hand-written one");
        assert_eq!(parse(&canonical, Format::Yaml).as_ref(), Ok(&cfg), "{name}: canonical round trip");
        let generic = serde_norway::to_string(&cfg).expect("a config serializes");
        assert_eq!(parse(&generic, Format::Yaml).as_ref(), Ok(&cfg), "{name}: generic round trip:\n{generic}");
    }
}

#[test]
fn empty_config_is_an_empty_map() {
    assert_eq!(to_canonical_yaml(&SchedulerConfig::default()), "{}\n");
    let empty_sections = SchedulerConfig { resource_flavors: Some(vec![]), ..Default::default() };
    assert_eq!(to_canonical_yaml(&empty_sections), "resource_flavors: []\n");
}

#[test]
fn initial_config_layout() {
    let want = "\
resource_flavors:
  - name: local
resource_queues:
  - name: default
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors:
          - name: local
scheduling_rules:
  - resource_queue: default
";
    assert_eq!(to_canonical_yaml(&SchedulerConfig::initial()), want);
}

#[test]
fn strings_are_plain_only_when_unambiguous() {
    let cases = [
        ("spot", "spot"),
        ("us-east-1", "us-east-1"),
        ("node.kubernetes.io/zone", "node.kubernetes.io/zone"),
        ("my queue", "my queue"),
        ("", r#""""#),
        ("true", r#""true""#),
        ("no", r#""no""#),
        ("Null", r#""Null""#),
        ("~", r#""~""#),
        ("1", r#""1""#),
        ("1.5", r#""1.5""#),
        ("0x1", r#""0x1""#),
        (".inf", r#"".inf""#),
        (" a", r#"" a""#),
        ("a ", r#""a ""#),
        ("a: b", r#""a: b""#),
        ("a#b", r#""a#b""#),
        ("a,b", r#""a,b""#),
        ("[x]", r#""[x]""#),
        ("{x}", r#""{x}""#),
        ("-x", r#""-x""#),
        ("é", r#""é""#),
        ("say \"hi\"\n", r#""say \"hi\"\n""#),
        ("\u{7f}\u{85}\u{2028}", r#""\u007F\u0085\u2028""#),
    ];
    for (input, want) in cases {
        let cfg = SchedulerConfig { resource_flavors: Some(vec![flavor(input, None)]), ..Default::default() };
        let text = to_canonical_yaml(&cfg);
        assert_eq!(text, format!("resource_flavors:\n  - name: {want}\n"), "for {input:?}");
        assert_eq!(parse(&text, Format::Yaml).unwrap(), cfg, "round trip of {input:?}");
    }
}

#[test]
fn numbers_are_shortest_and_integral_quotas_have_no_fraction() {
    let cases = [
        (64.0, "64"),
        (0.0, "0"),
        (-0.0, "0"),
        (0.5, "0.5"),
        (1.125, "1.125"),
        (1e300, "1e300"),
        (1e-7, "1e-7"),
        (f64::INFINITY, ".inf"),
        (f64::NEG_INFINITY, "-.inf"),
    ];
    for (x, want) in cases {
        let q = ResourceQuotaSpec { nominal_quota: Some(x), ..quota("gpu", None) };
        let text = to_canonical_yaml(&one_quota(q));
        assert!(text.ends_with(&format!("nominal_quota: {want}\n")), "{x}: {text}");
    }
}

#[test]
fn free_form_config_keeps_ints_and_floats_apart_and_nests_as_block_maps() {
    let extra = json!({"instance_type": "m5.large", "count": 2, "ratio": 1.0, "tags": {"team": "ml", "on": true},
                       "zones": ["a", "b"], "disks": [{"size": 100}], "none": null, "empty": {}});
    let cfg = SchedulerConfig {
        resource_flavors: Some(vec![ResourceFlavor {
            advanced_instance_config: extra.as_object().cloned(),
            ..flavor("spot", None)
        }]),
        ..Default::default()
    };
    let want = "\
resource_flavors:
  - name: spot
    advanced_instance_config:
      instance_type: m5.large
      count: 2
      ratio: 1.0
      tags:
        team: ml
        \"on\": true
      zones: [a, b]
      disks:
        - size: 100
      none: null
      empty: {}
";
    let text = to_canonical_yaml(&cfg);
    assert_eq!(text, want);
    assert_eq!(parse(&text, Format::Yaml).unwrap(), cfg);
}

#[test]
fn long_free_form_keys_use_explicit_form() {
    let key = "k".repeat(1500);
    let mut map = serde_json::Map::new();
    map.insert(key.clone(), json!({"a": 1}));
    let cfg = SchedulerConfig {
        resource_flavors: Some(vec![ResourceFlavor { advanced_instance_config: Some(map), ..flavor("f", None) }]),
        ..Default::default()
    };
    let text = to_canonical_yaml(&cfg);
    assert!(text.contains(&format!("? {key}\n      :\n        a: 1\n")), "{text}");
    assert_eq!(parse(&text, Format::Yaml).unwrap(), cfg);
}

fn one_quota(q: ResourceQuotaSpec) -> SchedulerConfig {
    SchedulerConfig {
        resource_queues: Some(vec![queue("q", vec![group(&["gpu"], vec![flavor_quota("f", vec![q])])])]),
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn canonical_yaml_is_the_inverse_of_parse(cfg in config_strategy()) {
        let text = to_canonical_yaml(&cfg);
        let back = parse(&text, Format::Yaml);
        prop_assert_eq!(back.as_ref(), Ok(&cfg), "text:\n{}", text);
        // And canonical really is canonical: emitting again changes nothing.
        prop_assert_eq!(to_canonical_yaml(back.as_ref().unwrap()), text);
    }
}
