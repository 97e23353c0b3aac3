//! The per-thread pseudo-random generator every loop uses to pick its next
//! operation: xorshift64* (Vigna, "An experimental exploration of
//! Marsaglia's xorshift generators", 2016). A few cycles, no shared state,
//! and good enough to pick an operation or a key.

/// One thread's generator.
pub struct Rng(u64);

/// Parts per million: the unit of [`Rng::chance`].
pub const MILLION: u32 = 1_000_000;

impl Rng {
    /// A generator for thread (or stream) `seed`; different seeds give
    /// unrelated streams.
    pub fn new(seed: u64) -> Self {
        // Never zero: xorshift is stuck at zero.
        Rng(seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`), by multiply-shift of the high 32
    /// bits (no division on the hot path).
    #[inline]
    pub fn below(&mut self, n: u32) -> u32 {
        (((self.next() >> 32) * u64::from(n)) >> 32) as u32
    }

    /// An index in `0..n` (`0 < n <= u32::MAX`).
    #[inline]
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u32) as usize
    }

    /// True `ppm` times in a million (`ppm >= MILLION`: always).
    #[inline]
    pub fn chance(&mut self, ppm: u32) -> bool {
        self.below(MILLION) < ppm
    }

    /// True one time in `n` (`n > 0`).
    #[inline]
    pub fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chance_is_about_right_and_exact_at_the_ends() {
        let mut rng = Rng::new(7);
        let hits = (0..100_000).filter(|_| rng.chance(999_000)).count();
        assert!((99_700..=99_990).contains(&hits), "{hits}");
        assert!((0..1000).all(|_| rng.chance(MILLION)));
        assert!((0..1000).all(|_| !rng.chance(0)));
        assert!((0..1000).all(|_| rng.below(3) < 3));
    }
}
