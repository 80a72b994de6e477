//! placeholder
#[test]
fn smoke() {
    let s = crate::support::TempStore::new();
    let server = s.server();
    for input in [
        serde_json::json!({"command":"view","path":"/memories"}),
        serde_json::json!({"command":"create","path":"/memories/a/b.txt","file_text":"hello\nworld\n"}),
        serde_json::json!({"command":"view","path":"/memories"}),
        serde_json::json!({"command":"view","path":"/memories/a/b.txt"}),
        serde_json::json!({"command":"str_replace","path":"/memories/a/b.txt","old_str":"world","new_str":"there"}),
        serde_json::json!({"command":"insert","path":"/memories/a/b.txt","insert_line":1,"insert_text":"mid"}),
        serde_json::json!({"command":"rename","old_path":"/memories/a","new_path":"/memories/c/d"}),
        serde_json::json!({"command":"view","path":"/memories"}),
        serde_json::json!({"command":"view","path":"/memories/c/d/b.txt"}),
        serde_json::json!({"command":"delete","path":"/memories/c"}),
        serde_json::json!({"command":"view","path":"/memories/../etc"}),
        serde_json::json!({"type":"tool_use","id":"toolu_1","name":"memory","input":{"command":"bogus"}}),
        serde_json::json!({"command":"view","path":"/memories"}),
    ] {
        println!(
            "{input}\n=> {:?}\n",
            crate::support::call(&server, input.clone())
        );
    }
    let r = server.client().verify().unwrap();
    println!("{r:?}");
    assert!(r.is_intact());
}
