//! The binary end to end: a small run prints the reference's results block (parseable, in the
//! reference's field order) and the same results as JSON; on graphs too small for their roots it
//! warns; bad input, a `--json` path that cannot be written among it, exits with status 2.

use std::process::{Command, Output};

fn graph500(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_graph500"))
        .args(args)
        .output()
        .expect("run graph500")
}

/// The reference's field names, in its order, for a run of both kernels.
fn reference_fields() -> Vec<String> {
    let stats = [
        "min",
        "firstquartile",
        "median",
        "thirdquartile",
        "max",
        "mean",
        "stddev",
    ];
    let mut f: Vec<String> = [
        "SCALE",
        "edgefactor",
        "NBFS",
        "graph_generation",
        "num_mpi_processes",
        "construction_time",
    ]
    .map(String::from)
    .to_vec();
    for k in ["bfs  ", "sssp "] {
        f.extend(stats.iter().map(|s| format!("{k}{s}_time")));
    }
    f.extend(stats.iter().map(|s| format!("{s}_nedge")));
    for k in ["bfs  ", "sssp "] {
        for s in ["min", "firstquartile", "median", "thirdquartile", "max"] {
            f.push(format!("{k}{s}_TEPS"));
        }
        f.push(format!("{k}harmonic_mean_TEPS"));
        f.push(format!("{k}harmonic_stddev_TEPS"));
    }
    for k in ["bfs  ", "sssp "] {
        f.extend(stats.iter().map(|s| format!("{k}{s}_validate")));
    }
    f
}

/// Parses "name: value" lines as the existing Graph500 scripts do (name up to the colon, value the
/// last token).
fn parse_block(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .map(|l| {
            let (name, rest) = l.split_once(':').expect("name: value");
            let value = rest.split_whitespace().last().expect("a value");
            (name.to_string(), value.parse().expect("a number"))
        })
        .collect()
}

#[test]
fn scale_10_prints_the_reference_block_and_json() {
    let dir = std::env::temp_dir().join(format!("graph500-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json_path = dir.join("results.json");
    let out = graph500(&[
        "10",
        "--engine",
        "seq",
        "--json",
        json_path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "no progress when stderr is not a terminal, and no warning about the roots"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let block = parse_block(&text);
    let names: Vec<&str> = block.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, reference_fields());
    let get = |name: &str| block.iter().find(|(n, _)| n == name).unwrap().1;
    assert_eq!(get("SCALE"), 10.0);
    assert_eq!(get("edgefactor"), 16.0);
    assert_eq!(get("NBFS"), 64.0);
    assert_eq!(get("num_mpi_processes"), 1.0);
    // All 64 roots lie in the giant component of 16239 edges.
    assert_eq!(get("min_nedge"), 16239.0);
    assert_eq!(get("max_nedge"), 16239.0);
    assert!(get("bfs  harmonic_mean_TEPS") > 0.0);
    assert!(get("sssp min_validate") >= 0.0);
    assert!(text.contains("bfs  harmonic_mean_TEPS:     !  "));

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(json["SCALE"], 10);
    assert_eq!(json["NBFS"], 64);
    assert_eq!(json["bfs_nedges"].as_array().unwrap().len(), 64);
    let teps = json["sssp_harmonic_mean_TEPS"].as_f64().unwrap();
    let printed = get("sssp harmonic_mean_TEPS");
    assert!(
        (teps - printed).abs() <= printed * 1e-5,
        "{teps} vs {printed}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tiny_graphs_warn_that_their_roots_repeat_or_have_no_edge() {
    // SCALE 5: the draws run out, 2 of the roots taken as drawn have no edge (searches of m = 0,
    // so the harmonic means are 0); SCALE 6: roots repeat, but all have an edge. The block is
    // the reference's either way. (SCALE 10 prints nothing on stderr, see above.)
    for (scale, needles, harmonic) in [
        (
            "5",
            &[
                "only 30 of the 64 search roots are distinct vertices with an edge",
                "graph of 32 vertices",
                "32 repeat an earlier root and 2 have no edge",
                "TEPS statistics include zeros",
                "--roots 19 or fewer",
            ][..],
            Some(0.0),
        ),
        (
            "6",
            &[
                "only 48 of the 64 search roots",
                "16 repeat an earlier root, so",
                "--roots 42 or fewer",
            ][..],
            None,
        ),
    ] {
        let out = graph500(&[scale, "--engine", "seq"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "SCALE {scale}: {err}");
        assert_eq!(err.lines().count(), 1, "SCALE {scale}: one warning\n{err}");
        assert!(err.starts_with("graph500: warning: "), "{err}");
        for needle in needles {
            assert!(err.contains(needle), "SCALE {scale}: {needle:?} in {err}");
        }
        assert_eq!(err.contains("zeros"), harmonic.is_some(), "{err}");
        let block = parse_block(&String::from_utf8(out.stdout).unwrap());
        let get = |name: &str| block.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(get("NBFS"), 64.0);
        if let Some(h) = harmonic {
            assert_eq!(get("bfs  harmonic_mean_TEPS"), h);
            assert_eq!(get("sssp harmonic_mean_TEPS"), h);
            assert_eq!(get("min_nedge"), 0.0);
        }
    }
}

#[test]
fn scale_12_bfs_only_without_validation() {
    let out = graph500(&[
        "12",
        "8",
        "--kernels",
        "bfs",
        "--no-validate",
        "--roots",
        "5",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let block = parse_block(&String::from_utf8(out.stdout).unwrap());
    let get = |name: &str| block.iter().find(|(n, _)| n == name).map(|x| x.1);
    assert_eq!(get("edgefactor"), Some(8.0));
    assert_eq!(get("NBFS"), Some(5.0));
    assert_eq!(get("sssp min_time"), None);
    assert_eq!(
        get("bfs  max_validate"),
        Some(-1.0),
        "validation off is reported as -1"
    );
}

#[test]
fn a_json_path_that_cannot_be_written_is_refused_before_the_run() {
    let dir = std::env::temp_dir().join(format!("graph500-cli-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A typo'd directory, and a path that is a directory: refused with the path and the OS
    // error, before the run (no results block; found at the end, the block was printed and the
    // run exited 1).
    let missing = dir.join("no-such-dir/results.json");
    for (path, reason) in [
        (&missing, "No such file or directory"),
        (&dir, "Is a directory"),
    ] {
        let path = path.to_str().unwrap();
        let err = refused(&["10", "--engine", "seq", "--json", path]);
        for needle in [path, reason, "nothing was run"] {
            assert!(err.contains(needle), "{needle:?} in {err}");
        }
    }
    // The check changes nothing: when the run then fails (SCALE 31 needs far more memory than
    // a test machine has), an existing file keeps its contents and no new file is left.
    let existing = dir.join("existing.json");
    std::fs::write(&existing, "earlier results\n").unwrap();
    let fresh = dir.join("fresh.json");
    for path in [&existing, &fresh] {
        let args = ["31", "--engine", "seq", "--json", path.to_str().unwrap()];
        assert_refused(&args, "choose a smaller SCALE");
    }
    assert_eq!(
        std::fs::read_to_string(&existing).unwrap(),
        "earlier results\n"
    );
    assert!(!fresh.exists(), "a failed run left {}", fresh.display());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs graph500 with `args`, which it must refuse (exit 2, no results); returns its stderr.
fn refused(args: &[&str]) -> String {
    let out = graph500(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(out.stdout.is_empty(), "{args:?}: no results");
    err
}

fn assert_refused(args: &[&str], needle: &str) {
    let err = refused(args);
    assert!(err.contains(needle), "{args:?}: {err}");
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    assert_refused(&["0"], "0 is not in 1..=31");
    assert_refused(&["32"], "32 is not in 1..=31");
    assert_refused(&["ten"], "invalid digit");
    assert_refused(
        &["10", "--kernels", "bfs,pagerank"],
        "invalid value 'pagerank'",
    );
    for list in ["bfs,", ",sssp", "bfs,,sssp"] {
        let err = refused(&["10", "--kernels", list]);
        assert!(
            err.contains("the list given to --kernels has an empty entry"),
            "{list}: {err}"
        );
        assert!(!err.contains("none was supplied"), "{list}: {err}");
    }
    assert_refused(&[], "<SCALE>");
    assert_refused(&["10", "--engine", "gpu"], "invalid value 'gpu'");
}

/// A malformed collectives variable is bad input like a malformed runtime one: one line naming
/// it, status 2, before anything runs. (Read first inside the run, it made every worker panic.)
#[test]
fn a_malformed_collectives_variable_is_refused_before_the_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_graph500"))
        .args(["6"])
        .env("GSM_COLL_BOARD", "x")
        .env("GSM_THREADS", "2")
        .output()
        .expect("run graph500");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("GSM_COLL_BOARD=\"x\""), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "no results for a run that did not happen"
    );
}
