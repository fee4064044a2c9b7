//! The rank wrapper: `gsmrun --rank-wrapper [--keep-aslr] -- PROGRAM ARGS…`, the process the
//! launcher starts on every rank (hidden from `--help`). An argument made of colons only comes
//! with one colon more than the program gets (see [`crate::launch::colons_escaped`]).
//!
//! It turns address-space randomisation off (`personality(ADDR_NO_RANDOMIZE)`, other personality
//! flags kept) unless `--keep-aslr`, connects to `gsmrun` at `GSM_CONTROL`, starts the program as
//! its child with the per-rank `GSM_*` variables, forwards the program's stdout/stderr and the
//! stages of its job (a socket named in `GSM_STATE_FD`, see [`crate::progress`]) over the control
//! connection, and reports how the program ended. It ends the program (SIGTERM, then
//! SIGKILL after a grace period) when `gsmrun` says `KILL`, when the control connection disappears
//! (so no rank outlives `gsmrun`), or when the wrapper itself gets SIGTERM/SIGINT/SIGHUP/SIGQUIT.
//! It passes SIGUSR1 and SIGUSR2 on to the program's process group, whether `gsmrun` sends them
//! (a `SIGNAL` frame) or they reach the wrapper itself.
//!
//! After the program has exited, in whatever way, the wrapper ends what it left running in its
//! process group (SIGTERM, SIGKILL after `LEFT_OVER_GRACE`), as Slurm ends a step's processes,
//! and removes its rank's shared-memory segment `/dev/shm/{GSM_JOB_ID}-r{rank}` if the program
//! left it (see [`crate::segments`]). A process that left the group (`setsid`) is not followed.
//!
//! After a failure report the wrapper stays alive until `gsmrun` answers, so that the MPI launcher
//! does not start its own (slower, noisier) teardown; `gsmrun` then ends the launcher. An exit 0
//! after the runtime gave MPI up (its run failed) counts as such a failure here, as it does in
//! `gsmrun` ([`crate::progress`]): Open MPI's `mpirun` would otherwise kill the other ranks and
//! print its page on a process "exiting improperly" before `gsmrun` could say what happened.
//! Without `GSM_CONTROL` (run by hand), the wrapper only sets the personality and `exec`s the
//! program.

use crate::env;
use crate::launch::colons_restored;
use crate::supervise::{Outcome, wire};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd as _;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A reader that notes whether `byte` ever passed through it (a stage of the rank's job).
struct Watch<R> {
    inner: R,
    byte: u8,
    seen: Arc<AtomicBool>,
}

impl<R: Read> Read for Watch<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if buf[..n].contains(&self.byte) {
            self.seen.store(true, Ordering::SeqCst);
        }
        Ok(n)
    }
}

/// This task's index among its step's tasks on its node, and how many there are, under `srun`:
/// `SLURM_LOCALID`, and this node's entry (`SLURM_NODEID`) of `SLURM_STEP_TASKS_PER_NODE`
/// (`2(x3),1`). (`SLURM_NTASKS_PER_NODE`, read before, is set only when the user asked
/// `--ntasks-per-node`, and then counts the allocation's tasks, not the step's: ranks went
/// without `GSM_LOCAL_*`, and so each ran a worker per CPU of the node.)
fn slurm_local(var: &dyn Fn(&str) -> Option<String>) -> Option<(u32, u32)> {
    let local: u32 = var("SLURM_LOCALID")?.trim().parse().ok()?;
    let node: usize = var("SLURM_NODEID")?.trim().parse().ok()?;
    let per_node =
        crate::hosts::slurm::parse_tasks_per_node(&var("SLURM_STEP_TASKS_PER_NODE")?).ok()?;
    let size = *per_node.get(node)?;
    (local < size).then_some((local, size))
}

/// How long what the program left running after it exited has, after SIGTERM, to end and close
/// the program's output before SIGKILL and the report.
const LEFT_OVER_GRACE: Duration = Duration::from_secs(2);

/// Waits until child `pid` has exited, without reaping it; `false` if that cannot be learnt
/// (then the caller reaps it without ending its process group).
fn wait_exited(pid: i32) -> bool {
    loop {
        // SAFETY: a zeroed siginfo_t is a valid out-parameter for waitid(2).
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(2) on our own child, writing only `info`; WNOWAIT leaves it unreaped.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 {
            return true;
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// The interpreter named by the `#!` line of `program` when exec(2) failed with ENOENT although
/// the script exists: the kernel then reports the missing interpreter as a missing program.
fn missing_interpreter(program: &OsString, e: &std::io::Error) -> Option<String> {
    if e.kind() != std::io::ErrorKind::NotFound {
        return None;
    }
    let path = if program.as_encoded_bytes().contains(&b'/') {
        std::path::PathBuf::from(program)
    } else {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(program))
            .find(|p| p.is_file())?
    };
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let line = head[..n]
        .strip_prefix(b"#!")?
        .split(|&b| b == b'\n')
        .next()?;
    let text = String::from_utf8_lossy(line);
    Some(text.split_whitespace().next()?.to_string())
}

/// Time between SIGTERM and SIGKILL of the program.
const GRACE: Duration = Duration::from_millis(1000);
/// Longest wait for gsmrun's answer after a failure report.
const ANSWER_WAIT: Duration = Duration::from_secs(30);

fn fail(msg: &str) -> i32 {
    eprintln!("gsmrun --rank-wrapper: {msg}");
    1
}

/// Turn off address-space randomisation for this process and its future children.
fn disable_aslr() -> std::io::Result<()> {
    // SAFETY: personality(0xffffffff) only queries the current persona.
    let current = unsafe { libc::personality(0xffff_ffff) };
    if current == -1 {
        return Err(std::io::Error::last_os_error());
    }
    let wanted = (current as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong;
    // SAFETY: setting a persona flag for this process has no memory-safety effect.
    if unsafe { libc::personality(wanted) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A connected pair of Unix stream sockets, both close-on-exec: the wrapper's end, and the
/// program's end with its inode.
fn stage_channel() -> std::io::Result<(UnixStream, (UnixStream, u64))> {
    let (ours, theirs) = UnixStream::pair()?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes one `stat` into the buffer for a descriptor we own.
    if unsafe { libc::fstat(theirs.as_raw_fd(), st.as_mut_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it filled the buffer.
    let inode = unsafe { st.assume_init() }.st_ino;
    Ok((ours, (theirs, inode)))
}

/// This rank's number, from whichever launcher started us.
fn rank_from_env() -> Option<String> {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "PMI_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok().filter(|s| !s.is_empty()))
}

/// Run the wrapper with the arguments after `--rank-wrapper`; returns the wrapper's exit status.
pub fn main(args: Vec<OsString>) -> i32 {
    let mut keep_aslr = false;
    let mut it = args.into_iter();
    let mut program = None;
    for a in it.by_ref() {
        match a.to_str() {
            Some("--keep-aslr") => keep_aslr = true,
            Some("--") => {
                program = it.next().map(colons_restored);
                break;
            }
            _ => return fail(&format!("unexpected argument {a:?}")),
        }
    }
    let Some(program) = program else {
        return fail("no program after `--`");
    };
    let prog_args: Vec<OsString> = it.map(colons_restored).collect();

    if !keep_aslr {
        if let Err(e) = disable_aslr() {
            return fail(&format!("cannot turn off address-space randomisation: {e}"));
        }
    }
    let mut cmd = Command::new(&program);
    cmd.args(&prog_args);

    let Ok(control) = std::env::var(env::job::CONTROL) else {
        let e = cmd.exec();
        return fail(&format!("cannot run {program:?}: {e}"));
    };
    let key = std::env::var(env::job::CONTROL_KEY).unwrap_or_default();
    let rank = rank_from_env();
    let host = crate::hostname();

    let stream = match control
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| std::io::Error::other("not an address"))
        .and_then(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(10)))
    {
        Ok(s) => s,
        Err(e) => {
            return fail(&format!(
                "cannot reach gsmrun at {control}: {e}; the program was not started"
            ));
        }
    };
    let _ = stream.set_nodelay(true);
    let Ok(mut reader) = stream.try_clone() else {
        return fail("cannot clone the control socket");
    };
    let writer = Arc::new(Mutex::new(stream));
    let send = |tag: u8, payload: &[u8]| {
        let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
        wire::write_frame(&mut *w, tag, payload)
    };
    let rank_text = rank.clone().unwrap_or_default();
    let hello = format!("{key}\0{rank_text}\0{host}");
    if let Err(e) = send(wire::HELLO, hello.as_bytes()) {
        return fail(&format!("cannot talk to gsmrun at {control}: {e}"));
    }

    // Per-rank variables.
    cmd.env_remove(env::job::CONTROL)
        .env_remove(env::job::CONTROL_KEY);
    if let Some(r) = &rank {
        cmd.env(env::rank::RANK, r);
        let located = match (
            std::env::var(env::job::HOSTS),
            std::env::var(env::job::RANK_HOSTS),
            r.parse::<usize>(),
        ) {
            (Ok(h), Ok(rh), Ok(r)) => env::rank_location(&h, &rh, r),
            _ => None,
        };
        match located {
            Some((addr, local_rank, local_size)) => {
                cmd.env(env::rank::HOST_ADDR, addr)
                    .env(env::rank::LOCAL_RANK, local_rank.to_string())
                    .env(env::rank::LOCAL_SIZE, local_size.to_string());
            }
            None => {
                cmd.env(env::rank::HOST_ADDR, &host);
                let var = |k: &str| std::env::var(k).ok();
                if let Some((l, n)) = slurm_local(&var) {
                    cmd.env(env::rank::LOCAL_RANK, l.to_string())
                        .env(env::rank::LOCAL_SIZE, n.to_string());
                }
            }
        }
    }
    // The stage channel (see `crate::progress`): the program's end is inherited across its exec
    // and named with its inode, so the runtime never writes to a descriptor it merely inherited.
    let (stages, program_end) = match stage_channel() {
        Ok(pair) => pair,
        Err(e) => return fail(&format!("cannot create the rank's stage channel: {e}")),
    };
    let program_fd = program_end.0.as_raw_fd();
    cmd.env(
        env::rank::STATE_FD,
        format!("{program_fd}:{}", program_end.1),
    );
    // The program leads its own process group so that ending it also ends what it started.
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // Outside the launcher's process group, nothing ends the program when the wrapper is
    // SIGKILLed (by the launcher or the OOM killer) unless the kernel does: the parent-death
    // signal. It fires when the thread that forked ends; that is this main thread, which lives
    // as long as the wrapper.
    // SAFETY: getpid has no preconditions.
    let wrapper_pid = unsafe { libc::getpid() };
    let parent_death = move || {
        // SAFETY: fcntl(F_SETFD) only clears the close-on-exec flag of the stage channel's end in
        // this (forked) process; it is async-signal-safe.
        if unsafe { libc::fcntl(program_fd, libc::F_SETFD, 0) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this (forked) process; it is
        // async-signal-safe, as this code between fork and exec must be.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } == -1 {
            return Err(std::io::Error::last_os_error());
        }
        // The wrapper may have died before the flag was set, and then no signal comes.
        // SAFETY: getppid and _exit are async-signal-safe and have no preconditions.
        if unsafe { libc::getppid() } != wrapper_pid {
            // SAFETY: as above.
            unsafe { libc::_exit(1) };
        }
        Ok(())
    };
    // SAFETY: `parent_death` only makes async-signal-safe calls and touches no memory shared
    // with the parent, as a pre_exec closure must.
    unsafe { cmd.pre_exec(parent_death) };

    // Control messages and signals both end the program; `told` says gsmrun has answered.
    // `requested` says someone asked to end it: one asking before the program has a pid stored is
    // acted on just after the spawn (the request is stored before the pid is read, and the pid
    // before the request is read, so under SeqCst at least one side sees the other).
    let told = Arc::new(AtomicBool::new(false));
    let requested = Arc::new(AtomicBool::new(false));
    let child_pid = Arc::new(AtomicI32::new(0));
    let child_done = Arc::new(AtomicBool::new(false));
    let (answer_tx, answer_rx) = mpsc::channel::<()>();
    let end_program = {
        let child_pid = child_pid.clone();
        let child_done = child_done.clone();
        let requested = requested.clone();
        move || {
            requested.store(true, Ordering::SeqCst);
            let pid = child_pid.load(Ordering::SeqCst);
            if pid <= 0 || child_done.load(Ordering::SeqCst) {
                return;
            }
            // SAFETY: kill(2) on our own child's process group (the child leads it and has not
            // been reaped: child_done is false), so its own children end too.
            unsafe { libc::kill(-pid, libc::SIGTERM) };
            let (pid, done) = (pid, child_done.clone());
            std::thread::spawn(move || {
                std::thread::sleep(GRACE);
                if !done.load(Ordering::SeqCst) {
                    // SAFETY: as above; the child has not been reaped.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                }
            });
        }
    };
    // A signal of `supervise::FORWARDED` for the program's process group, from gsmrun or sent to
    // the wrapper itself (by a batch system that signals every process of the job, say).
    let pass_on = {
        let child_pid = child_pid.clone();
        let child_done = child_done.clone();
        move |sig: i32| {
            let pid = child_pid.load(Ordering::SeqCst);
            if crate::supervise::FORWARDED.contains(&sig)
                && pid > 0
                && !child_done.load(Ordering::SeqCst)
            {
                // SAFETY: kill(2) on our own child's process group, not reaped (as above).
                unsafe { libc::kill(-pid, sig) };
            }
        }
    };
    {
        let told = told.clone();
        let end_program = end_program.clone();
        let pass_on = pass_on.clone();
        std::thread::spawn(move || {
            // A SIGNAL is passed on; any KILL, end of stream or error means: end the program.
            while let Ok(Some((wire::SIGNAL, payload))) = wire::read_frame(&mut reader) {
                if let Ok(n) = <[u8; 4]>::try_from(payload.as_slice()) {
                    pass_on(u32::from_le_bytes(n) as i32);
                }
            }
            told.store(true, Ordering::SeqCst);
            end_program();
            let _ = answer_tx.send(());
            // Keep reading so a later EOF is noticed by nobody; nothing else to do.
            let mut sink = [0u8; 64];
            while matches!(reader.read(&mut sink), Ok(n) if n > 0) {}
        });
    }
    if let Ok(mut signals) = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGUSR1,
        signal_hook::consts::SIGUSR2,
    ]) {
        let end_program = end_program.clone();
        std::thread::spawn(move || {
            for sig in signals.forever() {
                if crate::supervise::FORWARDED.contains(&sig) {
                    pass_on(sig);
                } else {
                    end_program();
                }
            }
        });
    }

    if let Ok(job) = std::env::var(env::job::JOB_ID) {
        crate::segments::prepare_mpi_dir(&job);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            // exec(2) fails on a directory with EACCES, which reads as a permission problem. A
            // name with a `/` is a path, not looked up in PATH.
            let is_path = program.as_encoded_bytes().contains(&b'/');
            let why = if is_path && std::path::Path::new(&program).is_dir() {
                format!("{program:?} is a directory, not a program")
            } else if let Some(interpreter) = missing_interpreter(&program, &e) {
                format!(
                    "{program:?}: its interpreter {interpreter:?} (its #! line) was not found; \
                     the script itself exists"
                )
            } else if !is_path
                && e.kind() == std::io::ErrorKind::NotFound
                && std::path::Path::new(&program).is_file()
            {
                // `mpirun` also looks in the working directory; a shell, and this wrapper, run
                // only what PATH or the path given names, so that a file left in the directory
                // cannot stand in for a command. The user is told how to name it.
                let shown = program.to_string_lossy();
                format!(
                    "{program:?} is not in PATH; there is a file of that name in the working \
                     directory: to run it, write ./{shown}"
                )
            } else {
                format!("{program:?}: {e}")
            };
            let _ = send(wire::EXIT, Outcome::NoStart(why).encode().as_bytes());
            let _ = answer_rx.recv_timeout(ANSWER_WAIT);
            let _ = send(wire::ENDED, b"");
            return 127;
        }
    };
    child_pid.store(child.id() as i32, Ordering::SeqCst);
    if requested.load(Ordering::SeqCst) {
        end_program();
    }
    // Only the program holds its end now: the channel reaches end of stream when it exits.
    drop(program_end);
    let pump = |pipe: Option<Box<dyn Read + Send>>, tag: u8| {
        let writer = writer.clone();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Some(mut pipe) = pipe {
                let mut buf = vec![0u8; 32 * 1024];
                while let Ok(n) = pipe.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut w = writer.lock().unwrap_or_else(|p| p.into_inner());
                    if wire::write_frame(&mut *w, tag, &buf[..n]).is_err() {
                        break;
                    }
                }
            }
            let _ = done_tx.send(());
        });
        done_rx
    };
    let out_done = pump(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        wire::STDOUT,
    );
    let err_done = pump(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        wire::STDERR,
    );
    let abandoned = Arc::new(AtomicBool::new(false));
    let stages = Watch {
        inner: stages,
        byte: crate::progress::stage::ABANDONED,
        seen: abandoned.clone(),
    };
    let stages_done = pump(Some(Box::new(stages) as Box<dyn Read + Send>), wire::STATE);
    // The program has exited, but stays unreaped while what it left in its process group (a
    // `sleep 100 &`, say) is ended: until it is reaped its pid cannot name another process, so
    // the group's id stays its own. Left running, such a process kept the output pipes and the
    // stage channel open (the report waited 2 s for each) and outlived the job.
    let pid = child.id() as i32;
    let exited = wait_exited(pid);
    let left_over = Instant::now();
    if exited {
        // SAFETY: kill(2) on the process group our unreaped child leads (ESRCH if empty).
        unsafe { libc::kill(-pid, libc::SIGTERM) };
    }
    // Output still in the pipes belongs before the report; a process that ignores SIGTERM and
    // holds them must not keep us here for long.
    let until = left_over + LEFT_OVER_GRACE;
    let _ = out_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    let _ = err_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    // The stages come before the report, which gsmrun judges by them.
    let _ = stages_done.recv_timeout(until.saturating_duration_since(Instant::now()));
    if exited {
        // SAFETY: as above; the child is still unreaped.
        unsafe { libc::kill(-pid, libc::SIGKILL) };
    }
    let status = child.wait();
    child_done.store(true, Ordering::SeqCst);
    // However the program ended, its shared-memory segment must not outlive it (a rank that
    // died before its runtime unlinked it leaves one; see `segments`).
    if let (Ok(job), Some(r)) = (
        std::env::var(env::job::JOB_ID),
        rank.as_deref().and_then(|r| r.parse::<u32>().ok()),
    ) {
        crate::segments::remove_rank_segment(&job, r);
    }
    let outcome = match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(c), _) => Outcome::Exited(c),
            (_, Some(sig)) => Outcome::Signaled(sig),
            _ => Outcome::Exited(1),
        },
        Err(e) => Outcome::NoStart(format!("waiting for the program failed: {e}")),
    };
    let code = outcome.exit_code();
    let _ = send(wire::EXIT, outcome.encode().as_bytes());
    if told.load(Ordering::SeqCst) {
        // gsmrun ended us; it owns the job's status.
        let _ = send(wire::ENDED, b"");
        let _ = writer.lock().map(|w| w.shutdown(std::net::Shutdown::Write));
        return 0;
    }
    if !outcome.failed() && !abandoned.load(Ordering::SeqCst) {
        return 0;
    }
    // A failure: wait for gsmrun's answer (KILL or its end) before exiting.
    let _ = answer_rx.recv_timeout(ANSWER_WAIT);
    let _ = send(wire::ENDED, b"");
    let _ = std::io::stderr().flush();
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slurm_task_finds_its_place_on_its_node() {
        fn env<'a>(pairs: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        }
        let step = [
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "3"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
        ];
        assert_eq!(slurm_local(&env(&step[..2])), None, "no step layout");
        let first = [
            ("SLURM_LOCALID", "0"),
            ("SLURM_NODEID", "3"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
        ];
        assert_eq!(slurm_local(&env(&first)), Some((0, 1)));
        let second = [
            ("SLURM_LOCALID", "1"),
            ("SLURM_NODEID", "2"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x3),1"),
        ];
        assert_eq!(slurm_local(&env(&second)), Some((1, 2)));
        // Inconsistent values are no place at all.
        assert_eq!(slurm_local(&env(&step)), None);
    }
}
