//! Compiles the uprobes' BPF C (`src/bpf/cuda.bpf.c`) with clang into `$OUT_DIR/cuda.bpf.o`, which the
//! agent embeds and loads through libbpf. Needs clang and libbpf's headers (Debian: clang, libbpf-dev).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "src/bpf/cuda.bpf.c";
    println!("cargo:rerun-if-changed={source}");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("cuda.bpf.o");
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => ("x86", "x86_64-linux-gnu"),
        Ok("aarch64") => ("arm64", "aarch64-linux-gnu"),
        other => panic!("the uprobes are written for x86_64 and aarch64, not {other:?}"),
    };
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let status = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        .arg(format!("-D__TARGET_ARCH_{}", arch.0))
        .arg(format!("-I/usr/include/{}", arch.1))
        .args(["-c", source, "-o"])
        .arg(&out)
        .status()
        .unwrap_or_else(|e| panic!("running {clang} (Debian: apt-get install clang libbpf-dev): {e}"));
    assert!(status.success(), "{clang} could not compile {source}");
}
