//! Bad input never panics: truncated and mutated HCL and JSON, wrong types, huge numbers.

use caravan_jobspec::{ParseOptions, parse_hcl, parse_job, parse_json, render_json, validate};

fn example(name: &str) -> String {
    let path = format!("{}/../../examples/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Runs everything downstream of a successful parse too, so that odd-but-accepted input
/// cannot panic later in validation or rendering.
fn exercise(body: &[u8]) {
    if let Ok(p) = parse_job(body, &ParseOptions::default()) {
        let _ = validate(&p.job);
        let _ = render_json(&p.job);
    }
}

/// A small deterministic generator, so that a failure reproduces.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn every_prefix_of_the_examples() {
    for name in ["hello.hcl", "batch.hcl", "system.hcl", "hello.json"] {
        let text = example(name);
        for end in 0..=text.len() {
            if text.is_char_boundary(end) {
                exercise(&text.as_bytes()[..end]);
            }
        }
    }
}

#[test]
fn random_byte_mutations() {
    let inputs: Vec<Vec<u8>> = ["hello.hcl", "batch.hcl", "system.hcl", "hello.json"]
        .iter()
        .map(|n| example(n).into_bytes())
        .collect();
    let alphabet = b"{}[]()\"'=,:.$%\\\n -01239eE+#/*<>!?abcxyz\x00\xff";
    let mut rng = XorShift(0x5eed_cafe_f00d_0001);
    for round in 0..3000 {
        let mut body = inputs[round % inputs.len()].clone();
        for _ in 0..1 + rng.below(4) {
            if body.is_empty() {
                break;
            }
            let at = rng.below(body.len());
            match rng.below(3) {
                0 => body[at] = alphabet[rng.below(alphabet.len())],
                1 => {
                    body.remove(at);
                }
                _ => body.insert(at, alphabet[rng.below(alphabet.len())]),
            }
        }
        exercise(&body);
    }
}

#[test]
fn wrong_types_everywhere_in_json() {
    let base: serde_json::Value = serde_json::from_str(&example("hello.json")).expect("valid");
    let replacements = [
        serde_json::json!(null),
        serde_json::json!(true),
        serde_json::json!(-1),
        serde_json::json!(1.5e300),
        serde_json::json!(u64::MAX),
        serde_json::json!("x"),
        serde_json::json!([]),
        serde_json::json!({}),
    ];
    let mut paths = Vec::new();
    collect_paths(&base, String::new(), &mut paths);
    for path in &paths {
        for r in &replacements {
            let mut v = base.clone();
            if let Some(slot) = v.pointer_mut(path) {
                *slot = r.clone();
            }
            exercise(v.to_string().as_bytes());
        }
    }
    assert!(paths.len() > 10, "walked {} paths", paths.len());
}

fn collect_paths(v: &serde_json::Value, at: String, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, child) in m {
                let p = format!("{at}/{k}");
                out.push(p.clone());
                collect_paths(child, p, out);
            }
        }
        serde_json::Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                collect_paths(child, p, out);
            }
        }
        _ => {}
    }
}

#[test]
fn huge_and_hostile_numbers() {
    for value in [
        "99999999999999999999999999",
        "-99999999999999999999",
        "1e400",
        "-0",
        "0.0000001",
        "1e2",
    ] {
        let hcl = format!(
            "job \"x\" {{\n  priority = {value}\n  group \"g\" {{\n    count = {value}\n    task \"t\" {{\n      driver = \"mock\"\n      kill_timeout = {value}\n      resources {{\n        cpu = {value}\n        memory = {value}\n      }}\n    }}\n  }}\n}}\n"
        );
        exercise(hcl.as_bytes());
        let json = format!(
            r#"{{"Job":{{"ID":"x","Priority":{value},"TaskGroups":[{{"Name":"g","Count":{value},"Tasks":[{{"Name":"t","Driver":"mock","KillTimeout":{value},"Resources":{{"CPU":{value},"MemoryMB":{value}}}}}]}}]}}}}"#
        );
        exercise(json.as_bytes());
    }
    let huge_duration = parse_hcl(
        "job \"x\" {\n  group \"g\" {\n    task \"t\" {\n      driver = \"mock\"\n      kill_timeout = \"9999999999h\"\n    }\n  }\n}\n",
        &ParseOptions::default(),
    );
    assert!(
        huge_duration.is_err(),
        "an overflowing duration is an error, not a wrap"
    );
}

#[test]
fn deep_nesting_and_odd_text() {
    let deep = format!("{}{}", "[".repeat(100), "]".repeat(100));
    exercise(format!(r#"{{"Job":{{"ID":"x","TaskGroups":{deep}}}}}"#).as_bytes());
    exercise(format!("job \"x\" {{\n  meta = {deep}\n}}\n").as_bytes());
    exercise(b"\xff\xfe\x00garbage");
    exercise(b"");
    exercise(b"   ");
    exercise("job \"\u{1F680}\" {\n}\n".as_bytes());
    let r = parse_json(b"{\"Job\": null}", &ParseOptions::default());
    assert!(r.is_err_and(|e| e.to_string().contains("Job: must be a JSON object")));
}

/// A job whose `meta` object holds `keys` entries, then `extra` (one more line, if any).
fn job_with_meta(keys: usize, extra: &str) -> String {
    let mut text = String::from("job \"many\" {\n  meta = {\n");
    for i in 0..keys {
        text.push_str(&format!("    k{i} = \"v{i}\"\n"));
    }
    text.push_str(extra);
    text.push_str("  }\n  group \"g\" {\n    task \"t\" {\n      driver = \"raw_exec\"\n");
    text.push_str("      config { command = \"/bin/true\" }\n    }\n  }\n}\n");
    text
}

#[test]
fn a_large_object_keeps_every_key() {
    let parsed = parse_hcl(&job_with_meta(20_000, ""), &ParseOptions::default()).unwrap();
    assert_eq!(parsed.job.meta.len(), 20_000);
    assert_eq!(parsed.job.meta["k19999"], "v19999");
}

#[test]
fn a_key_repeated_far_apart_is_refused() {
    for extra in ["    k3 = \"again\"\n", "    \"k3\" = \"again\"\n"] {
        let err = parse_hcl(&job_with_meta(20_000, extra), &ParseOptions::default())
            .expect_err("a repeated key")
            .to_string();
        assert!(
            err.contains("redefined object key") || err.contains("duplicate object key \"k3\""),
            "{extra:?}: {err}"
        );
    }
    // The same name as a string twice is caught by the parser itself.
    let twice = "    \"dup\" = \"a\"\n    \"dup\" = \"b\"\n";
    let err = parse_hcl(&job_with_meta(10, twice), &ParseOptions::default())
        .expect_err("a repeated string key")
        .to_string();
    assert!(err.contains("redefined object key"), "{err}");
}

/// The HCL fuzz target's committed corpus (`fuzz/corpus/hcl_job`) through the parser
/// and evaluator, without the fuzzer: none of it panics, and it answers quickly.
#[test]
fn the_hcl_fuzz_corpus_parses_without_panicking() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/hcl_job");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let options = ParseOptions::default();
    let mut seen = 0;
    for entry in entries {
        let path = entry.expect("corpus entry").path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let _ = caravan_jobspec::parse_hcl(&text, &options);
        let _ = caravan_jobspec::hcl_to_nomad_json(&text, false, &options);
        seen += 1;
    }
    assert!(
        seen > 100,
        "only {seen} corpus files read from {}",
        dir.display()
    );
}
