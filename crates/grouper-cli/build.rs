//! Links the `grouper` executable as position-dependent (`-no-pie`) on Linux.
//!
//! A position-independent executable is relocated by the dynamic loader at every start: this
//! one carried 230k relative relocations, whose writes copy the pages of `.data.rel.ro` they
//! touch (copy-on-write faults) before `main` runs, a few milliseconds of each fresh `grouper
//! query` process. The objects stay position-independent (nothing is rebuilt); only the final
//! link fixes their addresses, so the loader has nothing to relocate.

fn main() {
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if linux {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
