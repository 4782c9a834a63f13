//! The program's published IDL (`idl/mcjs.json`) is the one its source
//! generates: Anchor's own IDL builder (`anchor-lang-idl`, what `anchor idl
//! build` runs) compiles the program with `idl-build` and prints it; this
//! test compares the committed file with it, so that no instruction,
//! account, event or error changes without the IDL changing with it.
//!
//! Regenerate with `MCJS_UPDATE_IDL=1 cargo test -p mcjs-tests --test idl`.

use std::path::{Path, PathBuf};

#[test]
fn the_committed_idl_is_the_one_the_program_source_generates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let program = root.join("programs/mcjs");
    // Its own target dir: the IDL build compiles with other features and
    // flags, which would otherwise rebuild the workspace's artifacts.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), PathBuf::from)
        .join("idl-build");
    // The builder would run `cargo +<toolchain>` with a literal placeholder
    // when rustup names the toolchain; the cargo on PATH is the same one.
    // SAFETY: this test binary runs one test, on one thread, before it
    // starts any process.
    unsafe { std::env::remove_var("RUSTUP_TOOLCHAIN") };
    let idl = anchor_lang_idl::build::IdlBuilder::new()
        .program_path(program)
        .cargo_args(vec![
            "--lib".into(),
            "--locked".into(),
            "--target-dir".into(),
            target.display().to_string(),
        ])
        .build()
        .expect(
            "the program's IDL builds (cargo test __anchor_private_print_idl --features idl-build)",
        );
    let generated = serde_json::to_string_pretty(&idl).expect("the IDL serialises") + "\n";
    let path = root.join("idl/mcjs.json");
    if std::env::var_os("MCJS_UPDATE_IDL").is_some() {
        std::fs::write(&path, &generated).expect("idl/mcjs.json written");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the IDL the program's source generates; regenerate it with\n  MCJS_UPDATE_IDL=1 cargo test -p mcjs-tests --test idl\nand commit it",
        path.display()
    );
}
