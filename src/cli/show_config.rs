//! `taskforce config`: the merged configuration, with its secrets redacted.

use clap::Args;
use serde_json::Value;
use taskforce_agents::config::redact::redact_secret_fields;

use super::Context;
use super::output::outln;

/// `taskforce config` arguments.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    /// Print JSON instead of TOML.
    #[arg(long)]
    pub json: bool,
}

/// Prints the configuration every layer merged into, as TOML or JSON; API keys, header values,
/// URL credentials and fields named like credentials show as `[redacted]`.
pub fn run(context: &Context, args: ConfigArgs) -> anyhow::Result<()> {
    let mut value = serde_json::to_value(context.loaded.config.redacted())?;
    redact_secret_fields(&mut value);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        // TOML has no null: an unset value is left out.
        drop_nulls(&mut value);
        let text = toml::to_string(&value)?;
        outln!("{}", text.trim_end())?;
    }
    Ok(())
}

/// `value` without `null`s (in tables and lists).
fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => {
            items.retain(|v| !v.is_null());
            items.iter_mut().for_each(drop_nulls);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nulls_are_left_out_at_any_depth() {
        let mut value = serde_json::json!({"a": null, "b": {"c": null, "d": 1}, "e": [null, 2]});
        drop_nulls(&mut value);
        assert_eq!(value, serde_json::json!({"b": {"d": 1}, "e": [2]}));
    }
}
