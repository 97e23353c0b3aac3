//! What the side-by-side benchmarks share: settings from the environment,
//! rounds that alternate the order of the contenders, and medians.
#![allow(dead_code)] // each bench uses its own subset

/// `key` from the environment, or `default`.
pub fn env_or(key: &str, default: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| default.to_string())
}

/// A number from the environment (`ROUNDS`, `RUNTIME_MS`, ...).
pub fn env_u64(key: &str, default: u64) -> u64 {
    env_or(key, &default.to_string())
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{key} must be a number"))
}

/// A comma-separated list of numbers from the environment (`THREADS`, ...).
pub fn list(key: &str, default: &str) -> Vec<u64> {
    env_or(key, default)
        .split(',')
        .map(|t| {
            t.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{key} must be comma-separated numbers"))
        })
        .collect()
}

/// The median of `v` (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs each of `contenders` once per round, reversing the order every other
/// round so that none always runs first, and returns `samples[contender]
/// [round]`: ratios should be taken within a round, then their median.
pub fn alternating<S>(
    rounds: usize,
    contenders: usize,
    mut run: impl FnMut(usize) -> S,
) -> Vec<Vec<S>> {
    let mut samples: Vec<Vec<S>> = (0..contenders).map(|_| Vec::new()).collect();
    for round in 0..rounds {
        let mut this_round: Vec<Option<S>> = (0..contenders).map(|_| None).collect();
        for k in 0..contenders {
            let i = if round % 2 == 0 {
                k
            } else {
                contenders - 1 - k
            };
            this_round[i] = Some(run(i));
        }
        for (i, s) in this_round.into_iter().enumerate() {
            samples[i].push(s.expect("every contender ran"));
        }
    }
    samples
}
