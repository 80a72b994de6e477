//! Resource URIs: `memory://` followed by a file's canonical path, percent-encoded, so
//! `/memories/notes.md` is `memory:///memories/notes.md` and a space in a name is `%20`.

/// The scheme and the empty authority in front of every path.
pub const PREFIX: &str = "memory://";

/// The URI of the file at canonical path `path`: every byte other than an unreserved character
/// (RFC 3986: letters, digits, `-._~`) or a `/` is percent-encoded.
pub fn from_path(path: &str) -> String {
    let mut uri = String::with_capacity(PREFIX.len() + path.len());
    uri.push_str(PREFIX);
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// The path a URI names, or `None` when it is not a `memory://` URI or its escapes are not valid
/// percent-encoded UTF-8.
pub fn to_path(uri: &str) -> Option<String> {
    let encoded = uri.strip_prefix(PREFIX)?.as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        if encoded[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            if !hex.iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            bytes.push(u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()?);
            i += 3;
        } else {
            bytes.push(encoded[i]);
            i += 1;
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_names_that_need_escaping() {
        for path in [
            "/memories/notes.md",
            "/memories/a b/c#d?.txt",
            "/memories/100%.md",
            "/memories/ünïcödé/日本.md",
        ] {
            let uri = from_path(path);
            assert!(uri.starts_with(PREFIX));
            assert!(!uri[PREFIX.len()..].contains([' ', '#', '?']));
            assert_eq!(to_path(&uri).as_deref(), Some(path));
        }
        assert_eq!(from_path("/memories/a b"), "memory:///memories/a%20b");
    }

    #[test]
    fn refuses_other_schemes_and_broken_escapes() {
        assert_eq!(to_path("file:///memories/notes.md"), None);
        assert_eq!(to_path("memory:///memories/%2"), None);
        assert_eq!(to_path("memory:///memories/%zz"), None);
        assert_eq!(to_path("memory:///memories/%+1"), None);
        assert_eq!(to_path("memory:///memories/%FF"), None);
    }
}
