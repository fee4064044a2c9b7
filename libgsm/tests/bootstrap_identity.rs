//! The binary identity of files: build-id notes where the linker wrote one, FNV-1a of the bytes
//! otherwise, and copies of one build agree.

use gossamer::bootstrap::BinaryId;

#[test]
fn this_test_binary_has_a_build_id() {
    // Debian's gcc (the linker driver rustc uses) passes --build-id by default.
    let id = BinaryId::current().expect("read /proc/self/exe");
    assert!(
        matches!(&id, BinaryId::BuildId(bytes) if bytes.len() >= 16),
        "expected a GNU build-id note in this test executable, got {id}"
    );
    assert!(id.to_string().starts_with("build-id "));
}

#[test]
fn a_file_without_a_build_id_is_identified_by_its_hash() {
    let dir = std::env::temp_dir().join(format!("gsm-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = dir.join("a");
    std::fs::write(&a, b"a").unwrap();
    let id = BinaryId::of_path(&a).unwrap();
    // FNV-1a 64 of "a".
    assert_eq!(id, BinaryId::FileHash(0xaf63_dc4c_8601_ec8c));
    assert_eq!(id.to_string(), "file hash (FNV-1a 64) af63dc4c8601ec8c");
    // A copy of this executable with a byte appended is the same build (same build-id).
    let exe = std::env::current_exe().unwrap();
    let mut bytes = std::fs::read(&exe).unwrap();
    bytes.push(0);
    let copy = dir.join("copy");
    std::fs::write(&copy, &bytes).unwrap();
    assert_eq!(
        BinaryId::of_path(&copy).unwrap(),
        BinaryId::of_path(&exe).unwrap()
    );
    let missing = BinaryId::of_path(&dir.join("missing")).unwrap_err();
    assert!(missing.to_string().contains("missing"), "{missing}");
    std::fs::remove_dir_all(&dir).unwrap();
}
