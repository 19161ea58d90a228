//! OpenCode's own SDK (`@opencode-ai/sdk` 1.1.65, v2 client) drives `taskforce serve`: the
//! Node test in `tests/sdk/` runs against the real binary and a fake OpenAI-compatible model.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use taskforce_testkit::fake_openai::{FakeOpenAi, RecordedRequest, Response};

/// The fake model of compat.test.mjs (see its header).
fn model(req: &RecordedRequest) -> Response {
    let child = !req.tool_names().contains(&"task");
    let after_tool = req.last_role() == Some("tool");
    if req.contains("please stall") {
        return Response::text("thinking about it for a long while").stall_after(2);
    }
    match (child, after_tool) {
        (true, false) => Response::tool_calls(&[(
            "call_bash_1",
            "bash",
            r#"{"command":"echo child-ran","description":"Run the check"}"#,
        )]),
        (true, true) => Response::text("child done"),
        (false, false) => Response::tool_calls(&[(
            "call_task_1",
            "task",
            r#"{"description":"Run the check","prompt":"run the check","subagent_type":"general"}"#,
        )]),
        (false, true) => Response::text("parent done"),
    }
}

struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn npm_ci(dir: &Path) {
    if dir
        .join("node_modules/@opencode-ai/sdk/package.json")
        .exists()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .unwrap_or_else(|e| {
            panic!("the SDK compatibility test needs node and npm (npm ci in tests/sdk): {e}")
        });
    assert!(status.success(), "npm ci in tests/sdk failed");
}

#[tokio::test(flavor = "multi_thread")]
async fn opencode_sdk_v2_drives_a_subagent_flow_against_taskforce_serve() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    npm_ci(&sdk);
    let fake = FakeOpenAi::start(model).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    let home = dir.path().join("home");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        project.join("taskforce.toml"),
        format!(
            "model = \"fake/gpt-test\"\nsmall_model = \"scripted/echo\"\n\n[provider.fake]\ntype = \"openai\"\nbase_url = \"{}\"\napi_key = \"sk-test\"\n\n[permission]\nbash = \"ask\"\n",
            fake.base_url()
        ),
    )
    .unwrap();
    let skill = project.join(".taskforce/skills/sdk-check/SKILL.md");
    std::fs::create_dir_all(skill.parent().unwrap()).unwrap();
    std::fs::write(
        &skill,
        "---\nname: sdk-check\ndescription: Checks the SDK\n---\nRun the checks.\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskforce"))
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(dir.path().join("data"))
        .current_dir(&project)
        .env_clear()
        .env("HOME", &home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let serve = Serve(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("taskforce server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line from taskforce serve: {line:?}"))
        .to_string();

    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .args(["--test", "compat.test.mjs"])
            .current_dir(&sdk)
            .env("TASKFORCE_URL", &url)
            .output(),
    )
    .await
    .expect("the SDK test did not finish within 2 minutes")
    .expect("node runs");
    drop(serve);
    assert!(
        output.status.success(),
        "the SDK test failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
