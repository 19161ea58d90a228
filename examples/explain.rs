//! Embedding example: load the configuration of the current directory the way the CLI does,
//! then ask the permission engine what an agent may do.
//!
//! `cargo run --example explain -- bash "git push origin main" build`

use taskforce::{LoadOptions, Registry, load_config};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let permission = args.next().unwrap_or_else(|| "bash".into());
    let pattern = args.next().unwrap_or_else(|| "git push".into());
    let agent_name = args.next();

    let loaded = load_config(&LoadOptions::from_process(None, None)?)?;
    let registry = Registry::new(&loaded.config, &loaded.paths)?;
    let agent = match agent_name {
        Some(name) => registry.require(&name)?,
        None => registry.default_agent(),
    };
    let decision = agent.evaluate(&permission, &pattern);
    println!(
        "{} may {permission} {pattern:?}: {}",
        agent.name, decision.action
    );
    if let Some(rule) = decision.rule {
        println!("because of the rule {rule}");
    }
    Ok(())
}
