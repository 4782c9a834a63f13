//! `mcjs job metrics`: the progress a job wrote to its metrics file
//! (`MCJS_METRICS_FILE`, one JSON object per line), across every node it
//! ran on, read from the store where the agents shipped it beside its
//! printed lines. Only the job's owner may read it through the gateway.

use std::collections::BTreeMap;

use mcjs_client::{ChainClient, Pubkey};
use mcjs_runtime::logs::{LogLine, LogStream};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::chain::Ctx;
use crate::cmd::job::StoreArgs;
use crate::cmd::job::logs::{chunks, read_chunk};
use crate::{EXIT_OK, GlobalArgs};

/// One line of the job's metrics file, as the node read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricsRow {
    pub generation: u32,
    /// When the node read it (unix ms).
    pub at_ms: u64,
    pub metrics: Map<String, Value>,
}

/// The metrics lines among `lines` (of `generation`), as rows.
pub fn metrics_rows(generation: u32, lines: &[LogLine]) -> Vec<MetricsRow> {
    lines
        .iter()
        .filter(|line| line.stream == LogStream::Metrics)
        .filter_map(|line| match serde_json::from_str(&line.text) {
            Ok(Value::Object(metrics)) => Some(MetricsRow {
                generation,
                at_ms: line.at_ms,
                metrics,
            }),
            _ => None,
        })
        .collect()
}

/// Every metrics line of the job in the store, in the order written.
pub async fn rows(
    store: &std::sync::Arc<dyn object_store::ObjectStore>,
    key: &Pubkey,
    generation: Option<u32>,
) -> anyhow::Result<Vec<MetricsRow>> {
    let mut out = Vec::new();
    for ((g, ..), path, size) in chunks(store, key, generation).await? {
        if let Some(lines) = read_chunk(store, &path, size).await? {
            out.extend(metrics_rows(g, &lines));
        }
    }
    Ok(out)
}

/// The columns of a table of `rows`: `step` and `epoch` first where the
/// job writes them, then every other key in the order first written.
pub fn columns(rows: &[MetricsRow]) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows {
        for key in row.metrics.keys() {
            let next = seen.len();
            seen.entry(key.clone()).or_insert(next);
        }
    }
    let mut keys: Vec<(usize, String)> = seen.into_iter().map(|(k, i)| (i, k)).collect();
    let first = |k: &str| match k {
        "step" => 0,
        "epoch" => 1,
        _ => 2,
    };
    keys.sort_by_key(|(i, k)| (first(k), *i));
    keys.into_iter().map(|(_, k)| k).collect()
}

/// A value as a table cell: numbers and booleans as written, strings bare,
/// anything else as JSON; absent is empty.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    }
}

/// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line
/// break, a quote doubled.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `rows` as CSV: a header (`generation`, `at_ms`, then the columns), one
/// record per line written.
pub fn to_csv(rows: &[MetricsRow]) -> String {
    let columns = columns(rows);
    let mut out = String::new();
    let header: Vec<String> = ["generation", "at_ms"]
        .into_iter()
        .map(String::from)
        .chain(columns.iter().map(|c| csv_field(c)))
        .collect();
    out.push_str(&header.join(","));
    out.push('\n');
    for row in rows {
        let mut fields = vec![row.generation.to_string(), row.at_ms.to_string()];
        fields.extend(columns.iter().map(|c| csv_field(&cell(row.metrics.get(c)))));
        out.push_str(&fields.join(","));
        out.push('\n');
    }
    out
}

/// `rows` as an aligned table for a terminal.
pub fn to_table(rows: &[MetricsRow]) -> String {
    let columns = columns(rows);
    let mut grid: Vec<Vec<String>> = vec![
        ["gen"]
            .into_iter()
            .map(String::from)
            .chain(columns.iter().cloned())
            .collect(),
    ];
    for row in rows {
        let mut line = vec![row.generation.to_string()];
        line.extend(
            columns
                .iter()
                .map(|c| super::logs::printable(&cell(row.metrics.get(c))).into_owned()),
        );
        grid.push(line);
    }
    let widths: Vec<usize> = (0..=columns.len())
        .map(|i| grid.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    grid.iter()
        .map(|r| {
            r.iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:<w$}"))
                .collect::<Vec<_>>()
                .join("  ")
                .trim_end()
                .to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub async fn run(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    key: Pubkey,
    generation: Option<u32>,
    csv: bool,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let (store, job) =
        crate::cmd::job::open_owners_store(ctx, client, &key, store_args, "metrics").await?;
    let rows = rows(&store, &key, generation).await?;
    if global.output.is_json() {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else if csv {
        print!("{}", to_csv(&rows));
    } else if rows.is_empty() {
        eprintln!(
            "job {key} has no metrics in the store{}: a job writes them as JSON lines to the file MCJS_METRICS_FILE names (docs/job-contract.md)",
            if job.state.is_terminal() { "" } else { " yet" }
        );
    } else {
        println!("{}", to_table(&rows));
    }
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(generation: u32, json: &str) -> MetricsRow {
        let Value::Object(metrics) = serde_json::from_str(json).unwrap() else {
            panic!("an object");
        };
        MetricsRow {
            generation,
            at_ms: 1_000 + u64::from(generation),
            metrics,
        }
    }

    #[test]
    fn step_and_epoch_lead_and_other_keys_keep_their_first_order() {
        let rows = [
            row(1, r#"{"loss": 0.5, "step": 10, "lr": 0.1}"#),
            row(
                2,
                r#"{"epoch": 1, "step": 20, "loss": 0.4, "note": "a, \"b\""}"#,
            ),
        ];
        assert_eq!(columns(&rows), ["step", "epoch", "loss", "lr", "note"]);
        assert_eq!(
            to_csv(&rows),
            "generation,at_ms,step,epoch,loss,lr,note\n\
             1,1001,10,,0.5,0.1,\n\
             2,1002,20,1,0.4,,\"a, \"\"b\"\"\"\n"
        );
        let table = to_table(&rows);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "gen  step  epoch  loss  lr   note");
        assert_eq!(lines[1], "1    10           0.5   0.1");
        assert_eq!(lines[2], "2    20    1      0.4        a, \"b\"");
    }
}
