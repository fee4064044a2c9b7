//! The runtime's log is off unless `GSM_LOG` (or `RUST_LOG`) asks for it, and then says on
//! standard error what the runtime does: the bootstrap's stages, the fabric chosen for each peer,
//! the rings, the workers started, and how the job ended (its quiescence). Runs itself as a child
//! process: alone (a job of one rank), and as two ranks under `mpirun`. A subscriber the
//! program installed itself is kept.

use std::process::{Command, Output};

/// The child's side: a small run with a remote apply, so that every kind of line has a cause.
#[test]
fn the_log_is_off_unless_asked_and_says_what_the_runtime_does() {
    if std::env::var_os("GSM_LOG_CHILD").is_some() {
        if std::env::var_os("GSM_LOG_OWN").is_some() {
            // The program's own subscriber, which takes only warnings: the runtime must keep it.
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::WARN)
                .with_writer(std::io::stderr)
                .init();
        }
        let v = gossamer::run(gossamer::Config::default().workers(2), || {
            let last = gossamer::WorkerId::new(gossamer::worker_count() - 1);
            let t = gossamer::entrust_on(last, || 41u64);
            t.apply(|n| {
                *n += 1;
                *n
            })
        })
        .expect("the run");
        assert_eq!(v, 42);
        return;
    }

    // One rank: the rings, the workers, nothing of a bootstrap.
    let alone = child(None, Some("debug"));
    let err = stderr(&alone);
    assert!(alone.status.success(), "{err}");
    for line in [
        "gossamer::ring",
        "ring layout",
        "gossamer::worker",
        "starting workers",
    ] {
        assert!(
            err.contains(line),
            "no {line:?} in the log of one rank:\n{err}"
        );
    }
    assert!(!err.contains("gossamer::bootstrap"), "{err}");
    let quiet = child(None, None);
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert_eq!(
        stderr(&quiet),
        "",
        "a run without GSM_LOG printed on stderr"
    );
    let own = child_with(None, Some("debug"), &[("GSM_LOG_OWN", "1")]);
    assert!(own.status.success(), "{}", stderr(&own));
    assert_eq!(
        stderr(&own),
        "",
        "GSM_LOG replaced the subscriber the program installed"
    );

    // Two ranks: the bootstrap, the fabric for the peer and why, the end of the job.
    let two = child(Some(2), Some("debug"));
    let err = stderr(&two);
    assert!(two.status.success(), "{err}");
    for line in [
        "gossamer::bootstrap",
        "MPI_Init",
        "joined the job",
        "gossamer::fabric",
        "fabric chosen",
        "why=\"same host\"",
        "gossamer::ring",
        "gossamer::worker",
        "gossamer::quiesce",
        "the job is quiet",
    ] {
        assert!(
            err.contains(line),
            "no {line:?} in the log of two ranks:\n{err}"
        );
    }
    // Per request nothing: the log of a run does not grow with its applies.
    assert!(err.lines().count() < 100, "{err}");
    let quiet = child(Some(2), None);
    let err = stderr(&quiet);
    assert!(quiet.status.success(), "{err}");
    assert!(
        !err.contains("gossamer::"),
        "ranks without GSM_LOG logged:\n{err}"
    );
}

/// Runs this test as a child: alone, or as `ranks` ranks under `mpirun`; with `GSM_LOG` set to
/// `log`, or with neither `GSM_LOG` nor `RUST_LOG`.
fn child(ranks: Option<u32>, log: Option<&str>) -> Output {
    child_with(ranks, log, &[])
}

/// [`child`] with `env` set too.
fn child_with(ranks: Option<u32>, log: Option<&str>, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().expect("the test's own path");
    let test = [
        "--exact",
        "the_log_is_off_unless_asked_and_says_what_the_runtime_does",
        "--nocapture",
        "--test-threads=1",
    ];
    let mut cmd = match ranks {
        None => {
            let mut c = Command::new(exe);
            c.args(test);
            c
        }
        Some(n) => {
            let mut c = Command::new("mpirun");
            c.args(["-np", &n.to_string(), "--oversubscribe"])
                .arg(exe)
                .args(test)
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_pml", "ob1");
            c
        }
    };
    cmd.env("GSM_LOG_CHILD", "1")
        .env_remove("GSM_LOG")
        .env_remove("RUST_LOG")
        .env_remove("GSM_FABRIC");
    if let Some(log) = log {
        cmd.env("GSM_LOG", log);
    }
    cmd.envs(env.iter().copied());
    cmd.output()
        .expect("starting the child (is Open MPI's mpirun on PATH?)")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}
