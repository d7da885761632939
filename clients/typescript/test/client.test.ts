/**
 * The client against a real memvaultd: tests/test_typescript_client.py starts
 * the daemon, sets MEMVAULT_HOME to its home (so the client finds the socket
 * by the same rule as the Python client), and names in MEMVAULT_TS_* the
 * sockets that must be refused: one nobody listens on, one that accepts and
 * never answers, one of another user, and a plain file.
 */

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  CONNECT_TIMEOUT_MS,
  ForeignSocket,
  InvalidArgument,
  MemvaultClient,
  MemvaultError,
  MemvaultEvent,
  NotFound,
  PermissionDenied,
  Unavailable,
  socketPath,
} from "../src";

function required(name: string): string {
  const value = process.env[name];
  assert.ok(value, `${name} is not set: run this suite through tests/test_typescript_client.py`);
  return value;
}

/** How long `promise` takes to settle, and the error it rejects with. */
async function failure(promise: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const start = Date.now();
  try {
    await promise;
  } catch (error) {
    return { error, ms: Date.now() - start };
  }
  assert.fail("the call succeeded");
}

describe("against the daemon", () => {
  let client: MemvaultClient;

  before(() => {
    required("MEMVAULT_HOME");
    client = new MemvaultClient();
  });

  after(() => client.close());

  test("finds the socket under MEMVAULT_HOME", () => {
    assert.equal(client.socket, path.join(required("MEMVAULT_HOME"), "run", "memvault.sock"));
    assert.equal(client.socket, socketPath());
  });

  test("remember, then recall finds it", async () => {
    const word = `quokka${randomUUID().slice(0, 8)}`;
    const result = await client.remember(`the team mascot is a ${word} named Pip`, {
      topic: "team.mascot",
      tags: ["team", "fun"],
      payload: { animal: word, legs: 4 },
      category: "culture",
    });
    assert.equal(result.outcome, "added");
    assert.ok(result.id);
    assert.ok(result.txid > 0);
    const hits = await client.recall(`what is the team mascot ${word}`, { topK: 3, minTxid: result.txid });
    assert.ok(hits.length >= 1);
    assert.equal(hits[0].memory.id, result.id);
    assert.equal(hits[0].memory.payload.animal, word);
    assert.deepEqual(hits[0].memory.tags, ["team", "fun"]);
    assert.ok(hits[0].score > 0);
    assert.equal(typeof hits.hasMore, "boolean");
  });

  test("a filter narrows the recall, and an empty answer is an empty list", async () => {
    const hits = await client.recall("team mascot", { filter: { category: "no-such-category" } });
    assert.deepEqual([...hits], []);
    assert.equal(hits.hasMore, false);
  });

  test("get returns the memory with every field", async () => {
    const { id } = await client.remember("deploys happen on fridays after lunch", {
      topic: "ops.deploy",
      importance: 0.95,
      protected: true,
    });
    const memory = await client.get(id);
    assert.equal(memory.id, id);
    assert.equal(memory.text, "deploys happen on fridays after lunch");
    assert.equal(memory.topicKey, "ops.deploy");
    assert.equal(memory.importance, 0.95);
    assert.equal(memory.protected, true);
    assert.deepEqual(memory.payload, {});
    assert.ok(memory.createdAt > 0);
  });

  test("forget moves it out of reach", async () => {
    const word = `wombat${randomUUID().slice(0, 8)}`;
    const { id, txid } = await client.remember(`the build server is called ${word}`);
    const forgotten = await client.forget(id);
    assert.ok(forgotten > txid);
    const { error } = await failure(client.get(id));
    assert.ok(error instanceof NotFound, String(error));
    const hits = await client.recall(`build server ${word}`, { minTxid: forgotten });
    assert.ok(hits.every((hit) => hit.memory.id !== id));
  });

  test("get of an unknown id is NotFound", async () => {
    const { error } = await failure(client.get("0123456789abcdef0123456789abcdef"));
    assert.ok(error instanceof NotFound, String(error));
    assert.ok(error instanceof MemvaultError);
  });

  test("a scoped client writes in its scope, sees no other project's, and a read-only one changes nothing", async () => {
    const word = `numbat${randomUUID().slice(0, 8)}`;
    const api = new MemvaultClient({ scopes: ["project:api"] });
    const web = new MemvaultClient({ scopes: ["project:web"] });
    const reader = new MemvaultClient({ scopes: ["project:api"], readOnly: true });
    try {
      const { id, txid } = await api.remember(`the api deploys with ${word}`);
      assert.equal((await api.get(id)).scope, "project:api");
      assert.equal((await client.get(id)).scope, "project:api");
      const hidden = await failure(web.get(id));
      assert.ok(hidden.error instanceof NotFound, String(hidden.error));
      const seen = await web.recall(`api deploys ${word}`, { minTxid: txid });
      assert.ok(seen.every((hit) => hit.memory.id !== id));
      assert.ok((await reader.recall(`api deploys ${word}`, { minTxid: txid })).some((hit) => hit.memory.id === id));
      const refused = await failure(reader.forget(id));
      assert.ok(refused.error instanceof PermissionDenied, String(refused.error));
      const outside = await failure(api.remember(`web note ${word}`, { scope: "project:web" }));
      assert.ok(outside.error instanceof PermissionDenied, String(outside.error));
      assert.match((outside.error as Error).message, /project:web/);
    } finally {
      api.close();
      web.close();
      reader.close();
    }
  });

  test("the event stream delivers a remember", async () => {
    const listener = new MemvaultClient();
    const stream = await listener.events(["remember"]);
    const seen: MemvaultEvent[] = [];
    const reading = (async () => {
      for await (const event of stream) {
        seen.push(event);
      }
    })();
    // The stream registers a moment after the call starts: remember until
    // the listener sees one of ours (a few tries, 100 ms apart).
    let found: string | undefined;
    for (let attempt = 0; attempt < 50 && found === undefined; attempt++) {
      const { id } = await client.remember(`event probe ${randomUUID()}`, { new: true });
      await new Promise((resolve) => setTimeout(resolve, 100));
      found = seen.find((event) => event.id === id)?.id;
    }
    stream.cancel();
    await reading; // ends cleanly once cancelled
    listener.close();
    assert.ok(found, `no remember event arrived: ${JSON.stringify(seen)}`);
    const event = seen.find((e) => e.id === found)!;
    assert.equal(event.type, "remember");
    assert.ok(event.at > 0);
  });

  test("bad input is an InvalidArgument naming what is wrong", async () => {
    const tooMany = await failure(client.recall("anything", { topK: 5000 }));
    assert.ok(tooMany.error instanceof InvalidArgument, String(tooMany.error));
    assert.match((tooMany.error as Error).message, /top_k/);

    const badFilter = await failure(client.recall("anything", { filter: "{not json" }));
    assert.ok(badFilter.error instanceof InvalidArgument, String(badFilter.error));
    assert.match((badFilter.error as Error).message, /filter/);

    const empty = await failure(client.remember("   "));
    assert.ok(empty.error instanceof InvalidArgument, String(empty.error));
    assert.match((empty.error as Error).message, /text/);

    // Caught before anything is sent: the payload must be a JSON object.
    const payload = await failure(client.remember("x", { payload: [1, 2] as unknown as { [k: string]: unknown } }));
    assert.ok(payload.error instanceof InvalidArgument, String(payload.error));
    assert.match((payload.error as Error).message, /payload must be a JSON object, not an array/);
  });
});

describe("without a daemon", () => {
  test("no socket: Unavailable at once, saying how to start one", async () => {
    const home = path.join(os.tmpdir(), `memvault-absent-${randomUUID()}`);
    const client = new MemvaultClient({ home });
    const { error, ms } = await failure(client.recall("anything"));
    client.close();
    assert.ok(error instanceof Unavailable, String(error));
    assert.ok(!(error instanceof ForeignSocket));
    assert.match((error as Error).message, /memvault daemon is not running \(no socket at .*memvault\.sock\)/);
    assert.match((error as Error).message, /memvaultd/);
    assert.ok(ms < 1000, `took ${ms} ms`);
  });

  test("a socket nobody listens on: Unavailable within the connect timeout, not a hang", async () => {
    const client = new MemvaultClient({ socket: required("MEMVAULT_TS_REFUSING_SOCKET") });
    const { error, ms } = await failure(client.get("anything"));
    client.close();
    assert.ok(error instanceof Unavailable, String(error));
    assert.match((error as Error).message, /refuses connections/);
    assert.ok(ms < 5000, `took ${ms} ms`);
  });

  test("a socket that accepts and never answers (a hung daemon): Unavailable after the connect timeout", async () => {
    const client = new MemvaultClient({ socket: required("MEMVAULT_TS_SILENT_SOCKET") });
    const { error, ms } = await failure(client.recall("anything"));
    client.close();
    assert.ok(error instanceof Unavailable, String(error));
    assert.match((error as Error).message, /did not accept a connection within 5 s; it may be hung/);
    assert.ok(ms >= CONNECT_TIMEOUT_MS - 100 && ms < CONNECT_TIMEOUT_MS + 2000, `took ${ms} ms`);
  });

  const foreign = process.env.MEMVAULT_TS_FOREIGN_SOCKET;
  const asRoot = foreign ? false : "making a socket of another uid takes root";
  test("another user's socket is refused before connecting", { skip: asRoot }, async () => {
    const socket = foreign!;
    const client = new MemvaultClient({ socket });
    const { error } = await failure(client.remember("a secret for nobody"));
    client.close();
    assert.ok(error instanceof ForeignSocket, String(error));
    assert.ok(error instanceof Unavailable);
    assert.match((error as Error).message, /belongs to uid \d+, not to you \(uid \d+\)/);
    assert.ok((error as Error).message.includes(socket));
  });

  test("a file that is not a socket is refused", async () => {
    const client = new MemvaultClient({ socket: required("MEMVAULT_TS_NOT_A_SOCKET") });
    const { error } = await failure(client.events());
    client.close();
    assert.ok(error instanceof ForeignSocket, String(error));
    assert.match((error as Error).message, /is not a socket/);
  });

  test("a closed client says so", async () => {
    const client = new MemvaultClient();
    client.close();
    const { error } = await failure(client.recall("anything"));
    assert.ok(error instanceof Unavailable);
    assert.match((error as Error).message, /closed/);
  });
});
