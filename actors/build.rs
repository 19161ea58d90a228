//! Rebuilds the crate when a migration changes (they are embedded by `sqlx::migrate!`).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
