//! Listing memories: the files under a path prefix, in path order, grouped below a depth into
//! prefixes, one page after a cursor. Pure: it sees the files' paths (as the API names them,
//! without the memory tool's root) and nothing of the store.

/// One item of a listing, with its key: a memory's path, or a prefix ending in `/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listed<F> {
    /// A memory (its file, at the path the API names).
    Memory(String, F),
    /// The memories below the listing's depth under this prefix (ending in `/`).
    Prefix(String),
}

impl<F> Listed<F> {
    /// The key the listing is ordered by and a page token carries.
    pub fn key(&self) -> &str {
        match self {
            Listed::Memory(path, _) | Listed::Prefix(path) => path,
        }
    }
}

/// `key`'s segments, the listing's order: segment by segment, each by its bytes (a directory's
/// memories come before a sibling whose name extends the directory's, `/a/x` before `/a-b`).
fn segments(key: &str) -> Vec<&str> {
    key.trim_end_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect()
}

/// One page of the memories in `files` (path order, every path under `prefix`, which ends in
/// `/`): with `depth` 0 every memory, else the memories at most `depth` segments below `prefix`
/// and one prefix item for each directory at that depth holding deeper ones. Only items after
/// the key `after`, at most `limit` of them; and the key to pass as `after` for the next page,
/// if there is one.
pub fn page<F>(
    files: impl IntoIterator<Item = (String, F)>,
    prefix: &str,
    depth: usize,
    after: Option<&str>,
    limit: usize,
) -> (Vec<Listed<F>>, Option<String>) {
    let after = after.map(segments);
    let mut items: Vec<Listed<F>> = Vec::new();
    let mut more = false;
    for (path, file) in files {
        let Some(rest) = path.strip_prefix(prefix) else {
            continue;
        };
        let below: Vec<&str> = rest.split('/').collect();
        let item = if depth > 0 && below.len() > depth {
            Listed::Prefix(format!("{prefix}{}/", below[..depth].join("/")))
        } else {
            Listed::Memory(path, file)
        };
        if after
            .as_ref()
            .is_some_and(|after| segments(item.key()) <= *after)
        {
            continue;
        }
        if items.last().is_some_and(|last| last.key() == item.key()) {
            continue;
        }
        if items.len() == limit {
            more = true;
            break;
        }
        items.push(item);
    }
    let next = more
        .then(|| items.last().map(|item| item.key().to_string()))
        .flatten();
    (items, next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn files(paths: &[&str]) -> Vec<(String, ())> {
        paths.iter().map(|p| (p.to_string(), ())).collect()
    }

    fn keys(items: &[Listed<()>]) -> Vec<&str> {
        items.iter().map(Listed::key).collect()
    }

    const TREE: &[&str] = &[
        "/a/x.md",
        "/a/y/z.md",
        "/a-b.md",
        "/n/1.md",
        "/n/2/3.md",
        "/top.md",
    ];

    #[test]
    fn depth_one_groups_deeper_memories_into_prefixes() {
        let (items, next) = page(files(TREE), "/", 1, None, 100);
        assert_eq!(keys(&items), ["/a/", "/a-b.md", "/n/", "/top.md"]);
        assert_eq!(next, None);
        let (items, _) = page(files(&TREE[..2]), "/a/", 1, None, 100);
        assert_eq!(keys(&items), ["/a/x.md", "/a/y/"]);
        let (items, _) = page(files(TREE), "/", 0, None, 100);
        assert_eq!(keys(&items), TREE);
    }

    #[test]
    fn pages_follow_each_other_without_a_gap_or_a_repeat() {
        let (first, next) = page(files(TREE), "/", 1, None, 2);
        assert_eq!(keys(&first), ["/a/", "/a-b.md"]);
        let (second, next) = page(files(TREE), "/", 1, next.as_deref(), 2);
        assert_eq!(keys(&second), ["/n/", "/top.md"]);
        assert_eq!(next, None);
    }

    proptest! {
        /// Walking the pages of any tree at any depth and page size lists each item once, in
        /// order, as one page of everything does.
        #[test]
        fn walking_the_pages_lists_what_one_page_lists(
            picks in proptest::collection::btree_set(
                proptest::collection::vec(prop_oneof!["a", "b", "a-b", "c.md"], 1..4), 0..24),
            depth in 0usize..3,
            limit in 1usize..5,
        ) {
            // Files only at leaves: a path that is a directory of another is left out.
            let all: Vec<String> = picks.iter().map(|p| format!("/{}", p.join("/"))).collect();
            let mut paths: Vec<&String> = all
                .iter()
                .filter(|p| !all.iter().any(|q| q.starts_with(&format!("{p}/"))))
                .collect();
            paths.sort_by(|a, b| segments(a).cmp(&segments(b)));
            let tree: Vec<(String, ())> = paths.iter().map(|p| (p.to_string(), ())).collect();
            let (whole, none) = page(tree.clone(), "/", depth, None, usize::MAX);
            prop_assert_eq!(none, None);
            let mut walked = Vec::new();
            let mut after = None;
            loop {
                let (items, next) = page(tree.clone(), "/", depth, after.as_deref(), limit);
                prop_assert!(items.len() <= limit);
                walked.extend(items);
                match next {
                    Some(key) => after = Some(key),
                    None => break,
                }
            }
            prop_assert_eq!(walked, whole);
        }
    }
}
