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
/// The longest `--follow` waits between looks while the store refuses them.
const FOLLOW_MAX_WAIT: Duration = Duration::from_secs(30);

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

/// Everything the job printed, as `mcjs job logs` shows it on a terminal
/// (each move marked), and the rows of its metrics file: what `mcjs job
/// output` keeps beside the output. Empty where nothing was shipped.
pub(crate) async fn transcript(
    client: &ChainClient,
    store: &Arc<dyn ObjectStore>,
    key: &Pubkey,
) -> anyhow::Result<(String, Vec<super::metrics::MetricsRow>)> {
    let moved = read_moves(client, key).await;
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut current: Option<u32> = None;
    for ((g, ..), path, size) in chunks(store, key, None).await? {
        let Some(lines) = read_chunk(store, &path, size).await? else {
            continue;
        };
        if current != Some(g) {
            text.push_str(&move_line(g, current.is_none(), moved.get(&g)));
            text.push('\n');
            current = Some(g);
        }
        rows.extend(super::metrics::metrics_rows(g, &lines));
        for line in &lines {
            let shown = match line.stream {
                LogStream::Metrics => continue,
                LogStream::Mcjs => format!("[mcjs] {}", printable(&line.text)),
                LogStream::Stdout | LogStream::Stderr => printable(&line.text).into_owned(),
            };
            text.push_str(&shown);
            text.push('\n');
        }
    }
    Ok((text, rows))
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

/// `--since`: a while ago, or a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Since {
    Ago(Duration),
    Step(u64),
}

/// Parses `--since`: a number with a unit (`s`, `m`, `h`, `d`) is a while
/// ago; a bare number is a step.
pub fn parse_since(text: &str) -> Result<Since, String> {
    let text = text.trim();
    let bad = || {
        format!("{text:?} is neither a while ago (30s, 10m, 2h, 1d) nor a step (a whole number)")
    };
    if let Ok(step) = text.parse::<u64>() {
        return Ok(Since::Step(step));
    }
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: u64 = number.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n.saturating_mul(60),
        "h" => n.saturating_mul(3_600),
        "d" => n.saturating_mul(86_400),
        _ => return Err(bad()),
    };
    Ok(Since::Ago(Duration::from_secs(secs)))
}

/// Which of the job's lines `mcjs job logs` prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct Filter {
    pub generation: Option<u32>,
    pub since: Option<Since>,
}

/// The first moment (unix ms) a line printed `since` may have: a while
/// before `now_ms`, or when the job's first checkpoint at or past the step
/// was attested (from its history; none yet: nothing is that late).
fn since_ms(since: Since, now_ms: u64, events: &[McjsEvent]) -> u64 {
    match since {
        Since::Ago(d) => now_ms.saturating_sub(d.as_millis() as u64),
        Since::Step(step) => events
            .iter()
            .find_map(|e| match e {
                McjsEvent::CheckpointAttested(a) if a.step >= step => {
                    Some(u64::try_from(a.at).unwrap_or(0).saturating_mul(1_000))
                }
                _ => None,
            })
            .unwrap_or(u64::MAX),
    }
}

pub async fn run(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    key: Pubkey,
    follow: bool,
    filter: Filter,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let (store, job) = super::open_owners_store(ctx, client, &key, store_args, "logs").await?;
    let generation = filter.generation;
    let from_ms = match filter.since {
        None => 0,
        Some(since) => {
            let events: Vec<McjsEvent> = client
                .job_history(&key)
                .await
                .with_context(|| format!("cannot read job {key}'s history for --since"))?
                .into_iter()
                .map(|e| e.event)
                .collect();
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            since_ms(since, now_ms, &events)
        }
    };

    let mut moved = read_moves(client, &key).await;
    let mut printed: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<u32> = None;
    let mut ended_seen = false;
    let mut wait = FOLLOW_EVERY;
    loop {
        // Following, a look the store or gateway refuses for now (its
        // request quota, an outage) is made again, less often while it
        // lasts; a single look fails with the store's error.
        let look = async {
            let mut read = Vec::new();
            for ((g, ..), path, size) in chunks(&store, &key, generation).await? {
                if printed.contains(&path) {
                    continue;
                }
                read.push((g, path.clone(), read_chunk(&store, &path, size).await?));
            }
            anyhow::Ok(read)
        };
        let found = match look.await {
            Ok(found) => {
                wait = FOLLOW_EVERY;
                found
            }
            Err(e) if follow => {
                wait = (wait * 2).min(FOLLOW_MAX_WAIT);
                eprintln!(
                    "[mcjs] the store did not answer ({e:#}); looking again in {} s",
                    wait.as_secs()
                );
                tokio::time::sleep(wait).await;
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut new = 0usize;
        for (g, path, lines) in found {
            let Some(lines) = lines else {
                printed.insert(path);
                continue;
            };
            let lines: Vec<LogLine> = lines.into_iter().filter(|l| l.at_ms >= from_ms).collect();
            if lines.is_empty() {
                printed.insert(path);
                continue;
            }
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
    fn since_is_a_while_ago_or_a_step() {
        assert_eq!(parse_since("480"), Ok(Since::Step(480)));
        assert_eq!(parse_since("90s"), Ok(Since::Ago(Duration::from_secs(90))));
        assert_eq!(parse_since("10m"), Ok(Since::Ago(Duration::from_secs(600))));
        assert_eq!(
            parse_since("2h"),
            Ok(Since::Ago(Duration::from_secs(7_200)))
        );
        assert_eq!(
            parse_since("1d"),
            Ok(Since::Ago(Duration::from_secs(86_400)))
        );
        for bad in ["", "m", "10x", "-5", "1.5h"] {
            assert!(parse_since(bad).is_err(), "{bad:?}");
        }
        let mut a = attested(1, 48);
        let mut b = attested(1, 96);
        if let (McjsEvent::CheckpointAttested(a), McjsEvent::CheckpointAttested(b)) =
            (&mut a, &mut b)
        {
            (a.at, b.at) = (100, 200);
        }
        let events = [assigned(1, 1), a, b];
        assert_eq!(
            since_ms(Since::Step(50), 0, &events),
            200_000,
            "the first at or past it"
        );
        assert_eq!(since_ms(Since::Step(48), 0, &events), 100_000);
        assert_eq!(
            since_ms(Since::Step(97), 0, &events),
            u64::MAX,
            "not reached yet"
        );
        assert_eq!(
            since_ms(Since::Ago(Duration::from_secs(10)), 60_000, &events),
            50_000
        );
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
