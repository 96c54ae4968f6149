//! Least squares, once: `y` on an intercept and any number of columns, each observation
//! weighted or not. The sweep's line of watts on loops ([`super::fit`]), its curvature check
//! ([`super::fit::diagnose`]) and the calibration's model of the wall
//! ([`crate::calibration::choose`]) are all this one solve.
//!
//! The columns are centred on their weighted means and scaled by their spreads before the
//! normal equations are formed (MHz beside busy shares would otherwise lose digits), solved
//! and inverted by Gauss-Jordan elimination with partial pivoting; the coefficients and their
//! covariance are taken back to the columns as given.

/// A solve: the coefficients (the intercept first, then one per column), `(X'WX)^-1` for
/// them (their covariance, times the residual variance) and the weighted sum of squared
/// residuals.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub beta: Vec<f64>,
    pub inverse: Vec<Vec<f64>>,
    pub sse: f64,
}

// The names follow the textbook formulas (y, n, k, w, z, t).
/// Weighted least squares of `y` on an intercept and `columns` (`weights`, where given, one
/// per observation, all positive). `None` when there are no more observations than
/// coefficients, a column does not vary, the columns are collinear, or a value is not
/// finite.
#[allow(clippy::many_single_char_names)]
pub fn solve(columns: &[&[f64]], y: &[f64], weights: Option<&[f64]>) -> Option<Solution> {
    let n = y.len();
    let k = columns.len() + 1;
    if n < k
        || columns.iter().any(|c| c.len() != n)
        || weights.is_some_and(|w| w.len() != n || w.iter().any(|w| w.is_nan() || *w <= 0.0))
        || y.iter()
            .chain(columns.iter().copied().flatten())
            .any(|v| !v.is_finite())
    {
        return None;
    }
    let w = |i: usize| weights.map_or(1.0, |w| w[i]);
    let sw: f64 = (0..n).map(w).sum();
    let wmean = |v: &[f64]| (0..n).map(|i| w(i) * v[i]).sum::<f64>() / sw;
    let means: Vec<f64> = columns.iter().map(|c| wmean(c)).collect();
    let sds: Vec<f64> = columns
        .iter()
        .zip(&means)
        .map(|(c, m)| ((0..n).map(|i| w(i) * (c[i] - m).powi(2)).sum::<f64>() / sw).sqrt())
        .collect();
    if sds.iter().any(|sd| !sd.is_finite() || *sd <= 0.0) {
        return None;
    }
    // The standardised design, the intercept's column of ones first.
    let z = |i: usize, j: usize| {
        if j == 0 {
            1.0
        } else {
            (columns[j - 1][i] - means[j - 1]) / sds[j - 1]
        }
    };
    let mut normal = vec![vec![0.0; k]; k];
    let mut rhs = vec![0.0; k];
    // One observation's standardised design row, filled in place (a calibration fits
    // thousands of minutes, for each of its candidate models).
    let mut row = vec![0.0; k];
    for (i, yi) in y.iter().enumerate() {
        for (j, v) in row.iter_mut().enumerate() {
            *v = z(i, j);
        }
        for (zr, (normal_r, rhs_r)) in row.iter().zip(normal.iter_mut().zip(rhs.iter_mut())) {
            *rhs_r += w(i) * zr * yi;
            for (cell, zc) in normal_r.iter_mut().zip(&row) {
                *cell += w(i) * zr * zc;
            }
        }
    }
    let inverse_z = invert(normal)?;
    let beta_z: Vec<f64> = inverse_z
        .iter()
        .map(|row| row.iter().zip(&rhs).map(|(a, b)| a * b).sum())
        .collect();
    // Back to the columns as given: b = T bz, with b_j = bz_j / sd_j and
    // b_0 = bz_0 - sum_j bz_j m_j / sd_j; the covariance T (X'WX)^-1 T'.
    let t = |r: usize, c: usize| match (r, c) {
        (0, 0) => 1.0,
        (0, c) => -means[c - 1] / sds[c - 1],
        (r, c) if r == c => 1.0 / sds[r - 1],
        _ => 0.0,
    };
    let beta: Vec<f64> = (0..k)
        .map(|r| (0..k).map(|c| t(r, c) * beta_z[c]).sum())
        .collect();
    let inverse: Vec<Vec<f64>> = (0..k)
        .map(|r| {
            (0..k)
                .map(|c| {
                    (0..k)
                        .map(|a| t(r, a) * (0..k).map(|b| inverse_z[a][b] * t(c, b)).sum::<f64>())
                        .sum()
                })
                .collect()
        })
        .collect();
    let sse = (0..n)
        .map(|i| {
            let fitted = beta[0] + (1..k).map(|j| beta[j] * columns[j - 1][i]).sum::<f64>();
            w(i) * (y[i] - fitted).powi(2)
        })
        .sum();
    (beta
        .iter()
        .chain(inverse.iter().flatten())
        .all(|v| v.is_finite()))
    .then_some(Solution { beta, inverse, sse })
}

/// The inverse of the square matrix `m` by Gauss-Jordan elimination with partial pivoting;
/// `None` when it is singular (a pivot below 1e-10 of its largest entry).
fn invert(mut m: Vec<Vec<f64>>) -> Option<Vec<Vec<f64>>> {
    let size = m.len();
    let scale = m.iter().flatten().fold(0.0f64, |a, v| a.max(v.abs()));
    let mut inv: Vec<Vec<f64>> = (0..size)
        .map(|r| (0..size).map(|c| f64::from(u8::from(r == c))).collect())
        .collect();
    for col in 0..size {
        let pivot = (col..size).max_by(|&i, &j| m[i][col].abs().total_cmp(&m[j][col].abs()))?;
        if m[pivot][col].is_nan() || m[pivot][col].abs() <= 1e-10 * scale {
            return None;
        }
        m.swap(col, pivot);
        inv.swap(col, pivot);
        let p = m[col][col];
        for c in 0..size {
            m[col][c] /= p;
            inv[col][c] /= p;
        }
        for r in (0..size).filter(|&r| r != col) {
            let f = m[r][col];
            if f != 0.0 {
                for c in 0..size {
                    m[r][c] -= f * m[col][c];
                    inv[r][c] -= f * inv[col][c];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::many_single_char_names)]
    fn a_plane_and_its_covariance_come_back_as_given() {
        // y = 3 + 2a - 0.5b exactly, a in MHz beside b a share.
        let a: Vec<f64> = (0..20).map(|i| 1400.0 + 100.0 * f64::from(i)).collect();
        let b: Vec<f64> = (0..20).map(|i| f64::from((i * 7) % 11) / 10.0).collect();
        let y: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| 3.0 + 2.0 * a - 0.5 * b)
            .collect();
        let s = solve(&[&a, &b], &y, None).unwrap();
        for (got, want) in s.beta.iter().zip([3.0, 2.0, -0.5]) {
            assert!((got - want).abs() < 1e-6, "{:?}", s.beta);
        }
        assert!(s.sse < 1e-12, "{}", s.sse);
        // A line's (X'X)^-1 by hand: 1/sxx for the slope, 1/n + mean^2/sxx for the
        // intercept.
        let x = [0.0, 1.0, 2.0, 3.0];
        let s = solve(&[&x], &[1.0, 2.9, 5.1, 7.0], None).unwrap();
        let sxx = 5.0;
        assert!((s.inverse[1][1] - 1.0 / sxx).abs() < 1e-12);
        assert!((s.inverse[0][0] - (0.25 + 1.5 * 1.5 / sxx)).abs() < 1e-12);
        assert!((s.inverse[0][1] - (-1.5 / sxx)).abs() < 1e-12);
    }

    #[test]
    fn what_cannot_be_solved_is_none() {
        let a = [1.0, 2.0, 3.0, 4.0];
        let y = [1.0, 2.0, 3.0, 4.0];
        assert!(solve(&[&a, &a], &y, None).is_none(), "collinear");
        assert!(solve(&[&[2.0; 4]], &y, None).is_none(), "no spread");
        assert!(solve(&[&a[..1]], &y[..1], None).is_none(), "too few");
        assert!(solve(&[&a], &[1.0, f64::NAN, 3.0, 4.0], None).is_none());
        assert!(solve(&[&a], &y, Some(&[1.0, 0.0, 1.0, 1.0])).is_none());
    }
}
