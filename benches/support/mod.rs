//! Shared set-up of the benchmarks: a throwaway project whose model is a scripted script.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use taskforce::actors::{Runtime, RuntimeOptions};
use taskforce_testkit::Sandbox;

pub mod store_trace;

/// The allocator of the `taskforce` binary, so that the benchmarks measure what it runs.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A project on disk configured with the scripted provider playing `script`.
pub struct Bench {
    sandbox: Sandbox,
    pub project: PathBuf,
    pub data: PathBuf,
    env: BTreeMap<String, String>,
}

impl Bench {
    pub fn new(script: &serde_json::Value) -> Bench {
        let sandbox = Sandbox::new();
        sandbox.file("notes.txt", "hello\nfrom\nthe\nbench\n");
        let script_path = sandbox.root().join("script.json");
        std::fs::write(&script_path, script.to_string()).expect("script");
        sandbox.config(&format!(
            "model = \"scripted/bench\"\n[provider.scripted]\ntype = \"scripted\"\nscript = \"{}\"\n[subagent]\nmax_concurrent = 1000\nmax_total = 100000\nmax_per_session = 100000\n",
            script_path.display()
        ));
        Bench {
            project: sandbox.project.clone(),
            data: sandbox.data.clone(),
            env: sandbox.hermetic_env(),
            sandbox,
        }
    }

    /// A project on disk whose `taskforce.toml` is `config` as is.
    pub fn configured(config: &str) -> Bench {
        let bench = Bench::new(&serde_json::json!({"rules": []}));
        bench.sandbox.config(config);
        bench
    }

    pub fn options(&self) -> RuntimeOptions {
        let mut options = RuntimeOptions::new(self.sandbox.load(&self.env));
        options.env = self.env.clone();
        if let Ok(n) = std::env::var("TF_ARBITERS") {
            options.arbiters = n.parse().unwrap_or(0);
        }
        // `TF_PIN=1` pins the arbiter threads, one per core (see `RuntimeOptions::pin_arbiters`).
        if std::env::var("TF_PIN").is_ok_and(|v| v == "1") {
            options.pin_arbiters = true;
        }
        options
    }

    pub async fn runtime(&self) -> Runtime {
        Runtime::start(self.options())
            .await
            .expect("runtime starts")
    }

    /// A runtime with its own actix system thread, for plain tokio hosts.
    pub fn runtime_dedicated(&self) -> Runtime {
        Runtime::spawn_dedicated(self.options()).expect("runtime starts")
    }
}

pub fn in_system<F: std::future::Future<Output = ()> + 'static>(body: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    actix::System::with_tokio_rt(move || rt).block_on(body);
}

/// Median, 95th percentile and mean of `samples`.
pub fn summary(samples: &mut [Duration]) -> (Duration, Duration, Duration) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p95 = samples[(samples.len() * 95 / 100).min(samples.len() - 1)];
    let mean = samples.iter().sum::<Duration>() / u32::try_from(samples.len()).unwrap_or(1);
    (median, p95, mean)
}

/// The peak resident set size of this process, from /proc (Linux), in MiB.
pub fn peak_rss_mib() -> Option<f64> {
    status_mib("self", "VmHWM:")
}

/// The CPU time this process has used so far (user and system, all threads), from
/// `/proc/self/stat` (Linux; in clock ticks, usually 10 ms), in milliseconds.
pub fn cpu_ms() -> Option<f64> {
    cpu_split_ms().map(|(user, system)| user + system)
}

/// The CPU time this process has used so far in user and in system mode (all threads), from
/// `/proc/self/stat` (Linux; in clock ticks, usually 10 ms), in milliseconds.
pub fn cpu_split_ms() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user * 10.0, system * 10.0))
}

/// The resident set size of this process now, from /proc (Linux), in MiB.
pub fn rss_mib() -> Option<f64> {
    status_mib("self", "VmRSS:")
}

/// A `/proc/<process>/status` field given in kB (`VmRSS:`, `VmHWM:`), in MiB.
fn status_mib(process: &str, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{process}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The resident set size (`VmRSS:`) or its peak (`VmHWM:`) of process `pid`, in MiB (0 when
/// it cannot be read).
pub fn rss_of(pid: u32, field: &str) -> f64 {
    status_mib(&pid.to_string(), field).unwrap_or(0.0)
}

/// A field of `/proc/<pid>/smaps_rollup` (`Rss:`, `Anonymous:`, `LazyFree:`…), in MiB (0 when
/// it cannot be read).
pub fn rollup_of(pid: u32, field: &str) -> f64 {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    rollup
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0)
}

/// `taskforce serve` on port 0 in `bench`'s project (the binary built with the benchmarks, in
/// the `dist` profile, or the one `TF_SERVE_BIN` names, to compare builds); answers the child
/// process and its base URL once it listens.
pub fn spawn_serve(bench: &Bench) -> (std::process::Child, String) {
    use std::io::BufRead;
    let binary =
        std::env::var_os("TF_SERVE_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_taskforce").into());
    let mut child = std::process::Command::new(binary)
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(&bench.data)
        .current_dir(&bench.project)
        .env("HOME", bench.project.join("home"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("taskforce serve starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .expect("serve prints its address");
    let base = line
        .trim()
        .rsplit_once(' ')
        .map(|(_, url)| url.to_string())
        .expect("serve prints its address");
    (child, base)
}

/// A new session of the server at `base` (`POST /session`); answers its id.
pub async fn http_session(http: &reqwest::Client, base: &str) -> String {
    let session: serde_json::Value = http
        .post(format!("{base}/session"))
        .json(&serde_json::json!({}))
        .send()
        .await
        .expect("POST /session")
        .json()
        .await
        .expect("a session");
    session["id"].as_str().expect("its id").to_string()
}

/// Prompts session `id` of the server at `base` with `text` and reads the whole answer
/// (`POST /session/:id/message`, which answers once the loop is done).
pub async fn http_prompt(http: &reqwest::Client, base: &str, id: &str, text: &str) {
    let answered = http
        .post(format!("{base}/session/{id}/message"))
        .json(&serde_json::json!({"parts": [{"type": "text", "text": text}]}))
        .send()
        .await
        .expect("POST /session/:id/message");
    assert!(answered.status().is_success(), "{}", answered.status());
    answered.bytes().await.expect("the answer");
}

/// The context switches of this process's threads so far, by thread name, from
/// `/proc/self/task/*/status` (Linux): voluntary ones (a thread waiting) plus involuntary ones.
pub fn switches_by_thread() -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for status in of_each_thread("status") {
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
        };
        let name = field("Name:").unwrap_or("?").to_string();
        let count: u64 = ["voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"]
            .iter()
            .filter_map(|f| field(f)?.parse::<u64>().ok())
            .sum();
        *out.entry(name).or_default() += count;
    }
    out
}

/// What each thread name added to its context switches since `before` (see
/// [`switches_by_thread`]), most first, as `name count` pairs, and their total.
pub fn switches_since(before: &BTreeMap<String, u64>) -> (String, u64) {
    let mut added: Vec<(String, u64)> = switches_by_thread()
        .into_iter()
        .map(|(name, n)| {
            let was = before.get(&name).copied().unwrap_or(0);
            (name, n.saturating_sub(was))
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    added.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let total = added.iter().map(|(_, n)| n).sum();
    let text = added
        .iter()
        .map(|(name, n)| format!("{name} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    (text, total)
}

/// The CPU time of this process's threads so far (user and system), by thread name, from
/// `/proc/self/task/*/stat` (Linux; in clock ticks, usually 10 ms), in milliseconds.
pub fn cpu_by_thread() -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for stat in of_each_thread("stat") {
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let name = head.split_once('(').map_or("?", |(_, n)| n).to_string();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks: f64 = [11, 12]
            .iter()
            .filter_map(|&i| fields.get(i)?.parse::<f64>().ok())
            .sum();
        *out.entry(name).or_default() += ticks * 10.0;
    }
    out
}

/// What each thread name added to its CPU time since `before` (see [`cpu_by_thread`]), most
/// first, as `name ms` pairs.
pub fn cpu_since(before: &BTreeMap<String, f64>) -> String {
    let mut added: Vec<(String, f64)> = cpu_by_thread()
        .into_iter()
        .map(|(name, ms)| {
            let was = before.get(&name).copied().unwrap_or(0.0);
            (name, ms - was)
        })
        .filter(|(_, ms)| *ms > 0.0)
        .collect();
    added.sort_by(|a, b| b.1.total_cmp(&a.1));
    added
        .iter()
        .map(|(name, ms)| format!("{name} {ms:.0} ms"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text of `/proc/self/task/<thread>/<file>` for each thread of this process that has one
/// (Linux; none elsewhere).
fn of_each_thread(file: &str) -> Vec<String> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join(file)).ok())
        .collect()
}
