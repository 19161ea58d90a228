//! Links the `taskforce` binary with its start-up and serving code laid out together.
//!
//! `link-order.txt` lists the functions `taskforce serve` runs when it starts and answers its
//! first requests (made by `scripts/link-order`). An optimized build on x86_64 Linux, linked
//! by LLD (Rust's default linker there), places them side by side, so that an idle server
//! maps a few megabytes of code instead of pages from all over the binary. Names the binary no
//! longer has are skipped; `TASKFORCE_LINK_ORDER=0` turns it off.

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
        && target("CARGO_CFG_TARGET_ENV") == "gnu";
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
