//! Wildcard matching with exactly OpenCode's semantics (`util/wildcard.ts`).
//!
//! - `*` matches any run of characters, including `/` and newlines (there is no `**`).
//! - `?` matches exactly one character (one Unicode scalar value; OpenCode's JS regex counts
//!   UTF-16 code units, which only differs for characters outside the BMP such as emoji).
//! - Every other character is literal: regex metacharacters, `[`, `{`, `\` have no meaning.
//! - Matching is case-sensitive and anchored at both ends.
//! - A pattern ending in `" *"` (space, star) also matches the bare prefix: `"ls *"` matches
//!   `ls` and `ls -la` but not `lsof`.
//!
//! The matcher is hand-written (iterative, single backtrack point, no allocation) because it
//! runs on every permission check.

/// Whether `value` matches the wildcard `pattern` (OpenCode's `Wildcard.match(value, pattern)`).
pub fn matches(value: &str, pattern: &str) -> bool {
    // OpenCode turns a trailing `" .*"` into `"( .*)?"`: the prefix alone, or the prefix then a
    // space then anything. The second alternative is the pattern itself read as a plain glob.
    if let Some(prefix) = pattern.strip_suffix(" *")
        && glob(value, prefix)
    {
        return true;
    }
    glob(value, pattern)
}

/// Plain anchored glob: `*` any run, `?` one char, everything else literal.
///
/// Classic greedy matching with a single backtrack point (the last `*` seen): correct for
/// patterns whose only operators are `*` and `?`, and O(len(value) × len(pattern)) worst case.
/// Works on bytes; positions in `value` stay on char boundaries because `*` and `?` are ASCII
/// and literal runs are compared byte for byte against complete UTF-8 sequences.
fn glob(value: &str, pattern: &str) -> bool {
    let v = value.as_bytes();
    let p = pattern.as_bytes();
    let (mut vi, mut pi) = (0usize, 0usize);
    // (pattern index just after the last `*`, value index the star's match currently ends at)
    let mut star: Option<(usize, usize)> = None;

    while vi < v.len() {
        if let Some(&pc) = p.get(pi) {
            match pc {
                b'*' => {
                    star = Some((pi + 1, vi));
                    pi += 1;
                    continue;
                }
                b'?' => {
                    vi += utf8_len(v[vi]);
                    pi += 1;
                    continue;
                }
                c if c == v[vi] => {
                    vi += 1;
                    pi += 1;
                    continue;
                }
                _ => {}
            }
        }
        // Mismatch (or pattern exhausted): let the last star swallow one more character.
        match star {
            Some((star_p, star_v)) => {
                let next = star_v + utf8_len(v[star_v]);
                star = Some((star_p, next));
                pi = star_p;
                vi = next;
            }
            None => return false,
        }
    }
    // Value exhausted: only stars may remain in the pattern.
    p[pi..].iter().all(|&c| c == b'*')
}

/// Length in bytes of the UTF-8 sequence starting with `lead` (a char-boundary byte).
#[inline]
fn utf8_len(lead: u8) -> usize {
    match lead {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;
    use proptest::prelude::*;
    use regex::Regex;

    /// OpenCode's `Wildcard.match`, built the same way: escape, translate, special tail, anchor.
    fn reference(value: &str, pattern: &str) -> bool {
        let mut escaped = String::new();
        for c in pattern.chars() {
            if ".+^${}()|[]\\".contains(c) {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        let mut escaped = escaped.replace('*', ".*").replace('?', ".");
        if let Some(stem) = escaped.strip_suffix(" .*") {
            escaped = format!("{stem}( .*)?");
        }
        Regex::new(&format!("(?s)^{escaped}$"))
            .unwrap()
            .is_match(value)
    }

    #[test]
    fn trailing_space_star_also_matches_the_bare_prefix() {
        assert!(matches("ls", "ls *"));
        assert!(matches("ls -la", "ls *"));
        assert!(!matches("lsof", "ls *"));
    }

    #[test]
    fn git_star_matches_git_and_its_subcommands_only() {
        assert!(matches("git", "git *"));
        assert!(matches("git status", "git *"));
        assert!(matches("git status --short", "git *"));
        assert!(!matches("gitk", "git *"));
    }

    #[test]
    fn question_mark_is_one_character_and_star_crosses_slashes_and_newlines() {
        assert!(matches("a.b", "a?b"));
        assert!(matches("aXb", "a?b"));
        assert!(!matches("ab", "a?b"));
        assert!(!matches("aXXb", "a?b"));
        assert!(matches("", "*"));
        assert!(matches("x\ny", "x*"));
        assert!(matches("a/b/c", "a*c"));
        assert!(matches("a\nb", "a?b"));
    }

    #[test]
    fn regex_metacharacters_are_literal() {
        assert!(matches("a+b", "a+b"));
        assert!(!matches("aab", "a+b"));
        assert!(!matches("ab", "a+b"));
        assert!(matches("(x)", "(x)"));
        assert!(!matches("x", "(x)"));
        assert!(matches("a.b", "a.b"));
        assert!(!matches("aXb", "a.b"));
        assert!(matches("[ab]", "[ab]"));
        assert!(!matches("a", "[ab]"));
        assert!(matches("a\\b", "a\\b"));
        assert!(matches("^$|{}", "^$|{}"));
    }

    #[test]
    fn anchoring_and_case() {
        assert!(!matches("xabc", "abc"));
        assert!(!matches("abcx", "abc"));
        assert!(!matches("ABC", "abc"));
        assert!(matches("", ""));
        assert!(!matches("a", ""));
        assert!(!matches("", "?"));
    }

    #[test]
    fn backtracking() {
        assert!(matches("src/components/Button.tsx", "src/*"));
        assert!(matches("aaab", "*a?b"));
        assert!(matches("abcabcabd", "*abd"));
        assert!(matches("mississippi", "m*iss*ppi"));
        assert!(!matches("mississippi", "m*iss*x"));
        assert!(matches("config/.env", "*.env"));
        assert!(matches(".env.local", "*.env.*"));
        assert!(!matches(".env", "*.env.*"));
    }

    #[test]
    fn space_star_tail_details() {
        // Only the tail is optional, and it still needs the space when present.
        assert!(matches("rm -rf /", "rm -rf *"));
        assert!(matches("rm -rf", "rm -rf *"));
        assert!(!matches("rm -rfx", "rm -rf *"));
        assert!(matches("", " *"));
        assert!(matches(" x", " *"));
        assert!(!matches("x", " *"));
        // The prefix itself may contain wildcards.
        assert!(matches("npm", "n?m *"));
        assert!(matches("npm run build", "n*m *"));
        // Star without the space has no such rule.
        assert!(!matches("ls", "ls*x"));
    }

    #[test]
    fn question_mark_is_one_unicode_char() {
        assert!(matches("é", "?"));
        assert!(matches("aéb", "a?b"));
        assert!(matches("日本", "??"));
        assert!(!matches("日本", "?"));
        assert!(matches("x日本y", "x*y"));
        assert!(matches("é日", "*日"));
        assert!(!matches("éa", "é"));
    }

    #[test]
    fn reference_agrees_on_examples() {
        for (v, p) in [
            ("ls", "ls *"),
            ("lsof", "ls *"),
            ("a+b", "a+b"),
            ("x\ny", "x*"),
        ] {
            assert_eq!(matches(v, p), reference(v, p), "{v:?} {p:?}");
        }
    }

    const ALPHABET: &[char] = &[
        '*', '?', ' ', '/', '\n', '.', '+', '(', ')', '\\', '[', 'a', 'b', 'é',
    ];

    fn text(max: usize) -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(ALPHABET), 0..max)
            .prop_map(|cs| cs.into_iter().collect())
    }

    /// Patterns, often with the special `" *"` tail.
    fn pattern() -> impl Strategy<Value = String> {
        prop_oneof![text(8), text(6).prop_map(|p| format!("{p} *"))]
    }

    /// A value that often matches `pattern`: fill each `*` and `?`, then maybe mutate one char.
    fn instance(pattern: &str, fills: &[String], mutate: Option<(usize, char)>) -> String {
        let mut out: Vec<char> = Vec::new();
        for (i, c) in pattern.chars().enumerate() {
            let fill = &fills[i % fills.len()];
            match c {
                '*' => out.extend(fill.chars()),
                '?' => out.push(fill.chars().next().unwrap_or('a')),
                c => out.push(c),
            }
        }
        if let Some((at, c)) = mutate {
            if out.is_empty() {
                out.push(c);
            } else {
                let at = at % (out.len() + 1);
                if at == out.len() {
                    out.push(c);
                } else if c == '*' {
                    out.remove(at);
                } else {
                    out[at] = c;
                }
            }
        }
        out.into_iter().collect()
    }

    fn case() -> impl Strategy<Value = (String, String)> {
        (
            pattern(),
            proptest::collection::vec(text(4), 1..4),
            proptest::option::of((0usize..16, proptest::sample::select(ALPHABET))),
            text(10),
            0u8..4,
        )
            .prop_map(|(p, fills, mutate, random, pick)| {
                let v = if pick == 0 {
                    random
                } else {
                    instance(&p, &fills, mutate)
                };
                (v, p)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        #[test]
        fn agrees_with_opencode_regex((value, pattern) in case()) {
            prop_assert_eq!(
                matches(&value, &pattern),
                reference(&value, &pattern),
                "value {:?} pattern {:?}", value, pattern
            );
        }

        #[test]
        fn every_pattern_matches_itself(p in pattern()) {
            prop_assert!(matches(&p, &p));
        }
    }
}
