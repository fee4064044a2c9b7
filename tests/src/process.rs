//! Running a command under a hard time limit, and making sure nothing it started outlives the test.
//!
//! [`spawn`] starts a command in a process group of its own, with stdin closed and stdout/stderr
//! collected line by line (each line stamped with the time it arrived); [`Running::wait`] waits for
//! it with a hard timeout, killing the whole process group when the time is up. [`run`] is both in
//! one call. [`PidGuard`] remembers processes a job reported (for example the PIDs that
//! `gsm-hello` prints) and kills the ones still alive when it is dropped, even if the test panics.
//!
//! This module does not interpret output, and it does not follow processes that leave the process
//! group (MPI daemons started through a launch agent do): the guard covers those by PID.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sys;

/// One line of output and when it arrived, measured from the start of the command.
#[derive(Debug, Clone)]
pub struct Line {
    /// Time since the command was spawned.
    pub at: Duration,
    /// The line without its newline.
    pub text: String,
}

type Lines = Arc<Mutex<Vec<Line>>>;

/// A command that has finished (or was killed at its time limit).
#[derive(Debug)]
pub struct Finished {
    /// The command, for messages.
    pub command: String,
    /// How it ended.
    pub status: ExitStatus,
    /// Whether it was killed because the time limit passed.
    pub timed_out: bool,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// Stdout line by line, with arrival times.
    pub stdout_lines: Vec<Line>,
    /// Stderr line by line, with arrival times.
    pub stderr_lines: Vec<Line>,
    /// From spawn to exit.
    pub elapsed: Duration,
}

impl Finished {
    /// The exit code, or `None` if the process died of a signal.
    pub fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// The exit code as a shell reports it: the code, or 128 + the signal number.
    pub fn shell_code(&self) -> i32 {
        match (self.status.code(), self.status.signal()) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => -1,
        }
    }

    /// A report for assertion messages: the command, how it ended, its stdout and stderr.
    pub fn report(&self) -> String {
        format!(
            "command: {}\nended: {:?}{} after {:.3} s\n--- stdout ---\n{}--- stderr ---\n{}---",
            self.command,
            self.status,
            if self.timed_out {
                " (KILLED at the test's time limit)"
            } else {
                ""
            },
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr,
        )
    }
}

/// A command started by [`spawn`], still owned by the test.
#[derive(Debug)]
pub struct Running {
    command: String,
    child: Option<Child>,
    start: Instant,
    stdout: Lines,
    stderr: Lines,
    readers: Vec<JoinHandle<()>>,
}

fn describe(command: &Command) -> String {
    let mut text = command.get_program().to_string_lossy().into_owned();
    for arg in command.get_args() {
        text.push(' ');
        text.push_str(&arg.to_string_lossy());
    }
    text
}

fn collect(stream: impl Read + Send + 'static, start: Instant, into: Lines) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if buf.last() == Some(&b'\n') {
                        buf.pop();
                    }
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    into.lock().unwrap().push(Line {
                        at: start.elapsed(),
                        text,
                    });
                }
            }
        }
    })
}

fn join_lines(lines: &Lines) -> String {
    lines
        .lock()
        .unwrap()
        .iter()
        .map(|line| format!("{}\n", line.text))
        .collect()
}

/// Starts `command` in a new process group, stdin closed, stdout and stderr collected.
///
/// # Panics
/// If the program cannot be started.
pub fn spawn(command: &mut Command) -> Running {
    // What /dev/shm held before this process's first job is not blamed on its tests.
    crate::shm::baseline();
    let description = describe(command);
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = command
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start `{description}`: {err}"));
    let stdout: Lines = Arc::default();
    let stderr: Lines = Arc::default();
    let readers = vec![
        collect(
            child.stdout.take().expect("stdout is piped"),
            start,
            stdout.clone(),
        ),
        collect(
            child.stderr.take().expect("stderr is piped"),
            start,
            stderr.clone(),
        ),
    ];
    Running {
        command: description,
        child: Some(child),
        start,
        stdout,
        stderr,
        readers,
    }
}

/// Runs `command` to the end, killing its process group if it takes longer than `limit`.
pub fn run(command: &mut Command, limit: Duration) -> Finished {
    spawn(command).wait(limit)
}

impl Running {
    /// The process id (also its process group id).
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |child| child.id() as i32)
    }

    /// Time since the command was spawned.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// Sends `signal` to the process itself (not its group), as a user's `kill` would.
    pub fn signal(&self, signal: i32) {
        // The pid is our own child, which has not been reaped yet (we hold `child`), so it
        // cannot have been reused.
        sys::kill(self.pid(), signal);
    }

    /// The stdout lines collected so far.
    pub fn stdout_lines(&self) -> Vec<Line> {
        self.stdout.lock().unwrap().clone()
    }

    /// The stderr lines collected so far.
    pub fn stderr_lines(&self) -> Vec<Line> {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits, up to `limit`, until the stdout lines collected so far satisfy `ready`.
    /// Returns whether they did; returns early (false) if the process exits first.
    pub fn wait_for_stdout(&mut self, limit: Duration, ready: impl Fn(&[Line]) -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if ready(&self.stdout.lock().unwrap()) {
                return true;
            }
            let exited = self
                .child
                .as_mut()
                .is_none_or(|child| matches!(child.try_wait(), Ok(Some(_))));
            if exited {
                std::thread::sleep(Duration::from_millis(50));
                return ready(&self.stdout.lock().unwrap());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    fn kill_group(&self) {
        // As in `signal`; a negative pid addresses the process group we created.
        sys::kill(-self.pid(), sys::SIGKILL);
    }

    /// Waits for the command to end, killing its process group if `limit` passes first.
    pub fn wait(mut self, limit: Duration) -> Finished {
        let deadline = self.start + limit;
        let mut child = self
            .child
            .take()
            .expect("a Running owns its child until waited");
        let mut timed_out = false;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    timed_out = true;
                    // See `signal`; the child is not reaped yet.
                    sys::kill(-(child.id() as i32), sys::SIGKILL);
                    break child.wait().expect("waiting for a killed child");
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(err) => panic!("waiting for `{}`: {err}", self.command),
            }
        };
        let elapsed = self.start.elapsed();
        // Whatever is left in the group (a launcher's children that outlived it) goes too, so the
        // pipes close; readers get a bounded grace in case something outside the group holds them.
        // The group id is the reaped child's pid; after reaping, the id can only name our group
        // while a member is alive, so this cannot reach an unrelated group.
        sys::kill(-(child.id() as i32), sys::SIGKILL);
        let grace = Instant::now() + Duration::from_secs(2);
        for reader in std::mem::take(&mut self.readers) {
            while !reader.is_finished() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(5));
            }
            if reader.is_finished() {
                let _ = reader.join();
            }
        }
        Finished {
            command: self.command.clone(),
            status,
            timed_out,
            stdout: join_lines(&self.stdout),
            stderr: join_lines(&self.stderr),
            stdout_lines: self.stdout.lock().unwrap().clone(),
            stderr_lines: self.stderr.lock().unwrap().clone(),
            elapsed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            self.kill_group();
            // See `signal`.
            sys::kill(child.id() as i32, sys::SIGKILL);
            let _ = child.wait();
        }
    }
}

/// Whether process `pid` is alive (not a zombie) and its command name is `name`.
pub fn alive_as(pid: u32, name: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state …`; comm may contain spaces and parentheses, so split at the last ')'.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let comm = &stat[open + 1..close];
    let state = stat[close + 1..].trim_start().chars().next().unwrap_or('?');
    // The kernel truncates comm to 15 bytes.
    let wanted = &name[..name.len().min(15)];
    comm == wanted && state != 'Z' && state != 'X'
}

/// Kills, on drop, every recorded process that is still alive under its recorded name.
///
/// Record the PIDs a job reports (ranks print theirs) so a failing test cannot leave them running.
/// The name check keeps a recycled PID of an unrelated process safe.
#[derive(Debug, Default)]
pub struct PidGuard {
    pids: Mutex<Vec<(u32, String)>>,
}

impl PidGuard {
    /// An empty guard.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `pid`, expected to run the program called `name`.
    pub fn watch(&self, pid: u32, name: &str) {
        self.pids.lock().unwrap().push((pid, name.to_string()));
    }

    /// The recorded processes still alive, after waiting up to `grace` for them to go.
    pub fn survivors(&self, grace: Duration) -> Vec<u32> {
        let deadline = Instant::now() + grace;
        loop {
            let alive: Vec<u32> = self
                .pids
                .lock()
                .unwrap()
                .iter()
                .filter(|(pid, name)| alive_as(*pid, name))
                .map(|(pid, _)| *pid)
                .collect();
            if alive.is_empty() || Instant::now() >= deadline {
                return alive;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for PidGuard {
    fn drop(&mut self) {
        for (pid, name) in self.pids.lock().unwrap().iter() {
            if alive_as(*pid, name) {
                // The name check above makes a recycled PID unlikely to be hit.
                sys::kill(*pid as i32, sys::SIGKILL);
            }
        }
    }
}
