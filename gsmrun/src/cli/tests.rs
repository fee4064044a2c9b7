use super::*;

fn norm(args: &[&str]) -> Vec<String> {
    normalize_args(args.iter().map(OsString::from).collect())
        .into_iter()
        .map(|a| a.into_string().unwrap())
        .collect()
}

#[test]
fn mpirun_spellings_are_rewritten_before_the_program_only() {
    assert_eq!(
        norm(&[
            "gsmrun",
            "-np",
            "4",
            "-hostfile",
            "h",
            "./app",
            "-np",
            "7",
            "-x"
        ]),
        [
            "gsmrun",
            "--np",
            "4",
            "--hostfile",
            "h",
            "--",
            "./app",
            "-np",
            "7",
            "-x"
        ]
    );
    assert_eq!(
        norm(&[
            "gsmrun",
            "-machinefile=h",
            "-x",
            "A=1",
            "-oversubscribe",
            "app"
        ]),
        [
            "gsmrun",
            "--machinefile=h",
            "-x",
            "A=1",
            "--oversubscribe",
            "--",
            "app"
        ]
    );
    // A value that looks like a program path stays the option's value.
    assert_eq!(
        norm(&["gsmrun", "--launch-agent", "/bin/rsh", "app"]),
        ["gsmrun", "--launch-agent", "/bin/rsh", "--", "app"]
    );
    assert_eq!(
        norm(&["gsmrun", "--", "app", "--"]),
        ["gsmrun", "--", "app", "--"]
    );
}

#[test]
fn parses_every_option() {
    let cli = parse_from(
        [
            "gsmrun",
            "-np",
            "3",
            "-H",
            "a:2,b",
            "--map-by",
            "node",
            "--oversubscribe",
            "-x",
            "A",
            "-x",
            "B=2",
            "--tag-output",
            "--timeout",
            "5",
            "-t",
            "4",
            "--fabric",
            "tcp",
            "--launcher",
            "mpiexec",
            "--launch-agent",
            "ssh -p 2",
            "--keep-aslr",
            "--dry-run",
            "-v",
            "./app",
            "-v",
            "--np",
            "9",
        ]
        .iter()
        .map(OsString::from)
        .collect(),
    )
    .unwrap();
    assert_eq!(cli.np, Some(3));
    assert_eq!(cli.host.as_deref(), Some("a:2,b"));
    assert_eq!(cli.map_by, MapByArg::Node);
    assert!(cli.oversubscribe && cli.tag_output && cli.keep_aslr && cli.dry_run && cli.verbose);
    assert_eq!(cli.export, ["A", "B=2"]);
    assert_eq!(cli.timeout, Some(5.0));
    assert_eq!(cli.threads_per_rank, Some(4));
    assert_eq!(
        cli.fabric,
        Some(FabricChoice::Only(gsm_contract::contract::FabricKind::Tcp))
    );
    assert_eq!(cli.launcher, LauncherChoice::Mpiexec);
    assert_eq!(cli.launch_agent.as_deref(), Some("ssh -p 2"));
    assert_eq!(cli.program, "./app");
    assert_eq!(cli.args, ["-v", "--np", "9"]);
}

#[test]
fn short_n_and_machinefile_alias() {
    let cli = parse_from(
        ["gsmrun", "-n", "2", "--machinefile", "m", "app"]
            .iter()
            .map(OsString::from)
            .collect(),
    )
    .unwrap();
    assert_eq!(cli.np, Some(2));
    assert_eq!(cli.hostfile, Some(PathBuf::from("m")));
}

/// Short options grouped, the last taking the next argument as its value: `-vn 2 app` is
/// `-v -n 2 app` (the 2 was taken for the program, and `-n` lacked its value).
#[test]
fn grouped_short_options_take_their_value_from_the_next_argument() {
    let parse = |args: &[&str]| {
        let argv = std::iter::once("gsmrun").chain(args.iter().copied());
        parse_from(argv.map(OsString::from).collect()).unwrap()
    };
    let cli = parse(&["-vn", "2", "app", "-vn", "3"]);
    assert!(cli.verbose);
    assert_eq!(cli.np, Some(2));
    assert_eq!(cli.program, "app");
    assert_eq!(cli.args, ["-vn", "3"]);
    assert_eq!(parse(&["-vx", "A=1", "app"]).export, ["A=1"]);
    assert_eq!(parse(&["-vt", "4", "app"]).threads_per_rank, Some(4));
    // A value attached to the group stays there.
    let cli = parse(&["-vn2", "app"]);
    assert_eq!((cli.np, cli.program.to_str()), (Some(2), Some("app")));
    assert!(!short_group_ends_wanting_value("-vq"));
    assert!(!short_group_ends_wanting_value("--vn"));
}

#[test]
fn an_empty_hostfile_path_is_named_as_such() {
    for spelling in ["-hostfile", "--hostfile", "--machinefile"] {
        let e = refused(&[spelling, "", "app"]);
        assert!(
            e.contains("invalid value '' for '--hostfile <FILE>': the path is empty"),
            "{e}"
        );
    }
}

/// The message of a command line that [`parse_from`] must refuse with exit status 2.
fn refused(args: &[&str]) -> String {
    let argv = std::iter::once("gsmrun").chain(args.iter().copied());
    match parse_from(argv.map(OsString::from).collect()) {
        Ok(cli) => panic!("{args:?} was accepted as {cli:?}"),
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{args:?}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn mpirun_options_gsmrun_does_not_take_say_what_to_write_instead() {
    for (args, says) in [
        (
            &["--bind-to", "core", "app"][..],
            &[
                "`--bind-to core` is an mpirun option that gsmrun does not take",
                "not needed: gsmrun starts Open MPI with `--bind-to none`",
                "`-x GSM_PIN=1`",
            ][..],
        ),
        (
            &["-bind-to", "core", "app"],
            &["`-bind-to core` is an mpirun"],
        ),
        (&["--report-bindings", "app"], &["nothing to report"]),
        (
            &["--mca", "btl", "self,tcp", "app"],
            &[
                "`--mca btl self,tcp` is an mpirun",
                "write `-x OMPI_MCA_btl=self,tcp`",
            ],
        ),
        (
            &["-np", "2", "-mca", "btl", "tcp", "app"],
            &["`-mca btl tcp` is an mpirun", "`-x OMPI_MCA_btl=tcp`"],
        ),
        (
            &["-N", "2", "app"],
            &["`-N 2` is an mpirun", "`slots=2`", "`-H host1:2,host2:2`"],
        ),
        (&["-N2", "app"], &["`-N2` is an mpirun", "`slots=2`"]),
        (
            &["-npernode", "4", "app"],
            &["`-npernode 4` is an mpirun", "`slots=4`"],
        ),
        (&["-pernode", "app"], &["one rank per host"]),
        (
            &["-c", "2", "app"],
            &["`-c 2` is an mpirun", "write `-np 2`", "write `-t 2`"],
        ),
        (
            &["-H", "a,b", "-wdir", "/x", "app"],
            &["`-wdir /x` is an mpirun", "`cd /x` before running gsmrun"],
        ),
        (&["--wd=/x", "app"], &["`--wd=/x` is an mpirun", "`cd /x`"]),
        (&["-f", "hosts", "app"], &["write `-hostfile hosts`"]),
        (&["-genv", "A", "1", "app"], &["write `-x A=1`"]),
        (&["--bynode", "app"], &["write `--map-by node`"]),
        (
            &["--map-by", "ppr:1:node", "app"],
            &[
                "`--map-by ppr:1:node` is an Open MPI mapping that gsmrun does not do",
                "`slots=1`",
            ],
        ),
        (
            &["-map-by=core", "app"],
            &["`--map-by core` is an Open MPI", "takes `slot`"],
        ),
        (
            &["--map-by", "node:OVERSUBSCRIBE", "app"],
            &["write --oversubscribe"],
        ),
    ] {
        let err = refused(args);
        for s in says {
            assert!(err.contains(s), "{args:?}: no {s:?} in\n{err}");
        }
        // clap's own tip would run a program named after the option.
        assert!(!err.contains("as a value"), "{args:?}: {err}");
    }
}

#[test]
fn np_with_its_number_attached_says_to_add_a_space() {
    let err = refused(&["-np4", "app"]);
    assert!(
        err.contains("`-np4` joins the number of ranks to the option")
            && err.contains("write `-np 4`, with a space"),
        "{err}"
    );
    assert!(!err.contains("invalid value 'p4'"), "{err}");
}

#[test]
fn mpirun_options_after_the_program_or_as_values_are_left_alone() {
    let parse = |args: &[&str]| {
        let argv = std::iter::once("gsmrun").chain(args.iter().copied());
        parse_from(argv.map(OsString::from).collect()).unwrap()
    };
    let cli = parse(&[
        "-x",
        "N",
        "-H",
        "a",
        "app",
        "--bind-to",
        "core",
        "-np1",
        "-N",
    ]);
    assert_eq!(cli.export, ["N"]);
    assert_eq!(cli.args, ["--bind-to", "core", "-np1", "-N"]);
    assert_eq!(parse(&["--", "--mca", "x"]).program, "--mca");
    assert_eq!(parse(&["-np=2", "app"]).np, Some(2));
    assert_eq!(parse(&["-n2", "app"]).np, Some(2));
    assert_eq!(parse(&["--map-by", "node", "app"]).map_by, MapByArg::Node);
    // A --map-by value that is neither gsmrun's nor Open MPI's is clap's to refuse.
    assert!(refused(&["--map-by", "diagonal", "app"]).contains("possible values: slot, node"));
}

#[test]
fn export_parsing() {
    assert_eq!(
        Export::parse("A_1").unwrap(),
        Export {
            name: "A_1".into(),
            value: None
        }
    );
    assert_eq!(
        Export::parse("A=b=c").unwrap(),
        Export {
            name: "A".into(),
            value: Some("b=c".into())
        }
    );
    assert!(Export::parse("1A").is_err());
    assert!(Export::parse("=x").is_err());
    assert!(Export::parse("A-B").is_err());
}
