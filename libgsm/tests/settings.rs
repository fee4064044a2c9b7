//! Settings read from the environment behave the same in a job of one rank as in a larger one:
//! a fabric setting the runtime does not understand is refused even though one rank uses no
//! fabric (it was ignored, so the mistake surfaced only on the first multi-rank run), and an
//! empty value means the default for every variable (`GSM_THREADS=` was an error).
//!
//! Its own test binary: it changes the process's environment, which no other test may read
//! meanwhile.

fn set(name: &str, value: Option<&str>) {
    // SAFETY: this binary's only test runs its steps one after another, and no runtime is
    // running while a variable changes, so no other thread reads the environment now.
    unsafe {
        match value {
            Some(v) => std::env::set_var(name, v),
            None => std::env::remove_var(name),
        }
    }
}

/// Variables whose empty value must mean the default.
const EMPTY_MEANS_DEFAULT: [&str; 7] = [
    "GSM_THREADS",
    "GSM_STACK_SIZE",
    "GSM_SLOT_SIZE",
    "GSM_FABRIC",
    "GSM_PIN",
    "GSM_CONNECT_TIMEOUT",
    "GSM_TCP_BIND",
];

fn run_once() -> Result<usize, gossamer::Error> {
    let config = gossamer::Config::from_env()?;
    gossamer::run(config, gossamer::worker_count)
}

#[test]
fn settings_are_checked_in_a_job_of_one_rank_and_empty_means_default() {
    for (name, bad) in [
        ("GSM_FABRIC", "infiniband"),
        ("GSM_SINGLE_COPY", "maybe"),
        ("GSM_CONNECT_TIMEOUT", "x"),
        ("GSM_TCP_BIND", "nowhere"),
    ] {
        set(name, Some(bad));
        let r = run_once();
        set(name, None);
        let e = r.expect_err(&format!("{name}={bad} was accepted"));
        let message = e.to_string();
        assert!(
            message.contains(name) || message.contains(bad),
            "{name}={bad}: the error does not say what: {message}"
        );
        // Worded as the runtime's other errors, which programs put behind their own name.
        assert!(
            !message.starts_with("gossamer:"),
            "{name}={bad}: the error names gossamer again: {message}"
        );
    }
    // The runtime still starts afterwards: the refusals left nothing behind.
    let default = run_once().expect("a run with no GSM_ variables set");
    for name in EMPTY_MEANS_DEFAULT {
        set(name, Some(""));
    }
    let r = run_once();
    for name in EMPTY_MEANS_DEFAULT {
        set(name, None);
    }
    assert_eq!(
        r.expect("empty variables mean the defaults"),
        default,
        "an empty GSM_THREADS means the default worker count"
    );
}
