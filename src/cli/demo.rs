//! `taskforce demo`: an offline run of the scripted model over a small sample project.
//!
//! The demo lays out a tiny Python service in a temporary folder, configures the `scripted`
//! provider with its built-in `demo` script, and asks the build agent to explain the project.
//! The build agent fans out to three explore subagents in parallel; they run real glob, grep
//! and read calls on the sample files; then the build agent sums up their findings. Sessions are
//! stored in a real SQLite database whose location is printed at the end.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use taskforce_actors::{PromptInput, Runtime, RuntimeOptions};
use taskforce_agents::config::{LoadOptions, load};

use super::request::Request;
use super::run::{Format, Show, drive};
use super::{Context, UsageError};

/// `taskforce demo` arguments.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the sample project and its data in this folder instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Print one event per line on stdout instead of the live view and the answer.
    #[arg(long)]
    pub json: bool,
}

/// The sample project: a tiny inventory HTTP service in Python.
const SAMPLE: &[(&str, &str)] = &[
    (
        "README.md",
        "# inventory\n\nA tiny inventory HTTP service written in Python: it lists and creates items, \
         and reports its health. Settings come from settings.toml and APP_* environment variables.\n",
    ),
    ("settings.toml", "port = 8080\ndebug = false\n"),
    (
        "src/server.py",
        "\"\"\"HTTP request handlers of the inventory service.\"\"\"\n\nITEMS = []\n\n\
def handle_health(request):\n    return 200, {\"status\": \"ok\"}\n\n\
def handle_list_items(request):\n    return 200, {\"items\": ITEMS}\n\n\
def handle_create_item(request):\n    item = request.json()\n    ITEMS.append(item)\n    return 201, item\n\n\
ROUTES = {\n    (\"GET\", \"/health\"): handle_health,\n    (\"GET\", \"/items\"): handle_list_items,\n    (\"POST\", \"/items\"): handle_create_item,\n}\n",
    ),
    (
        "src/config.py",
        "\"\"\"Configuration loading.\"\"\"\n\nimport os\nimport tomllib\n\n\
def load_config(path=\"settings.toml\"):\n    with open(path, \"rb\") as f:\n        config = tomllib.load(f)\n    \
config[\"port\"] = int(os.environ.get(\"APP_PORT\", config[\"port\"]))\n    \
config[\"debug\"] = os.environ.get(\"APP_DEBUG\", str(config[\"debug\"])).lower() == \"true\"\n    return config\n",
    ),
    (
        "tests/test_server.py",
        "from src.server import handle_health, handle_create_item\n\n\
def test_health():\n    assert handle_health(None) == (200, {\"status\": \"ok\"})\n\n\
def test_create_item():\n    class Req:\n        def json(self):\n            return {\"name\": \"bolt\"}\n    \
assert handle_create_item(Req())[0] == 201\n",
    ),
];

/// The demo's configuration: the scripted provider playing the `demo` script.
const CONFIG: &str =
    "model = \"scripted/demo\"\n\n[provider.scripted]\ntype = \"scripted\"\nscript = \"demo\"\n";

/// The question the build agent answers.
const QUESTION: &str = "Explain how this project is organised: its HTTP handlers, how configuration is loaded, and what is tested.";

/// Runs the demo.
pub fn run(context: &Context, args: DemoArgs) -> anyhow::Result<()> {
    let temp;
    let base = match &args.dir {
        Some(dir) => dir.clone(),
        None => {
            temp = tempfile::Builder::new()
                .prefix("taskforce-demo-")
                .tempdir()?;
            temp.keep()
        }
    };
    let project = base.join("inventory");
    lay_out(&project)?;
    let data_dir = context
        .data_dir_flag
        .clone()
        .unwrap_or_else(|| base.join("data"));
    // Hermetic: no user or global config, only the demo's own.
    let mut env = BTreeMap::new();
    env.insert("HOME".to_string(), base.join("home").display().to_string());
    let loaded = load(&LoadOptions {
        cwd: project.clone(),
        config_file: None,
        data_dir: Some(data_dir.clone()),
        env: env.clone(),
    })
    .map_err(UsageError::new)?;
    let format = if args.json {
        Format::Json
    } else {
        Format::Text
    };
    if !args.json {
        eprintln!("taskforce demo — offline, scripted model, real tools, real store");
        eprintln!("sample project: {}", project.display());
        eprintln!("question: {QUESTION}\n");
    }
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let system = actix::System::with_tokio_rt(move || tokio_rt);
    let config = loaded.config.clone();
    system.block_on(async move {
        let mut options = RuntimeOptions::new(loaded);
        options.env = env;
        let runtime = Runtime::start(options).await?;
        let session = runtime
            .create_session(None, Some("taskforce demo".into()))
            .await?;
        let result = drive(
            &runtime,
            &session.id,
            "build",
            &config,
            Request::prompt(PromptInput::text(QUESTION).with_agent("build")),
            Show {
                format,
                yes: true,
                quiet: false,
            },
        )
        .await;
        if !args.json {
            let tree = runtime.tree(&session.id).await?;
            eprintln!(
                "\nsessions stored in {} ({} child sessions)",
                data_dir.join("taskforce.db").display(),
                tree.children.len()
            );
            eprintln!(
                "inspect them: taskforce --data-dir {} sessions tree {}",
                data_dir.display(),
                session.id
            );
        }
        result
    })
}

/// Writes the sample project (and its demo config) below `dir`.
fn lay_out(dir: &Path) -> std::io::Result<()> {
    for (rel, text) in SAMPLE {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    std::fs::create_dir_all(dir.join(".git"))?;
    std::fs::write(dir.join("taskforce.toml"), CONFIG)
}
