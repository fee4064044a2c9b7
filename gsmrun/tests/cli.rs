//! Tests of the `gsmrun` binary that need no MPI: the exact dry-run command lines for Open MPI and
//! Hydra (flavour forced with GSM_MPI_FLAVOUR), the exit status of bad input, and the rank
//! wrapper on its own (personality, control protocol, no orphans).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_gsmrun");

fn gsmrun(args: &[&str], flavour: &str) -> std::process::Output {
    gsmrun_with(args, flavour, &[])
}

/// [`gsmrun`] with `env` set, and no other `GSM_*` variable of the tests' environment (gsmrun
/// passes them all on, so they would change the command lines the tests expect).
fn gsmrun_with(args: &[&str], flavour: &str, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("GSM_")) {
            cmd.env_remove(k);
        }
    }
    cmd.args(args)
        .envs(env.iter().copied())
        .env("GSM_MPI_FLAVOUR", flavour)
        .env_remove("SLURM_JOB_ID")
        .env_remove("PBS_NODEFILE")
        .output()
        .expect("run gsmrun")
}

/// The `command:` line of a dry run, with the generated hostfile's directory replaced by `TMP`.
fn dry_command(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .skip_while(|l| *l != "command:")
        .nth(1)
        .unwrap_or_else(|| {
            panic!(
                "no command in dry run output:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .trim()
        .to_string();
    let tmp = std::env::temp_dir().display().to_string();
    let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
    for w in &mut words {
        if w.starts_with(&format!("{tmp}/gsmrun.gsm-")) && w.ends_with("/hostfile") {
            *w = "TMP/hostfile".to_string();
        }
    }
    words.join(" ")
}

#[test]
fn dry_run_open_mpi_exact_command() {
    let out = gsmrun(
        &[
            "-np",
            "3",
            "-H",
            "a:2,b:2",
            "-x",
            "A=1",
            "--dry-run",
            "/bin/app",
            "-np",
            "9",
        ],
        "openmpi",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun --hostfile TMP/hostfile -np 3 --map-by slot --bind-to none -x GSM_JOB_ID \
             -x GSM_SIZE -x GSM_FABRIC -x GSM_HOSTS -x GSM_RANK_HOSTS -x GSM_CONTROL \
             -x GSM_CONTROL_KEY -x A=1 {BIN} --rank-wrapper -- /bin/app -np 9"
        )
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // The path is printed, but the file is only written for a real run.
    assert!(
        text.contains("/hostfile (exists only while the job runs):\n  a slots=2\n  b slots=1\n"),
        "{text}"
    );
    assert!(text.contains("  0     a\n  1     a\n  2     b\n"), "{text}");
}

#[test]
fn dry_run_hydra_exact_command_by_node() {
    let out = gsmrun(
        &[
            "-n",
            "3",
            "-H",
            "a:2,b:2",
            "--map-by",
            "node",
            "--keep-aslr",
            "--launch-agent",
            "/x/rsh",
            "-t",
            "2",
            "--dry-run",
            "app",
        ],
        "hydra",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun -f TMP/hostfile -n 3 -launcher-exec /x/rsh -genvlist \
             GSM_JOB_ID,GSM_SIZE,GSM_THREADS,GSM_FABRIC,GSM_HOSTS,GSM_RANK_HOSTS,GSM_CONTROL,GSM_CONTROL_KEY \
             {BIN} --rank-wrapper --keep-aslr -- app"
        )
    );
    // By node, rank by rank (Hydra follows the file's order; it has no `-rr`).
    assert!(String::from_utf8_lossy(&out.stdout).contains("  a:1\n  b:1\n  a:1\n"));
}

#[test]
fn bad_input_exits_2() {
    for args in [
        &["--map-by", "diagonal", "app"][..],
        &["-x", "1BAD", "app"],
        &["--timeout", "-1", "app"],
        &["--start-timeout", "0", "app"],
        &["--start-timeout", "1e30", "app"],
        &["-np", "3", "-H", "a:1", "app"],
        &["--hostfile", "/nonexistent/hosts", "app"],
    ] {
        let out = gsmrun(args, "openmpi");
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = gsmrun(&["-np", "3", "-H", "a:1", "app"], "openmpi");
    assert_eq!(
        stderr_of(&out).trim_end(),
        "gsmrun: 3 ranks asked for but the hosts have only 1 slot; add hosts or slots, or pass \
         --oversubscribe (the hosts and slots of -H)"
    );
    // The user's GSM_MPI_FLAVOUR is input too.
    let out = gsmrun(&["--dry-run", "app"], "bogus");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_MPI_FLAVOUR=bogus"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn fabric_ofi_is_passed_on_and_shown_by_dry_run() {
    let out = gsmrun(&["--fabric", "ofi", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("GSM_FABRIC=ofi"), "{shown}");
}

/// `--fabric verbs` is passed on (only the ranks know whether the program has the `rdma`
/// feature and the host a device), listed by `--help`, and the dry run's fabric line says what
/// it means; `auto` says its rule for the placement.
#[test]
fn fabric_verbs_is_passed_on_and_the_dry_run_shows_the_choice() {
    let out = gsmrun(&["--fabric", "verbs", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("GSM_FABRIC=verbs"), "{shown}");
    assert!(
        shown.contains("fabric: verbs between every pair of ranks (RC queue pairs on"),
        "{shown}"
    );
    let help = gsmrun(&["--help"], "openmpi");
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("verbs"), "{help}");
    let one = gsmrun(&["--dry-run", "app"], "openmpi");
    let one = String::from_utf8_lossy(&one.stdout);
    assert!(
        one.contains("fabric: auto: shm (every rank on one host)"),
        "{one}"
    );
    let two = gsmrun(&["-H", "a,b", "-np", "2", "--dry-run", "app"], "openmpi");
    let two = String::from_utf8_lossy(&two.stdout);
    assert!(
        two.contains("fabric: auto: shm within a host; between hosts ofi if"),
        "{two}"
    );
    let tcp = gsmrun(&["--fabric", "tcp", "--dry-run", "app"], "openmpi");
    let tcp = String::from_utf8_lossy(&tcp.stdout);
    assert!(
        tcp.contains("fabric: tcp between every pair of ranks"),
        "{tcp}"
    );
}

#[test]
fn settings_every_rank_would_refuse_are_refused_up_front() {
    // The runtime's GSM_THREADS range is 1 to 4096.
    let out = gsmrun(&["-t", "4097", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-t 4097: the runtime runs at most 4096 worker threads"),
        "{}",
        stderr_of(&out)
    );
    let out = gsmrun(&["-t", "4096", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

#[test]
fn counts_of_one_are_singular() {
    let out = gsmrun(&["-np", "1", "-H", "a", "--dry-run", "app"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("placement: 1 rank on 1 host (from -H)"),
        "{text}"
    );
    let out = gsmrun(&["-np", "3", "-H", "a:2,b", "--dry-run", "app"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("placement: 3 ranks on 2 hosts (from -H)"),
        "{text}"
    );
    let out = gsmrun(&["-np", "2", "-H", "a", "--dry-run", "app"], "openmpi");
    assert!(
        stderr_of(&out).contains("the hosts have only 1 slot;"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn help_hides_the_wrapper_and_shows_examples() {
    let out = gsmrun(&["--help"], "openmpi");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(!text.contains("rank-wrapper"));
    assert!(text.contains("Examples:") && text.contains("-hostfile"));
}

fn personality_of(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .env_remove("GSM_CONTROL")
        .output()
        .expect("run wrapper");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn wrapper_turns_aslr_off_unless_asked() {
    let off = personality_of(&["--rank-wrapper", "--", "cat", "/proc/self/personality"]);
    let on = personality_of(&[
        "--rank-wrapper",
        "--keep-aslr",
        "--",
        "cat",
        "/proc/self/personality",
    ]);
    let off = u32::from_str_radix(&off, 16).unwrap();
    let on = u32::from_str_radix(&on, 16).unwrap();
    assert_eq!(off & 0x0040000, 0x0040000);
    assert_eq!(on & 0x0040000, 0);
}

/// The next frame other than a `BEAT` (the program's state, sent every second and on a change).
fn read_frame(r: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    loop {
        let mut head = [0u8; 5];
        r.read_exact(&mut head).ok()?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut p = vec![0u8; len];
        r.read_exact(&mut p).ok()?;
        if head[0] != b'B' {
            return Some((head[0], p));
        }
    }
}

fn start_wrapper(listener: &TcpListener, script: &str) -> std::process::Child {
    Command::new(BIN)
        .args(["--rank-wrapper", "--", "sh", "-c", script])
        .env("GSM_CONTROL", listener.local_addr().unwrap().to_string())
        .env("GSM_CONTROL_KEY", "k")
        .env("OMPI_COMM_WORLD_RANK", "1")
        .env("GSM_HOSTS", "a,b")
        .env("GSM_RANK_HOSTS", "0,1")
        .stdout(Stdio::null())
        .spawn()
        .expect("start wrapper")
}

#[test]
fn wrapper_reports_output_and_failure_then_waits_for_the_answer() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut w = start_wrapper(
        &listener,
        "echo $GSM_RANK $GSM_HOST_ADDR $GSM_CONTROL_KEY.; exit 3",
    );
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (tag, hello) = read_frame(&mut s).unwrap();
    assert_eq!(tag, b'H');
    assert!(hello.starts_with(b"k\x001\x00"));
    assert_eq!(read_frame(&mut s).unwrap(), (b'O', b"1 b .\n".to_vec()));
    assert_eq!(read_frame(&mut s).unwrap(), (b'X', b"exit 3".to_vec()));
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        w.try_wait().unwrap().is_none(),
        "wrapper must wait for gsmrun's answer"
    );
    s.write_all(&[b'K', 0, 0, 0, 0]).unwrap();
    assert_eq!(read_frame(&mut s).unwrap().0, b'D');
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(st) = w.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "wrapper did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(3));
}

/// Accepts a wrapper's control connection on `listener` and reads its hello.
fn accept_past_hello(listener: &TcpListener) -> TcpStream {
    let (mut s, _) = listener.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(read_frame(&mut s).unwrap().0, b'H');
    s
}

/// Starts a wrapper reporting to `listener` whose program prints its pid and sleeps 30 s; returns
/// the wrapper, its control connection (past the hello) and the program's pid.
fn wrapper_running_sleep(listener: &TcpListener) -> (Child, TcpStream, i32) {
    let w = start_wrapper(listener, "echo $$; exec sleep 30");
    let mut s = accept_past_hello(listener);
    let (tag, pid) = read_frame(&mut s).unwrap();
    assert_eq!(tag, b'O');
    let pid: i32 = String::from_utf8_lossy(&pid).trim().parse().unwrap();
    (w, s, pid)
}

#[test]
fn wrapper_kills_its_program_when_gsmrun_disappears() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut w, s, pid) = wrapper_running_sleep(&listener);
    let start = Instant::now();
    drop(s);
    let deadline = start + Duration::from_secs(5);
    loop {
        if w.try_wait().unwrap().is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "wrapper did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(start.elapsed() < Duration::from_secs(2));
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "program {pid} survived"
    );
}

#[test]
fn wrapper_removes_its_rank_s_segment_after_the_program_is_killed() {
    let job = format!("gsm-test-wrapper-{}", std::process::id());
    let seg = |r: u32| std::path::PathBuf::from(format!("/dev/shm/{job}-r{r}"));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // The program (rank 1) leaves its own segment and, as if it were another rank's, rank 0's,
    // then dies by SIGKILL.
    let mut w = Command::new(BIN)
        .args([
            "--rank-wrapper",
            "--",
            "sh",
            "-c",
            "touch /dev/shm/$GSM_JOB_ID-r1 /dev/shm/$GSM_JOB_ID-r0 && kill -9 $$",
        ])
        .env("GSM_CONTROL", listener.local_addr().unwrap().to_string())
        .env("GSM_CONTROL_KEY", "k")
        .env("GSM_JOB_ID", &job)
        .env("OMPI_COMM_WORLD_RANK", "1")
        .stdout(Stdio::null())
        .spawn()
        .expect("start wrapper");
    let mut s = accept_past_hello(&listener);
    let (tag, outcome) = read_frame(&mut s).unwrap();
    assert_eq!(
        (tag, String::from_utf8_lossy(&outcome).as_ref()),
        (b'X', "signal 9")
    );
    // The report comes after the clean-up.
    let (own, other) = (seg(1).exists(), seg(0).exists());
    let _ = std::fs::remove_file(seg(0));
    let _ = std::fs::remove_file(seg(1));
    s.write_all(&[b'K', 0, 0, 0, 0]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "wrapper did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !own,
        "the wrapper left its rank's segment {}",
        seg(1).display()
    );
    assert!(other, "the wrapper removed another rank's segment");
}

fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// GSM_THREADS of gsmrun's environment reaches every rank unless -t is given: a value every
/// rank would refuse is refused before the launch, as -t's is; with -t it does not matter.
#[test]
fn a_worker_count_every_rank_would_refuse_is_refused_before_the_launch() {
    for v in ["0", "5000", "99999999999999999999999", "four", "-2"] {
        let out = gsmrun_with(&["--dry-run", "app"], "openmpi", &[("GSM_THREADS", v)]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "GSM_THREADS={v}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "GSM_THREADS={v} in gsmrun's environment: every rank would refuse it; give a \
                 whole number of worker threads from 1 to 4096"
            )),
            "GSM_THREADS={v}: {stderr}"
        );
    }
    // The same value given with -x, which goes before the environment's.
    let out = gsmrun(&["-x", "GSM_THREADS=0", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-x GSM_THREADS=0: every rank would refuse it"),
        "{}",
        stderr_of(&out)
    );
    let out = gsmrun_with(
        &["-x", "GSM_THREADS=2", "--dry-run", "app"],
        "openmpi",
        &[("GSM_THREADS", "0")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    for (env, args) in [
        ("3", &["--dry-run", "app"][..]),
        ("", &["--dry-run", "app"]),
        ("0", &["-t", "2", "--dry-run", "app"]),
    ] {
        let out = gsmrun_with(args, "openmpi", &[("GSM_THREADS", env)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "GSM_THREADS={env:?} {args:?}: {}",
            stderr_of(&out)
        );
    }
}

/// A bad time limit is refused quoting the user's text and saying what is wrong with it.
#[test]
fn a_bad_time_limit_is_quoted_as_given_and_explained() {
    for (option, value, why) in [
        (
            "--timeout",
            "1e300",
            "too many seconds for this system's clock",
        ),
        ("--timeout", "18446744073709551616", "too many seconds"),
        (
            "--start-timeout",
            "soon",
            "expected a number of seconds, such as 30",
        ),
        ("--timeout", "nan", "give a positive number of seconds"),
        ("--timeout", "inf", "give a finite number of seconds"),
        ("--start-timeout", "-5", "give a positive number of seconds"),
    ] {
        let out = gsmrun(&[option, value, "--dry-run", "app"], "openmpi");
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{option} {value}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "invalid value '{value}' for '{option} <SECONDS>': {why}"
            )) && stderr.len() < 400,
            "{option} {value}: {stderr}"
        );
    }
}

#[test]
fn huge_timeout_is_refused_even_in_a_dry_run() {
    for t in ["1e19", "1e20"] {
        let out = gsmrun(&["--timeout", t, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{t}: {}", stderr_of(&out));
        assert!(stderr_of(&out).contains("--timeout"), "{}", stderr_of(&out));
    }
}

#[test]
fn rank_counts_beyond_the_limits_are_refused() {
    let out = gsmrun(
        &["-np", "4294967295", "--oversubscribe", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("at most"), "{}", stderr_of(&out));
    // Within the rank limit but GSM_RANK_HOSTS would exceed the kernel's limit on one string.
    let out = gsmrun(
        &[
            "-np",
            "65529",
            "-H",
            "a",
            "--oversubscribe",
            "--dry-run",
            "app",
        ],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_RANK_HOSTS"),
        "{}",
        stderr_of(&out)
    );
}

/// A job of two ranks from a list of 15 000 hosts starts: the hosts without a rank are not
/// passed to the ranks (`GSM_HOSTS` listed all of them, 150 KB, and gsmrun refused the job as
/// too long for the kernel).
#[test]
fn a_small_job_from_a_long_host_list_is_not_refused() {
    let out = gsmrun(
        &["-np", "3", "-H", "node[00001-15000]:2", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("GSM_HOSTS=node00001,node00002\n") && text.contains("GSM_RANK_HOSTS=0,0,1\n"),
        "{text}"
    );
}

/// A private directory under the temporary directory, removed when dropped.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("gsmrun-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test dir");
        TempDir(dir)
    }

    fn write(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, bytes).expect("write test file");
        path.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_hostfile_without_hosts_is_named() {
    let dir = TempDir::new("empty-hostfile");
    for text in ["", "# only a comment\n\n"] {
        let path = dir.write("hosts", text.as_bytes());
        let out = gsmrun(&["--hostfile", &path, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains(&format!("hostfile {path} names no host"))
                && stderr_of(&out).contains("node1 slots=4"),
            "{}",
            stderr_of(&out)
        );
    }
}

#[test]
fn an_empty_host_list_is_named() {
    for value in ["", " "] {
        let out = gsmrun(&["-H", value, "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.starts_with("gsmrun: -H/--host: the host list is empty\n"),
            "{value:?}: {err}"
        );
        assert!(!err.contains("unexpected"), "{value:?}: {err}");
    }
}

#[test]
fn a_non_utf8_hostfile_points_at_the_bad_byte() {
    let dir = TempDir::new("latin1-hostfile");
    let path = dir.write("hosts", b"a\n# M\xfcller\n");
    let out = gsmrun(&["--hostfile", &path, "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains(&format!("{path}:2:4: ")),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn mpirun_options_gsmrun_does_not_take_exit_2_saying_what_to_do() {
    for (args, says) in [
        (
            &["--bind-to", "core"][..],
            "`--bind-to core` is an mpirun option",
        ),
        (&["--map-by", "ppr:1:node"], "`slots=1`"),
        (&["--mca", "btl", "self,tcp"], "`-x OMPI_MCA_btl=self,tcp`"),
        (&["-N", "2"], "`slots=2`"),
        (&["-c", "2"], "`-np 2`"),
        (&["-wdir", "/x"], "`cd /x`"),
        (&["--report-bindings"], "nothing to report"),
        (&["-np1"], "write `-np 1`"),
    ] {
        let all: Vec<&str> = args.iter().copied().chain(["--dry-run", "app"]).collect();
        let out = gsmrun(&all, "openmpi");
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("as a value"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing planned");
    }
}

#[test]
fn negative_numbers_name_the_option() {
    for (opt, shown) in [
        ("-np", "--np"),
        ("-t", "--threads-per-rank"),
        ("--timeout", "--timeout"),
        ("--start-timeout", "--start-timeout"),
    ] {
        let out = gsmrun(&[opt, "-1", "--dry-run", "app"], "openmpi");
        assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(err.contains(shown) && err.contains("-1"), "{opt}: {err}");
        assert!(!err.contains("unexpected argument"), "{opt}: {err}");
        // Said in words, not as the range of a `u32`.
        assert!(!err.contains("4294967295"), "{opt}: {err}");
        if !opt.ends_with("timeout") {
            assert!(err.contains("a count cannot be negative"), "{opt}: {err}");
        }
    }
    let out = gsmrun(&["-np", "four", "--dry-run", "app"], "openmpi");
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("'four'") && err.contains("expected a whole number, such as 4"),
        "{err}"
    );
}

/// `-x NAME` of a variable gsmrun's environment does not have is left out of the launch, with a
/// warning in gsmrun's words (Open MPI printed one of its own, MPICH and srun nothing); one that
/// is set, if only to the empty string, is passed on.
#[test]
fn an_exported_variable_that_is_not_set_is_left_out_saying_so() {
    let args = [
        "-np",
        "1",
        "-x",
        "GOSSAMER_TEST_NOT_SET",
        "-x",
        "GOSSAMER_TEST_EMPTY",
        "--dry-run",
        "app",
    ];
    for flavour in ["openmpi", "hydra"] {
        let out = gsmrun_with(&args, flavour, &[("GOSSAMER_TEST_EMPTY", "")]);
        let stderr = stderr_of(&out);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        let command = dry_command(&out);
        assert!(
            !command.contains("GOSSAMER_TEST_NOT_SET") && command.contains("GOSSAMER_TEST_EMPTY"),
            "{flavour}: {command}"
        );
        assert!(
            stderr.contains(
                "gsmrun: warning: -x GOSSAMER_TEST_NOT_SET: GOSSAMER_TEST_NOT_SET is not set in \
                 gsmrun's environment, so the ranks do not get it"
            ) && !stderr.contains("GOSSAMER_TEST_EMPTY"),
            "{flavour}: {stderr}"
        );
    }
}

/// Runtime settings in gsmrun's environment reach every rank, on every host: mpirun and mpiexec
/// start remote ranks in a login environment, so they are exported by name (a `-x` of one keeps
/// its own value), and `GSM_FABRIC` is `--fabric`'s default instead of being overridden by it.
#[test]
fn runtime_settings_of_the_environment_reach_every_rank() {
    let env = [
        ("GSM_SLOT_SIZE", "65536"),
        ("GSM_PIN", "0"),
        ("GSM_COLL_PIECE", "4096"),
        ("GSM_FABRIC", "tcp"),
    ];
    let args = [
        "-np",
        "2",
        "-H",
        "a,b",
        "-x",
        "GSM_PIN=1",
        "--dry-run",
        "app",
    ];
    let out = gsmrun_with(&args, "openmpi", &env);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        dry_command(&out),
        format!(
            "mpirun --hostfile TMP/hostfile -np 2 --map-by slot --bind-to none -x GSM_JOB_ID \
             -x GSM_SIZE -x GSM_FABRIC -x GSM_HOSTS -x GSM_RANK_HOSTS -x GSM_CONTROL \
             -x GSM_CONTROL_KEY -x GSM_COLL_PIECE -x GSM_SLOT_SIZE -x GSM_PIN=1 {BIN} \
             --rank-wrapper -- app"
        )
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  GSM_FABRIC=tcp\n"), "{text}");
    let out = gsmrun_with(&args, "hydra", &env);
    assert!(
        dry_command(&out).contains(
            " -genvlist GSM_JOB_ID,GSM_SIZE,GSM_FABRIC,GSM_HOSTS,GSM_RANK_HOSTS,GSM_CONTROL,\
             GSM_CONTROL_KEY,GSM_COLL_PIECE,GSM_SLOT_SIZE -genv GSM_PIN 1 "
        ),
        "{}",
        dry_command(&out)
    );
    // --fabric wins over the environment; a bad GSM_FABRIC is named as such.
    let mut with_flag = args.to_vec();
    with_flag.splice(0..0, ["--fabric", "shm"]);
    let out = gsmrun_with(&with_flag, "openmpi", &env);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("  GSM_FABRIC=shm\n"), "{text}");
    let out = gsmrun_with(&args, "openmpi", &[("GSM_FABRIC", "infiniband")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("GSM_FABRIC=infiniband in gsmrun's environment"),
        "{}",
        stderr_of(&out)
    );
}

/// A PBS node file's names are merged in any ASCII case, as a hostfile's are: Open MPI, given
/// `vm` and `VM`, counted one host's slots twice and ended with an internal error.
#[test]
fn a_pbs_node_file_names_one_host_in_any_case_and_refuses_more_than_names() {
    let dir = std::env::temp_dir().join(format!("gsmrun-cli-pbs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a test directory");
    let file = dir.join("nodes");
    let run = |text: &str| {
        std::fs::write(&file, text).expect("the node file");
        let mut cmd = Command::new(BIN);
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("GSM_")) {
                cmd.env_remove(k);
            }
        }
        cmd.args(["-np", "2", "--dry-run", "app"])
            .env("GSM_MPI_FLAVOUR", "openmpi")
            .env_remove("SLURM_JOB_ID")
            .env("PBS_NODEFILE", &file)
            .output()
            .expect("run gsmrun")
    };
    let out = run("localhost\nLOCALHOST\n");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(text.contains("  localhost slots=2\n"), "{text}");
    let out = run("localhost\nlocalhost slots=2\n");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    let at = format!("{}:2:11: `slots=2` follows the host name", file.display());
    assert!(stderr_of(&out).contains(&at), "{}", stderr_of(&out));
    std::fs::remove_dir_all(&dir).expect("remove the test directory");
}

/// This machine under two names would be two hosts to the MPI launcher, which then failed with
/// an internal error that named neither; gsmrun says what is wrong before starting anything.
#[test]
fn this_machine_under_two_names_is_refused_saying_so() {
    let me = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("the hostname");
    let me = me.trim();
    for hosts in [
        format!("localhost:1,{me}:1"),
        "127.0.0.1,localhost".to_string(),
        // DNS names compare in any ASCII case, and so does the launcher's resolver.
        format!("LocalHost:1,{me}:1"),
        format!("localhost:1,{}:1", me.to_ascii_uppercase()),
    ] {
        let out = gsmrun(&["-np", "2", "-H", &hosts, "--dry-run", "app"], "openmpi");
        assert_eq!(
            out.status.code(),
            Some(2),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
        assert!(
            stderr_of(&out).contains("the hosts name this machine twice"),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
    }
    // One name, or a second host left without ranks, is fine.
    for hosts in [format!("{me}:2"), format!("localhost:2,{me}:1")] {
        let out = gsmrun(&["-np", "2", "-H", &hosts, "--dry-run", "app"], "openmpi");
        assert_eq!(
            out.status.code(),
            Some(0),
            "-H {hosts}: {}",
            stderr_of(&out)
        );
    }
}

#[test]
fn exporting_gsmrun_s_own_variables_is_refused() {
    for args in [
        &["-x", "GSM_JOB_ID=x"][..],
        &["-x", "GSM_CONTROL_KEY=k"],
        &["-x", "GSM_RANK_HOSTS"],
        &["-x", "GSM_RANK=1"],
        &["-t", "2", "-x", "GSM_THREADS=8"],
    ] {
        let mut all = args.to_vec();
        all.extend(["--dry-run", "app"]);
        let out = gsmrun(&all, "openmpi");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr_of(&out));
        assert!(
            stderr_of(&out).contains("gsmrun sets"),
            "{}",
            stderr_of(&out)
        );
    }
    // Without -t gsmrun leaves GSM_THREADS to the user.
    let out = gsmrun(&["-x", "GSM_THREADS=8", "--dry-run", "app"], "openmpi");
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}

/// A log sent to a file or a pipe has no terminal escape sequences in it.
#[test]
fn the_debug_log_is_plain_text_off_a_terminal() {
    // The launcher's detection logs (a forced flavour skips it).
    let out = Command::new(BIN)
        .args(["--dry-run", "app"])
        .env("GSM_LOG", "debug")
        .env_remove("GSM_MPI_FLAVOUR")
        .env_remove("SLURM_JOB_ID")
        .env_remove("PBS_NODEFILE")
        .output()
        .expect("run gsmrun");
    let log = stderr_of(&out);
    assert!(log.contains("DEBUG"), "no debug log: {log}");
    assert!(
        !log.contains('\x1b'),
        "escape sequences in a piped log: {log:?}"
    );
}

/// An empty program name is bad input, refused before anything starts: every rank failed to
/// start it, after the whole launch.
#[test]
fn an_empty_program_name_is_refused_up_front() {
    let out = gsmrun(&["-np", "2", ""], "openmpi");
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("the program's name is empty"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn wrapper_says_a_directory_is_not_a_program() {
    let report = no_start_report(&std::env::temp_dir());
    assert!(report.contains("is a directory"), "{report}");
}

/// A script whose `#!` interpreter is missing is not reported as a missing program (exec(2)'s
/// ENOENT said "No such file or directory" of a file that was there).
#[test]
fn wrapper_names_a_missing_interpreter() {
    use std::os::unix::fs::PermissionsExt as _;
    let script = std::env::temp_dir().join(format!("gsmrun-cli-interp-{}", std::process::id()));
    std::fs::write(&script, "#!/no/such/interpreter -x\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let report = no_start_report(&script);
    let _ = std::fs::remove_file(&script);
    assert!(
        report.contains("its interpreter \"/no/such/interpreter\" (its #! line) was not found"),
        "{report}"
    );
}

/// A program named without a `/` is looked up in PATH only (a shell's rule); one that is not
/// there but in the working directory, where `mpirun` would have found it, is not run, and the
/// report says how to name it.
#[test]
fn wrapper_says_how_to_run_a_program_of_the_working_directory() {
    let dir = TempDir::new("cli-cwd");
    let name = "gsmrun-cli-here";
    dir.write(name, b"#!/bin/sh\nexit 0\n");
    let report = no_start_report_in(std::path::Path::new(name), &dir.0);
    assert!(
        report.contains(&format!(
            "is not in PATH; there is a file of that name in the working directory: to run it, \
             write ./{name}"
        )),
        "{report}"
    );
    // Anywhere else the report is exec(2)'s.
    let report = no_start_report(std::path::Path::new(name));
    assert!(report.contains("No such file or directory"), "{report}");
}

/// The exit report of a wrapper asked to start `program`, which cannot start.
fn no_start_report(program: &std::path::Path) -> String {
    no_start_report_in(
        program,
        &std::env::current_dir().expect("a working directory"),
    )
}

/// [`no_start_report`] of a wrapper working in `dir`.
fn no_start_report_in(program: &std::path::Path, dir: &std::path::Path) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut w = Command::new(BIN)
        .current_dir(dir)
        .arg("--rank-wrapper")
        .arg("--")
        .arg(program)
        .env("GSM_CONTROL", listener.local_addr().unwrap().to_string())
        .env("GSM_CONTROL_KEY", "k")
        .env("OMPI_COMM_WORLD_RANK", "0")
        .stdout(Stdio::null())
        .spawn()
        .expect("start wrapper");
    let mut s = accept_past_hello(&listener);
    let (tag, report) = read_frame(&mut s).unwrap();
    let report = String::from_utf8_lossy(&report).into_owned();
    s.write_all(&[b'K', 0, 0, 0, 0]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "wrapper did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(tag, b'X');
    report
}

/// Whether `pid` runs (a zombie left to a parent that does not reap it counts as gone).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn kill9(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

#[test]
fn wrapper_sigkilled_takes_its_program_along() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let (mut w, _control, pid) = wrapper_running_sleep(&listener);
    w.kill().unwrap();
    w.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = alive(pid);
    if survived {
        kill9(pid);
    }
    assert!(!survived, "program {pid} outlived its SIGKILLed wrapper");
}

/// A fake `mpirun` first on PATH: starts one wrapper per rank (`-np N`) with
/// `OMPI_COMM_WORLD_RANK` set, after running `pre`, and waits for them (only). Every process started writes its pid to
/// `$GSM_TEST_DIR/pids`; dropping the launcher kills those still there and removes the directory.
struct FakeLauncher {
    dir: TempDir,
}

impl FakeLauncher {
    fn new(name: &str, pre: &str) -> FakeLauncher {
        let dir = TempDir::new(name);
        let script = format!(
            "#!/bin/bash\n\
             echo $$ >> \"$GSM_TEST_DIR/pids\"\n\
             np=1\n\
             while [ $# -gt 0 ]; do\n\
               case \"$1\" in\n\
                 -np) np=$2; shift 2 ;;\n\
                 --rank-wrapper) break ;;\n\
                 *) wrapper=$1; shift ;;\n\
               esac\n\
             done\n\
             {pre}\n\
             i=0\n\
             while [ $i -lt $np ]; do\n\
               OMPI_COMM_WORLD_RANK=$i \"$wrapper\" \"$@\" &\n\
               ranks=\"$ranks $!\"\n\
               i=$((i+1))\n\
             done\n\
             wait $ranks\n"
        );
        let path = dir.write("mpirun", script.as_bytes());
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeLauncher { dir }
    }

    /// Start gsmrun with these arguments, its stderr going to the file `stderr`.
    fn spawn(&self, args: &[&str]) -> Child {
        let path = format!(
            "{}:{}",
            self.dir.0.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let err_path = self.dir.0.join("stderr");
        Command::new(BIN)
            .args(args)
            .env("PATH", path)
            .env("GSM_MPI_FLAVOUR", "openmpi")
            .env("GSM_TEST_DIR", &self.dir.0)
            .env("TMPDIR", &self.dir.0)
            .env_remove("SLURM_JOB_ID")
            .env_remove("PBS_NODEFILE")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err_path).unwrap())
            .spawn()
            .expect("run gsmrun")
    }

    /// Run gsmrun with these arguments for at most `limit`; its exit code (`None` when it had to
    /// be killed or died by a signal) and its stderr.
    fn run(&self, args: &[&str], limit: Duration) -> (Option<i32>, String) {
        let err_path = self.dir.0.join("stderr");
        let mut child = self.spawn(args);
        let deadline = Instant::now() + limit;
        let code = loop {
            if let Some(st) = child.try_wait().unwrap() {
                break st.code();
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        (code, std::fs::read_to_string(err_path).unwrap_or_default())
    }
}

impl Drop for FakeLauncher {
    fn drop(&mut self) {
        let pids = std::fs::read_to_string(self.dir.0.join("pids")).unwrap_or_default();
        for pid in pids.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
            if alive(pid) {
                kill9(pid);
            }
        }
    }
}

#[test]
fn a_stray_control_connection_does_not_fail_a_good_job() {
    // The launcher opens a connection to gsmrun that says nothing and outlives the launcher.
    let fake = FakeLauncher::new(
        "stray-connection",
        "exec 3<>\"/dev/tcp/${GSM_CONTROL%:*}/${GSM_CONTROL##*:}\"\n\
         sleep 30 </dev/null >/dev/null 2>&1 &\n\
         echo $! >> \"$GSM_TEST_DIR/pids\"\n\
         exec 3>&-",
    );
    let (code, err) = fake.run(&["-np", "1", "true"], Duration::from_secs(10));
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_rank_whose_wrapper_dies_without_a_report_ends_the_job() {
    let fake = FakeLauncher::new("wrapper-dies", "");
    fails_fast_saying(
        &fake,
        &[
            "-np",
            "2",
            "--oversubscribe",
            "sh",
            "-c",
            "echo $$ >> \"$GSM_TEST_DIR/pids\"; \
             if [ \"$GSM_RANK\" = 0 ]; then kill -9 $PPID; fi; exec sleep 30",
        ],
        &["rank 0 on host", "its wrapper ended without a report"],
    );
}

/// Runs `fake` with `args` and asserts that gsmrun ends within 5 s with a failing status and a
/// message containing every one of `says`.
#[track_caller]
fn fails_fast_saying(fake: &FakeLauncher, args: &[&str], says: &[&str]) {
    let start = Instant::now();
    let (code, err) = fake.run(args, Duration::from_secs(10));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "gsmrun took {:?}: {err}",
        start.elapsed()
    );
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {err}");
    assert!(says.iter().all(|s| err.contains(s)), "{err}");
}

#[test]
fn an_unreadable_exit_report_ends_the_job() {
    // The launcher itself plays rank 0's wrapper: a valid hello, then an exit report that does
    // not decode, then it stays.
    let fake = FakeLauncher::new(
        "bad-report",
        "exec 3<>\"/dev/tcp/${GSM_CONTROL%:*}/${GSM_CONTROL##*:}\"\n\
         len=$(printf %02x $(( ${#GSM_CONTROL_KEY} + 4 )))\n\
         printf \"H\\x$len\\x00\\x00\\x00%s\\x000\\x00h\" \"$GSM_CONTROL_KEY\" >&3\n\
         printf 'X\\x03\\x00\\x00\\x00bad' >&3\n\
         exec sleep 30",
    );
    fails_fast_saying(
        &fake,
        &["-np", "1", "true"],
        &["rank 0 on host h", "cannot read"],
    );
}

#[test]
fn a_launcher_failing_before_the_ranks_start_exits_1_listing_likely_causes() {
    // What Open MPI's mpirun does for a host whose name does not resolve.
    let fake = FakeLauncher::new(
        "launcher-fails",
        "echo 'ssh: Could not resolve hostname nosuchhost.invalid' >&2\nexit 255",
    );
    let (code, err) = fake.run(
        &["-np", "2", "--oversubscribe", "true"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(1), "{err}");
    for says in [
        "ssh: Could not resolve hostname",
        "mpirun exited with status 255 before 2 of 2 ranks reported (no rank started)",
        "a host that cannot be reached or whose name does not resolve",
        &format!("no gsmrun at {BIN} on some host"),
    ] {
        assert!(err.contains(says), "lacks {says:?}: {err}");
    }
}

#[test]
fn a_launcher_killed_from_outside_leaves_no_session_dir() {
    let fake = FakeLauncher::new(
        "launcher-killed",
        "d=\"$TMPDIR/ompi.$(uname -n).$(id -u)/pid.$$\"\n\
         mkdir -p \"$d\" && touch \"$d/contact.txt\"\n\
         echo \"$d\" > \"$GSM_TEST_DIR/session\"\n\
         kill -9 $$",
    );
    let (code, err) = fake.run(&["-np", "1", "true"], Duration::from_secs(10));
    // A failure of the launcher itself, not of a rank killed by SIGKILL (137).
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("mpirun was killed by signal 9 (SIGKILL)"),
        "{err}"
    );
    let session = std::fs::read_to_string(fake.dir.0.join("session")).unwrap();
    let session = std::path::Path::new(session.trim());
    assert!(!session.exists(), "{} left behind", session.display());
    let left: Vec<_> = std::fs::read_dir(&fake.dir.0)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("gsmrun."))
        .collect();
    assert!(left.is_empty(), "{left:?} left behind");
}

/// Sets `path`'s modification time `secs` seconds into the past.
fn backdate(path: &std::path::Path, secs: u64) {
    let then = std::time::SystemTime::now() - Duration::from_secs(secs);
    std::fs::File::open(path)
        .and_then(|f| f.set_modified(then))
        .unwrap_or_else(|e| panic!("backdate {}: {e}", path.display()));
}

#[test]
fn what_a_sigkilled_gsmrun_left_is_removed_by_the_next_one() {
    let fake = FakeLauncher::new("killed-gsmrun", "");
    let job_file = fake.dir.0.join("job");
    let mut first = fake.spawn(&[
        "-np",
        "1",
        "sh",
        "-c",
        "echo $$ >> \"$GSM_TEST_DIR/pids\"; echo $GSM_JOB_ID > \"$GSM_TEST_DIR/job\"; \
         exec sleep 30",
    ]);
    let deadline = Instant::now() + Duration::from_secs(10);
    let job = loop {
        let text = std::fs::read_to_string(&job_file).unwrap_or_default();
        if text.ends_with('\n') {
            break text.trim().to_string();
        }
        if Instant::now() >= deadline {
            let _ = first.kill();
            panic!("the rank did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    first.kill().unwrap();
    first.wait().unwrap();
    let dir = fake.dir.0.join(format!("gsmrun.{job}"));
    let shm = std::path::PathBuf::from(format!("/dev/shm/{job}-ompi"));
    // The janitor gsmrun leaves beside the launcher removes the killed job's directories.
    let deadline = Instant::now() + Duration::from_secs(5);
    while (dir.exists() || shm.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let by_janitor = (!dir.exists(), !shm.exists());
    // What a gsmrun killed with its janitor left (a dead job's directories), and look-alikes of
    // live jobs, which must stay: a gsmrun pid that runs (ours), and a free pid whose directory
    // is locked (a gsmrun in another pid namespace).
    let live = fake
        .dir
        .0
        .join(format!("gsmrun.gsm-{}-00000000", std::process::id()));
    std::fs::create_dir(&live).unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    let free_pid = gone.id();
    gone.wait().unwrap();
    let locked = fake.dir.0.join(format!("gsmrun.gsm-{free_pid}-00000001"));
    std::fs::create_dir(&locked).unwrap();
    let dead_job = format!("gsm-{free_pid}-00000002");
    let dead = fake.dir.0.join(format!("gsmrun.{dead_job}"));
    let dead_shm = std::path::PathBuf::from(format!("/dev/shm/{dead_job}-ompi"));
    std::fs::create_dir(&dead).unwrap();
    std::fs::create_dir_all(&dead_shm).unwrap();
    let lock = std::fs::File::open(&locked).unwrap();
    use std::os::unix::io::AsRawFd as _;
    // SAFETY: flock(2) on a descriptor `lock` keeps open.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(rc, 0, "cannot lock {}", locked.display());
    // Dead jobs' directories are removed once older than a few seconds.
    for d in [&dead, &live, &locked] {
        backdate(d, 60);
    }
    let (code, err) = fake.run(&["-np", "1", "true"], Duration::from_secs(10));
    let removed = (!dead.exists(), !dead_shm.exists());
    let kept = (live.exists(), locked.exists());
    let _ = std::fs::remove_dir_all(&shm);
    let _ = std::fs::remove_dir_all(&dead_shm);
    assert_eq!(
        by_janitor,
        (true, true),
        "the janitor left {} or {}",
        dir.display(),
        shm.display()
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        removed,
        (true, true),
        "{} or {} left",
        dead.display(),
        dead_shm.display()
    );
    assert_eq!(kept, (true, true), "a live job's directory was removed");
}

/// gsmrun with `args` inside Slurm job 7 (one node `vm`, 2 tasks), in job step `step` if given,
/// and no other `GSM_*` or `SLURM_*` variable of the tests' environment.
fn in_slurm_job(args: &[&str], step: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("GSM_") || k.starts_with("SLURM_"))
        {
            cmd.env_remove(k);
        }
    }
    cmd.env("SLURM_JOB_ID", "7")
        .env("SLURM_JOB_NODELIST", "vm")
        .env("SLURM_TASKS_PER_NODE", "2")
        .env_remove("PBS_NODEFILE");
    if let Some(s) = step {
        cmd.env("SLURM_STEP_ID", s);
    }
    cmd.args(args).output().expect("run gsmrun")
}

/// gsmrun run inside a Slurm job step (`srun -n1 gsmrun …`) lets its ranks' step share that
/// step's CPUs: without `--overlap`, Slurm held the new step back for ever ("Requested nodes are
/// busy"). The batch script's step is no such step. And `--launcher srun` refuses hosts it
/// cannot honour: they were ignored, while the dry run showed them.
#[test]
fn under_srun_a_step_inside_a_step_overlaps_and_hosts_are_refused() {
    for (step, overlap) in [
        (Some("0"), true),
        (Some("4294967294"), false),
        (None, false),
    ] {
        let out = in_slurm_job(&["--dry-run", "app"], step);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let command = dry_command(&out);
        assert!(command.starts_with("srun "), "{command}");
        assert_eq!(
            command.contains(" --overlap "),
            overlap,
            "step {step:?}: {command}"
        );
    }
    let out = in_slurm_job(
        &["--launcher", "srun", "-H", "a:1,b:1", "--dry-run", "app"],
        None,
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("-H and --hostfile cannot choose them"),
        "{}",
        stderr_of(&out)
    );
}

/// `--launcher srun` outside an allocation warns that the placement shown is not where srun
/// puts the ranks (it showed this machine's, silently).
#[test]
fn srun_outside_an_allocation_warns_of_its_placement() {
    let out = gsmrun(
        &["--launcher", "srun", "-np", "1", "--dry-run", "app"],
        "openmpi",
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("--launcher srun outside a Slurm allocation"),
        "{}",
        stderr_of(&out)
    );
    // Inside an allocation it has nothing to say.
    let inside = in_slurm_job(&["--launcher", "srun", "--dry-run", "app"], None);
    assert_eq!(inside.status.code(), Some(0), "{}", stderr_of(&inside));
    assert!(!stderr_of(&inside).contains("outside a Slurm allocation"));
}
