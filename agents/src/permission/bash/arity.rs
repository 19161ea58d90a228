//! How many leading words name a command, for the `always` pattern of a bash ask.

/// How many leading words name a command, for the `always` pattern of a bash ask.
///
/// The longest matching prefix wins; a command not listed has arity 1 (its first word).
/// For example `git status --short` → `git status`, `npm run build` → `npm run build`,
/// `docker compose up -d` → `docker compose up`, `cargo test -p x` → `cargo test`.
pub const ARITY: &[(&str, usize)] = &[
    ("apt", 2),
    ("apt-get", 2),
    ("aws", 3),
    ("az", 3),
    ("brew", 2),
    ("bun", 2),
    ("bun run", 3),
    ("bundle", 2),
    ("bundle exec", 3),
    ("cargo", 2),
    ("composer", 2),
    ("conda", 2),
    ("deno", 2),
    ("deno task", 3),
    ("docker", 2),
    ("docker compose", 3),
    ("docker-compose", 2),
    ("dotnet", 2),
    ("gcloud", 3),
    ("gh", 3),
    ("git", 2),
    ("git config", 3),
    ("git remote", 3),
    ("git stash", 3),
    ("go", 2),
    ("go mod", 3),
    ("gradle", 2),
    ("./gradlew", 2),
    ("gradlew", 2),
    ("helm", 2),
    ("kubectl", 2),
    ("make", 2),
    ("mvn", 2),
    ("npm", 2),
    ("npm run", 3),
    ("npx", 2),
    ("pip", 2),
    ("pip3", 2),
    ("pnpm", 2),
    ("pnpm run", 3),
    ("poetry", 2),
    ("poetry run", 3),
    ("python -m", 3),
    ("python3 -m", 3),
    ("rustup", 2),
    ("systemctl", 2),
    ("terraform", 2),
    ("uv", 2),
    ("uv pip", 3),
    ("uv run", 3),
    ("yarn", 2),
    ("yarn run", 3),
];

/// The words naming the command `tokens` runs, per [`ARITY`]: `git status --short` →
/// `["git", "status"]`; an unknown command gives its first word.
pub fn command_prefix(tokens: &[String]) -> Vec<String> {
    let mut arity = 1;
    let mut matched = 0;
    for (prefix, n) in ARITY {
        let words: Vec<&str> = prefix.split(' ').collect();
        if words.len() > matched
            && tokens.len() >= words.len()
            && words.iter().zip(tokens).all(|(w, t)| w == t)
        {
            matched = words.len();
            arity = *n;
        }
    }
    tokens.iter().take(arity).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn prefixes_follow_the_arity_table() {
        for (command, prefix) in [
            ("git status --short", "git status"),
            ("npm run build", "npm run build"),
            ("npm install", "npm install"),
            ("cargo test -p x", "cargo test"),
            ("docker compose up -d", "docker compose up"),
            ("gradlew build -x", "gradlew build"),
            ("ls -la", "ls"),
            ("frobnicate --all", "frobnicate"),
            ("git", "git"),
        ] {
            assert_eq!(
                command_prefix(&words(command)).join(" "),
                prefix,
                "{command}"
            );
        }
    }
}
