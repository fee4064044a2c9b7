//! What every theme uses: running gsmrun with a clean environment, reading its dry run, a
//! private directory, and checking on and killing processes.

use std::process::Command;

pub const BIN: &str = env!("CARGO_BIN_EXE_gsmrun");

pub fn gsmrun(args: &[&str], flavour: &str) -> std::process::Output {
    gsmrun_with(args, flavour, &[])
}

/// [`gsmrun`] with `env` set, and no other `GSM_*` variable of the tests' environment (gsmrun
/// passes them all on, so they would change the command lines the tests expect).
pub fn gsmrun_with(args: &[&str], flavour: &str, env: &[(&str, &str)]) -> std::process::Output {
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
pub fn dry_command(out: &std::process::Output) -> String {
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

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A private directory under the temporary directory, removed when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("gsmrun-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create test dir");
        TempDir(dir)
    }

    pub fn write(&self, name: &str, bytes: &[u8]) -> String {
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

/// Whether `pid` runs (a zombie left to a parent that does not reap it counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

pub fn kill9(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}
