//! `mcjs job logs`: what a job printed, across every node it ran on, read
//! from the store where the agents shipped it (`mcjs_runtime::logs`). Only
//! the job's owner may read it through the gateway.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::TryStreamExt;
use mcjs_client::{ChainClient, Pubkey, Signer};
use mcjs_protocol::store::{Role, StoreUrl, layout, parse_log_chunk};
use mcjs_runtime::logs::{LogLine, LogStream, MAX_CHUNK_BYTES, parse_chunk};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use crate::chain::Ctx;
use crate::cmd::job::StoreArgs;
use crate::{EXIT_OK, GlobalArgs};

/// How often `--follow` looks for new chunks (the agent ships every 2 s).
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

/// A chunk of the job's logs: (generation, run start, place in the run).
type ChunkKey = (u32, u64, u32);

/// Every chunk of the job's logs in the store, in the order printed, with
/// its size.
async fn chunks(
    store: &Arc<dyn ObjectStore>,
    job: &Pubkey,
    generation: Option<u32>,
) -> anyhow::Result<Vec<(ChunkKey, String, u64)>> {
    let prefix = ObjectPath::from(layout::logs(&job.to_string()));
    let mut found: Vec<(ChunkKey, String, u64)> = store
        .list(Some(&prefix))
        .map_ok(|m| (m.location.to_string(), m.size))
        .try_collect::<Vec<(String, u64)>>()
        .await
        .context("cannot list the job's logs in the store")?
        .into_iter()
        .filter_map(|(path, size)| parse_log_chunk(&path).map(|key| (key, path, size)))
        .filter(|((g, ..), ..)| generation.is_none_or(|want| *g == want))
        .collect();
    found.sort();
    Ok(found)
}

/// Prints one line as `--output` asks.
fn print_line(global: &GlobalArgs, generation: u32, line: &LogLine) {
    if global.output.is_json() {
        println!(
            "{}",
            serde_json::json!({
                "generation": generation,
                "at_ms": line.at_ms,
                "stream": line.stream,
                "line": line.text,
            })
        );
        return;
    }
    match line.stream {
        LogStream::Mcjs => println!("[mcjs] {}", line.text),
        LogStream::Stdout | LogStream::Stderr => println!("{}", line.text),
    }
}

/// Where a new generation begins, said in the stream (on stderr in JSON
/// mode, where every line is a JSON object).
fn print_move(global: &GlobalArgs, generation: u32, first: bool) {
    let what = if first {
        format!("— generation {generation} —")
    } else {
        format!(
            "— generation {generation}: the job moved, and resumed from its last attested checkpoint —"
        )
    };
    if global.output.is_json() {
        eprintln!("{what}");
    } else {
        println!("{what}");
    }
}

pub async fn run(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    key: Pubkey,
    follow: bool,
    generation: Option<u32>,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let Some(job) = client.job(&key).await? else {
        bail!("no job at {key} on {}: check the address", client.url());
    };
    let wallet = ctx.wallet()?;
    let url = store_args.resolve(ctx).await?;
    if matches!(url, StoreUrl::S3(_)) && job.owner != wallet.pubkey() {
        bail!(
            "job {key} belongs to {}; only its owner may read its logs: sign with the owner's keypair (-k)",
            job.owner
        );
    }
    let identity = crate::store::identity(Role::Owner, &wallet);
    let store = crate::store::open(&url, &store_args.scheduler(ctx), identity)?;

    let mut printed: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<u32> = None;
    let mut ended_seen = false;
    loop {
        let found = chunks(&store, &key, generation).await?;
        let mut new = 0usize;
        for ((g, ..), path, size) in found {
            if printed.contains(&path) {
                continue;
            }
            if size > MAX_CHUNK_BYTES {
                // The node writes these objects: one no agent would write
                // is said, not read into memory.
                eprintln!(
                    "[mcjs] {path} is {size} bytes, over the {MAX_CHUNK_BYTES} a chunk of logs can be: skipped"
                );
                printed.insert(path);
                continue;
            }
            let bytes = store
                .get(&ObjectPath::from(path.as_str()))
                .await
                .with_context(|| format!("cannot read {path} from the store"))?
                .bytes()
                .await
                .with_context(|| format!("cannot read {path} from the store"))?;
            if current != Some(g) {
                print_move(global, g, current.is_none());
                current = Some(g);
            }
            for line in parse_chunk(&bytes) {
                print_line(global, g, &line);
            }
            printed.insert(path);
            new += 1;
        }
        if !follow {
            break;
        }
        // A finished job's agent ships its last lines before it reports
        // the end: one more look after the chain says so.
        let ended = client
            .job(&key)
            .await?
            .is_none_or(|j| j.state.is_terminal());
        if ended && new == 0 && ended_seen {
            break;
        }
        ended_seen = ended;
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
    if printed.is_empty() && !global.output.is_json() {
        eprintln!(
            "job {key} has no logs in the store yet{}",
            if job.state.is_terminal() {
                " (a job that ran before its agent shipped logs, or whose logs were removed)"
            } else {
                ": its lines appear within a few seconds of being printed"
            }
        );
    }
    Ok(EXIT_OK)
}
