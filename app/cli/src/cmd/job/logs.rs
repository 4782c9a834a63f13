//! `mcjs job logs`: what a job printed, across every node it ran on, read
//! from the store where the agents shipped it (`mcjs_runtime::logs`). Only
//! the job's owner may read it through the gateway.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use futures_util::TryStreamExt;
use mcjs_client::history::McjsEvent;
use mcjs_client::{ChainClient, Pubkey};
use mcjs_protocol::store::{layout, parse_log_chunk};
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
pub(super) async fn chunks(
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

/// The lines of one chunk of the job's logs, read from the store; `None`
/// (said on stderr) for an object larger than any agent writes.
pub(super) async fn read_chunk(
    store: &Arc<dyn ObjectStore>,
    path: &str,
    size: u64,
) -> anyhow::Result<Option<Vec<LogLine>>> {
    if size > MAX_CHUNK_BYTES {
        // The node writes these objects: one no agent would write is
        // said, not read into memory.
        eprintln!(
            "[mcjs] {path} is {size} bytes, over the {MAX_CHUNK_BYTES} a chunk of logs can be: skipped"
        );
        return Ok(None);
    }
    let bytes = store
        .get(&ObjectPath::from(path))
        .await
        .with_context(|| format!("cannot read {path} from the store"))?
        .bytes()
        .await
        .with_context(|| format!("cannot read {path} from the store"))?;
    Ok(Some(parse_chunk(&bytes)))
}

/// Prints one line as `--output` asks (the job's metrics lines are
/// `mcjs job metrics`'s).
fn print_line(global: &GlobalArgs, generation: u32, line: &LogLine) {
    if line.stream == LogStream::Metrics {
        return;
    }
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
        LogStream::Mcjs => println!("[mcjs] {}", printable(&line.text)),
        LogStream::Stdout | LogStream::Stderr => println!("{}", printable(&line.text)),
        LogStream::Metrics => {}
    }
}

/// A line as a terminal shows it safely: a control character (an escape
/// sequence that would move the cursor, retitle the window or clear the
/// screen, a carriage return that would hide what came before) becomes
/// U+FFFD; a tab stays. JSON output keeps the line as printed.
pub(super) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(|c| c.is_control() && c != '\t') {
        text.chars()
            .map(|c| {
                if c.is_control() && c != '\t' {
                    '\u{FFFD}'
                } else {
                    c
                }
            })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// Where an assignment ran and where it began, from the job's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Move {
    pub node: Pubkey,
    /// The step of the checkpoint it resumed from; `None`: from the start.
    pub resumed_from: Option<u64>,
}

/// Each generation's node and starting point, from the job's events in
/// order: an assignment resumes from the last checkpoint attested before
/// it, or from where a proven-wrong interval sent the job back.
pub(super) fn moves(events: &[McjsEvent]) -> BTreeMap<u32, Move> {
    let mut out = BTreeMap::new();
    let mut last: Option<u64> = None;
    for event in events {
        match event {
            McjsEvent::CheckpointAttested(e) => last = Some(e.step),
            McjsEvent::VerificationResolved(e) if e.rolled_back => {
                last = e.restore_point.map(|c| c.step);
            }
            McjsEvent::JobAssigned(e) => {
                out.insert(
                    e.generation,
                    Move {
                        node: e.node,
                        resumed_from: last,
                    },
                );
            }
            _ => {}
        }
    }
    out
}

/// The job's moves as its history says, or none where it cannot be read
/// (the stream is then marked without them).
async fn read_moves(client: &ChainClient, key: &Pubkey) -> BTreeMap<u32, Move> {
    match client.job_history(key).await {
        Ok(history) => {
            let events: Vec<McjsEvent> = history.into_iter().map(|e| e.event).collect();
            moves(&events)
        }
        Err(_) => BTreeMap::new(),
    }
}

/// How a generation's start reads in the stream.
pub(super) fn move_line(generation: u32, first: bool, how: Option<&Move>) -> String {
    match (how, first) {
        (Some(m), _) => match m.resumed_from {
            Some(step) => format!(
                "— generation {generation} on node {}, resumed from step {step} —",
                m.node
            ),
            None => format!(
                "— generation {generation} on node {}, from the start —",
                m.node
            ),
        },
        (None, true) => format!("— generation {generation} —"),
        (None, false) => format!(
            "— generation {generation}: the job moved, and resumed from its last attested checkpoint —"
        ),
    }
}

/// Where a new generation begins, said in the stream (on stderr in JSON
/// mode, where every line is a JSON object).
fn print_move(global: &GlobalArgs, generation: u32, first: bool, how: Option<&Move>) {
    let what = move_line(generation, first, how);
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
    let (store, job) = super::open_owners_store(ctx, client, &key, store_args, "logs").await?;

    let mut moved = read_moves(client, &key).await;
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
            let Some(lines) = read_chunk(&store, &path, size).await? else {
                printed.insert(path);
                continue;
            };
            if current != Some(g) {
                if !moved.contains_key(&g) {
                    moved = read_moves(client, &key).await;
                }
                print_move(global, g, current.is_none(), moved.get(&g));
                current = Some(g);
            }
            for line in lines {
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

#[cfg(test)]
mod tests {
    use super::*;
    use mcjs::events::{CheckpointAttested, JobAssigned, VerificationResolved};

    fn assigned(generation: u32, node: u8) -> McjsEvent {
        McjsEvent::JobAssigned(JobAssigned {
            job: Pubkey::default(),
            node: Pubkey::new_from_array([node; 32]),
            provider: Pubkey::default(),
            generation,
            rate_per_hour: 0,
            by: Pubkey::default(),
            at: 0,
        })
    }

    fn attested(generation: u32, step: u64) -> McjsEvent {
        McjsEvent::CheckpointAttested(CheckpointAttested {
            job: Pubkey::default(),
            node: Pubkey::default(),
            generation,
            epoch: 0,
            step,
            checkpoint_hash: [0; 32],
            chain: [0; 32],
            accrued: 0,
            by: Pubkey::default(),
            at: 0,
        })
    }

    #[test]
    fn control_characters_are_not_sent_to_the_terminal() {
        assert_eq!(printable("loss\t0.5"), "loss\t0.5");
        assert_eq!(
            printable("\u{1b}]0;owned\u{7}step 3\r"),
            "\u{FFFD}]0;owned\u{FFFD}step 3\u{FFFD}"
        );
    }

    /// Each move names its node and the step it resumed from: the last
    /// attested, or where a proven-wrong interval sent the job back.
    #[test]
    fn each_generation_is_marked_with_its_node_and_where_it_resumed() {
        let rolled_back = |to: Option<u64>| {
            McjsEvent::VerificationResolved(VerificationResolved {
                job: Pubkey::default(),
                verification: Pubkey::default(),
                interval: 3,
                outcome: mcjs::state::VerificationOutcome::ProviderWrong,
                slashed_provider: None,
                slashed: 0,
                fees: 0,
                refund: 0,
                rolled_back: true,
                restore_point: to.map(|step| mcjs::state::CheckpointRecord {
                    hash: [0; 32],
                    epoch: 0,
                    step,
                    time: 0,
                    generation: 1,
                }),
                by: Pubkey::default(),
                at: 0,
            })
        };
        let events = [
            assigned(1, 1),
            attested(1, 48),
            attested(1, 96),
            assigned(2, 2),
            attested(2, 144),
            rolled_back(Some(48)),
            assigned(3, 3),
            rolled_back(None),
            assigned(4, 4),
        ];
        let m = moves(&events);
        let resumed: Vec<Option<u64>> = m.values().map(|m| m.resumed_from).collect();
        assert_eq!(resumed, [None, Some(96), Some(48), None]);
        assert_eq!(m[&3].node, Pubkey::new_from_array([3; 32]));
        assert_eq!(
            move_line(2, false, m.get(&2)),
            format!(
                "— generation 2 on node {}, resumed from step 96 —",
                m[&2].node
            )
        );
        assert_eq!(
            move_line(1, true, m.get(&1)),
            format!("— generation 1 on node {}, from the start —", m[&1].node)
        );
        assert_eq!(move_line(3, true, None), "— generation 3 —");
    }
}
