//! The environment block of the system prompt: directory, platform, date.

use std::path::Path;

/// The environment description sent with every request.
pub(crate) fn environment(directory: &Path, project_root: &Path) -> String {
    let git = project_root.join(".git").exists();
    format!(
        "Here is some useful information about the environment you are running in:\n<env>\n  Working directory: {}\n  Is directory a git repo: {}\n  Platform: {}\n  Today's date: {}\n</env>",
        directory.display(),
        if git { "yes" } else { "no" },
        std::env::consts::OS,
        today(),
    )
}

/// Today's date as `YYYY-MM-DD` (UTC).
fn today() -> String {
    let (y, m, d) = taskforce_agents::id::today_utc();
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub(crate) use taskforce_agents::id::civil_from_days;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_day_counts() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}
