//! Real jobs through `gsmrun` on this machine: every rank says hello once with the right size
//! (also when the hostfile spells one host two ways), ranks start with address-space
//! randomisation off unless `--keep-aslr`, and `--dry-run` prints the placement and command
//! without starting anything.

use gsm_tests::bins::gsm_hello;
use gsm_tests::hello::{ADDR_NO_RANDOMIZE, personalities};
use gsm_tests::job::{assert_exit, assert_ranks, gsmrun};
use gsm_tests::process::{PidGuard, run};
use gsm_tests::scratch::{RunId, Scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

fn hello_job(np: u32, extra: &[&str]) {
    let guard = PidGuard::new();
    let np_text = np.to_string();
    let mut cmd = gsmrun(["-np", np_text.as_str()]);
    cmd.args(extra).arg(gsm_hello());
    let done = run(&mut cmd, LIMIT);
    let what = format!("gsmrun -np {np} {} gsm-hello", extra.join(" "));
    assert_exit(&done, 0, &what);
    assert_ranks(&done, np, &guard, &what);
}

#[test]
fn one_rank_says_hello() {
    hello_job(1, &[]);
}

#[test]
fn two_ranks_say_hello() {
    hello_job(2, &[]);
}

#[test]
fn four_ranks_oversubscribed_say_hello() {
    hello_job(4, &["--oversubscribe"]);
}

#[test]
fn two_spellings_of_one_host_are_one_host() {
    // Passed on as two hosts, Open MPI refused them: "multiple definitions of the slot count".
    let guard = PidGuard::new();
    let scratch = Scratch::new("hostcase", RunId::next());
    let hostfile = scratch.write("hosts", "Localhost slots=1\nlocalhost slots=1\n");
    let mut cmd = gsmrun(["-np", "2", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello());
    let done = run(&mut cmd, LIMIT);
    let what = "a hostfile naming Localhost and localhost";
    assert_exit(&done, 0, what);
    assert_ranks(&done, 2, &guard, what);
}

fn personality_job(extra: &[&str]) -> (std::collections::BTreeMap<u32, u32>, String) {
    let guard = PidGuard::new();
    let mut cmd = gsmrun(["-np", "2"]);
    cmd.args(extra).arg(gsm_hello()).arg("--print-personality");
    let done = run(&mut cmd, LIMIT);
    let what = format!(
        "gsmrun -np 2 {} gsm-hello --print-personality",
        extra.join(" ")
    );
    assert_exit(&done, 0, &what);
    assert_ranks(&done, 2, &guard, &what);
    let words = personalities(&done.stdout);
    assert_eq!(
        words.len(),
        2,
        "{what}: expected a personality line from each rank\n{}",
        done.report()
    );
    (words, done.report())
}

#[test]
fn ranks_start_with_aslr_off_by_default() {
    let (words, report) = personality_job(&[]);
    for (rank, word) in words {
        assert!(
            word & ADDR_NO_RANDOMIZE != 0,
            "rank {rank}: personality {word:08x} lacks ADDR_NO_RANDOMIZE ({ADDR_NO_RANDOMIZE:#x})\n{report}"
        );
    }
}

#[test]
fn keep_aslr_leaves_randomisation_on() {
    let (words, report) = personality_job(&["--keep-aslr"]);
    for (rank, word) in words {
        assert!(
            word & ADDR_NO_RANDOMIZE == 0,
            "rank {rank}: personality {word:08x} has ADDR_NO_RANDOMIZE despite --keep-aslr\n{report}"
        );
    }
}

#[test]
fn dry_run_prints_the_placement_and_command_and_starts_nothing() {
    let scratch = Scratch::new("dryrun", RunId::next());
    // Host names that do not resolve: anything that tried to reach them would fail.
    let hostfile = scratch.write(
        "hosts",
        "dryhosta.invalid slots=2\ndryhostb.invalid slots=2\n",
    );
    let mut cmd = gsmrun(["--dry-run", "-np", "4", "-hostfile"]);
    cmd.arg(&hostfile).arg(gsm_hello()).arg("--sleep").arg("30");
    let done = run(&mut cmd, Duration::from_secs(20));
    assert_exit(&done, 0, "gsmrun --dry-run");
    assert!(
        done.elapsed < Duration::from_secs(5),
        "--dry-run took {:?}\n{}",
        done.elapsed,
        done.report()
    );
    assert!(
        !done.stdout.contains("hello from rank"),
        "--dry-run started ranks\n{}",
        done.report()
    );
    let printed = format!("{}{}", done.stdout, done.stderr);
    for needle in [
        "dryhosta.invalid",
        "dryhostb.invalid",
        "-np",
        "4",
        &gsm_hello().display().to_string(),
        "--sleep",
    ] {
        assert!(
            printed.contains(needle),
            "--dry-run output lacks `{needle}`\n{}",
            done.report()
        );
    }
    assert!(
        printed.contains("mpirun") || printed.contains("mpiexec"),
        "--dry-run output names no MPI launcher (mpirun/mpiexec)\n{}",
        done.report()
    );
}

/// Ranks start on the host gsmrun says they run on, also when it oversubscribes: every rank's
/// `GSM_HOST_ADDR`, `GSM_LOCAL_RANK` and `GSM_LOCAL_SIZE` agree with where Open MPI started it.
/// The hosts are names of this machine reached through a launch agent that runs the command
/// here, as ssh to each host would there; Open MPI starts one daemon per host name, and the
/// daemon a rank runs under and its `OMPI_COMM_WORLD_LOCAL_RANK`/`LOCAL_SIZE` say where it is.
/// (Oversubscribed by slot, gsmrun placed `a,b,a,b` while mpirun started `a,a,b,b`.)
#[test]
fn oversubscribed_ranks_run_where_gsmrun_says() {
    let scratch = Scratch::new("placement", RunId::next());
    // Each host's daemon gets its own session directory: daemons of one job on one machine
    // otherwise race to create the same one, and one of them may fail (`orte_session_dir
    // failed`). As ssh would, the agent starts it in a clean environment, so a
    // runtime setting of gsmrun's environment reaches the ranks only if gsmrun passes it on
    // (GSM_SLOT_SIZE reached only the ranks of the launching host).
    let agent = scratch.write_executable(
        "agent",
        &format!(
            "#!/bin/sh\n# like ssh HOST COMMAND, but here\n\
             while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
             tmp='{}'/\"$1\"\nmkdir -p \"$tmp\"\nshift\n\
             exec env -i PATH=\"$PATH\" HOME=\"$HOME\" OMPI_MCA_orte_tmpdir_base=\"$tmp\" \
             OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 sh -c \"$*\"\n",
            scratch.path().display()
        ),
    );
    // The daemon's id ends its URI (`802816000.1;tcp://…`): 0 is mpirun's own, which starts no
    // rank here, and the others follow the hostfile's hosts, which gsmrun writes in the order of
    // GSM_HOSTS.
    let probe = scratch.write_executable(
        "probe",
        "#!/bin/sh\nd=${OMPI_MCA_orte_local_daemon_uri%%;*}\n\
         echo \"placed $GSM_RANK $GSM_HOSTS $GSM_HOST_ADDR $GSM_LOCAL_RANK/$GSM_LOCAL_SIZE \
         ${d##*.} $OMPI_COMM_WORLD_LOCAL_RANK/$OMPI_COMM_WORLD_LOCAL_SIZE $GSM_SLOT_SIZE\"\n",
    );
    let cases: [(&str, &[&str]); 5] = [
        ("placea,placeb", &["-np", "4", "--oversubscribe"]),
        ("placea:2,placeb:1", &["-np", "5", "--oversubscribe"]),
        (
            "placea:2,placeb:1",
            &["-np", "5", "--oversubscribe", "--map-by", "node"],
        ),
        ("placea,placeb,placec", &["-np", "7", "--oversubscribe"]),
        ("placea:2,placeb:2", &["-np", "3", "--map-by", "node"]),
    ];
    for (hosts, extra) in cases {
        let what = format!("gsmrun -H {hosts} {}", extra.join(" "));
        let mut cmd = gsmrun(["-H", hosts, "--launch-agent"]);
        cmd.arg(&agent)
            .args(extra)
            .arg(&probe)
            .env("GSM_SLOT_SIZE", "65536");
        let done = run(&mut cmd, LIMIT);
        assert_exit(&done, 0, &what);
        let lines: Vec<Vec<&str>> = done
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("placed "))
            .map(|l| l.split(' ').collect())
            .collect();
        let np: usize = extra[1].parse().expect("-np N");
        assert_eq!(
            lines.len(),
            np,
            "{what}: a line per rank\n{}",
            done.report()
        );
        for w in &lines {
            let told = w.get(1).and_then(|hosts| {
                let h = hosts.split(',').position(|h| Some(&h) == w.get(2))?;
                Some(format!("daemon {} as local rank {}", h + 1, w.get(3)?))
            });
            let started = (w.len() >= 6).then(|| format!("daemon {} as local rank {}", w[4], w[5]));
            assert!(
                w.get(6) == Some(&"65536"),
                "{what}: rank {} did not get gsmrun's GSM_SLOT_SIZE=65536\n{}",
                w[0],
                done.report()
            );
            assert!(
                told.is_some() && told == started,
                "{what}: rank {} was told {:?} (host {}), but Open MPI started it on {:?}\n{}",
                w[0],
                told,
                w.get(2).unwrap_or(&"?"),
                started,
                done.report()
            );
        }
    }
}

/// Under MPICH's Hydra, too, every rank starts on the host gsmrun says, by slot and by node,
/// oversubscribed or not: gsmrun spells the placement out in Hydra's hostfile, rank by rank.
/// (It passed `-rr` for `--map-by node`, which Hydra 4.0.2 refuses, so those jobs never
/// started, and whose old meaning, one rank per host in turn, ignores the per-host counts.)
/// Hydra is reached as `mpiexec` ([`gsm_tests::bins::hydra_path`]). The launch agent starts each
/// host's proxy here in a clean environment and names the host in `FAKEHOST`.
#[test]
fn under_hydra_every_rank_starts_where_gsmrun_says() {
    let scratch = Scratch::new("hydra", RunId::next());
    let path = gsm_tests::bins::hydra_path(scratch.path());
    let agent = scratch.write_executable(
        "agent",
        "#!/bin/sh\n# like ssh HOST COMMAND, but here\n\
         while [ $# -gt 0 ]; do case \"$1\" in -*) shift;; *) break;; esac; done\n\
         host=\"$1\"\nshift\n\
         exec env -i PATH=\"$PATH\" HOME=\"$HOME\" FAKEHOST=\"$host\" sh -c \"$*\"\n",
    );
    let probe = scratch.write_executable(
        "probe",
        "#!/bin/sh\necho \"placed $GSM_RANK $GSM_HOST_ADDR $GSM_LOCAL_RANK $GSM_LOCAL_SIZE \
         $FAKEHOST $GSM_SLOT_SIZE\"\n",
    );
    let cases: [(&str, &[&str]); 5] = [
        ("placea,placeb", &["-np", "4", "--oversubscribe"]),
        ("placea:2,placeb:1", &["-np", "5", "--oversubscribe"]),
        (
            "placea:2,placeb:1",
            &["-np", "5", "--oversubscribe", "--map-by", "node"],
        ),
        ("placea:3,placeb:1", &["-np", "4", "--map-by", "node"]),
        ("placea:2,placeb:2", &["-np", "3", "--map-by", "node"]),
    ];
    for (hosts, extra) in cases {
        let what = format!(
            "gsmrun --launcher mpiexec (Hydra) -H {hosts} {}",
            extra.join(" ")
        );
        let mut cmd = gsmrun(["--launcher", "mpiexec", "-H", hosts, "--launch-agent"]);
        cmd.arg(&agent)
            .args(extra)
            .arg(&probe)
            .env("PATH", &path)
            .env("GSM_SLOT_SIZE", "65536");
        let done = run(&mut cmd, LIMIT);
        assert_exit(&done, 0, &what);
        let mut lines: Vec<Vec<&str>> = done
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("placed "))
            .map(|l| l.split(' ').collect())
            .collect();
        lines.sort_by_key(|w| w[0].parse::<usize>().unwrap_or(usize::MAX));
        let np: usize = extra[1].parse().expect("-np N");
        let ranks: Vec<String> = lines.iter().map(|w| w[0].to_string()).collect();
        let all: Vec<String> = (0..np).map(|r| r.to_string()).collect();
        assert_eq!(ranks, all, "{what}: a line per rank\n{}", done.report());
        for w in &lines {
            assert!(
                w.len() == 6 && w[1] == w[4] && w[5] == "65536",
                "{what}: rank {} was told host {:?}, but Hydra started it on {:?} \
                 (GSM_SLOT_SIZE {:?})\n{}",
                w[0],
                w.get(1),
                w.get(4),
                w.get(5),
                done.report()
            );
            // The local ranks of a host are 0..size, each once, size being its rank count.
            let here: Vec<&Vec<&str>> = lines.iter().filter(|o| o[4] == w[4]).collect();
            let mut local: Vec<&str> = here.iter().map(|o| o[2]).collect();
            local.sort_by_key(|l| l.parse::<usize>().unwrap_or(usize::MAX));
            let expected: Vec<String> = (0..here.len()).map(|l| l.to_string()).collect();
            assert!(
                local == expected && w[3] == here.len().to_string(),
                "{what}: local ranks on {} are {local:?} of {}, for {} ranks\n{}",
                w[4],
                w[3],
                here.len(),
                done.report()
            );
        }
    }
}

/// A Gossamer program built against one MPI and started by another's launcher is refused on
/// every rank, with a line that says so, instead of running as that many jobs of one rank each:
/// `gsm-hello`, `cluster_check` and both Graph500 engines, built against Open MPI, under MPICH's
/// Hydra.
/// (Each rank's `MPI_Init` made a world of its own; every rank ran the whole program alone and
/// the job exited 0.)
#[test]
fn a_program_of_another_mpi_than_its_launcher_is_refused_not_run_alone() {
    let scratch = Scratch::new("foreign-mpi", RunId::next());
    let path = gsm_tests::bins::hydra_path(scratch.path());
    let graph500 = gsm_tests::bins::bin("graph500");
    let cases: [(&str, std::path::PathBuf, &[&str], i32, &str); 4] = [
        (
            "gsm-hello",
            gsm_tests::bins::bin("gsm-hello"),
            &[],
            2,
            "hello from rank",
        ),
        (
            "cluster_check",
            gsm_tests::cluster::cluster_check(),
            &[],
            1,
            "passed",
        ),
        (
            "graph500 --engine gsm",
            graph500.clone(),
            &["8", "--engine", "gsm"],
            2,
            "TEPS",
        ),
        (
            "graph500 --engine mpi",
            graph500,
            &["8", "--engine", "mpi"],
            2,
            "TEPS",
        ),
    ];
    for (name, program, args, code, done_word) in cases {
        let what = format!("gsmrun --launcher mpiexec (Hydra) -np 2 {name} (built with Open MPI)");
        let mut cmd = gsmrun(["--launcher", "mpiexec", "-np", "2", "-t", "1"]);
        cmd.arg(program).args(args).env("PATH", &path);
        let done = run(&mut cmd, LIMIT);
        assert_exit(&done, code, &what);
        assert!(
            !done.stdout.contains(done_word),
            "{what}: a rank ran the program alone\n{}",
            done.report()
        );
        assert!(
            done.stderr.contains(
                "MPI_Init made a job of 1 rank(s), but the launcher started 2 (GSM_SIZE=2): this \
                 program's MPI library is not the one of its launcher"
            ),
            "{what}: the refusal must say why\n{}",
            done.report()
        );
    }
}

/// A job whose rings would not fit in this host's memory is refused on every rank, before any
/// is allocated, with the numbers and what to lower. Each rank's own rings pass the check a rank
/// makes alone; only the whole job's do not: with 64 MiB slots (16 per ring, so 1 GiB a ring)
/// and L workers per rank, a rank's own rings take 2L² GiB and the two ranks' on this host
/// 4L(2L-1) GiB. L is picked from this machine's memory so that the first fits and the second
/// does not. (Both ranks were killed by the kernel's OOM killer, with nothing said.)
#[test]
fn a_job_whose_rings_exceed_the_hosts_memory_is_refused_up_front() {
    let mem_gib: u64 = std::fs::read_to_string("/proc/meminfo")
        .expect("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib >> 20)
        .expect("MemTotal in /proc/meminfo");
    let workers = ((mem_gib / 2) as f64).sqrt().floor().max(1.0) as u64;
    assert!(2 * workers * workers <= mem_gib && 4 * workers * (2 * workers - 1) > mem_gib);
    let threads = workers.to_string();
    let what = format!("gsmrun -np 2 -t {threads} with GSM_SLOT_SIZE=64M ({mem_gib} GiB here)");
    let mut cmd = gsmrun(["-np", "2", "-t", threads.as_str(), "--oversubscribe"]);
    // Graph500 takes its workers from -t (cluster_check sets its own).
    cmd.arg(gsm_tests::bins::bin("graph500"))
        .args(["8", "--engine", "gsm"])
        .env("GSM_SLOT_SIZE", "64M");
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 2, &what);
    let need = 4 * workers * (2 * workers - 1);
    assert!(
        done.stderr.contains(&format!(
            "the job's {} workers with 16 slots of 67108864 bytes per ring need at least {need} \
             GiB of rings on host",
            2 * workers
        )) && done.stderr.contains("lower the workers per rank"),
        "{what}: the refusal must give the numbers\n{}",
        done.report()
    );
    assert!(
        done.elapsed < std::time::Duration::from_secs(20),
        "{what}: took {:?}\n{}",
        done.elapsed,
        done.report()
    );
}

/// As root, gsmrun allows Open MPI to run as root and says so, but only when the user has not
/// allowed it already (the warning then told them what they had just done).
#[test]
fn the_root_warning_comes_only_when_gsmrun_sets_the_permission() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: nothing to check");
        return;
    }
    let warning = "allowing Open MPI to run as root";
    let mut cmd = gsmrun(["-np", "1", "/bin/true"]);
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "gsmrun as root");
    assert!(done.stderr.contains(warning), "{}", done.report());
    let mut cmd = gsmrun(["-np", "1", "/bin/true"]);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let done = run(&mut cmd, LIMIT);
    assert_exit(&done, 0, "gsmrun as root, allowed by the user");
    assert!(!done.stderr.contains(warning), "{}", done.report());
}
