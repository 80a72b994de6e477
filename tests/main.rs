//! The one integration-test crate (named `main.rs` so proptest keeps its seeds in the top-level
//! `proptest-regressions/`).

// Shared helpers: temporary stores, servers, tampering through sled, running the binary.
mod support;

// Access control: grants in the log, enforcement under the tool surface, `mnemo acl`.
mod acl;
// verify --expect: checkpoints catch consistent rewrites and rollbacks.
mod checkpoint;
// Round trips through the built `mnemo` binary: tool, verify exit codes, demo, log, ls, cat.
mod cli;
// The shared python-sdk conformance vectors through the library and the CLI, and the 1M-line case.
mod conformance;
// 16 threads, one writer: nothing lost, nothing interleaved, every answer logged.
mod concurrency;
// Clients that find the server of a store: tool and mcp start or reach it, reads go through it,
// --connect, killed clients and servers, 16 client processes at once.
#[cfg(feature = "serve")]
mod discovery;
// File content on disk: reads write none, an edit rewrites a bounded chunk.
mod content;
// The docs against the code: commands and flags in shell blocks, links, doctests, README's size.
mod docs;
// kill -9 crash loops: small edits, large directory renames and deletes.
mod crash;
// A failure at every I/O step of a session, by the failpoint countdown.
mod fault_steps;
// Failpoints on the write path: error results, poisoning, recovery on reopen.
mod faults;
// The library's layering: no new import cycle, no new core -> storage import.
mod layering;
// Calls over 4 KiB that fail: logged as digests, echoes bounded, retries, log and history.
mod failed;
// Fixture stores written by earlier builds re-verify, event for event.
mod fixtures_verify;
// Golden vectors: fixed events to fixed bytes and hashes.
mod golden;
// The recorded head covers reads, rejected calls and close: a cut tail never passes as intact.
mod head;
// Hostile input: 700+ traversal and malformed paths in every field, malformed calls, arbitrary JSON.
mod hostile;
// A store directory that is hostile: read-only, full, missing or damaged files, wrong paths.
mod hostile_storage;
// Every read proves what it shows: a forged record is refused by every read, named by its seq.
mod proof;
// mnemo show and mnemo diff: one event whole, and what changed between two events.
mod inspect;
// log's filters and its two orders, with a bounded scan, against a model.
mod log_filters;
// Trees of the past kept in memory: the same past as a replay from event 1, never a stale one.
mod snapshot;
// Bounded input: the request-size limit while reading, digests of refused input, duplicate keys,
// invalid UTF-8.
mod input;
// history by file identity: renames followed, a reused path's files listed apart.
mod lineage;
// File-size limit and the view cap.
mod limits;
// A root inside another root: the tree shapes it meets are error results, never poison.
mod nested_root;
// Pathological input (a megabyte of one byte, half of it as old_str): near-linear cost per call.
mod pathological;
// The memory-stores API's writes against a model, interleaved with the memory tool's calls.
mod memory_api;
// The proptest model test: random command sequences against a naive in-memory model.
mod model;
// The value file: large payloads kept once, read back whole, damage named, sessions told.
mod value_file;
// The version journal against a replay of the log, and verify naming a forged entry.
mod version_journal;
// Replicas in object storage over file://: ship, resume, restore, verify --from, tampering.
#[cfg(feature = "replicate")]
mod replica;
// Read-only forensics: read commands change no byte, work read-only, never repair damage.
mod readonly;
// Reopening, catch-up after a crash between append and index write, lock and format errors.
mod recovery;
// Retries by tool_use id: logged, answered from the record only for the same input and access.
mod retry;
// `mnemo serve`: the memory tool over HTTP byte for byte, refusals, concurrency, SIGTERM.
#[cfg(feature = "serve")]
mod serve;
// The public API: the names src/lib.rs exports are the listed ones; `testing` only in tests.
mod surface;
// The spec profile's result strings, one row of the table per case.
mod spec_table;
// Directory deletes go to the trash; later writes collect it; old index layouts are rebuilt.
mod trash;
// mnemo export / import: the SDK tool's layout, round-tripped byte for byte.
mod transfer;
// mnemo export / import on hostile trees: links, FIFOs, devices, huge and deep entries, swaps.
#[cfg(target_os = "linux")]
mod transfer_hostile;
// Agent tokens: `mnemo token`, the token table replayed from the log, verify over token events.
mod tokens;
// Tampering through sled, one table on stores of 1, 2, 255, 256, 257 and 10,000 events and a
// mixed one: verify names the right seq and invariant.
mod tamper;
// mnemo redact: erased content gone from the store's bytes and reads; the rest verifies.
mod redact;
// mnemo trace: where an event's content went, text and JSON, through a redaction, within grants.
mod trace;
// mnemo revert: a dry run changes nothing, conflicts refused until forced, the record logged.
mod revert;
