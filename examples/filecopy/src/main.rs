//! `gsm-filecopy SRC DST`: copies file SRC on rank 0 to file DST on rank 1 (another host, or the
//! same) through a `gossamer::stream`. Run it with `gsmrun -np 2 gsm-filecopy SRC DST`.
//!
//! The transfer is the two blocks marked below: `io::copy` into the stream's writer on one side,
//! out of its reader on the other. Rank 1 prints the bytes copied, the time and the rate.

use std::fs::File;
use std::io::{self, Write};
use std::time::Instant;

use gossamer::{Config, WorkerId, stream, workers_of_rank};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: gsmrun -np 2 gsm-filecopy SRC DST");
        std::process::exit(2);
    }
    let (src, dst) = (args[1].clone(), args[2].clone());
    let r = gossamer::run(Config::default().workers(1), move || {
        // A failure on either side ends the job (the other side would wait for ever).
        if let Err(e) = copy(&src, &dst) {
            gossamer::fail_job(format!("gsm-filecopy: {e}"));
        }
    });
    if let Err(e) = r {
        gossamer::eprint_line(format!("gsm-filecopy: {e}"));
        std::process::exit(1);
    }
}

/// Copies `src` on rank 0 to `dst` on rank 1.
fn copy(src: &str, dst: &str) -> Result<(), String> {
    if gossamer::rank_count() != 2 {
        return Err(format!(
            "run it as 2 ranks (gsmrun -np 2), not {}",
            gossamer::rank_count()
        ));
    }
    let started = Instant::now();
    let to = |r: usize| WorkerId::new(workers_of_rank(r).start);
    let copied = if gossamer::rank() == 0 {
        // -- rank 0: the sending side --
        let mut file = File::open(src).map_err(|e| format!("{src}: {e}"))?;
        let mut out = stream::connect(to(1), 1).map_err(|e| e.to_string())?;
        let n = io::copy(&mut file, &mut out).map_err(|e| format!("sending {src}: {e}"))?;
        out.finish()
            .map_err(|e| format!("ending the stream: {e}"))?;
        n
    } else {
        // -- rank 1: the receiving side --
        let mut input = stream::accept(to(0), 1).map_err(|e| e.to_string())?;
        let mut file = File::create(dst).map_err(|e| format!("{dst}: {e}"))?;
        let n =
            io::copy(&mut input, &mut file).map_err(|e| format!("receiving into {dst}: {e}"))?;
        file.sync_all().map_err(|e| format!("{dst}: {e}"))?;
        n
    };
    if gossamer::rank() == 1 {
        let s = started.elapsed().as_secs_f64();
        let mut o = io::stdout().lock();
        let _ = writeln!(
            o,
            "gsm-filecopy: {copied} bytes in {s:.3} s ({:.1} MB/s)",
            copied as f64 / s / 1e6
        );
    }
    Ok(())
}
