//! Where taskforce looks for configuration and keeps its data.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The directories a configuration was read from and the data directory it resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// The directory taskforce was started in.
    pub cwd: PathBuf,
    /// The project's root: the nearest ancestor holding `.git`, else `cwd`.
    pub project_root: PathBuf,
    /// The directories from `project_root` down to `cwd`; inner ones win.
    pub project_dirs: Vec<PathBuf>,
    /// The user's home directory, when known.
    pub home: Option<PathBuf>,
    /// `$XDG_CONFIG_HOME` or `~/.config`, when known.
    pub xdg_config: Option<PathBuf>,
    /// The global taskforce config folder (`<xdg_config>/taskforce`), when known.
    pub global_config_dir: Option<PathBuf>,
    /// Where sessions and tool output are stored.
    pub data_dir: PathBuf,
}

impl Paths {
    /// Resolves every directory but the data directory, which needs the loaded config.
    pub(crate) fn discover(cwd: &Path, env: &BTreeMap<String, String>) -> Paths {
        let home = non_empty(env, "HOME").map(PathBuf::from);
        let xdg_config = non_empty(env, "XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        let global_config_dir = xdg_config.as_ref().map(|x| x.join("taskforce"));
        let project_root = find_project_root(cwd).unwrap_or_else(|| cwd.to_path_buf());
        let project_dirs = cwd
            .ancestors()
            .take_while(|d| d.starts_with(&project_root))
            .map(Path::to_path_buf)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let data_dir = default_data_dir(cwd, env, home.as_deref());
        Paths {
            cwd: cwd.to_path_buf(),
            project_root,
            project_dirs,
            home,
            xdg_config,
            global_config_dir,
            data_dir,
        }
    }

    /// The config files looked for, lowest precedence first: the global `config.toml` and
    /// `config.json`, then `taskforce.toml` and `taskforce.json` of each project folder from the
    /// root down (the `--config` file is not among them).
    pub fn config_files(&self) -> Vec<PathBuf> {
        let global = self
            .global_config_dir
            .iter()
            .flat_map(|dir| [dir.join("config.toml"), dir.join("config.json")]);
        let project = self
            .project_dirs
            .iter()
            .flat_map(|dir| [dir.join("taskforce.toml"), dir.join("taskforce.json")]);
        global.chain(project).collect()
    }

    /// The directory where over-long tool outputs are saved.
    pub fn tool_output_dir(&self) -> PathBuf {
        self.data_dir.join("tool-output")
    }

    /// The directory where plan-mode plans outside the project are saved.
    pub fn plans_dir(&self) -> PathBuf {
        self.data_dir.join("plans")
    }

    /// A path made absolute against `cwd`, with a leading `~/` expanded.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        let expanded = match (path.strip_prefix("~"), &self.home) {
            (Ok(rest), Some(home)) => home.join(rest),
            _ => path.to_path_buf(),
        };
        if expanded.is_absolute() {
            expanded
        } else {
            self.cwd.join(expanded)
        }
    }

    /// A path shown relative to `cwd` when it is inside it, for messages.
    pub fn display(&self, path: &Path) -> String {
        path.strip_prefix(&self.cwd)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| path.display().to_string())
    }
}

/// `$XDG_DATA_HOME/taskforce`, else `~/.local/share/taskforce`, else `<cwd>/.taskforce/data`.
fn default_data_dir(cwd: &Path, env: &BTreeMap<String, String>, home: Option<&Path>) -> PathBuf {
    non_empty(env, "XDG_DATA_HOME")
        .map(|x| PathBuf::from(x).join("taskforce"))
        .or_else(|| home.map(|h| h.join(".local/share/taskforce")))
        .unwrap_or_else(|| cwd.join(".taskforce/data"))
}

/// The nearest ancestor of `dir` (itself included) that holds a `.git` entry.
fn find_project_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn non_empty<'a>(env: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    env.get(key).map(String::as_str).filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn xdg_variables_win_over_home() {
        let p = Paths::discover(
            Path::new("/nowhere/proj"),
            &env(&[
                ("HOME", "/h"),
                ("XDG_CONFIG_HOME", "/c"),
                ("XDG_DATA_HOME", "/d"),
            ]),
        );
        assert_eq!(p.global_config_dir, Some(PathBuf::from("/c/taskforce")));
        assert_eq!(p.data_dir, PathBuf::from("/d/taskforce"));
        let p = Paths::discover(Path::new("/nowhere/proj"), &env(&[("HOME", "/h")]));
        assert_eq!(
            p.global_config_dir,
            Some(PathBuf::from("/h/.config/taskforce"))
        );
        assert_eq!(p.data_dir, PathBuf::from("/h/.local/share/taskforce"));
    }

    #[test]
    fn project_dirs_run_from_the_git_root_down() {
        let tmp = std::env::temp_dir().join(format!("tf-paths-{}", std::process::id()));
        let deep = tmp.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::create_dir_all(tmp.join(".git")).unwrap();
        let p = Paths::discover(&deep, &env(&[]));
        assert_eq!(p.project_root, tmp);
        assert_eq!(
            p.project_dirs,
            vec![tmp.clone(), tmp.join("a"), deep.clone()]
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn config_files_run_from_global_to_the_innermost_folder() {
        let p = Paths {
            project_dirs: vec![PathBuf::from("/w"), PathBuf::from("/w/sub")],
            ..Paths::discover(Path::new("/w/sub"), &env(&[("HOME", "/h")]))
        };
        assert_eq!(
            p.config_files(),
            [
                "/h/.config/taskforce/config.toml",
                "/h/.config/taskforce/config.json",
                "/w/taskforce.toml",
                "/w/taskforce.json",
                "/w/sub/taskforce.toml",
                "/w/sub/taskforce.json",
            ]
            .map(PathBuf::from)
        );
        let homeless = Paths::discover(Path::new("/w"), &env(&[]));
        assert_eq!(
            homeless.config_files(),
            ["/w/taskforce.toml", "/w/taskforce.json"].map(PathBuf::from)
        );
    }

    #[test]
    fn resolve_expands_home_and_cwd() {
        let p = Paths::discover(Path::new("/w"), &env(&[("HOME", "/h")]));
        assert_eq!(p.resolve(Path::new("~/x")), PathBuf::from("/h/x"));
        assert_eq!(p.resolve(Path::new("d")), PathBuf::from("/w/d"));
        assert_eq!(p.resolve(Path::new("/abs")), PathBuf::from("/abs"));
    }
}
