//! A one-hidden-layer MLP (ReLU, sigmoid output, cross-entropy loss) trained
//! by minibatch SGD with momentum. Single-threaded, fixed summation order.

use crate::data::Dataset;
use crate::math::{Rng, sigmoid};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hyper {
    pub features: usize,
    pub hidden: usize,
    pub batch_size: usize,
    pub lr: f32,
    pub momentum: f32,
}

impl Hyper {
    /// Layout of the flat parameter vector: W1 (hidden x features), b1
    /// (hidden), W2 (hidden), b2 (1).
    pub fn param_count(&self) -> usize {
        self.hidden * self.features + self.hidden + self.hidden + 1
    }

    pub fn steps_per_epoch(&self, rows: usize) -> u32 {
        rows.div_ceil(self.batch_size) as u32
    }
}

/// Everything that determines the rest of the run: a checkpoint stores all of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainState {
    /// Epochs fully completed.
    pub epoch: u32,
    /// Steps completed within the current epoch.
    pub step_in_epoch: u32,
    pub global_step: u64,
    pub rng: Rng,
    /// Sample order of the current epoch (drawn from `rng` when it began).
    pub order: Vec<u32>,
    pub params: Vec<f32>,
    pub velocity: Vec<f32>,
}

impl TrainState {
    pub fn init(h: &Hyper, rows: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        let mut params = Vec::with_capacity(h.param_count());
        let a1 = (6.0f32 / (h.features + h.hidden) as f32).sqrt();
        params.extend((0..h.hidden * h.features).map(|_| rng.symmetric(a1)));
        params.extend(std::iter::repeat_n(0.0, h.hidden));
        let a2 = (6.0f32 / (h.hidden + 1) as f32).sqrt();
        params.extend((0..h.hidden).map(|_| rng.symmetric(a2)));
        params.push(0.0);
        let velocity = vec![0.0; params.len()];
        let mut order: Vec<u32> = (0..rows as u32).collect();
        rng.shuffle(&mut order);
        Self {
            epoch: 0,
            step_in_epoch: 0,
            global_step: 0,
            rng,
            order,
            params,
            velocity,
        }
    }

    /// One SGD step on the next minibatch of the current epoch; starts the next
    /// epoch (with a fresh shuffle) when this one is done.
    pub fn step(&mut self, h: &Hyper, data: &Dataset) {
        let start = self.step_in_epoch as usize * h.batch_size;
        let end = (start + h.batch_size).min(data.rows());
        let mut grad = vec![0.0f32; self.params.len()];
        let mut hidden = vec![0.0f32; h.hidden];
        let (w1, rest) = self.params.split_at(h.hidden * h.features);
        let (b1, rest) = rest.split_at(h.hidden);
        let (w2, b2) = rest.split_at(h.hidden);
        for &i in &self.order[start..end] {
            let x = data.row(i as usize);
            for j in 0..h.hidden {
                let mut pre = b1[j];
                for (w, v) in w1[j * h.features..(j + 1) * h.features].iter().zip(x) {
                    pre += w * v;
                }
                hidden[j] = pre.max(0.0);
            }
            let mut z = b2[0];
            for (w, v) in w2.iter().zip(&hidden) {
                z += w * v;
            }
            let dz = sigmoid(z) - data.y[i as usize];
            let (g_w1, g_rest) = grad.split_at_mut(h.hidden * h.features);
            let (g_b1, g_rest) = g_rest.split_at_mut(h.hidden);
            let (g_w2, g_b2) = g_rest.split_at_mut(h.hidden);
            for j in 0..h.hidden {
                g_w2[j] += dz * hidden[j];
                if hidden[j] > 0.0 {
                    let dh = dz * w2[j];
                    g_b1[j] += dh;
                    for (g, v) in g_w1[j * h.features..(j + 1) * h.features].iter_mut().zip(x) {
                        *g += dh * v;
                    }
                }
            }
            g_b2[0] += dz;
        }
        let scale = 1.0 / (end - start) as f32;
        for ((p, v), g) in self.params.iter_mut().zip(&mut self.velocity).zip(&grad) {
            *v = h.momentum * *v + g * scale;
            *p -= h.lr * *v;
        }
        self.global_step += 1;
        self.step_in_epoch += 1;
        if self.step_in_epoch == h.steps_per_epoch(data.rows()) {
            self.epoch += 1;
            self.step_in_epoch = 0;
            self.rng.shuffle(&mut self.order);
        }
    }

    /// (accuracy, Brier score) on `data`.
    pub fn evaluate(&self, h: &Hyper, data: &Dataset) -> (f64, f64) {
        let (w1, rest) = self.params.split_at(h.hidden * h.features);
        let (b1, rest) = rest.split_at(h.hidden);
        let (w2, b2) = rest.split_at(h.hidden);
        let mut correct = 0usize;
        let mut brier = 0.0f64;
        for i in 0..data.rows() {
            let x = data.row(i);
            let mut z = b2[0];
            for j in 0..h.hidden {
                let mut pre = b1[j];
                for (w, v) in w1[j * h.features..(j + 1) * h.features].iter().zip(x) {
                    pre += w * v;
                }
                z += w2[j] * pre.max(0.0);
            }
            let p = sigmoid(z);
            if (p >= 0.5) == (data.y[i] >= 0.5) {
                correct += 1;
            }
            let d = f64::from(p - data.y[i]);
            brier += d * d;
        }
        let n = data.rows() as f64;
        (correct as f64 / n, brier / n)
    }
}
