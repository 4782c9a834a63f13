//! What the agent's benches share.

use std::path::Path;

/// The reference trainer's image (`examples/trainer/build-image.sh`, cached
/// by the engine): its id.
pub fn trainer_image() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = std::process::Command::new(root.join("examples/trainer/build-image.sh"))
        .output()
        .expect("build the trainer image");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
