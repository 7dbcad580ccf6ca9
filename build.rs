//! Compiles the wire contract in `proto/` into Rust: protox (a pure-Rust
//! protobuf compiler, so no `protoc` is needed) parses every `.proto` file
//! into a descriptor set, tonic-prost-build generates the prost messages and
//! the tonic client and server from it, and the encoded descriptor set is
//! written beside them for gRPC server reflection.

use std::{
    env, fs, io,
    path::{Path, PathBuf},
    process::ExitCode,
};

/// The root of the proto tree; also the include path, so files import each
/// other as `workqueue/v1/<file>.proto` (the layout buf.yaml lints).
const PROTO_DIR: &str = "proto";

/// The encoded `FileDescriptorSet` in `OUT_DIR`, read by `src/grpc/pb.rs`.
const DESCRIPTOR_FILE: &str = "workqueue_descriptor.bin";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    // A directory here makes cargo rerun when anything under it changes.
    println!("cargo:rerun-if-changed={PROTO_DIR}");
    println!("cargo:rerun-if-changed=build.rs");

    pack_relative_relocations();

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);

    let mut files = Vec::new();
    collect_protos(Path::new(PROTO_DIR), &mut files).map_err(|err| format!("listing {PROTO_DIR}/: {err}"))?;
    if files.is_empty() {
        return Err(format!("no .proto files under {PROTO_DIR}/"));
    }
    files.sort();

    let mut compiler = protox::Compiler::new([PROTO_DIR]).map_err(|err| protox_error(&err))?;
    // Source info carries the comments into the generated docs and into
    // reflection (grpcurl describe); imports make the set self-contained.
    compiler.include_source_info(true).include_imports(true);
    for file in &files {
        compiler.open_file(file).map_err(|err| protox_error(&err))?;
    }

    let descriptor_path = out_dir.join(DESCRIPTOR_FILE);
    fs::write(&descriptor_path, compiler.encode_file_descriptor_set())
        .map_err(|err| format!("writing {}: {err}", descriptor_path.display()))?;

    // google.protobuf.* map to prost-types (prost-build's default extern
    // paths), so Duration and Timestamp are prost_types::{Duration, Timestamp}.
    // Our codec: a request that does not decode is the caller's fault
    // (INVALID_ARGUMENT), where tonic-prost's answers INTERNAL.
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .codec_path("crate::grpc::codec::WireCodec")
        .compile_fds(compiler.file_descriptor_set())
        .map_err(|err| format!("generating Rust from {PROTO_DIR}/: {err}"))
}

/// In optimised builds for Linux, asks the linker for packed relative
/// relocations (`DT_RELR`). The binary is position-independent, so every
/// pointer in its static data is relocated at start; as `RELA` entries, 24
/// bytes each, they made a 0.6 MB table that the dynamic loader reads, and
/// so keeps resident, in every process; packed, it is 8.6 KB. Needs lld 15
/// (rustc's own, its default linker here) or GNU ld 2.38 to link, and glibc
/// 2.36 to run, which the images' Debian 12 has.
fn pack_relative_relocations() {
    let gnu = env::var("CARGO_CFG_TARGET_ENV").is_ok_and(|target_env| target_env == "gnu");
    if optimised_for_linux() && gnu {
        println!("cargo:rustc-link-arg-bin=workqueue-sidecar=-Wl,-z,pack-relative-relocs");
    }
}

/// A release build for Linux: the one the binary's link settings are for.
fn optimised_for_linux() -> bool {
    env::var("PROFILE").is_ok_and(|profile| profile == "release")
        && env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux")
}

/// Appends every `.proto` file under `dir`, recursively.
fn collect_protos(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_protos(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            files.push(path);
        }
    }
    Ok(())
}

/// Renders a protox error as `file:line:column: message`: its `Debug` form
/// names the location, which its `Display` leaves out.
fn protox_error(err: &protox::Error) -> String {
    format!("compiling {PROTO_DIR}/: {err:?}")
}
