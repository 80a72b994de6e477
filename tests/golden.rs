//! Golden vectors: fixed events to fixed bytes and hashes, frozen against format drift.
//!
//! Every expected hex string below was computed once by running the crate and pasted here; any
//! change to the encoding (field order, integer widths, option tags, enum indices, the chain-hash
//! formula) changes at least one of them and is a new format version. The vectors of format 1
//! (events answered under semantics 1, as the builds before semantics versions wrote them) stay as they were pasted
//! then: this build still writes and reads those bytes. Format 2 (semantics 2) has vectors of its
//! own, and so do formats 3 and 4 (format 4: salted, its payload hash a commitment keyed by the
//! event's salt, the salt stored after the header). Independently of those
//! pasted values, [`every_vector_matches_the_documented_byte_table`] rebuilds each header, payload,
//! stored record and chain hash by hand from the byte tables of `docs/formats.md`, so the
//! docs and the code cannot drift apart either.

use mnemo::Profile;
use mnemo::event::{Frame, InputDigest, Refusal, RejectedDigest, Salt};
use mnemo::testing::event::{
    DOMAIN_TAG, FORMAT_VERSION, PAYLOAD_TAG, RESULT_TAG, SALTED_FORMAT, WRITTEN_FORMAT, chain_hash,
};
use mnemo::tool::{Command, Limits, Semantics};
use mnemo::{
    Access, AdminCommand, Body, Error, Event, EventHash, Header, Outcome, RejectedCall, Seq,
    ToolCall,
};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn tool(command: Command) -> Body {
    Body::Tool(ToolCall {
        root: "/memories".into(),
        profile: Profile::Spec,
        limits: Limits::default(),
        command,
    })
}

/// A fixed event: seq `seq`, a recognisable non-zero `prev_hash` (`seq` repeated), a fixed time.
fn fixed(seq: u64, tool_use_id: Option<&str>, outcome: Outcome, body: Body) -> Event {
    let fill = u8::try_from(seq).expect("fixture seqs are small");
    Event {
        seq: Seq(seq),
        prev_hash: EventHash([fill; 32]),
        header: Header {
            time_ms: 1_760_000_000_000 + seq,
            agent: "agent-a".into(),
            tool_use_id: tool_use_id.map(str::to_string),
            outcome,
            semantics: Semantics::V1,
        },
        body,
        salt: None,
    }
}

/// The salt of fixture event `seq` in format 4: recognisable, distinct per seq.
fn salt_of(seq: u64) -> Salt {
    let fill = u8::try_from(seq).expect("fixture seqs are small");
    Salt([0x80 | fill; 32])
}

/// `events` in format 4: answered under semantics 3 and salted with [`salt_of`] their seq. The
/// outcomes are kept as they are (these vectors freeze the encoding, not the semantics).
fn salted(events: Vec<Event>) -> Vec<Event> {
    salted_in(Semantics::V3, events)
}

/// `events` answered under `semantics` and salted with [`salt_of`] their seq: format 4 for
/// semantics 3, format 6 for semantics 4.
fn salted_in(semantics: Semantics, mut events: Vec<Event>) -> Vec<Event> {
    for event in &mut events {
        event.header.semantics = semantics;
        event.salt = Some(salt_of(event.seq.0));
    }
    events
}

/// Every version of the semantics an unsalted event may be answered under (semantics 4 is
/// only ever salted).
fn unsalted_semantics() -> impl Iterator<Item = Semantics> {
    Semantics::ALL.into_iter().filter(|s| *s <= Semantics::V3)
}

/// The fixtures answered under `semantics`: the same events, in its format.
fn fixtures_in(semantics: Semantics) -> Vec<(&'static str, Event)> {
    let mut out = fixtures();
    for (_, event) in &mut out {
        event.header.semantics = semantics;
    }
    out
}

/// One fixture per Body/Command variant (and option arm), in a fixed order, answered under
/// semantics 1 (format 1). The outcome texts are fixed strings, not necessarily what the server
/// would answer: these vectors freeze the encoding, not the semantics.
fn fixtures() -> Vec<(&'static str, Event)> {
    vec![
        (
            "view without view_range",
            fixed(
                1,
                None,
                Outcome::of(
                    false,
                    "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n4.0K\t/memories",
                ),
                tool(Command::View {
                    path: "/memories".into(),
                    view_range: None,
                }),
            ),
        ),
        (
            "view with view_range",
            fixed(
                2,
                Some("toolu_01A"),
                Outcome::of(false, "     1\thello"),
                tool(Command::View {
                    path: "/memories/notes.txt".into(),
                    view_range: Some((1, -1)),
                }),
            ),
        ),
        (
            "create (multi-byte UTF-8 text)",
            fixed(
                3,
                Some("toolu_02B"),
                Outcome::of(false, "File created successfully at: /memories/notes.txt"),
                tool(Command::Create {
                    path: "/memories/notes.txt".into(),
                    file_text: "h\u{e9}llo \u{2713}\nworld\n".into(),
                }),
            ),
        ),
        (
            "str_replace with new_str",
            fixed(
                4,
                None,
                Outcome::of(false, "The memory file has been edited."),
                tool(Command::StrReplace {
                    path: "/memories/notes.txt".into(),
                    old_str: "world".into(),
                    new_str: Some("there".into()),
                }),
            ),
        ),
        (
            "str_replace without new_str",
            fixed(
                5,
                Some("toolu_03C"),
                Outcome::of(false, "The memory file has been edited."),
                tool(Command::StrReplace {
                    path: "/memories/notes.txt".into(),
                    old_str: "there".into(),
                    new_str: None,
                }),
            ),
        ),
        (
            "insert",
            fixed(
                6,
                None,
                Outcome::of(false, "The file /memories/notes.txt has been edited."),
                tool(Command::Insert {
                    path: "/memories/notes.txt".into(),
                    insert_line: 2,
                    insert_text: "mid\n".into(),
                }),
            ),
        ),
        (
            "delete",
            fixed(
                7,
                None,
                Outcome::of(false, "Successfully deleted /memories/notes.txt"),
                tool(Command::Delete {
                    path: "/memories/notes.txt".into(),
                }),
            ),
        ),
        (
            "rename",
            fixed(
                8,
                Some("toolu_04D"),
                Outcome::of(false, "Successfully renamed /memories/a to /memories/b/c"),
                tool(Command::Rename {
                    old_path: "/memories/a".into(),
                    new_path: "/memories/b/c".into(),
                }),
            ),
        ),
        (
            "tool call with an error outcome",
            fixed(
                9,
                None,
                Outcome::of(
                    true,
                    "Path /memories/../etc would escape /memories directory",
                ),
                tool(Command::View {
                    path: "/memories/../etc".into(),
                    view_range: Some((-3, 7)),
                }),
            ),
        ),
        (
            "rejected input",
            fixed(
                10,
                None,
                Outcome::of(true, "Error: The input is not valid JSON"),
                Body::Rejected(RejectedCall {
                    root: "/memories".into(),
                    profile: Profile::Spec,
                    input: "not json".into(),
                }),
            ),
        ),
        (
            "acl grant",
            fixed(
                12,
                None,
                Outcome::of(false, "Granted read on /memories/agent-2 to agent agent-2"),
                Body::Admin(AdminCommand::Grant {
                    agent: "agent-2".into(),
                    prefix: "/memories/agent-2".into(),
                    access: Access::Read,
                }),
            ),
        ),
        (
            "acl revoke",
            fixed(
                13,
                Some("toolu_06F"),
                Outcome::of(false, "Revoked the grant on / from every agent"),
                Body::Admin(AdminCommand::Revoke {
                    agent: "*".into(),
                    prefix: "/".into(),
                }),
            ),
        ),
        (
            "python-sdk profile with limits",
            fixed(
                11,
                Some("toolu_05E"),
                Outcome::of(
                    false,
                    "Here's the content of /memories/a with line numbers:\n     1\tx",
                ),
                Body::Tool(ToolCall {
                    root: "/other".into(),
                    profile: Profile::PythonSdk,
                    limits: Limits {
                        max_file_bytes: 4096,
                        view_max_chars: Some(16_000),
                        ..Limits::default()
                    },
                    command: Command::View {
                        path: "/other/a".into(),
                        view_range: None,
                    },
                }),
            ),
        ),
        (
            "rejected digest: over the request limit",
            fixed(
                14,
                None,
                Outcome::of(true, "Error: This call is 1000 bytes"),
                digest(Refusal::TooLarge { limit: 999 }),
            ),
        ),
        (
            "rejected digest: not UTF-8",
            fixed(
                15,
                None,
                Outcome::of(true, "Error: The input is not valid UTF-8"),
                digest(Refusal::NotUtf8 { valid_up_to: 7 }),
            ),
        ),
        (
            "rejected digest: invalid and long",
            fixed(
                16,
                Some("toolu_07G"),
                Outcome::of(true, "Error: Unknown command"),
                digest(Refusal::Invalid {
                    text: "Error: Unknown command".into(),
                }),
            ),
        ),
        (
            "rejected digest: content over the file limit",
            fixed(
                17,
                Some("toolu_08H"),
                Outcome::of(true, "Error: /memories/a would hold"),
                digest(Refusal::ContentTooLarge {
                    path: "/memories/a".into(),
                    field: "file_text".into(),
                    bytes: 17,
                    limit: 16,
                }),
            ),
        ),
        (
            "rejected digest: conversion stopped at the limit",
            fixed(
                18,
                None,
                Outcome::of(true, "Error: This call is over the limit"),
                digest(Refusal::Stopped { limit: 998 }),
            ),
        ),
        (
            "rejected digest: a large call that failed",
            fixed(
                19,
                Some("toolu_09I"),
                Outcome::of(true, "Error: The path /memories/a does not exist"),
                digest(Refusal::Failed {
                    command: "str_replace".into(),
                    paths: vec!["/memories/a".into()],
                    text: "Error: The path /memories/a does not exist".into(),
                }),
            ),
        ),
        (
            "token issue",
            fixed(
                19,
                None,
                Outcome::of(false, "Issued token 0123456789abcdef to agent planner"),
                Body::Admin(AdminCommand::IssueToken {
                    id: "0123456789abcdef".into(),
                    agent: "planner".into(),
                    label: "ci runner".into(),
                    hash: EventHash::of(b"mnemo_0123456789abcdef_secret"),
                }),
            ),
        ),
        (
            "token revoke",
            fixed(
                20,
                Some("toolu_09I"),
                Outcome::of(true, "Error: no token has id ffff"),
                Body::Admin(AdminCommand::RevokeToken { id: "ffff".into() }),
            ),
        ),
    ]
}

/// A digest body with a fixed input digest.
fn digest(refusal: Refusal) -> Body {
    Body::RejectedDigest(RejectedDigest {
        root: "/memories".into(),
        profile: Profile::PythonSdk,
        input: InputDigest {
            len: 1000,
            hash: EventHash::of(b"input"),
            prefix: "{\"é".into(),
        },
        refusal,
    })
}

/// (name, header hex, payload hex, chain hash hex), computed once by running the crate.
const GOLDEN: &[(&str, &str, &str, &str)] = &[
    (
        "view without view_range",
        "01c02cc89901000007000000000000006167656e742d61000075f207cc3891a286903c08c61385772456d9873506dc5ef794c451658744cf45",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000000000009000000000000002f6d656d6f7269657300",
        "e2e2242b7e049ba4d9c9508b3daf2667fd25962b30b6ba18a1e770b1f8f5b26f",
    ),
    (
        "view with view_range",
        "02c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303141001b55d23bffd0ef60892f5dc98d0b4f1d30b3b8cf5e05354a72c28e8d592c1393",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000000000013000000000000002f6d656d6f726965732f6e6f7465732e747874010100000000000000ffffffffffffffff",
        "aad804c774fdb2b5e6f30a407f84c5885b4891b27c7c3a1b9654b69337784824",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "03c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30324200374438c62bfad46ea704faa22544e2d5fc0320ca8dd1abeea376fe4d231b00f6",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000100000013000000000000002f6d656d6f726965732f6e6f7465732e747874110000000000000068c3a96c6c6f20e29c930a776f726c640a",
        "95d6c050296dac701a8648a3fc5a4cf2ea45fa57305546ce8a18bc343d060f49",
    ),
    (
        "str_replace with new_str",
        "04c02cc89901000007000000000000006167656e742d610000d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000200000013000000000000002f6d656d6f726965732f6e6f7465732e7478740500000000000000776f726c640105000000000000007468657265",
        "6a67b28c06936ce2793febb0f1910ed94a8e94ac9149227f8fd28370cd4761f1",
    ),
    (
        "str_replace without new_str",
        "05c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30334300d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000200000013000000000000002f6d656d6f726965732f6e6f7465732e7478740500000000000000746865726500",
        "c395ce5811b888bf8ca803be24e32998707104ffb664b386c03efe17cbab91a1",
    ),
    (
        "insert",
        "06c02cc89901000007000000000000006167656e742d6100003b63e55a6b1b8b35a738fe39621245cf0e95c773b4bf4078943fee6c91358eac",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000300000013000000000000002f6d656d6f726965732f6e6f7465732e747874020000000000000004000000000000006d69640a",
        "9579e87f37de09dd279c21aa1c9b5235c29d6ae6f6747dde5adcf9add1b04e8c",
    ),
    (
        "delete",
        "07c02cc89901000007000000000000006167656e742d610000829081b6296668f0b11c637768e6acfdeb8d801dbda69430b009479a56646bf9",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000400000013000000000000002f6d656d6f726965732f6e6f7465732e747874",
        "7de6f0b4c5bf63a3b42864fa386437093fbee6f60c9abb9cf389fbd0eaf304f0",
    ),
    (
        "rename",
        "08c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30344400b19e70aba32e5de528a15b877c0edb33b5ce213fe32c40ca56f3e63f5dcfe985",
        "0000000009000000000000002f6d656d6f7269657300000000000000010000000000050000000b000000000000002f6d656d6f726965732f610d000000000000002f6d656d6f726965732f622f63",
        "67ac80bc3fcbe0f58dff6b13304cb9d92ae1f6520d86685adc918b7dd6cbcf0f",
    ),
    (
        "tool call with an error outcome",
        "09c02cc89901000007000000000000006167656e742d6100015966f222d30f090dc1f820c7b6b59a7747d4c9cab58ad134c032c2686cc40900",
        "0000000009000000000000002f6d656d6f72696573000000000000000100000000000000000010000000000000002f6d656d6f726965732f2e2e2f65746301fdffffffffffffff0700000000000000",
        "de8f3676edc60afa4f347d2906cc11d46ca8df4201bf483eb714641bfa614676",
    ),
    (
        "rejected input",
        "0ac02cc89901000007000000000000006167656e742d610001df7a7afc7849e3577efd133d515498dbac4fd8a24690e9ff40aafa0db305a09e",
        "0100000009000000000000002f6d656d6f726965730000000008000000000000006e6f74206a736f6e",
        "840e66c6d35cae55258abd0969b6ff02d4fc4d13265971c983dc81136bab9098",
    ),
    (
        "acl grant",
        "0cc02cc89901000007000000000000006167656e742d610000ada66f5abf7cf2e204b0aa24c42bf1f2581d7189a824be6449bb084f0e220335",
        "020000000000000007000000000000006167656e742d3211000000000000002f6d656d6f726965732f6167656e742d3200000000",
        "814e8026d8fd792b4a3134cb445b9a04ea4ad9c15132c9da688d33fdfa0c505f",
    ),
    (
        "acl revoke",
        "0dc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30364600888da5f33fa06334c78c48602ff91f40f555ebcd893caeaeeb7ff5c09bf826c8",
        "020000000100000001000000000000002a01000000000000002f",
        "f2e7fca466bd66a80cef22daf503829b43ec3d0ac395d67e99fb0e3a6730c32f",
    ),
    (
        "python-sdk profile with limits",
        "0bc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30354500d9b1d1e437f06ace2c58ae401b9205dc92d72059e01e7e38fa9dbd414a5d85c3",
        "0000000006000000000000002f6f7468657201000000001000000000000001803e0000000000000000000008000000000000002f6f746865722f6100",
        "238fc217de3b23f371ee977962e14ccafa27371e98a8d55726403aa115d536ef",
    ),
    (
        "rejected digest: over the request limit",
        "0ec02cc89901000007000000000000006167656e742d610001912d1d3c687be5ee47ae4f806e0cbbf851c9c467f69c354b2480d0043b65247b",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a900000000e703000000000000",
        "ca247ed0cd0f13492751491a65da3b5c0231e933fa081efe0268d2055d24dff6",
    ),
    (
        "rejected digest: not UTF-8",
        "0fc02cc89901000007000000000000006167656e742d61000197f250276f049b0a109870b7a3d25a9ca5e1a44414e4197e6b49b4a01705f715",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a9010000000700000000000000",
        "2dab870a30536e1d45c307f1a5848f659796a98347a219595263a4a7c91aad9a",
    ),
    (
        "rejected digest: invalid and long",
        "10c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303747016bf7a1ad2d18b0ef71dc3b9700d5d0af2fe64bca0c67deb06bf3aae239d6aba7",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a90200000016000000000000004572726f723a20556e6b6e6f776e20636f6d6d616e64",
        "6965e0f2e61bdcd4800f5de8eab83b4688ae64cccc89504786f6baf4088c700f",
    ),
    (
        "rejected digest: content over the file limit",
        "11c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303848016b72b82cf4a05177c00e3f3b1809f256f83b71ecf072badda403cbd8a2fd9bfb",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a9030000000b000000000000002f6d656d6f726965732f61090000000000000066696c655f7465787411000000000000001000000000000000",
        "79a811abd39dba1f9ae65d29bb5c7ef8b27b93dd7ae6a6e9824d91f7970776bd",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "12c02cc89901000007000000000000006167656e742d610001214a3eec65f3552db565373f845486180c892e53a56844fcd40f4283b48015ee",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a904000000e603000000000000",
        "afd8c60f88c33d093171bb44b80c1cd57af773ddd77c13aa64dff5607fce377a",
    ),
    (
        "rejected digest: a large call that failed",
        "13c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f3039490102743e8c4bd7eb971df771e6637aa33ae003d82bfc0c0983cee81f1e908d2ec9",
        "0300000009000000000000002f6d656d6f7269657301000000e803000000000000e33fb19325cbc72b5905e783e0c47290468c610090e376de9215e8b5f8ba83d304000000000000007b22c3a9050000000b000000000000007374725f7265706c61636501000000000000000b000000000000002f6d656d6f726965732f612a000000000000004572726f723a205468652070617468202f6d656d6f726965732f6120646f6573206e6f74206578697374",
        "c3b21fcb248bb036001acb65f172657b32e841138da9290437db1460a340f565",
    ),
    (
        "token issue",
        "13c02cc89901000007000000000000006167656e742d61000045506cf0946e21169a14c0a8eb2441306850549d4b67d830e384bead6c16244f",
        "02000000020000001000000000000000303132333435363738396162636465660700000000000000706c616e6e6572090000000000000063692072756e6e6572ea5247df6cad45499ab3e114ebeca2de719c1a9414afb7c6c3cc3c780a357045",
        "6bdd2ed04dc3f171b2aa9807ef5434711c748e734d3f239cdc6e399601f88625",
    ),
    (
        "token revoke",
        "14c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303949018b4e2ee19786d0a63c137289c33e29ef57c22d8200a68833f6ba712c21ade70d",
        "0200000003000000040000000000000066666666",
        "127e0753053f8b405425df19ff5c30cd143af7a79d5230c9bbfde1f000e25523",
    ),
];

/// Format 2 (semantics 2): (name, header hex, chain hash hex) of the same fixtures, computed once
/// by running the crate. The payloads are format 1's.
const GOLDEN_V2: &[(&str, &str, &str)] = &[
    (
        "view without view_range",
        "01c02cc89901000007000000000000006167656e742d61000075f207cc3891a286903c08c61385772456d9873506dc5ef794c451658744cf4502000000",
        "60dd1fe9527edea3712a811eb913064596463b7607eb9034bdbe966ec7a6a557",
    ),
    (
        "view with view_range",
        "02c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303141001b55d23bffd0ef60892f5dc98d0b4f1d30b3b8cf5e05354a72c28e8d592c139302000000",
        "0c504d187ccce87742da5f1fd0a0194f574858fb44e9495caf0a0e0c22f0007b",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "03c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30324200374438c62bfad46ea704faa22544e2d5fc0320ca8dd1abeea376fe4d231b00f602000000",
        "9a64da5e956fbed610a9ff1163bcc70c12a15c3873440f6730764cbb0462d22f",
    ),
    (
        "str_replace with new_str",
        "04c02cc89901000007000000000000006167656e742d610000d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e02000000",
        "8d5bb230ce4405ff495444dd6b6032a712b1189f2168fea3f76dbe607c771ed1",
    ),
    (
        "str_replace without new_str",
        "05c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30334300d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e02000000",
        "25d6fe544331843550c810be6c3645bb513d7a96bea956fddfe0b5a2506c6968",
    ),
    (
        "insert",
        "06c02cc89901000007000000000000006167656e742d6100003b63e55a6b1b8b35a738fe39621245cf0e95c773b4bf4078943fee6c91358eac02000000",
        "082f188d70b607f7ca3142d644e8ec8c98cd836db7783ae9277c20e76c9702bf",
    ),
    (
        "delete",
        "07c02cc89901000007000000000000006167656e742d610000829081b6296668f0b11c637768e6acfdeb8d801dbda69430b009479a56646bf902000000",
        "67acef5834122294d58f9ae7891d9927be4939b86c0c9d74ada6f708d7b529a9",
    ),
    (
        "rename",
        "08c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30344400b19e70aba32e5de528a15b877c0edb33b5ce213fe32c40ca56f3e63f5dcfe98502000000",
        "c5b4ec137baf62ebeb8d09d95d6f2c9d45b46abafe7b0163690c4274633ece36",
    ),
    (
        "tool call with an error outcome",
        "09c02cc89901000007000000000000006167656e742d6100015966f222d30f090dc1f820c7b6b59a7747d4c9cab58ad134c032c2686cc4090002000000",
        "388d55aa640376c5e2e90518bef15c89cf2866e0cb559ae58b3958bdcae35c04",
    ),
    (
        "rejected input",
        "0ac02cc89901000007000000000000006167656e742d610001df7a7afc7849e3577efd133d515498dbac4fd8a24690e9ff40aafa0db305a09e02000000",
        "6b0ea7d9f93049d85f750591c55f7cfb26995e734f4001d437303b813b570302",
    ),
    (
        "acl grant",
        "0cc02cc89901000007000000000000006167656e742d610000ada66f5abf7cf2e204b0aa24c42bf1f2581d7189a824be6449bb084f0e22033502000000",
        "290f1c9f6ea7728e94ae241bd28c58b02ab381ae6b4b27f49af878d38df9ca79",
    ),
    (
        "acl revoke",
        "0dc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30364600888da5f33fa06334c78c48602ff91f40f555ebcd893caeaeeb7ff5c09bf826c802000000",
        "f1d8c03d915a74d6e9cc63a07d4ea1ae2085d2a16d8292867e05e0609ded0c6b",
    ),
    (
        "python-sdk profile with limits",
        "0bc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30354500d9b1d1e437f06ace2c58ae401b9205dc92d72059e01e7e38fa9dbd414a5d85c302000000",
        "950ed23609e75fdea92b26e86b8a26a2d82f00b958723e6566c98d6fc57e7dfc",
    ),
    (
        "rejected digest: over the request limit",
        "0ec02cc89901000007000000000000006167656e742d610001912d1d3c687be5ee47ae4f806e0cbbf851c9c467f69c354b2480d0043b65247b02000000",
        "471bb5287d4444686245e9e05ef20c57a50eb914051899afa7e43b41ec17a3fc",
    ),
    (
        "rejected digest: not UTF-8",
        "0fc02cc89901000007000000000000006167656e742d61000197f250276f049b0a109870b7a3d25a9ca5e1a44414e4197e6b49b4a01705f71502000000",
        "a6df088585f22e27e541a90eee4e7a7af0ce527724ef62432e18306c8f739731",
    ),
    (
        "rejected digest: invalid and long",
        "10c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303747016bf7a1ad2d18b0ef71dc3b9700d5d0af2fe64bca0c67deb06bf3aae239d6aba702000000",
        "06bd6102e7c71955350a2ad3032ee638b8ec5f3d8aba400eb1f3a8fe49f36d00",
    ),
    (
        "rejected digest: content over the file limit",
        "11c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303848016b72b82cf4a05177c00e3f3b1809f256f83b71ecf072badda403cbd8a2fd9bfb02000000",
        "645f2486c4fb14ab7c415a03059486f7b9739421a50956d861fa018599580156",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "12c02cc89901000007000000000000006167656e742d610001214a3eec65f3552db565373f845486180c892e53a56844fcd40f4283b48015ee02000000",
        "1486e8448b8a6b89d8a5b87c247223da02a46fb4cbf5cde17ced6a1ef2c2a632",
    ),
    (
        "rejected digest: a large call that failed",
        "13c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f3039490102743e8c4bd7eb971df771e6637aa33ae003d82bfc0c0983cee81f1e908d2ec902000000",
        "7becaa2995a8284b2fb04f09ad07c57cb4cdb8b57836b28f90ad7fcfe46a7aa5",
    ),
    (
        "token issue",
        "13c02cc89901000007000000000000006167656e742d61000045506cf0946e21169a14c0a8eb2441306850549d4b67d830e384bead6c16244f02000000",
        "b38cfbcb07dd83be809e3e07c057eacd6777be88d898b6417f8cd461fb95a4bc",
    ),
    (
        "token revoke",
        "14c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303949018b4e2ee19786d0a63c137289c33e29ef57c22d8200a68833f6ba712c21ade70d02000000",
        "fffd552789842a40c035de4f780bcece255441fe7d3b624e319d75d275a7937c",
    ),
];

#[test]
fn every_variant_encodes_to_its_golden_bytes_and_hash() {
    let fixtures = fixtures();
    assert_eq!(fixtures.len(), GOLDEN.len(), "one golden row per fixture");
    for ((name, event), (golden_name, header, payload, hash)) in fixtures.iter().zip(GOLDEN) {
        assert_eq!(event.format(), 1, "{name} is written in format 1");
        assert_eq!(
            name, golden_name,
            "fixtures and golden rows are in the same order"
        );
        assert_eq!(
            hex(&event.header_bytes()),
            *header,
            "header bytes of {name}"
        );
        assert_eq!(
            hex(&event.payload_bytes()),
            *payload,
            "payload bytes of {name}"
        );
        assert_eq!(event.hash().to_hex(), *hash, "chain hash of {name}");
        let frame = event.to_frame();
        assert_eq!(frame.hash.to_hex(), *hash, "to_frame().hash of {name}");
        assert_eq!(
            frame.payload_hash,
            EventHash::of(&event.payload_bytes()),
            "payload_hash of {name} is blake3(payload)"
        );
    }
    // Every hash is distinct: no two fixtures collapse to the same encoding.
    let mut hashes: Vec<&str> = GOLDEN.iter().map(|row| row.3).collect();
    hashes.sort_unstable();
    hashes.dedup();
    assert_eq!(
        hashes.len(),
        GOLDEN.len(),
        "golden hashes are pairwise distinct"
    );
}

/// The one value of a stored enum no fixture holds: `Access::ReadWrite`. Its payload is the
/// "acl grant" vector's with the access index 1, and decodes back to the grant it came from.
#[test]
fn a_read_write_grant_encodes_as_the_grant_vector_with_access_one() {
    let grant = fixed(
        12,
        None,
        Outcome::of(
            false,
            "Granted read-write on /memories/agent-2 to agent agent-2",
        ),
        Body::Admin(AdminCommand::Grant {
            agent: "agent-2".into(),
            prefix: "/memories/agent-2".into(),
            access: Access::ReadWrite,
        }),
    );
    let read = GOLDEN
        .iter()
        .find(|row| row.0 == "acl grant")
        .expect("the acl grant vector")
        .2;
    let want = format!("{}01000000", &read[..read.len() - 8]);
    assert_eq!(
        &read[read.len() - 8..],
        "00000000",
        "Access::Read is index 0"
    );
    assert_eq!(hex(&grant.payload_bytes()), want);
    let decoded = Frame::decode(&grant.to_frame().encode())
        .expect("frame")
        .event()
        .expect("event");
    assert_eq!(decoded, grant);
}

/// Checks that the fixtures answered under `semantics` encode to the `rows` (name, header hex,
/// chain hash hex) of their format, whose header is `earlier`'s (of the format before) with
/// `semantics` as a `u32` put in place of `replaced` at its end; the payloads are format 1's.
fn later_format_rows(
    semantics: Semantics,
    rows: &[(&str, &str, &str)],
    earlier: &[(&str, &str, &str)],
    replaced: &str,
) {
    let format = mnemo::testing::event::format_of(semantics);
    let fixtures = fixtures_in(semantics);
    assert_eq!(fixtures.len(), rows.len(), "one golden row per fixture");
    for ((((name, event), (golden_name, header, hash)), before), v1) in
        fixtures.iter().zip(rows).zip(earlier).zip(GOLDEN)
    {
        assert_eq!(name, golden_name, "same order as the fixtures");
        assert_eq!(
            event.format(),
            format,
            "{name} is written in format {format}"
        );
        assert_eq!(
            hex(&event.header_bytes()),
            *header,
            "header bytes of {name}"
        );
        let stem = before
            .1
            .strip_suffix(replaced)
            .expect("the earlier header's end");
        let number = hex(&semantics.number().to_le_bytes());
        assert_eq!(*header, format!("{stem}{number}"), "header of {name}");
        assert_eq!(hex(&event.payload_bytes()), v1.2, "payload bytes of {name}");
        assert_eq!(event.hash().to_hex(), *hash, "chain hash of {name}");
        assert_ne!(
            *hash, before.2,
            "{name}: the semantics is hashed into the chain"
        );
        assert_eq!(event.to_frame().encode()[0], format, "{name}: version byte");
    }
}

#[test]
fn every_variant_of_format_two_encodes_to_its_golden_bytes_and_hash() {
    // Format 2's header is format 1's followed by the semantics (u32 LE 2).
    let v1: Vec<(&str, &str, &str)> = GOLDEN.iter().map(|r| (r.0, r.1, r.3)).collect();
    later_format_rows(Semantics::V2, GOLDEN_V2, &v1, "");
}

#[test]
fn every_variant_of_format_three_encodes_to_its_golden_bytes_and_hash() {
    // Format 3's header is format 2's with the semantics u32 LE 3 in place of 2.
    later_format_rows(Semantics::V3, GOLDEN_V3, GOLDEN_V2, "02000000");
}

#[test]
fn every_variant_of_format_four_encodes_to_its_golden_hash() {
    let events = salted(fixtures().into_iter().map(|(_, e)| e).collect());
    let names = fixtures().into_iter().map(|(name, _)| name);
    assert_eq!(events.len(), GOLDEN_V4.len(), "one golden row per fixture");
    for (((name, event), (golden_name, hash)), v3) in
        names.zip(&events).zip(GOLDEN_V4).zip(GOLDEN_V3)
    {
        assert_eq!(name, *golden_name, "same order as the fixtures");
        assert_eq!(
            event.format(),
            SALTED_FORMAT,
            "{name} is written in format 4"
        );
        // Format 4's header is format 3's: the salt is beside the payload, not in the header.
        assert_eq!(hex(&event.header_bytes()), v3.1, "{name}: header");
        let frame = event.to_frame();
        assert_eq!(frame.hash.to_hex(), *hash, "{name}: chain hash");
        assert_ne!(
            frame.hash.to_hex(),
            v3.2,
            "{name}: the salt changes the chain hash"
        );
        assert_ne!(
            frame.payload_hash,
            EventHash::of(&event.payload_bytes()),
            "{name}: the payload hash is not the plain blake3 of the payload"
        );
        assert_eq!(frame.encode()[0], SALTED_FORMAT, "{name}: version byte");
        // Another salt, another commitment: the hash confirms nothing without the salt.
        let mut resalted = event.clone();
        resalted.salt = Some(Salt([0; 32]));
        assert_ne!(
            resalted.to_frame().payload_hash,
            frame.payload_hash,
            "{name}"
        );
    }
}

#[test]
fn every_variant_of_format_six_encodes_to_its_golden_hash() {
    let events = salted_in(
        Semantics::V4,
        fixtures().into_iter().map(|(_, e)| e).collect(),
    );
    let names = fixtures().into_iter().map(|(name, _)| name);
    if std::env::var("MNEMO_PRINT_GOLDEN").is_ok() {
        for (name, event) in names.clone().zip(&events) {
            println!(
                "    (\n        {name:?},\n        {:?},\n    ),",
                event.hash().to_hex()
            );
        }
    }
    assert_eq!(events.len(), GOLDEN_V6.len(), "one golden row per fixture");
    for (((name, event), (golden_name, hash)), v4) in
        names.zip(&events).zip(GOLDEN_V6).zip(GOLDEN_V4)
    {
        assert_eq!(name, *golden_name, "same order as the fixtures");
        assert_eq!(event.format(), 6, "{name} is written in format 6");
        // Format 6's header is format 4's with semantics 4 in place of 3.
        let header = event.header_bytes();
        assert_eq!(header[header.len() - 4..], 4u32.to_le_bytes(), "{name}");
        let frame = event.to_frame();
        assert_eq!(frame.hash.to_hex(), *hash, "{name}: chain hash");
        assert_ne!(frame.hash.to_hex(), v4.1, "{name}: the semantics is hashed");
        assert_eq!(frame.encode()[0], 6, "{name}: version byte");
        assert!(frame.salt.is_some(), "{name}: salted");
    }
}

#[test]
fn every_variant_of_format_nine_encodes_to_its_golden_hash() {
    let events = salted_in(
        Semantics::V5,
        fixtures().into_iter().map(|(_, e)| e).collect(),
    );
    let names = fixtures().into_iter().map(|(name, _)| name);
    if std::env::var("MNEMO_PRINT_GOLDEN").is_ok() {
        for (name, event) in names.clone().zip(&events) {
            println!(
                "    (\n        {name:?},\n        {:?},\n    ),",
                event.hash().to_hex()
            );
        }
    }
    assert_eq!(events.len(), GOLDEN_V9.len(), "one golden row per fixture");
    for (((name, event), (golden_name, hash)), v6) in
        names.zip(&events).zip(GOLDEN_V9).zip(GOLDEN_V6)
    {
        assert_eq!(name, *golden_name, "same order as the fixtures");
        assert_eq!(event.format(), 9, "{name} is written in format 9");
        // Format 9's header is format 6's with semantics 5 in place of 4.
        let header = event.header_bytes();
        assert_eq!(header[header.len() - 4..], 5u32.to_le_bytes(), "{name}");
        let frame = event.to_frame();
        assert_eq!(frame.hash.to_hex(), *hash, "{name}: chain hash");
        assert_ne!(frame.hash.to_hex(), v6.1, "{name}: the semantics is hashed");
        assert_eq!(frame.encode()[0], 9, "{name}: version byte");
        assert!(frame.salt.is_some(), "{name}: salted");
    }
}

/// Format 9 (semantics 5, salted with [`salt_of`] each seq): (name, chain hash hex) of the
/// fixtures, computed once by running the crate (`MNEMO_PRINT_GOLDEN=1`).
const GOLDEN_V9: &[(&str, &str)] = &[
    (
        "view without view_range",
        "b9125c8a60932991478b837c504433af9fc5ccb660199f9243d42d36f665bc82",
    ),
    (
        "view with view_range",
        "00efe305351ef8a69e16a3a9bb19d1a6399f3bc6ae86d69fc0c926a06582346c",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "fb3aa70a607d6c9eb978806738c0c944704c057e32f31af41a4770649778c6dd",
    ),
    (
        "str_replace with new_str",
        "e1f2ead4eb06205f97d1342dda3e381fce528e013e8ebba58cc4e311d3537347",
    ),
    (
        "str_replace without new_str",
        "bc135c54f37b6c78a35756d6f80077f7582283430c5dfe58e6795624ca8266b8",
    ),
    (
        "insert",
        "23b1f6aca632ae067932f782f87b5a662200b169c1c4d424d86548b4ba09813a",
    ),
    (
        "delete",
        "f2615ae62f08c5a3c040fd3ccdd204112c3a1774907858a789963e8677f0ffed",
    ),
    (
        "rename",
        "d3ac12f527e5cc3de5c3eaf4df1392dd8dc9023d1c063e66ba691850baec8bdf",
    ),
    (
        "tool call with an error outcome",
        "95f7870940413a4bbc5ebc7a6bab64adcadfc93b0e5ae9095edc5a6ee3edb1b0",
    ),
    (
        "rejected input",
        "517f8f60f3b6df8521deebf40baf7c5eed37fd0f98032f8d5c85b467b0a42c34",
    ),
    (
        "acl grant",
        "0f03f5e91d19990f407b73bcb28bdf0348535f695526fab1c2e87e5f74fff754",
    ),
    (
        "acl revoke",
        "c54b908bdb4b400fe528357010207ca12c9a9a7fa62133b391757b47994b574e",
    ),
    (
        "python-sdk profile with limits",
        "64e8e174dd6c8f72f1f93a3eb2ebeea6cafe482c12d5103b7467865b7df13459",
    ),
    (
        "rejected digest: over the request limit",
        "f8a13fface13a90d6b3a94e0091c9f75b78fb0a974844bac38cb368e92f556a0",
    ),
    (
        "rejected digest: not UTF-8",
        "1cdc440c1a9a86d5d6f635e0ef984accda607fcebb98d89c3d4c0a6e14445acf",
    ),
    (
        "rejected digest: invalid and long",
        "3d15043d12a324c18298633c02daa4f83c3766b82f84dd344a9a85aeac31c13c",
    ),
    (
        "rejected digest: content over the file limit",
        "a7e499ad86f611db206cb21e6e4e3ac5369d00721b41cc2c060c1cbebacf2ead",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "84e9bd654eb9daa5ae62feea98b6fca0a0ee6e46202879f055a1d7065457db70",
    ),
    (
        "rejected digest: a large call that failed",
        "961cc6f97ec620c95ef68f777f008e6e3c0fbcda1018a14c21a320c10348ec66",
    ),
    (
        "token issue",
        "9bca41b6464c0f6581e8333ced336489a0000213944086a7a371a6d5a5465ddb",
    ),
    (
        "token revoke",
        "7f20428d8f764afdd77e7ba3c6c8fb59b235d7abeca0cd178b35e54acf7787b4",
    ),
];

/// Format 6 (semantics 4, salted with [`salt_of`] each seq): (name, chain hash hex) of the
/// fixtures, computed once by running the crate (`MNEMO_PRINT_GOLDEN=1`).
const GOLDEN_V6: &[(&str, &str)] = &[
    (
        "view without view_range",
        "4994ba221026ad0cca944ab92cd96c9fe971aea8f5584006bf79591c5d5241f6",
    ),
    (
        "view with view_range",
        "422f217d6d0096cf3e59db826c24229a99c0d561143f482a4dcdf5c2f1fc7508",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "2818904c63cfeaeef11653836971e19858b99529b8a02052b009a64c9c5eb4c1",
    ),
    (
        "str_replace with new_str",
        "c3dc381bb0898738b51dc7af46c9b25d68b300787f25ec64ef3840b930771ecb",
    ),
    (
        "str_replace without new_str",
        "61cef96f99c35f7efca11c22f809a24face0ef4918792ea41e8352d4e2403c18",
    ),
    (
        "insert",
        "924444a6dabfa5313e1568be8c79bdb2246ff50892c237546a71eeb89a9e34b6",
    ),
    (
        "delete",
        "fda189a3ed27ea6771812743511316157189585148af8d5b75ba9eb0ff98ff95",
    ),
    (
        "rename",
        "a753a5ae3ad98ebe13e24a4e876cb96a683468d2f7d01c2208b364a64b5806e1",
    ),
    (
        "tool call with an error outcome",
        "42e526766193b031e1c912088ec29280a8b61019e8f2d22f6ac786ad44255dec",
    ),
    (
        "rejected input",
        "aaccf729743ec37c7afadc1760cc82f2948d3806773c6f796055a6d849a2b626",
    ),
    (
        "acl grant",
        "716039542de632d4e03cee9c9c0f44d3f16dddd6748d0ee7fa97978235d96255",
    ),
    (
        "acl revoke",
        "da6e56b53660d2f75da2da8a1627f81cd3cea9598be022f2bfcb53604e8b0b07",
    ),
    (
        "python-sdk profile with limits",
        "0e2aff1934c3af002e514e2a03460c3707dbdf170f7dfc294028ff3f17cec23e",
    ),
    (
        "rejected digest: over the request limit",
        "e1388297923a445bf3200e8f0cc707fc43f219537504bb7ec6187d5b752cadb6",
    ),
    (
        "rejected digest: not UTF-8",
        "072d436b2b204d479adae09fcc41ff85959803faebb8599a073a8dd2d29864a2",
    ),
    (
        "rejected digest: invalid and long",
        "ba49da7c18a7c29172a8c3eec0458df006836185ac53f2a3ec763e6598d3d67b",
    ),
    (
        "rejected digest: content over the file limit",
        "80c992fac77bbc9ea769a60b37aa556455584c83a30b7903aade378347b997f9",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "5486bbfbb5d9853ee8e66473a61197b57ae28b073ccc85070b2506d1f994772c",
    ),
    (
        "rejected digest: a large call that failed",
        "cdcd5438f2000722f4f0476e1c0efa6b48086fb249bfa8c1e7403dfc83d3af09",
    ),
    (
        "token issue",
        "5ae5395f822cbab544249d0c361d7062e0367b9df4fb7ca316ccc057d5fc44c7",
    ),
    (
        "token revoke",
        "3e069dccccd1bcd59998d8ddb5118fb66f94f171362590373fb2883ead022c0c",
    ),
];

/// The full stored record of one event, byte for byte (what sits under its key in `events`).
const GOLDEN_RECORD_STR_REPLACE: &str = "01040000000000000004040404040404040404040404040404040404040404040404040404040404046a67b28c06936ce2793febb0f1910ed94a8e94ac9149227f8fd28370cd4761f109a10f8d97064822ba223087f29869e1865139bfbf29dd39b99ffe3e3507150a3900000004c02cc89901000007000000000000006167656e742d610000d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e5c0000000000000009000000000000002f6d656d6f72696573000000000000000100000000000200000013000000000000002f6d656d6f726965732f6e6f7465732e7478740500000000000000776f726c640105000000000000007468657265";

/// Format 4 (semantics 3, salted with [`salt_of`] each seq): (name, chain hash hex) of the same
/// fixtures, computed once by running the crate. The headers are format 3's.
const GOLDEN_V4: &[(&str, &str)] = &[
    (
        "view without view_range",
        "565fe96e2791660734b83d844424319bc85fdc2698ebef200667f8fabf861c4c",
    ),
    (
        "view with view_range",
        "5196fdfa74a54e278ad643ebdd6031279a8c2ed13ebd161f41d407db7c5d73d1",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "badf7a1fbca2239b91a721a052b7cd6a2ac31cb3b7dbcc592cfabe8802f8a848",
    ),
    (
        "str_replace with new_str",
        "71fb3fa34e90ff366dba4e1b0f937882466a9464ddbcc14c274f3e64dc584b5f",
    ),
    (
        "str_replace without new_str",
        "45c93e0428135072948bd0e8936ccea4242e5366c93e3e21f2b63955db13d801",
    ),
    (
        "insert",
        "9201d956ce3f4c8257a778b9443632f17f7dfac6dc414c4b774d2d1375c2410d",
    ),
    (
        "delete",
        "63295be0e214cf4b262bad5102de2e432d6c09e3b0e69ed63aba71c99ec40992",
    ),
    (
        "rename",
        "62c1e2aee9b0b52d28b6bfa6c98d14ad42adff6610c94ffa0ec75deea8c33508",
    ),
    (
        "tool call with an error outcome",
        "047442245bdac4b4f364af6fd6b8ec1e4ac5e02b7918a5e3c86886a0788ba993",
    ),
    (
        "rejected input",
        "3333397bc0c3c477070ac49664026a0b736c9631b1577f04945b488f2de5ef5a",
    ),
    (
        "acl grant",
        "6b3f30b8b28e43d37922603eedbae0c5055e81a3f290f1140bcfb2fb00b7a3ad",
    ),
    (
        "acl revoke",
        "019aa6748963b97c0abe5e299f28852ed586f48042b3ded85896ee6d232c4fa8",
    ),
    (
        "python-sdk profile with limits",
        "1359ec9ca942f1e05136175487906e50106507878c370d3d641d774833cdbb07",
    ),
    (
        "rejected digest: over the request limit",
        "8be9a23a7e10db3426e7a5d21043094d4a0326dc46f1de8345a2a46382bff84d",
    ),
    (
        "rejected digest: not UTF-8",
        "f2547cc732f76980512d85a932debce97db066d05ccc9d831a6aeb8e7ada1528",
    ),
    (
        "rejected digest: invalid and long",
        "1868bbc12ca780b5bcd820a50eb5b8c22a4e3f378bd7c7839858e3ef2698a3fb",
    ),
    (
        "rejected digest: content over the file limit",
        "e49ea7643e3300e4d97d767eed542639a3c27847c786e1c30c3fd733396eff88",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "00986be4b3bbf11df0efb1004f3e28291ce1fcce432713fb45649bfb0e6c0ae6",
    ),
    (
        "rejected digest: a large call that failed",
        "246d2de6ed3536fd1cb082971169debad2d51b126c9d84be5dad09c76a6dcedf",
    ),
    (
        "token issue",
        "ec6cf7b014bb428c161acc209708291fab8b2d601ab059f2fdea2015df225ac5",
    ),
    (
        "token revoke",
        "847733e1314541a856f8cda1be3cadb4102c5c01f3f380fb8ee43806e001443e",
    ),
];

/// The same record in format 4.
const GOLDEN_RECORD_STR_REPLACE_V4: &str = "040400000000000000040404040404040404040404040404040404040404040404040404040404040471fb3fa34e90ff366dba4e1b0f937882466a9464ddbcc14c274f3e64dc584b5f2b24c3b26535a105d59b04b8763e1f497b23012631d53dfb3b3499df180a588e3d00000004c02cc89901000007000000000000006167656e742d610000d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e0300000084848484848484848484848484848484848484848484848484848484848484845c0000000000000009000000000000002f6d656d6f72696573000000000000000100000000000200000013000000000000002f6d656d6f726965732f6e6f7465732e7478740500000000000000776f726c640105000000000000007468657265";

#[test]
fn one_full_stored_record_is_frozen() {
    let (name, event) = &fixtures()[3];
    assert_eq!(*name, "str_replace with new_str");
    assert_eq!(hex(&event.to_frame().encode()), GOLDEN_RECORD_STR_REPLACE);
    let v4 = &salted(vec![event.clone()])[0];
    assert_eq!(hex(&v4.to_frame().encode()), GOLDEN_RECORD_STR_REPLACE_V4);
}

/// A three-event chain answered under semantics 1: event 1 links to zeros, each later one to
/// the hash before it.
fn chain() -> Vec<Event> {
    chain_in(Semantics::V1)
}

/// [`chain`] answered under `semantics`.
fn chain_in(semantics: Semantics) -> Vec<Event> {
    let bodies = [
        (
            Outcome::of(false, "File created successfully at: /memories/notes.txt"),
            tool(Command::Create {
                path: "/memories/notes.txt".into(),
                file_text: "hello\n".into(),
            }),
        ),
        (
            Outcome::of(false, "     1\thello"),
            tool(Command::View {
                path: "/memories/notes.txt".into(),
                view_range: None,
            }),
        ),
        (
            Outcome::of(false, "Successfully deleted /memories/notes.txt"),
            tool(Command::Delete {
                path: "/memories/notes.txt".into(),
            }),
        ),
    ];
    let mut prev = EventHash::ZERO;
    let mut out = Vec::new();
    for (i, (outcome, body)) in bodies.into_iter().enumerate() {
        let seq = u64::try_from(i).expect("small") + 1;
        let event = Event {
            seq: Seq(seq),
            prev_hash: prev,
            header: Header {
                time_ms: 1_760_000_000_000,
                agent: "agent-b".into(),
                tool_use_id: (seq == 2).then(|| "toolu_chain".to_string()),
                outcome,
                semantics,
            },
            body,
            salt: None,
        };
        prev = event.hash();
        out.push(event);
    }
    out
}

/// Format 3 (semantics 3): (name, header hex, chain hash hex) of the same fixtures, computed once
/// by running the crate. The payloads are format 1's; the header is format 2's but for the
/// semantics number.
const GOLDEN_V3: &[(&str, &str, &str)] = &[
    (
        "view without view_range",
        "01c02cc89901000007000000000000006167656e742d61000075f207cc3891a286903c08c61385772456d9873506dc5ef794c451658744cf4503000000",
        "29abbf06e5322e52fad12600346d92e1f1dadd14e1fe6ea0d03c8a79b7bd0b32",
    ),
    (
        "view with view_range",
        "02c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303141001b55d23bffd0ef60892f5dc98d0b4f1d30b3b8cf5e05354a72c28e8d592c139303000000",
        "6ea7fbc8b0e3ac53910a5af017b00b729fdeb253b420da6ec8546f4a102dde0f",
    ),
    (
        "create (multi-byte UTF-8 text)",
        "03c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30324200374438c62bfad46ea704faa22544e2d5fc0320ca8dd1abeea376fe4d231b00f603000000",
        "a85e56c99b7ec15bd3e6a495bd6bd4f85405c86051b65a283b58226c9f19e306",
    ),
    (
        "str_replace with new_str",
        "04c02cc89901000007000000000000006167656e742d610000d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e03000000",
        "65ffcb6332ef568641ebe482f4afc309e63aa66352019a1d5c4b032a4e2d3a38",
    ),
    (
        "str_replace without new_str",
        "05c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30334300d1aa423637bb48fa48b0c825cc752ada4a76fafd5734912a3f5bbfe3274f7a9e03000000",
        "48c779300467de63c639792013fbc893c1e2c8e753c6b7e36bdd7cce9c828f2a",
    ),
    (
        "insert",
        "06c02cc89901000007000000000000006167656e742d6100003b63e55a6b1b8b35a738fe39621245cf0e95c773b4bf4078943fee6c91358eac03000000",
        "a9bf32a04721ca40648bbf103c429b07e133eedf82c5c60a3b5d7461d297d4ef",
    ),
    (
        "delete",
        "07c02cc89901000007000000000000006167656e742d610000829081b6296668f0b11c637768e6acfdeb8d801dbda69430b009479a56646bf903000000",
        "61527e4c352f4f0f41845d7fe6119a63fbdc0d8e864602718c9d09f786a47433",
    ),
    (
        "rename",
        "08c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30344400b19e70aba32e5de528a15b877c0edb33b5ce213fe32c40ca56f3e63f5dcfe98503000000",
        "a0e979be710fd3eb0894d01882dd4c6769759eb9563fcfac39e4653f0f939b65",
    ),
    (
        "tool call with an error outcome",
        "09c02cc89901000007000000000000006167656e742d6100015966f222d30f090dc1f820c7b6b59a7747d4c9cab58ad134c032c2686cc4090003000000",
        "5ffc3f217c7b9be4627ad7e08ab209c5b4a0780e0e057fb51b422852879a571c",
    ),
    (
        "rejected input",
        "0ac02cc89901000007000000000000006167656e742d610001df7a7afc7849e3577efd133d515498dbac4fd8a24690e9ff40aafa0db305a09e03000000",
        "969e5a04d4388f67e6d6b3a7bc4202081091227357fb38c014278762db0a1bfe",
    ),
    (
        "acl grant",
        "0cc02cc89901000007000000000000006167656e742d610000ada66f5abf7cf2e204b0aa24c42bf1f2581d7189a824be6449bb084f0e22033503000000",
        "d002d840e64bca2e57c3528ce8ec2f37fc6db0036307c8a728cee0dbef25fc30",
    ),
    (
        "acl revoke",
        "0dc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30364600888da5f33fa06334c78c48602ff91f40f555ebcd893caeaeeb7ff5c09bf826c803000000",
        "17d29d45b6f34680632634681004e212feea6d1d9ef07059be553bf8e5e93c1f",
    ),
    (
        "python-sdk profile with limits",
        "0bc02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f30354500d9b1d1e437f06ace2c58ae401b9205dc92d72059e01e7e38fa9dbd414a5d85c303000000",
        "a6dbf8da2299e9bde55537442c1c54950a3db8a79d95d5fcbc1a9d01916e7f24",
    ),
    (
        "rejected digest: over the request limit",
        "0ec02cc89901000007000000000000006167656e742d610001912d1d3c687be5ee47ae4f806e0cbbf851c9c467f69c354b2480d0043b65247b03000000",
        "c6312ee91dd87ad2adde7823d031ddfd98d6ed0d3a561efb125c0d234f6dfdb6",
    ),
    (
        "rejected digest: not UTF-8",
        "0fc02cc89901000007000000000000006167656e742d61000197f250276f049b0a109870b7a3d25a9ca5e1a44414e4197e6b49b4a01705f71503000000",
        "997051d0c2d3535883e8fa372fa73b2383958d36f7ccc41c62877d44a43f8935",
    ),
    (
        "rejected digest: invalid and long",
        "10c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303747016bf7a1ad2d18b0ef71dc3b9700d5d0af2fe64bca0c67deb06bf3aae239d6aba703000000",
        "3d06521ba1dc542e1d9e507303645a94a98971d0fb6aedc666537870002d7925",
    ),
    (
        "rejected digest: content over the file limit",
        "11c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303848016b72b82cf4a05177c00e3f3b1809f256f83b71ecf072badda403cbd8a2fd9bfb03000000",
        "240bffc49d45497d3d16b956e5e888d363573240200c5d4415f8b3692c6ee600",
    ),
    (
        "rejected digest: conversion stopped at the limit",
        "12c02cc89901000007000000000000006167656e742d610001214a3eec65f3552db565373f845486180c892e53a56844fcd40f4283b48015ee03000000",
        "24045e50ced4e437b7ea72f1e933cd1e6a0110c76317c07a61905c9abadf4bf0",
    ),
    (
        "rejected digest: a large call that failed",
        "13c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f3039490102743e8c4bd7eb971df771e6637aa33ae003d82bfc0c0983cee81f1e908d2ec903000000",
        "5d3d989e579c9d711d30461bafee17f7fc5c595730db1546f63f633ecb19e418",
    ),
    (
        "token issue",
        "13c02cc89901000007000000000000006167656e742d61000045506cf0946e21169a14c0a8eb2441306850549d4b67d830e384bead6c16244f03000000",
        "7fa0795e246a07fbf62d0235edf67e0627ac8af1c8d5da6b7c9e0fa409612505",
    ),
    (
        "token revoke",
        "14c02cc89901000007000000000000006167656e742d61010900000000000000746f6f6c755f303949018b4e2ee19786d0a63c137289c33e29ef57c22d8200a68833f6ba712c21ade70d03000000",
        "a6997059a8dad2e107489276d279be75a22af39ba038ad12240c49381c2ce088",
    ),
];

/// The same chain in format 3.
const GOLDEN_CHAIN_V3: [&str; 3] = [
    "433f17ee2f91ecedfea5fa405c4943613f36ad712658eef0576f2c1eb6052b9d",
    "b4fbfebcf36737e86d9a89c90dcd36c30afc334a1e911a68aff78d8162b8d6eb",
    "2ff2a8ed3fb0eaab96c9a66c0432e309f761c636627097c4b7f7c180090396b0",
];

/// The same chain in format 4.
const GOLDEN_CHAIN_V4: [&str; 3] = [
    "74111ce40ece8f52d96b5ff44e072022d54c172c1efce618b2bc890d3edeb7e2",
    "b3b4ce723a8daf02f73ee4c4e4c395735a8744f58910b5de697fc98617b6b7c7",
    "2efc71deff37cc8b40c915676339750fd1e46b7595e43e1c111216ddf8b28f21",
];

/// The same chain in format 2.
const GOLDEN_CHAIN_V2: [&str; 3] = [
    "f43bd4eee08be549e3aadaecfeec624f80b78b951fad7e0456cdbac2502dcc3f",
    "c4298ac53642ebb75d631a23871c39f6957c399d4e424af2f719509e375bbe5c",
    "290d4e7ccd3553da2a2bc1bc1ac1c042dbc6ea9409d72695d80cb185dd22712f",
];

const GOLDEN_CHAIN: [&str; 3] = [
    "79789a90fc8c8387f193580af72338482690beab7cd5dfb9761c6e03434a0944",
    "674835d89ed2a3d12627806414b5602f5fd5b5133c1a8bb2c286a5090e6f1b2e",
    "e9f10dad320742e3335eb312a42e0536d025f52b15801065a048f77807ed3c36",
];

#[test]
fn a_three_event_chain_links_and_is_frozen() {
    for (chain, golden) in [
        (chain(), GOLDEN_CHAIN),
        (chain_in(Semantics::V2), GOLDEN_CHAIN_V2),
        (chain_in(Semantics::V3), GOLDEN_CHAIN_V3),
        (salted_chain(), GOLDEN_CHAIN_V4),
    ] {
        chain_links_and_is_frozen(&chain, &golden);
    }
}

/// [`chain`] in format 4, each event linked to the salted hash before it.
fn salted_chain() -> Vec<Event> {
    let mut prev = EventHash::ZERO;
    salted(chain_in(Semantics::V3))
        .into_iter()
        .map(|mut event| {
            event.prev_hash = prev;
            prev = event.hash();
            event
        })
        .collect()
}

fn chain_links_and_is_frozen(chain: &[Event], golden: &[&str; 3]) {
    assert_eq!(
        chain[0].prev_hash,
        EventHash::ZERO,
        "event 1 links to zeros"
    );
    for (i, event) in chain.iter().enumerate() {
        assert_eq!(
            event.hash().to_hex(),
            golden[i],
            "hash of chain event {}",
            i + 1
        );
        if i > 0 {
            assert_eq!(
                event.prev_hash.to_hex(),
                golden[i - 1],
                "event {} links to the golden hash of event {i}",
                i + 1
            );
        }
    }
    // The link is load-bearing: the same event 2 linked to zeros hashes differently.
    let mut unlinked = chain[1].clone();
    unlinked.prev_hash = EventHash::ZERO;
    assert_ne!(
        unlinked.hash(),
        chain[1].hash(),
        "prev_hash is part of the chain hash"
    );
}

// ---------------------------------------------------------------------------------------------
// Hand-built encoding, straight from the byte tables of docs/formats.md (not from the crate's codec).
// ---------------------------------------------------------------------------------------------

/// Writes the documented primitives: LE fixed-width ints, `string` = u64 length + UTF-8 bytes,
/// `option<T>` = tag byte 0/1 (+ T), enum = u32 variant index (+ fields), `bool` = one byte 0/1.
#[derive(Default)]
struct Doc(Vec<u8>);

impl Doc {
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        self.0.push(u8::from(v));
        self
    }
    fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
    fn string(&mut self, s: &str) -> &mut Self {
        self.u64(u64::try_from(s.len()).expect("fits"))
            .bytes(s.as_bytes())
    }
    fn opt_string(&mut self, s: Option<&str>) -> &mut Self {
        match s {
            None => self.bytes(&[0]),
            Some(s) => self.bytes(&[1]).string(s),
        }
    }
    fn profile(&mut self, p: Profile) -> &mut Self {
        match p {
            Profile::Spec => self.u32(0),
            Profile::PythonSdk => self.u32(1),
            Profile::TypescriptSdk => self.u32(2),
            other => panic!(
                "the byte table documents Spec, PythonSdk and TypescriptSdk only, got {other:?}"
            ),
        }
    }
}

/// The documented format of an event: 9 for any event of semantics 5; 4 when it is salted under
/// semantics 3, 6 when salted under semantics 4 (7 for an API write, 8 under the typescript-sdk
/// profile), else 1, 2 or 3 for semantics 1, 2 or 3.
fn doc_format(event: &Event) -> u8 {
    if event.header.semantics == Semantics::V5 && !matches!(event.body, Body::Erased(_)) {
        return 9;
    }
    if matches!(event.body, Body::Api(_)) {
        return 7;
    }
    let profile = match &event.body {
        Body::Tool(call) => Some(call.profile),
        Body::Rejected(call) => Some(call.profile),
        Body::RejectedDigest(call) => Some(call.profile),
        _ => None,
    };
    if profile == Some(Profile::TypescriptSdk) {
        return 8;
    }
    if event.salt.is_some() {
        return match event.header.semantics {
            Semantics::V3 => 4,
            Semantics::V4 => 6,
            other => panic!("only semantics 3 and 4 are salted, got {other:?}"),
        };
    }
    match event.header.semantics {
        Semantics::V1 => 1,
        Semantics::V2 => 2,
        Semantics::V3 => 3,
        other => panic!("the byte table documents semantics 1 to 3, got {other:?}"),
    }
}

fn doc_header(h: &Header) -> Vec<u8> {
    let unsalted_format = match h.semantics {
        Semantics::V1 => 1,
        _ => 2,
    };
    let mut d = Doc::default();
    d.u64(h.time_ms)
        .string(&h.agent)
        .opt_string(h.tool_use_id.as_deref())
        .bool(h.outcome.is_error)
        .bytes(&h.outcome.result_hash.0);
    if unsalted_format >= 2 {
        d.u32(h.semantics.number());
    }
    d.0
}

fn doc_payload(b: &Body) -> Vec<u8> {
    let mut d = Doc::default();
    match b {
        Body::Tool(call) => {
            d.u32(0).string(&call.root).profile(call.profile);
            d.u64(call.limits.max_file_bytes);
            match call.limits.view_max_chars {
                None => d.bytes(&[0]),
                Some(cap) => d.bytes(&[1]).u64(cap),
            };
            match &call.command {
                Command::View { path, view_range } => {
                    d.u32(0).string(path);
                    match view_range {
                        None => d.bytes(&[0]),
                        Some((start, end)) => d.bytes(&[1]).i64(*start).i64(*end),
                    };
                }
                Command::Create { path, file_text } => {
                    d.u32(1).string(path).string(file_text);
                }
                Command::StrReplace {
                    path,
                    old_str,
                    new_str,
                } => {
                    d.u32(2)
                        .string(path)
                        .string(old_str)
                        .opt_string(new_str.as_deref());
                }
                Command::Insert {
                    path,
                    insert_line,
                    insert_text,
                } => {
                    d.u32(3).string(path).i64(*insert_line).string(insert_text);
                }
                Command::Delete { path } => {
                    d.u32(4).string(path);
                }
                Command::Rename { old_path, new_path } => {
                    d.u32(5).string(old_path).string(new_path);
                }
            }
        }
        Body::Rejected(r) => {
            d.u32(1).string(&r.root).profile(r.profile).string(&r.input);
        }
        Body::Admin(AdminCommand::Grant {
            agent,
            prefix,
            access,
        }) => {
            d.u32(2).u32(0).string(agent).string(prefix);
            match access {
                Access::Read => d.u32(0),
                Access::ReadWrite => d.u32(1),
            };
        }
        Body::Admin(AdminCommand::Revoke { agent, prefix }) => {
            d.u32(2).u32(1).string(agent).string(prefix);
        }
        Body::Admin(AdminCommand::IssueToken {
            id,
            agent,
            label,
            hash,
        }) => {
            d.u32(2)
                .u32(2)
                .string(id)
                .string(agent)
                .string(label)
                .bytes(&hash.0);
        }
        Body::Admin(AdminCommand::RevokeToken { id }) => {
            d.u32(2).u32(3).string(id);
        }
        Body::Admin(AdminCommand::Redact { reason, seqs, kept }) if kept.is_empty() => {
            d.u32(2).u32(4).string(reason).u64(seqs.len() as u64);
            for seq in seqs {
                d.u64(*seq);
            }
        }
        // Format 10: the redaction that keeps what erased events did, variant 6.
        Body::Admin(AdminCommand::Redact { reason, seqs, kept }) => {
            d.u32(2).u32(6).string(reason).u64(seqs.len() as u64);
            for seq in seqs {
                d.u64(*seq);
            }
            d.u64(kept.len() as u64);
            for (seq, digest) in kept {
                d.u64(*seq).bytes(&digest.0);
            }
        }
        Body::Admin(AdminCommand::Configure { name, value }) => {
            d.u32(2).u32(5).string(name).string(value);
        }
        // Format 10: a memory store's label, variant 7.
        Body::Admin(AdminCommand::Label { label }) => {
            d.u32(2).u32(7).string(label);
        }
        // Format 12: a revert's record, variant 8.
        Body::Admin(AdminCommand::Revert {
            to,
            scope,
            seqs,
            calls,
        }) => {
            d.u32(2)
                .u32(8)
                .u64(*to)
                .string(scope)
                .u64(seqs.len() as u64);
            for seq in seqs {
                d.u64(*seq);
            }
            d.u64(*calls);
        }
        // An erased record has no payload.
        Body::Erased(_) => {}
        Body::Api(write) => {
            use mnemo::event::ApiWrite;
            let digest = |d: &mut Doc, expect: &Option<[u8; 32]>| match expect {
                None => {
                    d.bytes(&[0]);
                }
                Some(bytes) => {
                    d.bytes(&[1]).bytes(bytes);
                }
            };
            d.u32(4);
            match write {
                ApiWrite::Create { path, content } => {
                    d.u32(0).string(path).string(content);
                }
                ApiWrite::Update {
                    memory,
                    path,
                    content,
                    new_path,
                    expect,
                } => {
                    d.u32(1)
                        .u64(*memory)
                        .string(path)
                        .opt_string(content.as_deref())
                        .opt_string(new_path.as_deref());
                    digest(&mut d, expect);
                }
                ApiWrite::Delete {
                    memory,
                    path,
                    expect,
                } => {
                    d.u32(2).u64(*memory).string(path);
                    digest(&mut d, expect);
                }
            }
        }
        Body::RejectedDigest(r) => {
            d.u32(3).string(&r.root).profile(r.profile);
            d.u64(r.input.len)
                .bytes(&r.input.hash.0)
                .string(&r.input.prefix);
            match &r.refusal {
                Refusal::TooLarge { limit } => d.u32(0).u64(*limit),
                Refusal::NotUtf8 { valid_up_to } => d.u32(1).u64(*valid_up_to),
                Refusal::Invalid { text } => d.u32(2).string(text),
                Refusal::ContentTooLarge {
                    path,
                    field,
                    bytes,
                    limit,
                } => d.u32(3).string(path).string(field).u64(*bytes).u64(*limit),
                Refusal::Stopped { limit } => d.u32(4).u64(*limit),
                Refusal::Failed {
                    command,
                    paths,
                    text,
                } => {
                    d.u32(5).string(command).u64(paths.len() as u64);
                    for path in paths {
                        d.string(path);
                    }
                    d.string(text)
                }
            };
        }
    }
    d.0
}

/// The documented chain-hash input, hashed with the `blake3` crate directly.
fn doc_chain_hash(seq: u64, prev: &[u8; 32], header: &[u8], payload_hash: &[u8; 32]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"mnemo/event/v1");
    h.update(&seq.to_le_bytes());
    h.update(prev);
    h.update(&u64::try_from(header.len()).expect("fits").to_le_bytes());
    h.update(header);
    h.update(payload_hash);
    *h.finalize().as_bytes()
}

/// The documented payload hash: `blake3(payload)`, or in format 4 `blake3_keyed(salt,
/// "mnemo/payload/v4" ‖ payload)`, with the `blake3` crate directly.
fn doc_payload_hash(event: &Event, payload: &[u8]) -> [u8; 32] {
    match &event.salt {
        None => *blake3::hash(payload).as_bytes(),
        Some(salt) => {
            let mut h = blake3::Hasher::new_keyed(&salt.0);
            h.update(b"mnemo/payload/v4");
            h.update(payload);
            *h.finalize().as_bytes()
        }
    }
}

/// The documented stored record: version, seq, prev_hash, hash, payload_hash, u32 header_len,
/// header, the salt (format 4), u32 payload_len, payload.
fn doc_record(event: &Event) -> Vec<u8> {
    let header = doc_header(&event.header);
    let payload = doc_payload(&event.body);
    let payload_hash = doc_payload_hash(event, &payload);
    let hash = doc_chain_hash(event.seq.0, &event.prev_hash.0, &header, &payload_hash);
    let mut d = Doc::default();
    d.bytes(&[doc_format(event)])
        .u64(event.seq.0)
        .bytes(&event.prev_hash.0)
        .bytes(&hash)
        .bytes(&payload_hash)
        .u32(u32::try_from(header.len()).expect("fits"))
        .bytes(&header);
    if let Some(salt) = &event.salt {
        d.bytes(&salt.0);
    }
    d.u32(u32::try_from(payload.len()).expect("fits"))
        .bytes(&payload);
    d.0
}

#[test]
fn every_vector_matches_the_documented_byte_table() {
    assert_eq!(DOMAIN_TAG, b"mnemo/event/v1", "domain tag as documented");
    assert_eq!(DOMAIN_TAG.len(), 14, "the docs say 14 ASCII bytes");
    assert_eq!(
        FORMAT_VERSION, 13,
        "this is format version 13 (the writer writes 9: salted events of semantics 5, of any payload and profile; a redaction that keeps what erased events did is 10, the erased records that keep it 11, a revert's record 12, and 13 the stored form of a record whose payload is in the value file)"
    );
    assert_eq!(
        PAYLOAD_TAG, b"mnemo/payload/v4",
        "payload tag as documented"
    );
    assert_eq!(RESULT_TAG, b"mnemo/result/v4", "result tag as documented");
    let mut events = Vec::new();
    for semantics in unsalted_semantics() {
        events.extend(fixtures_in(semantics).into_iter().map(|(_, e)| e));
        events.extend(chain_in(semantics));
    }
    events.extend(salted(fixtures().into_iter().map(|(_, e)| e).collect()));
    events.extend(salted_chain());
    events.extend(salted_in(
        Semantics::V4,
        fixtures().into_iter().map(|(_, e)| e).collect(),
    ));
    events.extend(salted_in(
        Semantics::V5,
        fixtures().into_iter().map(|(_, e)| e).collect(),
    ));
    for event in &events {
        let what = format!("event {} ({:?})", event.seq, event.body);
        let header = doc_header(&event.header);
        let payload = doc_payload(&event.body);
        assert_eq!(hex(&header), hex(&event.header_bytes()), "header of {what}");
        assert_eq!(
            hex(&payload),
            hex(&event.payload_bytes()),
            "payload of {what}"
        );
        let payload_hash = doc_payload_hash(event, &payload);
        let hash = doc_chain_hash(event.seq.0, &event.prev_hash.0, &header, &payload_hash);
        assert_eq!(hex(&hash), event.hash().to_hex(), "chain hash of {what}");
        assert_eq!(
            chain_hash(
                event.seq,
                &event.prev_hash,
                &header,
                &EventHash(payload_hash)
            ),
            EventHash(hash),
            "mnemo::testing::event::chain_hash of {what}"
        );
        let record = event.to_frame().encode();
        assert_eq!(
            hex(&doc_record(event)),
            hex(&record),
            "stored record of {what}"
        );
        // The documented fixed offsets.
        assert_eq!(record[0], doc_format(event), "offset 0: version");
        assert_eq!(
            record[1..9],
            event.seq.0.to_le_bytes(),
            "offset 1: seq (LE)"
        );
        assert_eq!(record[9..41], event.prev_hash.0, "offset 9: prev_hash");
        assert_eq!(record[41..73], hash, "offset 41: hash");
        assert_eq!(record[73..105], payload_hash, "offset 73: payload_hash");
        let header_len = u32::from_le_bytes(record[105..109].try_into().expect("4 bytes"));
        assert_eq!(header_len as usize, header.len(), "offset 105: header_len");
        assert_eq!(
            record[109..109 + header.len()],
            header[..],
            "offset 109: header"
        );
    }
}

#[test]
fn the_hand_built_str_replace_record_is_the_golden_record() {
    // One vector cross-checked end to end: documented table -> bytes -> the pasted golden hex.
    let (_, event) = &fixtures()[3];
    assert_eq!(hex(&doc_record(event)), GOLDEN_RECORD_STR_REPLACE);
    // And the parts of that record, read back at the documented offsets.
    let rec = doc_record(event);
    assert_eq!(hex(&rec[41..73]), GOLDEN[3].3, "hash field at offset 41");
    let header_len = u32::from_le_bytes(rec[105..109].try_into().expect("4 bytes")) as usize;
    assert_eq!(
        hex(&rec[109..109 + header_len]),
        GOLDEN[3].1,
        "header field"
    );
    let at = 109 + header_len;
    let payload_len = u32::from_le_bytes(rec[at..at + 4].try_into().expect("4 bytes")) as usize;
    assert_eq!(rec.len(), at + 4 + payload_len, "nothing after the payload");
    assert_eq!(hex(&rec[at + 4..]), GOLDEN[3].2, "payload field");
}

#[test]
fn known_constants() {
    // blake3 of the empty string (the official test vector) and the keys' byte order.
    assert_eq!(
        EventHash::of(b"").to_hex(),
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    );
    assert_eq!(Outcome::of(true, "").result_hash, EventHash::of(b""));
    assert_eq!(
        Seq(0x0102).key(),
        [0, 0, 0, 0, 0, 0, 1, 2],
        "events keys are big-endian"
    );
    assert_eq!(Seq::from_key(&[0, 0, 0, 0, 0, 0, 1, 2]), Some(Seq(0x0102)));
    assert_eq!(
        Seq::from_key(&[1, 2]),
        None,
        "a key that is not 8 bytes is no seq"
    );
    let h = EventHash([0xab; 32]);
    assert_eq!(EventHash::from_hex(&h.to_hex()), Some(h));
}

// ---------------------------------------------------------------------------------------------
// Frames: round trip and version policy.
// ---------------------------------------------------------------------------------------------

#[test]
fn frames_round_trip() {
    let mut events = Vec::new();
    for semantics in unsalted_semantics() {
        events.extend(fixtures_in(semantics).into_iter().map(|(_, e)| e));
        events.extend(chain_in(semantics));
    }
    events.extend(salted(fixtures().into_iter().map(|(_, e)| e).collect()));
    events.extend(salted_chain());
    events.extend(salted_in(
        Semantics::V4,
        fixtures().into_iter().map(|(_, e)| e).collect(),
    ));
    for event in events {
        let frame = event.to_frame();
        let bytes = frame.encode();
        let decoded = Frame::decode(&bytes).expect("a freshly encoded frame decodes");
        assert_eq!(
            decoded, frame,
            "Frame::decode(encode(f)) == f for seq {}",
            event.seq
        );
        assert_eq!(decoded.recompute_hash(), frame.hash, "recompute_hash");
        assert_eq!(decoded.event().expect("decodes"), event, "Frame::event");
        assert_eq!(
            Event::decode(&bytes).expect("decodes"),
            event,
            "Event::decode"
        );
    }
}

fn golden_record() -> Vec<u8> {
    fixtures()[3].1.to_frame().encode()
}

fn golden_record_v2() -> Vec<u8> {
    fixtures_in(Semantics::V2)[3].1.to_frame().encode()
}

#[test]
fn a_record_with_a_newer_version_byte_is_refused_as_newer_format() {
    for version in [FORMAT_VERSION + 1, 0xff] {
        let mut record = golden_record_v2();
        record[0] = version;
        match Frame::decode(&record) {
            Err(Error::NewerFormat { found, max }) => {
                assert_eq!(found, version, "found");
                assert_eq!(max, FORMAT_VERSION, "max");
            }
            other => panic!("version {version}: expected NewerFormat, got {other:?}"),
        }
        assert!(
            matches!(Event::decode(&record), Err(Error::NewerFormat { found, .. }) if found == version),
            "Event::decode refuses version {version} as NewerFormat"
        );
    }
}

#[test]
fn malformed_records_are_corrupt_not_newer() {
    let good = golden_record();
    let mut zero = good.clone();
    zero[0] = 0;
    let mut trailing = good.clone();
    trailing.push(0);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("version 0", zero),
        ("empty", Vec::new()),
        ("truncated in the fixed part", good[..60].to_vec()),
        ("truncated in the payload", good[..good.len() - 1].to_vec()),
        ("a trailing byte", trailing),
    ];
    for (what, bytes) in cases {
        assert!(
            matches!(Frame::decode(&bytes), Err(Error::Corrupt { .. })),
            "{what}: expected Corrupt, got {:?}",
            Frame::decode(&bytes)
        );
    }
    // The version byte is not hashed, but the header's shape follows it: a format-1 record
    // relabelled 2 (its header lacks the semantics) and a format-2 record relabelled 1 (its
    // header has 4 bytes left over) split into frames but do not decode into events.
    let mut v1_as_2 = golden_record();
    v1_as_2[0] = 2;
    let mut v2_as_1 = golden_record_v2();
    v2_as_1[0] = 1;
    for (what, bytes) in [
        ("format 1 read as 2", v1_as_2),
        ("format 2 read as 1", v2_as_1),
    ] {
        let frame = Frame::decode(&bytes).expect("the frame splits");
        assert_eq!(
            frame.recompute_hash(),
            frame.hash,
            "{what}: the chain hash holds"
        );
        assert!(
            matches!(Event::decode(&bytes), Err(Error::Corrupt { .. })),
            "{what}: expected Corrupt, got {:?}",
            Event::decode(&bytes)
        );
    }
}

#[test]
fn a_store_with_a_newer_meta_format_is_refused() {
    let t = crate::support::TempStore::new();
    {
        let store = mnemo::testing::Store::open(&t.path()).expect("create the store");
        let (_, meta, _) = store.raw_trees();
        meta.insert(b"format", &[FORMAT_VERSION + 1])
            .expect("write meta.format");
        meta.flush().expect("flush");
    }
    // Reopening right after a close can briefly hit sled's lock (see tamper.rs): wait it out.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match mnemo::testing::Store::open(&t.path()) {
            Err(Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(Error::NewerFormat { found, max }) if found == FORMAT_VERSION + 1 => {
                assert_eq!(max, FORMAT_VERSION);
                break;
            }
            Err(other) => panic!("expected NewerFormat, got {other:?}"),
            Ok(_) => panic!("expected NewerFormat, got an open store"),
        }
    }
}

#[test]
fn golden_chain_appended_through_the_store_verifies() {
    // Frames built outside the writer, in the frozen formats, are accepted by the verifier when
    // their outcomes are the real answers under their semantics: the formats the verifier reads
    // are the ones frozen here. A log may hold format-1 events followed by format-2 ones, as a
    // store written by an earlier build and then opened by this one does.
    let v1 = chain_in(Semantics::V1);
    let v2 = chain_in(Semantics::V2);
    let v3 = chain_in(Semantics::V3);
    let v4 = salted_chain();
    let mixed = vec![v1[0].clone(), v1[1].clone(), v2[2].clone()];
    let unsalted_then_salted = vec![v3[0].clone(), v4[1].clone(), v4[2].clone()];
    for (what, chain) in [
        ("format 1", v1),
        ("format 2", v2),
        ("format 1 then 2", mixed),
        ("format 4", v4),
        ("format 3 then 4", unsalted_then_salted),
    ] {
        appended_chain_verifies(what, chain);
    }
}

fn appended_chain_verifies(what: &str, chain: Vec<Event>) {
    let t = crate::support::TempStore::new();
    let store = mnemo::testing::Store::open(&t.path()).expect("create the store");
    // The index as a store writes it, version journal included.
    let mut replay = mnemo::testing::Projection::new(mnemo::testing::MemKv::default()).journaled();
    let mut prev = EventHash::ZERO;
    let mut frames = Vec::new();
    for mut event in chain {
        let answer = replay
            .run_traced(
                mnemo::testing::Caller::of(&event.header),
                &event.body,
                None,
                event.seq,
            )
            .expect("answer")
            .answer;
        event.header.outcome = event.outcome_of(answer.is_error, &answer.text);
        event.prev_hash = prev;
        let frame = event.to_frame();
        prev = frame.hash;
        frames.push(frame);
    }
    let head = store.append(&frames).expect("append");
    assert_eq!(head.seq, Seq(3));
    assert_eq!(head.hash, prev);
    for (key, value) in &replay.kv().map {
        store
            .raw_trees()
            .2
            .insert(key, value.as_slice())
            .expect("index");
    }
    let report = mnemo::testing::verify_store(&store).expect("verify");
    assert!(report.is_intact(), "{what}: {:?}", report.violations);
    assert_eq!(report.events, 3);
    for frame in &frames {
        let stored = store.get(frame.seq).expect("read").expect("present");
        assert_eq!(
            stored,
            frame.encode(),
            "{what}: stored bytes are the frame's encoding"
        );
        assert_eq!(
            Event::decode(&stored).expect("decodes").to_frame(),
            *frame,
            "{what}: a decoded event encodes back to its record"
        );
    }
}

#[test]
fn a_store_of_format_one_gets_the_newer_marker_with_its_first_newer_event() {
    let t = crate::support::TempStore::new();
    let marker = |store: &mnemo::testing::Store| store.raw_trees().1.get(b"format").expect("read");
    {
        let store = mnemo::testing::Store::open(&t.path()).expect("create the store");
        // A new store is marked with the writer's format, so a build of format 6 still opens
        // it until the memory-stores API writes to it.
        assert_eq!(marker(&store).as_deref(), Some(&[WRITTEN_FORMAT][..]));
        // What the stores of earlier builds hold.
        store.raw_trees().1.insert(b"format", &[1u8]).expect("mark");
        store.raw_trees().1.flush().expect("flush");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let store = loop {
        match mnemo::testing::Store::open(&t.path()) {
            Err(Error::Locked { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            other => break other.expect("reopen"),
        }
    };
    let chain = chain();
    store
        .append(&[chain[0].to_frame()])
        .expect("append format 1");
    assert_eq!(
        marker(&store).as_deref(),
        Some(&[1u8][..]),
        "format 1 keeps the marker"
    );
    let mut second = chain_in(Semantics::V2)[1].clone();
    second.prev_hash = chain[0].hash();
    store.append(&[second.to_frame()]).expect("append format 2");
    assert_eq!(
        marker(&store).as_deref(),
        Some(&[2u8][..]),
        "format 2 raises it"
    );
    let mut api = api_fixtures()[0].1.clone();
    api.seq = Seq(3);
    api.prev_hash = second.hash();
    store.append(&[api.to_frame()]).expect("append format 7");
    assert_eq!(
        marker(&store).as_deref(),
        Some(&[7u8][..]),
        "an API write raises it to 7"
    );
    let mut typescript = typescript_fixtures()[0].1.clone();
    typescript.seq = Seq(4);
    typescript.prev_hash = api.hash();
    store
        .append(&[typescript.to_frame()])
        .expect("append format 8");
    assert_eq!(
        marker(&store).as_deref(),
        Some(&[8u8][..]),
        "a call under the typescript-sdk profile raises it to 8"
    );
}

/// A short secret (a four-digit PIN) written through the tool: from its stored record without the
/// payload and salt — what an erasure leaves — no guess at the PIN matches the payload hash or
/// the result hash of the view that showed it, though all 10,000 are tried; with the salt, the
/// true PIN matches exactly once, so the commitments are sound and not merely random.
#[test]
fn a_short_secret_cannot_be_confirmed_from_its_salted_hashes() {
    let t = crate::support::TempStore::new();
    let server = t.server();
    let pin = "4711";
    let create =
        serde_json::json!({"command": "create", "path": "/memories/pin.txt", "file_text": pin});
    let view = serde_json::json!({"command": "view", "path": "/memories/pin.txt"});
    let (_, failed) = crate::support::call(&server, create);
    assert!(!failed);
    let (shown, failed) = crate::support::call(&server, view);
    assert!(!failed && shown.contains(pin), "{shown}");
    drop(server);
    let store = crate::support::open_store(&t.path());
    let record = |seq: u64| Frame::decode(&store.get(Seq(seq)).expect("read").expect("present"));
    let created = record(1).expect("decodes");
    let viewed = record(2).expect("decodes");
    let payload_of = |guess: &str| {
        let mut event = Event::decode(&created.encode()).expect("decodes");
        if let Body::Tool(call) = &mut event.body
            && let Command::Create { file_text, .. } = &mut call.command
        {
            *file_text = guess.to_string();
        }
        event.payload_bytes()
    };
    let text_of = |guess: &str| shown.replace(pin, guess);
    let mut confirmed = Vec::new();
    for n in 0..10_000 {
        let guess = format!("{n:04}");
        let payload = payload_of(&guess);
        let text = text_of(&guess);
        assert_ne!(EventHash::of(&payload), created.payload_hash, "{guess}");
        assert_ne!(
            EventHash::of(text.as_bytes()),
            viewed.event().expect("event").header.outcome.result_hash,
            "{guess}"
        );
        let salt = created.salt.expect("salted");
        if salt.commit(PAYLOAD_TAG, &payload) == created.payload_hash {
            confirmed.push(guess);
        }
    }
    assert_eq!(confirmed, [pin], "with its salt, only the true PIN matches");
    let view_salt = viewed.salt.expect("salted");
    assert_eq!(
        view_salt.commit(RESULT_TAG, shown.as_bytes()),
        viewed.event().expect("event").header.outcome.result_hash
    );
}

/// `event`'s erased record of format `version` (5, or 11 before its kept effect), by the byte
/// table: its seq, hashes and header as they were, then the format it was written in.
fn erased_doc(event: &Event, version: u8) -> Doc {
    let header = doc_header(&event.header);
    let payload_hash = doc_payload_hash(event, &doc_payload(&event.body));
    let mut d = Doc::default();
    d.bytes(&[version])
        .u64(event.seq.0)
        .bytes(&event.prev_hash.0)
        .bytes(&event.hash().0)
        .bytes(&payload_hash)
        .u32(u32::try_from(header.len()).expect("fits"))
        .bytes(&header)
        .bytes(&[doc_format(event)]);
    d
}

/// An erased record, as the byte table documents it: version 5, the event's seq, hashes and
/// header as they were, then one byte, the format it was written in; no salt, no payload. Its
/// chain hash is the event's: erasing changes no hash. And the redaction admin command's payload
/// (`Admin`, variant 4: reason, seqs) as documented.
#[test]
fn an_erased_record_and_a_redaction_follow_the_documented_byte_table() {
    for event in salted(fixtures().into_iter().map(|(_, e)| e).collect())
        .into_iter()
        .chain(fixtures().into_iter().map(|(_, e)| e))
    {
        let erased = event.erased();
        let frame = erased.to_frame();
        assert_eq!(frame.hash, event.hash(), "erasing keeps the chain hash");
        let d = erased_doc(&event, 5);
        assert_eq!(
            hex(&frame.encode()),
            hex(&d.0),
            "erased record of {}",
            event.seq
        );
        let decoded = Event::decode(&d.0).expect("an erased record decodes");
        assert_eq!(decoded, erased);
        assert_eq!(decoded.header, event.header, "the header stays");
        assert!(matches!(decoded.body, Body::Erased(_)));
    }
    let redaction = tool_free_redaction();
    assert_eq!(
        hex(&redaction.payload_bytes()),
        hex(&doc_payload(&redaction.body)),
        "the redaction's payload"
    );
    // A setting's payload, as the event module's table documents it.
    let setting = Body::Admin(AdminCommand::Configure {
        name: "delete".into(),
        value: "erase".into(),
    });
    let event = fixed(10, None, Outcome::of(false, "Set delete to erase"), setting);
    assert_eq!(
        hex(&event.payload_bytes()),
        hex(&doc_payload(&event.body)),
        "a setting's payload"
    );
    assert_eq!(
        Event::decode(&event.to_frame().encode()).expect("decodes"),
        event
    );
}

fn tool_free_redaction() -> Event {
    let mut event = fixed(
        9,
        None,
        Outcome::of(false, "Redacted 2 events (3, 5): asked"),
        Body::Admin(AdminCommand::Redact {
            reason: "asked".into(),
            seqs: vec![3, 5],
            kept: Vec::new(),
        }),
    );
    event.header.semantics = Semantics::V3;
    event
}

/// One event per variant (and option arm) of the memory-stores API's writes, answered under
/// semantics 4 and salted: written in format 7, and only in it.
fn api_fixtures() -> Vec<(&'static str, Event)> {
    use mnemo::event::ApiWrite;
    let api = |seq: u64, text: &str, write: ApiWrite| {
        let mut event = fixed(seq, None, Outcome::of(false, text), Body::Api(write));
        event.header.semantics = Semantics::V4;
        event.salt = Some(salt_of(seq));
        event
    };
    vec![
        (
            "api create",
            api(
                1,
                "Created the memory /memories/a/notes.md",
                ApiWrite::Create {
                    path: "/memories/a/notes.md".into(),
                    content: "héllo\n".into(),
                },
            ),
        ),
        (
            "api update with content, path and precondition",
            api(
                2,
                "Moved the memory /memories/a/notes.md to /memories/b.md and updated it",
                ApiWrite::Update {
                    memory: 1,
                    path: "/memories/a/notes.md".into(),
                    content: Some("again\n".into()),
                    new_path: Some("/memories/b.md".into()),
                    expect: Some([0xab; 32]),
                },
            ),
        ),
        (
            "api update with nothing",
            api(
                3,
                "The memory /memories/b.md is unchanged",
                ApiWrite::Update {
                    memory: 1,
                    path: "/memories/b.md".into(),
                    content: None,
                    new_path: None,
                    expect: None,
                },
            ),
        ),
        (
            "api delete with precondition",
            api(
                4,
                "Deleted the memory /memories/b.md",
                ApiWrite::Delete {
                    memory: 1,
                    path: "/memories/b.md".into(),
                    expect: Some([0xcd; 32]),
                },
            ),
        ),
    ]
}

/// Format 7: (name, chain hash hex) of the API fixtures, computed once (`MNEMO_PRINT_GOLDEN=1`).
const GOLDEN_V7: &[(&str, &str)] = &[
    (
        "api create",
        "7ad5125f53c13abeb9ea83e7efa651deedcc59bbffdcf1ef9dcfeaf440b73e8a",
    ),
    (
        "api update with content, path and precondition",
        "beab710e6c11606d94a9a258f1880602c426bc2837dd205f1f460e76929202de",
    ),
    (
        "api update with nothing",
        "6c108b6f8b371096e8879eded4d2c2730cbf51018010041c84e176b43af3d28b",
    ),
    (
        "api delete with precondition",
        "91c2d3e46bacf561c55801ee0db36879f82e838bc0ccb4c027d2be2fa1a42dc2",
    ),
];

#[test]
fn every_api_write_of_format_seven_encodes_to_its_golden_hash_and_only_there() {
    only_in_its_format(
        &api_fixtures(),
        GOLDEN_V7,
        7,
        "a write of the memory-stores API",
    );
}

/// Each of `fixtures` is written in format `version` and encodes to its golden chain hash and
/// to the documented bytes; the same bytes under format 6 are refused (`version` is the only
/// encoding of what the fixtures hold, so a build of format 6 refuses them as newer), and a
/// plain `spec` call relabelled `version` is refused too (the format holds nothing else).
fn only_in_its_format(
    fixtures: &[(&'static str, Event)],
    golden: &[(&str, &str)],
    version: u8,
    what: &str,
) {
    if std::env::var("MNEMO_PRINT_GOLDEN").is_ok() {
        for (name, event) in fixtures {
            println!(
                "    (\n        {name:?},\n        {:?},\n    ),",
                event.hash().to_hex()
            );
        }
    }
    assert_eq!(fixtures.len(), golden.len(), "one golden row per fixture");
    for ((name, event), (golden_name, hash)) in fixtures.iter().zip(golden) {
        assert_eq!(name, golden_name, "same order as the fixtures");
        assert_eq!(
            event.format(),
            version,
            "{name} is written in format {version}"
        );
        let frame = event.to_frame();
        assert_eq!(frame.hash.to_hex(), *hash, "{name}: chain hash");
        let record = frame.encode();
        assert_eq!(record[0], version, "{name}: version byte");
        assert_eq!(
            hex(&record),
            hex(&doc_record(event)),
            "{name}: the documented bytes"
        );
        assert_eq!(&Event::decode(&record).expect("decodes"), event, "{name}");
        let mut as_six = record.clone();
        as_six[0] = 6;
        assert!(
            matches!(Event::decode(&as_six), Err(Error::Corrupt { .. })),
            "{name}: format 6 never holds {what}"
        );
    }
    let mut spec_call = salted_in(Semantics::V4, vec![fixtures_in(Semantics::V4)[3].1.clone()])[0]
        .to_frame()
        .encode();
    spec_call[0] = version;
    assert!(
        matches!(Event::decode(&spec_call), Err(Error::Corrupt { .. })),
        "format {version} holds only {what}"
    );
}

/// A call, a rejected input and a digest under the `typescript-sdk` profile, answered under
/// semantics 4 and salted: written in format 8, and only in it.
fn typescript_fixtures() -> Vec<(&'static str, Event)> {
    let event = |seq: u64, outcome: Outcome, body: Body| {
        let mut event = fixed(seq, Some("toolu_ts"), outcome, body);
        event.header.semantics = Semantics::V4;
        event.salt = Some(salt_of(seq));
        event
    };
    vec![
        (
            "typescript-sdk create",
            event(
                1,
                Outcome::of(false, "File created successfully at: /memories//a.md"),
                Body::Tool(ToolCall {
                    root: "/memories".into(),
                    profile: Profile::TypescriptSdk,
                    limits: Limits::default(),
                    command: Command::Create {
                        path: "/memories//a.md".into(),
                        file_text: "héllo\n".into(),
                    },
                }),
            ),
        ),
        (
            "typescript-sdk rejected input",
            event(
                2,
                Outcome::of(true, "Error: the input is not JSON"),
                Body::Rejected(RejectedCall {
                    root: "/memories".into(),
                    profile: Profile::TypescriptSdk,
                    input: "{not json".into(),
                }),
            ),
        ),
        (
            "typescript-sdk digest",
            event(
                3,
                Outcome::of(true, "Error: too large"),
                Body::RejectedDigest(RejectedDigest {
                    root: "/memories".into(),
                    profile: Profile::TypescriptSdk,
                    input: InputDigest {
                        len: 9_000_000,
                        hash: EventHash([0x5a; 32]),
                        prefix: "{\"command\":".into(),
                    },
                    refusal: Refusal::TooLarge { limit: 8_388_608 },
                }),
            ),
        ),
    ]
}

/// Chain hashes of [`typescript_fixtures`], frozen: a change to how the profile is encoded fails
/// here.
const GOLDEN_V8: &[(&str, &str)] = &[
    (
        "typescript-sdk create",
        "dc8b2ddcc80cb23fcda579cbf048732b8ea8e4b8896fe48719a80355ac8500e9",
    ),
    (
        "typescript-sdk rejected input",
        "c5c004fb5057b172abdf1376ad56f53f3ef9bc322720f991f33c255289f3d68b",
    ),
    (
        "typescript-sdk digest",
        "db1face05881bdc4b95e0edbe47e8ff69c0a6f55c1fca5644a751234c6f9dc7f",
    ),
];

#[test]
fn every_call_under_the_typescript_profile_is_format_eight_and_only_there() {
    only_in_its_format(
        &typescript_fixtures(),
        GOLDEN_V8,
        8,
        "a call under the typescript-sdk profile",
    );
}

/// What a redaction by seq leaves, as the byte tables document it: an erased record of format 11
/// (a format-5 record, then `kept_len: u32` and the kept effect: a `KeptChange` variant and
/// `by_api`), whose chain hash is the event's; and the redaction's event of format 10, whose
/// payload is `Admin`'s variant 6 naming each kept effect by `blake3("mnemo/kept/v1" ‖ kept)`.
/// Each decodes back to itself, and a kept effect read from any other format is refused.
#[test]
fn a_kept_effect_and_the_redaction_that_commits_to_it_follow_the_documented_byte_tables() {
    use mnemo::event::{Kept, KeptChange};
    use mnemo::testing::event::kept_digest;
    let event = salted(fixtures().into_iter().map(|(_, e)| e).collect())
        .into_iter()
        .next()
        .expect("a fixture");
    let sha = [7u8; 32];
    let cases = [
        (
            KeptChange::Write {
                path: "/memories/a.md".into(),
                sha256: sha,
                bytes: 12,
            },
            true,
            {
                let mut d = Doc::default();
                d.u32(0)
                    .string("/memories/a.md")
                    .bytes(&sha)
                    .u64(12)
                    .bool(true);
                d.0
            },
        ),
        (
            KeptChange::Rewrite {
                from: "/memories/a.md".into(),
                to: "/memories/b.md".into(),
                sha256: sha,
                bytes: 3,
            },
            false,
            {
                let mut d = Doc::default();
                d.u32(1)
                    .string("/memories/a.md")
                    .string("/memories/b.md")
                    .bytes(&sha)
                    .u64(3)
                    .bool(false);
                d.0
            },
        ),
        (
            KeptChange::Rename {
                from: "/memories/d".into(),
                to: "/memories/e".into(),
            },
            false,
            {
                let mut d = Doc::default();
                d.u32(2)
                    .string("/memories/d")
                    .string("/memories/e")
                    .bool(false);
                d.0
            },
        ),
        (
            KeptChange::Delete {
                path: "/memories/e".into(),
            },
            true,
            {
                let mut d = Doc::default();
                d.u32(3).string("/memories/e").bool(true);
                d.0
            },
        ),
    ];
    let mut kept_list = Vec::new();
    for (change, by_api, kept_bytes) in cases {
        let kept = Kept { change, by_api };
        let erased = event.erased_keeping(Some(kept.clone()));
        let frame = erased.to_frame();
        assert_eq!(frame.hash, event.hash(), "erasing keeps the chain hash");
        let mut d = erased_doc(&event, 11);
        d.u32(u32::try_from(kept_bytes.len()).expect("fits"))
            .bytes(&kept_bytes);
        assert_eq!(
            hex(&frame.encode()),
            hex(&d.0),
            "erased record keeping {kept:?}"
        );
        let decoded = Event::decode(&d.0).expect("decodes");
        assert_eq!(decoded, erased);
        let mut tagged = b"mnemo/kept/v1".to_vec();
        tagged.extend_from_slice(&kept_bytes);
        assert_eq!(kept_digest(&kept).0, *blake3::hash(&tagged).as_bytes());
        // The same bytes labelled format 5 leave the kept effect over.
        let mut relabelled = d.0.clone();
        relabelled[0] = 5;
        assert!(Event::decode(&relabelled).is_err());
        kept_list.push((event.seq.0, kept_digest(&kept)));
    }
    let mut redaction = fixed(
        9,
        None,
        Outcome::of(false, "Redacted 1 events (1): asked"),
        Body::Admin(AdminCommand::Redact {
            reason: "asked".into(),
            seqs: vec![1],
            kept: kept_list[..1].to_vec(),
        }),
    );
    redaction.header.semantics = Semantics::V5;
    redaction.salt = Some(salt_of(9));
    let frame = redaction.to_frame();
    assert_eq!(
        frame.version, 10,
        "a redaction that keeps effects is format 10"
    );
    let mut d = Doc::default();
    d.u32(2)
        .u32(6)
        .string("asked")
        .u64(1)
        .u64(1)
        .u64(1)
        .u64(kept_list[0].0)
        .bytes(&kept_list[0].1.0);
    assert_eq!(hex(&frame.payload), hex(&d.0), "the redaction's payload");
    assert_eq!(Event::decode(&frame.encode()).expect("decodes"), redaction);
    // Format 10 holds nothing else, and the redaction nothing but format 10.
    let mut relabelled = frame.encode();
    relabelled[0] = 9;
    assert!(
        Event::decode(&relabelled).is_err(),
        "format 9 holding RedactKeeping"
    );
    // A memory store's label: format 10, variant 7.
    let mut label = fixed(
        10,
        None,
        Outcome::of(false, "Labelled the memory store \"notes\""),
        Body::Admin(AdminCommand::Label {
            label: r#"{"name":"notes"}"#.into(),
        }),
    );
    label.header.semantics = Semantics::V5;
    label.salt = Some(salt_of(10));
    let frame = label.to_frame();
    assert_eq!(frame.version, 10, "a label is format 10");
    let mut d = Doc::default();
    d.u32(2).u32(7).string(r#"{"name":"notes"}"#);
    assert_eq!(hex(&frame.payload), hex(&d.0), "the label's payload");
    assert_eq!(Event::decode(&frame.encode()).expect("decodes"), label);
    let mut relabelled = frame.encode();
    relabelled[0] = 9;
    assert!(
        Event::decode(&relabelled).is_err(),
        "format 9 holding a label"
    );
    // A revert's record: format 12, variant 8, and nothing else is format 12.
    let mut revert = fixed(
        11,
        None,
        Outcome::of(
            false,
            "Reverting /memories to seq 4: undoing 2 events (5, 7) by the 3 calls that follow",
        ),
        Body::Admin(AdminCommand::Revert {
            to: 4,
            scope: "/memories".into(),
            seqs: vec![5, 7],
            calls: 3,
        }),
    );
    revert.header.semantics = Semantics::V5;
    revert.salt = Some(salt_of(11));
    let frame = revert.to_frame();
    assert_eq!(frame.version, 12, "a revert's record is format 12");
    let mut d = Doc::default();
    d.u32(2)
        .u32(8)
        .u64(4)
        .string("/memories")
        .u64(2)
        .u64(5)
        .u64(7)
        .u64(3);
    assert_eq!(hex(&frame.payload), hex(&d.0), "the revert's payload");
    assert_eq!(Event::decode(&frame.encode()).expect("decodes"), revert);
    for other in [9, 10] {
        let mut relabelled = frame.encode();
        relabelled[0] = other;
        assert!(
            Event::decode(&relabelled).is_err(),
            "format {other} holding a revert's record"
        );
    }
    let mut relabelled = label.to_frame().encode();
    relabelled[0] = 12;
    assert!(
        Event::decode(&relabelled).is_err(),
        "format 12 holding a label"
    );
}
