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
// kill -9 crash loops: small edits, large directory renames and deletes.
mod crash;
// Failpoints on the write path: error results, poisoning, recovery on reopen.
mod faults;
// Golden vectors: fixed events to fixed bytes and hashes.
mod golden;
// Hostile input: 700+ traversal and malformed paths in every field, malformed calls, arbitrary JSON.
mod hostile;
// A store directory that is hostile: read-only, full, missing or damaged files, wrong paths.
mod hostile_storage;
// File-size limit and the view cap.
mod limits;
// The proptest model test: random command sequences against a naive in-memory model.
mod model;
// Reopening, catch-up after a crash between append and index write, lock and format errors.
mod recovery;
// Idempotent retries by tool_use id.
mod retry;
// `mnemo serve`: the memory tool over HTTP byte for byte, refusals, concurrency, SIGTERM.
#[cfg(feature = "serve")]
mod serve;
// The spec profile's result strings, one row of the table per case.
mod spec_table;
// Directory deletes go to the trash; later writes collect it; old index layouts are rebuilt.
mod trash;
// mnemo export / import: the SDK tool's layout, round-tripped byte for byte.
mod transfer;
// The tamper corpus on stores of 1, 2, 255, 256, 257 and 10,000 events.
mod tamper_sizes;
// Tampering through sled: verify names the right seq and invariant.
mod tamper;
