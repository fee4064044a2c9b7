//! `gsm-hello`: prints `hello from rank R of N on HOST (pid P)` from every rank.
//!
//! It goes through MPI directly (the `mpi` crate), so that it starts as a bare MPI program does
//! (`gsm-bench launch` times it under `gsmrun` and under `mpirun`); of the runtime it uses only
//! the check that MPI's world is the job its launcher started (a launcher of another MPI than
//! the one it was built with makes each rank a world of one, and every rank said "rank 0 of 1").
//! Its test switches let `gsmrun`'s tests provoke each way a job can end:
//!
//! - `--fail-rank R --exit-code C`: rank R exits with status C after saying hello;
//! - `--segfault-rank R`: rank R dies of SIGSEGV;
//! - `--sleep S`: every rank sleeps S seconds (fractions allowed) before finishing;
//! - `--print-personality`: every rank also prints its `/proc/self/personality` word, so tests can
//!   see whether address-space randomisation is off.

mod sys;

use mpi::traits::Communicator;
use std::time::Duration;

#[derive(Debug, Default)]
struct Args {
    fail_rank: Option<i32>,
    exit_code: i32,
    segfault_rank: Option<i32>,
    sleep: Option<f64>,
    print_personality: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        exit_code: 1,
        ..Args::default()
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match flag.as_str() {
            "--fail-rank" => args.fail_rank = Some(parse(&value("--fail-rank")?, "--fail-rank")?),
            "--exit-code" => args.exit_code = parse(&value("--exit-code")?, "--exit-code")?,
            "--segfault-rank" => {
                args.segfault_rank = Some(parse(&value("--segfault-rank")?, "--segfault-rank")?)
            }
            "--sleep" => args.sleep = Some(parse(&value("--sleep")?, "--sleep")?),
            "--print-personality" => args.print_personality = true,
            "-h" | "--help" => {
                println!(
                    "usage: gsm-hello [--fail-rank R [--exit-code C]] [--segfault-rank R] \
                     [--sleep SECONDS] [--print-personality]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    Ok(args)
}

fn parse<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag}: `{text}` is not a valid number"))
}

fn main() {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("gsm-hello: {message}");
            std::process::exit(2);
        }
    };
    let Some(universe) = mpi::initialize() else {
        eprintln!("gsm-hello: MPI was already initialised");
        std::process::exit(1);
    };
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if let Err(e) = gossamer::bootstrap::check_world_size(size as u32) {
        eprintln!("gsm-hello: {e}");
        std::process::exit(2);
    }
    println!(
        "hello from rank {rank} of {size} on {} (pid {})",
        sys::hostname(),
        std::process::id()
    );
    if args.print_personality {
        let personality = std::fs::read_to_string("/proc/self/personality").unwrap_or_default();
        println!("rank {rank} personality {}", personality.trim());
    }
    if let Some(seconds) = args.sleep {
        std::thread::sleep(Duration::from_secs_f64(seconds.max(0.0)));
    }
    if args.segfault_rank == Some(rank) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        sys::crash();
    }
    if args.fail_rank == Some(rank) {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(args.exit_code);
    }
}
