//! The index as the core's [`Tree`]: what the commands read (a path's kind, a file's text, a
//! directory's entries and rendered lines, the policy, tokens, settings).

use std::sync::{Arc, PoisonError};

use super::Projection;
use super::admin::{POLICY_KEY, decode_grant, decode_token, setting_key, token_key};
use super::keys::{child_prefix, decode_child};
use crate::error::{Error, Result};
use crate::model::credential::TokenRecord;
use crate::model::paths::MemPath;
use crate::model::policy::Policy;
use crate::model::tool::render::child_lines;
use crate::model::tool::{Entry, NodeKind, Probe, Profile, Tree};
use crate::store::kv::KvRead;

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

    fn sha256(&self, path: &MemPath) -> Result<Option<[u8; 32]>> {
        if !self.placeholders.is_empty() {
            if let Some(created) = self.created(path)? {
                if let Some((sha256, _)) = self.placeholders.get(&created) {
                    return Ok(Some(*sha256));
                }
            }
        }
        Ok(self
            .read(path)?
            .map(|content| crate::model::tool::api::content_sha256(&content)))
    }

    fn redacted_by(&self, path: &MemPath) -> Result<Option<u64>> {
        if self.placeholders.is_empty() {
            return Ok(None);
        }
        Ok(self
            .created(path)?
            .and_then(|created| self.placeholders.get(&created))
            .map(|(_, seq)| *seq))
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
        let from_kept = {
            let kept = lock();
            if let Some(lines) = kept.get(id, shown, profile) {
                return Ok(lines);
            }
            kept.render(id, |entries| {
                Arc::from(child_lines(entries, shown, profile))
            })
        };
        // Rendered from the entries kept (a rename within the directory), else listed.
        let (lines, listed): (Arc<str>, _) = match from_kept {
            Some(lines) => (lines, None),
            None => {
                let entries = self.list(path)?;
                (child_lines(&entries, shown, profile).into(), Some(entries))
            }
        };
        lock().put(id, shown, profile, Arc::clone(&lines), listed);
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
    use crate::model::event::{Body, Seq};
    use crate::model::tool::{Command, Limits, Semantics};
    use crate::store::kv::MemKv;

    /// Runs `body` as event `seq` on a projection that keeps listing lines and on one that does
    /// not; asserts that they answer alike, and returns the answer.
    fn answered_alike(
        kept: &mut Projection<MemKv>,
        fresh: &mut Projection<MemKv>,
        seq: u64,
        body: &Body,
    ) -> crate::model::tool::Answer {
        let ours = kept
            .run_call("a", None, body, Semantics::CURRENT, Seq(seq))
            .expect("kept");
        let theirs = fresh
            .run_call("a", None, body, Semantics::CURRENT, Seq(seq))
            .expect("fresh");
        assert_eq!(ours, theirs, "seq {seq}: {body:?}");
        ours
    }

    /// A replay that keeps listing lines answers every call exactly as one that renders each
    /// listing afresh, through writes, edits that change sizes, renames of files and
    /// directories, deletes that prune parents, trash collection and both profiles.
    #[test]
    fn kept_listing_lines_give_the_same_answers_as_fresh_ones() {
        let tool = |profile: Profile, command: Command| {
            Body::Tool(crate::model::event::ToolCall {
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
            let ours = answered_alike(&mut kept, &mut fresh, seq, &tool(profile, command));
            listed += usize::from(ours.text.starts_with("Here're"));
        }
        assert!(listed > 300, "only {listed} listings");
        assert_eq!(kept.kv().map, fresh.kv().map);
    }

    /// Renames within one directory keep its entries and render its lines again from them:
    /// names moved to either end of the order, onto an existing name, onto themselves, of a
    /// subdirectory, each listing the same as one rendered afresh.
    #[test]
    fn renames_within_a_directory_list_as_fresh_ones() {
        let call = |command: Command| {
            Body::Tool(crate::model::event::ToolCall {
                root: "/memories".into(),
                profile: Profile::Spec,
                limits: Limits::default(),
                command,
            })
        };
        let rename = |from: &str, to: &str| Command::Rename {
            old_path: format!("/memories/d/{from}"),
            new_path: format!("/memories/d/{to}"),
        };
        let mut commands = Vec::new();
        for name in ["b.md", "d.md", "f.md", "s/x.md"] {
            commands.push(Command::Create {
                path: format!("/memories/d/{name}"),
                file_text: name.repeat(3),
            });
        }
        for (from, to) in [
            ("d.md", "a.md"),
            ("a.md", "z.md"),
            ("b.md", "e.md"),
            ("e.md", "f.md"),
            ("z.md", "z.md"),
            ("s", "t"),
            ("t", "0"),
            ("f.md", "g.md"),
        ] {
            commands.push(rename(from, to));
            commands.push(Command::View {
                path: "/memories".into(),
                view_range: None,
            });
        }
        let mut fresh = Projection::new(MemKv::default());
        let mut kept = Projection::with_listings(MemKv::default());
        for (seq, command) in (1..).zip(commands) {
            answered_alike(&mut kept, &mut fresh, seq, &call(command));
        }
        assert_eq!(kept.kv().map, fresh.kv().map);
    }
}
