//! Links the `grouper` executable as position-dependent (`-no-pie`) on Linux, and on x86-64 Linux
//! links in the start-up check of the CPU's extensions (`csrc/cpu_check.c`).
//!
//! A position-independent executable is relocated by the dynamic loader at every start: this
//! one carried 230k relative relocations, whose writes copy the pages of `.data.rel.ro` they
//! touch (copy-on-write faults) before `main` runs, a few milliseconds of each fresh `grouper
//! query` process. The objects stay position-independent (nothing is rebuilt); only the final
//! link fixes their addresses, so the loader has nothing to relocate.
//!
//! The workspace builds for x86-64-v3 (`.cargo/config.toml`); Rust offers no way to compile one
//! function for less than the rest, and the check must run before any code that may use those
//! extensions, so it is C compiled for baseline x86-64, a constructor run before `main`, given
//! the extensions this build enabled (`CARGO_CFG_TARGET_FEATURE`). Its object is linked into
//! the executable directly (from an archive the linker would drop it: nothing refers to it).

/// Rust's names of the extensions the check knows, as its `GROUPER_NEED_<X>` suffixes.
const CHECKED: [(&str, &str); 15] = [
    ("sse3", "SSE3"),
    ("ssse3", "SSSE3"),
    ("fma", "FMA"),
    ("cmpxchg16b", "CMPXCHG16B"),
    ("sse4.1", "SSE4_1"),
    ("sse4.2", "SSE4_2"),
    ("movbe", "MOVBE"),
    ("popcnt", "POPCNT"),
    ("xsave", "XSAVE"),
    ("avx", "AVX"),
    ("f16c", "F16C"),
    ("bmi1", "BMI1"),
    ("avx2", "AVX2"),
    ("bmi2", "BMI2"),
    ("lzcnt", "LZCNT"),
];

fn main() {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux = var("CARGO_CFG_TARGET_OS") == "linux";
    if linux {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/cpu_check.c");
    let features = var("CARGO_CFG_TARGET_FEATURE");
    let enabled: Vec<&str> = features.split(',').collect();
    let needs: Vec<&str> = CHECKED
        .iter()
        .filter(|(rust, _)| enabled.contains(rust))
        .map(|&(_, c)| c)
        .collect();
    if !linux || var("CARGO_CFG_TARGET_ARCH") != "x86_64" || needs.is_empty() {
        return;
    }
    let mut build = cc::Build::new();
    build
        .file("csrc/cpu_check.c")
        .flag("-march=x86-64")
        .flag("-mtune=generic")
        .warnings(true);
    for n in &needs {
        build.define(&format!("GROUPER_NEED_{n}"), None);
    }
    for object in build.compile_intermediates() {
        println!("cargo:rustc-link-arg-bins={}", object.display());
    }
}
