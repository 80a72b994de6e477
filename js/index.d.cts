// Types of mnemo-db (index.cjs); index.d.mts re-exports them for ES module programs.

/** A result-string profile of the store's server. */
export type Profile = 'spec' | 'python-sdk' | 'typescript-sdk';

/** A memory-tool command as the model sends it (the input of a `tool_use` block). */
export type MemoryCommand =
  | { command: 'view'; path: string; view_range?: number[] }
  | { command: 'create'; path: string; file_text: string }
  | { command: 'str_replace'; path: string; old_str: string; new_str?: string }
  | { command: 'insert'; path: string; insert_line: number; insert_text: string }
  | { command: 'delete'; path: string }
  | { command: 'rename'; old_path: string; new_path: string };

/** The handlers `betaMemoryTool` takes: each returns the result text, or throws for an error result. */
export type MemoryToolHandlers = {
  [K in MemoryCommand['command']]: (command: Extract<MemoryCommand, { command: K }>) => Promise<string>;
};

/** A `tool_result` block as the store answers it (`is_error` is absent on success). */
export interface ToolResult {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  is_error?: true;
}

export interface Head {
  seq: number;
  hash: string;
  checkpoint: string;
}

/** One event as `mnemo log --json` and `history --json` print it. */
export interface LogEntry {
  seq: number;
  agent: string;
  command: string;
  is_error: boolean;
  paths: string[];
  result_hash: string;
  semantics: number;
  [field: string]: unknown;
}

/** One event whole, as `mnemo show --json` prints it. */
export interface ShownEvent {
  seq: number;
  agent: string;
  tool_use_id: string | null;
  semantics: number;
  input: unknown;
  answer: string | null;
  is_error: boolean;
  /** The re-derived answer matches the outcome the event recorded. */
  verified: boolean;
  /** The chain was checked from event 1 through this seq (the log's end) before the event was shown. */
  chained_through: number;
  change: unknown;
  [field: string]: unknown;
}

/** The report of `mnemo verify --json`. */
export interface VerifyReport {
  status: string;
  events: number;
  violations: unknown[];
  checkpoint: string;
  [field: string]: unknown;
}

export interface Listing {
  dir: string;
  at: number | null;
  files: Array<{ path: string; bytes: number; created: number; updated: number }>;
}

export interface FileDiff {
  path: string;
  kind: string;
  diff: string;
}

export interface Grant {
  agent: string;
  prefix: string;
  access: 'read' | 'read-write';
}

export interface TokenRecord {
  id: string;
  agent: string;
  label: string;
  issued_seq: number;
  issued_at: string;
  issued_by: string;
  revoked: { seq: number; by: string } | null;
}

/** An admin change's answer: the seq of its event and what it did. */
export interface AdminResult {
  seq: number;
  result: string;
}

export interface IssuedToken extends AdminResult {
  id: string;
  agent: string;
  label: string;
  /** The token itself, shown this once. */
  token: string;
}

export interface Redaction {
  seq: number | null;
  seqs: number[];
  paths: string[];
  unsearched: number[];
  result: string;
}

/** What `trace` finds, as `mnemo trace --json` prints it. */
export interface TraceReport {
  seq: number;
  path: string | null;
  /** The file the traced bytes were in. */
  file: string;
  /** How many bytes are traced. */
  bytes: number;
  /** The last event looked at. */
  through: number;
  /** Each later event that was shown the bytes, or carried them on, or took them out. */
  events: (LogEntry & { shown: boolean; carried: boolean; removed: boolean; files: string[] })[];
  /** The files that hold traced bytes now, and how many. */
  live: { path: string; bytes: number }[];
  erased: number[];
  /** False when an erased event (or the grants) hides part of the way. */
  exact: boolean;
  notes: string[];
  [field: string]: unknown;
}

/** What `revert` plans or did, as `mnemo revert --json` prints it. */
export interface RevertResult {
  to: number;
  scope: string;
  head: number;
  /** The events whose effects are undone. */
  undone: number[];
  /** The memory-tool calls the revert makes (or would make). */
  calls: { root: string; input: unknown }[];
  /** Other agents' writes it would throw away: refused unless `force`. */
  conflicts: string[];
  /** The seqs of the revert's record and of its last call (`null` for a dry run). */
  record?: number | null;
  last?: number | null;
  result?: string;
  [field: string]: unknown;
}

export class MnemoClient {
  /** Use `MnemoClient.connect` or `MnemoClient.open`. */
  protected constructor(url: string, token: string, options?: object);
  /** A client of the server at `url`, presenting `token` (an agent token, or the operator's). */
  static connect(url: string, options: { token: string; store?: string; agent?: string }): MnemoClient;
  /**
   * A client of the local store at `dbPath` (created if missing), acting as `agent`, through the
   * server that holds it or one started now by the `mnemo` binary (`bin`, default `MNEMO_BIN`,
   * else `mnemo` on `PATH`) with `profile` (default `typescript-sdk`).
   */
  static open(
    dbPath: string,
    options?: { agent?: string; profile?: Profile; bin?: string; idleExit?: number },
  ): Promise<MnemoClient>;
  /** The error a handler throws for an error result, so the SDK's runner sends `content` unchanged. */
  static toolError(content: string): Promise<Error>;
  /** The SDK's `ToolError` class, loaded as the program's module system loads the SDK. */
  static sdkToolError(): Promise<new (content: string) => Error>;
  readonly url: string;
  readonly agent: string | undefined;
  /** Stops holding the server of an opened store. */
  close(): void;
  /** One memory-tool call: the `tool_result`, byte for byte what `mnemo tool` prints. */
  call(input: MemoryCommand | object, options?: { profile?: Profile }): Promise<ToolResult>;
  /** The handlers for `betaMemoryTool` (`profile` must be the server's; default `typescript-sdk`). */
  memoryTool(options?: { profile?: Profile }): MemoryToolHandlers;
  head(): Promise<Head>;
  verify(options?: { expect?: string }): Promise<VerifyReport>;
  log(options?: { agent?: string; path?: string; from?: number; limit?: number }): Promise<LogEntry[]>;
  ls(options?: { dir?: string; at?: number }): Promise<Listing>;
  cat(path: string, options?: { at?: number }): Promise<string>;
  history(path: string): Promise<LogEntry[]>;
  show(seq: number): Promise<ShownEvent>;
  diff(options?: { from?: number; to?: number; path?: string }): Promise<FileDiff[]>;
  readonly acl: {
    list(): Promise<Grant[]>;
    grant(grant: Grant): Promise<AdminResult>;
    revoke(options: { agent: string; prefix: string }): Promise<AdminResult>;
  };
  readonly tokens: {
    list(): Promise<TokenRecord[]>;
    create(options: { agent: string; label?: string }): Promise<IssuedToken>;
    revoke(id: string): Promise<AdminResult>;
  };
  redact(options: {
    reason: string;
    seqs?: number[];
    paths?: string[];
    texts?: string[];
    dryRun?: boolean;
  }): Promise<Redaction>;
  trace(seq: number, options?: { path?: string }): Promise<TraceReport>;
  revert(
    options:
      | { to: number; path?: string; dryRun?: boolean; force?: boolean }
      | { agent: string; since: number; dryRun?: boolean; force?: boolean },
  ): Promise<RevertResult>;
}

/** Every error this package throws; `status` is the HTTP status when a server answered. */
export class MnemoError extends Error {
  readonly status: number | undefined;
}
/** No server answered, or `mnemo link` could not reach or start one. */
export class ServerUnreachable extends MnemoError {}
/** 400. */
export class BadRequest extends MnemoError {}
/** 401: no token, a wrong one, or a revoked one. */
export class Unauthorized extends MnemoError {}
/** 403. */
export class Forbidden extends MnemoError {}
/** 404. */
export class NotFound extends MnemoError {}
/** 409. */
export class Conflict extends MnemoError {}
/** 409 on a memory call: the server answers with other settings (profile, root, limits). */
export class SettingsRefused extends Conflict {}
/** 413: over the server's request-size limit; nothing was recorded. */
export class PayloadTooLarge extends MnemoError {}
/** 5xx, or an answer that is not what the route gives. */
export class ServerError extends MnemoError {}
