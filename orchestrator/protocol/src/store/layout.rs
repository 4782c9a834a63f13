//! Where everything lives in a deployment's store: the one place paths are
//! made. [`super::ObjectKind::classify`] reads them back, and a test holds
//! the two together.
//!
//! ```text
//! specs/<sha256 hex>.json                                a job's spec (canonical JSON)
//! jobs/<job>/checkpoints/<step>-g<generation>-<nonce>/…  checkpoints
//! jobs/<job>/output/g<generation>/…                      the output, by the generation that wrote it
//! jobs/<job>/logs/g<generation>/<unix ms>-<seq>.jsonl    the job's printed lines, in chunks, by generation
//! users/<owner>/…                                        an owner's own data (inputs)
//! published/<wallet>/<spec hash>                         the specs a wallet published (the scheduler's)
//! ```

/// `specs/<hash>.json`: a job's spec, named by its canonical hash.
pub fn spec(hash: &[u8; 32]) -> String {
    format!("specs/{}.json", hex::encode(hash))
}

/// `jobs/<job>/checkpoints`: every checkpoint of a job, one directory each.
pub fn checkpoints(job: &str) -> String {
    format!("jobs/{job}/checkpoints")
}

/// A checkpoint's directory name: `<step, 20 digits>-g<generation>-<nonce,
/// 16 hex>`, so names sort by step and a re-run of a step never overwrites
/// a copy that may already be attested. [`super::parse_checkpoint_key`]
/// reads it back.
pub fn checkpoint_key(step: u64, generation: u32, nonce: u64) -> String {
    format!("{step:020}-g{generation}-{nonce:016x}")
}

/// `jobs/<job>/checkpoints/<key>`: one checkpoint's directory.
pub fn checkpoint(job: &str, key: &str) -> String {
    format!("{}/{key}", checkpoints(job))
}

/// `jobs/<job>/output/g<generation>`: the output the generation wrote.
pub fn output(job: &str, generation: u32) -> String {
    format!("jobs/{job}/output/g{generation}")
}

/// `jobs/<job>/logs`: every chunk of the job's printed lines.
pub fn logs(job: &str) -> String {
    format!("jobs/{job}/logs")
}

/// `jobs/<job>/logs/g<generation>/<unix ms, 13 digits>-<seq, 6 digits>.jsonl`:
/// one chunk of lines a generation's container printed. Named by when its
/// run began and its place in that run, so names sort in the order the
/// lines were printed and a restarted run never overwrites an earlier
/// one's chunks. [`super::parse_log_chunk`] reads it back.
pub fn log_chunk(job: &str, generation: u32, run_started_ms: u64, seq: u32) -> String {
    format!(
        "{}/g{generation}/{run_started_ms:013}-{seq:06}.jsonl",
        logs(job)
    )
}

/// `users/<owner>`: an owner's own space (inputs); only that wallet writes it.
pub fn user_space(owner: &str) -> String {
    format!("users/{owner}")
}

/// `users/<owner>/data/<name>`: an input uploaded with `mcjs job upload`.
pub fn user_data(owner: &str, name: &str) -> String {
    format!("{}/data/{name}", user_space(owner))
}

/// `published/<wallet>`: one marker per spec the wallet published through
/// the gateway (its quota); the scheduler's own, nobody else's.
pub fn published(wallet: &str) -> String {
    format!("published/{wallet}")
}

#[cfg(test)]
mod tests {
    use super::super::{ObjectKind, parse_checkpoint_key};
    use super::*;

    const JOB: &str = "9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin";
    const OWNER: &str = "4Nd1mBQtrMJVYVfKf2PJy9NZUZdTAsp7D4xWLs4gDB4T";

    #[test]
    fn every_path_the_layout_makes_reads_back_as_what_it_is() {
        let hash = [0xab; 32];
        let hex = hex::encode(hash);
        let key = checkpoint_key(1_234, 7, 0xfeed);
        assert_eq!(parse_checkpoint_key(&key), Some((1_234, 7)));
        let file = format!("{}/files/model.bin", checkpoint(JOB, &key));
        let out = format!("{}/model.bin", output(JOB, 3));
        let data = user_data(OWNER, "train.csv");
        let chunk = log_chunk(JOB, 4, 1_765_000_000_000, 12);
        let marker = format!("{}/{hex}", published(OWNER));
        let table: Vec<(String, ObjectKind<'_>)> = vec![
            (spec(&hash), ObjectKind::Spec { hash: &hex }),
            (
                checkpoints(JOB),
                ObjectKind::Checkpoint {
                    job: JOB,
                    key: None,
                    generation: None,
                    step: None,
                },
            ),
            (
                file.clone(),
                ObjectKind::Checkpoint {
                    job: JOB,
                    key: Some(&key),
                    generation: Some(7),
                    step: Some(1_234),
                },
            ),
            (
                out.clone(),
                ObjectKind::Output {
                    job: JOB,
                    generation: Some(3),
                },
            ),
            (
                chunk.clone(),
                ObjectKind::Logs {
                    job: JOB,
                    generation: Some(4),
                },
            ),
            (
                logs(JOB),
                ObjectKind::Logs {
                    job: JOB,
                    generation: None,
                },
            ),
            (data.clone(), ObjectKind::UserData { owner: OWNER }),
            // The scheduler's markers are nobody else's to touch.
            (marker.clone(), ObjectKind::Other),
        ];
        for (path, kind) in &table {
            assert_eq!(&ObjectKind::classify(path), kind, "{path}");
        }
    }

    #[test]
    fn log_chunks_read_back_and_sort_in_the_order_printed() {
        let chunks = [
            log_chunk(JOB, 1, 999_999_999_999, 999_999),
            log_chunk(JOB, 1, 1_765_000_000_000, 0),
            log_chunk(JOB, 1, 1_765_000_000_000, 1),
            log_chunk(JOB, 1, 1_765_000_000_000, 10),
            log_chunk(JOB, 1, 1_765_000_100_000, 0),
        ];
        let mut sorted = chunks.clone();
        sorted.sort();
        assert_eq!(sorted, chunks);
        assert_eq!(
            super::super::parse_log_chunk(&chunks[3]),
            Some((1, 1_765_000_000_000, 10))
        );
        assert_eq!(
            super::super::parse_log_chunk("jobs/J/logs/g1/x.jsonl"),
            None
        );
    }

    #[test]
    fn checkpoint_keys_sort_by_step() {
        let keys = [
            checkpoint_key(9, 3, u64::MAX),
            checkpoint_key(10, 1, 0),
            checkpoint_key(100, 2, 5),
            checkpoint_key(u64::MAX, 0, 1),
        ];
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(sorted, keys);
    }
}
