//! Generates the Rust types, and with the `grpc` feature the tonic services,
//! from `proto/caravan/v1`, with the encoded file descriptor set that gRPC
//! reflection serves.

use std::path::PathBuf;

/// The file the descriptor set is written to, beside the generated code.
const DESCRIPTOR_SET: &str = "caravan_descriptor_set.bin";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
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
        .file_descriptor_set_path(out.join(DESCRIPTOR_SET))
        .compile_protos(&files, &[root])?;
    Ok(())
}
