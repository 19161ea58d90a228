//! The environment block of the system prompt: directory, platform, date.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

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
    let days = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(0));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        u32::try_from(m).unwrap_or(1),
        u32::try_from(d).unwrap_or(1),
    )
}

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
