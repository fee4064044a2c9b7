//! The rank wrapper on its own: personality, its control protocol, the reports of a program that
//! cannot start, and no orphans.

use crate::common::{BIN, TempDir, alive, kill9};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
