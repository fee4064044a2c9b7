//! The one output every subcommand shares: a table on stdout and, with `--json FILE`, an array of
//! rows `{"case", "unit", "higher_is_better", "gsm", "peer", "peer_value", "speedup"}`.
//!
//! The rows are those of `case`. This module formats and writes figures (and asks `plot` to draw
//! them with `--plot`); it does not measure them.

use crate::case::{Case, Figure, Row};
use crate::stats::Summary;
use std::fmt::Write as _;
use std::path::Path;

fn cell(summary: Option<Summary>) -> String {
    match summary {
        Some(s) => format!("{} [{}–{}]", num(s.median), num(s.q1), num(s.q3)),
        None => "—".to_string(),
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// Renders the cases as a plain-text table: medians with their interquartile range in brackets.
pub fn table(cases: &[Case]) -> String {
    let header = [
        "case",
        "unit",
        "gsm median [q1–q3]",
        "peer",
        "peer median [q1–q3]",
        "speedup",
    ];
    let mut lines: Vec<[String; 6]> = vec![header.map(str::to_string)];
    for case in cases {
        let arrow = if case.higher_is_better { "↑" } else { "↓" };
        let rows = case.rows();
        let peers: Vec<Option<&Figure>> = if case.peers.is_empty() {
            vec![None]
        } else {
            case.peers.iter().map(Some).collect()
        };
        for (row, peer) in rows.iter().zip(peers) {
            lines.push([
                row.case.clone(),
                format!("{} {arrow}", row.unit),
                cell(case.gsm),
                row.peer.clone().unwrap_or_else(|| "—".to_string()),
                cell(peer.and_then(|p| p.summary)),
                row.speedup
                    .map_or_else(|| "—".to_string(), |s| format!("{s:.2}×")),
            ]);
        }
    }
    let mut widths = [0usize; 6];
    for line in &lines {
        for (w, c) in widths.iter_mut().zip(line) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        for (j, (w, c)) in widths.iter().zip(line).enumerate() {
            let pad = w - c.chars().count();
            let sep = if j == 0 { "" } else { "  " };
            let _ = write!(out, "{sep}{c}{}", " ".repeat(pad));
        }
        out = out.trim_end().to_string();
        out.push('\n');
        if i == 0 {
            let total: usize = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            out.push_str(&"-".repeat(total));
            out.push('\n');
        }
    }
    out
}

/// Refuses a `--json` path that cannot be written, before anything is measured: the report is
/// written at the end, and a run of several minutes ended in "cannot write the JSON report". The
/// file is opened to append (its content untouched) and removed again if this made it.
pub fn check_json(json: Option<&Path>) -> anyhow::Result<()> {
    let Some(path) = json else { return Ok(()) };
    let existed = path.exists();
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match opened {
        Ok(_) if !existed => std::fs::remove_file(path).map_err(anyhow::Error::from),
        Ok(_) => Ok(()),
        Err(e) => Err(e.into()),
    }
    .map_err(|e| {
        anyhow::anyhow!(
            "cannot write the JSON report to {}: {e}; nothing was run: give --json a path that \
             can be written",
            path.display()
        )
    })
}

/// Where `--plot DIR` asked [`emit`] to draw, and the subcommand's name (set once by `main`).
static PLOT: std::sync::OnceLock<(std::path::PathBuf, String)> = std::sync::OnceLock::new();

/// Makes [`emit`] also draw one SVG chart per group of cases into `dir` (`--plot DIR`).
pub fn plot_to(dir: &Path, command: &str) {
    let _ = PLOT.set((dir.to_path_buf(), command.to_string()));
}

/// The directory of `--plot DIR`, if given (for a subcommand that draws charts of its own).
pub fn plot_dir() -> Option<&'static Path> {
    PLOT.get().map(|(dir, _)| dir.as_path())
}

/// Prints the table and, when `json` is given, writes every row there as a JSON array; with
/// `--plot DIR` ([`plot_to`]) also draws the cases (`plot.rs`).
pub fn emit(cases: &[Case], json: Option<&Path>) -> anyhow::Result<()> {
    if let Some((dir, command)) = PLOT.get() {
        for file in crate::plot::cases(dir, command, cases)? {
            println!("(chart: {})", file.display());
        }
    }
    print!("{}", table(cases));
    println!(
        "(medians with interquartile range; ↑ higher is better, ↓ lower is better; speedup > 1: Gossamer better)"
    );
    if let Some(path) = json {
        let rows: Vec<Row> = cases.iter().flat_map(Case::rows).collect();
        let text = serde_json::to_string_pretty(&rows)?;
        std::fs::write(path, text + "\n").map_err(|e| {
            anyhow::anyhow!("cannot write the JSON report to {}: {e}; check the directory exists and is writable", path.display())
        })?;
    }
    Ok(())
}

/// What rank 0 of a multi-rank subcommand (`remote`, `collectives`) prints: lines above the
/// table, then its rows.
#[derive(Debug)]
pub struct RankReport {
    /// The table's rows.
    pub cases: Vec<Case>,
    /// Lines above the table.
    pub header: String,
}

/// Initialises MPI (`FUNNELED`, so that Gossamer joins it), runs `body` on the world
/// communicator and finalises MPI; then prints rank 0's report with [`emit`]. Returns whether
/// this process printed (only rank 0 does).
#[cfg(feature = "gossamer")]
pub fn mpi_job(
    json: Option<&Path>,
    body: impl FnOnce(&mpi::topology::SimpleCommunicator) -> anyhow::Result<Option<RankReport>>,
) -> anyhow::Result<bool> {
    let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Funneled)
        .ok_or_else(|| anyhow::anyhow!("MPI was already initialised in this process"))?;
    // Rank 0 writes the report; its failing here ends the job (the launcher ends the others).
    if mpi::traits::Communicator::rank(&universe.world()) == 0 {
        check_json(json)?;
    }
    let result = body(&universe.world());
    drop(universe);
    match result? {
        Some(report) => {
            print!("{}", report.header);
            emit(&report.cases, json)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Shows `line` as a progress line (rewritten in place) when stderr is a terminal; prints nothing
/// into logs and pipes.
pub fn progress(line: std::fmt::Arguments<'_>) {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() {
        eprint!("\r{line}");
    }
}

/// The progress line of repetition `run` (from 0) of `runs` of `gsm-bench {command}`.
pub fn run_progress(command: &str, run: usize, runs: usize) {
    progress(format_args!("gsm-bench {command}: run {}/{runs}", run + 1));
}

/// Ends the progress line started by [`progress`].
pub fn progress_done() {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() {
        eprintln!();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn a_json_path_is_checked_without_a_trace() {
        let dir = std::env::temp_dir().join(format!("gsm-bench-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let new = dir.join("new.json");
        check_json(Some(&new)).unwrap();
        assert!(!new.exists(), "the check left a file behind");
        let kept = dir.join("kept.json");
        std::fs::write(&kept, "old").unwrap();
        check_json(Some(&kept)).unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "old");
        for bad in [dir.join("missing").join("x.json"), dir.clone()] {
            let e = check_json(Some(&bad)).unwrap_err().to_string();
            assert!(e.contains("nothing was run"), "{e}");
        }
        assert!(check_json(None).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_table_shows_the_speedup() {
        let case = Case {
            case: "launch".into(),
            unit: "s".into(),
            higher_is_better: false,
            gsm: summarize(&[0.1; 5]),
            peers: vec![Figure {
                name: "mpirun".into(),
                summary: summarize(&[0.3; 5]),
            }],
        };
        assert!(table(&[case]).contains("3.00×"));
    }
}
