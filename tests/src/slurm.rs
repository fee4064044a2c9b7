//! A single-node Slurm cluster owned by the test: munged, slurmctld and slurmd, with every socket,
//! key, state, spool and log file in a scratch directory of its own.
//!
//! [`Slurm::start`] copies (or makes) a munge key, starts `munged` on a private socket, writes a
//! `slurm.conf` whose only node is this machine (`hostname`, 127.0.0.1, 2 CPUs) on ports chosen
//! free for this run, starts `slurmctld -D` and `slurmd -D`, and waits (bounded) until `sinfo`
//! shows the node idle. Client commands must see the cluster through [`Slurm::env`]
//! (`SLURM_CONF`), which [`Slurm::command`] sets. On drop, running jobs are cancelled and the
//! daemons are stopped by PID (slurmd, slurmctld, munged, in that order); daemons left by a killed
//! earlier run are found through the pid files in its scratch directory and stopped first.
//!
//! If slurm-wlm or munge is not installed, [`Slurm::start`] fails with a message saying to run
//! `make test`: the tests must not skip silently. This module does not make a multi-node cluster.

use crate::error::{TestbedError, command, require};
use crate::scratch::{RunId, Scratch, leftovers};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// A running single-node Slurm.
#[derive(Debug)]
pub struct Slurm {
    dir: Scratch,
    conf: PathBuf,
    /// The node's name (this machine's host name).
    pub node: String,
    daemons: Vec<(String, Child)>,
}

const DAEMON_PIDS: &str = "daemons.pids";

fn hostname() -> Result<String, TestbedError> {
    Ok(command("hostname", &[])?.trim().to_string())
}

fn free_port() -> Result<u16, TestbedError> {
    let listener =
        std::net::TcpListener::bind("127.0.0.1:0").map_err(|source| TestbedError::Io {
            what: "finding a free port".into(),
            source,
        })?;
    listener
        .local_addr()
        .map(|addr| addr.port())
        .map_err(|source| TestbedError::Io {
            what: "finding a free port".into(),
            source,
        })
}

/// Stops the daemons of Slurm test beds whose test process is gone.
pub fn remove_leftovers() {
    for dir in leftovers("slurm") {
        let pids = std::fs::read_to_string(dir.join(DAEMON_PIDS)).unwrap_or_default();
        let marker = dir.to_string_lossy().into_owned();
        for pid in pids
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // Only a process whose command line names that directory is one of its daemons.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(&marker) {
                // The command-line check makes sure it is a daemon of that dead run.
                crate::sys::kill(pid, crate::sys::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

impl Slurm {
    /// Starts munged, slurmctld and slurmd, and waits until the node is idle.
    pub fn start() -> Result<Self, TestbedError> {
        for tool in [
            "munged",
            "slurmctld",
            "slurmd",
            "sinfo",
            "salloc",
            "sbatch",
            "squeue",
            "scancel",
            "scontrol",
        ] {
            require(tool, "the Slurm tests run a single-node cluster")?;
        }
        remove_leftovers();
        let id = RunId::next();
        let dir = Scratch::new("slurm", id);
        let d = dir.path().to_path_buf();
        for sub in ["munge", "state", "spool", "log", "tmp"] {
            std::fs::create_dir_all(d.join(sub)).map_err(|source| TestbedError::Io {
                what: format!("creating {sub}/"),
                source,
            })?;
        }
        let node = hostname()?;
        let mut bed = Self {
            conf: d.join("slurm.conf"),
            dir,
            node,
            daemons: Vec::new(),
        };

        // munge: a private key (mode 0400) and socket.
        let key = d.join("munge/munge.key");
        let key_bytes = std::fs::read("/etc/munge/munge.key").or_else(|_| {
            let mut bytes = vec![0u8; 1024];
            std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
            Ok::<_, std::io::Error>(bytes)
        });
        let key_bytes = key_bytes.map_err(|source| TestbedError::Io {
            what: "making a munge key".into(),
            source,
        })?;
        std::fs::write(&key, key_bytes)
            .and_then(|()| {
                std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o400))
            })
            .map_err(|source| TestbedError::Io {
                what: "writing the munge key".into(),
                source,
            })?;
        let socket = d.join("munge/munge.sock");
        let m = |name: &str| format!("{}", d.join("munge").join(name).display());
        bed.daemon(
            "munged",
            Command::new(crate::bins::which("munged").expect("checked above")).args([
                "-F".to_string(),
                "--force".into(),
                format!("--socket={}", socket.display()),
                format!("--key-file={}", key.display()),
                format!("--pid-file={}", m("munged.pid")),
                format!("--log-file={}", m("munged.log")),
                format!("--seed-file={}", m("munged.seed")),
            ]),
        )?;
        bed.wait_until("munged's socket exists", Duration::from_secs(10), || {
            socket.exists()
        })?;

        let (ctld_port, slurmd_port) = (free_port()?, free_port()?);
        let srun_base = 40000 + (id.pid % 200) * 100;
        let conf = format!(
            "# generated by gsm-tests (tests/src/slurm.rs) for one test run\n\
             ClusterName=gsmt{pid}x{n}\n\
             SlurmctldHost={node}(127.0.0.1)\n\
             SlurmUser=root\nSlurmdUser=root\n\
             AuthType=auth/munge\nCredType=cred/munge\n\
             AuthInfo=socket={socket}\n\
             CommunicationParameters=NoInAddrAny\n\
             SlurmctldPort={ctld_port}\nSlurmdPort={slurmd_port}\n\
             SrunPortRange={srun_base}-{srun_end}\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nTmpFS={d}/tmp\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/log/slurmctld.log\nSlurmdLogFile={d}/log/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             SchedulerType=sched/backfill\nMpiDefault=none\nReturnToService=2\n\
             AccountingStorageType=accounting_storage/none\nJobAcctGatherType=jobacct_gather/none\n\
             JobCompType=jobcomp/none\nMailProg=/bin/true\n\
             NodeName={node} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            pid = id.pid,
            n = id.n,
            node = bed.node,
            socket = socket.display(),
            srun_end = srun_base + 99,
            d = d.display(),
        );
        std::fs::write(&bed.conf, conf).map_err(|source| TestbedError::Io {
            what: "writing slurm.conf".into(),
            source,
        })?;
        let conf_path = bed.conf.display().to_string();
        bed.daemon(
            "slurmctld",
            Command::new(crate::bins::which("slurmctld").expect("checked above"))
                .args(["-D", "-c", "-f", &conf_path]),
        )?;
        bed.daemon(
            "slurmd",
            Command::new(crate::bins::which("slurmd").expect("checked above"))
                .args(["-D", "-f", &conf_path]),
        )?;
        let sinfo = bed.clone_command("sinfo");
        bed.wait_until(
            "the node shows `idle` in sinfo",
            Duration::from_secs(40),
            || {
                let mut cmd = Command::new(&sinfo);
                cmd.args(["-h", "-o", "%t"]).env("SLURM_CONF", &conf_path);
                let done = crate::process::run(&mut cmd, Duration::from_secs(5));
                done.status.success() && done.stdout.trim() == "idle"
            },
        )?;
        Ok(bed)
    }

    fn clone_command(&self, tool: &str) -> PathBuf {
        crate::bins::which(tool).unwrap_or_else(|| tool.into())
    }

    /// A test bed shared by the tests of one process that run at the same time; it is stopped when
    /// the last of them drops its handle.
    pub fn shared() -> Arc<Self> {
        static SHARED: Mutex<Weak<Slurm>> = Mutex::new(Weak::new());
        let mut slot = SHARED.lock().unwrap_or_else(|poison| poison.into_inner());
        if let Some(bed) = slot.upgrade() {
            return bed;
        }
        let bed = Arc::new(Self::start().unwrap_or_else(|err| panic!("{err}")));
        *slot = Arc::downgrade(&bed);
        bed
    }

    fn daemon(&mut self, name: &str, cmd: &mut Command) -> Result<(), TestbedError> {
        let log = self.dir.join(&format!("log/{name}.stdout"));
        let out = std::fs::File::create(&log).map_err(|source| TestbedError::Io {
            what: format!("creating {}", log.display()),
            source,
        })?;
        let err = out.try_clone().map_err(|source| TestbedError::Io {
            what: "duplicating a log file".into(),
            source,
        })?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| TestbedError::Io {
                what: format!("starting {name}"),
                source,
            })?;
        self.daemons.push((name.to_string(), child));
        let pids: String = self
            .daemons
            .iter()
            .map(|(_, c)| format!("{}\n", c.id()))
            .collect();
        std::fs::write(self.dir.join(DAEMON_PIDS), pids).map_err(|source| TestbedError::Io {
            what: "recording daemon pids".into(),
            source,
        })
    }

    fn wait_until(
        &mut self,
        what: &str,
        limit: Duration,
        ready: impl Fn() -> bool,
    ) -> Result<(), TestbedError> {
        let deadline = Instant::now() + limit;
        loop {
            if ready() {
                return Ok(());
            }
            for (name, child) in &mut self.daemons {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(TestbedError::Command {
                        command: name.clone(),
                        detail: format!(
                            "exited with {status} while waiting until {what}; see {}",
                            self.dir.join("log").display()
                        ),
                    });
                }
            }
            if Instant::now() >= deadline {
                return Err(TestbedError::Timeout {
                    what: what.into(),
                    limit,
                    hint: format!("see the logs in {}", self.dir.join("log").display()),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The generated `slurm.conf`.
    pub fn conf(&self) -> &Path {
        &self.conf
    }

    /// The scratch directory (logs are in `log/`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The environment a Slurm client command needs to reach this cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("SLURM_CONF".into(), self.conf.display().to_string())]
    }

    /// A client command (`salloc`, `sbatch`, `squeue`, …) aimed at this cluster.
    pub fn command(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.clone_command(tool));
        cmd.envs(self.env());
        cmd
    }
}

impl Drop for Slurm {
    fn drop(&mut self) {
        // Cancel what is still queued or running so no slurmstepd outlives the cluster.
        let conf = self.conf.display().to_string();
        if self.daemons.len() == 3 {
            let mut cancel = self.command("scancel");
            cancel.args(["--user", "root"]).env("SLURM_CONF", &conf);
            let _ = crate::process::run(&mut cancel, Duration::from_secs(5));
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                let mut queue = self.command("squeue");
                queue.args(["-h", "-o", "%i"]);
                let done = crate::process::run(&mut queue, Duration::from_secs(5));
                if !done.status.success() || done.stdout.trim().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        for (_, mut child) in self.daemons.drain(..).rev() {
            // The child is ours and unreaped.
            crate::sys::kill(child.id() as i32, crate::sys::SIGTERM);
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
