//! The `gsmrun` binary: parse arguments, call the library, print one line on error, exit.

use std::ffi::OsString;

fn main() {
    gsmrun::init_logging();
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "--rank-wrapper") {
        std::process::exit(gsmrun::wrapper::main(args[2..].to_vec()));
    }
    if args.get(1).is_some_and(|a| a == "--janitor") {
        std::process::exit(gsmrun::janitor::main(&args[2..]));
    }
    let cli = match gsmrun::cli::parse_from(args) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let code = match gsmrun::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gsmrun: {e}");
            e.exit_code()
        }
    };
    std::process::exit(code);
}
