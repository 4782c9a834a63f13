//! The trainer's side of the job contract's checkpoint protocol: a fresh
//! directory, its files fsync'd, then the manifest written last and renamed
//! into place (see docs/job-contract.md).

use crate::math::Rng;
use crate::model::TrainState;
use anyhow::{Context, bail};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "mcjs-manifest.json";
const STATE_FILE: &str = "state.bin";
const MAGIC: &[u8; 8] = b"MCJSTRN1";

/// Checkpoint bulk beside the model's state: `ballast.bin`, `mib` MiB of
/// incompressible bytes, so that the pipeline can be measured with
/// checkpoints of a real job's size. `fixed`: the same bytes in every
/// checkpoint (as frozen base weights would be), else new bytes each step.
#[derive(Debug, Clone, Copy)]
pub struct Ballast {
    pub mib: u64,
    pub fixed: bool,
}

pub const BALLAST_FILE: &str = "ballast.bin";

impl Ballast {
    /// Streams the ballast of `step` into `path` (1 MiB at a time), synced.
    fn write(&self, path: &Path, step: u64) -> anyhow::Result<()> {
        let mut f = std::io::BufWriter::with_capacity(
            1 << 20,
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        );
        let seed = if self.fixed { 0 } else { step };
        let mut x = (seed ^ 0x6261_6c6c_6173_74).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..self.mib {
            for word in block.chunks_exact_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                word.copy_from_slice(&x.to_le_bytes());
            }
            f.write_all(&block)?;
        }
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(())
    }
}

/// Writes `state` as a complete checkpoint under `root`, with `extra` files
/// and the `ballast` beside it (written before the manifest); returns its
/// directory.
pub fn write(
    root: &Path,
    state: &TrainState,
    fingerprint: &[u8; 32],
    extra: &[(&str, &[u8])],
    ballast: Option<Ballast>,
) -> anyhow::Result<PathBuf> {
    let dir = root.join(format!("step-{:012}", state.global_step));
    if dir.join(MANIFEST).exists() {
        // Already complete (an interval and a signal at the same step): the
        // directory now belongs to the agent and must not be touched.
        return Ok(dir);
    }
    if dir.exists() {
        // Left half-written by a run that was killed: never complete, redo it.
        fs::remove_dir_all(&dir)
            .with_context(|| format!("cannot remove the partial checkpoint {}", dir.display()))?;
    }
    fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the checkpoint directory {}", dir.display()))?;
    write_synced(&dir.join(STATE_FILE), &encode(state, fingerprint))?;
    for (name, bytes) in extra {
        write_synced(&dir.join(name), bytes)?;
    }
    if let Some(b) = ballast {
        b.write(&dir.join(BALLAST_FILE), state.global_step)?;
    }
    let manifest = serde_json::json!({
        "format": "mcjs-checkpoint/1",
        "epoch": state.epoch,
        "step": state.global_step,
        "files": [STATE_FILE],
    });
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    write_synced(&tmp, serde_json::to_string_pretty(&manifest)?.as_bytes())?;
    fs::rename(&tmp, dir.join(MANIFEST))?;
    // With the manifest in place the directory is the agent's, which may
    // already have stored and removed it: then there is nothing to sync.
    match File::open(&dir) {
        Ok(d) => match d.sync_all() {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.into()),
    }
    Ok(dir)
}

/// Reads the checkpoint in `dir` (the contract's restore directory).
pub fn read(dir: &Path, fingerprint: &[u8; 32]) -> anyhow::Result<TrainState> {
    if !dir.join(MANIFEST).exists() {
        bail!(
            "{} holds no {MANIFEST}: it is not a complete checkpoint",
            dir.display()
        );
    }
    let bytes = fs::read(dir.join(STATE_FILE))
        .with_context(|| format!("cannot read {}/{STATE_FILE}", dir.display()))?;
    decode(&bytes, fingerprint).with_context(|| format!("checkpoint {} is unusable", dir.display()))
}

fn write_synced(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(())
}

fn encode(s: &TrainState, fingerprint: &[u8; 32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + 4 * (s.order.len() + 2 * s.params.len()));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(fingerprint);
    out.extend_from_slice(&s.epoch.to_le_bytes());
    out.extend_from_slice(&s.step_in_epoch.to_le_bytes());
    out.extend_from_slice(&s.global_step.to_le_bytes());
    out.extend_from_slice(&s.rng.state.to_le_bytes());
    out.extend_from_slice(&(s.order.len() as u64).to_le_bytes());
    out.extend(s.order.iter().flat_map(|v| v.to_le_bytes()));
    out.extend_from_slice(&(s.params.len() as u64).to_le_bytes());
    out.extend(s.params.iter().flat_map(|v| v.to_le_bytes()));
    out.extend(s.velocity.iter().flat_map(|v| v.to_le_bytes()));
    out
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> anyhow::Result<&[u8]> {
        if self.0.len() < n {
            bail!("state file is truncated");
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn u32(&mut self) -> anyhow::Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into()?))
    }
    fn u64(&mut self) -> anyhow::Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into()?))
    }
    fn len(&mut self) -> anyhow::Result<usize> {
        let n = self.u64()?;
        if n > (self.0.len() / 4) as u64 {
            bail!("state file is truncated");
        }
        Ok(n as usize)
    }
}

fn decode(bytes: &[u8], fingerprint: &[u8; 32]) -> anyhow::Result<TrainState> {
    let mut r = Reader(bytes);
    if r.take(8)? != MAGIC {
        bail!("not an mcjs-trainer state file");
    }
    if r.take(32)? != fingerprint {
        bail!("it was written with other hyperparameters or other data; resume with the same ones");
    }
    let epoch = r.u32()?;
    let step_in_epoch = r.u32()?;
    let global_step = r.u64()?;
    let rng = Rng::new(r.u64()?);
    let n = r.len()?;
    let order = (0..n).map(|_| r.u32()).collect::<anyhow::Result<_>>()?;
    let p = r.len()?;
    let mut floats =
        |k| -> anyhow::Result<Vec<f32>> { (0..k).map(|_| Ok(f32::from_bits(r.u32()?))).collect() };
    let params = floats(p)?;
    let velocity = floats(p)?;
    if !r.0.is_empty() {
        bail!("state file has trailing bytes");
    }
    Ok(TrainState {
        epoch,
        step_in_epoch,
        global_step,
        rng,
        order,
        params,
        velocity,
    })
}
