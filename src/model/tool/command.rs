//! The six commands as typed values, and the parser from the model's JSON.
//!
//! Parsing is pure and profile-aware: the same raw input under the same root and profile always
//! parses to the same command or the same error text, which is what lets the verifier re-parse a
//! rejected input and prove the recorded answer.

use serde_json::Value;

use crate::model::semantics_version::Semantics;
use crate::model::semantics_version::nesting::MAX_INPUT_DEPTH;

/// The result-string profile a server runs under (recorded in every event).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// The strings the memory-tool documentation recommends (the default).
    #[default]
    Spec,
    /// Byte-identical to the Anthropic Python SDK's `BetaLocalFilesystemMemoryTool` (anthropic
    /// 2.14.0) run through the SDK's tool runner, except for Mnemo's deliberate safety differences.
    PythonSdk,
    /// Byte-identical to the Anthropic TypeScript SDK's `BetaLocalFilesystemMemoryTool`
    /// (`@anthropic-ai/sdk` 1.16.0) run through the SDK's tool runner (every error `Error: `
    /// and the message), except for that SDK's known bugs and Mnemo's deliberate safety
    /// differences.
    TypescriptSdk,
}

impl Profile {
    /// The profile's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Spec => "spec",
            Profile::PythonSdk => "python-sdk",
            Profile::TypescriptSdk => "typescript-sdk",
        }
    }

    /// Parses a profile name.
    pub fn from_name(name: &str) -> Option<Profile> {
        match name {
            "spec" => Some(Profile::Spec),
            "python-sdk" => Some(Profile::PythonSdk),
            "typescript-sdk" => Some(Profile::TypescriptSdk),
            _ => None,
        }
    }
}

/// One memory-tool command, with paths exactly as the model sent them.
///
/// Wire shapes (the `input` of a `tool_use` block):
///
/// ```text
/// {"command": "view", "path": "/memories", "view_range": [1, 20]}   view_range optional
/// {"command": "create", "path": "/memories/notes.txt", "file_text": "..."}
/// {"command": "str_replace", "path": "...", "old_str": "...", "new_str": "..."}   new_str optional
/// {"command": "insert", "path": "...", "insert_line": 0, "insert_text": "..."}
/// {"command": "delete", "path": "..."}
/// {"command": "rename", "old_path": "...", "new_path": "..."}
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Show a directory listing or a file's numbered lines.
    View {
        /// Directory or file to view.
        path: String,
        /// `[start, end]`, 1-based and inclusive; `end == -1` reads to the end.
        view_range: Option<(i64, i64)>,
    },
    /// Create a new file.
    Create {
        /// Where to create it.
        path: String,
        /// Its content.
        file_text: String,
    },
    /// Replace the one occurrence of `old_str` with `new_str`.
    StrReplace {
        /// The file to edit.
        path: String,
        /// Text to find; must occur exactly once.
        old_str: String,
        /// Replacement; omitted means delete `old_str`.
        new_str: Option<String>,
    },
    /// Insert text after a line.
    Insert {
        /// The file to edit.
        path: String,
        /// Insert after this line (`0` = at the beginning).
        insert_line: i64,
        /// The text to insert, as whole line(s).
        insert_text: String,
    },
    /// Delete a file or a directory with everything under it.
    Delete {
        /// What to delete.
        path: String,
    },
    /// Rename or move a file or directory.
    Rename {
        /// Current path.
        old_path: String,
        /// New path; must not exist.
        new_path: String,
    },
}

impl Command {
    /// The command's name as on the wire.
    pub fn name(&self) -> &'static str {
        match self {
            Command::View { .. } => "view",
            Command::Create { .. } => "create",
            Command::StrReplace { .. } => "str_replace",
            Command::Insert { .. } => "insert",
            Command::Delete { .. } => "delete",
            Command::Rename { .. } => "rename",
        }
    }

    /// The raw paths the command names (one, or two for rename).
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Command::View { path, .. }
            | Command::Create { path, .. }
            | Command::StrReplace { path, .. }
            | Command::Insert { path, .. }
            | Command::Delete { path } => vec![path],
            Command::Rename { old_path, new_path } => vec![old_path, new_path],
        }
    }

    /// Whether the command can change the tree (and so must be durable before it is answered).
    pub fn is_mutation(&self) -> bool {
        !matches!(self, Command::View { .. })
    }

    /// The command as the `input` of a `tool_use` block (the wire shape above), every field it
    /// holds; `text` makes each string field's value (the text whole, or cut).
    pub fn input_with(&self, text: impl Fn(&str) -> Value) -> Value {
        let mut out = serde_json::Map::new();
        out.insert("command".into(), self.name().into());
        let mut put = |key: &str, value: Value| {
            out.insert(key.into(), value);
        };
        match self {
            Command::View { path, view_range } => {
                put("path", text(path));
                if let Some((from, to)) = view_range {
                    put("view_range", serde_json::json!([from, to]));
                }
            }
            Command::Create { path, file_text } => {
                put("path", text(path));
                put("file_text", text(file_text));
            }
            Command::StrReplace {
                path,
                old_str,
                new_str,
            } => {
                put("path", text(path));
                put("old_str", text(old_str));
                if let Some(new_str) = new_str {
                    put("new_str", text(new_str));
                }
            }
            Command::Insert {
                path,
                insert_line,
                insert_text,
            } => {
                put("path", text(path));
                put("insert_line", (*insert_line).into());
                put("insert_text", text(insert_text));
            }
            Command::Delete { path } => put("path", text(path)),
            Command::Rename { old_path, new_path } => {
                put("old_path", text(old_path));
                put("new_path", text(new_path));
            }
        }
        Value::Object(out)
    }

    /// The command as the `input` of a `tool_use` block, whole.
    pub fn input(&self) -> Value {
        self.input_with(|text| Value::String(text.to_string()))
    }
}

/// What parsing one input produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The `id` of the `tool_use` block, when the input was a whole block with a string id.
    pub tool_use_id: Option<String>,
    /// The command, or the error text to return (and record) for input that is not one.
    pub command: Result<Command, String>,
}

/// The six commands' names, in the order the memory tool documents them.
pub const COMMAND_NAMES: [&str; 6] = [
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
];

/// [`COMMAND_NAMES`] as error texts list them.
const COMMANDS: &str = "view, create, str_replace, insert, delete, rename";

fn too_deep() -> String {
    format!(
        "Error: The input nests arrays or objects more than {MAX_INPUT_DEPTH} levels deep; a memory tool call is one flat JSON object such as {{\"command\": \"view\", \"path\": \"/memories\"}}"
    )
}

/// Whether `value` nests deeper than [`MAX_INPUT_DEPTH`] (checked without recursion).
fn nests_too_deep(value: &Value) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth > MAX_INPUT_DEPTH {
            return true;
        }
        stack.extend(children.map(|c| (c, depth + 1)));
    }
    false
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(crate) fn example(command: &str, root: &str) -> String {
    match command {
        "view" => format!(r#"{{"command": "view", "path": "{root}", "view_range": [1, 20]}}"#),
        "create" => {
            format!(r#"{{"command": "create", "path": "{root}/notes.txt", "file_text": "..."}}"#)
        }
        "str_replace" => format!(
            r#"{{"command": "str_replace", "path": "{root}/notes.txt", "old_str": "old text", "new_str": "new text"}}"#
        ),
        "insert" => format!(
            r#"{{"command": "insert", "path": "{root}/notes.txt", "insert_line": 0, "insert_text": "a new line\n"}}"#
        ),
        "delete" => format!(r#"{{"command": "delete", "path": "{root}/notes.txt"}}"#),
        _ => format!(
            r#"{{"command": "rename", "old_path": "{root}/a.txt", "new_path": "{root}/b.txt"}}"#
        ),
    }
}

struct Fields<'a> {
    input: &'a serde_json::Map<String, Value>,
    command: &'a str,
    root: &'a str,
    profile: Profile,
    semantics: Semantics,
}

/// An integer under the Python SDK's lax validation: integers, whole floats, booleans and
/// strings holding an integer.
fn lax_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| {
            let f = n.as_f64()?;
            // NOTE: the range check keeps the cast exact; fractional values are refused.
            #[expect(clippy::cast_possible_truncation)]
            let i = f as i64;
            (f.fract() == 0.0 && (-9.0e18..=9.0e18).contains(&f)).then_some(i)
        }),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A whole number too large for i64, saturated: any such line number is past every file's end
/// (or before its start), where the range rules clamp or refuse it.
fn huge_int(v: &Value) -> Option<i64> {
    if v.as_u64().is_some() {
        return Some(i64::MAX);
    }
    let f = v.as_f64()?;
    // NOTE: `as` saturates; only magnitudes beyond i64 come here.
    #[expect(clippy::cast_possible_truncation)]
    let saturated = f as i64;
    (f.abs() >= 9.2e18).then_some(saturated)
}

impl Fields<'_> {
    fn string(&self, field: &str) -> Result<String, String> {
        match self.input.get(field) {
            Some(Value::String(s)) => Ok(s.clone()),
            None | Some(Value::Null) => Err(format!(
                "Error: The {} command needs a \"{field}\" string. A valid call looks like {}",
                self.command,
                example(self.command, self.root)
            )),
            Some(other) => Err(format!(
                "Error: \"{field}\" must be a string, got {}. A valid call looks like {}",
                json_type(other),
                example(self.command, self.root)
            )),
        }
    }

    fn optional_string(&self, field: &str) -> Result<Option<String>, String> {
        match self.input.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(_) => self.string(field).map(Some),
        }
    }

    fn integer(&self, field: &str) -> Result<i64, String> {
        if self.profile == Profile::PythonSdk {
            if let Some(i) = self.input.get(field).and_then(lax_int) {
                return Ok(i);
            }
        }
        match self.input.get(field) {
            Some(Value::Number(n)) if n.as_i64().is_some() => Ok(n.as_i64().unwrap_or_default()),
            Some(v @ Value::Number(_)) if huge_int(v).is_some() => Err(format!(
                "Error: \"{field}\" is out of range ({}); use a line number from 0 to the number of lines in the file. A valid call looks like {}",
                self.semantics.json_value(v),
                example(self.command, self.root)
            )),
            None | Some(Value::Null) => Err(format!(
                "Error: The {} command needs an integer \"{field}\". A valid call looks like {}",
                self.command,
                example(self.command, self.root)
            )),
            Some(other) => Err(format!(
                "Error: \"{field}\" must be a whole number of lines, got {} ({}). A valid call looks like {}",
                self.semantics.json_value(other),
                json_type(other),
                example(self.command, self.root)
            )),
        }
    }

    fn view_range(&self) -> Result<Option<(i64, i64)>, String> {
        let bad = |got: &Value| {
            format!(
                "Error: {} must be an array of two integers [start_line, end_line] (1-based, inclusive; end_line -1 reads to the end), got {}",
                self.semantics.view_range_field(),
                self.semantics.json_value(got)
            )
        };
        if self.profile == Profile::TypescriptSdk {
            // The SDK applies a range only when it is a list of exactly two numbers; Mnemo still
            // wants the two to be integers.
            if let Some(Value::Array(items)) = self.input.get("view_range") {
                if items.len() != 2 {
                    return Ok(None);
                }
            }
        }
        if self.profile == Profile::PythonSdk {
            // The SDK applies a range only when it is a list of exactly two integers.
            return match self.input.get("view_range") {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(items)) if items.len() != 2 => Ok(None),
                Some(Value::Array(items)) => match (
                    lax_int(&items[0]).or_else(|| huge_int(&items[0])),
                    lax_int(&items[1]).or_else(|| huge_int(&items[1])),
                ) {
                    (Some(start), Some(end)) => Ok(Some((start, end))),
                    _ => Err(bad(&Value::Array(items.clone()))),
                },
                Some(other) => Err(bad(other)),
            };
        }
        match self.input.get("view_range") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(items)) if items.len() == 2 => {
                let int = |v: &Value| v.as_i64().or_else(|| huge_int(v));
                match (int(&items[0]), int(&items[1])) {
                    (Some(start), Some(end)) => Ok(Some((start, end))),
                    _ => Err(bad(&Value::Array(items.clone()))),
                }
            }
            Some(other) => Err(bad(other)),
        }
    }
}

/// Parses one input: a whole `tool_use` block or a bare `input` object, answering a call that is
/// not one under [`Semantics::CURRENT`].
pub fn parse_value(value: &Value, root: &str, profile: Profile) -> Parsed {
    parse_value_under(value, root, profile, Semantics::CURRENT)
}

/// [`parse_value`], with the error texts of `semantics`.
pub fn parse_value_under(
    value: &Value,
    root: &str,
    profile: Profile,
    semantics: Semantics,
) -> Parsed {
    if nests_too_deep(value) {
        let is_block = value.get("type").and_then(Value::as_str) == Some("tool_use");
        return Parsed {
            tool_use_id: value
                .get("id")
                .and_then(Value::as_str)
                .filter(|_| is_block)
                .map(str::to_string),
            command: Err(too_deep()),
        };
    }
    let Value::Object(map) = value else {
        return Parsed {
            tool_use_id: None,
            command: Err(format!(
                "Error: Expected a tool_use block or a memory tool input object, got {}. A valid input looks like {}",
                json_type(value),
                example("view", root)
            )),
        };
    };
    let is_block = map.get("type").and_then(Value::as_str) == Some("tool_use");
    if !is_block {
        return Parsed {
            tool_use_id: None,
            command: parse_input(value, root, profile, semantics),
        };
    }
    let tool_use_id = map.get("id").and_then(Value::as_str).map(str::to_string);
    let command = match (map.get("name"), map.get("input")) {
        (Some(Value::String(name)), _) if name != "memory" => Err(format!(
            "Error: Tool '{name}' not found. This server only answers the memory tool (tool_use blocks named \"memory\")"
        )),
        (_, Some(input)) => parse_input(input, root, profile, semantics),
        (_, None) => Err(format!(
            "Error: The tool_use block has no \"input\" object. A valid input looks like {}",
            example("view", root)
        )),
    };
    Parsed {
        tool_use_id,
        command,
    }
}

/// Parses one line of text (as `mnemo tool` reads it): JSON with no key twice in one object, then
/// [`parse_value`]; a call that is not one is answered under [`Semantics::CURRENT`].
pub fn parse_text(text: &str, root: &str, profile: Profile) -> Parsed {
    parse_text_under(text, root, profile, Semantics::CURRENT)
}

/// [`parse_text`], with the error texts of `semantics` (as replay re-parses a rejected input).
pub fn parse_text_under(text: &str, root: &str, profile: Profile, semantics: Semantics) -> Parsed {
    match parse_json(text) {
        Ok(value) => parse_value_under(&value, root, profile, semantics),
        Err(JsonError::Duplicate(key)) => Parsed {
            tool_use_id: None,
            command: Err(format!(
                "Error: The input names the key {} more than once in one object; send each field once, for example {}",
                shown_key(&key, semantics),
                example("view", root)
            )),
        },
        Err(JsonError::Syntax(e)) if semantics.nests_too_deep(text, &e) => Parsed {
            tool_use_id: None,
            command: Err(too_deep()),
        },
        Err(JsonError::Syntax(e)) => Parsed {
            tool_use_id: None,
            command: Err(format!(
                "Error: The input is not valid JSON ({}). Send one JSON object per line, for example {}",
                semantics.not_json(&e),
                example("view", root)
            )),
        },
    }
}

/// A key as an error text names it: quoted, and cut after 64 characters.
fn shown_key(key: &str, semantics: Semantics) -> String {
    let mut shown: String = key.chars().take(64).collect();
    if shown.len() < key.len() {
        shown.push('…');
    }
    semantics.quote(&shown)
}

/// Why [`parse_json`] refused a text.
#[derive(Debug)]
pub enum JsonError {
    /// An object names this key more than once (serde_json's `Value` would keep the last).
    Duplicate(String),
    /// The text is not JSON (or nests past serde_json's recursion limit).
    Syntax(serde_json::Error),
}

impl std::fmt::Display for JsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonError::Duplicate(key) => {
                write!(
                    f,
                    "the key {} appears twice in one object",
                    shown_key(key, Semantics::CURRENT)
                )
            }
            JsonError::Syntax(e) => e.fmt(f),
        }
    }
}

/// Parses JSON text into a `Value`, refusing an object that names a key twice (at any depth,
/// after unescaping, so `"a"` and `"\u0061"` are the same key). Everywhere raw JSON text comes in
/// it is read with this; a `Value` built in memory has no duplicate keys by construction.
pub fn parse_json(text: &str) -> Result<Value, JsonError> {
    use serde::de::DeserializeSeed;
    let duplicate = std::cell::RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let parsed = UniqueSeed(&duplicate)
        .deserialize(&mut de)
        .and_then(|value| de.end().map(|()| value));
    match (parsed, duplicate.into_inner()) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(key)) => Err(JsonError::Duplicate(key)),
        (Err(e), None) => Err(JsonError::Syntax(e)),
    }
}

/// Builds a `Value` exactly as serde_json's own `Deserialize` does, but stops at the first
/// duplicate key, which it records in the cell.
#[derive(Clone, Copy)]
struct UniqueSeed<'a>(&'a std::cell::RefCell<Option<String>>);

impl<'de> serde::de::DeserializeSeed<'de> for UniqueSeed<'_> {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for UniqueSeed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        serde::de::DeserializeSeed::deserialize(self, d)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                *self.0.borrow_mut() = Some(key);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            let value = map.next_value_seed(self)?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

fn parse_input(
    input: &Value,
    root: &str,
    profile: Profile,
    semantics: Semantics,
) -> Result<Command, String> {
    let Value::Object(map) = input else {
        return Err(format!(
            "Error: The memory tool input must be a JSON object, got {}. A valid input looks like {}",
            json_type(input),
            example("view", root)
        ));
    };
    let command = match map.get("command") {
        Some(Value::String(c)) => c.as_str(),
        Some(other) => {
            return Err(format!(
                "Error: \"command\" must be a string naming one of: {COMMANDS}; got {}",
                json_type(other)
            ));
        }
        None => {
            return Err(format!(
                "Error: The input has no \"command\" field; use one of: {COMMANDS}. A valid input looks like {}",
                example("view", root)
            ));
        }
    };
    let f = Fields {
        input: map,
        command,
        root,
        profile,
        semantics,
    };
    Ok(match command {
        "view" => Command::View {
            path: f.string("path")?,
            view_range: f.view_range()?,
        },
        "create" => Command::Create {
            path: f.string("path")?,
            file_text: f.string("file_text")?,
        },
        "str_replace" => Command::StrReplace {
            path: f.string("path")?,
            old_str: f.string("old_str")?,
            new_str: f.optional_string("new_str")?,
        },
        "insert" => Command::Insert {
            path: f.string("path")?,
            insert_line: f.integer("insert_line")?,
            insert_text: f.string("insert_text")?,
        },
        "delete" => Command::Delete {
            path: f.string("path")?,
        },
        "rename" => Command::Rename {
            old_path: f.string("old_path")?,
            new_path: f.string("new_path")?,
        },
        other => {
            let shown: String = other.chars().take(64).collect();
            return Err(format!(
                "Error: Unknown command {}; use one of: {COMMANDS}",
                semantics.quote(&shown)
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{COMMAND_NAMES, COMMANDS, JsonError, Profile, parse_json, parse_text};
    use serde_json::Value;

    #[test]
    fn a_key_twice_in_one_object_is_refused_at_any_depth() {
        for text in [
            r#"{"command":"view","path":"/memories","command":"delete"}"#,
            r#"{"type":"tool_use","id":"t","name":"memory","input":{"command":"view","path":"/memories","path":"/memories/x","command":"delete"}}"#,
            r#"{"command":"view","path":"/memories","view_range":[{"a":1,"a":2}]}"#,
            r#"{"command":"view","comm\u0061nd":"delete","path":"/memories"}"#,
        ] {
            assert!(
                matches!(parse_json(text), Err(JsonError::Duplicate(_))),
                "{text}"
            );
            let parsed = parse_text(text, "/memories", Profile::Spec);
            let err = parsed.command.expect_err("refused");
            assert!(err.contains("more than once in one object"), "{err}");
        }
        let err = parse_text(
            r#"{"command":"view","command":"delete","path":"/memories"}"#,
            "/memories",
            Profile::Spec,
        )
        .command
        .expect_err("refused");
        assert!(
            err.starts_with("Error: The input names the key \"command\" more than once"),
            "{err}"
        );
    }

    #[test]
    fn without_duplicates_the_value_is_serde_jsons() {
        for text in [
            r#"{"a":[1,-2,3.5,1e300,null,true,"x\n"],"b":{"c":{}},"d":18446744073709551615}"#,
            "[]",
            "  \"s\"  ",
            "-0",
        ] {
            let want: Value = serde_json::from_str(text).expect("json");
            assert_eq!(parse_json(text).expect("parses"), want, "{text}");
        }
        for text in ["{", "{} x", "[1,]", ""] {
            assert!(
                matches!(parse_json(text), Err(JsonError::Syntax(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn the_error_texts_list_every_command() {
        assert_eq!(COMMANDS, COMMAND_NAMES.join(", "));
    }
}

#[cfg(test)]
mod depth {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::nests_too_deep;
    use crate::model::semantics_version::nesting::{MAX_INPUT_DEPTH, text_nests_too_deep};

    /// JSON values up to 70 levels deep, with strings full of brackets, quotes and backslashes.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(Value::from),
            "[\\[\\]{}\"\\\\a]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(70, 140, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::vec(("[\\[{\"\\\\k]{0,3}", inner), 0..3)
                    .prop_map(|entries| Value::Object(entries.into_iter().collect())),
            ]
        })
    }

    /// A chain of `n` arrays around `inner`.
    fn nested(n: usize, inner: Value) -> Value {
        (0..n).fold(inner, |v, _| Value::Array(vec![v]))
    }

    proptest! {
        #[test]
        fn text_and_value_are_refused_alike(v in value(), extra in 0usize..4) {
            // Around the limit as often as not.
            let v = nested(MAX_INPUT_DEPTH - 2 + extra, v);
            let text = v.to_string();
            prop_assert_eq!(text_nests_too_deep(text.as_bytes()), nests_too_deep(&v), "{}", text);
            let pretty = serde_json::to_string_pretty(&v).expect("text");
            prop_assert_eq!(text_nests_too_deep(pretty.as_bytes()), nests_too_deep(&v));
        }
    }
}
