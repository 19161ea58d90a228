//! The crate's rooms stay in layers: no import cycle between the top-level modules of
//! `actors/src`, and no module below the runtime imports it. Read from the sources' `crate::`
//! paths (comments left out).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of `src/` and the `.rs` files of each.
fn modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut modules = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut files = Vec::new();
            collect(&path, &mut files);
            modules.insert(name, files);
        } else if path.extension().is_some_and(|e| e == "rs") && name != "lib" {
            modules.insert(name, vec![path]);
        }
    }
    modules
}

fn collect(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The modules named by `crate::NAME` paths in `text`, comments left out.
fn imports(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        for (at, _) in code.match_indices("crate::") {
            let name: String = code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.insert(name);
            }
        }
    }
    found
}

/// Every module's imports of other modules.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    modules
        .iter()
        .map(|(name, files)| {
            let mut edges = BTreeSet::new();
            for file in files {
                let text = std::fs::read_to_string(file).unwrap();
                edges.extend(
                    imports(&text)
                        .into_iter()
                        .filter(|m| m != name && modules.contains_key(m)),
                );
            }
            (name.clone(), edges)
        })
        .collect()
}

/// A cycle through `at`, if one is reachable from it.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    at: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(start) = path.iter().position(|m| m == at) {
        let mut cycle = path[start..].to_vec();
        cycle.push(at.to_string());
        return Some(cycle);
    }
    if done.contains(at) {
        return None;
    }
    path.push(at.to_string());
    for next in &graph[at] {
        if let Some(cycle) = cycle_from(graph, next, path, done) {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(at.to_string());
    None
}

#[test]
fn the_top_level_modules_import_each_other_without_a_cycle() {
    let graph = graph();
    assert!(graph.len() > 5, "the modules were found: {graph:?}");
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        let cycle = cycle_from(&graph, module, &mut Vec::new(), &mut done);
        assert!(cycle.is_none(), "import cycle: {cycle:?}\n{graph:#?}");
    }
}

#[test]
fn only_the_runtime_imports_the_runtime_and_sessions_never_import_subagents() {
    let graph = graph();
    for (module, edges) in &graph {
        assert!(
            !edges.contains("runtime"),
            "{module} imports the runtime above it"
        );
    }
    for low in ["session", "core", "bus", "store", "permission"] {
        assert!(
            !graph[low].contains("subagent") && !graph[low].contains("supervisor"),
            "{low} reaches up: {:?}",
            graph[low]
        );
    }
}

#[test]
fn imports_are_read_from_code_not_comments() {
    let text = "use crate::bus::Event; // see crate::runtime\n/// crate::store docs\n";
    let found = imports(text);
    assert!(found.contains("bus"));
    assert!(!found.contains("runtime"), "{found:?}");
    assert!(!found.contains("store"), "{found:?}");
}
