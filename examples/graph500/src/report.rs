//! The results block, as the Graph500 reference prints it, and the same results as JSON.
//!
//! Field names, order and number formats follow the reference's `main.c` (3.0): `%g` for times and
//! TEPS, `%.11g` for edge counts, the `!` marking the harmonic mean. Statistics are the
//! reference's: the mean, the sample standard deviation (n − 1), and quartiles as the mean of the
//! two middle order statistics. TEPS statistics are taken over seconds per edge and inverted, so
//! the mean becomes the harmonic mean and the quartiles swap ends; the harmonic standard deviation
//! is Norris's (1940) standard error of the harmonic mean, as in the specification.
//!
//! This module abstracts formatting. It does not time anything and does not decide whether a run
//! is valid: the reference prints no block for an invalid run, and neither does the driver.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

/// The seven summary statistics of the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Statistics {
    /// Smallest value.
    pub min: f64,
    /// Mean of the order statistics around the first quartile.
    pub firstquartile: f64,
    /// Median (mean of the two middle values for even counts).
    pub median: f64,
    /// Mean of the order statistics around the third quartile.
    pub thirdquartile: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (divides by n − 1; NaN for a single value).
    pub stddev: f64,
}

impl Statistics {
    /// The statistics of `x`, computed in the reference's order of operations.
    ///
    /// # Panics
    /// If `x` is empty.
    pub fn of(x: &[f64]) -> Self {
        assert!(!x.is_empty(), "statistics of nothing");
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n as f64;
        let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (n as f64 - 1.0);
        let mut s = x.to_vec();
        s.sort_by(f64::total_cmp);
        Self {
            min: s[0],
            firstquartile: (s[(n - 1) / 4] + s[n / 4]) * 0.5,
            median: (s[(n - 1) / 2] + s[n / 2]) * 0.5,
            thirdquartile: (s[n - 1 - (n - 1) / 4] + s[n - 1 - n / 4]) * 0.5,
            max: s[n - 1],
            mean,
            stddev: var.sqrt(),
        }
    }
}

/// TEPS statistics: the [`Statistics`] of seconds per edge, inverted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TepsStatistics {
    /// Slowest search.
    pub min: f64,
    /// First quartile.
    pub firstquartile: f64,
    /// Median.
    pub median: f64,
    /// Third quartile.
    pub thirdquartile: f64,
    /// Fastest search.
    pub max: f64,
    /// Harmonic mean of the per-search TEPS.
    pub harmonic_mean: f64,
    /// Standard error of the harmonic mean.
    pub harmonic_stddev: f64,
}

impl TepsStatistics {
    /// From per-search times (seconds) and edge counts.
    pub fn of(times: &[f64], edges: &[f64]) -> Self {
        let spe: Vec<f64> = times.iter().zip(edges).map(|(t, m)| t / m).collect();
        let s = Statistics::of(&spe);
        let n = spe.len() as f64;
        Self {
            min: 1.0 / s.max,
            firstquartile: 1.0 / s.thirdquartile,
            median: 1.0 / s.median,
            thirdquartile: 1.0 / s.firstquartile,
            max: 1.0 / s.min,
            harmonic_mean: 1.0 / s.mean,
            harmonic_stddev: s.stddev / (s.mean * s.mean * (n - 1.0).sqrt()),
        }
    }
}

/// The measurements of one kernel (BFS or SSSP) over all roots.
#[derive(Clone, Debug, Default)]
pub struct KernelRuns {
    /// Seconds per search.
    pub times: Vec<f64>,
    /// Edge count m per search.
    pub edges: Vec<f64>,
    /// Seconds per validation, −1 for each search when validation was off (as the reference).
    pub validate_times: Vec<f64>,
}

/// A search's answer: parents, and distances for SSSP.
pub type Searched = (Vec<crate::kronecker::Vertex>, Option<Vec<f32>>);

/// One kernel over all roots, as the reference runs it: an untimed warm-up search from the first
/// root (validated when `validating`), then a timed search from every root, each validated when
/// `validating` (validation times −1 otherwise). `count` gives a search's edge count m; `check`
/// validates (index, root, parents, distances, m; what it returns on success is dropped);
/// `sync` runs before each timed search and each timed validation (a barrier for the
/// distributed engines); with `progress`, each root is announced on stderr. The sequential and
/// the distributed drivers both run their kernels through this loop.
#[allow(
    clippy::too_many_arguments,
    reason = "the kernel loop's parts, spelt out"
)]
pub fn timed_searches<V, E>(
    name: &str,
    roots: &[crate::kronecker::Vertex],
    validating: bool,
    progress: bool,
    mut search: impl FnMut(crate::kronecker::Vertex) -> Searched,
    count: impl Fn(&[crate::kronecker::Vertex]) -> u64,
    check: impl Fn(
        usize,
        crate::kronecker::Vertex,
        &[crate::kronecker::Vertex],
        Option<&[f32]>,
        u64,
    ) -> Result<V, E>,
    sync: impl Fn(),
) -> Result<KernelRuns, E> {
    let (parent, dist) = search(roots[0]);
    if validating {
        check(0, roots[0], &parent, dist.as_deref(), count(&parent))?;
    }
    let mut runs = KernelRuns::default();
    for (i, &root) in roots.iter().enumerate() {
        if progress {
            eprintln!("Running {name} {i}");
        }
        sync();
        let t = std::time::Instant::now();
        let (parent, dist) = search(root);
        let time = t.elapsed().as_secs_f64();
        let m = count(&parent);
        if progress {
            eprintln!(
                "Time for {name} {i} is {time:.6}; TEPS {:.6e}",
                m as f64 / time
            );
        }
        runs.times.push(time);
        runs.edges.push(m as f64);
        if validating {
            sync();
            let t = std::time::Instant::now();
            check(i, root, &parent, dist.as_deref(), m)?;
            runs.validate_times.push(t.elapsed().as_secs_f64());
        } else {
            runs.validate_times.push(-1.0);
        }
    }
    Ok(runs)
}

/// Everything the results block reports.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// log2 of the number of vertices.
    pub scale: u32,
    /// Edges per vertex.
    pub edgefactor: u32,
    /// Number of search roots.
    pub nbfs: usize,
    /// Seconds to generate the edge list.
    pub graph_generation: f64,
    /// The units the graph is partitioned over, as the reference's MPI processes are: ranks
    /// for `--engine mpi`, workers (over every rank) for `--engine gsm`, 1 for `seq`.
    pub num_mpi_processes: usize,
    /// Seconds of kernel 1.
    pub construction_time: f64,
    /// BFS runs, if BFS ran.
    pub bfs: Option<KernelRuns>,
    /// SSSP runs, if SSSP ran.
    pub sssp: Option<KernelRuns>,
    /// The search roots in order (in the JSON only; the reference's block does not print them),
    /// so that runs of different engines can be checked to have searched from the same vertices.
    pub roots: Vec<u32>,
}

/// C's `printf("%.{precision}g", x)`.
pub fn format_g(x: f64, precision: usize) -> String {
    let p = precision.max(1);
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    // The exponent after rounding to p significant digits decides the style.
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if exp < -4 || exp >= p as i32 {
        let m = strip_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp) as usize;
        strip_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn strip_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// Name column width: values start at column 32, as in the reference.
fn line(out: &mut String, name: &str, value: String) {
    let _ = writeln!(out, "{:<32}{value}", format!("{name}:"));
}

const STAT_NAMES: [&str; 7] = [
    "min",
    "firstquartile",
    "median",
    "thirdquartile",
    "max",
    "mean",
    "stddev",
];

fn stat_values(s: &Statistics) -> [f64; 7] {
    [
        s.min,
        s.firstquartile,
        s.median,
        s.thirdquartile,
        s.max,
        s.mean,
        s.stddev,
    ]
}

/// The kernels that ran, with their prefixes as the reference spells them ("bfs " is padded).
fn kernels(r: &Results) -> Vec<(&'static str, &'static str, &KernelRuns)> {
    let mut k = Vec::new();
    if let Some(b) = &r.bfs {
        k.push(("bfs  ", "bfs", b));
    }
    if let Some(s) = &r.sssp {
        k.push(("sssp ", "sssp", s));
    }
    k
}

/// The edge counts the reference reports: those of the last kernel that ran (it reuses one
/// array; both kernels count the same components).
fn nedges(r: &Results) -> &[f64] {
    kernels(r).last().map_or(&[], |k| &k.2.edges)
}

impl Results {
    /// The results block, byte for byte in the reference's layout.
    pub fn text(&self) -> String {
        let mut out = String::new();
        line(&mut out, "SCALE", self.scale.to_string());
        line(&mut out, "edgefactor", self.edgefactor.to_string());
        line(&mut out, "NBFS", self.nbfs.to_string());
        line(
            &mut out,
            "graph_generation",
            format_g(self.graph_generation, 6),
        );
        line(
            &mut out,
            "num_mpi_processes",
            self.num_mpi_processes.to_string(),
        );
        line(
            &mut out,
            "construction_time",
            format_g(self.construction_time, 6),
        );
        let ks = kernels(self);
        for (prefix, _, k) in &ks {
            let s = stat_values(&Statistics::of(&k.times));
            for (name, v) in STAT_NAMES.iter().zip(s) {
                line(&mut out, &format!("{prefix}{name}_time"), format_g(v, 6));
            }
        }
        if !ks.is_empty() {
            let s = stat_values(&Statistics::of(nedges(self)));
            for (name, v) in STAT_NAMES.iter().zip(s) {
                line(&mut out, &format!("{name}_nedge"), format_g(v, 11));
            }
        }
        for (prefix, _, k) in &ks {
            let t = TepsStatistics::of(&k.times, &k.edges);
            for (name, v) in [
                ("min", t.min),
                ("firstquartile", t.firstquartile),
                ("median", t.median),
                ("thirdquartile", t.thirdquartile),
                ("max", t.max),
            ] {
                line(&mut out, &format!("{prefix}{name}_TEPS"), format_g(v, 6));
            }
            // The reference marks the headline number with a '!' inside the padding.
            let _ = writeln!(
                out,
                "{:<29}!  {}",
                format!("{prefix}harmonic_mean_TEPS:"),
                format_g(t.harmonic_mean, 6)
            );
            line(
                &mut out,
                &format!("{prefix}harmonic_stddev_TEPS"),
                format_g(t.harmonic_stddev, 6),
            );
        }
        for (prefix, _, k) in &ks {
            let s = stat_values(&Statistics::of(&k.validate_times));
            for (name, v) in STAT_NAMES.iter().zip(s) {
                line(
                    &mut out,
                    &format!("{prefix}{name}_validate"),
                    format_g(v, 6),
                );
            }
        }
        out
    }

    /// The same results as JSON: one flat object whose keys are the block's field names with
    /// the kernel prefix joined by `_` (`bfs_harmonic_mean_TEPS`), plus the per-search arrays and the roots.
    /// Non-finite values become `null`.
    pub fn json(&self) -> Value {
        let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        let mut m = Map::new();
        m.insert("SCALE".into(), json!(self.scale));
        m.insert("edgefactor".into(), json!(self.edgefactor));
        m.insert("NBFS".into(), json!(self.nbfs));
        m.insert("graph_generation".into(), num(self.graph_generation));
        m.insert("num_mpi_processes".into(), json!(self.num_mpi_processes));
        m.insert("construction_time".into(), num(self.construction_time));
        m.insert("roots".into(), json!(self.roots));
        let ks = kernels(self);
        for (_, name, k) in &ks {
            let s = stat_values(&Statistics::of(&k.times));
            for (stat, v) in STAT_NAMES.iter().zip(s) {
                m.insert(format!("{name}_{stat}_time"), num(v));
            }
        }
        if !ks.is_empty() {
            let s = stat_values(&Statistics::of(nedges(self)));
            for (stat, v) in STAT_NAMES.iter().zip(s) {
                m.insert(format!("{stat}_nedge"), num(v));
            }
        }
        for (_, name, k) in &ks {
            let t = TepsStatistics::of(&k.times, &k.edges);
            for (stat, v) in [
                ("min", t.min),
                ("firstquartile", t.firstquartile),
                ("median", t.median),
                ("thirdquartile", t.thirdquartile),
                ("max", t.max),
                ("harmonic_mean", t.harmonic_mean),
                ("harmonic_stddev", t.harmonic_stddev),
            ] {
                m.insert(format!("{name}_{stat}_TEPS"), num(v));
            }
        }
        for (_, name, k) in &ks {
            let s = stat_values(&Statistics::of(&k.validate_times));
            for (stat, v) in STAT_NAMES.iter().zip(s) {
                m.insert(format!("{name}_{stat}_validate"), num(v));
            }
            m.insert(format!("{name}_times"), json!(k.times));
            m.insert(format!("{name}_nedges"), json!(k.edges));
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_g_matches_printf() {
        // Expected strings are what glibc's printf("%g") / ("%.11g") prints.
        let cases: [(f64, usize, &str); 12] = [
            (0.0, 6, "0"),
            (1.0, 6, "1"),
            (0.000123456, 6, "0.000123456"),
            (0.0000123456, 6, "1.23456e-05"),
            (123456.0, 6, "123456"),
            (1234567.0, 6, "1.23457e+06"),
            (2.5e7, 6, "2.5e+07"),
            (0.1, 6, "0.1"),
            (-1.0, 6, "-1"),
            (999999.5, 6, "1e+06"),
            (16239.0, 11, "16239"),
            (1048079.25, 11, "1048079.25"),
        ];
        for (x, p, want) in cases {
            assert_eq!(format_g(x, p), want, "{x} %.{p}g");
        }
    }

    #[test]
    fn quartiles_as_the_reference_computes_them() {
        let s = Statistics::of(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.firstquartile, 1.5);
        assert_eq!(s.median, 2.5);
        assert_eq!(s.thirdquartile, 3.5);
        assert_eq!(s.max, 4.0);
        assert_eq!(s.mean, 2.5);
        assert!((s.stddev - (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
    }

    #[test]
    fn teps_are_harmonic() {
        // Two searches of 100 edges in 1 s and 4 s: 100 and 25 TEPS, harmonic mean 40.
        let t = TepsStatistics::of(&[1.0, 4.0], &[100.0, 100.0]);
        assert!((t.harmonic_mean - 40.0).abs() < 1e-9);
        assert!((t.max - 100.0).abs() < 1e-9);
        assert!((t.min - 25.0).abs() < 1e-9);
    }

    #[test]
    fn block_layout() {
        let runs = KernelRuns {
            times: vec![1.0, 2.0],
            edges: vec![10.0, 10.0],
            validate_times: vec![-1.0, -1.0],
        };
        let r = Results {
            scale: 10,
            edgefactor: 16,
            nbfs: 2,
            graph_generation: 0.5,
            num_mpi_processes: 1,
            construction_time: 0.25,
            roots: vec![3, 5],
            bfs: Some(runs.clone()),
            sssp: Some(runs),
        };
        let text = r.text();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "SCALE:                          10");
        assert_eq!(lines[5], "construction_time:              0.25");
        assert_eq!(lines[6], "bfs  min_time:                  1");
        assert_eq!(lines[13], "sssp min_time:                  1");
        assert_eq!(lines[20], "min_nedge:                      10");
        assert!(lines.contains(&"bfs  harmonic_mean_TEPS:     !  6.66667"));
        assert!(lines.contains(&"sssp stddev_validate:           0"));
        assert_eq!(lines.len(), 6 + 14 + 7 + 14 + 14);
        let h = r.json()["bfs_harmonic_mean_TEPS"].as_f64().unwrap();
        assert!((h - 1.0 / 0.15).abs() < 1e-12);
    }
}
