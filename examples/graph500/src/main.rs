//! `graph500 SCALE [EDGEFACTOR]`: parses the arguments, runs the benchmark, prints the results
//! block. Exit status: 0 on success, 1 when a search fails validation or the JSON cannot be
//! written, 2 for bad arguments or an engine that is not available.

use std::process::ExitCode;

use clap::Parser as _;
use graph500::cli::{Args, RunError, run};

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(results) => {
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
            // The reference's line for an invalid run, on stdout where the block would be.
            println!("No results printed for invalid run.");
            eprintln!("graph500: {e}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("graph500: {e}");
            ExitCode::from(2)
        }
    }
}
