//! Whom a client trusts: a store only its owner can read, a server file only its owner wrote, a
//! server that proves it holds this very store before a token is sent, and an explicit `--db`
//! that the environment cannot redirect.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mnemo::testing::discovery::{ServerFile, identity_proof, live_server};
use serde_json::Value;

use super::{db_arg, mnemo, server_of, signal, stop_server, wait_for};
use crate::support::{TempStore, is_root, mnemo_bin, skip};

/// A create call and a view call of `/memories/NAME.txt`, as lines for `mnemo tool`.
fn create_line(name: &str) -> String {
    format!(
        "{{\"command\":\"create\",\"path\":\"/memories/{name}.txt\",\"file_text\":\"{name}\"}}\n"
    )
}

/// The `content` of each `tool_result` line `mnemo tool` printed.
fn contents(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).expect("a tool_result line");
            value["content"].as_str().expect("content").to_string()
        })
        .collect()
}

/// The files `mnemo ls --db DB /memories` lists (through the server that holds it, if any).
fn listed(db: &Path) -> String {
    let out = mnemo(&["ls", "--db", db_arg(db), "/memories"], &[], b"");
    assert!(out.status.success(), "ls: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A process that listens where a mnemo server did, answering every request with a forged
/// `tool_result`, and the proof of `proves` (a token and a store directory) on the identity
/// route, or a wrong one. It records each request's first line and whether it carried an
/// `Authorization` header.
struct Squatter {
    address: SocketAddr,
    seen: Arc<Mutex<Vec<(String, bool)>>>,
    stop: Arc<AtomicBool>,
}

impl Squatter {
    fn listen(at: SocketAddr, proves: Option<(String, PathBuf)>) -> Squatter {
        let listener = TcpListener::bind(at).expect("bind the squatter");
        let address = listener.local_addr().expect("address");
        listener.set_nonblocking(true).expect("nonblocking");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, halt) = (Arc::clone(&seen), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !halt.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = answer(stream, proves.as_ref(), &log);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Squatter {
            address,
            seen,
            stop,
        }
    }

    /// The requests seen so far.
    fn seen(&self) -> Vec<(String, bool)> {
        self.seen.lock().expect("lock").clone()
    }
}

impl Drop for Squatter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Answers one connection of the squatter (one request; the connection is closed after it).
fn answer(
    stream: TcpStream,
    proves: Option<&(String, PathBuf)>,
    log: &Mutex<Vec<(String, bool)>>,
) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut first = String::new();
    reader.read_line(&mut first)?;
    let mut authorized = false;
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        let lower = line.to_ascii_lowercase();
        authorized |= lower.starts_with("authorization:");
        if let Some(n) = lower.strip_prefix("content-length:") {
            length = n.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    std::io::Read::read_exact(&mut reader, &mut body)?;
    log.lock()
        .expect("lock")
        .push((first.trim().to_string(), authorized));
    let body = match first.split_whitespace().nth(1) {
        Some(target) if target.starts_with("/v1/identity") => {
            let challenge = target.split("challenge=").nth(1).unwrap_or_default();
            match proves {
                Some((token, dir)) => {
                    let dir = mnemo::testing::disk::DirId::of(dir).expect("stat the store");
                    identity_proof(token, challenge, dir).to_hex().to_string()
                }
                None => "00".repeat(32),
            }
        }
        _ => r#"{"type":"tool_result","tool_use_id":"x","content":"FORGED"}"#.to_string(),
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// A squatter that knows the token it names (`byte` 32 times, in hex) and proves it for `db`,
/// and a server file naming it.
fn proving_squatter(db: &Path, byte: &str) -> (Squatter, ServerFile) {
    let token = byte.repeat(32);
    let squatter = Squatter::listen(
        "127.0.0.1:0".parse().expect("addr"),
        Some((token.clone(), db.to_path_buf())),
    );
    let file = ServerFile {
        url: format!("http://{}", squatter.address),
        address: squatter.address,
        pid: std::process::id(),
        token,
        socket: None,
    };
    (squatter, file)
}

/// Writes `file` as the server file of `db` by hand, mode `mode`.
fn plant(db: &Path, file: &ServerFile, mode: u32) {
    let path = ServerFile::path(db);
    let _ = std::fs::remove_file(&path);
    std::fs::write(&path, serde_json::to_vec(file).expect("json")).expect("plant");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

/// A store with one file, made by `mnemo tool` in its own process (no server left running).
fn made_store(s: &TempStore) -> PathBuf {
    let db = s.path();
    let out = crate::support::run_mnemo_env(
        &["tool", "--db", db_arg(&db)],
        &[("MNEMO_NO_START", "1")],
        create_line("first").as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    db
}

/// Before: a new store took the umask, so under umask 000 (usual for services and containers)
/// the directory was 0777 and `db` 0666: any local user read every memory, or planted files.
/// Now a new store is its owner's alone whatever the umask, and so is an empty directory made
/// for it.
#[test]
fn a_new_store_is_its_owners_alone_whatever_the_umask() {
    let s = TempStore::new();
    let fresh = s.dir.path().join("fresh");
    let premade = s.dir.path().join("premade");
    std::fs::create_dir(&premade).expect("an empty directory");
    std::fs::set_permissions(&premade, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    for db in [&fresh, &premade] {
        let script = format!(
            "umask 000 && exec \"$0\" tool --db '{}' --no-start",
            db.display()
        );
        let mut command = Command::new("sh");
        command.args(["-c", &script, mnemo_bin()]);
        let out = crate::support::run_command(command, create_line("secret").as_bytes());
        assert!(out.status.success(), "{out:?}");
        let mut todo = vec![db.clone()];
        let mut files = 0;
        while let Some(dir) = todo.pop() {
            let mode = std::fs::metadata(&dir).expect("stat").mode() & 0o777;
            assert_eq!(mode, 0o700, "{dir:?} is open to others");
            for entry in std::fs::read_dir(&dir).expect("list") {
                let entry = entry.expect("entry");
                let meta = entry.metadata().expect("stat");
                if meta.is_dir() {
                    todo.push(entry.path());
                } else {
                    // sled's snapshots too (it makes them with the process's umask, which the
                    // command line sets to 077).
                    files += 1;
                    assert_eq!(
                        meta.mode() & 0o077,
                        0,
                        "{:?} is open to others: {:o}",
                        entry.path(),
                        meta.mode() & 0o777
                    );
                }
            }
        }
        assert!(
            files >= 4,
            "db, conf, a snapshot and the head record were checked"
        );
    }
}

/// Before: a server killed with `kill -9` left its file, and a client trusted any process at its
/// address while a process with its pid existed: another local user who got the pid and bound
/// the port received the owner's calls and operator token, and forged the answers. Now the
/// server must prove it holds the token before the token is sent; the squatter sees no token,
/// and the client starts a real server, whose answers are the store's.
#[test]
fn a_squatter_on_a_dead_servers_port_gets_no_token_and_forges_no_answer() {
    let s = TempStore::new();
    let db = made_store(&s);
    let mut server = Command::new(mnemo_bin())
        .args(["serve", "--db", db_arg(&db)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let file = server_of(&db);
    signal("-KILL", file.pid);
    let _ = server.wait();
    // The pid is taken again (this test's own), and the port too.
    let stale = ServerFile {
        pid: std::process::id(),
        ..file.clone()
    };
    plant(&db, &stale, 0o600);
    let squatter = Squatter::listen(file.address, None);
    assert!(stale.is_live(), "the squatter looks live by pid and port");
    assert!(live_server(&db).is_none(), "but proves nothing");

    let out = mnemo(
        &["tool", "--db", db_arg(&db), "--idle-exit", "1"],
        &[],
        b"{\"command\":\"view\",\"path\":\"/memories/first.txt\"}\n",
    );
    assert!(out.status.success(), "{out:?}");
    let answers = contents(&out.stdout);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(
        answers[0].contains("first") && !answers[0].contains("FORGED"),
        "the answer is the store's: {answers:?}"
    );
    let seen = squatter.seen();
    assert!(
        seen.iter()
            .all(|(line, authorized)| !authorized
                && (line.is_empty() || line.contains("/v1/identity"))),
        "the squatter got only connection probes and unauthenticated challenges: {seen:?}"
    );
    stop_server(&db);
}

/// The squatter of the test above, but one that knows the token: the client would trust it, so
/// the test above fails for the right reason (the proof), not for a broken squatter.
#[test]
fn a_server_that_proves_the_token_for_this_store_is_trusted() {
    let s = TempStore::new();
    let db = made_store(&s);
    let (_squatter, file) = proving_squatter(&db, "ab");
    plant(&db, &file, 0o600);
    assert_eq!(live_server(&db), Some(file.clone()));
    // A file open to others is not trusted, whoever wrote it.
    plant(&db, &file, 0o644);
    assert!(live_server(&db).is_none(), "a server file readable by all");
    let err = ServerFile::read(&db).expect_err("refused");
    assert!(err.to_string().contains("not trusted"), "{err}");
}

/// Before: under umask 000 the store directory was 0777, and another user renamed a server
/// file of their own over the real one: every client sent its calls and the operator token to
/// that user's server. Now a server file not owned by the store directory's owner is refused,
/// even one naming a server that proves the token it names.
#[test]
fn a_server_file_planted_by_another_user_is_refused() {
    if !is_root() {
        skip(
            "a_server_file_planted_by_another_user_is_refused",
            "giving a file to another user needs root",
        );
        return;
    }
    let s = TempStore::new();
    let db = made_store(&s);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o777)).expect("an open dir");
    let (squatter, file) = proving_squatter(&db, "cd");
    plant(&db, &file, 0o600);
    assert_eq!(live_server(&db), Some(file.clone()), "the owner's own file");
    std::os::unix::fs::lchown(ServerFile::path(&db), Some(65534), Some(65534)).expect("chown");
    assert!(live_server(&db).is_none(), "another user's file");
    let err = ServerFile::read(&db).expect_err("refused");
    assert!(err.to_string().contains("uid 65534"), "{err}");

    let out = mnemo(
        &["tool", "--db", db_arg(&db), "--idle-exit", "1"],
        &[],
        create_line("second").as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        contents(&out.stdout),
        ["File created successfully at: /memories/second.txt"]
    );
    assert!(
        squatter.seen().iter().all(|(_, authorized)| !authorized),
        "no token reached the planted server: {:?}",
        squatter.seen()
    );
    let now = ServerFile::read(&db)
        .expect("read")
        .expect("the real server's file");
    assert_ne!(now.address, squatter.address, "the real server replaced it");
    stop_server(&db);
}

/// Before: a copy of a served store (`cp -a` for a backup) carried the server file, so every
/// client of the copy talked to the original's server: writes meant for the copy landed in the
/// original, and `verify --db COPY` reported the original. Now the server proves which
/// directory it serves, and the copy gets a server of its own.
#[test]
fn a_copy_of_a_served_store_is_not_served_by_the_originals_server() {
    let s = TempStore::new();
    let original = made_store(&s);
    let mut server = Command::new(mnemo_bin())
        .args(["serve", "--db", db_arg(&original)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let file = server_of(&original);
    let copy = s.dir.path().join("copy");
    let copied = Command::new("cp")
        .args(["-a", db_arg(&original), db_arg(&copy)])
        .status()
        .expect("cp");
    assert!(copied.success());
    assert_eq!(
        ServerFile::read(&copy).expect("read"),
        Some(file.clone()),
        "the copy carries the original's server file"
    );
    assert!(
        live_server(&copy).is_none(),
        "which does not serve the copy"
    );

    let out = mnemo(
        &["tool", "--db", db_arg(&copy), "--idle-exit", "1"],
        &[],
        create_line("copied").as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        listed(&copy).contains("copied.txt"),
        "the write is the copy's"
    );
    assert!(
        !listed(&original).contains("copied.txt"),
        "the original has no write meant for the copy"
    );
    let verified = mnemo(&["verify", "--db", db_arg(&copy), "--json"], &[], b"");
    let report: Value = serde_json::from_slice(&verified.stdout).expect("json");
    // The copy's own log: one call by `made_store`, one by the write above, and the `ls` above.
    assert!(
        report["events"].as_u64() > Some(1),
        "verify reports the copy: {report}"
    );
    stop_server(&copy);
    signal("-TERM", file.pid);
    let _ = server.wait();
    wait_for(
        || !ServerFile::path(&original).exists(),
        "the original's server to stop",
    );
}

/// Before (found by an adversary): the server stated the path it was started on afresh for each
/// proof, so after `mv store store.orig && cp -a store.orig store` the server still holding
/// `store.orig` proved itself for the copy at `store`, and the copy's clients wrote into the
/// original. Now the server proves the directory it has open, and the copy gets its own.
#[test]
fn a_copy_moved_into_a_served_stores_place_is_not_served_by_the_moved_stores_server() {
    let s = TempStore::new();
    let original = made_store(&s);
    let mut server = Command::new(mnemo_bin())
        .args(["serve", "--db", db_arg(&original)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let file = server_of(&original);
    let moved = s.dir.path().join("moved-aside");
    std::fs::rename(&original, &moved).expect("move the served store aside");
    let copied = Command::new("cp")
        .args(["-a", db_arg(&moved), db_arg(&original)])
        .status()
        .expect("cp");
    assert!(copied.success());
    assert!(
        live_server(&original).is_none(),
        "the moved store's server does not serve the copy at its old path"
    );
    let out = mnemo(
        &["tool", "--db", db_arg(&original), "--idle-exit", "1"],
        &[],
        create_line("copied").as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    stop_server(&original);
    signal("-TERM", file.pid);
    let _ = server.wait();
    assert!(
        listed(&original).contains("copied.txt"),
        "the write is the copy's"
    );
    assert!(
        !listed(&moved).contains("copied.txt"),
        "the moved store has no write meant for the copy"
    );
}

/// Before: `MNEMO_URL` and `MNEMO_TOKEN` in the environment silently overrode an explicit
/// `--db`, so writes and audits meant for store B landed in store A. Now an explicit `--db`
/// wins (with a note), and `--db` with `--connect` on one command line is refused.
#[test]
fn an_explicit_db_wins_over_a_server_named_by_the_environment() {
    let s = TempStore::new();
    let a = made_store(&s);
    let b = s.dir.path().join("b");
    let mut server = Command::new(mnemo_bin())
        .args(["serve", "--db", db_arg(&a)])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("serve");
    let file = server_of(&a);
    let env = [
        ("MNEMO_URL", file.url.as_str()),
        ("MNEMO_TOKEN", &file.token),
    ];
    // Without --db, the environment's server is used as before: A has two events now.
    let out = mnemo(&["tool"], &env, create_line("meant-for-a").as_bytes());
    assert!(out.status.success(), "{out:?}");
    assert!(listed(&a).contains("meant-for-a"), "{out:?}");
    let out = mnemo(
        &["tool", "--db", db_arg(&b), "--no-start"],
        &env,
        create_line("meant-for-b").as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MNEMO_URL"),
        "the note says the environment was set aside: {out:?}"
    );
    assert!(!listed(&a).contains("meant-for-b"), "A got B's write");
    let verified = mnemo(&["verify", "--db", db_arg(&b), "--json"], &env, b"");
    let report: Value = serde_json::from_slice(&verified.stdout).expect("json");
    assert_eq!(
        report["events"].as_u64(),
        Some(1),
        "verify reports B: {report}"
    );
    let out = mnemo(&["verify", "--json"], &env, b"");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        report["events"].as_u64(),
        Some(2),
        "A through its server: {report}"
    );
    // Both on the command line name two places.
    let out = mnemo(
        &[
            "verify",
            "--db",
            db_arg(&b),
            "--connect",
            &file.url,
            "--token",
            &file.token,
        ],
        &[],
        b"",
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("two places"),
        "{out:?}"
    );
    signal("-TERM", file.pid);
    let _ = server.wait();
}
