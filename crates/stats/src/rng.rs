//! A small seeded random number generator (xoshiro256++ seeded by SplitMix64), so
//! the simulator, the synthetic prompts and the arrival schedules are reproducible
//! on every platform, wasm included, without an OS entropy source.

/// xoshiro256++.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Self {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// A generator for sub-stream `stream` of `seed` (independent sequences per request).
    pub fn for_stream(seed: u64, stream: u64) -> Self {
        let mut x = seed ^ stream.wrapping_mul(0xD134_2543_DE82_EF95);
        Self::new(splitmix64(&mut x))
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[0]
            .wrapping_add(self.s[3])
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift; the tiny bias is irrelevant here.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Exponentially distributed with the given mean.
    pub fn exponential(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.next_f64()).ln()
    }

    /// Gamma-distributed gaps with this mean and coefficient of variation (`cv`:
    /// standard deviation over mean): shape `1 / cv²`, scale `mean · cv²`. `cv` 1
    /// is the exponential (Poisson arrivals), below 1 more regular, above 1
    /// burstier (vLLM's and AIPerf's `--burstiness` is `1 / cv²`). Marsaglia and
    /// Tsang's method; a shape below 1 is boosted (`gamma(k + 1) · U^(1/k)`).
    pub fn gamma_gap(&mut self, mean: f64, cv: f64) -> f64 {
        let shape = 1.0 / (cv * cv);
        let scale = mean * cv * cv;
        let (k, boost) = if shape < 1.0 {
            let u = 1.0 - self.next_f64();
            (shape + 1.0, u.powf(1.0 / shape))
        } else {
            (shape, 1.0)
        };
        let d = k - 1.0 / 3.0;
        let c = 1.0 / (9.0 * d).sqrt();
        loop {
            let x = self.normal();
            let v = (1.0 + c * x).powi(3);
            if v <= 0.0 {
                continue;
            }
            let u = 1.0 - self.next_f64();
            if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
                return d * v * scale * boost;
            }
        }
    }

    /// Standard normal (Marsaglia's polar method: no trigonometry, so the
    /// page's wasm carries no `sin`/`cos` for it).
    pub fn normal(&mut self) -> f64 {
        loop {
            let u = 2.0 * self.next_f64() - 1.0;
            let v = 2.0 * self.next_f64() - 1.0;
            let s = u * u + v * v;
            if s > 0.0 && s < 1.0 {
                return u * (-2.0 * s.ln() / s).sqrt();
            }
        }
    }
}

/// FNV-1a, 64 bits: the one hash of texts tokenscope keys things by (prompt
/// prefixes, prompt sets, the toy model's states). Not for secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Fnv1a {
    /// FNV's offset basis.
    pub const BASIS: u64 = 0xcbf2_9ce4_8422_2325;

    /// A hash started from the offset basis.
    pub fn new() -> Fnv1a {
        Fnv1a(Self::BASIS)
    }

    /// A hash started from the basis mixed with `seed`.
    pub fn seeded(seed: u64) -> Fnv1a {
        Fnv1a(Self::BASIS ^ seed)
    }

    /// Feed bytes.
    pub fn eat(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// The hash so far.
    pub fn value(self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_in_range() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..1000 {
            let x = a.next_f64();
            assert_eq!(x, b.next_f64());
            assert!((0.0..1.0).contains(&x));
            assert!(a.below(10) < 10);
            b.below(10);
        }
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
        assert_ne!(
            Rng::for_stream(1, 0).next_u64(),
            Rng::for_stream(1, 1).next_u64()
        );
    }

    #[test]
    fn gamma_gaps_have_their_mean_and_cv() {
        for cv in [0.5, 1.0, 2.0, 4.0] {
            let mut r = Rng::new(11);
            let n = 200_000;
            let xs: Vec<f64> = (0..n).map(|_| r.gamma_gap(10.0, cv)).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
            let got_cv = var.sqrt() / mean;
            assert!((mean - 10.0).abs() < 0.3, "cv {cv}: mean {mean}");
            assert!(
                (got_cv - cv).abs() < 0.05 * cv,
                "cv {cv}: measured {got_cv}"
            );
            assert!(xs.iter().all(|x| *x >= 0.0 && x.is_finite()));
        }
    }

    #[test]
    fn exponential_mean() {
        let mut r = Rng::new(3);
        let n = 20_000;
        let mean = (0..n).map(|_| r.exponential(5.0)).sum::<f64>() / f64::from(n);
        assert!((mean - 5.0).abs() < 0.2, "{mean}");
    }

    #[test]
    fn normal_has_mean_zero_and_unit_spread() {
        let mut r = Rng::new(11);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var.sqrt() - 1.0).abs() < 0.01, "{var}");
        let tail = xs.iter().filter(|x| x.abs() > 1.96).count() as f64 / n as f64;
        assert!((tail - 0.05).abs() < 0.003, "{tail}");
    }
}
