//! Order statistics over repeated runs: the median and the quartiles a figure is reported with.
//!
//! It summarises samples someone else measured; it does not time anything, reject outliers or
//! decide how many runs are enough (the caller asks for at least [`MIN_RUNS`]).

/// The fewest runs a reported figure may come from.
pub const MIN_RUNS: usize = 5;

/// Median and spread of one figure over its runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The median (the mean of the two middle samples when the count is even).
    pub median: f64,
    /// First quartile.
    pub q1: f64,
    /// Third quartile.
    pub q3: f64,
    /// How many samples the summary is over.
    pub runs: usize,
}

/// The `p`-quantile (0 ≤ p ≤ 1) of sorted samples, interpolating linearly between neighbours
/// (the "type 7" definition R and NumPy use by default).
fn quantile(sorted: &[f64], p: f64) -> f64 {
    debug_assert!(!sorted.is_empty());
    let pos = p * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// Summarises `samples`; `None` when there are none or one is not a finite number.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    if samples.is_empty() || samples.iter().any(|s| !s.is_finite()) {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(Summary {
        median: quantile(&sorted, 0.5),
        q1: quantile(&sorted, 0.25),
        q3: quantile(&sorted, 0.75),
        runs: sorted.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_count_median_is_the_middle_sample() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]).unwrap();
        assert_eq!(s.median, 3.0);
        assert_eq!(s.q1, 2.0);
        assert_eq!(s.q3, 4.0);
        assert_eq!(s.runs, 5);
    }

    #[test]
    fn even_count_median_is_the_mean_of_the_middle_two() {
        let s = summarize(&[4.0, 1.0, 3.0, 2.0, 6.0, 5.0]).unwrap();
        assert_eq!(s.median, 3.5);
        assert_eq!(s.q1, 2.25);
        assert_eq!(s.q3, 4.75);
    }

    #[test]
    fn one_outlier_does_not_move_the_median() {
        let s = summarize(&[10.0, 10.0, 10.0, 10.0, 1e9]).unwrap();
        assert_eq!(s.median, 10.0);
    }

    #[test]
    fn empty_or_non_finite_samples_have_no_summary() {
        assert!(summarize(&[]).is_none());
        assert!(summarize(&[1.0, f64::NAN, 2.0]).is_none());
        assert!(summarize(&[1.0, f64::INFINITY]).is_none());
    }
}
