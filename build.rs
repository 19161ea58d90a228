//! Links the `taskforce` binary with its start-up and serving code laid out together.
//!
//! `link-order.txt` lists the functions `taskforce serve` runs when it starts and answers its
//! first requests (made by `scripts/link-order`). An optimized build on x86_64 Linux, linked
//! by LLD (Rust's default linker there), places them side by side, so that an idle server
//! maps a few megabytes of code instead of pages from all over the binary. Names the binary no
//! longer has are skipped; `TASKFORCE_LINK_ORDER=0` turns it off, and it is left out when the
//! build names a linker of its own or rustc is older than 1.90 (which linked with the system's).

use std::env;
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=TASKFORCE_LINK_ORDER");
    let wanted = env::var("TASKFORCE_LINK_ORDER").map_or(true, |v| v != "0");
    let optimized = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = |key: &str| env::var(key).unwrap_or_default();
    let lld_by_default = target("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && target("CARGO_CFG_TARGET_OS") == "linux"
        && target("CARGO_CFG_TARGET_ENV") == "gnu"
        && rustc_links_with_lld()
        && !linker_chosen();
    let Ok(dir) = env::var("CARGO_MANIFEST_DIR") else {
        return;
    };
    let order = Path::new(&dir).join("link-order.txt");
    if wanted && optimized && lld_by_default && order.exists() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links with its own LLD on x86_64 Linux: from Rust 1.90 on.
fn rustc_links_with_lld() -> bool {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = std::process::Command::new(rustc).arg("-V").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&out.stdout);
    let minor = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}

/// Whether the build names a linker of its own (which may not read an ordering file).
fn linker_chosen() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
        || flags.contains("fuse-ld")
        || flags.contains("link-self-contained")
}
