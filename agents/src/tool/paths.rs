//! Paths in tool arguments: resolving them against the session directory, showing them relative
//! to the project, and asking `external_directory` before a tool touches anything outside it.
//!
//! [`resolve`] and [`normalize`] are lexical: `..` and `.` are folded without touching the file
//! system. [`real`] goes further and follows symbolic links (a path that does not exist yet, such
//! as a file about to be written, is resolved through its nearest existing ancestor); boundary
//! and secret-file checks use it, so a link cannot carry a path out of the project.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock, RwLock};

use serde_json::{Map, Value};

use super::{ToolContext, ToolError, access};
use crate::permission::PermissionAsk;

/// Whether a path names a file (its parent directory is asked about) or a directory (asked
/// about itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// A file: `external_directory` is asked for `<its parent>/*`.
    File,
    /// A directory: `external_directory` is asked for `<it>/*`.
    Directory,
}

/// `input` made absolute against `directory` (when relative) and normalized lexically.
pub fn resolve(directory: &Path, input: &str) -> PathBuf {
    let path = Path::new(input);
    if path.is_absolute() {
        normalize(path)
    } else {
        normalize(&directory.join(path))
    }
}

/// Folds `.` and `..` components without touching the file system (`/a/./b/../c` → `/a/c`).
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `..` at the root stays at the root.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` with every symbolic link resolved as the kernel would walk it (a link is followed
/// before a `..` after it), including dangling links, whose target is where a write would land;
/// components that do not exist (yet) are kept as they are.
///
/// Relative links resolve against their own directory; after 40 links (a loop) the rest of the
/// path is taken literally. A relative `path` is taken as it is, without a working directory.
pub fn real(path: &Path) -> PathBuf {
    const MAX_LINKS: usize = 40;
    let mut out = PathBuf::with_capacity(path.as_os_str().len() + 16);
    // Components of links' targets still to walk, the next one last; the path's own
    // components come after them, straight from the path (no copy unless a link is met).
    let mut spliced: Vec<OsString> = Vec::new();
    let mut rest = path.components();
    let mut links = 0;
    loop {
        let name: Cow<'_, OsStr> = match spliced.pop() {
            Some(name) => Cow::Owned(name),
            None => match rest.next() {
                Some(root @ (Component::Prefix(_) | Component::RootDir)) => {
                    out.push(root.as_os_str());
                    continue;
                }
                Some(other) => Cow::Borrowed(other.as_os_str()),
                None => break,
            },
        };
        if *name == *"." {
            continue;
        }
        if *name == *".." {
            if !out.pop() {
                out.push("..");
            }
            continue;
        }
        out.push(&name);
        // `read_link` answers a target only for a link (one call per component, no `stat`).
        if links >= MAX_LINKS {
            continue;
        }
        let Ok(target) = std::fs::read_link(&out) else {
            continue;
        };
        links += 1;
        out.pop();
        let mut front: Vec<OsString> = Vec::new();
        for component in target.components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    out = PathBuf::from(component.as_os_str());
                    front.clear();
                }
                other => front.push(other.as_os_str().to_os_string()),
            }
        }
        spliced.extend(front.into_iter().rev());
    }
    out
}

/// The project root and the session directory in real form (links resolved): what lies
/// inside them is inside the project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Boundary {
    roots: [Arc<Path>; 2],
}

impl Boundary {
    /// The boundary of `ctx`'s project and session directory.
    pub fn of(ctx: &ToolContext) -> Boundary {
        let root = real_folder(&ctx.project_root);
        // A session working in the project root (the usual case) resolves it once.
        let directory = if ctx.directory == ctx.project_root {
            root.clone()
        } else {
            real_folder(&ctx.directory)
        };
        Boundary {
            roots: [root, directory],
        }
    }

    /// Whether `real_path` (already in real form) lies inside the project or session directory.
    pub fn contains(&self, real_path: &Path) -> bool {
        self.roots.iter().any(|root| real_path.starts_with(root))
    }
}

/// How many folders' real forms [`real_folder`] keeps before it starts over.
const FOLDERS_KEPT: usize = 1024;

/// The real forms of the project and session folders met so far in this process.
static REAL_FOLDERS: LazyLock<RwLock<HashMap<PathBuf, Arc<Path>>>> =
    LazyLock::new(|| RwLock::new(HashMap::new()));

/// The real form of a project or session folder, resolved the first time the process meets the
/// folder and kept: a boundary stays where the project was when it was opened, so replacing a
/// folder of its path by a link later cannot move the boundary (and a call pays no `readlink`
/// per component of the root). A folder that does not exist (yet) is resolved again each time.
fn real_folder(path: &Path) -> Arc<Path> {
    let kept = REAL_FOLDERS
        .read()
        .ok()
        .and_then(|folders| folders.get(path).cloned());
    if let Some(kept) = kept {
        return kept;
    }
    let resolved: Arc<Path> = Arc::from(real(path));
    if resolved.is_dir()
        && let Ok(mut folders) = REAL_FOLDERS.write()
    {
        if folders.len() >= FOLDERS_KEPT {
            folders.clear();
        }
        folders.insert(path.to_path_buf(), resolved.clone());
    }
    resolved
}

/// Whether `path` really lies outside both the project root and the session directory: links
/// are resolved on both sides, so a link inside the project to a file outside it is external,
/// and a project reached through a linked folder is not.
pub fn is_external(ctx: &ToolContext, path: &Path) -> bool {
    !Boundary::of(ctx).contains(&real(path))
}

/// The `external_directory` patterns a tool touching `path` must be allowed: none when it
/// really lies inside; else `<dir>/*` of its real form, and that of the path as given when it
/// names a different folder outside too.
pub fn external_globs(ctx: &ToolContext, path: &Path, kind: PathKind) -> Vec<String> {
    external_globs_of(ctx, path, &real(path), kind)
}

/// [`external_globs`] of `path` whose real form `real_path` is known.
fn external_globs_of(
    ctx: &ToolContext,
    path: &Path,
    real_path: &Path,
    kind: PathKind,
) -> Vec<String> {
    let boundary = Boundary::of(ctx);
    if boundary.contains(real_path) {
        return Vec::new();
    }
    let mut globs = vec![external_glob(real_path, kind)];
    let given = normalize(path);
    let inside_as_given = boundary.contains(&given)
        || given.starts_with(normalize(&ctx.project_root))
        || given.starts_with(normalize(&ctx.directory));
    let given_glob = external_glob(&given, kind);
    if !inside_as_given && !globs.contains(&given_glob) {
        globs.push(given_glob);
    }
    globs
}

/// `path` relative to the project root, with `..` steps when it lies outside (like Node's
/// `path.relative`); the pattern `edit` permissions are asked with.
pub fn relative_to_project(ctx: &ToolContext, path: &Path) -> String {
    relative_to(&ctx.project_root, path)
}

/// `path` relative to `root`, both normalized first (see [`relative_to_project`]).
fn relative_to(root: &Path, path: &Path) -> String {
    let (root, path) = (normalize(root), normalize(path));
    // Inside the root (the usual case): what follows it, as it is.
    match path.strip_prefix(&root) {
        Ok(inside) => inside.to_string_lossy().into_owned(),
        Err(_) => relative(&root, &path),
    }
}

/// The real form of `path` relative to the real project root: where an edit through links
/// really lands, as an `edit` pattern.
pub fn real_relative_to_project(ctx: &ToolContext, path: &Path) -> String {
    relative(&real(&ctx.project_root), &real(path))
}

/// A short title for `path`: relative to the project, `.` for the project root itself.
pub fn display_title(ctx: &ToolContext, path: &Path) -> String {
    match relative_to_project(ctx, path) {
        rel if rel.is_empty() => ".".into(),
        rel => rel,
    }
}

/// `to` relative to `from`, both absolute and normalized.
fn relative(from: &Path, to: &Path) -> String {
    let from: Vec<Component<'_>> = from.components().collect();
    let to: Vec<Component<'_>> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..from.len() {
        out.push("..");
    }
    for component in &to[common..] {
        out.push(component.as_os_str());
    }
    out.display().to_string()
}

/// The `external_directory` pattern for `path`: `<dir>/*`, where `dir` is the path itself for
/// a directory and its parent for a file.
pub fn external_glob(path: &Path, kind: PathKind) -> String {
    let dir = match kind {
        PathKind::Directory => path,
        PathKind::File => path.parent().unwrap_or(path),
    };
    let dir = dir.display().to_string();
    format!("{}/*", dir.trim_end_matches('/'))
}

/// Asks `external_directory` with patterns and always [`external_globs`] (the strictest first)
/// when `path` really lies outside the project and the session directory; does nothing
/// otherwise.
///
/// Tool output files under `<data_dir>/tool-output/` are asked about too: the default rules
/// allow them, and the rules decide.
pub async fn ask_external_directory(
    ctx: &ToolContext,
    path: &Path,
    kind: PathKind,
) -> Result<(), ToolError> {
    ask_external_directory_of(ctx, path, &real(path), kind).await
}

/// [`ask_external_directory`] for `path` whose real form ([`real`]) is `real_path`: for a
/// tool that needs the real form for other asks too, so that links are resolved once.
pub async fn ask_external_directory_of(
    ctx: &ToolContext,
    path: &Path,
    real_path: &Path,
    kind: PathKind,
) -> Result<(), ToolError> {
    let globs = external_globs_of(ctx, path, real_path, kind);
    let Some(first) = globs.first() else {
        return Ok(());
    };
    let parent = first.trim_end_matches("/*").to_string();
    let mut metadata = Map::new();
    metadata.insert("filepath".into(), Value::String(path.display().to_string()));
    if real_path != normalize(path) {
        metadata.insert(
            "realPath".into(),
            Value::String(real_path.display().to_string()),
        );
    }
    metadata.insert(
        "parentDir".into(),
        Value::String(if parent.is_empty() {
            "/".into()
        } else {
            parent
        }),
    );
    let patterns = access::strictest_first(ctx, "external_directory", globs.clone());
    ctx.ask(PermissionAsk {
        permission: "external_directory".into(),
        patterns,
        always: globs,
        force_ask: false,
        metadata,
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_joins_relative_paths_and_folds_dots() {
        let dir = Path::new("/srv/proj/sub");
        assert_eq!(resolve(dir, "a.txt"), PathBuf::from("/srv/proj/sub/a.txt"));
        assert_eq!(resolve(dir, "../b/./c"), PathBuf::from("/srv/proj/b/c"));
        assert_eq!(resolve(dir, "/etc/../tmp/x"), PathBuf::from("/tmp/x"));
        assert_eq!(resolve(dir, "/../.."), PathBuf::from("/"));
        assert_eq!(
            normalize(Path::new("../a/../../b")),
            PathBuf::from("../../b")
        );
    }

    #[cfg(unix)]
    #[test]
    fn real_paths_follow_links_and_keep_what_does_not_exist_yet() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("outside")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("link")).unwrap();
        assert_eq!(
            real(&root.join("link/new.txt")),
            root.join("outside/new.txt")
        );
        // A link is followed before the `..` after it, as the kernel does.
        assert_eq!(real(&root.join("link/../x")), root.join("x"));
        std::fs::create_dir(root.join("outside/deep")).unwrap();
        std::os::unix::fs::symlink("outside/deep", root.join("rel")).unwrap();
        assert_eq!(real(&root.join("rel/../y")), root.join("outside/y"));
        assert_eq!(real(&root.join("none/x")), root.join("none/x"));
        // A dangling link resolves to where a write through it would land.
        std::os::unix::fs::symlink("/nowhere/file", root.join("dangling")).unwrap();
        assert_eq!(real(&root.join("dangling")), PathBuf::from("/nowhere/file"));
        // A loop stops resolving instead of spinning.
        std::os::unix::fs::symlink(root.join("loop"), root.join("loop")).unwrap();
        let _ = real(&root.join("loop/x"));
    }

    #[cfg(unix)]
    #[test]
    fn a_project_folder_keeps_the_real_form_it_had_when_first_met() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for name in ["first", "second"] {
            std::fs::create_dir(root.join(name)).unwrap();
        }
        std::os::unix::fs::symlink(root.join("first"), root.join("project")).unwrap();
        let project = root.join("project");
        assert_eq!(&*real_folder(&project), root.join("first"));
        // The link is pointed elsewhere: the boundary stays where the project was.
        std::fs::remove_file(&project).unwrap();
        std::os::unix::fs::symlink(root.join("second"), &project).unwrap();
        assert_eq!(&*real_folder(&project), root.join("first"));
        // A folder that does not exist yet is not kept: once made, it is resolved anew.
        let later = root.join("later");
        assert_eq!(&*real_folder(&later), later);
        std::os::unix::fs::symlink(root.join("second"), &later).unwrap();
        assert_eq!(&*real_folder(&later), root.join("second"));
    }

    #[test]
    fn relative_paths_step_out_with_dots() {
        let root = Path::new("/srv/proj");
        assert_eq!(relative(root, Path::new("/srv/proj/src/a.rs")), "src/a.rs");
        assert_eq!(relative(root, Path::new("/srv/other/x")), "../other/x");
        assert_eq!(relative(root, Path::new("/srv/proj")), "");
    }

    #[test]
    fn paths_inside_and_outside_the_root_read_as_the_component_walk_gives_them() {
        let root = Path::new("/srv/proj/");
        for path in [
            "/srv/proj/src/a.rs",
            "/srv/proj",
            "/srv/proj/./src//b.rs",
            "/srv/proj/src/../c.rs",
            "/srv/project/x",
            "/srv/other/x",
            "/",
        ] {
            let path = Path::new(path);
            assert_eq!(
                relative_to(root, path),
                relative(&normalize(root), &normalize(path)),
                "{}",
                path.display()
            );
        }
        assert_eq!(
            relative_to(root, Path::new("/srv/project/x")),
            "../project/x"
        );
        assert_eq!(
            relative_to(root, Path::new("/srv/proj/src//b.rs")),
            "src/b.rs"
        );
    }

    #[test]
    fn external_glob_uses_the_parent_of_files() {
        assert_eq!(
            external_glob(Path::new("/etc/passwd"), PathKind::File),
            "/etc/*"
        );
        assert_eq!(
            external_glob(Path::new("/etc"), PathKind::Directory),
            "/etc/*"
        );
        assert_eq!(external_glob(Path::new("/x"), PathKind::File), "/*");
    }
}
