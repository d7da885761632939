/**
 * What the client's calls take and give back: plain objects with the payload
 * as the JSON object it is, read from the generated messages of
 * `gen/memvault_base/v1/memory.ts` (the Python package's `memvault.wire`).
 */

import { InvalidArgument, MemvaultError } from "./errors";
import type * as pb from "./gen/memvault_base/v1/memory";

/** A JSON object, as a memory's payload and a filter expression are. */
export type JsonObject = { [key: string]: unknown };

/** A stored memory, with every field the daemon keeps for it. */
export interface Memory extends Omit<pb.MemoryRecord, "payloadJson"> {
  payload: JsonObject;
}

/** One recall result: the memory, its score and how it was found. */
export interface Hit extends Omit<pb.Hit, "memory" | "breakdown"> {
  memory: Memory;
  breakdown: pb.ScoreBreakdown | undefined;
}

/** A recall's hits, best first; `hasMore`: more ranked hits exist past `offset + length`. */
export interface Hits extends Array<Hit> {
  hasMore: boolean;
}

/**
 * What a remember did: "added" (a memory of its own), "reinforced" (the same
 * statement as memory `target`: `id` is `target`) or "superseded" (`id` is a
 * new version of `target`; `reason` says what differs).
 */
export interface RememberResult {
  id: string;
  txid: number;
  outcome: "added" | "reinforced" | "superseded";
  target: string;
  reason: string;
}

/** Something the daemon did: "hit" / "miss" (query-embedding cache), "remember", "forget", "restore", "ready". */
export type MemvaultEvent = pb.Event;

/** `remember`'s options; unset ones take the daemon's defaults (type semantic, importance 0.5, tier long_term). */
export interface RememberOptions {
  /** episodic | semantic | procedural (fact, event, instruction, task map onto them). */
  type?: string;
  /** Dotted path, e.g. "user.preferences.testing". */
  topic?: string;
  payload?: JsonObject;
  entity?: string;
  tags?: string[];
  category?: string;
  /** 0..1; >= 0.9 pins it. */
  importance?: number;
  session?: string;
  /** Which agent or file wrote it. */
  source?: string;
  /** working | long_term | archived */
  tier?: string;
  /** Seconds since the epoch; 0 = never. */
  expiresAt?: number;
  /** The id of the memory this one replaces. */
  supersedes?: string;
  /** Bring-your-own embedding, of the vault's dimension. */
  vector?: number[];
  /** Keep it out of the forgetting sweep and consolidation. */
  protected?: boolean;
  /** Always add: never reinforce nor supersede an earlier memory. */
  new?: boolean;
  /** Store a text that looks like it holds a credential instead of refusing it. */
  allowSecret?: boolean;
  /** user | project:<name> | agent:<name>; default: the client's first scope other than user, else user. */
  scope?: string;
}

/** `recall`'s options; see RecallRequest in proto/memvault_base/v1/memory.proto. */
export interface RecallOptions {
  /** 1..1000; unset means the daemon's default, 3. */
  topK?: number;
  minScore?: number;
  /** A filter expression, as an object or as JSON text passed through unchanged. */
  filter?: JsonObject | string;
  queryVector?: number[];
  includeVectors?: boolean;
  /** hybrid (default) | vector | keyword */
  mode?: string;
  types?: string[];
  /** This topic and the topics below it. */
  topic?: string;
  session?: string;
  source?: string;
  /** Default: working and long_term. */
  tiers?: string[];
  includeSuperseded?: boolean;
  maxTokens?: number;
  offset?: number;
  /** false: a preview that leaves access counts alone. */
  markAccessed?: boolean;
  /** Wait until the daemon has applied this write. */
  minTxid?: number;
  /** hot | warm | cold | frozen */
  band?: string;
}

export function memoryInput(text: string, options: RememberOptions): pb.MemoryInput {
  return {
    text,
    type: options.type ?? "",
    topicKey: options.topic ?? "",
    payloadJson: options.payload === undefined ? "" : payloadJson(options.payload),
    entity: options.entity ?? "",
    tags: options.tags ?? [],
    category: options.category ?? "",
    importance: options.importance,
    sessionId: options.session ?? "",
    source: options.source ?? "",
    tier: options.tier ?? "",
    expiresAt: options.expiresAt ?? 0,
    supersedes: options.supersedes ?? "",
    vector: options.vector ?? [],
    protected: options.protected,
    neverMerge: options.new ?? false,
    allowSecret: options.allowSecret ?? false,
    scope: options.scope ?? "",
  };
}

export function recallRequest(query: string, options: RecallOptions): pb.RecallRequest {
  return {
    query,
    topK: options.topK ?? 0,
    minScore: options.minScore,
    filterJson: filterJson(options.filter),
    queryVector: options.queryVector ?? [],
    includeVectors: options.includeVectors ?? false,
    mode: options.mode ?? "",
    types: options.types ?? [],
    topicKey: options.topic ?? "",
    sessionId: options.session ?? "",
    source: options.source ?? "",
    tiers: options.tiers ?? [],
    includeSuperseded: options.includeSuperseded ?? false,
    maxTokens: options.maxTokens ?? 0,
    offset: options.offset ?? 0,
    markAccessed: options.markAccessed,
    minTxid: options.minTxid ?? 0,
    includeTurns: false,
    band: options.band ?? "",
  };
}

function payloadJson(payload: unknown): string {
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) {
    const kind = payload === null ? "null" : Array.isArray(payload) ? "an array" : typeof payload;
    throw new InvalidArgument(`payload must be a JSON object, not ${kind}`);
  }
  return JSON.stringify(payload);
}

function filterJson(filter: JsonObject | string | undefined): string {
  if (filter === undefined) {
    return "";
  }
  // JSON text goes as it is: the daemon validates it and names what is wrong.
  return typeof filter === "string" ? filter : JSON.stringify(filter);
}

export function memory(record: pb.MemoryRecord | undefined): Memory {
  if (record === undefined) {
    throw new MemvaultError("the daemon answered without a memory");
  }
  const { payloadJson: text, ...rest } = record;
  return { ...rest, payload: text ? (JSON.parse(text) as JsonObject) : {} };
}

export function hits(reply: pb.RecallReply): Hits {
  const found = reply.hits.map((hit) => ({ ...hit, memory: memory(hit.memory) }));
  return Object.assign(found, { hasMore: reply.hasMore });
}

export function rememberResult(reply: pb.RememberReply): RememberResult {
  return {
    id: reply.id,
    txid: reply.txid,
    outcome: reply.outcome as RememberResult["outcome"],
    target: reply.targetId,
    reason: reply.reason,
  };
}
