// A real keyfire node for a test file: a redis-server on a free port (the shipped redis.conf, a
// temp dir, no persistence) and `keyfire serve` with a token, `handlers.http.allowed_hosts =
// ["127.0.0.1"]` and a signing secret for that host. The binary is KEYFIRE_BIN, default
// target/debug/keyfire (build it with `cargo build --bin keyfire`). `startReceiver` is a local
// HTTP server that records what the node sends it.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { after, before, test as nodeTest } from "node:test";
import { fileURLToPath } from "node:url";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");

export function keyfireBin() {
  const bin = process.env.KEYFIRE_BIN ?? "target/debug/keyfire";
  return isAbsolute(bin) ? bin : join(ROOT, bin);
}

export function freePort() {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolvePort(port));
    });
  });
}

export function newSecret() {
  return `whsec_${randomBytes(32).toString("base64")}`;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(check, timeoutMs, what, logFile, child) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) {
      throw new Error(`${what} exited with ${child.exitCode}:\n${existsSync(logFile) ? readFileSync(logFile, "utf8") : ""}`);
    }
    if (await check().catch(() => false)) return;
    await sleep(50);
  }
  const tail = logFile && existsSync(logFile) ? readFileSync(logFile, "utf8").slice(-4000) : "";
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}\n${tail}`);
}

function redisAnswers(port) {
  return new Promise((resolveAnswer) => {
    const socket = connect(port, "127.0.0.1");
    socket.setTimeout(1000);
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolveAnswer(data.toString().startsWith("+PONG"));
    });
    socket.once("error", () => resolveAnswer(false));
    socket.once("timeout", () => {
      socket.destroy();
      resolveAnswer(false);
    });
  });
}

function stopProcess(child) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolveStop) => {
    const kill = setTimeout(() => child.kill("SIGKILL"), 15_000);
    child.once("exit", () => {
      clearTimeout(kill);
      resolveStop();
    });
    child.kill("SIGTERM");
  });
}

let anyFailed = false;

/** `node:test`'s `test`, noting a failure so that `stop()` prints the node's log. */
export function test(name, fn) {
  return nodeTest(name, async (t) => {
    try {
      await fn(t);
    } catch (err) {
      anyFailed = true;
      throw err;
    }
  });
}

/**
 * Start redis-server and a node; resolves to `{ url, token, signingSecret, log, stop(),
 * stopRedis(), startRedis() }`: the last two take its Redis away and bring it back on the same
 * port (with `persist`, from its append-only file, as the shipped redis.conf keeps it).
 * Call `stop()` in an `after` hook; it prints the node's log when a `test` of this module
 * failed (or `printLog` is true).
 */
export async function startNode({ persist = false } = {}) {
  const binary = keyfireBin();
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run \`cargo build --bin keyfire\` (or set KEYFIRE_BIN)`);
  const work = mkdtempSync(join(tmpdir(), "keyfire-ts-"));
  const redisPort = await freePort();
  const apiPort = await freePort();
  const redisLog = join(work, "redis.log");
  const nodeLog = join(work, "node.log");
  let redis;
  let node;
  const stop = async ({ printLog = anyFailed } = {}) => {
    // Only the processes started here, by their handles.
    await stopProcess(node);
    await stopProcess(redis);
    if (printLog && existsSync(nodeLog)) process.stderr.write(`--- ${nodeLog}\n${readFileSync(nodeLog, "utf8").slice(-4000)}\n`);
    rmSync(work, { recursive: true, force: true });
  };
  // A test process that dies on an assertion must not leave them behind.
  process.once("exit", () => {
    for (const child of [node, redis]) if (child && child.exitCode === null) child.kill("SIGKILL");
  });
  const startRedis = async () => {
    // A copy in the work dir: never started from the checkout's file, which the build embeds.
    const conf = join(work, "redis.conf");
    copyFileSync(join(ROOT, "redis.conf"), conf);
    redis = spawn(
      "redis-server",
      [conf, "--port", String(redisPort), "--bind", "127.0.0.1", "--dir", work,
        "--save", "", "--appendonly", persist ? "yes" : "no", "--daemonize", "no", "--logfile", redisLog],
      { stdio: "ignore" },
    );
    await waitUntil(() => redisAnswers(redisPort), 30_000, "redis-server", redisLog, redis);
  };
  try {
    await startRedis();

    const token = randomBytes(16).toString("hex");
    const signingSecret = newSecret();
    const config = join(work, "keyfire.toml");
    writeFileSync(
      config,
      `[redis]\nurl = "redis://127.0.0.1:${redisPort}/0"\n\n` +
        `[api]\nlisten = "127.0.0.1:${apiPort}"\ntoken = "${token}"\n\n` +
        `[handlers.http]\nallowed_hosts = ["127.0.0.1"]\n\n` +
        `[handlers.http.signing_secrets]\n"127.0.0.1" = ["${signingSecret}"]\n`,
    );
    const out = openSync(nodeLog, "w");
    node = spawn(binary, ["serve", "--config", config], { stdio: ["ignore", out, out], env: { ...process.env, NO_COLOR: "1" } });
    const url = `http://127.0.0.1:${apiPort}`;
    await waitUntil(async () => (await fetch(`${url}/readyz`)).status === 200, 60_000, "keyfire serve", nodeLog, node);
    return { url, token, signingSecret, log: nodeLog, stop, startRedis, stopRedis: () => stopProcess(redis) };
  } catch (err) {
    await stop({ printLog: true });
    throw err;
  }
}

/**
 * A node for the whole test file: started in a `before` hook, which hands `onStart` the node
 * and a client of it (`Keyfire`, made with the node's url and token), and stopped `after`.
 */
export function nodeForFile(Keyfire, onStart) {
  let node;
  before(async () => {
    node = await startNode();
    onStart(node, new Keyfire({ baseUrl: node.url, token: node.token }));
  });
  after(async () => node?.stop());
}

/** A topic of the test's own. */
export function newTopic() {
  return `t-${randomBytes(6).toString("hex")}`;
}

/** Records each request's raw body and headers; answers 200. */
export async function startReceiver() {
  const waiting = [];
  const received = [];
  const server = createHttpServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      res.writeHead(200).end();
      const request = { path: req.url, body: Buffer.concat(chunks), headers: req.headers };
      const waiter = waiting.shift();
      if (waiter) waiter(request);
      else received.push(request);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    next(timeoutMs = 30_000) {
      if (received.length) return Promise.resolve(received.shift());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error("no request reached the receiver")), timeoutMs);
        waiting.push((r) => {
          clearTimeout(timer);
          resolve(r);
        });
      });
    },
    /** How many requests arrived that no `next()` took yet. */
    unread: () => received.length,
    close: () => new Promise((r) => server.close(r)),
  };
}
