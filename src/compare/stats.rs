//! The statistics of a before/after comparison of repeated runs, pure functions.
//!
//! - Welch's t-test on the runs (unequal variances): with the default 3 counted runs a
//!   side it can reach p < 0.05, where Mann-Whitney U cannot (its smallest two-sided p
//!   for 3 vs 3 is 0.1). Student's t distribution through the regularized incomplete
//!   beta function (continued fraction, modified Lentz).
//! - A bootstrap confidence interval of the change of the median (after / before - 1),
//!   resampling each side's runs with replacement, from a fixed-seed SplitMix64 so the
//!   same inputs always give the same interval. With 3 runs it is coarse: said so.
//! - Runs needed: the smallest n per side for which a two-sided Welch test at α = 0.05
//!   would detect the observed mean difference with 80 % power, given the pooled
//!   observed spread (t quantiles, not the normal approximation).

/// Significance level of the verdicts.
pub const ALPHA: f64 = 0.05;
/// Power the runs-needed estimate aims for.
pub const POWER: f64 = 0.8;
/// Bootstrap resamples.
pub const BOOTSTRAP_ROUNDS: usize = 2000;
/// Largest number of runs the estimate reports; beyond it the difference is noise.
pub const MAX_RUNS_NEEDED: u32 = 10_000;

/// Welch's t-test: (t, degrees of freedom, two-sided p); None with fewer than 2 values
/// on a side. Two constant, equal sides give p = 1; constant, different sides p = 0.
pub fn welch(a: &[f64], b: &[f64]) -> Option<(f64, f64, f64)> {
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let (ma, va) = mean_var(a);
    let (mb, vb) = mean_var(b);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let se2 = va / na + vb / nb;
    if se2 <= 0.0 {
        let p = if (ma - mb).abs() > 0.0 { 0.0 } else { 1.0 };
        return Some((0.0, na + nb - 2.0, p));
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / ((va / na).powi(2) / (na - 1.0) + (vb / nb).powi(2) / (nb - 1.0));
    Some((t, df, two_sided_p(t, df)))
}

/// Mean and sample variance.
pub fn mean_var(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    let v = if x.len() > 1 {
        x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, v)
}

/// Two-sided p of Student's t with `df` degrees of freedom.
pub fn two_sided_p(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    inc_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// The t value whose two-sided p is `p` (bisection on [`two_sided_p`]).
pub fn t_quantile_two_sided(p: f64, df: f64) -> f64 {
    let (mut lo, mut hi) = (0.0f64, 1e4f64);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if two_sided_p(mid, df) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (lo + hi) / 2.0
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine terms).
fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut s = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        s += c / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// The regularized incomplete beta function I_x(a, b).
fn inc_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    // The continued fraction converges fast for x < (a+1)/(a+b+2); use symmetry above.
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of I_x(a, b), evaluated by the modified Lentz method.
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut c = 1.0;
    let mut d = 1.0 - (a + b) * x / (a + 1.0);
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        // Even step, then odd step of the fraction.
        let even = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m));
        let odd = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0));
        for coef in [even, odd] {
            d = 1.0 + coef * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + coef / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-12 {
            break;
        }
    }
    h
}

/// SplitMix64: a small, fixed-seed generator so bootstrap intervals are reproducible.
#[derive(Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// A uniform index below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// The 95 % bootstrap interval of the median's change, percent (after/before - 1);
/// None when a side is empty or the before median is not positive.
pub fn bootstrap_median_change(before: &[f64], after: &[f64]) -> Option<(f64, f64)> {
    if before.is_empty() || after.is_empty() {
        return None;
    }
    let mut rng = SplitMix64::new(0x5EED_C0DE);
    let mut changes = Vec::with_capacity(BOOTSTRAP_ROUNDS);
    let resample = |x: &[f64], rng: &mut SplitMix64| {
        let v: Vec<f64> = (0..x.len())
            .map(|_| x.get(rng.below(x.len())).copied().unwrap_or(0.0))
            .collect();
        crate::stats::median(&v).unwrap_or(0.0)
    };
    for _ in 0..BOOTSTRAP_ROUNDS {
        let b = resample(before, &mut rng);
        let a = resample(after, &mut rng);
        if b > 0.0 {
            changes.push((a / b - 1.0) * 100.0);
        }
    }
    if changes.is_empty() {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let at = |q: f64| {
        let i = ((changes.len() - 1) as f64 * q).round() as usize;
        changes.get(i).copied().unwrap_or(0.0)
    };
    Some((at(0.025), at(0.975)))
}

/// Runs per side a Welch test would need to find the observed difference of means
/// significant with [`POWER`]; None when there is no spread or no difference to judge.
pub fn runs_needed(before: &[f64], after: &[f64]) -> Option<u32> {
    if before.len() < 2 || after.len() < 2 {
        return None;
    }
    let (mb, vb) = mean_var(before);
    let (ma, va) = mean_var(after);
    let d = (ma - mb).abs();
    let var = (vb + va) / 2.0;
    if d <= 0.0 || var <= 0.0 {
        return None;
    }
    // One-sided quantile for the power: t with two-sided p = 2(1 - POWER).
    for n in 2..=MAX_RUNS_NEEDED {
        let df = 2.0 * f64::from(n) - 2.0;
        let need = t_quantile_two_sided(ALPHA, df) + t_quantile_two_sided(2.0 * (1.0 - POWER), df);
        if f64::from(n) >= 2.0 * need * need * var / (d * d) {
            return Some(n);
        }
    }
    Some(MAX_RUNS_NEEDED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t_distribution_matches_tables() {
        // t(0.975, 4) = 2.776; t(0.975, 10) = 2.228; t(0.9, 4) = 1.533.
        assert!((two_sided_p(2.776, 4.0) - 0.05).abs() < 1e-3);
        assert!((two_sided_p(2.228, 10.0) - 0.05).abs() < 1e-3);
        assert!((two_sided_p(1.533, 4.0) - 0.2).abs() < 1e-3);
        assert!((t_quantile_two_sided(0.05, 4.0) - 2.776).abs() < 1e-2);
        assert!((two_sided_p(0.0, 5.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn welch_sees_a_clear_change_with_three_runs() {
        let (_, _, p) = welch(&[100.0, 101.0, 99.0], &[150.0, 152.0, 149.0]).unwrap();
        assert!(p < 0.001, "{p}");
        let (_, _, p) = welch(&[100.0, 103.0, 98.0], &[101.0, 99.0, 102.0]).unwrap();
        assert!(p > 0.5, "{p}");
    }

    #[test]
    fn bootstrap_is_reproducible_and_brackets_the_change() {
        let b = [100.0, 101.0, 99.0];
        let a = [150.0, 152.0, 149.0];
        let ci = bootstrap_median_change(&b, &a).unwrap();
        assert_eq!(Some(ci), bootstrap_median_change(&b, &a));
        assert!(ci.0 > 40.0 && ci.1 < 60.0, "{ci:?}");
    }

    #[test]
    fn runs_needed_grows_as_the_difference_shrinks() {
        let b = [100.0, 102.0, 98.0];
        let small = runs_needed(&b, &[101.0, 103.0, 99.0]).unwrap();
        let large = runs_needed(&b, &[104.0, 106.0, 102.0]).unwrap();
        assert!(small > large && large >= 2, "{small} {large}");
    }
}
