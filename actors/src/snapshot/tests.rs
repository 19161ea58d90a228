use std::fs;

use super::*;
use taskforce_agents::model::FileDiffStatus;

/// A git project (an empty `.git` is enough: snapshots live in their own store) and a data
/// directory beside it.
fn project() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    fs::create_dir_all(project.join(".git")).unwrap();
    fs::create_dir_all(project.join("src")).unwrap();
    fs::write(project.join("src/a.txt"), "one\ntwo\n").unwrap();
    fs::write(project.join("c.txt"), "see\n").unwrap();
    fs::write(project.join(".gitignore"), "target/\n").unwrap();
    let data = dir.path().join("data");
    (dir, project, data)
}

fn read(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok()
}

#[tokio::test]
async fn a_snapshot_lists_what_changed_since_and_puts_it_back() {
    let (_dir, project, data) = project();
    let snapshots = Snapshots::new(&data, true);
    let before = snapshots
        .track(&project.join("src"))
        .await
        .expect("a git project is snapshotted");
    assert!(
        data.join("snapshot").exists(),
        "the store lives under the data directory"
    );
    assert!(
        !project.join(".git/HEAD").exists(),
        "the project's own repository is untouched"
    );

    fs::write(project.join("src/a.txt"), "one\nTWO\nthree\n").unwrap();
    fs::write(project.join("b.txt"), "new\n").unwrap();
    fs::remove_file(project.join("c.txt")).unwrap();
    fs::create_dir_all(project.join("target")).unwrap();
    fs::write(project.join("target/out"), "ignored\n").unwrap();

    let mut changed = snapshots.changed_since(&project, &before.hash).await;
    changed.sort();
    let abs = |rel: &str| project.join(rel).to_string_lossy().into_owned();
    assert_eq!(changed, vec![abs("b.txt"), abs("c.txt"), abs("src/a.txt")]);

    let files: Vec<(String, String)> = changed
        .iter()
        .map(|f| (before.hash.clone(), f.clone()))
        .collect();
    let diffs = snapshots.diffs(&project, &files).await;
    let summary: Vec<(&str, u64, u64, Option<FileDiffStatus>)> = diffs
        .iter()
        .map(|d| (d.file.as_str(), d.additions, d.deletions, d.status))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("b.txt", 1, 0, Some(FileDiffStatus::Added)),
            ("c.txt", 0, 1, Some(FileDiffStatus::Deleted)),
            ("src/a.txt", 2, 1, Some(FileDiffStatus::Modified)),
        ]
    );
    let a = diffs.iter().find(|d| d.file == "src/a.txt").unwrap();
    assert_eq!(
        (a.before.as_str(), a.after.as_str()),
        ("one\ntwo\n", "one\nTWO\nthree\n")
    );
    assert!(
        snapshots
            .patch_text(&project, &before.hash)
            .await
            .contains("+TWO")
    );

    // Undo: each file as the snapshot had it, the new one gone.
    let after = snapshots.track(&project).await.unwrap();
    assert!(
        after.order > before.order,
        "later snapshots order after earlier ones"
    );
    snapshots.revert(&project, &files).await;
    assert_eq!(
        read(&project.join("src/a.txt")).as_deref(),
        Some("one\ntwo\n")
    );
    assert_eq!(read(&project.join("c.txt")).as_deref(), Some("see\n"));
    assert_eq!(read(&project.join("b.txt")), None);
    assert_eq!(
        read(&project.join("target/out")).as_deref(),
        Some("ignored\n")
    );
    assert!(
        snapshots.diffs(&project, &files).await.is_empty(),
        "nothing differs any more"
    );

    // Redo: the same files as the later snapshot had them.
    let redo: Vec<(String, String)> = changed
        .iter()
        .map(|f| (after.hash.clone(), f.clone()))
        .collect();
    snapshots.revert(&project, &redo).await;
    assert_eq!(
        read(&project.join("src/a.txt")).as_deref(),
        Some("one\nTWO\nthree\n")
    );
    assert_eq!(read(&project.join("b.txt")).as_deref(), Some("new\n"));
    assert_eq!(read(&project.join("c.txt")), None);
}

#[tokio::test]
async fn large_untracked_files_and_the_data_directory_stay_out_of_snapshots() {
    let (_dir, project, _) = project();
    let data = project.join(".data");
    let snapshots = Snapshots::new(&data, true);
    let before = snapshots.track(&project).await.unwrap();
    fs::write(project.join("big.bin"), vec![b'x'; (LARGE + 1) as usize]).unwrap();
    fs::create_dir_all(&data).unwrap();
    fs::write(data.join("db"), "rows").unwrap();
    fs::write(project.join("small.txt"), "s").unwrap();
    let changed = snapshots.changed_since(&project, &before.hash).await;
    assert_eq!(
        changed,
        vec![project.join("small.txt").to_string_lossy().into_owned()]
    );
}

#[tokio::test]
async fn nothing_is_snapshotted_outside_a_git_project_or_when_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    fs::create_dir_all(&plain).unwrap();
    let snapshots = Snapshots::new(&dir.path().join("data"), true);
    assert!(snapshots.track(&plain).await.is_none());
    assert!(!dir.path().join("data").exists());

    let (_dir, project, data) = project();
    let off = Snapshots::new(&data, false);
    assert!(off.track(&project).await.is_none());
}
