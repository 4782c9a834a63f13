//! The training set: CSV rows `x1,...,xD,label` with label 0 or 1.

use crate::math::Rng;
use anyhow::{Context, bail};
use std::fmt::Write as _;
use std::path::Path;

#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    pub features: usize,
    /// Row-major, `rows * features` values.
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

impl Dataset {
    pub fn rows(&self) -> usize {
        self.y.len()
    }

    pub fn row(&self, i: usize) -> &[f32] {
        &self.x[i * self.features..(i + 1) * self.features]
    }

    /// A labelled set with a non-linear boundary (a product term a linear
    /// model cannot fit) and 3% label noise, all from `seed`.
    pub fn generate(seed: u64, rows: usize, features: usize) -> anyhow::Result<Self> {
        if features < 2 {
            bail!("--features must be at least 2 (got {features})");
        }
        if rows == 0 {
            bail!("--rows must be at least 1");
        }
        let mut rng = Rng::new(seed);
        let teacher: Vec<f32> = (0..features).map(|_| rng.symmetric(1.0)).collect();
        let mut x = Vec::with_capacity(rows * features);
        let mut y = Vec::with_capacity(rows);
        for _ in 0..rows {
            let row: Vec<f32> = (0..features).map(|_| rng.symmetric(1.0)).collect();
            let mut linear = 0.0f32;
            for (w, v) in teacher.iter().zip(&row) {
                linear += w * v;
            }
            let score = 0.5 * linear + 2.0 * row[0] * row[1];
            let mut label = if score > 0.0 { 1.0 } else { 0.0 };
            if rng.next_f32() < 0.03 {
                label = 1.0 - label;
            }
            x.extend_from_slice(&row);
            y.push(label);
        }
        Ok(Self { features, x, y })
    }

    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for i in 0..self.rows() {
            for v in self.row(i) {
                // `{}` prints the shortest string that parses back to the same
                // f32, so the file round-trips bit for bit.
                let _ = write!(out, "{v},");
            }
            let _ = writeln!(out, "{}", self.y[i] as u8);
        }
        out
    }

    pub fn read_csv(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the training data {}", path.display()))?;
        let mut features = None;
        let mut x = Vec::new();
        let mut y = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split(',').collect();
            let width = *features.get_or_insert(fields.len());
            if fields.len() != width || width < 2 {
                bail!(
                    "{}:{}: expected {} comma-separated fields (features then a 0/1 label), found {}",
                    path.display(),
                    n + 1,
                    width.max(2),
                    fields.len()
                );
            }
            for f in &fields[..width - 1] {
                let v: f32 = f.trim().parse().with_context(|| {
                    format!("{}:{}: {f:?} is not a number", path.display(), n + 1)
                })?;
                x.push(v);
            }
            let label = match fields[width - 1].trim() {
                "0" => 0.0,
                "1" => 1.0,
                other => bail!(
                    "{}:{}: the label must be 0 or 1, found {other:?}",
                    path.display(),
                    n + 1
                ),
            };
            y.push(label);
        }
        let Some(width) = features else {
            bail!("{} holds no data rows", path.display());
        };
        Ok(Self {
            features: width - 1,
            x,
            y,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trips_bit_for_bit() {
        let d = Dataset::generate(9, 50, 4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.csv");
        std::fs::write(&p, d.to_csv()).unwrap();
        assert_eq!(Dataset::read_csv(&p).unwrap(), d);
    }

    #[test]
    fn a_bad_label_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("d.csv");
        std::fs::write(&p, "0.5,0.25,1\n0.1,0.2,7\n").unwrap();
        let err = Dataset::read_csv(&p).unwrap_err().to_string();
        assert!(err.contains(":2: the label must be 0 or 1"), "{err}");
    }
}
