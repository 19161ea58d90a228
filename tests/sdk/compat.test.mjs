// OpenCode's own SDK (@opencode-ai/sdk 1.1.65, v2 client) driving `taskforce serve` unchanged.
// Run by tests/suite/sdk.rs, which starts the fake OpenAI-compatible model server and the
// taskforce binary and passes the server's URL in TASKFORCE_URL. The fake model: a root session
// asked to "delegate" calls the task tool (subagent `general`); the child calls bash, which the
// project's config makes an ask; after the tool results both answer with text. "stall" hangs.
import test from "node:test";
import assert from "node:assert/strict";
import { createOpencodeClient } from "@opencode-ai/sdk/v2";

const baseUrl = process.env.TASKFORCE_URL;
assert.ok(baseUrl, "TASKFORCE_URL must name the taskforce server");
const client = createOpencodeClient({ baseUrl });

/** Every event seen on /event, and waiters for the next matching one. */
class Events {
  constructor() {
    this.seen = [];
    this.waiters = [];
    this.controller = new AbortController();
  }
  async start() {
    const sub = await client.event.subscribe({}, { signal: this.controller.signal });
    (async () => {
      try {
        for await (const event of sub.stream) {
          this.seen.push(event);
          for (const w of [...this.waiters]) {
            if (w.match(event)) {
              this.waiters.splice(this.waiters.indexOf(w), 1);
              w.resolve(event);
            }
          }
        }
      } catch (e) {
        if (!this.controller.signal.aborted) throw e;
      }
    })();
    await this.next((e) => e.type === "server.connected", "server.connected", true);
  }
  /** The first event matching `match`, looking at those already seen unless `future`. */
  next(match, label, future = false, ms = 20000) {
    if (!future) {
      const found = this.seen.find(match);
      if (found) return Promise.resolve(found);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out waiting for ${label}`)), ms);
      this.waiters.push({
        match,
        resolve: (e) => {
          clearTimeout(timer);
          resolve(e);
        },
      });
    });
  }
  stop() {
    this.controller.abort();
  }
}

function ok(result, what) {
  assert.equal(result.error, undefined, `${what} failed: ${JSON.stringify(result.error)}`);
  return result.data;
}

function textOf(message) {
  return message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

test("the v2 client drives a subagent flow with a child's permission ask, then an abort", async () => {
  const events = new Events();
  await events.start();
  try {
    const health = ok(await client.global.health(), "global.health");
    assert.equal(health.healthy, true);

    const agents = ok(await client.app.agents(), "app.agents");
    assert.ok(agents.some((a) => a.name === "general"), "the general subagent is listed");
    const commands = ok(await client.command.list(), "command.list");
    assert.ok(commands.some((c) => c.name === "review"), "the built-in review command is listed");
    const skills = ok(await client.app.skills(), "app.skills");
    assert.deepEqual(
      skills.map((s) => [s.name, s.description, s.content]),
      [["sdk-check", "Checks the SDK", "Run the checks."]],
    );
    assert.match(skills[0].location, /\.taskforce\/skills\/sdk-check\/SKILL\.md$/);

    // A root session delegates; the child's bash call needs approval.
    const root = ok(await client.session.create({ title: "sdk compat" }), "session.create");
    assert.match(root.id, /^ses_/);
    const queued = await client.session.promptAsync({
      sessionID: root.id,
      parts: [{ type: "text", text: "please delegate the check" }],
    });
    assert.equal(queued.response.status, 204);

    const created = await events.next(
      (e) => e.type === "session.created" && e.properties.info.parentID === root.id,
      "the child's session.created",
    );
    const childID = created.properties.info.id;
    const asked = await events.next(
      (e) => e.type === "permission.asked",
      "permission.asked from the child",
    );
    assert.equal(asked.properties.sessionID, childID, "the ask keeps the child's sessionID");
    assert.equal(asked.properties.rootSessionID, root.id, "the ask names the root");
    assert.deepEqual(asked.properties.path, ["build", "general"]);
    assert.equal(asked.properties.permission, "bash");
    assert.deepEqual(asked.properties.patterns, ["echo child-ran"]);

    const pending = ok(await client.permission.list(), "permission.list");
    assert.deepEqual(pending.map((p) => p.id), [asked.properties.id]);
    const replied = ok(
      await client.permission.reply({ requestID: asked.properties.id, reply: "once" }),
      "permission.reply",
    );
    assert.equal(replied, true);
    await events.next(
      (e) => e.type === "permission.replied" && e.properties.requestID === asked.properties.id,
      "permission.replied",
    );
    await events.next(
      (e) => e.type === "session.idle" && e.properties.sessionID === root.id,
      "the root's session.idle",
    );

    const children = ok(await client.session.children({ sessionID: root.id }), "session.children");
    assert.deepEqual(children.map((c) => c.id), [childID]);
    assert.match(children[0].title, /\(@general subagent\)$/);

    const rootMessages = ok(await client.session.messages({ sessionID: root.id }), "session.messages");
    const last = rootMessages[rootMessages.length - 1];
    assert.equal(last.info.role, "assistant");
    assert.match(textOf(last), /parent done/);
    const task = rootMessages
      .flatMap((m) => m.parts)
      .find((p) => p.type === "tool" && p.tool === "task");
    assert.equal(task.state.status, "completed");
    assert.equal(task.state.metadata.sessionId, childID);

    const childMessages = ok(await client.session.messages({ sessionID: childID }), "child messages");
    const bash = childMessages
      .flatMap((m) => m.parts)
      .find((p) => p.type === "tool" && p.tool === "bash");
    assert.equal(bash.state.status, "completed");
    assert.match(bash.state.output, /child-ran/);
    assert.ok(
      events.seen.some(
        (e) => e.type === "message.part.updated" && e.properties.part.sessionID === childID,
      ),
      "the child's parts streamed as events",
    );

    // A prompt whose model hangs is aborted.
    const second = ok(await client.session.create({}), "session.create");
    const stalled = await client.session.promptAsync({
      sessionID: second.id,
      parts: [{ type: "text", text: "please stall" }],
    });
    assert.equal(stalled.response.status, 204);
    await events.next(
      (e) =>
        e.type === "message.part.delta" &&
        e.properties.sessionID === second.id &&
        e.properties.messageID !== undefined &&
        e.properties.partID !== undefined &&
        e.properties.field === "text" &&
        e.properties.delta.length > 0,
      "the stalled answer's first text",
    );
    const status = ok(await client.session.status(), "session.status");
    assert.equal(status[second.id]?.type, "busy");
    assert.equal(ok(await client.session.abort({ sessionID: second.id }), "session.abort"), true);
    await events.next(
      (e) => e.type === "session.idle" && e.properties.sessionID === second.id,
      "the aborted session's idle",
    );
    const aborted = ok(await client.session.messages({ sessionID: second.id }), "messages");
    const answer = aborted[aborted.length - 1];
    assert.equal(answer.info.role, "assistant");
    assert.equal(answer.info.error?.name, "MessageAbortedError");

    const missing = await client.session.get({ sessionID: "ses_00000000000000000000000000" });
    assert.equal(missing.response.status, 404);
    assert.equal(missing.error.name, "NotFoundError");
  } finally {
    events.stop();
  }
});

test("the routes OpenCode's TUI loads at start answer in the SDK's shapes", async () => {
  const providers = ok(await client.config.providers(), "config.providers");
  const fake = providers.providers.find((p) => p.id === "fake");
  assert.ok(fake, "the configured provider is listed");
  assert.equal(fake.models["gpt-test"].providerID, "fake");
  assert.equal(typeof fake.models["gpt-test"].limit.context, "number");
  assert.equal(providers.default.fake, "gpt-test");

  const listed = ok(await client.provider.list(), "provider.list");
  assert.ok(listed.connected.includes("fake"));
  assert.ok(listed.all.some((p) => p.id === "openai"), "known providers are listed");
  assert.deepEqual(ok(await client.provider.auth(), "provider.auth"), {});

  const config = ok(await client.config.get(), "config.get");
  assert.equal(config.keybinds.session_parent, "<leader>up");
  assert.equal(config.keybinds.leader, "ctrl+x");

  const paths = ok(await client.path.get(), "path.get");
  assert.ok(paths.worktree.endsWith("project"), paths.worktree);
  const project = ok(await client.project.current(), "project.current");
  assert.equal(project.worktree, paths.worktree);
  assert.deepEqual(ok(await client.project.list(), "project.list"), [project]);
  ok(await client.vcs.get(), "vcs.get");

  assert.deepEqual(ok(await client.mcp.status(), "mcp.status"), {});
  const badServer = await client.mcp.add({ name: "bad", config: { type: "local", command: [] } });
  assert.equal(badServer.response.status, 400);
  assert.match(JSON.stringify(badServer.error), /mcp\.bad\.command/);
  const noServer = await client.mcp.connect({ name: "nope" });
  assert.equal(noServer.response.status, 404);
  assert.deepEqual(ok(await client.lsp.status(), "lsp.status"), []);
  assert.deepEqual(ok(await client.formatter.status(), "formatter.status"), []);
  assert.deepEqual(ok(await client.experimental.resource.list(), "experimental.resource.list"), {});

  const matches = ok(await client.find.text({ pattern: "gpt-test" }), "find.text");
  assert.equal(matches[0].path.text, "taskforce.toml");
  assert.equal(matches[0].submatches[0].match.text, "gpt-test");
  const nodes = ok(await client.file.list({ path: "" }), "file.list");
  assert.ok(nodes.some((n) => n.name === "taskforce.toml" && n.type === "file"));
  const content = ok(await client.file.read({ path: "taskforce.toml" }), "file.read");
  assert.equal(content.type, "text");
  assert.match(content.content, /gpt-test/);
  const outside = await client.file.read({ path: "../outside.txt" });
  assert.equal(outside.response.status, 400);
  assert.ok(Array.isArray(ok(await client.file.status(), "file.status")));

  assert.equal(
    ok(await client.app.log({ service: "sdk-test", level: "info", message: "hello" }), "app.log"),
    true,
  );
  const session = ok(await client.session.create({}), "session.create");
  const shared = await client.session.share({ sessionID: session.id });
  assert.equal(shared.response.status, 400);
  assert.match(shared.error.data.message, /sharing is not supported by taskforce/);
});
