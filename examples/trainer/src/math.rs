//! Arithmetic that gives the same bits on every platform.
//!
//! `f64::exp` and friends call the platform's libm, and glibc and musl do not
//! round alike: a model trained on the host and one trained in the (musl)
//! container would differ in the last bits. Everything here uses only
//! `+ - * /` and `sqrt`, which IEEE 754 defines exactly, in a fixed order.

/// SplitMix64: tiny, fast, and its whole state is one `u64`, which is what the
/// checkpoint stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rng {
    pub state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 24 bits, exactly representable as f32.
    pub fn next_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / (1u64 << 24) as f32)
    }

    /// Uniform in [-a, a).
    pub fn symmetric(&mut self, a: f32) -> f32 {
        (self.next_f32() * 2.0 - 1.0) * a
    }

    /// Uniform in [0, n) without modulo bias worth caring about for n << 2^32.
    pub fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * u64::from(n)) >> 32) as u32
    }

    pub fn shuffle(&mut self, items: &mut [u32]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u32 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// e^x by range reduction to r in [-ln2/2, ln2/2] and a degree-13 Taylor
/// polynomial (error well under one f64 ulp there, and the result is rounded
/// to f32 by the caller).
pub fn exp(x: f64) -> f64 {
    let x = x.clamp(-80.0, 80.0);
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let k = round_half_away(x / std::f64::consts::LN_2);
    let r = (x - k * LN2_HI) - k * LN2_LO;
    let mut term = 1.0;
    let mut sum = 1.0;
    for n in 1..=13 {
        term = term * r / f64::from(n);
        sum += term;
    }
    // 2^k built from its bit pattern: k is within [-116, 116] here.
    let scale = f64::from_bits(((k as i64 + 1023) as u64) << 52);
    sum * scale
}

fn round_half_away(x: f64) -> f64 {
    // `f64::round` is exact and libm-free in Rust (an intrinsic), but spell it
    // out so the whole function visibly depends on nothing else.
    let t = x.trunc();
    if (x - t).abs() >= 0.5 {
        t + x.signum()
    } else {
        t
    }
}

pub fn sigmoid(z: f32) -> f32 {
    (1.0 / (1.0 + exp(-f64::from(z)))) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_matches_the_platform_within_a_few_ulps() {
        for i in -400..=400 {
            let x = f64::from(i) / 10.0;
            let ours = exp(x);
            let libm = x.exp();
            assert!(
                ((ours - libm) / libm).abs() < 1e-14,
                "exp({x}): {ours} vs {libm}"
            );
        }
    }

    #[test]
    fn shuffle_is_a_permutation_and_depends_on_the_seed() {
        let mut a: Vec<u32> = (0..100).collect();
        let mut b = a.clone();
        Rng::new(1).shuffle(&mut a);
        Rng::new(2).shuffle(&mut b);
        assert_ne!(a, b);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, (0..100).collect::<Vec<u32>>());
    }
}
