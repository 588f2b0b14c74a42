//! Generates the Rust types, and with the `grpc` feature the tonic services,
//! from `proto/caravan/v1`, with the encoded file descriptor set that gRPC
//! reflection serves.

use std::path::PathBuf;

/// The file the descriptor set is written to, beside the generated code.
const DESCRIPTOR_SET: &str = "caravan_descriptor_set.bin";

/// The generated file of the `caravan.v1` package.
const GENERATED: &str = "caravan.v1.rs";

/// Map fields held as `SmallMap` (src/small_map.rs) rather than `BTreeMap`:
/// maps of one entry per task in what every service caches per placement,
/// and the client's report of task states that becomes one of them.
/// (message, field)
const SMALL_MAPS: &[(&str, &str)] = &[
    ("Allocation", "task_states"),
    ("AllocatedResources", "tasks"),
    ("AllocUpdate", "task_states"),
    ("AllocStatus", "task_states"),
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not when it is compiled: checkouts that
    // share a target directory share this script's binary.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let dir = root.join("caravan/v1");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "proto"))
        .collect();
    files.sort();
    // The directory too, so a new file is compiled.
    println!("cargo:rerun-if-changed={}", dir.display());
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join(if grpc { "grpc" } else { "messages" });
    std::fs::create_dir_all(&out)?;
    tonic_prost_build::configure()
        .out_dir(&out)
        .build_client(grpc)
        .build_server(grpc)
        // Ordered maps keep the scheduler deterministic and encodings stable.
        .btree_map(".")
        // Rarely set, and read only where one allocation is shown or
        // rescheduled: boxed, an allocation held in every cache is 224
        // bytes smaller (the size test in src/lib.rs).
        .boxed(".caravan.v1.Allocation.metrics")
        .boxed(".caravan.v1.Allocation.reschedule_tracker")
        .boxed(".caravan.v1.Allocation.trace_context")
        .file_descriptor_set_path(out.join(DESCRIPTOR_SET))
        .compile_protos(&files, &[root])?;
    let generated = out.join(GENERATED);
    let code = std::fs::read_to_string(&generated)?;
    std::fs::write(&generated, hold_small_maps(&code, SMALL_MAPS)?)?;
    Ok(())
}

/// Rewrites each `(message, field)` of `fields`, a `map<string, Message>`
/// prost generated as a `BTreeMap`, into a repeated field of map entries held
/// by `crate::SmallMap`: the same bytes on the wire, a vector in memory.
fn hold_small_maps(code: &str, fields: &[(&str, &str)]) -> Result<String, String> {
    let mut code = code.to_owned();
    for (message, field) in fields {
        let start = code
            .find(&format!("pub struct {message} {{"))
            .ok_or_else(|| format!("no message {message} in {GENERATED}"))?;
        let end = start + code[start..].find("\n}\n").ok_or("no end to the message")?;
        let decl = format!("pub {field}: ::prost::alloc::collections::BTreeMap<");
        let at = start
            + code[start..end]
                .find(&decl)
                .ok_or_else(|| format!("{message}.{field} is not a map of {GENERATED}"))?;
        // The attribute is the line before the field.
        let attr_end = code[..at].rfind('\n').ok_or("no line before the field")?;
        let attr_start = code[..attr_end].rfind('\n').ok_or("no attribute line")? + 1;
        let line = &code[attr_start..attr_end];
        let indent = line[..line.len() - line.trim_start().len()].to_owned();
        let attr = line.trim();
        let tag = attr
            .strip_prefix("#[prost(btree_map = \"string, message\", tag = \"")
            .and_then(|rest| rest.strip_suffix("\")]"))
            .ok_or_else(|| format!("{message}.{field} is not a map<string, Message>: {attr}"))?;
        // The value type is the second argument of `BTreeMap<…>`.
        let args_start = at + decl.len();
        let args_end = args_start
            + code[args_start..]
                .find(">,")
                .ok_or("no end to the field's type")?;
        let value = code[args_start..args_end]
            .rsplit(',')
            .map(str::trim)
            .find(|t| !t.is_empty())
            .ok_or("no value type")?
            .to_owned();
        let replacement = format!(
            "{indent}#[prost(message, repeated, tag = \"{tag}\")]\n{indent}pub {field}: crate::SmallMap<{value}>,"
        );
        code.replace_range(attr_start..args_end + 2, &replacement);
    }
    Ok(code)
}
