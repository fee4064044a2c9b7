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
        // Usage errors quote the arguments, which may hold control bytes: printed escaped.
        Err(e) if e.use_stderr() => {
            eprint!("{}", gsmrun::shown_lines(&e.render().to_string()));
            std::process::exit(e.exit_code());
        }
        Err(e) => e.exit(),
    };
    let code = match gsmrun::run(&cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gsmrun: {}", gsmrun::shown_lines(&e.to_string()));
            e.exit_code()
        }
    };
    std::process::exit(code);
}
