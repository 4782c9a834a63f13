//! A job that attacks the node it runs on. MCJS's isolation tests run it in
//! a real container, as a job owner could, and check that the node gives
//! nothing away and stays up. One attack per run:
//!
//! ```text
//! mcjs-hostile symlink-race HOST_PATH ROUNDS  checkpoints whose state.bin keeps
//!                                             turning into a symlink to HOST_PATH
//! mcjs-hostile fifo-manifest                  a checkpoint whose manifest is a FIFO
//! mcjs-hostile zero-manifest                  a manifest that is a symlink to /dev/zero
//! mcjs-hostile many-files N                   one checkpoint of N files
//! mcjs-hostile fill-disk MIB                  MIB MiB of junk in the checkpoint dir
//! mcjs-hostile log-flood                      prints long lines without end
//! ```
//!
//! Every attack but `symlink-race` then waits to be stopped.

use std::ffi::CString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const MANIFEST: &str = "mcjs-manifest.json";

fn dir(var: &str) -> PathBuf {
    PathBuf::from(std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set")))
}

fn manifest(step: u64) -> String {
    format!(r#"{{"format":"mcjs-checkpoint/1","epoch":0,"step":{step}}}"#)
}

/// A checkpoint directory with one honest file, its manifest not yet written.
fn checkpoint(root: &Path, step: u64) -> PathBuf {
    let d = root.join(format!("step-{step:012}"));
    fs::create_dir_all(&d).unwrap();
    fs::write(
        d.join("state.bin"),
        format!("honest state {step}\n").repeat(64),
    )
    .unwrap();
    d
}

/// Puts the manifest in place as the contract says: written, then renamed.
fn put_manifest(dir: &Path, step: u64) {
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    fs::write(&tmp, manifest(step)).unwrap();
    fs::rename(tmp, dir.join(MANIFEST)).unwrap();
}

fn wait_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or_else(|| {
        eprintln!("usage: see the top of examples/hostile/src/main.rs");
        std::process::exit(2)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ckpt = dir("MCJS_CHECKPOINT_DIR");
    match arg(&args, 0) {
        "symlink-race" => {
            let host = arg(&args, 1).to_string();
            let rounds: u64 = arg(&args, 2).parse().expect("ROUNDS");
            for step in 1..=rounds {
                let d = checkpoint(&ckpt, step);
                let state = d.join("state.bin");
                fs::copy(&state, d.join(".real")).unwrap();
                symlink(&host, d.join(".link")).unwrap();
                put_manifest(&d, step);
                // rename(2) swaps atomically: state.bin is always either the
                // honest file or a symlink to the host's file.
                let until = Instant::now() + Duration::from_millis(150);
                while Instant::now() < until {
                    let _ = fs::hard_link(d.join(".link"), d.join(".tmp"));
                    let _ = fs::rename(d.join(".tmp"), &state);
                    let _ = fs::hard_link(d.join(".real"), d.join(".tmp"));
                    let _ = fs::rename(d.join(".tmp"), &state);
                }
                let _ = fs::hard_link(d.join(".link"), d.join(".tmp"));
                let _ = fs::rename(d.join(".tmp"), &state);
            }
            println!("symlink-race: {rounds} rounds done");
        }
        "fifo-manifest" => {
            let d = checkpoint(&ckpt, 1);
            let path =
                CString::new(d.join(MANIFEST).into_os_string().into_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o644) }, 0, "mkfifo");
            println!("fifo-manifest: in place");
            wait_forever();
        }
        "zero-manifest" => {
            let d = checkpoint(&ckpt, 1);
            symlink("/dev/zero", d.join(MANIFEST)).unwrap();
            println!("zero-manifest: in place");
            wait_forever();
        }
        "many-files" => {
            let n: u64 = arg(&args, 1).parse().expect("N");
            let d = checkpoint(&ckpt, 1);
            for i in 0..n {
                fs::write(d.join(format!("f{i:08}")), b"x").unwrap();
            }
            put_manifest(&d, 1);
            println!("many-files: {n} files in place");
            wait_forever();
        }
        "fill-disk" => {
            let mib: usize = arg(&args, 1).parse().expect("MIB");
            let junk = ckpt.join("junk");
            fs::create_dir_all(&junk).unwrap();
            let mut f = fs::File::create(junk.join("fill.bin")).unwrap();
            let chunk = vec![0x5au8; 1 << 20];
            for _ in 0..mib {
                if f.write_all(&chunk).is_err() {
                    break;
                }
            }
            let _ = f.sync_all();
            println!("fill-disk: {mib} MiB written");
            wait_forever();
        }
        "log-flood" => {
            let line = "flood ".repeat(200);
            let mut out = std::io::stdout().lock();
            let mut n = 0u64;
            loop {
                if writeln!(out, "{n} {line}").is_err() {
                    wait_forever();
                }
                n += 1;
            }
        }
        other => {
            eprintln!("unknown attack {other:?}");
            std::process::exit(2);
        }
    }
}
