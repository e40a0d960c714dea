//! Mutation fuzzing, bounded in time, run by `make test`: the config parser + validator (and
//! what runs after them: the engine's compile and the canonical YAML round trip) and the job
//! request decoder + checks must never panic on any input. Inputs are the seed configs and
//! sample requests, mutated by byte flips, splices of other inputs, deletions, duplications
//! and insertions of tokens the grammars care about. A deterministic xorshift drives it, so
//! a failure is reproducible from the printed seed.
//!
//! `BERTH_FUZZ_SECS` (default 8) bounds each target; `BERTH_FUZZ_SEED` replays a run.

use std::time::{Duration, Instant};

use app::config::parse::{parse, Format};
use app::config::validate::validate;
use app::config::yaml::to_canonical_yaml;
use app::jobs::JobRequest;

const SEED_CONFIG: &str = include_str!("../../app/src/config/testdata/seed_example.yaml");
const GPU_CONFIG: &str = "resource_flavors:\n  - name: local\n  - name: spot\n    selector:\n      - key: market\n        operator: in\n        values: [spot]\nresource_queues:\n  - name: default\n    preemption: {within_resource_queue: lower_priority}\n    resource_groups:\n      - covered_resources: [cpu, gpu, memory_gb]\n        flavors:\n          - name: local\n            resources: [{name: cpu, nominal_quota: 4}, {name: gpu, nominal_quota: 0}]\n          - name: spot\nscheduling_rules:\n  - resource_queue: default\n    selector: [{key: team, operator: notin, values: [x]}]\n    priority_policy: {default: 10, min: 0, max: 100, on_violation: clamp}\n  - resource_queue: default\n";
const REQUESTS: [&str; 3] = [
    r#"{"name":"train","entrypoint":"python train.py","runtime_env":{"working_dir":"/tmp","env_vars":{"A":"1"}},"labels":{"team":"vision"},"priority":5,"resources":{"cpu":2,"gpu":1,"memory_gb":8,"custom":{"accel":1}},"timeout_s":60,"max_retries":2,"outputs":["out.txt"]}"#,
    r#"{"entrypoint":"true","resources":{"cpu":0.5}}"#,
    r#"{"entrypoint":"sleep 1","resources":{"memory_gb":1e-3},"labels":{},"priority":-3}"#,
];
const CONFIG_TOKENS: [&str; 24] = [
    ":", "- ", "\n", "\n  ", "\n    - ", "[", "]", "{", "}", ",", "name: ", "nominal_quota: -1", "nominal_quota: 1e309",
    "operator: exists", "values: []", "resource_queue: nowhere", "&a ", "*a", "!!binary ", "~", "null", "\"\\u0000\"",
    "ééé", "999999999999999999999999",
];
const JSON_TOKENS: [&str; 16] = [
    "\"", ":", ",", "{", "}", "[", "]", "null", "-1", "1e400", "NaN", "\"cpu\":", "\"custom\":{\"x\":-2}", "\"\\ud800\"", "0.0000001", "18446744073709551616",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Values that keep the structure but test the meaning: names that exist or not, numbers
/// out of range, enum words in the wrong place.
const WORDS: [&str; 22] = [
    "default", "research", "spot", "local", "nowhere", "cpu", "gpu", "memory_gb", "-1", "0", "0.5", "1e9", "NaN", "lower_priority",
    "never", "in", "notin", "exists", "reject", "clamp", "", "x y",
];

/// One to three random edits of `base`, at char boundaries. Two inputs in three only swap
/// words, which keeps them parseable so the validator (not only the parser) sees them; the
/// third gets structural edits drawing on `corpus` and `tokens`.
fn mutate(rng: &mut Rng, base: &str, corpus: &[&str], tokens: &[&str]) -> String {
    let mut s: Vec<char> = base.chars().collect();
    let structural = rng.below(3) == 0;
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(s.len() + 1);
        if !structural {
            // The word around `at`, if any, becomes another word.
            let word = |c: &char| c.is_alphanumeric() || *c == '_' || *c == '.' || *c == '-';
            let (mut a, mut b) = (at.min(s.len()), at.min(s.len()));
            while a > 0 && word(&s[a - 1]) {
                a -= 1;
            }
            while b < s.len() && word(&s[b]) {
                b += 1;
            }
            // Only values (after `:`, `[`, `,` or `- `): a renamed key is just an unknown field.
            let before = s[..a].iter().rev().find(|c| **c != ' ').copied();
            if a < b && matches!(before, Some(':' | '[' | ',' | '-')) {
                s.splice(a..b, WORDS[rng.below(WORDS.len())].chars());
            }
            continue;
        }
        match rng.below(6) {
            0 if !s.is_empty() => {
                let end = (at + 1 + rng.below(16)).min(s.len());
                s.drain(at.min(end)..end);
            }
            1 if !s.is_empty() => {
                let end = (at + 1 + rng.below(40)).min(s.len());
                let piece: Vec<char> = s[at.min(end)..end].to_vec();
                let to = rng.below(s.len() + 1);
                s.splice(to..to, piece);
            }
            2 => {
                let other: Vec<char> = corpus[rng.below(corpus.len())].chars().collect();
                let from = rng.below(other.len());
                let piece = &other[from..(from + rng.below(60)).min(other.len())];
                s.splice(at..at, piece.iter().copied());
            }
            3 if !s.is_empty() => {
                let i = at.min(s.len() - 1);
                s[i] = char::from_u32(rng.below(0x3000) as u32).unwrap_or('?');
            }
            _ => {
                let t: Vec<char> = tokens[rng.below(tokens.len())].chars().collect();
                s.splice(at..at, t);
            }
        }
    }
    s.into_iter().collect()
}

fn budget() -> Duration {
    Duration::from_secs_f64(std::env::var("BERTH_FUZZ_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(8.0))
}

fn seed() -> u64 {
    std::env::var("BERTH_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0x9e37_79b9, |d| d.as_nanos() as u64) | 1
    })
}

/// Runs `check` on mutations of `corpus` until the budget is spent; returns (inputs, slowest).
fn run(name: &str, corpus: &[&str], tokens: &[&str], check: impl Fn(&str) -> bool) {
    let seed = seed();
    let mut rng = Rng(seed);
    let (start, mut n, mut accepted, mut slowest) = (Instant::now(), 0u64, 0u64, Duration::ZERO);
    // Mutations stack: a survivor of one round may be mutated again.
    let mut pool: Vec<String> = corpus.iter().map(|s| s.to_string()).collect();
    while start.elapsed() < budget() {
        let base = pool[rng.below(pool.len())].clone();
        let input = mutate(&mut rng, &base, corpus, tokens);
        let t = Instant::now();
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&input))).unwrap_or_else(|_| panic!("{name}: panic on input (BERTH_FUZZ_SEED={seed}):\n{input:?}"));
        slowest = slowest.max(t.elapsed());
        n += 1;
        if ok {
            accepted += 1;
            if pool.len() < 256 {
                pool.push(input);
            }
        }
    }
    eprintln!("fuzz {name}: {n} inputs in {:.1} s ({accepted} parsed), slowest {:.2} ms, no panic (BERTH_FUZZ_SEED={seed})", start.elapsed().as_secs_f64(), slowest.as_secs_f64() * 1e3);
    assert!(n > 100, "{name}: too few inputs tried");
}

#[test]
fn config_parser_and_validator_never_panic() {
    run("config", &[SEED_CONFIG, GPU_CONFIG], &CONFIG_TOKENS, |text| {
        for format in [Format::Yaml, Format::Json] {
            if let Ok(config) = parse(text, format) {
                let report = validate(&config);
                if !report.has_errors() {
                    // What an apply does next: compile for the engine, store canonical YAML.
                    let _ = server::engine::compile(&config);
                    let canonical = to_canonical_yaml(&config);
                    let again = parse(&canonical, Format::Yaml).unwrap_or_else(|p| panic!("canonical YAML does not parse: {p:?}\n{canonical}"));
                    assert_eq!(again, config, "canonical YAML round trip changed the config");
                }
                return true;
            }
        }
        false
    });
}

#[test]
fn job_request_decoder_and_checks_never_panic() {
    run("job request", &REQUESTS, &JSON_TOKENS, |text| match serde_json::from_str::<JobRequest>(text) {
        Ok(req) => {
            let _ = server::services::request::check(&req);
            true
        }
        Err(_) => false,
    });
}
