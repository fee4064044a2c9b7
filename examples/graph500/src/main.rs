//! `graph500 SCALE [EDGEFACTOR]`: parses the arguments, runs the benchmark, prints the results
//! block. Exit status: 0 on success, 1 when a search fails validation or the JSON cannot be
//! written at the end (a full disk; the block is printed all the same), 2 for bad arguments
//! (among them a `--json` path that cannot be written, found before the run) or an engine that
//! cannot start (MPI, the Gossamer runtime). In a distributed run every rank exits with the same
//! status and only rank 0 (worker 0) prints the results and writes the JSON; an error is printed
//! by every rank, since the rank that ends first ends the job (under `gsmrun`) and rank 0 may not
//! get to print it.

use std::process::ExitCode;

use clap::Parser as _;
use graph500::cli::Args;
use graph500::driver::run;
use graph500::outcome::{Outcome, RunError};

fn main() -> ExitCode {
    let args = Args::parse();
    let Outcome { reporter, result } = run(&args);
    match result {
        Ok(results) => {
            if !reporter {
                return ExitCode::SUCCESS;
            }
            print!("{}", results.text());
            if let Some(path) = &args.json {
                let json = serde_json::to_string_pretty(&results.json()).expect("JSON of numbers");
                if let Err(e) = std::fs::write(path, json + "\n") {
                    eprintln!(
                        "graph500: cannot write the JSON results to {}: {e}",
                        path.display()
                    );
                    return ExitCode::from(1);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e @ RunError::Invalid { .. }) => {
            if reporter {
                // The reference's line for an invalid run, on stdout where the block would be.
                println!("No results printed for invalid run.");
            }
            gossamer::eprint_line(format_args!("graph500: {e}"));
            ExitCode::from(1)
        }
        Err(e) => {
            gossamer::eprint_line(format_args!("graph500: {e}"));
            ExitCode::from(2)
        }
    }
}
