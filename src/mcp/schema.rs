//! What the model is shown: the `memory` tool's definition and the server's instructions.
//!
//! MCP clients hand a tool's description and input schema to the model as they are, so both say
//! what each command does and which fields it takes, naming the memory root the server runs under.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::model::tool::{COMMAND_NAMES, Profile, format_size};

/// The tool's name: the same as the memory tool's, so prompts written for one fit the other.
pub const TOOL_NAME: &str = "memory";

/// The `memory` tool's definition for a server whose memory root is `root`, whose files hold at
/// most `max_file_bytes`, answering under `profile` (`None` when the server that answers is not
/// known here: the description then covers both).
pub fn memory_tool_for(root: &str, max_file_bytes: u64, profile: Option<Profile>) -> Tool {
    let unlisted = match profile {
        Some(Profile::Spec | Profile::TypescriptSdk) => {
            "names that start with a dot and node_modules directories"
        }
        Some(Profile::PythonSdk) => "names that start with a dot",
        None => {
            "names that start with a dot (and node_modules directories, in the spec and typescript-sdk profiles)"
        }
    };
    let description = format!(
        "Your persistent memory: a directory of text files under {root} that outlasts this \
         conversation. Pick one command per call. view: list a directory two levels deep, or \
         show a file with numbered lines (view_range pages through a long file). create: write a \
         new file. str_replace: replace text that occurs exactly once in a file. insert: add \
         lines after a given line. delete: remove a file, or a directory with everything in it. \
         rename: move a file or directory. Every path starts with {root}. A file holds at most \
         {max_file_bytes} bytes ({}); a call that would make one larger is refused, so split \
         large notes across files. Files and directories under {unlisted} are created and read \
         like any other but never shown in a directory listing. View {root} before you start a \
         task, and record progress as you go: your context may be reset at any time.",
        format_size(max_file_bytes)
    );
    Tool::new(TOOL_NAME, description, input_schema(root))
        .with_title("Memory")
        .with_annotations(
            ToolAnnotations::with_title("Memory")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        )
}

/// The input schema: a `command` discriminator and every command's fields, each described with
/// the commands that use it. It is deliberately not strict: a call that breaks it still reaches
/// the memory tool, which answers with an error text that says what a valid call looks like.
fn input_schema(root: &str) -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": COMMAND_NAMES,
                "description": "What to do: view, create, str_replace, insert, delete or rename. \
                    The other fields a command needs are named in their descriptions."
            },
            "path": {
                "type": "string",
                "description": format!(
                    "view, create, str_replace, insert, delete: the file or directory, an absolute \
                     path under {root} such as {root}/notes.md."
                )
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "view of a file, optional: [first, last] line to show, 1-based and \
                    inclusive; last = -1 reads to the end. Omit it to see the whole file."
            },
            "file_text": {
                "type": "string",
                "description": "create: the new file's whole content. Creating a path that already \
                    exists is an error; edit it with str_replace or insert instead."
            },
            "old_str": {
                "type": "string",
                "description": "str_replace: the exact text to replace, including whitespace; it \
                    must occur exactly once in the file."
            },
            "new_str": {
                "type": "string",
                "description": "str_replace: the replacement text; omit it to delete old_str."
            },
            "insert_line": {
                "type": "integer",
                "minimum": 0,
                "description": "insert: the line after which insert_text goes; 0 inserts at the \
                    top of the file."
            },
            "insert_text": {
                "type": "string",
                "description": "insert: the text to insert, as whole lines."
            },
            "old_path": {
                "type": "string",
                "description": format!("rename: the file or directory to move, under {root}.")
            },
            "new_path": {
                "type": "string",
                "description": format!(
                    "rename: where it goes, under {root}; it must not exist yet."
                )
            }
        },
        "required": ["command"]
    });
    match schema {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

/// The instructions sent at initialization: the memory tool's protocol, for a model that meets
/// it through MCP (where no API injects it into the system prompt).
pub fn instructions(root: &str) -> String {
    format!(
        "This server is your memory: files under {root} that persist between conversations. \
         Before doing anything else, call the memory tool with command \"view\" and path \
         \"{root}\" to find notes on earlier progress, and read what is relevant. While you work, \
         write down status, progress and decisions in those files: your context window can be \
         reset at any moment, and whatever is not in {root} is then lost. Keep the directory \
         tidy: update files rather than adding new ones, and rename or delete what is no longer \
         relevant. The files are also offered as read-only resources (memory://{root}/...). \
         Every memory-tool call is recorded in a tamper-evident log."
    )
}
