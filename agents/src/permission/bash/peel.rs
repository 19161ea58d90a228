//! Wrappers peeled off a simple command: `sudo -u root timeout 5 rm x` runs `rm x`.
//!
//! Each wrapper (`command`, `builtin`, `env`, `exec`, `nice`, `nohup`, `timeout`, `time`,
//! `sudo`, `doas`, `setsid`, `stdbuf`, `xargs`) is skipped with its own options and operands;
//! what follows is the command it runs, peeled in turn. Every step is kept as a form to check,
//! so a rule on the wrapper (`sudo *`) still applies. `find … -exec CMD … ;` runs CMD; a
//! shell's `-c` string and `eval`'s arguments are code, parsed again by the caller.

use super::Unreadable;
use super::words::Word;

/// What a simple command runs, wrappers peeled.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Peeled {
    /// Each command to check, outermost first: the program (its basename) and its words.
    pub forms: Vec<Vec<String>>,
    /// The program as written when it is a path (`/bin/rm x`, `./gradlew build`), also checked.
    pub spelled: Vec<Vec<String>>,
    /// Code the command runs: the string of `sh -c`, the arguments of `eval`, `env -S`.
    pub code: Vec<String>,
    /// Why part of what runs cannot be known before running it.
    pub unreadable: Option<Unreadable>,
    /// Where the innermost command of the wrapper chain starts among the words.
    pub innermost: usize,
}

/// The shells whose `-c` string is parsed as bash.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "mksh"];

/// Peels `words` (a program name first).
pub(super) fn peel(words: &[Word]) -> Peeled {
    let mut peeled = Peeled::default();
    peeled.innermost = peel_into(words, &mut peeled);
    peeled
}

/// Adds what `words` runs to `out`; answers where the innermost command starts in `words`.
fn peel_into(words: &[Word], out: &mut Peeled) -> usize {
    let mut rest = words;
    while let Some(first) = rest.first() {
        let at = words.len() - rest.len();
        let name = match &first.value {
            Some(name) if !first.glob && !name.is_empty() => name.as_str(),
            _ => {
                out.unreadable = Some(Unreadable::Program(first.raw.clone()));
                return at;
            }
        };
        let base = name.rsplit('/').next().unwrap_or(name);
        let base = if base.is_empty() { name } else { base };
        let args = &rest[1..];
        let shown = || args.iter().map(Word::shown);
        out.forms
            .push(std::iter::once(base.to_string()).chain(shown()).collect());
        if base != name {
            out.spelled
                .push(std::iter::once(name.to_string()).chain(shown()).collect());
        }
        let next = match base {
            "command" | "builtin" => Some(options(args, "", &[])),
            "exec" => Some(options(args, "a", &[])),
            "nohup" | "setsid" => Some(options(args, "", &[])),
            "time" => Some(options(args, "fo", &["--format", "--output"])),
            "nice" => Some(options(args, "n", &["--adjustment"])),
            "stdbuf" => Some(options(args, "ioe", &["--input", "--output", "--error"])),
            "timeout" => {
                let after = options(args, "sk", &["--signal", "--kill-after"]);
                // The duration.
                Some(after.get(1..).unwrap_or_default())
            }
            "env" => Some(env(args, out)),
            "sudo" => Some(assignments(options(
                args,
                "ughpCDrtTU",
                &[
                    "--user",
                    "--group",
                    "--host",
                    "--prompt",
                    "--close-from",
                    "--chdir",
                    "--role",
                    "--type",
                    "--command-timeout",
                    "--other-user",
                ],
            ))),
            "doas" => Some(options(args, "uC", &[])),
            "xargs" => Some(options(
                args,
                "adEILnPs",
                &[
                    "--arg-file",
                    "--delimiter",
                    "--max-args",
                    "--max-procs",
                    "--max-chars",
                    "--process-slot-var",
                ],
            )),
            "eval" => {
                code_of(args, out);
                None
            }
            "find" => {
                find_exec(args, out);
                None
            }
            shell if SHELLS.contains(&shell) => {
                shell_code(args, out);
                None
            }
            _ => None,
        };
        match next {
            Some(next) if !next.is_empty() => rest = next,
            _ => return at,
        }
    }
    words.len()
}

/// `args` after the options of a wrapper: `short` lists the letters that take a value (given
/// in the same word or the next), `long` the `--names` that take the next word (`--name=value`
/// is one word). `--` ends the options; a word that is not known (an expansion) ends them too.
fn options<'a>(args: &'a [Word], short: &str, long: &[&str]) -> &'a [Word] {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let Some(value) = word.value.as_deref() else {
            return &args[i..];
        };
        if value == "--" {
            return args.get(i + 1..).unwrap_or_default();
        }
        if let Some(name) = value.strip_prefix("--") {
            let takes_next = !name.contains('=') && long.contains(&value);
            i += if takes_next { 2 } else { 1 };
            continue;
        }
        let Some(letters) = value.strip_prefix('-').filter(|l| !l.is_empty()) else {
            return &args[i..];
        };
        i += 1;
        for (at, letter) in letters.char_indices() {
            if short.contains(letter) {
                // The value is the rest of this word, or the next word.
                if at + letter.len_utf8() == letters.len() {
                    i += 1;
                }
                break;
            }
        }
    }
    args.get(i..).unwrap_or_default()
}

/// `args` after leading `NAME=value` words.
fn assignments(args: &[Word]) -> &[Word] {
    let count = args
        .iter()
        .take_while(|w| w.value.as_deref().is_some_and(is_assignment))
        .count();
    &args[count..]
}

/// Whether `word` is `NAME=value` with a valid variable name.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `env`'s command: after its options and assignments; `-S`/`--split-string` gives code.
fn env<'a>(args: &'a [Word], out: &mut Peeled) -> &'a [Word] {
    let mut i = 0;
    while let Some(value) = args.get(i).and_then(|w| w.value.as_deref()) {
        if value == "--" {
            i += 1;
            break;
        }
        let split = if value == "--split-string" {
            Some(args.get(i + 1))
        } else if let Some(text) = value.strip_prefix("--split-string=") {
            out.code.push(text.to_string());
            return &[];
        } else if let Some(long) = value.strip_prefix("--") {
            let takes_next = !long.contains('=') && matches!(long, "unset" | "chdir");
            i += if takes_next { 2 } else { 1 };
            continue;
        } else if let Some(letters) = value.strip_prefix('-') {
            match letters.find(['u', 'C', 'S']) {
                Some(at) => {
                    let attached = &letters[at + 1..];
                    if letters[at..].starts_with('S') {
                        if attached.is_empty() {
                            Some(args.get(i + 1))
                        } else {
                            out.code.push(attached.to_string());
                            return &[];
                        }
                    } else {
                        i += if attached.is_empty() { 2 } else { 1 };
                        continue;
                    }
                }
                None => {
                    i += 1;
                    continue;
                }
            }
        } else {
            break;
        };
        match split.flatten() {
            Some(Word {
                value: Some(text), ..
            }) => out.code.push(text.clone()),
            Some(word) => out.unreadable = Some(Unreadable::Code(word.raw.clone())),
            None => {}
        }
        return &[];
    }
    assignments(args.get(i..).unwrap_or_default())
}

/// `eval`'s arguments, joined with spaces, as code.
fn code_of(args: &[Word], out: &mut Peeled) {
    let mut code = Vec::with_capacity(args.len());
    for arg in args {
        match &arg.value {
            Some(value) => code.push(value.as_str()),
            None => {
                out.unreadable = Some(Unreadable::Code(arg.raw.clone()));
                return;
            }
        }
    }
    if !code.is_empty() {
        out.code.push(code.join(" "));
    }
}

/// The commands `find` runs with `-exec`, `-execdir`, `-ok` and `-okdir` (up to `;` or `+`).
fn find_exec(args: &[Word], out: &mut Peeled) {
    let mut i = 0;
    while i < args.len() {
        let action = args[i].value.as_deref();
        i += 1;
        if !matches!(action, Some("-exec" | "-execdir" | "-ok" | "-okdir")) {
            continue;
        }
        let end = args[i..]
            .iter()
            .position(|w| matches!(w.value.as_deref(), Some(";" | "+")))
            .map_or(args.len(), |p| i + p);
        let _ = peel_into(&args[i..end], out);
        i = end + 1;
    }
}

/// A shell's code: the string after `-c`; a shell reading commands from its input (no
/// operand, or `-s`) runs code that cannot be read here. A script operand is left to the rules.
fn shell_code(args: &[Word], out: &mut Peeled) {
    let mut command = false;
    let mut stdin = false;
    let mut informational = false;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let Some(value) = word.value.as_deref() else {
            break;
        };
        if value == "--" || value == "-" {
            i += 1;
            break;
        }
        if value.starts_with("--") {
            informational |= value == "--version" || value == "--help";
            i += if matches!(value, "--rcfile" | "--init-file") {
                2
            } else {
                1
            };
            continue;
        }
        let Some(letters) = value
            .strip_prefix('-')
            .or_else(|| value.strip_prefix('+'))
            .filter(|l| !l.is_empty())
        else {
            break;
        };
        command |= letters.contains('c');
        stdin |= letters.contains('s');
        i += if letters.contains(['o', 'O']) { 2 } else { 1 };
    }
    match args.get(i) {
        Some(operand) if command => match &operand.value {
            Some(code) => out.code.push(code.clone()),
            None => out.unreadable = Some(Unreadable::Code(operand.raw.clone())),
        },
        None if command || informational => {}
        Some(_) if !stdin => {}
        _ => out.unreadable = Some(Unreadable::Stdin),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Word> {
        line.split(' ').map(Word::literal).collect()
    }

    fn forms(line: &str) -> Vec<String> {
        peel(&words(line))
            .forms
            .iter()
            .map(|f| f.join(" "))
            .collect()
    }

    #[test]
    fn wrappers_are_peeled_with_their_options() {
        assert_eq!(
            forms("sudo -u root timeout -s KILL 5 nice -n 10 rm x"),
            [
                "sudo -u root timeout -s KILL 5 nice -n 10 rm x",
                "timeout -s KILL 5 nice -n 10 rm x",
                "nice -n 10 rm x",
                "rm x"
            ]
        );
        assert_eq!(
            forms("env -i A=1 B=2 rm x"),
            ["env -i A=1 B=2 rm x", "rm x"]
        );
        assert_eq!(forms("xargs -0 -n1 rm -f"), ["xargs -0 -n1 rm -f", "rm -f"]);
        assert_eq!(forms("xargs -n 1 rm"), ["xargs -n 1 rm", "rm"]);
        assert_eq!(forms("command -- rm x")[1], "rm x");
        assert_eq!(forms("exec -a name rm x")[1], "rm x");
        assert_eq!(forms("time -p rm x")[1], "rm x");
        assert_eq!(forms("nohup rm x")[1], "rm x");
        assert_eq!(forms("timeout --signal=KILL 5s rm x")[1], "rm x");
        assert_eq!(forms("sudo --user root A=1 rm x")[1], "rm x");
        assert_eq!(forms("/usr/bin/sudo rm x"), ["sudo rm x", "rm x"]);
        assert_eq!(forms("sudo -i"), ["sudo -i"]);
        assert_eq!(forms("git status"), ["git status"]);
    }

    #[test]
    fn find_runs_its_exec_commands() {
        assert_eq!(
            forms("find . -name *.o -exec rm -f {} ; -execdir sudo shred {} +"),
            [
                "find . -name *.o -exec rm -f {} ';' -execdir sudo shred {} +",
                "rm -f {}",
                "sudo shred {}",
                "shred {}"
            ]
        );
    }

    #[test]
    fn code_of_shells_eval_and_env_is_handed_back() {
        let code = |line: &str| peel(&words(line)).code;
        assert_eq!(code("bash -c rm"), ["rm"]);
        assert_eq!(code("sh -ec rm"), ["rm"]);
        assert_eq!(code("bash -o pipefail -c rm"), ["rm"]);
        assert_eq!(code("eval rm x"), ["rm x"]);
        assert_eq!(code("env -S rm"), ["rm"]);
        assert_eq!(code("env -i -S rm"), ["rm"]);
        assert_eq!(code("env -Srm"), ["rm"]);
        assert!(code("bash script.sh").is_empty());
        assert_eq!(peel(&words("bash script.sh")).unreadable, None);
        assert_eq!(peel(&words("bash")).unreadable, Some(Unreadable::Stdin));
        assert_eq!(peel(&words("sh -s x")).unreadable, Some(Unreadable::Stdin));
        assert_eq!(peel(&words("bash --version")).unreadable, None);
    }

    #[test]
    fn a_program_that_is_not_a_literal_word_is_unreadable() {
        let mut dynamic = words("sudo X x");
        dynamic[1].value = None;
        dynamic[1].raw = "$CMD".into();
        let peeled = peel(&dynamic);
        assert_eq!(peeled.forms.len(), 1);
        assert_eq!(peeled.unreadable, Some(Unreadable::Program("$CMD".into())));
        let mut globbed = words("/bin/r? x");
        globbed[0].glob = true;
        assert!(peel(&globbed).unreadable.is_some());
    }
}
