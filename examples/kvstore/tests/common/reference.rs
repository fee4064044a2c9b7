//! The reference: a `redis-server` (7.0) started by a test on a free loopback port, without
//! persistence, killed when dropped.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

use gsm_tests::process::{Running, spawn};

pub struct Redis {
    pub addr: String,
    job: Option<Running>,
}

/// A free loopback port (taken from the system, then let go).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Redis {
    /// Starts `redis-server` with `extra` arguments, under `ulimit -n` of `open_files` when
    /// given (by the shell, as a user would).
    pub fn start(extra: &[&str], open_files: Option<u32>) -> Self {
        let port = free_port();
        let mut args = vec![
            "redis-server".to_string(),
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            "''".into(),
            "--appendonly".into(),
            "no".into(),
        ];
        args.extend(extra.iter().map(|a| a.to_string()));
        let limit = open_files.map_or(String::new(), |n| format!("ulimit -n {n} && "));
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(format!("{limit}exec {}", args.join(" ")));
        let mut job = spawn(&mut cmd);
        assert!(
            job.wait_for_stdout(super::START, |l| l
                .iter()
                .any(|l| l.text.contains("Ready to accept"))),
            "redis-server (scripts/install-deps installs it) did not start"
        );
        Self {
            addr: format!("127.0.0.1:{port}"),
            job: Some(job),
        }
    }

    pub fn pid(&self) -> i32 {
        self.job.as_ref().expect("running").pid()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(job) = self.job.take() {
            job.signal(libc::SIGKILL);
            drop(job.wait(super::LIMIT));
        }
    }
}

/// A request as RESP (a multibulk of `args`).
pub fn request(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn read_line(s: &mut impl Read, out: &mut Vec<u8>) -> Option<String> {
    let from = out.len();
    let mut b = [0u8; 1];
    while !out.ends_with(b"\r\n") || out.len() - from < 2 {
        if s.read(&mut b).ok()? == 0 {
            return None;
        }
        out.push(b[0]);
    }
    Some(String::from_utf8_lossy(&out[from + 1..out.len() - 2]).into_owned())
}

fn read_one(s: &mut impl Read, out: &mut Vec<u8>) -> Option<()> {
    let kind = {
        let from = out.len();
        let line = read_line(s, out)?;
        (out[from], line)
    };
    match kind {
        (b'$', n) => {
            if let Ok(n) = n.parse::<usize>() {
                let mut body = vec![0u8; n + 2];
                s.read_exact(&mut body).ok()?;
                out.extend_from_slice(&body);
            }
        }
        (b'*', n) => {
            for _ in 0..n.parse::<i64>().unwrap_or(0).max(0) {
                read_one(s, out)?;
            }
        }
        _ => {}
    }
    Some(())
}

/// Reads exactly one RESP2 reply as its bytes (what came before the close, if it closed).
pub fn reply(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut r = std::io::BufReader::with_capacity(1, s);
    let _ = read_one(&mut r, &mut out);
    out
}

/// Sends one request and reads its reply.
pub fn call(s: &mut TcpStream, args: &[&[u8]]) -> Vec<u8> {
    s.write_all(&request(args)).expect("sends");
    reply(s)
}

/// A connection with a generous read timeout.
pub fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connects");
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Sends every command of `script` (words split on spaces) to both servers, one at a time, and
/// checks that the replies are the same bytes; `what` names the script in a failure.
pub fn same_replies(ours: &mut TcpStream, theirs: &mut TcpStream, script: &[&str], what: &str) {
    for line in script {
        let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        let want = call(theirs, &args);
        let got = call(ours, &args);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{what}: `{line}`"
        );
    }
}
