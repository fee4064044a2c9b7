//! `check-layout [WORKSPACE_ROOT]`: prints one `path:line: what` line per broken house rule and
//! exits 1 if there is any, 2 if the workspace cannot be read. The rules: see the library's docs.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let root = match (args.next(), args.next()) {
        (None, _) => PathBuf::from("."),
        (Some(a), None) if !a.starts_with('-') => PathBuf::from(a),
        _ => {
            eprintln!(
                "usage: check-layout [WORKSPACE_ROOT]   (the folder of the workspace's Cargo.toml)"
            );
            return ExitCode::from(2);
        }
    };
    match gsm_layout::check(&root) {
        Ok(breaches) => {
            for b in &breaches {
                println!("{b}");
            }
            eprintln!("check-layout: {} breaches", breaches.len());
            if breaches.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("check-layout: {e}");
            ExitCode::from(2)
        }
    }
}
