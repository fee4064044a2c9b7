//! Fate sharing through a fake `mpirun`: a rank or launcher that fails ends the job quickly and
//! says why, and nothing a killed gsmrun leaves stays behind.

use crate::common::{BIN, TempDir, alive, kill9};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

/// A host whose name does not resolve is refused in gsmrun's own line before the launcher runs
/// (the fake launcher would print its ssh line and exit 255); after a launch, the same name is
/// named by the supervisor's report (`supervise/tests.rs`).
#[test]
fn a_host_whose_name_does_not_resolve_is_refused_before_launching() {
    let fake = FakeLauncher::new(
        "unresolved-host",
        "echo 'ssh: Could not resolve hostname nosuchhost.invalid' >&2\nexit 255",
    );
    let start = Instant::now();
    let (code, err) = fake.run(
        &["-H", "localhost:1,nosuchhost.invalid:1", "-np", "2", "true"],
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.trim_end().lines().count() == 1
            && err.contains("host nosuchhost.invalid (-H/--host) does not resolve")
            && !err.contains("ssh:"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(5), "{err}");
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
