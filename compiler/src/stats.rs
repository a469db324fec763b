//! Small statistics every pass uses: the median and the mean of finite values.

/// The median; `None` for no values. Non-finite values are ignored.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    })
}

/// The mean; `None` for no values. Non-finite values are ignored.
///
/// A skeleton's prediction is the mean of its runs × K, not their median: the
/// application's time is a sum over its whole run, and short skeleton runs are samples
/// of the same process, so the expected time per run (the mean) is what adds up. Where
/// the runs are bimodal (a competing job shares a rank's core in some 45 ms runs and
/// not in others) the median picks one mode; the application sees both.
pub fn mean(values: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64)
}
