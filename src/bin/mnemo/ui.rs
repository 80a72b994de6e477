//! `mnemo ui`: a one-time login link to the web viewer of the server that holds a store.

use std::path::Path;

use crate::CliResult;

/// Finds (or, for one store, starts) the server, asks it for a login link and prints it.
pub(crate) fn run_ui(db: &Path, data: Option<&Path>, open: bool, idle_exit: f64) -> CliResult {
    use mnemo::ServerFile;

    // A server file this user may not read is another user's server: say so, rather than
    // start a server that cannot open the store either.
    let dir = data.unwrap_or(db);
    if let Err(e) = ServerFile::read(dir) {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            return Err(format!(
                "cannot read the server file of {} ({e}): the viewer's login is for the user who owns the store; run `mnemo ui` as that user",
                dir.display()
            )
            .into());
        }
    }
    let file = match data {
        Some(dir) => ServerFile::find(dir)?.ok_or_else(|| {
            format!(
                "no server serves the data directory {}; start one with `mnemo serve --data {}`",
                dir.display(),
                dir.display()
            )
        })?,
        None => {
            if ServerFile::find(db)?.is_none() {
                if let Some(why) = crate::connect::unservable(db) {
                    return Err(why.into());
                }
                if !db.is_dir() {
                    return Err(format!(
                        "no store at {}; give --db the store directory (or --data a served data directory)",
                        db.display()
                    )
                    .into());
                }
                let args = vec!["--idle-exit".into(), idle_exit.to_string().into()];
                // Starts the server, which then holds the store.
                crate::connect::starting(mnemo::MnemoClient::builder(db), args)?.server()?;
            }
            ServerFile::find(db)?.ok_or_else(|| {
                format!(
                    "the server of {} went away; run `mnemo ui` again",
                    db.display()
                )
            })?
        }
    };
    let secret = mnemo::RemoteClient::new(file.url.as_str(), file.token.as_str()).login_secret()?;
    let link = format!("{}/ui/#login={secret}", file.url);
    crate::print::say_once(&link, "the login link", "run `mnemo ui` again for another")?;
    crate::print::tell(format_args!(
        "mnemo ui: the link logs in once, within two minutes; run `mnemo ui` again for another"
    ));
    if open {
        open_privately(&link);
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// The prefix of the private directories `--open` hands the browser a page in.
const OPEN_DIR_PREFIX: &str = "mnemo-ui-";

/// How long such a directory is kept: past it, the link it holds is dead (`LINK_LIFE`, two
/// minutes) and the next `mnemo ui --open` removes it.
const OPEN_DIR_LIFE: std::time::Duration = std::time::Duration::from_secs(600);

/// Opens `link` in the browser without putting its secret on a command line (every local user
/// reads `/proc/PID/cmdline`): the opener is given a page in a directory only this user may
/// read, which sends the browser on to the link.
fn open_privately(link: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    sweep_open_dirs();
    let page = tempfile::Builder::new()
        .prefix(OPEN_DIR_PREFIX)
        .tempdir()
        .and_then(|dir| {
            let page = dir.path().join("open.html");
            // The link is an http URL of hex, digits and punctuation: nothing to escape.
            let html = format!(
                "<!doctype html><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" content=\"0;url={link}\"><title>mnemo viewer</title><p><a href=\"{link}\">Open the mnemo viewer</a></p>\n"
            );
            std::fs::write(&page, html)?;
            // Kept for the browser to read; a later `mnemo ui --open` removes it.
            let _ = dir.keep();
            Ok(page)
        });
    let page = match page {
        Ok(page) => page,
        Err(e) => {
            crate::print::tell(format_args!(
                "mnemo ui: could not write the page that opens the viewer ({e}); open the link yourself"
            ));
            return;
        }
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(&page)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        crate::print::tell(format_args!(
            "mnemo ui: could not run {opener} ({e}); open the link yourself"
        ));
    }
}

/// Removes this user's `--open` directories older than [`OPEN_DIR_LIFE`] (their links are long
/// dead); one that is not a real directory of this user's is left alone.
fn sweep_open_dirs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    let me = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(OPEN_DIR_PREFIX)
        {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > OPEN_DIR_LIFE);
        if meta.is_dir() && meta.uid() == me && old {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
