//! A small, portable random source for the generator: xoshiro256** seeded by SplitMix64, and Zipf
//! sampling from a cumulative table built with `+`, `/` and `sqrt` only (IEEE 754 rounds those exactly, unlike
//! `powf`), so a seed gives the same data on every machine.

/// xoshiro256** (Blackman and Vigna).
pub(crate) struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `0..n` (`n >= 1`; multiply-shift, no modulo bias worth measuring).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The exponents the generator uses, each computable exactly from `sqrt` and division.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Skew {
    /// s = 0.5: `k^-0.5 = 1 / sqrt(k)`.
    S050,
    /// s = 0.75: `k^-0.75 = 1 / (sqrt(k) * sqrt(sqrt(k)))`.
    S075,
    /// s = 1.125: `k^-1.125 = 1 / (k * sqrt(sqrt(sqrt(k))))`.
    S1125,
}

/// Zipf over `1..=n`: P(k) proportional to `k^-s`.
pub(crate) struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: i64, skew: Skew) -> Self {
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = (1..=n.max(1))
            .map(|k| {
                let k = k as f64;
                acc += match skew {
                    Skew::S050 => 1.0 / k.sqrt(),
                    Skew::S075 => 1.0 / (k.sqrt() * k.sqrt().sqrt()),
                    Skew::S1125 => 1.0 / (k * k.sqrt().sqrt().sqrt()),
                };
                acc
            })
            .collect();
        let total = acc;
        cdf.iter_mut().for_each(|c| *c /= total);
        Self { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> i64 {
        let u = rng.unit();
        (self
            .cdf
            .partition_point(|c| *c <= u)
            .min(self.cdf.len() - 1)
            + 1) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_stream_and_skew() {
        let mut r = Rng::new(7);
        let first: Vec<u64> = (0..3).map(|_| r.below(1000)).collect();
        let mut again = Rng::new(7);
        assert_eq!(first, (0..3).map(|_| again.below(1000)).collect::<Vec<_>>());
        let z = Zipf::new(100, Skew::S1125);
        let mut counts = [0u32; 101];
        for _ in 0..20_000 {
            counts[z.sample(&mut r) as usize] += 1;
        }
        assert!(counts[1] > counts[2] && counts[2] > counts[10] && counts[10] > counts[100]);
        assert_eq!(counts[0], 0);
    }
}
