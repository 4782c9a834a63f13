//! What a job may write, from its spec: the caps the agent holds its
//! checkpoints and output to, and the owner's client holds what it fetches to.

use mcjs_spec::JobSpec;

use crate::checkpoint::MAX_FILES;
use crate::confined::Limits;

/// Caps of one checkpoint: its declared `max_size` and [`MAX_FILES`].
pub fn checkpoint_limits(spec: &JobSpec) -> Limits {
    Limits {
        max_entries: MAX_FILES,
        max_bytes: spec.checkpoint.max_size.0,
    }
}

/// Caps of the output: the declared disk and [`MAX_FILES`].
pub fn output_limits(spec: &JobSpec) -> Limits {
    Limits {
        max_entries: MAX_FILES,
        max_bytes: spec.request.hardware.disk.0,
    }
}
