//! Descriptive statistics over repeated runs: median, mean, sample standard deviation,
//! min, max, and outliers by modified Z-score (Iglewicz–Hoaglin, |z| > 3.5), as
//! hyperfine flags them. Pure functions; no I/O.

use serde::Serialize;

/// Threshold on the modified Z-score above which a value is an outlier.
pub const OUTLIER_Z: f64 = 3.5;

/// One metric over the runs (schema `$defs/stat`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Stat {
    /// The middle value (the mean of the two middle ones for an even count).
    pub median: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one value).
    pub stddev: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Every value, in run order.
    pub values: Vec<f64>,
    /// Indices into `values` of outliers.
    pub outliers: Vec<usize>,
}

pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// Statistics of `values`; None when empty.
pub fn stat(values: &[f64]) -> Option<Stat> {
    let med = median(values)?;
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let stddev = if values.len() > 1 {
        (values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    Some(Stat {
        median: med,
        mean,
        stddev,
        min: values.iter().copied().fold(f64::INFINITY, f64::min),
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        values: values.to_vec(),
        outliers: outliers(values, med),
    })
}

/// Modified Z-score outliers: z = 0.6745 (x - median) / MAD. With MAD = 0, any value
/// different from the median is an outlier (all others are identical).
fn outliers(values: &[f64], med: f64) -> Vec<usize> {
    if values.len() < 3 {
        return Vec::new();
    }
    let dev: Vec<f64> = values.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev).unwrap_or(0.0);
    values
        .iter()
        .enumerate()
        .filter(|(_, x)| {
            let d = (*x - med).abs();
            if mad > 0.0 {
                0.6745 * d / mad > OUTLIER_Z
            } else {
                d > 1e-9 * med.abs().max(1.0)
            }
        })
        .map(|(i, _)| i)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_figures() {
        let s = stat(&[3.0, 1.0, 2.0, 4.0]).expect("non-empty");
        assert_eq!(s.median, 2.5);
        assert_eq!(s.mean, 2.5);
        assert!((s.stddev - 1.2909944).abs() < 1e-6);
        assert_eq!((s.min, s.max), (1.0, 4.0));
        assert!(s.outliers.is_empty());
    }

    #[test]
    fn flags_a_far_value() {
        let s = stat(&[100.0, 101.0, 99.0, 100.5, 180.0]).expect("non-empty");
        assert_eq!(s.outliers, vec![4]);
    }

    #[test]
    fn empty_is_none() {
        assert!(stat(&[]).is_none());
    }
}
