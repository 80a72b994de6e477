//! The index as the core's [`Tree`]: what the commands read (a path's kind, a file's text, a
//! directory's entries and rendered lines, the policy, tokens, settings).

use std::sync::{Arc, PoisonError};

use super::Projection;
use super::admin::{POLICY_KEY, decode_grant, decode_token, setting_key, token_key};
use super::keys::{child_prefix, decode_child};
use crate::credential::TokenRecord;
use crate::error::{Error, Result};
use crate::kv::KvRead;
use crate::paths::MemPath;
use crate::policy::Policy;
use crate::tool::render::child_lines;
use crate::tool::{Entry, NodeKind, Probe, Profile, Tree};

impl<K: KvRead> Tree for Projection<K> {
    type Error = Error;

    fn probe(&self, path: &MemPath) -> Result<Probe> {
        let mut last = NodeKind::Dir;
        let depth = self.walk(path, |kind, _| last = kind)?;
        Ok(if depth == path.depth() {
            Probe {
                kind: Some(last),
                file_above: None,
            }
        } else {
            Probe {
                kind: None,
                file_above: (last == NodeKind::File).then_some(depth),
            }
        })
    }

    fn read(&self, path: &MemPath) -> Result<Option<String>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(self.file(id)?.content)),
            _ => Ok(None),
        }
    }

    fn created(&self, path: &MemPath) -> Result<Option<u64>> {
        match self.lookup(path)? {
            Some((NodeKind::File, id)) => Ok(Some(self.file_head(id)?.created)),
            _ => Ok(None),
        }
    }

    fn list(&self, path: &MemPath) -> Result<Vec<Entry>> {
        let Some((NodeKind::Dir, id)) = self.lookup(path)? else {
            return Ok(Vec::new());
        };
        // Visited in place, not collected first: a listing reads each entry once.
        let mut out = Vec::new();
        let mut failed = None;
        self.kv.visit_prefix(&child_prefix(id), |key, value| {
            let entry = std::str::from_utf8(&key[9..])
                .map_err(|_| Error::corrupt("path index name is not UTF-8"))
                .and_then(|name| {
                    let (kind, child) = decode_child(value)?;
                    let size = match kind {
                        NodeKind::Dir => 0,
                        NodeKind::File => self.file_head(child)?.len,
                    };
                    Ok(Entry {
                        name: name.to_string(),
                        kind,
                        size,
                    })
                });
            match entry {
                Ok(entry) => out.push(entry),
                Err(e) => failed = Some(e),
            }
            failed.is_none()
        })?;
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    fn child_lines(&self, path: &MemPath, shown: &str, profile: Profile) -> Result<Arc<str>> {
        let render =
            || Ok::<Arc<str>, Error>(child_lines(&self.list(path)?, shown, profile).into());
        let Some(listings) = &self.listings else {
            return render();
        };
        let Some((NodeKind::Dir, id)) = self.lookup(path)? else {
            return render();
        };
        let lock = || listings.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lines) = lock().get(id, shown, profile) {
            return Ok(lines);
        }
        let lines = render()?;
        lock().put(id, shown, profile, Arc::clone(&lines));
        Ok(lines)
    }

    fn policy(&self) -> Result<Policy> {
        if self.kv.get(POLICY_KEY)?.is_none() {
            return Ok(Policy::open());
        }
        let mut grants = Vec::new();
        for (k, v) in self.kv.scan_prefix(b"p", usize::MAX)? {
            grants.push(decode_grant(&k, &v)?);
        }
        Ok(Policy::new(grants))
    }

    fn token(&self, id: &str) -> Result<Option<TokenRecord>> {
        self.kv.get_with(&token_key(id), decode_token)?.transpose()
    }

    fn setting(&self, name: &str) -> Result<Option<String>> {
        match self.kv.get(&setting_key(name))? {
            None => Ok(None),
            Some(value) => String::from_utf8(value.to_vec())
                .map(Some)
                .map_err(|_| Error::corrupt(format!("path index setting {name} is not text"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Body, Seq};
    use crate::kv::MemKv;
    use crate::tool::{Command, Limits, Semantics};

    /// A replay that keeps listing lines answers every call exactly as one that renders each
    /// listing afresh, through writes, edits that change sizes, renames of files and
    /// directories, deletes that prune parents, trash collection and both profiles.
    #[test]
    fn kept_listing_lines_give_the_same_answers_as_fresh_ones() {
        let tool = |profile: Profile, command: Command| {
            Body::Tool(crate::event::ToolCall {
                root: "/memories".into(),
                profile,
                limits: Limits::default(),
                command,
            })
        };
        let mut fresh = Projection::new(MemKv::default());
        let mut kept = Projection::with_listings(MemKv::default());
        let mut rng = 0x2545_f491_4f6c_dd1d_u64;
        let mut listed = 0;
        for seq in 1..=3_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let dir = |n: u64| format!("/memories/d{}", n % 4);
            let file = |n: u64| format!("{}/s{}/f{}.md", dir(n), (n >> 3) % 3, (n >> 5) % 5);
            let profile = if rng % 11 == 0 {
                Profile::PythonSdk
            } else {
                Profile::Spec
            };
            let command = match rng % 9 {
                0 | 1 => Command::View {
                    path: if rng % 2 == 0 {
                        "/memories".into()
                    } else {
                        dir(rng >> 8)
                    },
                    view_range: None,
                },
                2 | 3 => Command::Create {
                    path: file(rng >> 8),
                    file_text: "x".repeat(((rng >> 20) % 3000) as usize),
                },
                4 => Command::Insert {
                    path: file(rng >> 8),
                    insert_line: 0,
                    insert_text: "more\n".into(),
                },
                5 => Command::Rename {
                    old_path: file(rng >> 8),
                    new_path: file(rng >> 16),
                },
                6 => Command::Rename {
                    old_path: dir(rng >> 8),
                    new_path: format!("{}/moved", dir(rng >> 16)),
                },
                7 => Command::Delete {
                    path: if rng % 3 == 0 {
                        dir(rng >> 8)
                    } else {
                        file(rng >> 8)
                    },
                },
                _ => Command::Create {
                    path: format!("{}/.hidden/node_modules/n.md", dir(rng >> 8)),
                    file_text: "n".into(),
                },
            };
            let body = tool(profile, command);
            let ours = kept
                .run_call("a", None, &body, Semantics::CURRENT, Seq(seq))
                .expect("kept");
            let theirs = fresh
                .run_call("a", None, &body, Semantics::CURRENT, Seq(seq))
                .expect("fresh");
            assert_eq!(ours, theirs, "seq {seq}: {body:?}");
            listed += usize::from(ours.text.starts_with("Here're"));
        }
        assert!(listed > 300, "only {listed} listings");
        assert_eq!(kept.kv().map, fresh.kv().map);
    }
}
