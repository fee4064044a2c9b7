//! Per-run scratch directories under `/tmp/gsm-tests/`, named so that concurrent and leftover runs
//! never collide, and so that a later run can recognise and clean up after a killed one.
//!
//! A name is `<kind>-<pid>-<n>`: the test process's pid and a per-process counter. [`RunId`] is
//! that identity; [`Scratch`] is a directory that is removed on drop unless the test is panicking
//! (its logs are then kept, and the path printed). This module does not stop processes.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// Where every scratch directory of these tests lives.
pub const ROOT: &str = "/tmp/gsm-tests";

/// The identity of one test-bed instance: the test process's pid and a counter within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunId {
    /// The test process.
    pub pid: u32,
    /// Which instance within that process.
    pub n: u32,
}

impl RunId {
    /// A fresh identity for this process.
    pub fn next() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        Self {
            pid: std::process::id(),
            n: COUNTER.fetch_add(1, Ordering::Relaxed),
        }
    }
}

/// Whether the process that owned a run is gone (so its leftovers may be removed).
pub fn owner_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

/// A directory `/tmp/gsm-tests/<kind>-<pid>-<n>`.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Creates the directory (mode 0700).
    ///
    /// # Panics
    /// If it cannot be created.
    pub fn new(kind: &str, id: RunId) -> Self {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::create_dir_all(ROOT).expect("creating /tmp/gsm-tests");
        let path = Path::new(ROOT).join(format!("{kind}-{}-{}", id.pid, id.n));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap_or_else(|err| panic!("creating {}: {err}", path.display()));
        Self { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `contents` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, contents)
            .unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
        path
    }

    /// [`write`](Self::write), made executable (a script: a fake launcher or launch agent).
    pub fn write_executable(&self, name: &str, contents: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, contents);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|err| panic!("chmod {}: {err}", path.display()));
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("gsm-tests: keeping {} for inspection", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Scratch directories of `kind` whose owning test process is gone: `(path, pid)`.
pub fn leftovers(kind: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(ROOT) else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let rest = name.strip_prefix(kind)?.strip_prefix('-')?;
            let pid: u32 = rest.split('-').next()?.parse().ok()?;
            owner_gone(pid).then(|| entry.path())
        })
        .collect()
}
