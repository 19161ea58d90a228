//! `taskforce paths`: where configuration is read from and where data is kept.

use clap::Args;
use serde_json::json;
use taskforce_actors::store::store_location;

use super::Context;
use super::output::outln;

/// `taskforce paths` arguments.
#[derive(Debug, Args)]
pub struct PathsArgs {
    /// Print `{config_files: [{path, exists}], data_dir, database}` as JSON (`database`: the
    /// SQLite file, or the PostgreSQL server and database without the password).
    #[arg(long)]
    pub json: bool,
}

/// Prints the config files looked for (lowest precedence first, each marked as found or not),
/// the data directory and the database in use (SQLite's file, or the PostgreSQL server and
/// database, never the password).
pub fn run(context: &Context, args: PathsArgs) -> anyhow::Result<()> {
    let paths = &context.loaded.paths;
    let database = store_location(&context.loaded.config.store, &paths.data_dir)?;
    let files: Vec<(String, bool)> = context
        .loaded
        .config_files
        .iter()
        .map(|f| (f.display().to_string(), f.is_file()))
        .collect();
    if args.json {
        let out = json!({
            "config_files": files
                .iter()
                .map(|(path, exists)| json!({"path": path, "exists": exists}))
                .collect::<Vec<_>>(),
            "data_dir": paths.data_dir,
            "database": database,
        });
        outln!("{}", serde_json::to_string_pretty(&out)?)?;
        return Ok(());
    }
    outln!("config files (lowest precedence first; environment variables come last):")?;
    for (path, exists) in &files {
        let mark = if *exists { "found  " } else { "missing" };
        outln!("  {mark}  {path}")?;
    }
    outln!("data directory: {}", paths.data_dir.display())?;
    outln!("database:       {database}")?;
    Ok(())
}
