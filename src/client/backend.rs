//! The seam between a client and its store: [`StoreAccess`] has one method per operation that a
//! store open in this process and a store a `mnemo serve` holds answer differently, and each of
//! [`MnemoClient`]'s methods that reaches the store is one call through
//! [`MnemoClient::backend`]. [`InProcess`] answers from the store open here, for writing or as
//! a private read-only copy (the client's own helpers reach either); with the `client` feature,
//! a served store answers through its server's routes, and refuses with [`Error::NotLocal`] what
//! needs the store in this process.

use serde_json::Value;

use crate::audit::history::{LogQuery, held_records, listed_event, select_events, state_at};
use crate::audit::verify::{Report, VerifyOptions, verify_store_with};
use crate::client::reads::{listing_of, listing_of_entries};
use crate::client::redact::{Plan, Redacted, Selection, plan, redact};
use crate::client::revert::{self, RevertPlan, RevertScope, Reverted};
use crate::client::store_failures::Answered;
use crate::client::token::{Listed, issue, listed, revoke};
use crate::client::{Backend, Forward, MnemoClient, readable};
use crate::error::{Error, Result};
use crate::model::event::{Body, Seq};
use crate::model::paths::MemPath;
use crate::model::policy::{Access, Policy};
use crate::model::protocol::{
    FileDiff, HistoryEvent, Listing, LoggedEvent, ShownEvent, TokenInfo, TraceReport,
};
use crate::model::tool::{Limits, Profile, Tree};
use crate::store::log::{Head, Store};
use crate::store::projection::{MEMORY_TAG, MemoryRecord};
use crate::store::writer::{Call, Receipt};

/// What differs between a store open in this process and one a server holds. Each method is
/// given the client it answers for (its agent, and the helpers that reach a store open here).
pub(crate) trait StoreAccess {
    /// The URL of the server that holds the store, or `None` for a store open in this process.
    fn server_url(&self) -> Option<&str>;

    /// See [`MnemoClient::settle_index`].
    fn settle_index(&self, client: &MnemoClient) -> Result<()>;

    /// See [`MnemoClient::head`].
    fn head(&self, client: &MnemoClient) -> Result<Head>;

    /// See [`MnemoClient::verify_watching`].
    fn verify(
        &self,
        client: &MnemoClient,
        expect: Option<Head>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report>;

    /// See [`MnemoClient::call`].
    fn call(
        &self,
        client: &MnemoClient,
        tool_use_id: Option<String>,
        body: Body,
    ) -> Result<Receipt>;

    /// See [`MnemoClient::forward`].
    fn forward(
        &self,
        client: &MnemoClient,
        call: Forward<'_>,
        root: &str,
        profile: Profile,
        limits: Limits,
    ) -> Option<std::result::Result<Answered, Value>>;

    /// See [`MnemoClient::records_by_tag`].
    fn records_by_tag(&self, client: &MnemoClient, tag: &str) -> Result<Vec<MemoryRecord>>;

    /// See [`MnemoClient::record`].
    fn record(&self, client: &MnemoClient, path: &str) -> Result<Option<MemoryRecord>>;

    /// See [`MnemoClient::settings`].
    fn settings(&self, client: &MnemoClient) -> Result<Vec<(String, String)>>;

    /// See [`MnemoClient::policy`].
    fn policy(&self, client: &MnemoClient) -> Result<Policy>;

    /// Every file right after event `at` (at most the head), whatever the grants: what
    /// [`MnemoClient::records_at`] keeps those of its agent may read of.
    fn files_at(&self, client: &MnemoClient, at: Seq) -> Result<Vec<MemoryRecord>>;

    /// See [`MnemoClient::tree_at`].
    fn tree_at(
        &self,
        client: &MnemoClient,
        dir: &MemPath,
        at: Option<Seq>,
    ) -> Result<Vec<MemoryRecord>>;

    /// See [`MnemoClient::listing`].
    fn listing(&self, client: &MnemoClient, dir: &MemPath, at: Option<Seq>) -> Result<Listing>;

    /// See [`MnemoClient::content_at`].
    fn content_at(
        &self,
        client: &MnemoClient,
        file: &MemPath,
        at: Option<Seq>,
    ) -> Result<Option<String>>;

    /// See [`MnemoClient::log`].
    fn log(&self, client: &MnemoClient, query: &LogQuery) -> Result<Vec<LoggedEvent>>;

    /// See [`MnemoClient::history`].
    fn history(&self, client: &MnemoClient, path: &MemPath) -> Result<Vec<HistoryEvent>>;

    /// See [`MnemoClient::show`].
    fn show(&self, client: &MnemoClient, seq: Seq) -> Result<ShownEvent>;

    /// See [`MnemoClient::diff`].
    fn diff(
        &self,
        client: &MnemoClient,
        from: Seq,
        to: Seq,
        dir: &MemPath,
    ) -> Result<Vec<FileDiff>>;

    /// See [`MnemoClient::trace`]: the whole trace, whatever the client's grants (the client
    /// scopes it).
    fn trace(&self, client: &MnemoClient, seq: Seq, file: Option<&MemPath>) -> Result<TraceReport>;

    /// See [`MnemoClient::tokens`].
    fn tokens(&self, client: &MnemoClient) -> Result<Vec<TokenInfo>>;

    /// See [`MnemoClient::issue_token`].
    fn issue_token(
        &self,
        client: &MnemoClient,
        agent: &str,
        label: &str,
    ) -> Result<(Receipt, Option<String>)>;

    /// See [`MnemoClient::revoke_token`].
    fn revoke_token(&self, client: &MnemoClient, id: &str) -> Result<Receipt>;

    /// See [`MnemoClient::redact_as`]: recorded under `operator` in this process; a server
    /// records who asked.
    fn redact(
        &self,
        client: &MnemoClient,
        operator: &str,
        reason: &str,
        selection: &Selection,
    ) -> Result<Redacted>;

    /// See [`MnemoClient::redaction_plan`].
    fn redaction_plan(&self, client: &MnemoClient, selection: &Selection) -> Result<Plan>;

    /// See [`MnemoClient::revert_plan`].
    fn revert_plan(&self, client: &MnemoClient, scope: &RevertScope) -> Result<RevertPlan>;

    /// See [`MnemoClient::revert`].
    fn revert(&self, client: &MnemoClient, scope: &RevertScope, force: bool) -> Result<Reverted>;
}

impl MnemoClient {
    /// How this client reaches its store: through the store open in this process (for writing,
    /// or a read-only copy), or through the server that holds it.
    pub(crate) fn backend(&self) -> &dyn StoreAccess {
        match &self.backend {
            Backend::Local(_) | Backend::Copy(_) => &InProcess,
            #[cfg(feature = "client")]
            Backend::Served(served) => &**served,
        }
    }
}

/// A store open in this process, for writing or as a private read-only copy: the client's
/// helpers (`read`, `local`, `local_store`) reach either, and say [`Error::ReadOnly`] for a
/// write to a copy.
pub(crate) struct InProcess;

impl InProcess {
    /// Runs `read` for the tree after event `at`: now (`None`) under the writer lock, so no
    /// call is half-applied; a past one on the log as written once the calls answered so far
    /// are stored, holding no lock (its replay needs none, and never holds off writes).
    fn past_or_now<T>(
        &self,
        client: &MnemoClient,
        at: Option<Seq>,
        read: impl FnOnce(&Store) -> Result<T>,
    ) -> Result<T> {
        match at {
            None => client.read_local(read),
            Some(_) => {
                self.settle_index(client)?;
                read(&*client.local_store()?)
            }
        }
    }
}

impl StoreAccess for InProcess {
    fn server_url(&self) -> Option<&str> {
        None
    }

    fn settle_index(&self, client: &MnemoClient) -> Result<()> {
        client.read("MnemoClient::flush_index", |_| Ok(()))
    }

    fn head(&self, client: &MnemoClient) -> Result<Head> {
        client.read("MnemoClient::head", Store::head)
    }

    fn verify(
        &self,
        client: &MnemoClient,
        expect: Option<Head>,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report> {
        let options = VerifyOptions {
            expect,
            progress: Some(progress),
        };
        // A read-only copy is proven as it rests: a log behind its recorded head is a finding.
        if let Backend::Copy(copy) = &client.backend {
            return verify_store_with(&copy.store, options);
        }
        client.read("MnemoClient::verify", |store| {
            verify_store_with(store, options)
        })
    }

    fn call(
        &self,
        client: &MnemoClient,
        tool_use_id: Option<String>,
        body: Body,
    ) -> Result<Receipt> {
        client
            .local("MnemoClient::call")?
            .held()?
            .writer()
            .call(Call {
                agent: client.agent.to_string(),
                tool_use_id,
                body,
            })
    }

    fn forward(
        &self,
        _: &MnemoClient,
        _: Forward<'_>,
        _: &str,
        _: Profile,
        _: Limits,
    ) -> Option<std::result::Result<Answered, Value>> {
        None
    }

    fn records_by_tag(&self, client: &MnemoClient, tag: &str) -> Result<Vec<MemoryRecord>> {
        if tag == MEMORY_TAG {
            let agent = client.agent.clone();
            return client.read("MnemoClient::records_by_tag", move |store| {
                let index = store.index();
                let policy = index.policy()?;
                let mut records = index.records_under(&MemPath::top())?;
                records.retain(|r| readable(&policy, &agent, r));
                Ok(records)
            });
        }
        match tag.strip_prefix("path:") {
            Some(path) => Ok(self.record(client, path)?.into_iter().collect()),
            None => Ok(Vec::new()),
        }
    }

    fn record(&self, client: &MnemoClient, path: &str) -> Result<Option<MemoryRecord>> {
        let Ok(file) = MemPath::root(path) else {
            return Ok(None);
        };
        if file.to_string() != path {
            return Ok(None);
        }
        let agent = client.agent.clone();
        client.read("MnemoClient::record", move |store| {
            let index = store.index();
            if !index.policy()?.allows(&agent, &file, Access::Read) {
                return Ok(None);
            }
            index.record(&file)
        })
    }

    fn settings(&self, client: &MnemoClient) -> Result<Vec<(String, String)>> {
        if let Backend::Copy(copy) = &client.backend {
            return copy.current()?.index().settings();
        }
        let held = client.local("MnemoClient::settings")?.held()?;
        // A stopped store's index may hold a change that was never made durable: refused, as
        // every other read of it is.
        held.writer().refuse_if_stopped()?;
        held.writer().peek(|index| index.settings())
    }

    fn policy(&self, client: &MnemoClient) -> Result<Policy> {
        client.read("MnemoClient::policy", |store| store.index().policy())
    }

    fn files_at(&self, client: &MnemoClient, at: Seq) -> Result<Vec<MemoryRecord>> {
        self.settle_index(client)?;
        let everything = MemPath::absolute("/").map_err(Error::InvalidArgument)?;
        held_records(&state_at(&*client.local_store()?, at)?, &everything)
    }

    fn tree_at(
        &self,
        client: &MnemoClient,
        dir: &MemPath,
        at: Option<Seq>,
    ) -> Result<Vec<MemoryRecord>> {
        self.past_or_now(client, at, |store| {
            crate::audit::history::records_at(store, dir, at)
        })
    }

    fn listing(&self, client: &MnemoClient, dir: &MemPath, at: Option<Seq>) -> Result<Listing> {
        // Now, from the index's file heads alone: a listing reads no content, so it costs the
        // number of files, not their bytes, and a file whose stored bytes are damaged is still
        // listed (as the memory tool's directory view lists it). After a seq, from the replayed
        // tree, which holds its content in memory anyway.
        if at.is_none() {
            let entries =
                client.read_local(|store| store.current_index()?.file_entries_under(dir))?;
            return Ok(listing_of_entries(dir.to_string(), &entries));
        }
        let records = self.tree_at(client, dir, at)?;
        Ok(listing_of(dir.to_string(), at.map(|at| at.0), &records))
    }

    fn content_at(
        &self,
        client: &MnemoClient,
        file: &MemPath,
        at: Option<Seq>,
    ) -> Result<Option<String>> {
        Ok(self
            .past_or_now(client, at, |store| {
                crate::audit::history::record_at(store, file, at)
            })?
            .map(|r| r.content))
    }

    fn log(&self, client: &MnemoClient, query: &LogQuery) -> Result<Vec<LoggedEvent>> {
        self.settle_index(client)?;
        let mut events = Vec::new();
        select_events(&*client.local_store()?, query, |listed| {
            events.push(listed_event(listed));
            Ok::<(), Error>(())
        })?;
        Ok(events)
    }

    fn history(&self, client: &MnemoClient, path: &MemPath) -> Result<Vec<HistoryEvent>> {
        self.settle_index(client)?;
        let mut events = Vec::new();
        for trail in crate::audit::lineage::trails(&*client.local_store()?, path)? {
            for event in &trail.events {
                events.push(crate::audit::lineage::trail_event(&trail, event));
            }
        }
        Ok(events)
    }

    fn show(&self, client: &MnemoClient, seq: Seq) -> Result<ShownEvent> {
        self.settle_index(client)?;
        Ok(crate::audit::inspect::show(&*client.local_store()?, seq)?.to_protocol())
    }

    fn diff(
        &self,
        client: &MnemoClient,
        from: Seq,
        to: Seq,
        dir: &MemPath,
    ) -> Result<Vec<FileDiff>> {
        self.settle_index(client)?;
        crate::audit::inspect::diff(&*client.local_store()?, from, to, dir)
    }

    fn trace(&self, client: &MnemoClient, seq: Seq, file: Option<&MemPath>) -> Result<TraceReport> {
        self.settle_index(client)?;
        crate::audit::trace::trace(&*client.local_store()?, seq, file)
    }

    fn tokens(&self, client: &MnemoClient) -> Result<Vec<TokenInfo>> {
        self.settle_index(client)?;
        let store = client.local_store()?;
        let records = store.current_index()?.tokens()?;
        Ok(listed(&store, records)?
            .iter()
            .map(Listed::to_protocol)
            .collect())
    }

    fn issue_token(
        &self,
        client: &MnemoClient,
        agent: &str,
        label: &str,
    ) -> Result<(Receipt, Option<String>)> {
        let issued = issue(client, agent, label)?;
        let text = (!issued.receipt.is_error).then(|| issued.token.text().to_string());
        Ok((issued.receipt, text))
    }

    fn revoke_token(&self, client: &MnemoClient, id: &str) -> Result<Receipt> {
        revoke(client, id)
    }

    fn redact(
        &self,
        client: &MnemoClient,
        operator: &str,
        reason: &str,
        selection: &Selection,
    ) -> Result<Redacted> {
        client.closed_for("the store is being redacted", |path| {
            redact(path, operator, reason, selection)
        })
    }

    fn redaction_plan(&self, client: &MnemoClient, selection: &Selection) -> Result<Plan> {
        client.read_local(|store| plan(store, selection))
    }

    fn revert_plan(&self, client: &MnemoClient, scope: &RevertScope) -> Result<RevertPlan> {
        revert::planned(client, scope)
    }

    fn revert(&self, client: &MnemoClient, scope: &RevertScope, force: bool) -> Result<Reverted> {
        revert::reverted(client, scope, force)
    }
}

/// A store a `mnemo serve` holds: every operation through the server's routes, as the client's
/// agent.
#[cfg(feature = "client")]
mod served {
    use serde_json::Value;

    use super::StoreAccess;
    use crate::audit::history::LogQuery;
    use crate::audit::verify::Report;
    use crate::client::redact::{Plan, Redacted, Selection, admin_post, unexpected};
    use crate::client::remote::{Answering, RemoteClient, RemoteError};
    use crate::client::revert::{RevertPlan, RevertScope, Reverted};
    use crate::client::store_failures::Answered;
    use crate::client::token::check_id;
    use crate::client::{Forward, MnemoClient, Served};
    use crate::error::{Error, Result};
    use crate::model::event::{Body, Seq};
    use crate::model::paths::MemPath;
    use crate::model::policy::{AdminCommand, Policy};
    use crate::model::protocol::{
        FileDiff, HistoryEvent, Listing, LoggedEvent, ShownEvent, TokenInfo, TraceReport,
    };
    use crate::model::tool::{Limits, Profile};
    use crate::store::log::Head;
    use crate::store::projection::MemoryRecord;
    use crate::store::writer::Receipt;

    /// The operator's admin routes that plan first.
    const REDACT: &str = "/v1/redact";
    const REVERT: &str = "/v1/revert";

    impl Served {
        /// The server, acting as `client`'s agent.
        fn as_agent(&self, client: &MnemoClient) -> RemoteClient {
            self.remote.with_agent(client.agent_id().to_string())
        }
    }

    impl StoreAccess for Served {
        fn server_url(&self) -> Option<&str> {
            Some(self.remote.url())
        }

        /// Nothing to do: the server's reads write the index changes first.
        fn settle_index(&self, _: &MnemoClient) -> Result<()> {
            Ok(())
        }

        fn head(&self, client: &MnemoClient) -> Result<Head> {
            Ok(self.as_agent(client).head()?)
        }

        /// A server's verification reports no progress.
        fn verify(
            &self,
            client: &MnemoClient,
            expect: Option<Head>,
            _: &mut dyn FnMut(u64, u64),
        ) -> Result<Report> {
            Ok(self.as_agent(client).verify_report(expect.as_ref())?)
        }

        /// A grant or a revoke, through `/v1/acl`, and a setting, through the server's settings
        /// route; any other call needs the store in this process.
        fn call(&self, client: &MnemoClient, _: Option<String>, body: Body) -> Result<Receipt> {
            let remote = self.as_agent(client);
            let change = match &body {
                Body::Admin(AdminCommand::Grant {
                    agent,
                    prefix,
                    access,
                }) => serde_json::json!({
                    "action": "grant", "agent": agent, "prefix": prefix, "access": access.name(),
                }),
                Body::Admin(AdminCommand::Revoke { agent, prefix }) => {
                    serde_json::json!({"action": "revoke", "agent": agent, "prefix": prefix})
                }
                Body::Admin(AdminCommand::Configure { name, value }) => {
                    return Ok(remote.configure(name, value)?);
                }
                Body::Admin(_) => {
                    return Err(self.not_local(
                        "a token change through MnemoClient (`mnemo token` and POST /v1/tokens make one through the server)",
                    ));
                }
                _ => {
                    return Err(self.not_local(
                        "MnemoClient::call (memory-tool calls go through MnemoMemoryToolServer::handle, which forwards them to the server)",
                    ));
                }
            };
            Ok(remote.acl(&change)?)
        }

        fn forward(
            &self,
            client: &MnemoClient,
            call: Forward<'_>,
            root: &str,
            profile: Profile,
            limits: Limits,
        ) -> Option<std::result::Result<Answered, Value>> {
            let answering = Answering {
                root: root.to_string(),
                profile,
                limits,
                durability: client.durability(),
            };
            Some(forward_to(&self.as_agent(client), call, &answering))
        }

        fn records_by_tag(&self, client: &MnemoClient, tag: &str) -> Result<Vec<MemoryRecord>> {
            Ok(self.as_agent(client).records_by_tag(tag)?)
        }

        fn record(&self, client: &MnemoClient, path: &str) -> Result<Option<MemoryRecord>> {
            Ok(self.as_agent(client).record(path)?)
        }

        fn settings(&self, client: &MnemoClient) -> Result<Vec<(String, String)>> {
            Ok(self.as_agent(client).settings()?)
        }

        fn policy(&self, client: &MnemoClient) -> Result<Policy> {
            Ok(self.as_agent(client).policy()?)
        }

        fn files_at(&self, client: &MnemoClient, at: Seq) -> Result<Vec<MemoryRecord>> {
            Ok(self.as_agent(client).tree_at(&MemPath::top(), Some(at))?)
        }

        fn tree_at(
            &self,
            client: &MnemoClient,
            dir: &MemPath,
            at: Option<Seq>,
        ) -> Result<Vec<MemoryRecord>> {
            Ok(self.as_agent(client).tree_at(dir, at)?)
        }

        fn listing(&self, client: &MnemoClient, dir: &MemPath, at: Option<Seq>) -> Result<Listing> {
            Ok(self.as_agent(client).listing(dir, at)?)
        }

        fn content_at(
            &self,
            client: &MnemoClient,
            file: &MemPath,
            at: Option<Seq>,
        ) -> Result<Option<String>> {
            Ok(self.as_agent(client).content_at(file, at)?)
        }

        fn log(&self, client: &MnemoClient, query: &LogQuery) -> Result<Vec<LoggedEvent>> {
            Ok(self.as_agent(client).log(query)?)
        }

        fn history(&self, client: &MnemoClient, path: &MemPath) -> Result<Vec<HistoryEvent>> {
            Ok(self.as_agent(client).history(path)?)
        }

        fn show(&self, client: &MnemoClient, seq: Seq) -> Result<ShownEvent> {
            Ok(self.as_agent(client).show(seq)?)
        }

        fn diff(
            &self,
            client: &MnemoClient,
            from: Seq,
            to: Seq,
            dir: &MemPath,
        ) -> Result<Vec<FileDiff>> {
            Ok(self.as_agent(client).diff(from, to, dir)?)
        }

        fn trace(
            &self,
            client: &MnemoClient,
            seq: Seq,
            file: Option<&MemPath>,
        ) -> Result<TraceReport> {
            Ok(self.as_agent(client).trace(seq, file)?)
        }

        fn tokens(&self, client: &MnemoClient) -> Result<Vec<TokenInfo>> {
            Ok(self.as_agent(client).tokens()?)
        }

        fn issue_token(
            &self,
            client: &MnemoClient,
            agent: &str,
            label: &str,
        ) -> Result<(Receipt, Option<String>)> {
            self.as_agent(client)
                .issue_token(agent, label)
                .map_err(turned_away)
        }

        fn revoke_token(&self, client: &MnemoClient, id: &str) -> Result<Receipt> {
            check_id(id).map_err(Error::InvalidArgument)?;
            self.as_agent(client).revoke_token(id).map_err(turned_away)
        }

        /// Through `POST /v1/redact`, which records who asked (not `operator`).
        fn redact(
            &self,
            client: &MnemoClient,
            _operator: &str,
            reason: &str,
            selection: &Selection,
        ) -> Result<Redacted> {
            let remote = self.as_agent(client);
            let mut body = selection.to_json();
            body["reason"] = reason.into();
            let answer = admin_post(&remote, REDACT, &body)?;
            let plan = Plan::from_json(&answer);
            match (plan, answer["seq"].as_u64()) {
                (Some(plan), Some(seq)) => Ok(Redacted {
                    plan,
                    seq: Seq(seq),
                }),
                _ => Err(unexpected(&remote, REDACT, "a redaction", &answer)),
            }
        }

        fn redaction_plan(&self, client: &MnemoClient, selection: &Selection) -> Result<Plan> {
            let remote = self.as_agent(client);
            let mut body = selection.to_json();
            body["dry_run"] = true.into();
            let answer = admin_post(&remote, REDACT, &body)?;
            Plan::from_json(&answer)
                .ok_or_else(|| unexpected(&remote, REDACT, "a redaction", &answer))
        }

        fn revert_plan(&self, client: &MnemoClient, scope: &RevertScope) -> Result<RevertPlan> {
            let remote = self.as_agent(client);
            let mut body = scope.to_json();
            body["dry_run"] = true.into();
            let answer = admin_post(&remote, REVERT, &body)?;
            RevertPlan::from_json(&answer)
                .ok_or_else(|| unexpected(&remote, REVERT, "a revert", &answer))
        }

        /// Through `POST /v1/revert`, recorded under who asked.
        fn revert(
            &self,
            client: &MnemoClient,
            scope: &RevertScope,
            force: bool,
        ) -> Result<Reverted> {
            let remote = self.as_agent(client);
            let mut body = scope.to_json();
            body["force"] = force.into();
            let answer = admin_post(&remote, REVERT, &body)?;
            Reverted::from_json(&answer)
                .ok_or_else(|| unexpected(&remote, REVERT, "a revert", &answer))
        }
    }

    /// `call` sent to `remote`'s server (see [`MnemoClient::forward`]).
    fn forward_to(
        remote: &RemoteClient,
        call: Forward<'_>,
        answering: &Answering,
    ) -> std::result::Result<Answered, Value> {
        let sent = match call {
            Forward::Line(bytes) => remote.memory_answering(bytes, answering),
            Forward::TooLarge(digest, id) => {
                remote.oversized_answering(digest, id, false, answering)
            }
            Forward::Stopped(digest, id) => remote.oversized_answering(digest, id, true, answering),
        };
        let answer = sent.and_then(|told| {
            let result = serde_json::from_slice(&told.body).map_err(|e| RemoteError::Protocol {
                url: remote.url().to_string(),
                why: e.to_string(),
            })?;
            Ok(Answered {
                result,
                after: told.after,
            })
        });
        answer.map_err(|e| {
            let id = match call {
                Forward::Line(bytes) => crate::model::tool::request::tool_use_id(bytes),
                Forward::TooLarge(_, id) | Forward::Stopped(_, id) => id.map(str::to_string),
            };
            // A refusal says the call was not applied; any other failure, that it may have been.
            crate::client::discovery::unanswered(id.as_deref(), &e)
        })
    }

    /// A token change the server turned away before the store saw it (an agent, label or id
    /// that is not valid, an unknown id, one already revoked): the [`Error::InvalidArgument`]
    /// the same change gets on a store open in this process.
    fn turned_away(e: RemoteError) -> Error {
        match e {
            RemoteError::Refused {
                status: 400 | 404 | 409,
                reason,
                ..
            } => Error::InvalidArgument(reason),
            other => other.into(),
        }
    }
}
