use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::config::fixtures::*;
use crate::config::problem::Severity;

fn paths(problems: &[Problem]) -> Vec<&str> {
    problems.iter().map(|p| p.path.as_str()).collect()
}

#[test]
fn empty_and_null_documents_are_the_empty_config() {
    for text in ["", "   \n\t\n", "# only a comment\n", "~", "null", "---\n", "{}", " {} "] {
        assert_eq!(parse_auto(text), Ok(SchedulerConfig::default()), "{text:?}");
    }
    assert_eq!(parse("", Format::Json), Ok(SchedulerConfig::default()));
    assert_eq!(from_json_value(&json!(null)), Ok(SchedulerConfig::default()));
}

#[test]
fn seed_example_parses_as_yaml_and_as_json() {
    assert_eq!(parse_auto(SEED_EXAMPLE), Ok(seed_config()));
    let json_text = serde_json::to_string_pretty(&seed_config()).unwrap();
    assert_eq!(detect_format(&json_text), Format::Json);
    assert_eq!(parse_auto(&json_text), Ok(seed_config()));
    assert_eq!(from_json_value(&serde_json::to_value(seed_config()).unwrap()), Ok(seed_config()));
}

#[test]
fn every_unknown_key_is_reported_with_its_path() {
    let text = "\
bogus_top: 1
resource_flavors:
  - name: spot
    colour: red
    selector:
      - key: market
        operator: in
        vals: [spot]
    advanced_instance_config:
      anything: goes
      nested: {deep: true}
resource_queues:
  - name: research
    preemption:
      within_queue: never
    resource_groups:
      - covered_resources: [gpu]
        flavors: []
      - covered_resources: [cpu]
        bogus: 1
        flavors:
          - name: spot
            resources:
              - name: cpu
                nominal_qota: 4
scheduling_rules:
  - resource_queue: research
    priority_policy:
      dflt: 1
";
    let problems = parse(text, Format::Yaml).unwrap_err();
    assert_eq!(
        paths(&problems),
        [
            "bogus_top",
            "resource_flavors[0].colour",
            "resource_flavors[0].selector[0].vals",
            "resource_queues[0].preemption.within_queue",
            "resource_queues[0].resource_groups[1].bogus",
            "resource_queues[0].resource_groups[1].flavors[0].resources[0].nominal_qota",
            "scheduling_rules[0].priority_policy.dflt",
        ]
    );
    assert!(problems.iter().all(|p| p.severity == Severity::Error));
    assert_eq!(problems[4].message, "unknown field `bogus`; expected one of covered_resources, flavors");
    assert_eq!(
        problems[5].message,
        "unknown field `nominal_qota` (did you mean `nominal_quota`?); \
         expected one of name, nominal_quota, borrowing_limit, lending_limit"
    );
    assert!(problems[0].message.contains("expected one of resource_flavors, resource_queues, scheduling_rules"));
}

#[test]
fn unknown_keys_in_json_and_json_values_too() {
    let v = json!({"resource_queues": [{"name": "q", "extra": 1, "resource_groups": [{"covered_resources": [], "flavors": [], "x": 2}]}]});
    let want = ["resource_queues[0].extra", "resource_queues[0].resource_groups[0].x"];
    assert_eq!(paths(&from_json_value(&v).unwrap_err()), want);
    assert_eq!(paths(&parse(&v.to_string(), Format::Json).unwrap_err()), want);
}

#[test]
fn type_errors_have_a_path_a_plain_message_and_a_position() {
    let cases = [
        (
            "resource_queues:\n  - name: q\n    resource_groups:\n      - covered_resources: [gpu]\n        flavors:\n          - name: f\n            resources:\n              - name: gpu\n                nominal_quota: lots\n",
            "resource_queues[0].resource_groups[0].flavors[0].resources[0].nominal_quota",
            "invalid type: string \"lots\", expected a number",
            Some((9, 32)),
        ),
        (
            "resource_flavors:\n  - name: f\n    selector:\n      - key: k\n        operator: maybe\n",
            "resource_flavors[0].selector[0].operator",
            "unknown variant `maybe`, expected one of `in`, `not_in`, `exists`, `does_not_exist`",
            Some((5, 19)),
        ),
        ("resource_flavors:\n  - selector: []\n", "resource_flavors[0]", "missing field `name`", Some((2, 5))),
        ("resource_flavors: spot\n", "resource_flavors", "invalid type: string \"spot\", expected a sequence", Some((1, 19))),
        ("hello\n", "", "invalid type: string \"hello\", expected a mapping", Some((1, 1))),
        (
            "scheduling_rules:\n  - resource_queue: q\n    priority_policy: {min: 1.5}\n",
            "scheduling_rules[0].priority_policy.min",
            "invalid type: floating point `1.5`, expected a whole number",
            Some((3, 28)),
        ),
    ];
    for (text, path, message, pos) in cases {
        let problems = parse(text, Format::Yaml).unwrap_err();
        assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        let p = &problems[0];
        assert_eq!((p.path.as_str(), p.message.as_str()), (path, message), "{text}");
        assert_eq!(p.line.zip(p.column), pos, "{text}");
    }
}

#[test]
fn unknown_keys_before_a_type_error_are_kept() {
    let text = "resource_flavors:\n  - name: f\n    typo: 1\n  - name: [not, a, string]\n";
    let problems = parse(text, Format::Yaml).unwrap_err();
    assert_eq!(paths(&problems), ["resource_flavors[0].typo", "resource_flavors[1].name"]);
}

#[test]
fn syntax_errors_are_one_problem_with_line_and_column() {
    let cases = [
        ("resource_flavors:\n  - name: spot\n   bad indent: x\n", Format::Yaml, 3),
        ("resource_flavors: [spot\n", Format::Yaml, 2),
        ("a: b\n\tc: d\n", Format::Yaml, 2),
        ("{\"resource_flavors\": [}\n", Format::Json, 1),
        ("{\"resource_flavors\": []\n\n", Format::Json, 3),
        ("{} trailing", Format::Json, 1),
    ];
    for (text, format, line) in cases {
        let problems = parse(text, format).unwrap_err();
        assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        let p = &problems[0];
        assert_eq!(p.path, "", "{text}");
        assert_eq!(p.line, Some(line), "{text}: {p:?}");
        assert!(p.column.is_some_and(|c| c >= 1), "{text}: {p:?}");
        assert!(p.message.starts_with("invalid "), "{p:?}");
        assert!(!p.message.contains(" at line "), "{p:?}");
    }
}

#[test]
fn json_type_errors_have_paths() {
    let text = r#"{"resource_queues": [{"name": "q", "preemption": {"within_resource_queue": "sometimes"}}]}"#;
    let problems = parse_auto(text).unwrap_err();
    assert_eq!(paths(&problems), ["resource_queues[0].preemption.within_resource_queue"]);
    assert!(problems[0].message.contains("expected `never` or `lower_priority`"), "{problems:?}");
    assert_eq!(problems[0].line, Some(1));
}

#[test]
fn fields_probe_reads_the_model() {
    assert_eq!(schema::fields_of::<crate::config::model::MatchExpression>(), ["key", "operator", "values"]);
}

proptest! {
    #[test]
    fn parse_never_panics(text in any::<String>()) {
        let _ = parse_auto(&text);
        let _ = parse(&text, Format::Json);
    }

    #[test]
    fn parse_never_panics_on_yamlish_text(text in "[a-z_:\\- \\[\\]{}\n#&*!|>'\"0-9.,~]{0,80}") {
        let _ = parse(&text, Format::Yaml);
    }
}
