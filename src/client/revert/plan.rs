//! The calls a revert makes, from the files as they are and as they should be: pure, over paths
//! and contents, so a model can check it (the proptest below) without a store.
//!
//! A file is named by its identity (its ordinal in the log, as [`crate::audit::lineage`] follows
//! it through renames). What is wanted and what there is are given for the files the revert
//! concerns; every other file now in the tree is fixed: no call touches it, and a call that would
//! need its place refuses the plan. The calls come in four steps, each simulated over the set of
//! occupied paths so that every one of them succeeds when it is made:
//!
//! 1. `delete` each concerned file that should not be there (or only at another root);
//! 2. `rename` each file that should be elsewhere: first every one whose place is free (two
//!    passes, which settle chains in either order), then the rest through a fresh directory
//!    under their root (a swap, a file in the way of a directory), so history follows the file;
//! 3. put back each content that differs: `str_replace` of the whole content (which occurs
//!    exactly once in itself), or `insert` at line 0 into an empty file;
//! 4. `create` each file that should be there and is not.
//!
//! Each step costs a look-up in an ordered set per path, so 10,000 files cost 10,000 calls and
//! about as many look-ups, never a pass per file.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::paths::MemPath;
use crate::model::tool::Command;

/// A file's place and content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Where it is.
    pub(crate) path: MemPath,
    /// What it holds.
    pub(crate) content: String,
}

/// One call of a revert: its command and the root it runs under (the path's first segment).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Step {
    /// The memory root, such as `/memories`.
    pub(crate) root: String,
    /// The call.
    pub(crate) command: Command,
}

/// The root a call on `path` runs under: its first segment (`None` for a path with fewer than
/// two, which no call can name).
fn root_of(path: &MemPath) -> Option<MemPath> {
    (path.depth() >= 2).then(|| path.ancestor(1))
}

/// Whether a file can be put at `path`: no file is there, none is a directory above it, and no
/// file lies under it (which would make it a directory).
fn free(occupied: &BTreeSet<MemPath>, path: &MemPath) -> bool {
    if occupied.contains(path) {
        return false;
    }
    if (1..path.depth()).any(|d| occupied.contains(&path.ancestor(d))) {
        return false;
    }
    !occupied
        .range(path.clone()..)
        .next()
        .is_some_and(|next| next.starts_with(path))
}

/// What is in the way of a file at `path`, for a refusal.
fn in_the_way(occupied: &BTreeSet<MemPath>, path: &MemPath) -> String {
    if occupied.contains(path) {
        return format!("another file is at {path} now");
    }
    if let Some(d) = (1..path.depth()).find(|d| occupied.contains(&path.ancestor(*d))) {
        return format!("{} is a file now", path.ancestor(d));
    }
    format!("{path} is a directory now")
}

/// The calls that turn `have` into `want` (both by file identity, only the files concerned),
/// with `fixed` the paths of every other file there now; `tag` names the fresh directory swaps
/// pass through. An `Err` says why no sequence of calls can: a place another file holds, a path
/// no call can name.
pub(crate) fn calls(
    want: &BTreeMap<u64, Placed>,
    have: &BTreeMap<u64, Placed>,
    fixed: &BTreeSet<MemPath>,
    tag: u64,
) -> Result<Vec<Step>, String> {
    for placed in want.values().chain(have.values()) {
        if root_of(&placed.path).is_none() {
            return Err(format!(
                "{} is not under a memory root, so no call can name it",
                placed.path
            ));
        }
    }
    let mut occupied: BTreeSet<MemPath> = fixed.clone();
    occupied.extend(have.values().map(|p| p.path.clone()));
    let mut steps = Vec::new();
    let step = |command: Command, path: &MemPath| Step {
        root: root_of(path).map(|r| r.to_string()).unwrap_or_default(),
        command,
    };
    // Kept: the files that stay (perhaps moved, perhaps rewritten), with where they are now.
    let kept = |id: &u64| -> Option<(&Placed, &Placed)> {
        let (w, h) = (want.get(id)?, have.get(id)?);
        (root_of(&w.path) == root_of(&h.path)).then_some((w, h))
    };

    // 1. Deletes.
    for (id, h) in have {
        if kept(id).is_none() {
            occupied.remove(&h.path);
            steps.push(step(
                Command::Delete {
                    path: h.path.to_string(),
                },
                &h.path,
            ));
        }
    }

    // 2. Renames, straight where the place is free, else through a fresh directory.
    let mut pending: Vec<(MemPath, MemPath)> = have
        .keys()
        .filter_map(kept)
        .filter(|(w, h)| w.path != h.path)
        .map(|(w, h)| (h.path.clone(), w.path.clone()))
        .collect();
    let mut rename = |occupied: &mut BTreeSet<MemPath>, from: &MemPath, to: &MemPath| {
        occupied.remove(from);
        occupied.insert(to.clone());
        steps.push(step(
            Command::Rename {
                old_path: from.to_string(),
                new_path: to.to_string(),
            },
            from,
        ));
    };
    for pass in 0..2 {
        let before = pending.len();
        let mut rest = Vec::new();
        // The second pass goes the other way, so a chain (a to b, b to c) settles in one of them.
        let order: Box<dyn Iterator<Item = (MemPath, MemPath)>> = if pass == 0 {
            Box::new(pending.into_iter())
        } else {
            Box::new(pending.into_iter().rev())
        };
        for (from, to) in order {
            if free(&occupied, &to) {
                rename(&mut occupied, &from, &to);
            } else {
                rest.push((from, to));
            }
        }
        pending = rest;
        if pending.is_empty() || pending.len() == before {
            break;
        }
    }
    if !pending.is_empty() {
        // Each left: to a fresh directory beside it (in its own directory, so a revert of one
        // directory writes nowhere else, and an operator granted that directory may make it),
        // then every one to its place.
        let mut aside = Vec::new();
        let mut spare: BTreeMap<MemPath, MemPath> = BTreeMap::new();
        for (n, (from, to)) in pending.into_iter().enumerate() {
            // Not inside a place a file goes back to (a file has nothing under it).
            let mut root = from.parent().unwrap_or_else(MemPath::top);
            while want.values().any(|w| root.starts_with(&w.path)) {
                let Some(up) = root.parent() else { break };
                root = up;
            }
            let dir = match spare.get(&root) {
                Some(dir) => dir.clone(),
                None => {
                    let mut k = 0u32;
                    let dir = loop {
                        let name = if k == 0 {
                            format!(".revert-{tag}")
                        } else {
                            format!(".revert-{tag}-{k}")
                        };
                        let dir = root.join(&name);
                        let wanted = want.values().any(|w| w.path.starts_with(&dir));
                        if free(&occupied, &dir) && !wanted {
                            break dir;
                        }
                        k += 1;
                    };
                    spare.insert(root, dir.clone());
                    dir
                }
            };
            let through = dir.join(&(n + 1).to_string());
            rename(&mut occupied, &from, &through);
            aside.push((through, to));
        }
        for (through, to) in aside {
            if !free(&occupied, &to) {
                return Err(format!(
                    "cannot move a file back to {to}: {}",
                    in_the_way(&occupied, &to)
                ));
            }
            rename(&mut occupied, &through, &to);
        }
    }

    // 3. Contents put back.
    for id in have.keys() {
        let Some((w, h)) = kept(id) else { continue };
        if w.content == h.content {
            continue;
        }
        let command = if h.content.is_empty() {
            Command::Insert {
                path: w.path.to_string(),
                insert_line: 0,
                insert_text: w.content.clone(),
            }
        } else {
            Command::StrReplace {
                path: w.path.to_string(),
                old_str: h.content.clone(),
                new_str: Some(w.content.clone()),
            }
        };
        steps.push(step(command, &w.path));
    }

    // 4. Creates.
    for (id, w) in want {
        if kept(id).is_some() {
            continue;
        }
        if !free(&occupied, &w.path) {
            return Err(format!(
                "cannot create {} again: {}",
                w.path,
                in_the_way(&occupied, &w.path)
            ));
        }
        occupied.insert(w.path.clone());
        steps.push(step(
            Command::Create {
                path: w.path.to_string(),
                file_text: w.content.clone(),
            },
            &w.path,
        ));
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> MemPath {
        MemPath::absolute(s).unwrap()
    }

    fn placed(path: &str, content: &str) -> Placed {
        Placed {
            path: p(path),
            content: content.into(),
        }
    }

    /// Applies `steps` to a tree of path → (id, content) as the memory tool would, failing on
    /// any call the tool would refuse; ids of new files are fresh.
    fn apply(
        mut tree: BTreeMap<MemPath, (u64, String)>,
        steps: &[Step],
    ) -> Result<BTreeMap<MemPath, (u64, String)>, String> {
        let mut next = 1_000_000;
        let paths: BTreeSet<MemPath> = tree.keys().cloned().collect();
        let mut occupied = paths;
        for s in steps {
            match &s.command {
                Command::Delete { path } => {
                    let path = p(path);
                    tree.remove(&path).ok_or("delete of nothing")?;
                    occupied.remove(&path);
                }
                Command::Rename { old_path, new_path } => {
                    let (from, to) = (p(old_path), p(new_path));
                    if !free(&occupied, &to) {
                        return Err(format!("rename onto a taken {to}"));
                    }
                    let file = tree.remove(&from).ok_or("rename of nothing")?;
                    occupied.remove(&from);
                    occupied.insert(to.clone());
                    tree.insert(to, file);
                }
                Command::StrReplace {
                    path,
                    old_str,
                    new_str,
                } => {
                    let file = tree.get_mut(&p(path)).ok_or("edit of nothing")?;
                    if old_str.is_empty() || file.1.matches(old_str.as_str()).count() != 1 {
                        return Err("old_str not found once".into());
                    }
                    file.1 = file
                        .1
                        .replace(old_str.as_str(), new_str.as_deref().unwrap_or(""));
                }
                Command::Insert {
                    path, insert_text, ..
                } => {
                    let file = tree.get_mut(&p(path)).ok_or("insert into nothing")?;
                    if !file.1.is_empty() {
                        return Err("insert into a file that is not empty".into());
                    }
                    file.1 = insert_text.clone();
                }
                Command::Create { path, file_text } => {
                    let path = p(path);
                    if !free(&occupied, &path) {
                        return Err(format!("create onto a taken {path}"));
                    }
                    next += 1;
                    occupied.insert(path.clone());
                    tree.insert(path, (next, file_text.clone()));
                }
                Command::View { .. } => return Err("a view".into()),
            }
            if !s
                .command
                .paths()
                .iter()
                .all(|x| p(x).starts_with(&p(&s.root)))
            {
                return Err("a path outside the call's root".into());
            }
        }
        Ok(tree)
    }

    fn by_id(tree: &BTreeMap<MemPath, (u64, String)>) -> BTreeMap<u64, Placed> {
        tree.iter()
            .map(|(path, (id, content))| {
                (
                    *id,
                    Placed {
                        path: path.clone(),
                        content: content.clone(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn a_swap_goes_through_a_fresh_directory_and_keeps_each_file() {
        let have = BTreeMap::from([(1, placed("/m/a", "A")), (2, placed("/m/b", "B"))]);
        let want = BTreeMap::from([(1, placed("/m/b", "A")), (2, placed("/m/a", "B"))]);
        let steps = calls(&want, &have, &BTreeSet::new(), 7).unwrap();
        assert_eq!(steps.len(), 4, "{steps:?}");
        let tree = BTreeMap::from([(p("/m/a"), (1, "A".into())), (p("/m/b"), (2, "B".into()))]);
        let after = apply(tree, &steps).unwrap();
        assert_eq!(by_id(&after), want);
    }

    #[test]
    fn a_swap_in_a_directory_goes_through_a_directory_within_it() {
        let have = BTreeMap::from([(1, placed("/m/x/a", "A")), (2, placed("/m/x/b", "B"))]);
        let want = BTreeMap::from([(1, placed("/m/x/b", "A")), (2, placed("/m/x/a", "B"))]);
        let steps = calls(&want, &have, &BTreeSet::new(), 7).unwrap();
        let x = p("/m/x");
        for step in &steps {
            for path in step.command.paths() {
                assert!(p(path).starts_with(&x), "{path} is outside /m/x: {steps:?}");
            }
        }
        let tree = BTreeMap::from([
            (p("/m/x/a"), (1, "A".into())),
            (p("/m/x/b"), (2, "B".into())),
        ]);
        assert_eq!(by_id(&apply(tree, &steps).unwrap()), want);
    }

    #[test]
    fn a_place_a_fixed_file_holds_refuses_the_plan() {
        let want = BTreeMap::from([(1, placed("/m/a", "A"))]);
        let fixed = BTreeSet::from([p("/m/a")]);
        let why = calls(&want, &BTreeMap::new(), &fixed, 1).unwrap_err();
        assert!(why.contains("another file is at /m/a"), "{why}");
        let fixed = BTreeSet::from([p("/m")]);
        let want = BTreeMap::from([(1, placed("/m/d/a", "A"))]);
        assert!(calls(&want, &BTreeMap::new(), &fixed, 1).is_err());
    }

    #[test]
    fn ten_thousand_files_cost_a_call_each() {
        let have: BTreeMap<u64, Placed> = (0..10_000)
            .map(|i| (i, placed(&format!("/m/new/{i}"), "x")))
            .collect();
        let want: BTreeMap<u64, Placed> = (0..10_000)
            .map(|i| (i, placed(&format!("/m/old/{i}"), "y")))
            .collect();
        let started = std::time::Instant::now();
        let steps = calls(&want, &have, &BTreeSet::new(), 1).unwrap();
        assert_eq!(steps.len(), 20_000);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }

    /// A random tree of up to 8 files in a few directories, by id.
    fn tree() -> impl Strategy<Value = BTreeMap<u64, Placed>> {
        let name = prop::sample::select(vec!["a", "b", "c", "d/a", "d/b", "a/x", "e/f/g"]);
        let content = prop::sample::select(vec!["", "one", "two\n", "one two"]);
        prop::collection::vec((0u64..12, name, content), 0..8).prop_map(|files| {
            let mut out = BTreeMap::new();
            let mut taken = BTreeSet::new();
            for (id, name, content) in files {
                let path = p(&format!("/m/{name}"));
                if out.contains_key(&id) || !free(&taken, &path) {
                    continue;
                }
                taken.insert(path.clone());
                out.insert(
                    id,
                    Placed {
                        path,
                        content: content.into(),
                    },
                );
            }
            out
        })
    }

    proptest! {
        /// Whatever the two trees, the calls are each accepted in turn and leave exactly the
        /// wanted tree, every file that stays keeping its identity.
        #[test]
        fn the_calls_turn_any_tree_into_any_other(want in tree(), have in tree()) {
            let steps = calls(&want, &have, &BTreeSet::new(), 3).unwrap();
            let tree = have
                .iter()
                .map(|(id, f)| (f.path.clone(), (*id, f.content.clone())))
                .collect();
            let after = apply(tree, &steps).map_err(TestCaseError::fail)?;
            let got: BTreeMap<MemPath, String> =
                after.iter().map(|(k, (_, c))| (k.clone(), c.clone())).collect();
            let wanted: BTreeMap<MemPath, String> =
                want.values().map(|w| (w.path.clone(), w.content.clone())).collect();
            prop_assert_eq!(got, wanted);
            for (path, (id, _)) in &after {
                if have.contains_key(id) {
                    prop_assert_eq!(&want[id].path, path, "file {} kept its identity", id);
                }
            }
        }
    }
}
