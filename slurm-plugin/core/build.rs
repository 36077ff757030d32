//! Reads `SLURM_VERSION_NUMBER` from the installed Slurm headers (`libslurm-dev`): Slurm's plugin loader
//! refuses a plugin whose `plugin_version` differs from its own, so the number must come from the Slurm
//! the plugins will be loaded by, never from a constant in this repository.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=SLURM_INCLUDE_DIR");
    let candidates: Vec<PathBuf> = match std::env::var_os("SLURM_INCLUDE_DIR") {
        Some(dir) => vec![PathBuf::from(dir)],
        None => vec![PathBuf::from("/usr/include"), PathBuf::from("/usr/local/include")],
    };
    let Some(header) = candidates.iter().map(|dir| dir.join("slurm/slurm_version.h")).find(|path| path.is_file())
    else {
        panic!(
            "slurm/slurm_version.h not found in {candidates:?}: install Slurm's headers \
             (`apt-get install libslurm-dev` on Debian/Ubuntu, `slurm-devel` on RHEL) \
             or set SLURM_INCLUDE_DIR to the folder that holds slurm/slurm_version.h"
        )
    };
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(&header).unwrap_or_else(|e| panic!("reading {}: {e}", header.display()));
    let number = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix("#define SLURM_VERSION_NUMBER"))
        .map(str::trim)
        .find_map(|value| match value.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => value.parse::<u32>().ok(),
        })
        .unwrap_or_else(|| panic!("no `#define SLURM_VERSION_NUMBER` in {}", header.display()));
    let (major, minor, micro) = ((number >> 16) & 0xff, (number >> 8) & 0xff, number & 0xff);
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("slurm_version.rs");
    let code = format!(
        "/// `SLURM_VERSION_NUMBER` of the Slurm headers this was built against ({}).\n\
         pub const SLURM_VERSION_NUMBER: u32 = {number:#x};\n\
         /// The same version as Slurm prints it.\n\
         pub const SLURM_VERSION: &str = \"{major}.{minor:02}.{micro}\";\n",
        header.display()
    );
    let include = header.parent().expect("the header sits in a folder");
    let code = code + &spank_constants(&include.join("spank.h")) + &step_constants(&include.join("slurm.h"));
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}

fn read(path: &Path) -> String {
    println!("cargo:rerun-if-changed={}", path.display());
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The values of `enum spank_item` and `enum spank_context`, counted in the order spank.h declares them.
fn spank_constants(path: &Path) -> String {
    let text = read(path);
    let mut code = String::new();
    for (enum_name, module) in [("enum spank_item {", "spank_item"), ("enum spank_context {", "spank_context")] {
        let body = text
            .split_once(enum_name)
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(body, _)| body)
            .unwrap_or_else(|| panic!("no `{enum_name}` in {}", path.display()));
        code.push_str(&format!("/// `{enum_name} … }}` of {}.\npub mod {module} {{\n", path.display()));
        let mut value = 0i32;
        for line in body.lines() {
            let line = line.split("/*").next().unwrap_or_default().trim();
            let Some(name) = line.strip_suffix(',').or((!line.is_empty()).then_some(line)) else { continue };
            let name = name.trim();
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') {
                continue;
            }
            code.push_str(&format!("    pub const {name}: i32 = {value};\n"));
            value += 1;
        }
        code.push_str("}\n");
    }
    code
}

/// Step ids with special meaning (`SLURM_BATCH_SCRIPT`, `SLURM_EXTERN_CONT`) and `NO_VAL` from slurm.h.
fn step_constants(path: &Path) -> String {
    let text = read(path);
    let mut code = String::new();
    for name in ["NO_VAL", "SLURM_BATCH_SCRIPT", "SLURM_EXTERN_CONT"] {
        let value = text
            .lines()
            .filter_map(|line| line.trim().strip_prefix("#define "))
            .filter_map(|rest| rest.trim().strip_prefix(name))
            .filter(|rest| rest.starts_with([' ', '\t']))
            .find_map(|rest| {
                let hex = rest.trim().trim_start_matches('(').trim_end_matches(')').trim();
                u32::from_str_radix(hex.strip_prefix("0x")?, 16).ok()
            })
            .unwrap_or_else(|| panic!("no `#define {name} (0x…)` in {}", path.display()));
        code.push_str(&format!("/// `{name}` of slurm.h.\npub const {name}: u32 = {value:#x};\n"));
    }
    code
}
